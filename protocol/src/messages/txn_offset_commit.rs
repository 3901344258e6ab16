//! TxnOffsetCommit (API key 28): stores a group's offsets inside a transaction, so
//! that they become visible only if the transaction commits (KIP-98, exactly-once
//! consume-transform-produce). Sent to the group coordinator after AddOffsetsToTxn.
//!
//! Supported versions 0–5, flexible from 3. Version history, from Apache Kafka's
//! spec: v1 is the same as v0; v2 adds the committed leader epoch (KIP-320); v3 adds
//! the generation, member id and group instance id so the coordinator can fence
//! zombie members (KIP-447), and is the first flexible version; v4 adds the
//! TRANSACTION_ABORTABLE error (KIP-890); v5 (Kafka 4.0) has v4's layout and marks a
//! client using transactions v2 (KIP-890 part 2), where the commit also adds the
//! group's `__consumer_offsets` partition to the transaction. The response has the
//! same history (v5 as v4).

use crate::{impl_message, wire_struct};

wire_struct! {
    /// One partition's offset to commit in the transaction.
    pub struct TxnOffsetCommitRequestPartition {
        /// The partition index.
        pub partition_index: i32 [0..],
        /// The offset to commit (the next offset to consume).
        pub committed_offset: i64 [0..],
        /// The leader epoch of the last consumed record, or -1 (v2+).
        pub committed_leader_epoch: i32 [2..] default(-1),
        /// Client metadata kept with the offset, or null.
        pub committed_metadata: Option<String> [0..],
    }
}

wire_struct! {
    /// The partitions of one topic to commit.
    pub struct TxnOffsetCommitRequestTopic {
        /// The topic name.
        pub name: String [0..],
        /// The partitions.
        pub partitions: Vec<TxnOffsetCommitRequestPartition> [0..],
    }
}

wire_struct! {
    /// Commits offsets for a group as part of a transaction. Versions 0–5;
    /// flexible from 3.
    pub struct TxnOffsetCommitRequest {
        /// The transactional id.
        pub transactional_id: String [0..],
        /// The group id.
        pub group_id: String [0..],
        /// The producer id of the transactional id.
        pub producer_id: i64 [0..],
        /// The producer epoch.
        pub producer_epoch: i16 [0..],
        /// The consumer's generation, or -1 (v3+).
        pub generation_id: i32 [3..] default(-1),
        /// The consumer's member id, or empty (v3+).
        pub member_id: String [3..],
        /// The consumer's static instance id, or null (v3+).
        pub group_instance_id: Option<String> [3..],
        /// The topics to commit.
        pub topics: Vec<TxnOffsetCommitRequestTopic> [0..],
    }
}

wire_struct! {
    /// The result of one partition.
    pub struct TxnOffsetCommitResponsePartition {
        /// The partition index.
        pub partition_index: i32 [0..],
        /// The error code, or 0.
        pub error_code: i16 [0..],
    }
}

wire_struct! {
    /// The results of one topic.
    pub struct TxnOffsetCommitResponseTopic {
        /// The topic name.
        pub name: String [0..],
        /// The partitions.
        pub partitions: Vec<TxnOffsetCommitResponsePartition> [0..],
    }
}

wire_struct! {
    /// The result of a transactional commit. Versions 0–5; flexible from 3.
    pub struct TxnOffsetCommitResponse {
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [0..],
        /// Results per topic.
        pub topics: Vec<TxnOffsetCommitResponseTopic> [0..],
    }
}

impl_message!(
    TxnOffsetCommitRequest,
    key = 28,
    versions = 0..=5,
    flexible = 3,
    response = TxnOffsetCommitResponse
);
impl_message!(
    TxnOffsetCommitResponse,
    key = 28,
    versions = 0..=5,
    flexible = 3
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::Message;
    use bytes::{Bytes, BytesMut};

    fn request() -> TxnOffsetCommitRequest {
        TxnOffsetCommitRequest {
            transactional_id: "x".into(),
            group_id: "g".into(),
            producer_id: 7,
            producer_epoch: 2,
            generation_id: 3,
            member_id: "m".into(),
            group_instance_id: None,
            topics: vec![TxnOffsetCommitRequestTopic {
                name: "t".into(),
                partitions: vec![TxnOffsetCommitRequestPartition {
                    partition_index: 1,
                    committed_offset: 42,
                    committed_leader_epoch: 5,
                    committed_metadata: None,
                }],
            }],
        }
    }

    #[test]
    fn golden_request_v0() {
        // v0 has neither the leader epoch nor the membership fields.
        let msg = TxnOffsetCommitRequest {
            generation_id: -1,
            member_id: String::new(),
            topics: vec![TxnOffsetCommitRequestTopic {
                name: "t".into(),
                partitions: vec![TxnOffsetCommitRequestPartition {
                    committed_leader_epoch: -1,
                    ..request().topics[0].partitions[0].clone()
                }],
            }],
            ..request()
        };
        let mut buf = BytesMut::new();
        msg.encode_body(&mut buf, 0).unwrap();
        #[rustfmt::skip]
        let golden: &[u8] = &[
            0, 1, b'x',                // transactional_id
            0, 1, b'g',                // group_id
            0, 0, 0, 0, 0, 0, 0, 7,    // producer_id
            0, 2,                      // producer_epoch
            0, 0, 0, 1,                // topics: 1
            0, 1, b't',
            0, 0, 0, 1,                // partitions: 1
            0, 0, 0, 1,                //   partition_index
            0, 0, 0, 0, 0, 0, 0, 42,   //   committed_offset
            0xff, 0xff,                //   metadata: null
        ];
        assert_eq!(&buf[..], golden);
        assert_eq!(
            TxnOffsetCommitRequest::decode_body(Bytes::from_static(golden), 0).unwrap(),
            msg
        );
    }

    #[test]
    fn golden_request_v3_flexible() {
        let msg = request();
        let mut buf = BytesMut::new();
        msg.encode_body(&mut buf, 3).unwrap();
        #[rustfmt::skip]
        let golden: &[u8] = &[
            2, b'x',                   // transactional_id (compact)
            2, b'g',                   // group_id
            0, 0, 0, 0, 0, 0, 0, 7,    // producer_id
            0, 2,                      // producer_epoch
            0, 0, 0, 3,                // generation_id
            2, b'm',                   // member_id
            0,                         // group_instance_id: null
            2,                         // topics: 1
            2, b't',
            2,                         // partitions: 1
            0, 0, 0, 1,                //   partition_index
            0, 0, 0, 0, 0, 0, 0, 42,   //   committed_offset
            0, 0, 0, 5,                //   committed_leader_epoch
            0,                         //   metadata: null
            0,                         //   partition tags
            0,                         // topic tags
            0,                         // request tags
        ];
        assert_eq!(&buf[..], golden);
        for v in [3, 4, 5] {
            assert_eq!(
                TxnOffsetCommitRequest::decode_body(Bytes::from_static(golden), v).unwrap(),
                msg,
                "v{v} has v3's layout"
            );
        }
    }

    #[test]
    fn golden_response_v3() {
        let msg = TxnOffsetCommitResponse {
            throttle_time_ms: 0,
            topics: vec![TxnOffsetCommitResponseTopic {
                name: "t".into(),
                partitions: vec![TxnOffsetCommitResponsePartition {
                    partition_index: 0,
                    error_code: 88,
                }],
            }],
        };
        let mut buf = BytesMut::new();
        msg.encode_body(&mut buf, 3).unwrap();
        #[rustfmt::skip]
        let golden: &[u8] = &[
            0, 0, 0, 0,                // throttle_time_ms
            2,                         // topics: 1
            2, b't',
            2,                         // partitions: 1
            0, 0, 0, 0,
            0, 88,
            0,                         // partition tags
            0,                         // topic tags
            0,                         // response tags
        ];
        assert_eq!(&buf[..], golden);
        assert_eq!(
            TxnOffsetCommitResponse::decode_body(Bytes::from_static(golden), 3).unwrap(),
            msg
        );
    }
}
