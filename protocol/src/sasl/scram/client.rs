//! The client's half of a SCRAM exchange: client-first, then client-final from the
//! server-first message, then the server's signature checked.

use super::messages::{ClientFinal, ClientFirst, ServerFinal, ServerFirst};
use super::{check_iterations, ct_eq, new_nonce, xor, Keys, ScramHash};
use crate::sasl::SaslError;

/// Where the client is in the exchange.
enum State {
    /// `client_first` not yet called.
    Initial,
    /// Client-first sent; waiting for server-first.
    SentFirst,
    /// Client-final sent; the signature the server must return.
    SentFinal { server_signature: Vec<u8> },
    /// The server proved it knows the credential.
    Done,
    /// A step failed; every later step fails too.
    Failed,
}

/// One SCRAM exchange from the client's side. Holds the password only until the
/// salted keys are derived; `Debug` shows neither.
pub struct ScramClient {
    hash: ScramHash,
    user: String,
    password: Vec<u8>,
    nonce: String,
    client_first_bare: String,
    state: State,
}

impl std::fmt::Debug for ScramClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramClient")
            .field("hash", &self.hash)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

impl ScramClient {
    /// A new exchange for `user` with a random nonce.
    pub fn new(hash: ScramHash, user: &str, password: &[u8]) -> Result<ScramClient, SaslError> {
        Ok(ScramClient::with_nonce(hash, user, password, new_nonce()?))
    }

    /// A new exchange with a given nonce: for test vectors only; a real exchange
    /// needs a fresh random nonce ([`ScramClient::new`]).
    pub fn with_nonce(hash: ScramHash, user: &str, password: &[u8], nonce: String) -> ScramClient {
        ScramClient {
            hash,
            user: user.to_owned(),
            password: password.to_vec(),
            nonce,
            client_first_bare: String::new(),
            state: State::Initial,
        }
    }

    /// The client-first message. Call once, first.
    pub fn client_first(&mut self) -> Vec<u8> {
        let message = ClientFirst::format(&self.user, &self.nonce);
        self.client_first_bare = message["n,,".len()..].to_owned();
        self.state = State::SentFirst;
        message.into_bytes()
    }

    /// Answers the server-first message with the client-final message (the proof).
    pub fn handle_server_first(&mut self, message: &[u8]) -> Result<Vec<u8>, SaslError> {
        if !matches!(self.state, State::SentFirst) {
            return Err(self.fail(SaslError::OutOfOrder));
        }
        let first = ServerFirst::parse(message).map_err(|e| self.fail(e))?;
        if first.nonce.len() <= self.nonce.len() || !first.nonce.starts_with(&self.nonce) {
            return Err(self.fail(SaslError::NonceMismatch));
        }
        check_iterations(first.iterations).map_err(|e| self.fail(e))?;
        let keys = Keys::derive(self.hash, &self.password, &first.salt, first.iterations);
        self.password.fill(0);
        self.password.clear();
        let without_proof = ClientFinal::without_proof("n,,", &first.nonce);
        let server_first = std::str::from_utf8(message)
            .map_err(|_| self.fail(SaslError::Malformed("not UTF-8")))?;
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let client_signature = self.hash.hmac(&keys.stored_key, auth_message.as_bytes());
        let proof = xor(&keys.client_key, &client_signature);
        let server_signature = self.hash.hmac(&keys.server_key, auth_message.as_bytes());
        self.state = State::SentFinal { server_signature };
        Ok(ClientFinal::format(&without_proof, &proof).into_bytes())
    }

    /// Checks the server-final message: the server must prove that it knows the
    /// credential, else the exchange fails with
    /// [`SaslError::ServerSignatureMismatch`].
    pub fn handle_server_final(&mut self, message: &[u8]) -> Result<(), SaslError> {
        let State::SentFinal { server_signature } =
            std::mem::replace(&mut self.state, State::Failed)
        else {
            return Err(SaslError::OutOfOrder);
        };
        match ServerFinal::parse(message)? {
            ServerFinal::Error(e) => Err(SaslError::ServerError(e)),
            ServerFinal::Verifier(v) if ct_eq(&v, &server_signature) => {
                self.state = State::Done;
                Ok(())
            }
            ServerFinal::Verifier(_) => Err(SaslError::ServerSignatureMismatch),
        }
    }

    /// Takes the server's next message: server-first gives the client-final
    /// message, server-final completes the exchange (`None`).
    pub fn step(&mut self, server: &[u8]) -> Result<Option<Vec<u8>>, SaslError> {
        match self.state {
            State::SentFirst => self.handle_server_first(server).map(Some),
            State::SentFinal { .. } => self.handle_server_final(server).map(|()| None),
            State::Initial | State::Done | State::Failed => Err(self.fail(SaslError::OutOfOrder)),
        }
    }

    /// Whether the server's signature was verified.
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    fn fail(&mut self, error: SaslError) -> SaslError {
        self.state = State::Failed;
        error
    }
}
