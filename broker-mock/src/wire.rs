//! The broker's side of [`envelope`], shared by its server, its handlers and the
//! controller: decode a request frame, encode a response frame, and the in-order
//! [`Reply`] a handler gives the connection's writer.
//! [`DispatchError`] says why a request closes its connection instead.

use baton_protocol::envelope;
use baton_protocol::{DecodeError, EncodeError, Request, RequestHeader};
use bytes::Bytes;
use tokio::sync::oneshot;
use tokio::task::JoinError;

use crate::rpc::RpcError;

/// Why a request closes its connection instead of being answered.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DispatchError {
    /// The frame is too short to name its API key and version.
    #[error("{0}")]
    Peek(#[source] DecodeError),
    /// No handler for this API key.
    #[error("unknown api key {0}")]
    UnknownApiKey(i16),
    /// The controller serves only its private and admin APIs.
    #[error("controller: unsupported api key {0}")]
    ControllerApiKey(i16),
    /// The API key is known, the version is not.
    #[error("unsupported version {version} of api key {api_key}")]
    UnsupportedVersion { api_key: i16, version: i16 },
    /// The request header does not decode.
    #[error("bad request header for api key {api_key}: {source}")]
    BadHeader { api_key: i16, source: DecodeError },
    /// The request body does not decode in its version.
    #[error("bad api key {api_key} v{version} request: {source}")]
    BadRequest {
        api_key: i16,
        version: i16,
        source: DecodeError,
    },
    /// The response does not encode in the request's version.
    #[error("encoding api key {api_key} v{version} response: {source}")]
    Encode {
        api_key: i16,
        version: i16,
        source: EncodeError,
    },
    /// The handler's blocking task panicked or was cancelled.
    #[error("handler for api key {api_key} failed: {source}")]
    Handler { api_key: i16, source: JoinError },
    /// The produce handler's blocking task panicked or was cancelled.
    #[error("produce handler failed: {0}")]
    ProduceHandler(#[source] JoinError),
    /// The controller's blocking task panicked or was cancelled.
    #[error("controller task failed: {0}")]
    ControllerTask(#[source] JoinError),
    /// A request only a cluster node forwards reached a standalone node.
    #[error("not a cluster node")]
    NotAClusterNode,
    /// Forwarding an admin request to the controller failed.
    #[error("forwarding {api}: {source}")]
    Forward { api: &'static str, source: RpcError },
}

/// A reply to one request, in request order.
#[derive(Debug)]
pub(crate) enum Reply {
    /// Ready now; `None` means no response at all (acks=0).
    Now(Option<Bytes>),
    /// Computed by another task (long-polling fetch); `None` as above.
    Later(oneshot::Receiver<Option<Bytes>>),
}

/// Decodes a whole request frame (header and body) in `version` through
/// [`envelope`]; bytes left after the body are ignored, as Apache Kafka does.
pub(crate) fn decode<R: Request>(
    frame: Bytes,
    version: i16,
) -> Result<(RequestHeader, R), DispatchError> {
    let (header, body) =
        envelope::split_request::<R>(frame, version).map_err(|source| match source {
            DecodeError::UnsupportedVersion { api_key, version } => {
                DispatchError::UnsupportedVersion { api_key, version }
            }
            source => DispatchError::BadHeader {
                api_key: R::API_KEY,
                source,
            },
        })?;
    let (body, trailing) = envelope::decode_request_body::<R>(body, version).map_err(|source| {
        DispatchError::BadRequest {
            api_key: R::API_KEY,
            version,
            source,
        }
    })?;
    if trailing > 0 {
        tracing::debug!(
            api_key = R::API_KEY,
            version,
            trailing,
            "ignoring bytes after the request body"
        );
    }
    Ok((header, body))
}

/// Encodes a response frame (size, response header, body) through [`envelope`].
pub(crate) fn encode<R: Request>(
    correlation_id: i32,
    version: i16,
    response: &R::Response,
) -> Result<Bytes, DispatchError> {
    envelope::encode_response::<R>(correlation_id, version, response).map_err(|source| {
        DispatchError::Encode {
            api_key: R::API_KEY,
            version,
            source,
        }
    })
}
