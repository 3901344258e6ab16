//! CorruptReplicaReport: a Baton-private request on the controller listener, with
//! which a node reports that its own replica of a partition holds a corrupt batch, or
//! that its log went offline after a failed write or fsync (then `offset` is the log
//! end). The controller removes the replica from the ISR and, if it leads, elects a
//! healthy ISR member with a new leader epoch (offline when there is none). The API
//! key is outside Kafka's range.
//!
//! Body (version 0, never flexible): `broker_id: i32, broker_epoch: i64,
//! topic_id: uuid, partition: i32, offset: i64` (the first offset known bad).
//! Response: `error_code: i16`.

use baton_protocol::{impl_message, wire_struct, Uuid};

/// The API key, outside Kafka's range.
pub const CORRUPT_REPLICA_REPORT_KEY: i16 = 10_001;

wire_struct! {
    /// A node's report that its replica of one partition is corrupt.
    pub struct CorruptReplicaReportRequest {
        /// The reporting broker (the owner of the corrupt replica).
        pub broker_id: i32 [0..],
        /// Its broker epoch.
        pub broker_epoch: i64 [0..],
        /// The topic id.
        pub topic_id: Uuid [0..],
        /// The partition index.
        pub partition: i32 [0..],
        /// The first offset known bad.
        pub offset: i64 [0..],
    }
}

wire_struct! {
    /// The controller's answer.
    pub struct CorruptReplicaReportResponse {
        /// 0, or why the report was refused.
        pub error_code: i16 [0..],
    }
}

impl_message!(
    CorruptReplicaReportRequest,
    key = CORRUPT_REPLICA_REPORT_KEY,
    versions = 0..=0,
    flexible = i16::MAX,
    response = CorruptReplicaReportResponse
);
impl_message!(
    CorruptReplicaReportResponse,
    key = CORRUPT_REPLICA_REPORT_KEY,
    versions = 0..=0,
    flexible = i16::MAX
);

#[cfg(test)]
mod tests {
    use super::*;
    use baton_protocol::Message;
    use bytes::BytesMut;

    /// Version 0 round-trips and its bytes are fixed, so nodes and controllers of
    /// other builds agree.
    #[test]
    fn round_trips_with_fixed_bytes() {
        let req = CorruptReplicaReportRequest {
            broker_id: 1,
            broker_epoch: 9,
            topic_id: Uuid::from_u64_pair(0x0102_0304_0506_0708, 0x090a_0b0c_0d0e_0f10),
            partition: 5,
            offset: 42,
        };
        let mut buf = BytesMut::new();
        req.encode_body(&mut buf, 0).unwrap();
        let expected: &[u8] = &[
            0, 0, 0, 1, // broker_id
            0, 0, 0, 0, 0, 0, 0, 9, // broker_epoch
            1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, // topic_id
            0, 0, 0, 5, // partition
            0, 0, 0, 0, 0, 0, 0, 42, // offset
        ];
        assert_eq!(&buf[..], expected);
        let back = CorruptReplicaReportRequest::decode_body(buf.freeze(), 0).unwrap();
        assert_eq!(back, req);
        assert!(
            CorruptReplicaReportRequest::decode_body(bytes::Bytes::from_static(&[0]), 0).is_err()
        );
        let resp = CorruptReplicaReportResponse { error_code: -2 };
        let mut buf = BytesMut::new();
        resp.encode_body(&mut buf, 0).unwrap();
        assert_eq!(&buf[..], &[0xff, 0xfe]);
        let back = CorruptReplicaReportResponse::decode_body(buf.freeze(), 0).unwrap();
        assert_eq!(back, resp);
    }
}
