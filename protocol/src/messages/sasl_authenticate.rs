//! SaslAuthenticate (API key 36): one round of a SASL exchange, the mechanism's
//! bytes wrapped in a Kafka request (KIP-152), after a SaslHandshake v1.
//!
//! Supported versions 0–2, flexible from 2. Version history, from Apache Kafka's
//! spec: v1 adds `session_lifetime_ms` to the response (KIP-368, re-authentication);
//! v2 is the first flexible version.

use bytes::Bytes;

use crate::{impl_message, wire_struct};

wire_struct! {
    /// The client's SASL bytes for this round. Versions 0–2; flexible from 2.
    pub struct SaslAuthenticateRequest {
        /// The SASL authentication bytes from the client, as the mechanism defines them.
        pub auth_bytes: Bytes [0..],
    }
}

wire_struct! {
    /// The broker's SASL bytes for this round. Versions 0–2; flexible from 2.
    pub struct SaslAuthenticateResponse {
        /// The error code, or 0; SASL_AUTHENTICATION_FAILED ends the exchange.
        pub error_code: i16 [0..],
        /// The error message, or null if there was no error.
        pub error_message: Option<String> [0..],
        /// The SASL authentication bytes from the server, as the mechanism defines them.
        pub auth_bytes: Bytes [0..],
        /// Milliseconds after which the session must re-authenticate; 0 for no limit
        /// (v1+, KIP-368).
        pub session_lifetime_ms: i64 [1..],
    }
}

impl_message!(
    SaslAuthenticateRequest,
    key = 36,
    versions = 0..=2,
    flexible = 2,
    response = SaslAuthenticateResponse
);
impl_message!(
    SaslAuthenticateResponse,
    key = 36,
    versions = 0..=2,
    flexible = 2
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Message;
    use bytes::BytesMut;

    #[test]
    fn flexible_request_uses_compact_bytes() {
        let req = SaslAuthenticateRequest {
            auth_bytes: Bytes::from_static(b"\0u\0p"),
        };
        let mut buf = BytesMut::new();
        req.encode_body(&mut buf, 2).unwrap();
        // Compact bytes (length + 1 as a varint), then an empty tagged-field section.
        assert_eq!(&buf[..], b"\x05\0u\0p\x00");
        let mut buf = BytesMut::new();
        req.encode_body(&mut buf, 0).unwrap();
        assert_eq!(&buf[..], b"\x00\x00\x00\x04\0u\0p");
    }

    #[test]
    fn response_round_trips_in_every_version() {
        for version in 0..=2 {
            let resp = SaslAuthenticateResponse {
                error_code: 58,
                error_message: Some("bad password".into()),
                auth_bytes: Bytes::from_static(b"v=abc"),
                session_lifetime_ms: if version >= 1 { 3_600_000 } else { 0 },
            };
            let mut buf = BytesMut::new();
            resp.encode_body(&mut buf, version).unwrap();
            let back = SaslAuthenticateResponse::decode_body(buf.freeze(), version).unwrap();
            assert_eq!(back, resp, "v{version}");
        }
    }
}
