//! Request and response envelopes: a message body together with its header, the
//! one place where both sides choose header versions and lay out frames.
//!
//! Outgoing frames are encoded whole, 4-byte size prefix included, ready to be
//! written to a socket. Incoming frames are taken as [`FrameCodec`](crate::FrameCodec)
//! hands them over: the bytes after the size prefix.
//!
//! Header versions follow the request's API key and version: request header v2
//! (tagged fields) for flexible versions and v1 otherwise; response header v1 for
//! flexible versions and v0 otherwise, except ApiVersions, whose responses always
//! use v0 (KIP-511) so that a client can read them whatever version it asked for.
//!
//! The `*_segmented` encoders keep large byte fields (the records of a Produce
//! request or a Fetch response) out of line as shared [`Bytes`] segments, for a
//! vectored write without copying record data; written one after the other the
//! segments are exactly the contiguous frame.
//!
//! ```
//! use baton_protocol::envelope;
//! use baton_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
//! use bytes::Buf;
//!
//! let req = ApiVersionsRequest::default();
//! let mut frame = envelope::encode_request(7, Some("app"), &req, 3).unwrap();
//! let size = frame.get_i32() as usize; // what FrameCodec strips
//! assert_eq!(size, frame.len());
//! let (header, back) = envelope::decode_request::<ApiVersionsRequest>(frame, 3).unwrap();
//! assert_eq!((header.correlation_id, back), (7, req));
//!
//! let resp = ApiVersionsResponse::default();
//! let mut frame = envelope::encode_response::<ApiVersionsRequest>(7, 3, &resp).unwrap();
//! frame.advance(4);
//! let (header, back) = envelope::decode_response::<ApiVersionsRequest>(frame, 3).unwrap();
//! assert_eq!((header.correlation_id, back), (7, resp));
//! ```

use bytes::{Bytes, BytesMut};

use crate::error::{DecodeError, EncodeError};
use crate::frame::{begin_frame, finish_segmented_frame};
use crate::header::{encode_request_header, RequestHeader, ResponseHeader};
use crate::messages::{Message, Request};
use crate::primitives::{Decoder, Encoder};

/// The inline buffer's first allocation: a size prefix, a header and a small body
/// fit without growing it.
const HEADER_ROOM: usize = 256;

/// Encodes the frame of request `req` in `version`: size prefix, request header
/// (API key and version from `R`), body.
pub fn encode_request<R: Request>(
    correlation_id: i32,
    client_id: Option<&str>,
    req: &R,
    version: i16,
) -> Result<Bytes, EncodeError> {
    let segments = encode_request_segmented(correlation_id, client_id, req, version, usize::MAX)?;
    Ok(join(segments))
}

/// Encodes the frame of request `req` like [`encode_request`], keeping byte fields
/// of at least `min_segment` bytes out of line (see [`Encoder::segmented`]).
pub fn encode_request_segmented<R: Request>(
    correlation_id: i32,
    client_id: Option<&str>,
    req: &R,
    version: i16,
    min_segment: usize,
) -> Result<Vec<Bytes>, EncodeError> {
    let mut enc = Encoder::segmented(BytesMut::with_capacity(HEADER_ROOM), min_segment);
    let at = begin_frame(enc.buf_mut());
    encode_request_header(
        enc.buf_mut(),
        R::API_KEY,
        version,
        correlation_id,
        client_id,
        R::request_header_version(version),
    );
    req.encode_body_to(&mut enc, version)?;
    finish(enc, at)
}

/// Decodes a request frame's header in the header version of `R` at `version`, and
/// returns it with the body bytes that follow.
///
/// A version `R` does not support is [`DecodeError::UnsupportedVersion`], checked
/// before anything is read.
pub fn split_request<R: Request>(
    frame: Bytes,
    version: i16,
) -> Result<(RequestHeader, Bytes), DecodeError> {
    if !R::supports(version) {
        return Err(DecodeError::UnsupportedVersion {
            api_key: R::API_KEY,
            version,
        });
    }
    let mut d = Decoder::new(frame);
    let header = RequestHeader::decode(&mut d, R::request_header_version(version))?;
    Ok((header, d.take_rest()))
}

/// Decodes a request body in `version` and returns it with the number of bytes
/// left after it.
///
/// Bytes after the body are not an error, as in Apache Kafka: librdkafka 2.x sends
/// Metadata v12 "all topics" requests with 3 stray bytes after the body (an
/// unshrunk 4-byte placeholder for the null topics array).
pub fn decode_request_body<R: Request>(
    body: Bytes,
    version: i16,
) -> Result<(R, usize), DecodeError> {
    if !R::supports(version) {
        return Err(DecodeError::UnsupportedVersion {
            api_key: R::API_KEY,
            version,
        });
    }
    let mut d = Decoder::new(body);
    let req = R::decode(&mut d, version, R::is_flexible(version))?;
    Ok((req, d.remaining()))
}

/// Decodes a whole request frame (header and body) in `version`; bytes after the
/// body are ignored (see [`decode_request_body`]).
pub fn decode_request<R: Request>(
    frame: Bytes,
    version: i16,
) -> Result<(RequestHeader, R), DecodeError> {
    let (header, body) = split_request::<R>(frame, version)?;
    let (req, _) = decode_request_body::<R>(body, version)?;
    Ok((header, req))
}

/// Encodes the frame of a response to an `R` request in `version`: size prefix,
/// response header, body.
pub fn encode_response<R: Request>(
    correlation_id: i32,
    version: i16,
    response: &R::Response,
) -> Result<Bytes, EncodeError> {
    let segments = encode_response_segmented::<R>(correlation_id, version, response, usize::MAX)?;
    Ok(join(segments))
}

/// Encodes the frame of a response like [`encode_response`], keeping byte fields of
/// at least `min_segment` bytes out of line (see [`Encoder::segmented`]).
pub fn encode_response_segmented<R: Request>(
    correlation_id: i32,
    version: i16,
    response: &R::Response,
    min_segment: usize,
) -> Result<Vec<Bytes>, EncodeError> {
    let mut enc = Encoder::segmented(BytesMut::with_capacity(HEADER_ROOM), min_segment);
    let at = begin_frame(enc.buf_mut());
    ResponseHeader { correlation_id }.encode(enc.buf_mut(), R::response_header_version(version));
    response.encode_body_to(&mut enc, version)?;
    finish(enc, at)
}

/// Decodes a response frame's header in the header version of a response to an `R`
/// request at `version`, and returns it with the body bytes that follow.
pub fn split_response<R: Request>(
    frame: Bytes,
    version: i16,
) -> Result<(ResponseHeader, Bytes), DecodeError> {
    let mut d = Decoder::new(frame);
    let header = ResponseHeader::decode(&mut d, R::response_header_version(version))?;
    Ok((header, d.take_rest()))
}

/// Decodes a whole response frame (header and body) to an `R` request in
/// `version`; bytes after the body are an error.
pub fn decode_response<R: Request>(
    frame: Bytes,
    version: i16,
) -> Result<(ResponseHeader, R::Response), DecodeError> {
    let (header, body) = split_response::<R>(frame, version)?;
    Ok((header, R::Response::decode_body(body, version)?))
}

/// Fills in the size prefix begun at `at` and cuts the encoding into segments; a
/// frame whose size does not fit the prefix is an error.
fn finish(mut enc: Encoder, at: usize) -> Result<Vec<Bytes>, EncodeError> {
    if enc.len() - at - 4 > i32::MAX as usize {
        return Err(EncodeError::TooLarge("frame"));
    }
    finish_segmented_frame(&mut enc, at);
    Ok(enc.finish())
}

/// The one segment of a contiguous encoding.
fn join(segments: Vec<Bytes>) -> Bytes {
    match <[Bytes; 1]>::try_from(segments) {
        Ok([one]) => one,
        Err(segments) => segments.concat().into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::{
        ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse,
        PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData,
    };
    use crate::FrameCodec;

    /// The frame body, as [`FrameCodec`] hands it over.
    fn unframe(frame: &[u8]) -> Bytes {
        let mut buf = BytesMut::from(frame);
        let body = FrameCodec::default().decode(&mut buf).unwrap().unwrap();
        assert!(buf.is_empty(), "one whole frame");
        body
    }

    fn produce(records: usize) -> ProduceRequest {
        ProduceRequest {
            acks: -1,
            timeout_ms: 1000,
            topic_data: vec![TopicProduceData {
                name: "t".into(),
                partition_data: vec![PartitionProduceData {
                    index: 0,
                    records: Some(Bytes::from(vec![5u8; records]).into()),
                }],
            }],
            ..Default::default()
        }
    }

    #[test]
    fn requests_round_trip_in_flexible_and_non_flexible_versions() {
        for version in [3, 8, 9, 10] {
            let req = produce(100);
            let frame = encode_request(42, Some("me"), &req, version).unwrap();
            let (header, back) =
                decode_request::<ProduceRequest>(unframe(&frame), version).unwrap();
            assert_eq!(
                header,
                RequestHeader {
                    api_key: ProduceRequest::API_KEY,
                    api_version: version,
                    correlation_id: 42,
                    client_id: Some("me".into()),
                }
            );
            assert_eq!(back, req, "v{version}");
            assert_eq!(
                RequestHeader::peek(&unframe(&frame)).unwrap(),
                (0, version, 42)
            );
        }
    }

    #[test]
    fn flexible_request_header_carries_tagged_fields() {
        let req = MetadataRequest::default();
        let plain = encode_request(1, None, &req, 8).unwrap();
        let flexible = encode_request(1, None, &req, 9).unwrap();
        let header_len = |frame: &Bytes, version| {
            let body = unframe(frame);
            let (_, rest) = split_request::<MetadataRequest>(body.clone(), version).unwrap();
            body.len() - rest.len()
        };
        // api key, version, correlation id, null client id; v2 adds the empty tag section.
        assert_eq!(header_len(&plain, 8), 10);
        assert_eq!(header_len(&flexible, 9), 11);
    }

    #[test]
    fn responses_round_trip_with_header_v0_and_v1() {
        for (version, header_len) in [(8, 4), (9, 5)] {
            let resp = ProduceResponse {
                throttle_time_ms: 3,
                ..Default::default()
            };
            let frame = encode_response::<ProduceRequest>(9, version, &resp).unwrap();
            let body = unframe(&frame);
            let (header, rest) = split_response::<ProduceRequest>(body.clone(), version).unwrap();
            assert_eq!(header.correlation_id, 9);
            assert_eq!(body.len() - rest.len(), header_len, "v{version}");
            let (_, back) = decode_response::<ProduceRequest>(body, version).unwrap();
            assert_eq!(back, resp);
        }
    }

    #[test]
    fn api_versions_responses_always_use_header_v0() {
        let resp = ApiVersionsResponse::default();
        for version in [0, 2, 3, 4] {
            let frame = encode_response::<ApiVersionsRequest>(5, version, &resp).unwrap();
            let body = unframe(&frame);
            assert_eq!(ResponseHeader::peek_correlation_id(&body).unwrap(), 5);
            let (_, rest) = split_response::<ApiVersionsRequest>(body.clone(), version).unwrap();
            assert_eq!(body.len() - rest.len(), 4, "v{version}: header v0");
            let (_, back) = decode_response::<ApiVersionsRequest>(body, version).unwrap();
            assert_eq!(back, resp);
        }
        // The request header still follows flexibility.
        let req = ApiVersionsRequest::default();
        let frame = encode_request(5, None, &req, 3).unwrap();
        let (_, back) = decode_request::<ApiVersionsRequest>(unframe(&frame), 3).unwrap();
        assert_eq!(back, req);
    }

    #[test]
    fn segmented_frames_equal_contiguous_ones() {
        for version in [8, 9] {
            let req = produce(64);
            let whole = encode_request(3, Some("c"), &req, version).unwrap();
            let parts = encode_request_segmented(3, Some("c"), &req, version, 32).unwrap();
            assert!(parts.len() > 1, "records out of line");
            assert_eq!(parts.concat(), whole.to_vec());

            let resp = MetadataResponse::default();
            let whole = encode_response::<MetadataRequest>(4, version, &resp).unwrap();
            let parts = encode_response_segmented::<MetadataRequest>(4, version, &resp, 1).unwrap();
            assert_eq!(parts.concat(), whole.to_vec());
        }
    }

    #[test]
    fn trailing_request_bytes_are_counted_not_rejected() {
        let frame = encode_request(1, None, &MetadataRequest::default(), 12).unwrap();
        let mut body = BytesMut::from(&unframe(&frame)[..]);
        body.extend_from_slice(&[0, 0, 0]);
        let (_, rest) = split_request::<MetadataRequest>(body.freeze(), 12).unwrap();
        let (_, trailing) = decode_request_body::<MetadataRequest>(rest, 12).unwrap();
        assert_eq!(trailing, 3);
    }

    #[test]
    fn truncated_and_garbage_frames_are_errors() {
        let req = produce(50);
        let frame = unframe(&encode_request(1, Some("x"), &req, 9).unwrap());
        for cut in 0..frame.len() {
            let part = frame.slice(..cut);
            assert!(
                decode_request::<ProduceRequest>(part, 9).is_err(),
                "cut at {cut}"
            );
        }
        let resp = unframe(&encode_response::<ProduceRequest>(1, 9, &Default::default()).unwrap());
        for cut in 0..resp.len() {
            assert!(decode_response::<ProduceRequest>(resp.slice(..cut), 9).is_err());
        }
        let garbage = Bytes::from_static(&[0xff; 64]);
        for version in [3, 9, 10] {
            assert!(decode_request::<ProduceRequest>(garbage.clone(), version).is_err());
            assert!(decode_response::<ProduceRequest>(garbage.clone(), version).is_err());
        }
        assert!(matches!(
            decode_request::<ProduceRequest>(frame, 1),
            Err(DecodeError::UnsupportedVersion { .. })
        ));
    }
}
