//! [`TokenValidator`]: how a listener validates OAUTHBEARER tokens. By default
//! as Apache Kafka's default validator does (unsecured JWS tokens,
//! [`UnsecuredJwsValidator`] against this broker's wall clock); an in-process
//! hook replaces it.

use std::sync::Arc;

use baton_protocol::sasl::oauthbearer::UnsecuredJwsValidator;
use baton_protocol::sasl::{TokenRejection, ValidatedToken};

use crate::clock::WallClock;

/// Validates a token at a wall-clock time (ms since the Unix epoch).
type Hook = dyn Fn(&str, i64) -> Result<ValidatedToken, TokenRejection> + Send + Sync;

/// Validates the bearer tokens of OAUTHBEARER logins. Cheap to clone.
#[derive(Clone)]
pub struct TokenValidator {
    hook: Arc<Hook>,
    /// The wall clock tokens are checked against: the node's once its listener
    /// starts (`BrokerConfig::env`, `ControllerOptions::env`); the process's
    /// before that.
    clock: Option<WallClock>,
}

impl TokenValidator {
    /// Kafka's default: unsecured JWS tokens checked by `validator` (claim names,
    /// required scope, clock skew) against this broker's clock.
    pub fn unsecured_jws(validator: UnsecuredJwsValidator) -> TokenValidator {
        TokenValidator {
            hook: Arc::new(move |token, now_ms| validator.validate(token, now_ms)),
            clock: None,
        }
    }

    /// An in-process hook: takes the token, returns the principal and expiry it
    /// proves, or why it is refused (logged; the client sees only the RFC 7628
    /// status). Runs on the connection's task, so it must not block for long.
    pub fn from_fn<F>(hook: F) -> TokenValidator
    where
        F: Fn(&str) -> Result<ValidatedToken, TokenRejection> + Send + Sync + 'static,
    {
        TokenValidator {
            hook: Arc::new(move |token, _| hook(token)),
            clock: None,
        }
    }

    /// Validates `token`.
    pub fn validate(&self, token: &str) -> Result<ValidatedToken, TokenRejection> {
        (self.hook)(token, self.now_ms())
    }

    /// The same validator, reading `clock` (a node's) from now on.
    pub(crate) fn on_clock(self, clock: WallClock) -> TokenValidator {
        TokenValidator {
            clock: Some(clock),
            ..self
        }
    }

    /// The clock's time in ms since the Unix epoch.
    pub(crate) fn now_ms(&self) -> i64 {
        self.clock
            .as_ref()
            .map_or_else(baton_env::now_ms, WallClock::now_ms)
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
