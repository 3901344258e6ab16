//! CorruptReplicaReport: a Baton-private request on the controller listener, with
//! which a node reports that its own replica of a partition holds a corrupt batch. The
//! controller removes the replica from the ISR and, if it leads, elects a healthy ISR
//! member with a new leader epoch (offline when there is none). The API key is outside
//! Kafka's range.
//!
//! Body (version 0, never flexible): `broker_id: i32, broker_epoch: i64,
//! topic_id: uuid, partition: i32, offset: i64` (the first offset known bad).
//! Response: `error_code: i16`.

use baton_protocol::primitives::{Decoder, Wire};
use baton_protocol::{DecodeError, Message, Request, Uuid};
use bytes::BytesMut;

/// The API key, outside Kafka's range.
pub const CORRUPT_REPLICA_REPORT_KEY: i16 = 10_001;

/// A node's report that its replica of one partition is corrupt.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CorruptReplicaReportRequest {
    /// The reporting broker (the owner of the corrupt replica).
    pub broker_id: i32,
    /// Its broker epoch.
    pub broker_epoch: i64,
    /// The topic id.
    pub topic_id: Uuid,
    /// The partition index.
    pub partition: i32,
    /// The first offset known bad.
    pub offset: i64,
}

impl Wire for CorruptReplicaReportRequest {
    fn encode(&self, buf: &mut BytesMut, v: i16, f: bool) {
        self.broker_id.encode(buf, v, f);
        self.broker_epoch.encode(buf, v, f);
        self.topic_id.encode(buf, v, f);
        self.partition.encode(buf, v, f);
        self.offset.encode(buf, v, f);
    }

    fn decode(d: &mut Decoder, v: i16, f: bool) -> Result<Self, DecodeError> {
        Ok(CorruptReplicaReportRequest {
            broker_id: Wire::decode(d, v, f)?,
            broker_epoch: Wire::decode(d, v, f)?,
            topic_id: Wire::decode(d, v, f)?,
            partition: Wire::decode(d, v, f)?,
            offset: Wire::decode(d, v, f)?,
        })
    }
}

impl Message for CorruptReplicaReportRequest {
    const API_KEY: i16 = CORRUPT_REPLICA_REPORT_KEY;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 0;
    const FIRST_FLEXIBLE: i16 = i16::MAX;
}

impl Request for CorruptReplicaReportRequest {
    type Response = CorruptReplicaReportResponse;
}

/// The controller's answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CorruptReplicaReportResponse {
    /// 0, or why the report was refused.
    pub error_code: i16,
}

impl Wire for CorruptReplicaReportResponse {
    fn encode(&self, buf: &mut BytesMut, v: i16, f: bool) {
        self.error_code.encode(buf, v, f);
    }

    fn decode(d: &mut Decoder, v: i16, f: bool) -> Result<Self, DecodeError> {
        Ok(CorruptReplicaReportResponse {
            error_code: Wire::decode(d, v, f)?,
        })
    }
}

impl Message for CorruptReplicaReportResponse {
    const API_KEY: i16 = CORRUPT_REPLICA_REPORT_KEY;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 0;
    const FIRST_FLEXIBLE: i16 = i16::MAX;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let req = CorruptReplicaReportRequest {
            broker_id: 1,
            broker_epoch: 9,
            topic_id: Uuid::from_u64_pair(3, 4),
            partition: 0,
            offset: 42,
        };
        let mut buf = BytesMut::new();
        req.encode_body(&mut buf, 0).unwrap();
        let back = CorruptReplicaReportRequest::decode_body(buf.freeze(), 0).unwrap();
        assert_eq!(back, req);
        assert!(
            CorruptReplicaReportRequest::decode_body(bytes::Bytes::from_static(&[0]), 0).is_err()
        );
    }
}
