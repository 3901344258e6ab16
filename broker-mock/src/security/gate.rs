//! One connection's authentication state, which every request frame passes
//! through before dispatch (for the broker's listener and the controller's alike).
//!
//! On a SASL listener, before authentication completes only ApiVersions,
//! SaslHandshake and SaslAuthenticate are answered; any other request closes the
//! connection. A refused handshake or a failed SaslAuthenticate is answered, then
//! the connection is closed, as Kafka does. SASL requests where no exchange is
//! expected (a listener without SASL, or once authenticated without a session
//! lifetime) get ILLEGAL_SASL_STATE, as Kafka's request handler answers them.
//!
//! Re-authentication (KIP-368, `reauth.rs`): a session with a lifetime may run
//! SaslHandshake and SaslAuthenticate again (at most once a second), keeping its
//! mechanism and principal; once the session has expired, any request other than
//! ApiVersions and that exchange closes the connection.

use baton_protocol::messages::{ApiVersionsRequest, SaslAuthenticateRequest, SaslHandshakeRequest};
use baton_protocol::sasl::ServerSession;
use baton_protocol::{Message, RequestHeader};
use bytes::Bytes;
use tokio::time::Instant;

use std::sync::Arc;

use super::listener::ListenerSecurity;
use super::reauth::Session;
use super::sasl::SaslSettings;
use super::scram_store::ScramStore;
use crate::handlers::sasl_authenticate::{self, Round};
use crate::handlers::sasl_handshake::{self, Handshake};
use crate::refusals::RefusalReason;
use crate::wire::DispatchError;

/// What the server does with a request frame.
#[derive(Debug)]
pub(crate) enum Admission {
    /// Hand the frame to the listener's dispatch.
    Dispatch(Bytes),
    /// Send this response; the connection goes on.
    Answer(Bytes),
    /// Send this response, then close the connection for the given reason.
    AnswerAndClose(Bytes, RefusalReason, String),
    /// Close the connection for the given reason without an answer.
    Close(RefusalReason, String),
}

enum State {
    /// A listener without SASL: everything is dispatched.
    Open,
    /// A SASL listener before the handshake.
    AwaitingHandshake,
    /// The handshake chose a mechanism; SaslAuthenticate rounds go on. `renewing`
    /// is the session being re-authenticated, if this is a re-authentication.
    Exchanging {
        session: Box<ServerSession>,
        renewing: Option<Session>,
    },
    /// Authenticated.
    Authenticated(Session),
}

/// One connection's authentication state.
pub(crate) struct ConnectionAuth {
    sasl: SaslSettings,
    /// The node's SCRAM users.
    scram: Arc<ScramStore>,
    state: State,
}

impl std::fmt::Debug for ConnectionAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.state {
            State::Open => "open",
            State::AwaitingHandshake => "awaiting handshake",
            State::Exchanging { .. } => "exchanging",
            State::Authenticated(_) => "authenticated",
        };
        f.debug_struct("ConnectionAuth")
            .field("state", &state)
            .field("principal", &self.principal())
            .finish()
    }
}

impl ConnectionAuth {
    /// The state of a new connection on a listener with `security`, checking
    /// SCRAM logins against the node's `scram` users.
    pub(crate) fn new(security: &ListenerSecurity, scram: Arc<ScramStore>) -> ConnectionAuth {
        let state = if security.protocol.uses_sasl() {
            State::AwaitingHandshake
        } else {
            State::Open
        };
        ConnectionAuth {
            sasl: security.sasl.clone(),
            scram,
            state,
        }
    }

    /// The authenticated principal (the SASL user name), kept while the session
    /// re-authenticates; `None` before authentication and on listeners without
    /// SASL.
    pub(crate) fn principal(&self) -> Option<&str> {
        match &self.state {
            State::Authenticated(session)
            | State::Exchanging {
                renewing: Some(session),
                ..
            } => Some(&session.principal),
            _ => None,
        }
    }

    /// Decides what happens to `frame`. `Err` closes the connection (a frame that
    /// does not decode).
    pub(crate) fn admit(&mut self, frame: Bytes) -> Result<Admission, DispatchError> {
        let (api_key, version, _) = RequestHeader::peek(&frame).map_err(DispatchError::Peek)?;
        match api_key {
            SaslHandshakeRequest::API_KEY => self.handshake(frame, version),
            SaslAuthenticateRequest::API_KEY => self.authenticate(frame, version),
            _ if api_key == ApiVersionsRequest::API_KEY => Ok(Admission::Dispatch(frame)),
            _ => match &self.state {
                State::Open => Ok(Admission::Dispatch(frame)),
                State::Authenticated(session) if !session.expired(Instant::now()) => {
                    Ok(Admission::Dispatch(frame))
                }
                State::Authenticated(session) => {
                    self.sasl.stats().note_expired();
                    Ok(Admission::Close(
                        RefusalReason::UnauthenticatedRequest,
                        format!(
                            "api key {api_key} after the SASL session of {} expired \
                         (not re-authenticated in time)",
                            session.principal
                        ),
                    ))
                }
                State::Exchanging {
                    renewing: Some(_), ..
                } => Ok(Admission::Close(
                    RefusalReason::UnauthenticatedRequest,
                    format!("api key {api_key} during SASL re-authentication"),
                )),
                _ => Ok(Admission::Close(
                    RefusalReason::UnauthenticatedRequest,
                    format!("api key {api_key} before SASL authentication completed"),
                )),
            },
        }
    }

    fn handshake(&mut self, frame: Bytes, version: i16) -> Result<Admission, DispatchError> {
        let renewing = match &self.state {
            State::AwaitingHandshake => None,
            State::Authenticated(session) if session.may_reauthenticate(Instant::now()) => {
                Some(session.clone())
            }
            State::Exchanging { .. } => {
                return Ok(Admission::AnswerAndClose(
                    sasl_handshake::illegal_state(frame, version)?,
                    RefusalReason::SaslState,
                    "second SaslHandshake during a SASL exchange".into(),
                ))
            }
            State::Open | State::Authenticated(_) => {
                return Ok(Admission::Answer(sasl_handshake::illegal_state(
                    frame, version,
                )?))
            }
        };
        let (answer, outcome) = sasl_handshake::handle(frame, version, self.sasl.mechanisms())?;
        match outcome {
            Handshake::Accepted(session) => {
                let renewing = renewing.map(|mut s| {
                    s.reauth_started = Some(Instant::now());
                    s
                });
                self.state = State::Exchanging {
                    session: Box::new(session),
                    renewing,
                };
                Ok(Admission::Answer(answer))
            }
            Handshake::Refused(reason) => Ok(Admission::AnswerAndClose(
                answer,
                RefusalReason::SaslAuthentication,
                reason,
            )),
        }
    }

    fn authenticate(&mut self, frame: Bytes, version: i16) -> Result<Admission, DispatchError> {
        let State::Exchanging { session, renewing } = &mut self.state else {
            return match self.state {
                State::AwaitingHandshake => Ok(Admission::AnswerAndClose(
                    sasl_authenticate::illegal_state(frame, version)?,
                    RefusalReason::SaslState,
                    "SaslAuthenticate before SaslHandshake".into(),
                )),
                _ => Ok(Admission::Answer(sasl_authenticate::illegal_state(
                    frame, version,
                )?)),
            };
        };
        let max_reauth = self.sasl.connections_max_reauth();
        let now_ms = self.sasl.now_ms();
        let (answer, round) = self.scram.with_credentials(&self.sasl, |users| {
            sasl_authenticate::handle(
                frame,
                version,
                session,
                users,
                max_reauth,
                now_ms,
                renewing.as_ref(),
            )
        })?;
        match round {
            Round::Continue => Ok(Admission::Answer(answer)),
            Round::Authenticated {
                principal,
                lifetime_ms,
            } => {
                let mechanism = session.mechanism();
                let reauth = renewing.is_some();
                tracing::debug!(%principal, %mechanism, reauth, ?lifetime_ms, "SASL authentication succeeded");
                self.sasl.stats().note_authenticated(reauth);
                let now = Instant::now();
                self.state = State::Authenticated(Session {
                    principal,
                    mechanism,
                    expires: lifetime_ms
                        .map(|ms| now + std::time::Duration::from_millis(ms as u64)),
                    reauth_started: renewing.as_ref().and_then(|s| s.reauth_started),
                });
                Ok(Admission::Answer(answer))
            }
            Round::Failed(reason) => {
                self.sasl.stats().note_failure();
                Ok(Admission::AnswerAndClose(
                    answer,
                    RefusalReason::SaslAuthentication,
                    reason,
                ))
            }
        }
    }
}
