//! [`SaslSettings`]: a listener's enabled SASL mechanisms (Kafka's
//! `sasl.enabled.mechanisms`) and its users. SCRAM users are stored as salted,
//! iterated credentials from the moment they are added; `Debug` prints user names
//! and mechanisms only.

use std::sync::Arc;

use baton_protocol::sasl::{Mechanism, SaslError, ScramCredential, Secret, StaticCredentials};

/// Kafka's default SCRAM iteration count (`kafka-configs --add-config
/// 'SCRAM-SHA-512=[password=...]'` uses 4096).
pub const DEFAULT_SCRAM_ITERATIONS: u32 = 4096;

/// The SASL side of a listener.
#[derive(Clone, Debug, Default)]
pub struct SaslSettings {
    mechanisms: Vec<Mechanism>,
    users: Arc<StaticCredentials>,
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
            users: Arc::default(),
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
    /// the derived keys are kept.
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

    /// Adds a SCRAM user from a stored credential (its hash names the mechanism).
    pub fn with_scram_credential(
        mut self,
        user: impl Into<String>,
        credential: ScramCredential,
    ) -> SaslSettings {
        Arc::make_mut(&mut self.users).add_scram(credential.hash(), user, credential);
        self
    }

    /// The enabled mechanisms, in the order the handshake lists them.
    pub fn mechanisms(&self) -> &[Mechanism] {
        &self.mechanisms
    }

    /// The users.
    pub(crate) fn users(&self) -> &StaticCredentials {
        &self.users
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
