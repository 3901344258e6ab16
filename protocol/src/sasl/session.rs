//! One SASL exchange per side, whatever the mechanism: [`ClientSession`] and
//! [`ServerSession`]. A new mechanism (OAUTHBEARER) is one more variant of each.

use super::plain;
use super::scram::{ScramClient, ScramServer};
use super::{CredentialStore, Mechanism, SaslError, Secret};

/// The client's side of one exchange.
#[derive(Debug)]
pub struct ClientSession {
    mechanism: Mechanism,
    inner: ClientInner,
}

#[derive(Debug)]
enum ClientInner {
    /// PLAIN: the one message, until it is sent.
    Plain {
        message: Option<Vec<u8>>,
        sent: bool,
        done: bool,
    },
    Scram(Box<ScramClient>),
}

impl ClientSession {
    /// A new exchange for `user` with `mechanism`.
    pub fn new(
        mechanism: Mechanism,
        user: &str,
        password: Secret,
    ) -> Result<ClientSession, SaslError> {
        let inner = match mechanism.scram_hash() {
            Some(hash) => ClientInner::Scram(Box::new(ScramClient::new(
                hash,
                user,
                password.expose().as_bytes(),
            )?)),
            None => ClientInner::Plain {
                message: Some(plain::client_message(user, &password)),
                sent: false,
                done: false,
            },
        };
        Ok(ClientSession { mechanism, inner })
    }

    /// The mechanism of this exchange.
    pub fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    /// The client's first message. Call once, first.
    pub fn initial_response(&mut self) -> Vec<u8> {
        match &mut self.inner {
            ClientInner::Plain { message, sent, .. } => {
                *sent = true;
                message.take().unwrap_or_default()
            }
            ClientInner::Scram(scram) => scram.client_first(),
        }
    }

    /// Takes the server's bytes of the last round and returns the next message to
    /// send, or `None` when the exchange is complete on this side.
    pub fn step(&mut self, server: &[u8]) -> Result<Option<Vec<u8>>, SaslError> {
        match &mut self.inner {
            ClientInner::Plain { sent, done, .. } => {
                if !*sent || *done {
                    return Err(SaslError::OutOfOrder);
                }
                *done = true;
                Ok(None)
            }
            ClientInner::Scram(scram) => scram.step(server),
        }
    }
}

/// What the broker does after a client's message.
#[derive(Debug, PartialEq, Eq)]
pub enum ServerStep {
    /// Send these bytes and wait for the client's next message.
    Challenge(Vec<u8>),
    /// Authenticated as `principal`; send `final_bytes` (empty for PLAIN).
    Done {
        /// The authenticated user name.
        principal: String,
        /// The last bytes for the client (SCRAM's server signature).
        final_bytes: Vec<u8>,
    },
}

/// The broker's side of one exchange.
#[derive(Debug)]
pub struct ServerSession {
    mechanism: Mechanism,
    inner: ServerInner,
}

#[derive(Debug)]
enum ServerInner {
    Plain {
        over: bool,
    },
    Scram {
        server: Box<ScramServer>,
        sent_first: bool,
    },
}

impl ServerSession {
    /// A new exchange with `mechanism`.
    pub fn new(mechanism: Mechanism) -> Result<ServerSession, SaslError> {
        let inner = match mechanism.scram_hash() {
            Some(hash) => ServerInner::Scram {
                server: Box::new(ScramServer::new(hash)?),
                sent_first: false,
            },
            None => ServerInner::Plain { over: false },
        };
        Ok(ServerSession { mechanism, inner })
    }

    /// The mechanism of this exchange.
    pub fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    /// Takes the client's next message.
    pub fn step(
        &mut self,
        client: &[u8],
        users: &dyn CredentialStore,
    ) -> Result<ServerStep, SaslError> {
        match &mut self.inner {
            ServerInner::Plain { over } => {
                if std::mem::replace(over, true) {
                    return Err(SaslError::OutOfOrder);
                }
                let principal = plain::verify(client, users)?;
                Ok(ServerStep::Done {
                    principal,
                    final_bytes: Vec::new(),
                })
            }
            ServerInner::Scram { server, sent_first } => {
                if std::mem::replace(sent_first, true) {
                    let (principal, final_bytes) = server.handle_client_final(client)?;
                    Ok(ServerStep::Done {
                        principal,
                        final_bytes,
                    })
                } else {
                    Ok(ServerStep::Challenge(
                        server.handle_client_first(client, users)?,
                    ))
                }
            }
        }
    }
}
