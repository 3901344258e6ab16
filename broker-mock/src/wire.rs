//! The request/response framing that the broker's server, its handlers and the
//! cluster's private RPC share: decode a request frame, encode a response frame, and
//! the in-order [`Reply`] a handler gives the connection's writer.

use baton_protocol::frame::{begin_frame, finish_frame};
use baton_protocol::primitives::Decoder;
use baton_protocol::{Message, Request, RequestHeader, ResponseHeader};
use bytes::{Bytes, BytesMut};
use tokio::sync::oneshot;

/// A reply to one request, in request order.
#[derive(Debug)]
pub(crate) enum Reply {
    /// Ready now; `None` means no response at all (acks=0).
    Now(Option<Bytes>),
    /// Computed by another task (long-polling fetch); `None` as above.
    Later(oneshot::Receiver<Option<Bytes>>),
}

/// Decodes a whole request frame (header and body) in `version`.
///
/// Bytes left after the body are ignored, as Apache Kafka does: librdkafka 2.x
/// sends Metadata v12 "all topics" requests with 3 stray bytes after the body
/// (an unshrunk 4-byte placeholder for the null topics array).
pub(crate) fn decode<R: Request>(frame: Bytes, version: i16) -> Result<(RequestHeader, R), String> {
    if !R::supports(version) {
        return Err(format!(
            "unsupported version {version} of api key {}",
            R::API_KEY
        ));
    }
    let mut d = Decoder::new(frame);
    let header = RequestHeader::decode(&mut d, R::request_header_version(version))
        .map_err(|e| format!("bad request header for api key {}: {e}", R::API_KEY))?;
    let body = R::decode(&mut d, version, R::is_flexible(version))
        .map_err(|e| format!("bad api key {} v{version} request: {e}", R::API_KEY))?;
    if !d.is_empty() {
        tracing::debug!(
            api_key = R::API_KEY,
            version,
            trailing = d.remaining(),
            "ignoring bytes after the request body"
        );
    }
    Ok((header, body))
}

/// Encodes a response frame: size, response header, body.
pub(crate) fn encode<R: Request>(
    correlation_id: i32,
    version: i16,
    response: &R::Response,
) -> Result<Bytes, String> {
    let mut buf = BytesMut::new();
    let at = begin_frame(&mut buf);
    ResponseHeader { correlation_id }.encode(&mut buf, R::response_header_version(version));
    response
        .encode_body(&mut buf, version)
        .map_err(|e| format!("encoding api key {} v{version} response: {e}", R::API_KEY))?;
    finish_frame(&mut buf, at);
    Ok(buf.freeze())
}
