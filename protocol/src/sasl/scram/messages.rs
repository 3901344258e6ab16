//! The four SCRAM messages (RFC 5802 section 7): parsing and formatting, with
//! saslname escaping (`,` as `=2C`, `=` as `=3D`). Every malformed message is a
//! [`SaslError::Malformed`].

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;

use crate::sasl::SaslError;

/// Longest SCRAM message either side parses; real ones are a few hundred bytes.
pub(super) const MAX_MESSAGE: usize = 4096;

/// Most extension attributes accepted after the known ones.
const MAX_EXTENSIONS: usize = 16;

/// `,` and `=` escaped as RFC 5802 requires for a user name.
pub(super) fn escape_saslname(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

/// The user name of an escaped saslname; any `=` not starting `=2C` or `=3D`, and
/// any raw `,`, is malformed.
pub(super) fn unescape_saslname(name: &str) -> Result<String, SaslError> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find(['=', ',']) {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if tail.starts_with("=2C") {
            out.push(',');
        } else if tail.starts_with("=3D") {
            out.push('=');
        } else {
            return Err(SaslError::Malformed("bad escape in SCRAM user name"));
        }
        rest = &tail[3..];
    }
    out.push_str(rest);
    if out.is_empty() {
        return Err(SaslError::Malformed("empty SCRAM user name"));
    }
    Ok(out)
}

/// The text of a message, bounded and UTF-8.
fn text(message: &[u8]) -> Result<&str, SaslError> {
    if message.len() > MAX_MESSAGE {
        return Err(SaslError::Malformed("SCRAM message too long"));
    }
    std::str::from_utf8(message).map_err(|_| SaslError::Malformed("SCRAM message is not UTF-8"))
}

/// Splits `a=value` attributes; `expected` names the leading attributes in order.
/// Attributes after them (extensions) are checked for form and otherwise ignored.
fn attributes<'a, const N: usize>(
    text: &'a str,
    expected: [char; N],
    what: &'static str,
) -> Result<[&'a str; N], SaslError> {
    let mut values = [""; N];
    let mut extensions = 0;
    for (i, part) in text.split(',').enumerate() {
        if i >= N {
            // Extensions (Kafka's `tokenauth=true`, KIP-48) have longer names.
            match part.split_once('=') {
                Some((name, _))
                    if !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric()) =>
                {
                    extensions += 1;
                }
                _ => return Err(SaslError::Malformed(what)),
            }
            if extensions > MAX_EXTENSIONS {
                return Err(SaslError::Malformed(what));
            }
            continue;
        }
        let mut chars = part.chars();
        match (chars.next(), chars.next()) {
            (Some(name), Some('=')) if name == expected[i] => values[i] = &part[2..],
            _ => return Err(SaslError::Malformed(what)),
        }
    }
    if text.split(',').count() < N {
        return Err(SaslError::Malformed(what));
    }
    Ok(values)
}

/// A nonce is printable ASCII without commas (RFC 5802 `printable`).
fn check_nonce(nonce: &str) -> Result<(), SaslError> {
    if !nonce.is_empty()
        && nonce
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
    {
        Ok(())
    } else {
        Err(SaslError::Malformed("SCRAM nonce is not printable"))
    }
}

fn base64(value: &str, what: &'static str) -> Result<Vec<u8>, SaslError> {
    BASE64.decode(value).map_err(|_| SaslError::Malformed(what))
}

/// `client-first-message`: a GS2 header without channel binding, then the bare part.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct ClientFirst {
    /// The GS2 header as sent (`n,,` or `n,a=...,`), echoed in `c=` later.
    pub gs2_header: String,
    /// The authorization id, if the client gave one.
    pub authzid: Option<String>,
    /// The user name, unescaped.
    pub user: String,
    /// The client's nonce.
    pub nonce: String,
    /// `client-first-message-bare`, part of the AuthMessage.
    pub bare: String,
}

impl ClientFirst {
    pub(super) fn format(user: &str, nonce: &str) -> String {
        format!("n,,n={},r={nonce}", escape_saslname(user))
    }

    pub(super) fn parse(message: &[u8]) -> Result<ClientFirst, SaslError> {
        let text = text(message)?;
        let Some(rest) = text.strip_prefix("n,") else {
            return Err(SaslError::Malformed(
                "SCRAM channel binding is not supported: expected 'n,'",
            ));
        };
        let Some((authz, bare)) = rest.split_once(',') else {
            return Err(SaslError::Malformed(
                "SCRAM client-first message without GS2 header",
            ));
        };
        let authzid = match authz {
            "" => None,
            a => match a.strip_prefix("a=") {
                Some(name) => Some(unescape_saslname(name)?),
                None => return Err(SaslError::Malformed("bad SCRAM authorization id")),
            },
        };
        if bare.starts_with("m=") {
            return Err(SaslError::Malformed(
                "unsupported mandatory SCRAM extension",
            ));
        }
        let [user, nonce] = attributes(bare, ['n', 'r'], "bad SCRAM client-first message")?;
        check_nonce(nonce)?;
        Ok(ClientFirst {
            gs2_header: text[..text.len() - bare.len()].to_owned(),
            authzid,
            user: unescape_saslname(user)?,
            nonce: nonce.to_owned(),
            bare: bare.to_owned(),
        })
    }
}

/// `server-first-message`.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct ServerFirst {
    /// Client nonce followed by the server's part.
    pub nonce: String,
    /// The salt, decoded.
    pub salt: Vec<u8>,
    /// The iteration count.
    pub iterations: u32,
}

impl ServerFirst {
    pub(super) fn format(nonce: &str, salt: &[u8], iterations: u32) -> String {
        format!("r={nonce},s={},i={iterations}", BASE64.encode(salt))
    }

    pub(super) fn parse(message: &[u8]) -> Result<ServerFirst, SaslError> {
        let text = text(message)?;
        if text.starts_with("m=") {
            return Err(SaslError::Malformed(
                "unsupported mandatory SCRAM extension",
            ));
        }
        let [nonce, salt, iterations] =
            attributes(text, ['r', 's', 'i'], "bad SCRAM server-first message")?;
        check_nonce(nonce)?;
        let salt = base64(salt, "SCRAM salt is not base64")?;
        if salt.is_empty() {
            return Err(SaslError::Malformed("empty SCRAM salt"));
        }
        let iterations = iterations
            .parse()
            .map_err(|_| SaslError::Malformed("SCRAM iteration count is not a number"))?;
        Ok(ServerFirst {
            nonce: nonce.to_owned(),
            salt,
            iterations,
        })
    }
}

/// `client-final-message`.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct ClientFinal {
    /// The channel binding attribute, decoded (the GS2 header echoed).
    pub channel_binding: Vec<u8>,
    /// The combined nonce.
    pub nonce: String,
    /// The ClientProof, decoded.
    pub proof: Vec<u8>,
    /// `client-final-message-without-proof`, part of the AuthMessage.
    pub without_proof: String,
}

impl ClientFinal {
    /// `client-final-message-without-proof` for `gs2_header` and `nonce`.
    pub(super) fn without_proof(gs2_header: &str, nonce: &str) -> String {
        format!("c={},r={nonce}", BASE64.encode(gs2_header))
    }

    pub(super) fn format(without_proof: &str, proof: &[u8]) -> String {
        format!("{without_proof},p={}", BASE64.encode(proof))
    }

    pub(super) fn parse(message: &[u8]) -> Result<ClientFinal, SaslError> {
        let text = text(message)?;
        let Some((without_proof, proof)) = text.rsplit_once(",p=") else {
            return Err(SaslError::Malformed(
                "SCRAM client-final message without proof",
            ));
        };
        let [binding, nonce] =
            attributes(without_proof, ['c', 'r'], "bad SCRAM client-final message")?;
        check_nonce(nonce)?;
        Ok(ClientFinal {
            channel_binding: base64(binding, "SCRAM channel binding is not base64")?,
            nonce: nonce.to_owned(),
            proof: base64(proof, "SCRAM proof is not base64")?,
            without_proof: without_proof.to_owned(),
        })
    }
}

/// `server-final-message`: the server's signature, or an error.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum ServerFinal {
    /// `v=`: the ServerSignature, decoded.
    Verifier(Vec<u8>),
    /// `e=`: the server's error value.
    Error(String),
}

impl ServerFinal {
    pub(super) fn format_verifier(signature: &[u8]) -> String {
        format!("v={}", BASE64.encode(signature))
    }

    pub(super) fn parse(message: &[u8]) -> Result<ServerFinal, SaslError> {
        let text = text(message)?;
        let first = text.split(',').next().unwrap_or("");
        if let Some(error) = first.strip_prefix("e=") {
            Ok(ServerFinal::Error(error.to_owned()))
        } else if let Some(v) = first.strip_prefix("v=") {
            Ok(ServerFinal::Verifier(base64(
                v,
                "SCRAM server signature is not base64",
            )?))
        } else {
            Err(SaslError::Malformed("bad SCRAM server-final message"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saslnames_escape_and_unescape() {
        assert_eq!(escape_saslname("a,b=c"), "a=2Cb=3Dc");
        assert_eq!(unescape_saslname("a=2Cb=3Dc").unwrap(), "a,b=c");
        assert_eq!(unescape_saslname("=3D=3D").unwrap(), "==");
        for bad in ["a=2", "a=", "a=41", "a,b", ""] {
            assert!(unescape_saslname(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn client_first_parses_authzid_and_extensions() {
        let m = ClientFirst::parse(b"n,a=bob,n=bob,r=xyz,tokenauth=true").unwrap();
        assert_eq!(m.gs2_header, "n,a=bob,");
        assert_eq!(m.authzid.as_deref(), Some("bob"));
        assert_eq!((m.user.as_str(), m.nonce.as_str()), ("bob", "xyz"));
        assert_eq!(m.bare, "n=bob,r=xyz,tokenauth=true");
    }

    #[test]
    fn malformed_messages_are_typed_errors() {
        let client_first: &[&[u8]] = &[
            b"",
            b"y,,n=u,r=a",
            b"p=tls-unique,,n=u,r=a",
            b"n,,",
            b"n,,r=a,n=u",
            b"n,,n=u",
            b"n,,n=u,r=",
            b"n,,n=u,r=a b",
            b"n,,m=x,n=u,r=a",
            b"n,x,n=u,r=a",
            b"n,,n=u=,r=a",
            b"n,,\xff",
        ];
        for m in client_first {
            assert!(
                matches!(ClientFirst::parse(m), Err(SaslError::Malformed(_))),
                "{m:?}"
            );
        }
        let server_first: &[&[u8]] = &[
            b"",
            b"r=a,s=QUJD",
            b"r=a,s=!!,i=4096",
            b"r=a,s=,i=4096",
            b"r=a,s=QUJD,i=x",
            b"r=a,s=QUJD,i=-1",
            b"s=QUJD,r=a,i=4096",
            b"m=x,r=a,s=QUJD,i=4096",
        ];
        for m in server_first {
            assert!(
                matches!(ServerFirst::parse(m), Err(SaslError::Malformed(_))),
                "{m:?}"
            );
        }
        for m in [
            &b"c=biws,r=a"[..],
            b"c=biws,r=a,p=!!",
            b"c=!!,r=a,p=AAAA",
            b"r=a,c=biws,p=AAAA",
        ] {
            assert!(
                matches!(ClientFinal::parse(m), Err(SaslError::Malformed(_))),
                "{m:?}"
            );
        }
        for m in [&b""[..], b"x=1", b"v=!!"] {
            assert!(
                matches!(ServerFinal::parse(m), Err(SaslError::Malformed(_))),
                "{m:?}"
            );
        }
        let long = vec![b'a'; MAX_MESSAGE + 1];
        assert!(ClientFirst::parse(&long).is_err());
    }

    #[test]
    fn server_final_error_attribute() {
        assert_eq!(
            ServerFinal::parse(b"e=invalid-proof").unwrap(),
            ServerFinal::Error("invalid-proof".into())
        );
    }
}
