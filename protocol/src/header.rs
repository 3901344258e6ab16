//! Request and response headers (RequestHeader v0–v2, ResponseHeader v0–v1).

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::DecodeError;
use crate::primitives::{decode_tagged_fields, put_nullable_string, put_uvarint, Decoder};

/// The header in front of every request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestHeader {
    /// The API key of this request.
    pub api_key: i16,
    /// The API version of this request.
    pub api_version: i16,
    /// Echoed in the response so the client can match it to this request.
    pub correlation_id: i32,
    /// The client's id (header v1+); never compact, even in header v2.
    pub client_id: Option<String>,
}

impl RequestHeader {
    /// Appends the header in `header_version` (0, 1 or 2).
    pub fn encode(&self, buf: &mut BytesMut, header_version: i16) {
        encode_request_header(
            buf,
            self.api_key,
            self.api_version,
            self.correlation_id,
            self.client_id.as_deref(),
            header_version,
        );
    }

    /// Reads the fixed prefix (api key, version, correlation id) without consuming.
    pub fn peek(frame: &[u8]) -> Result<(i16, i16, i32), DecodeError> {
        if frame.len() < 8 {
            return Err(DecodeError::Truncated {
                what: "request header",
                needed: 8 - frame.len(),
            });
        }
        Ok((
            i16::from_be_bytes([frame[0], frame[1]]),
            i16::from_be_bytes([frame[2], frame[3]]),
            i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]),
        ))
    }

    /// Decodes a header in `header_version`, leaving the decoder at the body.
    pub fn decode(d: &mut Decoder, header_version: i16) -> Result<Self, DecodeError> {
        let api_key = d.i16()?;
        let api_version = d.i16()?;
        let correlation_id = d.i32()?;
        let client_id = if header_version >= 1 {
            d.nullable_string(false)?
        } else {
            None
        };
        if header_version >= 2 {
            decode_tagged_fields(d, |_, _| Ok(false))?;
        }
        Ok(RequestHeader {
            api_key,
            api_version,
            correlation_id,
            client_id,
        })
    }
}

/// Appends a request header in `header_version` (0, 1 or 2) from its fields, so
/// that encoding needs no owned [`RequestHeader`].
pub(crate) fn encode_request_header(
    buf: &mut BytesMut,
    api_key: i16,
    api_version: i16,
    correlation_id: i32,
    client_id: Option<&str>,
    header_version: i16,
) {
    buf.put_i16(api_key);
    buf.put_i16(api_version);
    buf.put_i32(correlation_id);
    if header_version >= 1 {
        put_nullable_string(buf, client_id, false);
    }
    if header_version >= 2 {
        put_uvarint(buf, 0);
    }
}

/// The header in front of every response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResponseHeader {
    /// The correlation id of the request this answers.
    pub correlation_id: i32,
}

impl ResponseHeader {
    /// Appends the header in `header_version` (0 or 1).
    pub fn encode(&self, buf: &mut BytesMut, header_version: i16) {
        buf.put_i32(self.correlation_id);
        if header_version >= 1 {
            put_uvarint(buf, 0);
        }
    }

    /// Decodes a header in `header_version`, leaving the decoder at the body.
    pub fn decode(d: &mut Decoder, header_version: i16) -> Result<Self, DecodeError> {
        let correlation_id = d.i32()?;
        if header_version >= 1 {
            decode_tagged_fields(d, |_, _| Ok(false))?;
        }
        Ok(ResponseHeader { correlation_id })
    }

    /// Reads the correlation id at the start of a response frame.
    pub fn peek_correlation_id(frame: &Bytes) -> Result<i32, DecodeError> {
        if frame.len() < 4 {
            return Err(DecodeError::Truncated {
                what: "response header",
                needed: 4 - frame.len(),
            });
        }
        Ok(i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_header_round_trips_in_each_version() {
        for hv in 0..=2 {
            let h = RequestHeader {
                api_key: 3,
                api_version: 12,
                correlation_id: 77,
                client_id: if hv >= 1 { Some("baton".into()) } else { None },
            };
            let mut b = BytesMut::new();
            h.encode(&mut b, hv);
            let mut d = Decoder::new(b.freeze());
            assert_eq!(RequestHeader::decode(&mut d, hv).unwrap(), h);
            assert!(d.is_empty());
        }
    }
}
