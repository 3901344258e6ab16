//! SaslAuthenticate (key 36), versions 0–2: one round of the exchange a
//! SaslHandshake started, the mechanism's bytes carried in the request.
//!
//! Answered by the connection's authentication gate (`security::gate`), not by
//! `dispatch`, because it changes the connection's state. A failed round (unknown
//! user, wrong password, refused token, malformed bytes) is answered with
//! SASL_AUTHENTICATION_FAILED and a message, and the connection is then closed, as
//! Kafka does. A completed login answers `session_lifetime_ms` (v1+, KIP-368):
//! the credential's remaining life bounded by `connections.max.reauth.ms`
//! (`security::reauth`). A re-authentication must keep the mechanism and the
//! principal of the session it renews.
//!
//! Deviations from Apache Kafka: none known. An OAUTHBEARER refusal's message is
//! the RFC 7628 JSON (`{"status":"invalid_token"}`), as Kafka sends it; the
//! reason goes to the log only.

use std::time::Duration;

use baton_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use baton_protocol::sasl::{CredentialStore, SaslError, ServerSession, ServerStep};
use baton_protocol::ErrorCode;
use bytes::Bytes;

use crate::security::reauth::{session_lifetime_ms, Session};
use crate::wire::{decode, encode, DispatchError};

/// What a round leads to.
#[derive(Debug)]
pub(crate) enum Round {
    /// The exchange goes on: the client sends another SaslAuthenticate.
    Continue,
    /// The client is authenticated as `principal`; the session lasts
    /// `lifetime_ms` (`None`: for ever).
    Authenticated {
        /// Who logged in.
        principal: String,
        /// The session lifetime sent to the client.
        lifetime_ms: Option<i64>,
    },
    /// Authentication failed (the reason for the log); the connection closes
    /// after the answer.
    Failed(String),
}

/// Runs one round of `session` with the client's bytes. `previous` is the
/// session being renewed when this is a re-authentication; `now_ms` is the
/// node's wall clock, which a token's expiry is counted from.
pub(crate) fn handle(
    frame: Bytes,
    version: i16,
    session: &mut ServerSession,
    store: &dyn CredentialStore,
    max_reauth: Duration,
    now_ms: i64,
    previous: Option<&Session>,
) -> Result<(Bytes, Round), DispatchError> {
    let (header, request) = decode::<SaslAuthenticateRequest>(frame, version)?;
    let mechanism = session.mechanism();
    let during = if previous.is_some() {
        "re-authentication"
    } else {
        "authentication"
    };
    let failed = |message: String, reason: String| {
        (
            answer(
                ErrorCode::SaslAuthenticationFailed,
                Some(message),
                Vec::new(),
                0,
            ),
            Round::Failed(reason),
        )
    };
    let (response, round) = match previous {
        Some(previous) if previous.mechanism != mechanism => {
            let message = format!(
                "SASL mechanism '{mechanism}' requested by client is not supported for \
                 re-authentication of mechanism '{}'",
                previous.mechanism
            );
            failed(message.clone(), message)
        }
        _ => match session.step(&request.auth_bytes, store) {
            Ok(ServerStep::Challenge(bytes)) => {
                (answer(ErrorCode::None, None, bytes, 0), Round::Continue)
            }
            Ok(ServerStep::Done {
                principal,
                final_bytes,
                expires_at_ms,
            }) => match previous {
                Some(previous) if previous.principal != principal => {
                    let message = format!(
                        "Cannot change principals during re-authentication from User.{}: User.{principal}",
                        previous.principal
                    );
                    failed(message.clone(), message)
                }
                _ => {
                    let lifetime_ms = session_lifetime_ms(now_ms, expires_at_ms, max_reauth);
                    (
                        answer(ErrorCode::None, None, final_bytes, lifetime_ms.unwrap_or(0)),
                        Round::Authenticated {
                            principal,
                            lifetime_ms,
                        },
                    )
                }
            },
            Err(SaslError::TokenRejected(rejection)) => failed(
                rejection.challenge(),
                format!("{mechanism} {during} failed: {rejection}"),
            ),
            Err(e) => {
                let message = match e {
                    SaslError::InvalidCredentials => format!(
                        "Authentication failed during {during} due to invalid credentials \
                         with SASL mechanism {mechanism}"
                    ),
                    other => {
                        format!("Authentication failed with SASL mechanism {mechanism}: {other}")
                    }
                };
                failed(message.clone(), message)
            }
        },
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
        0,
    );
    encode::<SaslAuthenticateRequest>(header.correlation_id, version, &response)
}

fn answer(
    error: ErrorCode,
    message: Option<String>,
    bytes: Vec<u8>,
    session_lifetime_ms: i64,
) -> SaslAuthenticateResponse {
    SaslAuthenticateResponse {
        error_code: error.code(),
        error_message: message,
        auth_bytes: Bytes::from(bytes),
        session_lifetime_ms,
    }
}
