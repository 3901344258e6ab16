//! The principal of a client authenticated by a TLS certificate on an `SSL`
//! listener: `User:` and the certificate's subject distinguished name in RFC 2253
//! form, as Kafka's default principal builder names it (Java's
//! `X500Principal.getName()`): the RDNs last to first, separated by `,`; the
//! values of a multi-valued RDN joined by `+`; the RFC 2253 keywords (CN, C, L,
//! ST, O, OU, STREET, DC, UID) and other attributes as a dotted OID with the
//! value's DER in hex (`1.2.840.113549.1.9.1=#16...`); special characters escaped.

use std::fmt::Write;

use x509_parser::prelude::{FromDer, X509Certificate};
use x509_parser::x509::AttributeTypeAndValue;

/// The RFC 2253 keywords, by OID.
const KEYWORDS: [(&str, &str); 9] = [
    ("2.5.4.3", "CN"),
    ("2.5.4.6", "C"),
    ("2.5.4.7", "L"),
    ("2.5.4.8", "ST"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("2.5.4.9", "STREET"),
    ("0.9.2342.19200300.100.1.25", "DC"),
    ("0.9.2342.19200300.100.1.1", "UID"),
];

/// `User:<subject DN>` of the DER certificate `der`, or `None` if it does not
/// parse (the caller keeps the connection anonymous).
pub(crate) fn certificate_principal(der: &[u8]) -> Option<String> {
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    let mut rdns: Vec<String> = Vec::new();
    for rdn in cert.subject().iter() {
        let avas: Vec<String> = rdn.iter().map(attribute).collect();
        rdns.push(avas.join("+"));
    }
    rdns.reverse();
    Some(format!("User:{}", rdns.join(",")))
}

fn attribute(ava: &AttributeTypeAndValue<'_>) -> String {
    let oid = ava.attr_type().to_id_string();
    let keyword = KEYWORDS.iter().find(|(o, _)| *o == oid).map(|(_, k)| *k);
    match (keyword, ava.as_str()) {
        (Some(k), Ok(value)) => format!("{k}={}", escape(value)),
        (k, _) => format!("{}=#{}", k.unwrap_or(&oid), hex_der(ava)),
    }
}

/// RFC 2253 escaping: `,=+<>;"\` everywhere, `#` first, spaces first and last.
fn escape(value: &str) -> String {
    let chars: Vec<char> = value.chars().collect();
    let mut out = String::with_capacity(value.len());
    for (i, &c) in chars.iter().enumerate() {
        let special = matches!(c, ',' | '=' | '+' | '<' | '>' | ';' | '"' | '\\')
            || (c == '#' && i == 0)
            || (c == ' ' && (i == 0 || i == chars.len() - 1));
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The value's DER encoding (tag, length, content) in lower-case hex.
fn hex_der(ava: &AttributeTypeAndValue<'_>) -> String {
    let value = ava.attr_value();
    let data = value.data;
    let mut der = vec![value.tag().0 as u8];
    match data.len() {
        n if n < 0x80 => der.push(n as u8),
        n => {
            let bytes: Vec<u8> = (n as u64)
                .to_be_bytes()
                .into_iter()
                .skip_while(|b| *b == 0)
                .collect();
            der.push(0x80 | bytes.len() as u8);
            der.extend(bytes);
        }
    }
    der.extend_from_slice(data);
    der.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType, KeyPair};

    fn cert_with(dn: &[(DnType, &str)]) -> Vec<u8> {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        for (t, v) in dn {
            params.distinguished_name.push(t.clone(), *v);
        }
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn subjects_read_last_rdn_first() {
        let der = cert_with(&[
            (DnType::CountryName, "DE"),
            (DnType::OrganizationName, "Baton"),
            (DnType::CommonName, "app"),
        ]);
        assert_eq!(
            certificate_principal(&der).as_deref(),
            Some("User:CN=app,O=Baton,C=DE")
        );
    }

    #[test]
    fn special_characters_are_escaped() {
        let der = cert_with(&[
            (DnType::OrganizationName, "Baton, Inc."),
            (DnType::CommonName, "#a+b "),
        ]);
        assert_eq!(
            certificate_principal(&der).as_deref(),
            Some("User:CN=\\#a\\+b\\ ,O=Baton\\, Inc.")
        );
    }

    #[test]
    fn garbage_is_no_principal() {
        assert_eq!(certificate_principal(b"not a certificate"), None);
    }
}
