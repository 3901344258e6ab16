//! SaslHandshake (key 17), version 1: the client names its mechanism.
//!
//! Answered by the connection's authentication gate (`security::gate`), not by
//! `dispatch`, because it changes the connection's state. An enabled mechanism
//! starts an exchange; any other is answered with UNSUPPORTED_SASL_MECHANISM and
//! the enabled list, and the connection is then closed, as Kafka does.
//!
//! Deviations from Apache Kafka: version 0 (raw SASL tokens after the handshake,
//! deprecated since KIP-152) is not served: it closes the connection.

use baton_protocol::messages::{SaslHandshakeRequest, SaslHandshakeResponse};
use baton_protocol::sasl::{Mechanism, ServerSession};
use baton_protocol::{ErrorCode, Message};
use bytes::Bytes;

use crate::wire::{decode, encode, ClientId, DispatchError};

/// The only version served.
pub(crate) const VERSION: i16 = 1;

/// What a handshake leads to.
#[derive(Debug)]
pub(crate) enum Handshake {
    /// The mechanism is enabled: its exchange, awaiting SaslAuthenticate.
    Accepted(ServerSession),
    /// Refused (the reason for the log); the connection closes after the answer.
    Refused(String),
}

/// Answers a handshake on a listener with `enabled` mechanisms.
pub(crate) fn handle(
    frame: Bytes,
    version: i16,
    enabled: &[Mechanism],
) -> Result<(Bytes, Handshake), DispatchError> {
    if version != VERSION {
        return Err(DispatchError::UnsupportedVersion {
            api_key: SaslHandshakeRequest::API_KEY,
            version,
            client_id: ClientId::peek(&frame),
        });
    }
    let (header, request) = decode::<SaslHandshakeRequest>(frame, version)?;
    let mechanisms = enabled.iter().map(|m| m.name().to_owned()).collect();
    let chosen = Mechanism::from_name(&request.mechanism).filter(|m| enabled.contains(m));
    let (error, outcome) = match chosen.map(ServerSession::new) {
        Some(Ok(session)) => (ErrorCode::None, Handshake::Accepted(session)),
        Some(Err(e)) => (
            ErrorCode::IllegalSaslState,
            Handshake::Refused(format!("cannot start {}: {e}", request.mechanism)),
        ),
        None => (
            ErrorCode::UnsupportedSaslMechanism,
            Handshake::Refused(format!(
                "unsupported SASL mechanism {:?}",
                truncated(&request.mechanism)
            )),
        ),
    };
    let response = SaslHandshakeResponse {
        error_code: error.code(),
        mechanisms,
    };
    Ok((
        encode::<SaslHandshakeRequest>(header.correlation_id, version, &response)?,
        outcome,
    ))
}

/// ILLEGAL_SASL_STATE, for a handshake where none is expected (a listener without
/// SASL, an exchange under way or complete), as Kafka answers one.
pub(crate) fn illegal_state(frame: Bytes, version: i16) -> Result<Bytes, DispatchError> {
    let (header, _) = decode::<SaslHandshakeRequest>(frame, version)?;
    let response = SaslHandshakeResponse {
        error_code: ErrorCode::IllegalSaslState.code(),
        mechanisms: Vec::new(),
    };
    encode::<SaslHandshakeRequest>(header.correlation_id, version, &response)
}

/// At most 64 characters of a client-chosen name, for a log line.
fn truncated(name: &str) -> &str {
    match name.char_indices().nth(64) {
        Some((at, _)) => &name[..at],
        None => name,
    }
}
