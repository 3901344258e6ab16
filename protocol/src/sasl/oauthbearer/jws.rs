//! Unsecured JWS tokens (RFC 7515 with `"alg":"none"`, RFC 7519 claims), as
//! Kafka's default OAUTHBEARER validator (`OAuthBearerUnsecuredValidatorCallbackHandler`)
//! accepts them: `base64url(header).base64url(claims).` with an empty signature;
//! `exp` required, `iat` optional (both in seconds since the epoch, fractions
//! allowed), the principal in a configurable claim (`sub` by default), the scope
//! in a configurable claim (`scope`, a string or a list of strings).
//!
//! Such tokens prove nothing (anyone can write one): they are for development and
//! tests, as in Kafka. Production brokers plug in their own validation.

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;

use super::json::{self, Json};
use super::{TokenRejection, ValidatedToken};

/// base64url, padding optional on decode and left out on encode.
const BASE64URL: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Kafka's default validator of unsecured JWS tokens, with its options
/// (`unsecuredValidatorPrincipalClaimName`, `unsecuredValidatorScopeClaimName`,
/// `unsecuredValidatorRequiredScope`, `unsecuredValidatorAllowableClockSkewMs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsecuredJwsValidator {
    /// The claim naming the principal; default `sub`.
    pub principal_claim: String,
    /// The claim holding the scope; default `scope`.
    pub scope_claim: String,
    /// Scope values every token must have; default none.
    pub required_scope: Vec<String>,
    /// How far the token's times may be off this broker's clock, in
    /// milliseconds; default 0.
    pub allowable_clock_skew_ms: i64,
}

impl Default for UnsecuredJwsValidator {
    fn default() -> Self {
        UnsecuredJwsValidator {
            principal_claim: "sub".into(),
            scope_claim: "scope".into(),
            required_scope: Vec::new(),
            allowable_clock_skew_ms: 0,
        }
    }
}

impl UnsecuredJwsValidator {
    /// Validates `token` at `now_ms` (milliseconds since the Unix epoch): its
    /// shape, then expiry, issue time and scope, as Kafka's validator does.
    pub fn validate(&self, token: &str, now_ms: i64) -> Result<ValidatedToken, TokenRejection> {
        let claims = claims(token)?;
        let exp = time_claim(&claims, "exp")?
            .ok_or_else(|| TokenRejection::invalid("No expiration time in JWT"))?;
        let iat = time_claim(&claims, "iat")?;
        let principal = match claims.get(&self.principal_claim) {
            Some(Json::String(s)) if !s.trim().is_empty() => s.clone(),
            Some(Json::String(_)) | None => {
                return Err(TokenRejection::invalid(format!(
                    "No principal name in JWT claim: {}",
                    self.principal_claim
                )))
            }
            Some(_) => {
                return Err(TokenRejection::invalid(format!(
                    "The '{}' claim was not of type String",
                    self.principal_claim
                )))
            }
        };
        let scope = scope(&claims, &self.scope_claim)?;
        let skew = self.allowable_clock_skew_ms.max(0);
        if now_ms.saturating_sub(skew) >= exp {
            return Err(TokenRejection::invalid(format!(
                "The indicated time ({now_ms} ms) minus allowable clock skew ({skew} ms) was on \
                 or after the Expiration Time value ({exp} ms)"
            )));
        }
        if let Some(iat) = iat {
            if now_ms.saturating_add(skew) < iat {
                return Err(TokenRejection::invalid(format!(
                    "The Issued At value ({iat} ms) was after the indicated time ({now_ms} ms) \
                     plus allowable clock skew ({skew} ms)"
                )));
            }
            if exp <= iat {
                return Err(TokenRejection::invalid(format!(
                    "The Expiration Time ({exp} ms) was not after the Issued At time ({iat} ms)"
                )));
            }
        }
        let missing: Vec<&String> = self
            .required_scope
            .iter()
            .filter(|s| !scope.contains(s))
            .collect();
        if !missing.is_empty() {
            let required = self.required_scope.join(" ");
            return Err(TokenRejection::insufficient_scope(
                required.clone(),
                format!(
                    "The provided scope ({}) was missing a required scope ({}). All required \
                     scope elements: {required}",
                    scope.join(" "),
                    missing
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
            ));
        }
        Ok(ValidatedToken {
            principal,
            expires_at_ms: exp,
            issued_at_ms: iat,
            scope,
        })
    }
}

/// The claims object of an unsecured JWS, after its shape and header are checked.
fn claims(token: &str) -> Result<Json, TokenRejection> {
    if token.contains("..") {
        return Err(TokenRejection::invalid(
            "Malformed compact serialization contains '..'",
        ));
    }
    let parts: Vec<&str> = token.splitn(4, '.').collect();
    let [header, claims, signature] = parts[..] else {
        return Err(TokenRejection::invalid(
            "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values",
        ));
    };
    let header = object(header)?;
    let claims = object(claims)?;
    match header.get("alg") {
        Some(Json::String(alg)) if alg == "none" => {}
        Some(_) => {
            return Err(TokenRejection::invalid(
                "Unsecured JWS must have 'none' for an algorithm",
            ))
        }
        None => {
            return Err(TokenRejection::invalid(
                "JWS header must have an Algorithm value",
            ))
        }
    }
    if !signature.is_empty() {
        return Err(TokenRejection::invalid(
            "Unsecured JWS must not contain a digital signature",
        ));
    }
    Ok(claims)
}

/// A base64url part decoded and parsed as a JSON object.
fn object(part: &str) -> Result<Json, TokenRejection> {
    let bytes = BASE64URL
        .decode(part)
        .map_err(|_| TokenRejection::invalid("malformed Base64 URL encoded value"))?;
    match json::parse(&bytes) {
        Ok(v @ Json::Object(_)) => Ok(v),
        Ok(_) => Err(TokenRejection::invalid("JWS part is not a JSON object")),
        Err(e) => Err(TokenRejection::invalid(format!("malformed JSON: {}", e.0))),
    }
}

/// A time claim (seconds since the epoch, fractions allowed) in milliseconds,
/// rounded as Kafka rounds it.
fn time_claim(claims: &Json, name: &str) -> Result<Option<i64>, TokenRejection> {
    match claims.get(name) {
        None => Ok(None),
        Some(Json::Number(secs)) => {
            let ms = (secs * 1000.0).round();
            // Beyond ±2^53 ms (some 285,000 years) a time means nothing.
            if !ms.is_finite() || ms.abs() > 9_007_199_254_740_992.0 {
                return Err(TokenRejection::invalid(format!(
                    "The '{name}' claim is out of range"
                )));
            }
            Ok(Some(ms as i64))
        }
        Some(_) => Err(TokenRejection::invalid(format!(
            "The '{name}' claim was not of type Number"
        ))),
    }
}

/// The scope claim: a string (one value) or a list of strings; blanks dropped.
fn scope(claims: &Json, name: &str) -> Result<Vec<String>, TokenRejection> {
    let mut out = Vec::new();
    match claims.get(name) {
        Some(Json::String(s)) if !s.trim().is_empty() => out.push(s.trim().to_owned()),
        None | Some(Json::String(_)) => {}
        Some(Json::Array(items)) => {
            for item in items {
                let Json::String(s) = item else {
                    return Err(TokenRejection::invalid(format!(
                        "The '{name}' claim is not a list of strings"
                    )));
                };
                let s = s.trim();
                if !s.is_empty() && !out.iter().any(|o| o == s) {
                    out.push(s.to_owned());
                }
            }
        }
        Some(_) => {
            return Err(TokenRejection::invalid(format!(
                "The '{name}' claim was not of type List"
            )))
        }
    }
    Ok(out)
}

/// An unsecured JWS for `principal` (the `sub` claim), issued at `issued_at_ms`
/// and expiring at `expires_at_ms` (both milliseconds since the Unix epoch),
/// with `scope` when not empty: what Kafka's unsecured login module
/// (`OAuthBearerUnsecuredLoginCallbackHandler`) produces, for development and
/// tests against a broker with the default validator.
pub fn unsecured_jws(
    principal: &str,
    issued_at_ms: i64,
    expires_at_ms: i64,
    scope: &[&str],
) -> String {
    let mut claims = String::from("{\"iat\":");
    claims.push_str(&seconds(issued_at_ms));
    claims.push_str(",\"exp\":");
    claims.push_str(&seconds(expires_at_ms));
    claims.push_str(",\"sub\":");
    json::write_string(&mut claims, principal);
    if !scope.is_empty() {
        claims.push_str(",\"scope\":[");
        for (i, s) in scope.iter().enumerate() {
            if i > 0 {
                claims.push(',');
            }
            json::write_string(&mut claims, s);
        }
        claims.push(']');
    }
    claims.push('}');
    format!(
        "{}.{}.",
        BASE64URL.encode(br#"{"alg":"none"}"#),
        BASE64URL.encode(claims.as_bytes())
    )
}

/// Milliseconds as a JSON number of seconds (`1700000000.25`).
fn seconds(ms: i64) -> String {
    let (secs, frac) = (ms.div_euclid(1000), ms.rem_euclid(1000));
    if frac == 0 {
        secs.to_string()
    } else {
        format!("{secs}.{frac:03}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000_000;

    fn jws(header: &str, claims: &str) -> String {
        format!("{}.{}.", BASE64URL.encode(header), BASE64URL.encode(claims))
    }

    #[test]
    fn a_written_token_validates() {
        let token = unsecured_jws("alice", NOW - 1_500, NOW + 60_250, &["read", "write"]);
        let v = UnsecuredJwsValidator::default()
            .validate(&token, NOW)
            .unwrap();
        assert_eq!(v.principal, "alice");
        assert_eq!(v.expires_at_ms, NOW + 60_250);
        assert_eq!(v.issued_at_ms, Some(NOW - 1_500));
        assert_eq!(v.scope, vec!["read", "write"]);
    }

    #[test]
    fn a_token_written_elsewhere_validates() {
        // {"alg":"none"} . {"sub":"user","exp":1e10,"scope":"x"}, encoded by another tool.
        let token = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ1c2VyIiwiZXhwIjoxZTEwLCJzY29wZSI6IngifQ.";
        let v = UnsecuredJwsValidator::default()
            .validate(token, NOW)
            .unwrap();
        assert_eq!(
            (v.principal.as_str(), v.scope.as_slice()),
            ("user", &["x".to_string()][..])
        );
        assert_eq!(v.expires_at_ms, 10_000_000_000_000);
    }

    #[test]
    fn expiry_honours_the_clock_skew() {
        let token = unsecured_jws("a", NOW - 10_000, NOW - 1_000, &[]);
        let strict = UnsecuredJwsValidator::default();
        let err = strict.validate(&token, NOW).unwrap_err();
        assert_eq!(err.status, "invalid_token");
        assert!(err.reason.contains("Expiration Time"), "{err}");
        let lenient = UnsecuredJwsValidator {
            allowable_clock_skew_ms: 5_000,
            ..UnsecuredJwsValidator::default()
        };
        assert!(lenient.validate(&token, NOW).is_ok());
        // Exactly at expiry is expired.
        let at = unsecured_jws("a", NOW - 10_000, NOW, &[]);
        assert!(strict.validate(&at, NOW).is_err());
    }

    #[test]
    fn issue_time_and_consistency_are_checked() {
        let future = unsecured_jws("a", NOW + 10_000, NOW + 20_000, &[]);
        assert!(UnsecuredJwsValidator::default()
            .validate(&future, NOW)
            .is_err());
        let backwards = jws(
            r#"{"alg":"none"}"#,
            r#"{"sub":"a","iat":1800000000,"exp":1750000000}"#,
        );
        let err = UnsecuredJwsValidator {
            allowable_clock_skew_ms: i64::MAX,
            ..UnsecuredJwsValidator::default()
        }
        .validate(&backwards, NOW)
        .unwrap_err();
        assert!(err.reason.contains("not after the Issued At"), "{err}");
    }

    #[test]
    fn required_scope_and_claim_names_are_options() {
        let token = jws(
            r#"{"alg":"none"}"#,
            r#"{"user":"bob","exp":1800000000,"roles":"read"}"#,
        );
        let v = UnsecuredJwsValidator {
            principal_claim: "user".into(),
            scope_claim: "roles".into(),
            required_scope: vec!["read".into()],
            ..UnsecuredJwsValidator::default()
        };
        assert_eq!(v.validate(&token, NOW).unwrap().principal, "bob");
        let needs_write = UnsecuredJwsValidator {
            required_scope: vec!["read".into(), "write".into()],
            ..v
        };
        let err = needs_write.validate(&token, NOW).unwrap_err();
        assert_eq!(err.status, "insufficient_scope");
        assert_eq!(err.scope.as_deref(), Some("read write"));
        assert_eq!(
            err.challenge(),
            r#"{"status":"insufficient_scope", "scope":"read write"}"#
        );
    }

    #[test]
    fn malformed_tokens_are_rejections() {
        let v = UnsecuredJwsValidator::default();
        let good_claims = r#"{"sub":"a","exp":1800000000}"#;
        for (token, why) in [
            (String::new(), "3 dot-separated"),
            ("abc".into(), "3 dot-separated"),
            ("a.b.c.d".into(), "3 dot-separated"),
            ("a..".into(), "'..'"),
            ("!!!.e30.".into(), "Base64"),
            (jws("[1]", good_claims), "not a JSON object"),
            (jws("{", good_claims), "malformed JSON"),
            (jws(r#"{"alg":"HS256"}"#, good_claims), "'none'"),
            (jws("{}", good_claims), "Algorithm"),
            (jws(r#"{"alg":"none"}"#, good_claims) + "sig", "signature"),
            (jws(r#"{"alg":"none"}"#, r#"{"sub":"a"}"#), "No expiration"),
            (
                jws(r#"{"alg":"none"}"#, r#"{"sub":"a","exp":"soon"}"#),
                "Number",
            ),
            (
                jws(r#"{"alg":"none"}"#, r#"{"sub":"a","exp":1e300}"#),
                "out of range",
            ),
            (
                jws(r#"{"alg":"none"}"#, r#"{"exp":1800000000}"#),
                "No principal",
            ),
            (
                jws(r#"{"alg":"none"}"#, r#"{"sub":" ","exp":1800000000}"#),
                "No principal",
            ),
            (
                jws(r#"{"alg":"none"}"#, r#"{"sub":7,"exp":1800000000}"#),
                "String",
            ),
            (
                jws(
                    r#"{"alg":"none"}"#,
                    r#"{"sub":"a","exp":1800000000,"scope":[1]}"#,
                ),
                "list of strings",
            ),
            (
                jws(
                    r#"{"alg":"none"}"#,
                    r#"{"sub":"a","exp":1800000000,"scope":{}}"#,
                ),
                "List",
            ),
        ] {
            let err = v.validate(&token, NOW).unwrap_err();
            assert_eq!(err.status, "invalid_token");
            assert!(err.reason.contains(why), "{token}: {err}");
        }
    }
}
