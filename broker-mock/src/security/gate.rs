//! One connection's authentication state, which every request frame passes
//! through before dispatch (for the broker's listener and the controller's alike).
//!
//! On a SASL listener, before authentication completes only ApiVersions,
//! SaslHandshake and SaslAuthenticate are answered; any other request closes the
//! connection. A refused handshake or a failed SaslAuthenticate is answered, then
//! the connection is closed, as Kafka does. SASL requests where no exchange is
//! expected (a listener without SASL, or once authenticated) get
//! ILLEGAL_SASL_STATE, as Kafka's request handler answers them.

use baton_protocol::messages::{ApiVersionsRequest, SaslAuthenticateRequest, SaslHandshakeRequest};
use baton_protocol::sasl::ServerSession;
use baton_protocol::{Message, RequestHeader};
use bytes::Bytes;

use super::listener::ListenerSecurity;
use super::sasl::SaslSettings;
use crate::handlers::sasl_authenticate::{self, Round};
use crate::handlers::sasl_handshake::{self, Handshake};
use crate::wire::DispatchError;

/// What the server does with a request frame.
#[derive(Debug)]
pub(crate) enum Admission {
    /// Hand the frame to the listener's dispatch.
    Dispatch(Bytes),
    /// Send this response; the connection goes on.
    Answer(Bytes),
    /// Send this response, then close the connection for the given reason.
    AnswerAndClose(Bytes, String),
    /// Close the connection for the given reason without an answer.
    Close(String),
}

enum State {
    /// A listener without SASL: everything is dispatched.
    Open,
    /// A SASL listener before the handshake.
    AwaitingHandshake,
    /// The handshake chose a mechanism; SaslAuthenticate rounds go on.
    Exchanging(Box<ServerSession>),
    /// Authenticated.
    Authenticated,
}

/// One connection's authentication state.
pub(crate) struct ConnectionAuth {
    sasl: SaslSettings,
    state: State,
    /// The SASL user name once authenticated.
    principal: Option<String>,
}

impl std::fmt::Debug for ConnectionAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.state {
            State::Open => "open",
            State::AwaitingHandshake => "awaiting handshake",
            State::Exchanging(_) => "exchanging",
            State::Authenticated => "authenticated",
        };
        f.debug_struct("ConnectionAuth")
            .field("state", &state)
            .finish()
    }
}

impl ConnectionAuth {
    /// The state of a new connection on a listener with `security`.
    pub(crate) fn new(security: &ListenerSecurity) -> ConnectionAuth {
        let state = if security.protocol.uses_sasl() {
            State::AwaitingHandshake
        } else {
            State::Open
        };
        ConnectionAuth {
            sasl: security.sasl.clone(),
            state,
            principal: None,
        }
    }

    /// The SASL user name this connection authenticated as, if it did.
    pub(crate) fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }

    /// Decides what happens to `frame`. `Err` closes the connection (a frame that
    /// does not decode).
    pub(crate) fn admit(&mut self, frame: Bytes) -> Result<Admission, DispatchError> {
        let (api_key, version, _) = RequestHeader::peek(&frame).map_err(DispatchError::Peek)?;
        match api_key {
            SaslHandshakeRequest::API_KEY => self.handshake(frame, version),
            SaslAuthenticateRequest::API_KEY => self.authenticate(frame, version),
            _ => match self.state {
                State::Open | State::Authenticated => Ok(Admission::Dispatch(frame)),
                _ if api_key == ApiVersionsRequest::API_KEY => Ok(Admission::Dispatch(frame)),
                _ => Ok(Admission::Close(format!(
                    "api key {api_key} before SASL authentication completed"
                ))),
            },
        }
    }

    fn handshake(&mut self, frame: Bytes, version: i16) -> Result<Admission, DispatchError> {
        match self.state {
            State::AwaitingHandshake => {
                let (answer, outcome) =
                    sasl_handshake::handle(frame, version, self.sasl.mechanisms())?;
                match outcome {
                    Handshake::Accepted(session) => {
                        self.state = State::Exchanging(Box::new(session));
                        Ok(Admission::Answer(answer))
                    }
                    Handshake::Refused(reason) => Ok(Admission::AnswerAndClose(answer, reason)),
                }
            }
            State::Exchanging(_) => Ok(Admission::AnswerAndClose(
                sasl_handshake::illegal_state(frame, version)?,
                "second SaslHandshake during a SASL exchange".into(),
            )),
            State::Open | State::Authenticated => Ok(Admission::Answer(
                sasl_handshake::illegal_state(frame, version)?,
            )),
        }
    }

    fn authenticate(&mut self, frame: Bytes, version: i16) -> Result<Admission, DispatchError> {
        match &mut self.state {
            State::Exchanging(session) => {
                let (answer, round) =
                    sasl_authenticate::handle(frame, version, session, self.sasl.users())?;
                match round {
                    Round::Continue => Ok(Admission::Answer(answer)),
                    Round::Authenticated(principal) => {
                        tracing::debug!(%principal, mechanism = %session.mechanism(), "SASL authentication succeeded");
                        self.state = State::Authenticated;
                        self.principal = Some(principal);
                        Ok(Admission::Answer(answer))
                    }
                    Round::Failed(reason) => Ok(Admission::AnswerAndClose(answer, reason)),
                }
            }
            State::AwaitingHandshake => Ok(Admission::AnswerAndClose(
                sasl_authenticate::illegal_state(frame, version)?,
                "SaslAuthenticate before SaslHandshake".into(),
            )),
            State::Open | State::Authenticated => Ok(Admission::Answer(
                sasl_authenticate::illegal_state(frame, version)?,
            )),
        }
    }
}
