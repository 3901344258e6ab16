//! The broker's side of [`envelope`], shared by its server, its handlers and the
//! controller: decode a request frame, encode a response frame, and the in-order
//! [`Reply`] a handler gives the connection's writer.
//! [`DispatchError`] says why a request closes its connection instead.

use baton_env::BlockingFailed;
use baton_protocol::envelope;
use baton_protocol::{DecodeError, EncodeError, Request, RequestHeader};
use bytes::Bytes;
use tokio::sync::oneshot;

use crate::rpc::RpcError;

/// Why a request closes its connection instead of being answered.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DispatchError {
    /// The frame is too short to name its API key and version.
    #[error("{0}")]
    Peek(#[source] DecodeError),
    /// No handler for this API key.
    #[error("unknown api key {api_key} v{version} (client id {client_id})")]
    UnknownApiKey {
        api_key: i16,
        version: i16,
        client_id: ClientId,
    },
    /// The controller serves only its private and admin APIs.
    #[error("controller: unsupported api key {api_key} v{version} (client id {client_id})")]
    ControllerApiKey {
        api_key: i16,
        version: i16,
        client_id: ClientId,
    },
    /// The API key is known, the version is not.
    #[error("unsupported version {version} of api key {api_key} (client id {client_id})")]
    UnsupportedVersion {
        api_key: i16,
        version: i16,
        client_id: ClientId,
    },
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
    Handler {
        api_key: i16,
        source: BlockingFailed,
    },
    /// The produce handler's blocking task panicked or was cancelled.
    #[error("produce handler failed: {0}")]
    ProduceHandler(#[source] BlockingFailed),
    /// The controller's blocking task panicked or was cancelled.
    #[error("controller task failed: {0}")]
    ControllerTask(#[source] BlockingFailed),
    /// A request only a cluster node forwards reached a standalone node.
    #[error("not a cluster node")]
    NotAClusterNode,
    /// Forwarding an admin request to the controller failed.
    #[error("forwarding {api}: {source}")]
    Forward { api: &'static str, source: RpcError },
}

/// A request's client id as its header carries it, for the logs of refused
/// requests (whose header may not decode in full).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClientId(Option<String>);

impl ClientId {
    /// Longest client id kept, in bytes; a longer one is cut (the log line stays
    /// short whatever the client sends).
    const MAX_BYTES: usize = 256;

    /// Reads the client id that request headers v1 and v2 put after the correlation
    /// id (a nullable string with a 2-byte length, in both). Absent, null or
    /// truncated ids are `None`; bytes that are not UTF-8 are replaced.
    pub(crate) fn peek(frame: &[u8]) -> ClientId {
        let Some(len) = frame.get(8..10) else {
            return ClientId(None);
        };
        let len = i16::from_be_bytes([len[0], len[1]]);
        let Ok(len) = usize::try_from(len) else {
            return ClientId(None);
        };
        let Some(bytes) = frame.get(10..10 + len) else {
            return ClientId(None);
        };
        let bytes = &bytes[..len.min(Self::MAX_BYTES)];
        ClientId(Some(String::from_utf8_lossy(bytes).into_owned()))
    }
}

impl std::fmt::Display for ClientId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(id) => write!(f, "{id:?}"),
            None => f.write_str("none"),
        }
    }
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
    if !R::supports(version) {
        return Err(DispatchError::UnsupportedVersion {
            api_key: R::API_KEY,
            version,
            client_id: ClientId::peek(&frame),
        });
    }
    let (header, body) = envelope::split_request::<R>(frame, version).map_err(|source| {
        DispatchError::BadHeader {
            api_key: R::API_KEY,
            source,
        }
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
