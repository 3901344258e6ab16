//! OffsetCommit (API key 8): stores a group's consumed positions.
//!
//! Supported versions 0–9, flexible from 8. Version history, from Apache Kafka's spec:
//! v1 adds the generation, member id and a per-partition commit timestamp; v2 replaces
//! the timestamp with a request-wide retention time; v3 adds throttle time; v4 is
//! unchanged; v5 drops the retention time (KIP-211); v6 adds the committed leader epoch
//! (KIP-320); v7 adds `group_instance_id` (KIP-345); v8 is the first flexible version;
//! v9 accepts a KIP-848 member epoch in `generation_id_or_member_epoch`. Kafka 4.0
//! removed v0–1 (KIP-896).

use crate::{impl_message, wire_struct};

wire_struct! {
    /// One partition's offset to commit.
    pub struct OffsetCommitRequestPartition {
        /// The partition index.
        pub partition_index: i32 [0..],
        /// The offset to commit (the next offset to consume).
        pub committed_offset: i64 [0..],
        /// The leader epoch of the last consumed record, or -1 (v6+).
        pub committed_leader_epoch: i32 [6..] default(-1),
        /// The commit timestamp, or -1 (v1 only).
        pub commit_timestamp: i64 [1..=1] default(-1),
        /// Client metadata kept with the offset, or null.
        pub committed_metadata: Option<String> [0..],
    }
}

wire_struct! {
    /// The partitions of one topic to commit.
    pub struct OffsetCommitRequestTopic {
        /// The topic name.
        pub name: String [0..],
        /// The partitions.
        pub partitions: Vec<OffsetCommitRequestPartition> [0..],
    }
}

wire_struct! {
    /// Commits offsets for a group. Versions 0–9; flexible from 8.
    pub struct OffsetCommitRequest {
        /// The group id.
        pub group_id: String [0..],
        /// The generation (classic groups), or -1 for a commit outside any generation
        /// (v1+).
        pub generation_id_or_member_epoch: i32 [1..] default(-1),
        /// The member id, or empty (v1+).
        pub member_id: String [1..],
        /// The static instance id, or null (v7+).
        pub group_instance_id: Option<String> [7..],
        /// How long to retain the offsets in ms, -1 for the broker default (v2–4).
        pub retention_time_ms: i64 [2..=4] default(-1),
        /// The topics to commit.
        pub topics: Vec<OffsetCommitRequestTopic> [0..],
    }
}

wire_struct! {
    /// The commit result of one partition.
    pub struct OffsetCommitResponsePartition {
        /// The partition index.
        pub partition_index: i32 [0..],
        /// The error code, or 0.
        pub error_code: i16 [0..],
    }
}

wire_struct! {
    /// The commit results of one topic.
    pub struct OffsetCommitResponseTopic {
        /// The topic name.
        pub name: String [0..],
        /// The partitions.
        pub partitions: Vec<OffsetCommitResponsePartition> [0..],
    }
}

wire_struct! {
    /// The result of a commit. Versions 0–9; flexible from 8.
    pub struct OffsetCommitResponse {
        /// Throttle time in ms (v3+).
        pub throttle_time_ms: i32 [3..],
        /// Results per topic.
        pub topics: Vec<OffsetCommitResponseTopic> [0..],
    }
}

impl_message!(
    OffsetCommitRequest,
    key = 8,
    versions = 0..=9,
    flexible = 8,
    response = OffsetCommitResponse
);
impl_message!(
    OffsetCommitResponse,
    key = 8,
    versions = 0..=9,
    flexible = 8
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::Message;
    use bytes::{Bytes, BytesMut};

    #[test]
    fn golden_offset_commit_request_v2() {
        let msg = OffsetCommitRequest {
            group_id: "g".into(),
            generation_id_or_member_epoch: 3,
            member_id: "m".into(),
            group_instance_id: None,
            retention_time_ms: -1,
            topics: vec![OffsetCommitRequestTopic {
                name: "t".into(),
                partitions: vec![OffsetCommitRequestPartition {
                    partition_index: 1,
                    committed_offset: 42,
                    committed_leader_epoch: -1,
                    commit_timestamp: -1,
                    committed_metadata: None,
                }],
            }],
        };
        let mut buf = BytesMut::new();
        msg.encode_body(&mut buf, 2).unwrap();
        #[rustfmt::skip]
        let golden: &[u8] = &[
            0, 1, b'g',
            0, 0, 0, 3,             // generation
            0, 1, b'm',             // member_id
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // retention -1
            0, 0, 0, 1,             // topics: 1
            0, 1, b't',
            0, 0, 0, 1,             // partitions: 1
            0, 0, 0, 1,             //   partition_index
            0, 0, 0, 0, 0, 0, 0, 42, // committed_offset
            0xff, 0xff,             //   metadata: null
        ];
        assert_eq!(&buf[..], golden);
        assert_eq!(
            OffsetCommitRequest::decode_body(Bytes::from_static(golden), 2).unwrap(),
            msg
        );
    }
}
