//! [`SaslSettings`]: a listener's enabled SASL mechanisms (Kafka's
//! `sasl.enabled.mechanisms`), its users, how it validates OAUTHBEARER tokens,
//! and its `connections.max.reauth.ms`. SCRAM users are stored as salted,
//! iterated credentials from the moment they are added; `Debug` prints user names
//! and mechanisms only.
//!
//! PLAIN users belong to their listener (Kafka's per-listener JAAS entries). SCRAM
//! users belong to the node, as Kafka's are cluster-wide: at start the SCRAM users
//! of every listener go into the node's one store (`scram_store.rs`), which every
//! SASL listener checks and AlterUserScramCredentials changes.

use std::sync::Arc;
use std::time::Duration;

use baton_protocol::sasl::{
    CredentialStore, Mechanism, SaslError, ScramCredential, ScramHash, Secret, StaticCredentials,
    TokenRejection, ValidatedToken,
};

use super::oauth::TokenValidator;
use super::reauth::SaslStats;
use crate::clock::WallClock;

/// Kafka's default SCRAM iteration count (`kafka-configs --add-config
/// 'SCRAM-SHA-512=[password=...]'` uses 4096).
pub const DEFAULT_SCRAM_ITERATIONS: u32 = 4096;

/// The SASL side of a listener.
///
/// Enabling OAUTHBEARER without [`with_token_validator`](Self::with_token_validator)
/// accepts unsecured JWS tokens, which anyone can write: Apache Kafka's default,
/// meant for development and tests. Give a validator that checks signatures (or
/// asks your identity provider) before exposing such a listener.
#[derive(Clone, Debug, Default)]
pub struct SaslSettings {
    mechanisms: Vec<Mechanism>,
    /// PLAIN users.
    users: Arc<StaticCredentials>,
    /// SCRAM users, handed to the node's store at start.
    scram: Vec<(String, ScramCredential)>,
    /// Validates OAUTHBEARER tokens; Kafka's unsecured JWS validator by default.
    tokens: TokenValidator,
    /// `connections.max.reauth.ms`; zero (the default) sets no bound.
    max_reauth: Duration,
    /// Shared by every clone, so the listener's connections count into it.
    stats: Arc<SaslStats>,
}

impl SaslSettings {
    /// Settings with `mechanisms` enabled and no users.
    pub fn new(mechanisms: impl IntoIterator<Item = Mechanism>) -> SaslSettings {
        let mut enabled = Vec::new();
        for m in mechanisms {
            if !enabled.contains(&m) {
                enabled.push(m);
            }
        }
        SaslSettings {
            mechanisms: enabled,
            ..SaslSettings::default()
        }
    }

    /// Adds a PLAIN user (Kafka's `user_<name>="<password>"` JAAS entries).
    pub fn with_plain_user(
        mut self,
        user: impl Into<String>,
        password: impl Into<Secret>,
    ) -> SaslSettings {
        Arc::make_mut(&mut self.users).add_plain(user, password.into());
        self
    }

    /// Adds a SCRAM user for `mechanism` (SCRAM-SHA-256 or SCRAM-SHA-512), salted
    /// with fresh random bytes and iterated 4,096 times (Kafka's default); only
    /// the derived keys are kept. SCRAM users are the node's: the user can log in
    /// on every SASL listener of the node that enables `mechanism`.
    pub fn with_scram_user(
        self,
        mechanism: Mechanism,
        user: impl Into<String>,
        password: &str,
    ) -> Result<SaslSettings, SaslError> {
        let Some(hash) = mechanism.scram_hash() else {
            return Err(SaslError::Malformed("not a SCRAM mechanism"));
        };
        let credential =
            ScramCredential::generate(hash, password.as_bytes(), DEFAULT_SCRAM_ITERATIONS)?;
        Ok(self.with_scram_credential(user, credential))
    }

    /// Adds a SCRAM user from a stored credential (its hash names the mechanism);
    /// like [`SaslSettings::with_scram_user`], a user of the whole node.
    pub fn with_scram_credential(
        mut self,
        user: impl Into<String>,
        credential: ScramCredential,
    ) -> SaslSettings {
        let user = user.into();
        self.scram
            .retain(|(u, c)| !(*u == user && c.hash() == credential.hash()));
        self.scram.push((user, credential));
        self
    }

    /// The SCRAM users given here, for the node's store.
    pub(crate) fn scram_users(&self) -> &[(String, ScramCredential)] {
        &self.scram
    }

    /// These settings on a node's wall clock (`clock`): OAUTHBEARER tokens are
    /// checked, and session lifetimes counted, on it.
    pub(crate) fn on_clock(mut self, clock: WallClock) -> SaslSettings {
        self.tokens = self.tokens.on_clock(clock);
        self
    }

    /// The wall clock tokens are checked against, in ms since the Unix epoch.
    pub(crate) fn now_ms(&self) -> i64 {
        self.tokens.now_ms()
    }

    /// Validates OAUTHBEARER tokens with `validator` instead of Kafka's default
    /// (unsecured JWS tokens with default options).
    pub fn with_token_validator(mut self, validator: TokenValidator) -> SaslSettings {
        self.tokens = validator;
        self
    }

    /// Kafka's `connections.max.reauth.ms`: sessions last at most this long
    /// (bounded further by an OAUTHBEARER token's expiry), clients that support
    /// it (SaslAuthenticate v1+) are told so and re-authenticate, and a
    /// connection used after its session expired is closed (KIP-368). Zero, the
    /// default, sets no bound: PLAIN and SCRAM sessions then never expire.
    pub fn with_connections_max_reauth(mut self, max: Duration) -> SaslSettings {
        self.max_reauth = max;
        self
    }

    /// The enabled mechanisms, in the order the handshake lists them.
    pub fn mechanisms(&self) -> &[Mechanism] {
        &self.mechanisms
    }

    /// `connections.max.reauth.ms` (zero for no bound).
    pub fn connections_max_reauth(&self) -> Duration {
        self.max_reauth
    }

    /// The counters of this listener's SASL sessions (logins,
    /// re-authentications, failures, expired sessions closed).
    pub fn stats(&self) -> &SaslStats {
        &self.stats
    }
}

impl CredentialStore for SaslSettings {
    fn plain_password(&self, user: &str) -> Option<&Secret> {
        self.users.plain_password(user)
    }

    fn scram_credential(&self, hash: ScramHash, user: &str) -> Option<&ScramCredential> {
        self.scram
            .iter()
            .find(|(u, c)| u == user && c.hash() == hash)
            .map(|(_, c)| c)
    }

    fn validate_token(&self, token: &str) -> Result<ValidatedToken, TokenRejection> {
        self.tokens.validate(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_no_secret() {
        let settings = SaslSettings::new(Mechanism::ALL)
            .with_plain_user("alice", "plain-secret")
            .with_scram_user(Mechanism::ScramSha512, "bob", "scram-secret")
            .unwrap();
        let text = format!("{settings:?}");
        assert!(text.contains("alice") && text.contains("bob"), "{text}");
        assert!(!text.contains("secret"), "{text}");
    }

    #[test]
    fn plain_is_not_a_scram_mechanism() {
        assert!(SaslSettings::default()
            .with_scram_user(Mechanism::Plain, "x", "y")
            .is_err());
    }
}
