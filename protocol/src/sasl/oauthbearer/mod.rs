//! `OAUTHBEARER` (RFC 7628) as Kafka uses it (KIP-255): one client message
//! carrying a bearer token, and an error flow when the broker refuses it.
//!
//! - The client's initial response is a GS2 header, then `\x01`-separated
//!   key/value pairs: `n,,\x01auth=Bearer <token>\x01[key=value\x01...]\x01`
//!   ([`client_initial_response`], parsed by [`InitialResponse::parse`]). The
//!   pairs other than `auth` are SASL extensions (KIP-342).
//! - The broker validates the token. If it accepts it, the exchange is over. If
//!   not, it answers with a JSON challenge (`{"status":"invalid_token"}`,
//!   [`TokenRejection::challenge`]), the client replies with a single `\x01`, and
//!   the broker then fails the exchange with that JSON as the message, as Kafka's
//!   `OAuthBearerSaslServer` does.
//! - [`UnsecuredJwsValidator`] is Kafka's default validator (unsecured JWS tokens,
//!   `alg: none`); [`unsecured_jws`] writes such a token, as Kafka's unsecured
//!   login module does.

mod json;
mod jws;

pub use jws::{unsecured_jws, UnsecuredJwsValidator};

use super::SaslError;

/// The separator of the key/value pairs (`kvsep`, Control-A).
pub const SEPARATOR: u8 = 0x01;

/// Longest initial response a broker parses; Kafka's `sasl.server.max.receive.size`
/// default (512 KiB) bounds the whole request the same way.
pub const MAX_INITIAL_RESPONSE: usize = 512 * 1024;

/// Most SASL extensions one initial response may carry.
pub const MAX_EXTENSIONS: usize = 64;

/// A token the broker accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedToken {
    /// The principal the token names (Kafka's `principalName()`, the `sub` claim
    /// of an unsecured JWS by default).
    pub principal: String,
    /// When the token expires, in milliseconds since the Unix epoch (Kafka's
    /// `lifetimeMs()`); bounds the session (KIP-368).
    pub expires_at_ms: i64,
    /// When the token was issued, in milliseconds since the Unix epoch, if it says.
    pub issued_at_ms: Option<i64>,
    /// The token's scope.
    pub scope: Vec<String>,
}

/// Why a broker refused a token: what the client is told (`status`, `scope`), and
/// what is logged (`reason`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRejection {
    /// The RFC 7628 status: `invalid_token`, or `insufficient_scope` when a
    /// required scope is missing.
    pub status: String,
    /// The scope the client lacks, for `insufficient_scope`.
    pub scope: Option<String>,
    /// Why, for the broker's log (never sent to the client, as in Kafka).
    pub reason: String,
}

impl TokenRejection {
    /// An `invalid_token` rejection.
    pub fn invalid(reason: impl Into<String>) -> TokenRejection {
        TokenRejection {
            status: "invalid_token".into(),
            scope: None,
            reason: reason.into(),
        }
    }

    /// An `insufficient_scope` rejection naming the required `scope`.
    pub fn insufficient_scope(
        scope: impl Into<String>,
        reason: impl Into<String>,
    ) -> TokenRejection {
        TokenRejection {
            status: "insufficient_scope".into(),
            scope: Some(scope.into()),
            reason: reason.into(),
        }
    }

    /// The JSON the broker sends as its challenge and then as its error message:
    /// `{"status":"invalid_token"}`, with `"scope"` when there is one.
    pub fn challenge(&self) -> String {
        let mut out = String::from("{\"status\":");
        json::write_string(&mut out, &self.status);
        if let Some(scope) = &self.scope {
            out.push_str(", \"scope\":");
            json::write_string(&mut out, scope);
        }
        out.push('}');
        out
    }
}

impl std::fmt::Display for TokenRejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.status, self.reason)
    }
}

/// The client's initial response for `token`, with no authorization id and the
/// given extensions (names `[A-Za-z]+` other than `auth`, values printable ASCII,
/// space, tab, CR or LF, as RFC 7628 and Kafka require).
pub fn client_initial_response(
    token: &str,
    extensions: &[(String, String)],
) -> Result<Vec<u8>, SaslError> {
    check_token(token)?;
    let mut out = Vec::with_capacity(token.len() + 32);
    out.extend_from_slice(b"n,,");
    out.push(SEPARATOR);
    out.extend_from_slice(b"auth=Bearer ");
    out.extend_from_slice(token.as_bytes());
    out.push(SEPARATOR);
    for (key, value) in extensions {
        check_extension(key, value)?;
        out.extend_from_slice(key.as_bytes());
        out.push(b'=');
        out.extend_from_slice(value.as_bytes());
        out.push(SEPARATOR);
    }
    out.push(SEPARATOR);
    Ok(out)
}

/// A parsed initial response.
#[derive(Debug, PartialEq, Eq)]
pub struct InitialResponse<'a> {
    /// The authorization id (`a=` in the GS2 header), empty when none was given.
    pub authzid: &'a str,
    /// The bearer token.
    pub token: &'a str,
    /// The SASL extensions, in the order sent.
    pub extensions: Vec<(&'a str, &'a str)>,
}

impl<'a> InitialResponse<'a> {
    /// Parses the client's initial response.
    pub fn parse(message: &'a [u8]) -> Result<InitialResponse<'a>, SaslError> {
        const BAD: SaslError = SaslError::Malformed("invalid OAUTHBEARER client first message");
        if message.len() > MAX_INITIAL_RESPONSE {
            return Err(SaslError::Malformed(
                "OAUTHBEARER client first message too long",
            ));
        }
        let text = std::str::from_utf8(message).map_err(|_| BAD)?;
        let rest = text.strip_prefix("n,").ok_or(BAD)?;
        let (authzid, rest) = rest.split_once(',').ok_or(BAD)?;
        let authzid = match authzid {
            "" => "",
            a => {
                let name = a.strip_prefix("a=").ok_or(BAD)?;
                check_saslname(name)?;
                name
            }
        };
        // `\x01` kvpair* `\x01`, each kvpair ending in `\x01`.
        let pairs = rest.strip_prefix('\u{1}').ok_or(BAD)?;
        let pairs = pairs.strip_suffix('\u{1}').ok_or(BAD)?;
        let mut token = None;
        let mut extensions = Vec::new();
        if !pairs.is_empty() {
            let pairs = pairs.strip_suffix('\u{1}').ok_or(BAD)?;
            for pair in pairs.split('\u{1}') {
                let (key, value) = pair.split_once('=').ok_or(BAD)?;
                if key == "auth" {
                    if token.is_some() {
                        return Err(SaslError::Malformed("OAUTHBEARER 'auth' given twice"));
                    }
                    token = Some(bearer_token(value)?);
                } else {
                    check_extension(key, value)?;
                    if extensions.len() == MAX_EXTENSIONS {
                        return Err(SaslError::Malformed("too many OAUTHBEARER extensions"));
                    }
                    extensions.push((key, value));
                }
            }
        }
        let token = token.ok_or(SaslError::Malformed(
            "invalid OAUTHBEARER client first message: 'auth' not specified",
        ))?;
        Ok(InitialResponse {
            authzid,
            token,
            extensions,
        })
    }
}

/// The token of an `auth` value: scheme `Bearer` (any case), spaces, token.
fn bearer_token(auth: &str) -> Result<&str, SaslError> {
    let (scheme, token) = auth.split_once(' ').ok_or(SaslError::Malformed(
        "invalid OAUTHBEARER client first message: invalid 'auth' format",
    ))?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(SaslError::Malformed(
            "invalid scheme in OAUTHBEARER client first message",
        ));
    }
    let token = token.trim_start_matches(' ');
    check_token(token)?;
    Ok(token)
}

/// A token is `[-_.a-zA-Z0-9]+` (Kafka's pattern: base64url parts and dots).
fn check_token(token: &str) -> Result<(), SaslError> {
    if token.is_empty()
        || !token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err(SaslError::Malformed(
            "OAUTHBEARER token is not of the characters [-_.a-zA-Z0-9]",
        ));
    }
    Ok(())
}

fn check_extension(key: &str, value: &str) -> Result<(), SaslError> {
    if key == "auth" {
        return Err(SaslError::Malformed(
            "OAUTHBEARER extension name 'auth' is reserved",
        ));
    }
    if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(SaslError::Malformed(
            "OAUTHBEARER extension name is not [A-Za-z]+",
        ));
    }
    if value.is_empty()
        || !value
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) || matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
    {
        return Err(SaslError::Malformed(
            "OAUTHBEARER extension value has invalid characters",
        ));
    }
    Ok(())
}

/// RFC 5801's saslname: ASCII without `,` or `=` except as `=2C` and `=3D`.
fn check_saslname(name: &str) -> Result<(), SaslError> {
    const BAD: SaslError = SaslError::Malformed("invalid OAUTHBEARER authorization id");
    if name.is_empty() || !name.is_ascii() || name.contains(',') || name.contains('\0') {
        return Err(BAD);
    }
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        let escape = rest.get(at..at + 3).ok_or(BAD)?;
        if escape != "=2C" && escape != "=3D" {
            return Err(BAD);
        }
        rest = &rest[at + 3..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initial_response_is_kafkas_layout() {
        assert_eq!(
            client_initial_response("abc.def.", &[]).unwrap(),
            b"n,,\x01auth=Bearer abc.def.\x01\x01"
        );
        let ext = [("traceId".to_string(), "x y".to_string())];
        let msg = client_initial_response("t", &ext).unwrap();
        assert_eq!(msg, b"n,,\x01auth=Bearer t\x01traceId=x y\x01\x01");
        let parsed = InitialResponse::parse(&msg).unwrap();
        assert_eq!(parsed.token, "t");
        assert_eq!(parsed.authzid, "");
        assert_eq!(parsed.extensions, vec![("traceId", "x y")]);
    }

    #[test]
    fn parse_accepts_an_authzid_and_any_case_scheme() {
        let parsed = InitialResponse::parse(b"n,a=al=2Cice,\x01auth=BEARER   tok\x01\x01").unwrap();
        assert_eq!(parsed.authzid, "al=2Cice");
        assert_eq!(parsed.token, "tok");
    }

    #[test]
    fn malformed_initial_responses_are_typed_errors() {
        for bad in [
            &b""[..],
            b"n,,",
            b"n,,\x01\x01",
            b"y,,\x01auth=Bearer t\x01\x01",
            b"n,,\x01auth=Bearer t\x01",
            b"n,,\x01auth=Basic t\x01\x01",
            b"n,,\x01auth=Bearer t+/\x01\x01",
            b"n,,\x01auth=Bearer \x01\x01",
            b"n,,\x01auth=Bearer t\x01auth=Bearer u\x01\x01",
            b"n,,\x01auth=Bearer t\x01k1=v\x01\x01",
            b"n,,\x01auth=Bearer t\x01k=\x01\x01",
            b"n,,\x01auth=Bearer t\x01novalue\x01\x01",
            b"n,a=x=41,\x01auth=Bearer t\x01\x01",
            b"n,b=x,\x01auth=Bearer t\x01\x01",
            b"n,,\x01auth=Bearer t\x01\x01\xff",
        ] {
            assert!(
                matches!(InitialResponse::parse(bad), Err(SaslError::Malformed(_))),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let many: Vec<_> = (0..=MAX_EXTENSIONS)
            .map(|_| ("k".to_string(), "v".to_string()))
            .collect();
        let msg = client_initial_response("t", &many).unwrap();
        assert!(InitialResponse::parse(&msg).is_err());
    }

    #[test]
    fn clients_cannot_send_bad_extensions_or_tokens() {
        assert!(client_initial_response("t", &[("auth".into(), "x".into())]).is_err());
        assert!(client_initial_response("t", &[("a1".into(), "x".into())]).is_err());
        assert!(client_initial_response("t", &[("a".into(), "\x01".into())]).is_err());
        assert!(client_initial_response("t t", &[]).is_err());
    }

    #[test]
    fn rejection_challenges_are_kafkas_json() {
        assert_eq!(
            TokenRejection::invalid("expired").challenge(),
            r#"{"status":"invalid_token"}"#
        );
        assert_eq!(
            TokenRejection::insufficient_scope("write", "missing").challenge(),
            r#"{"status":"insufficient_scope", "scope":"write"}"#
        );
    }
}
