//! The values of `listeners`, `advertised.listeners` and
//! `listener.security.protocol.map`: `NAME://host:port` lists and `NAME:PROTOCOL`
//! pairs.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use crate::security::SecurityProtocol;

/// One `NAME://host:port` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    /// The listener name, upper-cased (Kafka's names are case-insensitive).
    pub name: String,
    /// The host as written; empty for "every interface".
    pub host: String,
    pub port: u16,
}

impl Endpoint {
    /// The address to bind: an IP literal, `localhost` (127.0.0.1) or an empty
    /// host (every IPv4 interface, as Kafka binds `PLAINTEXT://:9092`). Host names
    /// are not resolved.
    pub(crate) fn bind_addr(&self) -> Result<SocketAddr, String> {
        let ip = match self.host.as_str() {
            "" => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            "localhost" => IpAddr::V4(Ipv4Addr::LOCALHOST),
            h => h.parse::<IpAddr>().map_err(|_| {
                format!(
                    "listener {}: host {h:?} is not an IP address (this broker binds IP literals, localhost or an empty host)",
                    self.name
                )
            })?,
        };
        Ok(SocketAddr::new(ip, self.port))
    }
}

/// Parses a comma-separated `NAME://host:port` list (blank entries skipped).
pub(crate) fn endpoints(value: &str) -> Result<Vec<Endpoint>, String> {
    let mut out: Vec<Endpoint> = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, rest) = entry
            .split_once("://")
            .ok_or_else(|| format!("{entry:?} is not NAME://HOST:PORT"))?;
        if name.is_empty() {
            return Err(format!("{entry:?} has no listener name"));
        }
        let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
            let (host, after) = v6
                .split_once(']')
                .ok_or_else(|| format!("{entry:?}: unclosed '['"))?;
            let port = after
                .strip_prefix(':')
                .ok_or_else(|| format!("{entry:?}: no port"))?;
            (host, port)
        } else {
            rest.rsplit_once(':')
                .ok_or_else(|| format!("{entry:?}: no port"))?
        };
        let port = port
            .parse::<u16>()
            .map_err(|_| format!("{entry:?}: port {port:?} is not a number in 0..=65535"))?;
        let name = name.to_ascii_uppercase();
        if out.iter().any(|e| e.name == name) {
            return Err(format!("listener {name} is listed twice"));
        }
        out.push(Endpoint {
            name,
            host: host.to_owned(),
            port,
        });
    }
    Ok(out)
}

/// A security protocol by Kafka's name (case-insensitive).
pub(crate) fn protocol(name: &str) -> Result<SecurityProtocol, String> {
    let all = [
        SecurityProtocol::Plaintext,
        SecurityProtocol::Ssl,
        SecurityProtocol::SaslPlaintext,
        SecurityProtocol::SaslSsl,
    ];
    all.into_iter()
        .find(|p| p.name().eq_ignore_ascii_case(name.trim()))
        .ok_or_else(|| {
            format!("unknown security protocol {name:?} (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)")
        })
}

/// Parses `NAME:PROTOCOL,...`.
pub(crate) fn protocol_map(value: &str) -> Result<Vec<(String, SecurityProtocol)>, String> {
    let mut out: Vec<(String, SecurityProtocol)> = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, proto) = entry
            .split_once(':')
            .ok_or_else(|| format!("{entry:?} is not NAME:PROTOCOL"))?;
        let name = name.trim().to_ascii_uppercase();
        if out.iter().any(|(n, _)| *n == name) {
            return Err(format!("listener {name} is mapped twice"));
        }
        out.push((name, protocol(proto)?));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_lists() {
        let got =
            endpoints("PLAINTEXT://127.0.0.1:9092, sasl_ssl://[::1]:0,INTERNAL://:9094").unwrap();
        assert_eq!(got[0].name, "PLAINTEXT");
        assert_eq!(
            got[0].bind_addr().unwrap(),
            "127.0.0.1:9092".parse().unwrap()
        );
        assert_eq!(got[1].name, "SASL_SSL");
        assert_eq!(got[1].bind_addr().unwrap(), "[::1]:0".parse().unwrap());
        assert_eq!(got[2].bind_addr().unwrap(), "0.0.0.0:9094".parse().unwrap());
        for bad in [
            "PLAINTEXT//x:1",
            "://h:1",
            "A://h",
            "A://h:99999",
            "A://[::1:1",
            "A://h:1,a://h:2",
        ] {
            assert!(endpoints(bad).is_err(), "{bad}");
        }
        let named = endpoints("A://kafka.example:9092").unwrap();
        assert!(named[0].bind_addr().unwrap_err().contains("not an IP"));
    }

    #[test]
    fn protocol_maps() {
        let got = protocol_map("INTERNAL:SSL,external:sasl_ssl").unwrap();
        assert_eq!(
            got,
            [
                ("INTERNAL".to_owned(), SecurityProtocol::Ssl),
                ("EXTERNAL".to_owned(), SecurityProtocol::SaslSsl)
            ]
        );
        assert!(protocol_map("A:KERBEROS").is_err());
        assert!(protocol_map("A").is_err());
        assert!(protocol_map("A:SSL,a:SSL").is_err());
    }
}
