//! One SASL exchange per side, whatever the mechanism: [`ClientSession`] and
//! [`ServerSession`]. Each mechanism is one variant of each.

use super::oauthbearer::{self, InitialResponse, TokenRejection, SEPARATOR};
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
    OAuthBearer {
        message: Option<Vec<u8>>,
        state: OAuthClientState,
    },
}

/// Where the client's side of an OAUTHBEARER exchange is.
#[derive(Debug, PartialEq, Eq)]
enum OAuthClientState {
    /// The initial response is not sent yet.
    Initial,
    /// Sent; an empty answer means success, anything else is the broker's error.
    Sent,
    /// The broker refused the token with this JSON; `\x01` was sent back and
    /// the broker is expected to fail the exchange.
    Refused(String),
    /// Complete.
    Done,
}

impl ClientSession {
    /// A new exchange for `user` with `mechanism`. For OAUTHBEARER, `password` is
    /// the bearer token and `user` is not sent (see [`ClientSession::oauthbearer`]).
    pub fn new(
        mechanism: Mechanism,
        user: &str,
        password: Secret,
    ) -> Result<ClientSession, SaslError> {
        if mechanism == Mechanism::OAuthBearer {
            return ClientSession::oauthbearer(&password, &[]);
        }
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

    /// A new OAUTHBEARER exchange presenting `token`, with SASL `extensions`
    /// (KIP-342). Fails if the token or an extension has characters RFC 7628
    /// does not allow.
    pub fn oauthbearer(
        token: &Secret,
        extensions: &[(String, String)],
    ) -> Result<ClientSession, SaslError> {
        let message = oauthbearer::client_initial_response(token.expose(), extensions)?;
        Ok(ClientSession {
            mechanism: Mechanism::OAuthBearer,
            inner: ClientInner::OAuthBearer {
                message: Some(message),
                state: OAuthClientState::Initial,
            },
        })
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
            ClientInner::OAuthBearer { message, state } => {
                *state = OAuthClientState::Sent;
                message.take().unwrap_or_default()
            }
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
            ClientInner::OAuthBearer { state, .. } => match state {
                OAuthClientState::Sent if server.is_empty() => {
                    *state = OAuthClientState::Done;
                    Ok(None)
                }
                OAuthClientState::Sent => {
                    // RFC 7628 §3.2.3: acknowledge the error with a lone Control-A.
                    let json = String::from_utf8_lossy(server).into_owned();
                    *state = OAuthClientState::Refused(json);
                    Ok(Some(vec![SEPARATOR]))
                }
                OAuthClientState::Refused(json) => Err(SaslError::ServerError(json.clone())),
                OAuthClientState::Initial | OAuthClientState::Done => Err(SaslError::OutOfOrder),
            },
        }
    }
}

/// What the broker does after a client's message.
#[derive(Debug, PartialEq, Eq)]
pub enum ServerStep {
    /// Send these bytes and wait for the client's next message.
    Challenge(Vec<u8>),
    /// Authenticated as `principal`; send `final_bytes` (empty for PLAIN and
    /// OAUTHBEARER).
    Done {
        /// The authenticated user name.
        principal: String,
        /// The last bytes for the client (SCRAM's server signature).
        final_bytes: Vec<u8>,
        /// When the credential expires, in milliseconds since the Unix epoch (an
        /// OAUTHBEARER token's expiry); `None` for passwords. Bounds the session
        /// (KIP-368).
        expires_at_ms: Option<i64>,
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
    OAuthBearer(OAuthServerState),
}

/// Where the broker's side of an OAUTHBEARER exchange is.
#[derive(Debug)]
enum OAuthServerState {
    /// Waiting for the client's initial response.
    Initial,
    /// The token was refused with this challenge; waiting for the client's `\x01`.
    Refused(TokenRejection),
    /// Over (authenticated or failed).
    Over,
}

impl ServerSession {
    /// A new exchange with `mechanism`.
    pub fn new(mechanism: Mechanism) -> Result<ServerSession, SaslError> {
        let inner = match mechanism.scram_hash() {
            Some(hash) => ServerInner::Scram {
                server: Box::new(ScramServer::new(hash)?),
                sent_first: false,
            },
            None if mechanism == Mechanism::OAuthBearer => {
                ServerInner::OAuthBearer(OAuthServerState::Initial)
            }
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
                    expires_at_ms: None,
                })
            }
            ServerInner::OAuthBearer(state) => {
                match std::mem::replace(state, OAuthServerState::Over) {
                    OAuthServerState::Initial => {}
                    OAuthServerState::Refused(rejection) if client == [SEPARATOR] => {
                        return Err(SaslError::TokenRejected(rejection));
                    }
                    OAuthServerState::Refused(_) | OAuthServerState::Over => {
                        return Err(SaslError::OutOfOrder)
                    }
                }
                let response = InitialResponse::parse(client)?;
                let token = match users.validate_token(response.token) {
                    Ok(token) => token,
                    Err(rejection) => {
                        let challenge = rejection.challenge().into_bytes();
                        *state = OAuthServerState::Refused(rejection);
                        return Ok(ServerStep::Challenge(challenge));
                    }
                };
                if !response.authzid.is_empty() && response.authzid != token.principal {
                    return Err(SaslError::AuthorizationIdMismatch {
                        authzid: response.authzid.to_owned(),
                        principal: token.principal,
                    });
                }
                Ok(ServerStep::Done {
                    principal: token.principal,
                    final_bytes: Vec::new(),
                    expires_at_ms: Some(token.expires_at_ms),
                })
            }
            ServerInner::Scram { server, sent_first } => {
                if std::mem::replace(sent_first, true) {
                    let (principal, final_bytes) = server.handle_client_final(client)?;
                    Ok(ServerStep::Done {
                        principal,
                        final_bytes,
                        expires_at_ms: None,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sasl::oauthbearer::{unsecured_jws, UnsecuredJwsValidator};
    use crate::sasl::{ScramCredential, ScramHash, StaticCredentials, ValidatedToken};

    /// Users plus Kafka's default token validator at a fixed time.
    struct Store(StaticCredentials);

    const NOW: i64 = 1_700_000_000_000;

    impl CredentialStore for Store {
        fn plain_password(&self, user: &str) -> Option<&Secret> {
            self.0.plain_password(user)
        }
        fn scram_credential(&self, hash: ScramHash, user: &str) -> Option<&ScramCredential> {
            self.0.scram_credential(hash, user)
        }
        fn validate_token(&self, token: &str) -> Result<ValidatedToken, TokenRejection> {
            UnsecuredJwsValidator::default().validate(token, NOW)
        }
    }

    #[test]
    fn oauthbearer_accepts_a_valid_token_in_one_round() {
        let store = Store(StaticCredentials::default());
        let token = Secret::new(unsecured_jws("alice", NOW, NOW + 60_000, &[]));
        let mut client = ClientSession::oauthbearer(&token, &[]).unwrap();
        let mut server = ServerSession::new(Mechanism::OAuthBearer).unwrap();
        let step = server.step(&client.initial_response(), &store).unwrap();
        assert_eq!(
            step,
            ServerStep::Done {
                principal: "alice".into(),
                final_bytes: Vec::new(),
                expires_at_ms: Some(NOW + 60_000),
            }
        );
        assert_eq!(client.step(&[]).unwrap(), None);
        assert!(server.step(b"again", &store).is_err());
    }

    #[test]
    fn a_refused_token_runs_kafkas_error_flow() {
        let store = Store(StaticCredentials::default());
        let expired = Secret::new(unsecured_jws("alice", NOW - 60_000, NOW - 1, &[]));
        let mut client = ClientSession::new(Mechanism::OAuthBearer, "ignored", expired).unwrap();
        let mut server = ServerSession::new(Mechanism::OAuthBearer).unwrap();
        let ServerStep::Challenge(json) = server.step(&client.initial_response(), &store).unwrap()
        else {
            panic!("expected the error challenge");
        };
        assert_eq!(json, br#"{"status":"invalid_token"}"#);
        let ack = client.step(&json).unwrap().unwrap();
        assert_eq!(ack, [SEPARATOR]);
        let err = server.step(&ack, &store).unwrap_err();
        let SaslError::TokenRejected(rejection) = err else {
            panic!("{err:?}");
        };
        assert!(rejection.reason.contains("Expiration Time"), "{rejection}");
        assert_eq!(
            client.step(&[]),
            Err(SaslError::ServerError(
                r#"{"status":"invalid_token"}"#.into()
            ))
        );
    }

    #[test]
    fn an_authzid_must_be_the_tokens_principal() {
        let store = Store(StaticCredentials::default());
        let token = unsecured_jws("alice", NOW, NOW + 60_000, &[]);
        for (authzid, ok) in [("alice", true), ("mallory", false)] {
            let msg = format!("n,a={authzid},\x01auth=Bearer {token}\x01\x01");
            let mut server = ServerSession::new(Mechanism::OAuthBearer).unwrap();
            let result = server.step(msg.as_bytes(), &store);
            assert_eq!(result.is_ok(), ok, "{result:?}");
        }
    }

    #[test]
    fn a_store_without_a_validator_refuses_tokens() {
        let users = StaticCredentials::default();
        let token = Secret::new(unsecured_jws("alice", NOW, NOW + 60_000, &[]));
        let mut client = ClientSession::oauthbearer(&token, &[]).unwrap();
        let mut server = ServerSession::new(Mechanism::OAuthBearer).unwrap();
        assert!(matches!(
            server.step(&client.initial_response(), &users),
            Ok(ServerStep::Challenge(_))
        ));
        // Anything but Control-A after the challenge is out of order.
        assert_eq!(server.step(b"x", &users), Err(SaslError::OutOfOrder));
    }

    #[test]
    fn malformed_initial_responses_fail_the_exchange() {
        let store = Store(StaticCredentials::default());
        let mut server = ServerSession::new(Mechanism::OAuthBearer).unwrap();
        assert!(matches!(
            server.step(b"n,,auth=Bearer x", &store),
            Err(SaslError::Malformed(_))
        ));
    }
}
