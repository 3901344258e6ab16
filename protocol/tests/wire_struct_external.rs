//! `wire_struct!` and `impl_message!` used from another crate (an integration test
//! is one), with and without baton-protocol's `testing` feature.

use baton_protocol::messages::{Message, Request};
use baton_protocol::{impl_message, wire_struct, Uuid};
use bytes::{Bytes, BytesMut};

wire_struct! {
    /// A private request.
    pub struct ExternalReportRequest {
        /// The reporter.
        pub broker_id: i32 [0..],
        /// The topic.
        pub topic_id: Uuid [0..],
        /// Only from v1.
        pub offset: i64 [1..] default(-1),
        /// A payload.
        pub payload: Bytes [0..],
    }
}

wire_struct! {
    /// Its response.
    pub struct ExternalReportResponse {
        /// The outcome.
        pub error_code: i16 [0..],
    }
}

impl_message!(
    ExternalReportRequest,
    key = 10_100,
    versions = 0..=1,
    flexible = i16::MAX,
    response = ExternalReportResponse
);
impl_message!(
    ExternalReportResponse,
    key = 10_100,
    versions = 0..=1,
    flexible = i16::MAX
);

#[test]
fn a_struct_declared_outside_the_crate_round_trips() {
    let req = ExternalReportRequest {
        broker_id: 3,
        topic_id: Uuid::from_u64_pair(1, 2),
        offset: 42,
        payload: Bytes::from_static(b"abc"),
    };
    for version in 0..=1 {
        let mut buf = BytesMut::new();
        req.encode_body(&mut buf, version).unwrap();
        let back = ExternalReportRequest::decode_body(buf.freeze(), version).unwrap();
        let expected = if version == 0 {
            ExternalReportRequest {
                offset: -1,
                ..req.clone()
            }
        } else {
            req.clone()
        };
        assert_eq!(back, expected);
    }
    assert_eq!(ExternalReportRequest::request_header_version(1), 1);
    assert_eq!(ExternalReportResponse::default().error_code, 0);
}

#[cfg(feature = "testing")]
#[test]
fn random_values_exist_with_the_testing_feature() {
    use baton_protocol::testing::{Random, Rng};
    let mut rng = Rng::new(7);
    let req = ExternalReportRequest::random(&mut rng, 0);
    assert_eq!(req.offset, -1, "absent in v0, keeps its default");
    let mut buf = BytesMut::new();
    req.encode_body(&mut buf, 0).unwrap();
    assert_eq!(
        ExternalReportRequest::decode_body(buf.freeze(), 0).unwrap(),
        req
    );
}
