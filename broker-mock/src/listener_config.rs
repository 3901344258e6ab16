//! [`ListenerConfig`]: one named listener of a node (Kafka's `listeners`,
//! `advertised.listeners` and `listener.security.protocol.map` entries), and the
//! checks that a node's listeners fit together.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use crate::error::BrokerError;
use crate::security::ListenerSecurity;

/// Longest listener name accepted (Kafka names are short upper-case words such as
/// `PLAINTEXT` or `INTERNAL`).
pub const MAX_LISTENER_NAME: usize = 64;

/// One listener of a node beyond its first (whose settings are
/// [`BrokerConfig::listen`](crate::BrokerConfig::listen),
/// [`BrokerConfig::security`](crate::BrokerConfig::security) and the advertised
/// fields). `Debug` prints user names, never passwords or keys.
#[derive(Debug, Clone)]
pub struct ListenerConfig {
    /// The listener's name (`PLAINTEXT`, `SASL_SSL`, `INTERNAL`, ...); Metadata
    /// answers a request with the endpoints of the listener it arrived on.
    pub name: String,
    /// Address to listen on; port 0 picks a free port (see
    /// [`BrokerHandle::listener_addr`](crate::BrokerHandle::listener_addr)).
    pub listen: SocketAddr,
    /// Host name clients of this listener are told to connect to; `None` uses the
    /// listen IP.
    pub advertised_host: Option<String>,
    /// Port clients of this listener are told to connect to; `None` uses the bound
    /// port.
    pub advertised_port: Option<u16>,
    /// The listener's security protocol, SASL mechanisms and users, TLS settings.
    pub security: ListenerSecurity,
}

impl ListenerConfig {
    /// A listener named `name` on `127.0.0.1:0` with `security`.
    pub fn new(name: impl Into<String>, security: ListenerSecurity) -> ListenerConfig {
        ListenerConfig {
            name: name.into(),
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            advertised_host: None,
            advertised_port: None,
            security,
        }
    }

    /// Sets the listen address.
    pub fn with_listen(mut self, addr: SocketAddr) -> ListenerConfig {
        self.listen = addr;
        self
    }

    /// Sets the advertised host.
    pub fn with_advertised_host(mut self, host: impl Into<String>) -> ListenerConfig {
        self.advertised_host = Some(host.into());
        self
    }

    /// Sets the advertised port.
    pub fn with_advertised_port(mut self, port: u16) -> ListenerConfig {
        self.advertised_port = Some(port);
        self
    }
}

/// Checks a node's listener names: each one non-empty, at most
/// [`MAX_LISTENER_NAME`] bytes of ASCII letters, digits, `_` and `-`, and no two
/// equal ignoring case (Kafka upper-cases listener names).
pub(crate) fn check_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<(), BrokerError> {
    let mut seen: Vec<String> = Vec::new();
    for name in names {
        let valid = !name.is_empty()
            && name.len() <= MAX_LISTENER_NAME
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            return Err(BrokerError::Config(format!(
                "invalid listener name {name:?}: 1 to {MAX_LISTENER_NAME} ASCII letters, digits, '_' or '-'"
            )));
        }
        let upper = name.to_ascii_uppercase();
        if seen.contains(&upper) {
            return Err(BrokerError::Config(format!(
                "listener name {name} is used twice"
            )));
        }
        seen.push(upper);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(check_names(["PLAINTEXT", "SASL_SSL", "internal-1"]).is_ok());
        assert!(check_names(["PLAINTEXT", "plaintext"]).is_err());
        assert!(check_names([""]).is_err());
        assert!(check_names(["A B"]).is_err());
        let long = "X".repeat(MAX_LISTENER_NAME + 1);
        assert!(check_names([long.as_str()]).is_err());
    }
}
