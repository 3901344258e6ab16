//! SaslHandshake (API key 17): the client names the SASL mechanism it will use, and
//! the broker answers with the mechanisms its listener has enabled.
//!
//! Supported versions 0–1, never flexible. Version history, from Apache Kafka's spec:
//! v0 is followed by raw SASL tokens without Kafka framing (deprecated, KIP-43); v1
//! is followed by SaslAuthenticate requests carrying the tokens (KIP-152).

use crate::{impl_message, wire_struct};

wire_struct! {
    /// The mechanism the client chose. Versions 0–1; never flexible.
    pub struct SaslHandshakeRequest {
        /// The SASL mechanism chosen by the client, such as `SCRAM-SHA-512`.
        pub mechanism: String [0..],
    }
}

wire_struct! {
    /// The broker's answer to a handshake. Versions 0–1; never flexible.
    pub struct SaslHandshakeResponse {
        /// The error code, or 0; UNSUPPORTED_SASL_MECHANISM when the chosen mechanism
        /// is not enabled on this listener.
        pub error_code: i16 [0..],
        /// The mechanisms enabled on the listener.
        pub mechanisms: Vec<String> [0..],
    }
}

impl_message!(
    SaslHandshakeRequest,
    key = 17,
    versions = 0..=1,
    flexible = i16::MAX,
    response = SaslHandshakeResponse
);
impl_message!(
    SaslHandshakeResponse,
    key = 17,
    versions = 0..=1,
    flexible = i16::MAX
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Message;
    use bytes::{Bytes, BytesMut};

    #[test]
    fn request_layout_matches_kafka() {
        let req = SaslHandshakeRequest {
            mechanism: "PLAIN".into(),
        };
        let mut buf = BytesMut::new();
        req.encode_body(&mut buf, 1).unwrap();
        assert_eq!(&buf[..], b"\x00\x05PLAIN");
    }

    #[test]
    fn response_round_trips() {
        let resp = SaslHandshakeResponse {
            error_code: 33,
            mechanisms: vec!["SCRAM-SHA-256".into(), "SCRAM-SHA-512".into()],
        };
        let mut buf = BytesMut::new();
        resp.encode_body(&mut buf, 1).unwrap();
        let back = SaslHandshakeResponse::decode_body(Bytes::from(buf), 1).unwrap();
        assert_eq!(back, resp);
    }
}
