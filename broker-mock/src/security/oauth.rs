//! [`TokenValidator`]: how a listener validates OAUTHBEARER tokens. By default
//! as Apache Kafka's default validator does (unsecured JWS tokens,
//! [`UnsecuredJwsValidator`] against this broker's wall clock); an in-process
//! hook replaces it.

use std::sync::Arc;

use baton_protocol::sasl::oauthbearer::UnsecuredJwsValidator;
use baton_protocol::sasl::{TokenRejection, ValidatedToken};

use crate::clock;

type Hook = dyn Fn(&str) -> Result<ValidatedToken, TokenRejection> + Send + Sync;

/// Validates the bearer tokens of OAUTHBEARER logins. Cheap to clone.
#[derive(Clone)]
pub struct TokenValidator(Arc<Hook>);

impl TokenValidator {
    /// Kafka's default: unsecured JWS tokens checked by `validator` (claim names,
    /// required scope, clock skew) against this broker's clock.
    pub fn unsecured_jws(validator: UnsecuredJwsValidator) -> TokenValidator {
        TokenValidator(Arc::new(move |token| {
            validator.validate(token, clock::now_ms())
        }))
    }

    /// An in-process hook: takes the token, returns the principal and expiry it
    /// proves, or why it is refused (logged; the client sees only the RFC 7628
    /// status). Runs on the connection's task, so it must not block for long.
    pub fn from_fn<F>(hook: F) -> TokenValidator
    where
        F: Fn(&str) -> Result<ValidatedToken, TokenRejection> + Send + Sync + 'static,
    {
        TokenValidator(Arc::new(hook))
    }

    /// Validates `token`.
    pub fn validate(&self, token: &str) -> Result<ValidatedToken, TokenRejection> {
        (self.0)(token)
    }
}

impl Default for TokenValidator {
    /// Unsecured JWS tokens with Kafka's default options (`sub`, `scope`, no
    /// required scope, no clock skew).
    fn default() -> Self {
        TokenValidator::unsecured_jws(UnsecuredJwsValidator::default())
    }
}

impl std::fmt::Debug for TokenValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenValidator(..)")
    }
}
