//! SaslAuthenticate (key 36), versions 0–2: one round of the exchange a
//! SaslHandshake started, the mechanism's bytes carried in the request.
//!
//! Answered by the connection's authentication gate (`security::gate`), not by
//! `dispatch`, because it changes the connection's state. A failed round (unknown
//! user, wrong password, malformed bytes) is answered with SASL_AUTHENTICATION_FAILED
//! and a message, and the connection is then closed, as Kafka does.
//!
//! Deviations from Apache Kafka: `session_lifetime_ms` is always 0 (no
//! re-authentication deadline, KIP-368, yet).

use baton_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use baton_protocol::sasl::{CredentialStore, SaslError, ServerSession, ServerStep};
use baton_protocol::ErrorCode;
use bytes::Bytes;

use crate::wire::{decode, encode, DispatchError};

/// What a round leads to.
#[derive(Debug)]
pub(crate) enum Round {
    /// The exchange goes on: the client sends another SaslAuthenticate.
    Continue,
    /// The client is authenticated as this principal.
    Authenticated(String),
    /// Authentication failed (the reason for the log); the connection closes
    /// after the answer.
    Failed(String),
}

/// Runs one round of `session` with the client's bytes.
pub(crate) fn handle(
    frame: Bytes,
    version: i16,
    session: &mut ServerSession,
    users: &dyn CredentialStore,
) -> Result<(Bytes, Round), DispatchError> {
    let (header, request) = decode::<SaslAuthenticateRequest>(frame, version)?;
    let mechanism = session.mechanism();
    let (response, round) = match session.step(&request.auth_bytes, users) {
        Ok(ServerStep::Challenge(bytes)) => (answer(ErrorCode::None, None, bytes), Round::Continue),
        Ok(ServerStep::Done {
            principal,
            final_bytes,
            ..
        }) => (
            answer(ErrorCode::None, None, final_bytes),
            Round::Authenticated(principal),
        ),
        Err(e) => {
            let message = match e {
                SaslError::InvalidCredentials => format!(
                    "Authentication failed during authentication due to invalid credentials \
                     with SASL mechanism {mechanism}"
                ),
                other => format!("Authentication failed with SASL mechanism {mechanism}: {other}"),
            };
            (
                answer(
                    ErrorCode::SaslAuthenticationFailed,
                    Some(message.clone()),
                    Vec::new(),
                ),
                Round::Failed(message),
            )
        }
    };
    Ok((
        encode::<SaslAuthenticateRequest>(header.correlation_id, version, &response)?,
        round,
    ))
}

/// ILLEGAL_SASL_STATE, for a SaslAuthenticate without an exchange under way.
pub(crate) fn illegal_state(frame: Bytes, version: i16) -> Result<Bytes, DispatchError> {
    let (header, _) = decode::<SaslAuthenticateRequest>(frame, version)?;
    let response = answer(
        ErrorCode::IllegalSaslState,
        Some("SaslAuthenticate request received without a SASL exchange under way".into()),
        Vec::new(),
    );
    encode::<SaslAuthenticateRequest>(header.correlation_id, version, &response)
}

fn answer(error: ErrorCode, message: Option<String>, bytes: Vec<u8>) -> SaslAuthenticateResponse {
    SaslAuthenticateResponse {
        error_code: error.code(),
        error_message: message,
        auth_bytes: Bytes::from(bytes),
        session_lifetime_ms: 0,
    }
}
