//! SASL mechanisms as Kafka uses them, written once for both sides: the client's
//! half of each exchange ([`ClientSession`]) and the broker's ([`ServerSession`]).
//!
//! Sans-io like the rest of the crate: a session takes the peer's bytes and returns
//! the bytes to send back; carrying them in SaslAuthenticate requests (KIP-152) is
//! the connection layer's job. Mechanisms:
//!
//! - `PLAIN` (RFC 4616), [`plain`];
//! - `SCRAM-SHA-256` and `SCRAM-SHA-512` (RFC 5802, RFC 7677), [`scram`], with the
//!   server's signature verified by the client and the broker holding only salted,
//!   iterated keys ([`ScramCredential`]);
//! - `OAUTHBEARER` (RFC 7628, KIP-255), [`oauthbearer`]: a bearer token from the
//!   application, checked by the broker's [`CredentialStore::validate_token`]
//!   (Kafka's unsecured JWS validator, [`oauthbearer::UnsecuredJwsValidator`], or
//!   the broker's own).
//!
//! Hashes, HMAC and PBKDF2 come from the RustCrypto crates, randomness from the
//! operating system (`getrandom`). Every malformed message is a [`SaslError`].
//!
//! ```
//! use baton_protocol::sasl::{ClientSession, Mechanism, Secret, ScramCredential,
//!     ServerSession, ServerStep, StaticCredentials};
//!
//! let mut users = StaticCredentials::default();
//! let hash = Mechanism::ScramSha512.scram_hash().unwrap();
//! users.add_scram(hash, "alice", ScramCredential::generate(hash, b"secret", 4096).unwrap());
//!
//! let mut client = ClientSession::new(Mechanism::ScramSha512, "alice", Secret::new("secret")).unwrap();
//! let mut server = ServerSession::new(Mechanism::ScramSha512).unwrap();
//! let mut to_server = client.initial_response();
//! loop {
//!     match server.step(&to_server, &users).unwrap() {
//!         ServerStep::Challenge(bytes) => to_server = client.step(&bytes).unwrap().unwrap(),
//!         ServerStep::Done { principal, final_bytes, .. } => {
//!             assert_eq!(principal, "alice");
//!             assert!(client.step(&final_bytes).unwrap().is_none());
//!             break;
//!         }
//!     }
//! }
//! ```

pub mod oauthbearer;
pub mod plain;
pub mod scram;
mod secret;
mod session;

pub use oauthbearer::{TokenRejection, ValidatedToken};
pub use scram::{random_salt, ScramCredential, ScramHash, MAX_ITERATIONS, MIN_ITERATIONS};
pub use secret::Secret;
pub use session::{ClientSession, ServerSession, ServerStep};

use std::collections::HashMap;

/// A SASL mechanism that both sides implement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mechanism {
    /// `PLAIN` (RFC 4616): user name and password in the clear; use it over TLS only.
    Plain,
    /// `SCRAM-SHA-256` (RFC 7677).
    ScramSha256,
    /// `SCRAM-SHA-512` (RFC 5802 with SHA-512, as Kafka names it).
    ScramSha512,
    /// `OAUTHBEARER` (RFC 7628): a bearer token the application obtains.
    OAuthBearer,
}

impl Mechanism {
    /// Every mechanism, in the order a broker lists them by default.
    pub const ALL: [Mechanism; 4] = [
        Mechanism::Plain,
        Mechanism::ScramSha256,
        Mechanism::ScramSha512,
        Mechanism::OAuthBearer,
    ];

    /// The name on the wire (SaslHandshake), as Kafka spells it.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
            Mechanism::OAuthBearer => "OAUTHBEARER",
        }
    }

    /// The mechanism of a wire name, or `None` for one this crate does not know.
    pub fn from_name(name: &str) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The hash of a SCRAM mechanism, or `None` for others.
    pub fn scram_hash(self) -> Option<ScramHash> {
        match self {
            Mechanism::Plain | Mechanism::OAuthBearer => None,
            Mechanism::ScramSha256 => Some(ScramHash::Sha256),
            Mechanism::ScramSha512 => Some(ScramHash::Sha512),
        }
    }
}

impl std::fmt::Display for Mechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a SASL exchange failed on this side. The broker answers any of these with
/// SASL_AUTHENTICATION_FAILED; the messages never contain secrets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SaslError {
    /// The peer's message does not follow the mechanism's grammar.
    #[error("malformed SASL message: {0}")]
    Malformed(&'static str),
    /// The user is unknown or the proof (password) is wrong. Deliberately one
    /// variant, so that a broker's answer does not tell which.
    #[error("invalid credentials")]
    InvalidCredentials,
    /// The server's nonce does not extend the client's, or the client's final nonce
    /// is not the one the server chose.
    #[error("SCRAM nonce mismatch")]
    NonceMismatch,
    /// The server asked for an iteration count outside what this client accepts.
    #[error("SCRAM iteration count {0} outside {min}..={max}", min = scram::MIN_ITERATIONS, max = scram::MAX_ITERATIONS)]
    IterationsOutOfRange(u32),
    /// The server's signature does not match: it does not know the password.
    #[error("SCRAM server signature does not match")]
    ServerSignatureMismatch,
    /// The server ended a SCRAM exchange with an error attribute (`e=`).
    #[error("server rejected SCRAM authentication: {0}")]
    ServerError(String),
    /// A message arrived after the exchange was over or before it began.
    #[error("SASL message out of order")]
    OutOfOrder,
    /// The operating system's random source failed.
    #[error("no randomness available: {0}")]
    Random(String),
    /// The broker refused an OAUTHBEARER token (`reason` is for its log; the
    /// client is told only the rejection's JSON, as Kafka does).
    #[error("OAUTHBEARER token rejected: {0}")]
    TokenRejected(TokenRejection),
    /// An OAUTHBEARER client asked for an authorization id other than its
    /// token's principal.
    #[error(
        "Authentication failed: Client requested an authorization id ({authzid}) that is \
         different from the token's principal name ({principal})"
    )]
    AuthorizationIdMismatch {
        /// The authorization id asked for.
        authzid: String,
        /// The token's principal.
        principal: String,
    },
}

/// What a broker knows about its users: PLAIN passwords, SCRAM credentials, and
/// how it validates OAUTHBEARER tokens.
///
/// A trait so that a broker can back it with configuration today and with
/// AlterUserScramCredentials later.
pub trait CredentialStore {
    /// The PLAIN password of `user`, if the user may log in with PLAIN.
    fn plain_password(&self, user: &str) -> Option<&Secret>;
    /// The SCRAM credential of `user` for `hash`, if there is one.
    fn scram_credential(&self, hash: ScramHash, user: &str) -> Option<&ScramCredential>;
    /// Validates an OAUTHBEARER token. By default every token is refused (a
    /// store without a token validator).
    fn validate_token(&self, token: &str) -> Result<ValidatedToken, TokenRejection> {
        let _ = token;
        Err(TokenRejection::invalid("no OAUTHBEARER token validator"))
    }
}

/// A fixed set of users, as a configuration gives them.
#[derive(Clone, Default)]
pub struct StaticCredentials {
    plain: HashMap<String, Secret>,
    scram: HashMap<(ScramHash, String), ScramCredential>,
}

impl StaticCredentials {
    /// Adds (or replaces) a PLAIN user.
    pub fn add_plain(&mut self, user: impl Into<String>, password: Secret) {
        self.plain.insert(user.into(), password);
    }

    /// Adds (or replaces) a SCRAM user's credential for `hash`.
    pub fn add_scram(
        &mut self,
        hash: ScramHash,
        user: impl Into<String>,
        credential: ScramCredential,
    ) {
        self.scram.insert((hash, user.into()), credential);
    }
}

impl std::fmt::Debug for StaticCredentials {
    /// User names only; passwords and keys are never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut plain: Vec<_> = self.plain.keys().collect();
        plain.sort();
        let mut scram: Vec<_> = self
            .scram
            .keys()
            .map(|(h, u)| format!("{}:{u}", h.mechanism()))
            .collect();
        scram.sort();
        f.debug_struct("StaticCredentials")
            .field("plain_users", &plain)
            .field("scram_users", &scram)
            .finish()
    }
}

impl CredentialStore for StaticCredentials {
    fn plain_password(&self, user: &str) -> Option<&Secret> {
        self.plain.get(user)
    }

    fn scram_credential(&self, hash: ScramHash, user: &str) -> Option<&ScramCredential> {
        self.scram.get(&(hash, user.to_owned()))
    }
}

/// Fills `buf` from the operating system's random source.
fn random_bytes(buf: &mut [u8]) -> Result<(), SaslError> {
    getrandom::fill(buf).map_err(|e| SaslError::Random(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in Mechanism::ALL {
            assert_eq!(Mechanism::from_name(m.name()), Some(m));
        }
        assert_eq!(Mechanism::from_name("GSSAPI"), None);
    }

    #[test]
    fn debug_never_prints_secrets() {
        let mut users = StaticCredentials::default();
        users.add_plain("bob", Secret::new("hunter2"));
        let cred = ScramCredential::generate(ScramHash::Sha256, b"hunter2", 4096).unwrap();
        users.add_scram(ScramHash::Sha256, "carol", cred);
        let text = format!("{users:?}");
        assert!(text.contains("bob") && text.contains("carol"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
    }
}
