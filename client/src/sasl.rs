//! SASL authentication of one connection (KIP-152): after ApiVersions, a
//! SaslHandshake v1 naming the mechanism, then SaslAuthenticate rounds carrying
//! the mechanism's bytes (`baton_protocol::sasl` computes them), until the
//! exchange completes; for SCRAM that includes checking the broker's signature.

use baton_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use baton_protocol::sasl::{ClientSession, Mechanism, Secret};
use baton_protocol::ErrorCode;
use bytes::Bytes;

use crate::connection::{Connection, ConnectionError};

/// Most SaslAuthenticate rounds one exchange may take (SCRAM takes two); a broker
/// asking for more is refused.
const MAX_ROUNDS: usize = 8;

/// A SASL mechanism with the user name and password it logs in with. `Debug`
/// shows the mechanism and user, never the password.
#[derive(Clone, Debug)]
pub struct SaslCredentials {
    mechanism: Mechanism,
    username: String,
    password: Secret,
}

impl SaslCredentials {
    /// PLAIN (RFC 4616): the password travels as it is, so use it over TLS
    /// (`SASL_SSL`) only.
    pub fn plain(username: impl Into<String>, password: impl Into<Secret>) -> SaslCredentials {
        SaslCredentials::new(Mechanism::Plain, username, password)
    }

    /// SCRAM-SHA-256 (RFC 7677).
    pub fn scram_sha256(
        username: impl Into<String>,
        password: impl Into<Secret>,
    ) -> SaslCredentials {
        SaslCredentials::new(Mechanism::ScramSha256, username, password)
    }

    /// SCRAM-SHA-512.
    pub fn scram_sha512(
        username: impl Into<String>,
        password: impl Into<Secret>,
    ) -> SaslCredentials {
        SaslCredentials::new(Mechanism::ScramSha512, username, password)
    }

    /// Credentials for `mechanism`.
    pub fn new(
        mechanism: Mechanism,
        username: impl Into<String>,
        password: impl Into<Secret>,
    ) -> SaslCredentials {
        SaslCredentials {
            mechanism,
            username: username.into(),
            password: password.into(),
        }
    }

    /// The mechanism.
    pub fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    /// The user name.
    pub fn username(&self) -> &str {
        &self.username
    }
}

/// Authenticates `conn` with `credentials`. Any refusal or protocol violation is
/// [`ConnectionError::Authentication`], which is not retriable.
pub(crate) async fn authenticate(
    conn: &Connection,
    credentials: &SaslCredentials,
) -> Result<(), ConnectionError> {
    let mechanism = credentials.mechanism;
    let failed = |message: String| ConnectionError::Authentication {
        addr: conn.addr().to_string(),
        mechanism: mechanism.name().to_string(),
        message,
    };
    let handshake = conn
        .send(&SaslHandshakeRequest {
            mechanism: mechanism.name().to_string(),
        })
        .await?;
    let code = ErrorCode::from_code(handshake.error_code);
    if !code.is_ok() {
        return Err(failed(format!(
            "handshake refused with {code}; the broker enables {:?}",
            handshake.mechanisms
        )));
    }
    let mut session = ClientSession::new(
        mechanism,
        &credentials.username,
        credentials.password.clone(),
    )
    .map_err(|e| failed(e.to_string()))?;
    let mut outgoing = session.initial_response();
    for _ in 0..MAX_ROUNDS {
        let response = conn
            .send(&SaslAuthenticateRequest {
                auth_bytes: Bytes::from(outgoing),
            })
            .await?;
        let code = ErrorCode::from_code(response.error_code);
        if !code.is_ok() {
            let message = response.error_message.unwrap_or_else(|| code.to_string());
            return Err(failed(message));
        }
        // SCRAM's PBKDF2 (thousands of HMACs) runs off the async workers.
        let server_bytes = response.auth_bytes;
        let (back, step) = tokio::task::spawn_blocking(move || {
            let step = session.step(&server_bytes);
            (session, step)
        })
        .await
        .map_err(|e| failed(format!("SASL computation failed: {e}")))?;
        session = back;
        match step.map_err(|e| failed(e.to_string()))? {
            Some(next) => outgoing = next,
            None => return Ok(()),
        }
    }
    Err(failed(format!(
        "the exchange did not complete in {MAX_ROUNDS} rounds"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_password() {
        let text = format!("{:?}", SaslCredentials::scram_sha512("app", "hunter2"));
        assert!(
            text.contains("app") && text.contains("ScramSha512"),
            "{text}"
        );
        assert!(!text.contains("hunter2"), "{text}");
    }
}
