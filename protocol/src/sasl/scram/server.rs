//! The broker's half of a SCRAM exchange: server-first from the client-first
//! message and the stored credential, then the proof checked and the server's
//! signature returned.

use super::messages::{ClientFinal, ClientFirst, ServerFinal, ServerFirst};
use super::{ct_eq, new_nonce, xor, ScramCredential, ScramHash};
use crate::sasl::{CredentialStore, SaslError};

/// Where the server is in the exchange.
enum State {
    /// Waiting for client-first.
    Initial,
    /// Server-first sent; what the client-final message is checked against.
    SentFirst {
        user: String,
        credential: ScramCredential,
        nonce: String,
        gs2_header: String,
        /// `client-first-message-bare,server-first-message,`
        auth_prefix: String,
    },
    /// Authenticated, or failed: nothing more is accepted.
    Over,
}

/// One SCRAM exchange from the broker's side.
pub struct ScramServer {
    hash: ScramHash,
    server_nonce: String,
    state: State,
}

impl std::fmt::Debug for ScramServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramServer")
            .field("hash", &self.hash)
            .finish_non_exhaustive()
    }
}

impl ScramServer {
    /// A new exchange with a random server nonce.
    pub fn new(hash: ScramHash) -> Result<ScramServer, SaslError> {
        Ok(ScramServer::with_nonce(hash, new_nonce()?))
    }

    /// A new exchange with a given server nonce part: for test vectors only.
    pub fn with_nonce(hash: ScramHash, server_nonce: String) -> ScramServer {
        ScramServer {
            hash,
            server_nonce,
            state: State::Initial,
        }
    }

    /// Answers client-first with server-first. An unknown user (or one with no
    /// credential for this hash) is [`SaslError::InvalidCredentials`].
    pub fn handle_client_first(
        &mut self,
        message: &[u8],
        users: &dyn CredentialStore,
    ) -> Result<Vec<u8>, SaslError> {
        if !matches!(self.state, State::Initial) {
            self.state = State::Over;
            return Err(SaslError::OutOfOrder);
        }
        self.state = State::Over;
        let first = ClientFirst::parse(message)?;
        if first.authzid.as_ref().is_some_and(|a| *a != first.user) {
            return Err(SaslError::InvalidCredentials);
        }
        let Some(credential) = users.scram_credential(self.hash, &first.user) else {
            return Err(SaslError::InvalidCredentials);
        };
        let nonce = format!("{}{}", first.nonce, self.server_nonce);
        let server_first = ServerFirst::format(&nonce, &credential.salt, credential.iterations);
        self.state = State::SentFirst {
            user: first.user,
            credential: credential.clone(),
            nonce,
            gs2_header: first.gs2_header,
            auth_prefix: format!("{},{server_first},", first.bare),
        };
        Ok(server_first.into_bytes())
    }

    /// Checks client-final's proof and returns the authenticated user and the
    /// server-final message (the server's signature).
    pub fn handle_client_final(&mut self, message: &[u8]) -> Result<(String, Vec<u8>), SaslError> {
        let State::SentFirst {
            user,
            credential,
            nonce,
            gs2_header,
            auth_prefix,
        } = std::mem::replace(&mut self.state, State::Over)
        else {
            return Err(SaslError::OutOfOrder);
        };
        let last = ClientFinal::parse(message)?;
        if last.channel_binding != gs2_header.as_bytes() {
            return Err(SaslError::Malformed(
                "SCRAM channel binding does not echo the GS2 header",
            ));
        }
        if last.nonce != nonce {
            return Err(SaslError::NonceMismatch);
        }
        let auth_message = format!("{auth_prefix}{}", last.without_proof);
        let client_signature = self
            .hash
            .hmac(&credential.stored_key, auth_message.as_bytes());
        if last.proof.len() != client_signature.len() {
            return Err(SaslError::InvalidCredentials);
        }
        let client_key = xor(&last.proof, &client_signature);
        if !ct_eq(&self.hash.hash(&client_key), &credential.stored_key) {
            return Err(SaslError::InvalidCredentials);
        }
        let server_signature = self
            .hash
            .hmac(&credential.server_key, auth_message.as_bytes());
        Ok((
            user,
            ServerFinal::format_verifier(&server_signature).into_bytes(),
        ))
    }
}
