//! LeaderMoveReport: a Baton-private request on the controller listener, with which a
//! partition leader reports the steps of a planned leadership move (controlled
//! shutdown, preferred-leader restore). Apache Kafka has no such message: its planned
//! moves hand over at once and can lose `acks=1` records (KAFKA-20554). The API key is
//! outside Kafka's range so no Kafka client or broker ever sends it.
//!
//! Body (version 0, never flexible): `broker_id: i32, broker_epoch: i64,
//! topic_id: uuid, partition: i32, phase: i8 (0 drain started, 1 successor caught up),
//! successor: i32, log_end_offset: i64`. Response: `error_code: i16`.

use baton_protocol::primitives::{Decoder, Wire};
use baton_protocol::{DecodeError, Message, Request, Uuid};
use bytes::BytesMut;

/// The API key, outside Kafka's range.
pub const LEADER_MOVE_REPORT_KEY: i16 = 10_000;

/// Phase value: the leader stopped accepting writes.
pub const PHASE_DRAIN_STARTED: i8 = 0;
/// Phase value: the successor reached the frozen log end.
pub const PHASE_CAUGHT_UP: i8 = 1;

/// A leader's report about a planned move of one partition.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LeaderMoveReportRequest {
    /// The reporting broker (the current leader).
    pub broker_id: i32,
    /// Its broker epoch.
    pub broker_epoch: i64,
    /// The topic id.
    pub topic_id: Uuid,
    /// The partition index.
    pub partition: i32,
    /// [`PHASE_DRAIN_STARTED`] or [`PHASE_CAUGHT_UP`].
    pub phase: i8,
    /// The successor (caught-up phase).
    pub successor: i32,
    /// The leader's frozen log end offset.
    pub log_end_offset: i64,
}

impl Wire for LeaderMoveReportRequest {
    fn encode(&self, buf: &mut BytesMut, v: i16, f: bool) {
        self.broker_id.encode(buf, v, f);
        self.broker_epoch.encode(buf, v, f);
        self.topic_id.encode(buf, v, f);
        self.partition.encode(buf, v, f);
        self.phase.encode(buf, v, f);
        self.successor.encode(buf, v, f);
        self.log_end_offset.encode(buf, v, f);
    }

    fn decode(d: &mut Decoder, v: i16, f: bool) -> Result<Self, DecodeError> {
        Ok(LeaderMoveReportRequest {
            broker_id: Wire::decode(d, v, f)?,
            broker_epoch: Wire::decode(d, v, f)?,
            topic_id: Wire::decode(d, v, f)?,
            partition: Wire::decode(d, v, f)?,
            phase: Wire::decode(d, v, f)?,
            successor: Wire::decode(d, v, f)?,
            log_end_offset: Wire::decode(d, v, f)?,
        })
    }
}

impl Message for LeaderMoveReportRequest {
    const API_KEY: i16 = LEADER_MOVE_REPORT_KEY;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 0;
    const FIRST_FLEXIBLE: i16 = i16::MAX;
}

impl Request for LeaderMoveReportRequest {
    type Response = LeaderMoveReportResponse;
}

/// The controller's answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LeaderMoveReportResponse {
    /// 0, or why the report was refused.
    pub error_code: i16,
}

impl Wire for LeaderMoveReportResponse {
    fn encode(&self, buf: &mut BytesMut, v: i16, f: bool) {
        self.error_code.encode(buf, v, f);
    }

    fn decode(d: &mut Decoder, v: i16, f: bool) -> Result<Self, DecodeError> {
        Ok(LeaderMoveReportResponse {
            error_code: Wire::decode(d, v, f)?,
        })
    }
}

impl Message for LeaderMoveReportResponse {
    const API_KEY: i16 = LEADER_MOVE_REPORT_KEY;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 0;
    const FIRST_FLEXIBLE: i16 = i16::MAX;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let req = LeaderMoveReportRequest {
            broker_id: 2,
            broker_epoch: 17,
            topic_id: Uuid::from_u64_pair(1, 2),
            partition: 3,
            phase: PHASE_CAUGHT_UP,
            successor: 1,
            log_end_offset: 999,
        };
        let mut buf = BytesMut::new();
        req.encode_body(&mut buf, 0).unwrap();
        let back = LeaderMoveReportRequest::decode_body(buf.freeze(), 0).unwrap();
        assert_eq!(back, req);
        assert!(
            LeaderMoveReportRequest::decode_body(bytes::Bytes::from_static(&[1, 2]), 0).is_err()
        );
    }
}
