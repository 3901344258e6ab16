//! LeaderMoveReport: a Baton-private request on the controller listener, with which a
//! partition leader reports the steps of a planned leadership move (controlled
//! shutdown, preferred-leader restore). Apache Kafka has no such message: its planned
//! moves hand over at once and can lose `acks=1` records (KAFKA-20554). The API key is
//! outside Kafka's range so no Kafka client or broker ever sends it.
//!
//! Body (version 0, never flexible): `broker_id: i32, broker_epoch: i64,
//! topic_id: uuid, partition: i32, phase: i8 (0 drain started, 1 successor caught up),
//! successor: i32, log_end_offset: i64`. Response: `error_code: i16`.

use baton_protocol::{impl_message, wire_struct, Uuid};

/// The API key, outside Kafka's range.
pub const LEADER_MOVE_REPORT_KEY: i16 = 10_000;

/// Phase value: the leader stopped accepting writes.
pub const PHASE_DRAIN_STARTED: i8 = 0;
/// Phase value: the successor reached the frozen log end.
pub const PHASE_CAUGHT_UP: i8 = 1;

wire_struct! {
    /// A leader's report about a planned move of one partition.
    pub struct LeaderMoveReportRequest {
        /// The reporting broker (the current leader).
        pub broker_id: i32 [0..],
        /// Its broker epoch.
        pub broker_epoch: i64 [0..],
        /// The topic id.
        pub topic_id: Uuid [0..],
        /// The partition index.
        pub partition: i32 [0..],
        /// [`PHASE_DRAIN_STARTED`] or [`PHASE_CAUGHT_UP`].
        pub phase: i8 [0..],
        /// The successor (caught-up phase).
        pub successor: i32 [0..],
        /// The leader's frozen log end offset.
        pub log_end_offset: i64 [0..],
    }
}

wire_struct! {
    /// The controller's answer.
    pub struct LeaderMoveReportResponse {
        /// 0, or why the report was refused.
        pub error_code: i16 [0..],
    }
}

impl_message!(
    LeaderMoveReportRequest,
    key = LEADER_MOVE_REPORT_KEY,
    versions = 0..=0,
    flexible = i16::MAX,
    response = LeaderMoveReportResponse
);
impl_message!(
    LeaderMoveReportResponse,
    key = LEADER_MOVE_REPORT_KEY,
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
        let req = LeaderMoveReportRequest {
            broker_id: 2,
            broker_epoch: 17,
            topic_id: Uuid::from_u64_pair(0x0102_0304_0506_0708, 0x090a_0b0c_0d0e_0f10),
            partition: 3,
            phase: PHASE_CAUGHT_UP,
            successor: 1,
            log_end_offset: 999,
        };
        let mut buf = BytesMut::new();
        req.encode_body(&mut buf, 0).unwrap();
        let expected: &[u8] = &[
            0, 0, 0, 2, // broker_id
            0, 0, 0, 0, 0, 0, 0, 17, // broker_epoch
            1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, // topic_id
            0, 0, 0, 3, // partition
            1, // phase
            0, 0, 0, 1, // successor
            0, 0, 0, 0, 0, 0, 3, 0xe7, // log_end_offset
        ];
        assert_eq!(&buf[..], expected);
        let back = LeaderMoveReportRequest::decode_body(buf.freeze(), 0).unwrap();
        assert_eq!(back, req);
        assert!(
            LeaderMoveReportRequest::decode_body(bytes::Bytes::from_static(&[1, 2]), 0).is_err()
        );
        let resp = LeaderMoveReportResponse { error_code: -2 };
        let mut buf = BytesMut::new();
        resp.encode_body(&mut buf, 0).unwrap();
        assert_eq!(&buf[..], &[0xff, 0xfe]);
        let back = LeaderMoveReportResponse::decode_body(buf.freeze(), 0).unwrap();
        assert_eq!(back, resp);
    }
}
