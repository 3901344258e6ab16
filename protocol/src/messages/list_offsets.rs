//! ListOffsets (API key 2): finds offsets by timestamp, or the earliest / latest.
//!
//! Supported versions 1–8 (v0 and its offset arrays are not), flexible from 6. Version
//! history, from Apache Kafka's spec: v1 returns one offset and its timestamp (KIP-79);
//! v2 adds the isolation level (KIP-98) and the throttle time; v4 the leader epoch for
//! fencing (KIP-320); v5 may return OFFSET_NOT_AVAILABLE; v6 is the first flexible
//! version (KIP-482); v7 allows the max-timestamp query (KIP-734); v8 the local log
//! start offset query (KIP-405).
//!
//! Special timestamps: -1 latest, -2 earliest, -3 max timestamp (v7+), -4 local log
//! start (v8+).

use crate::{impl_message, wire_struct};

wire_struct! {
    /// One partition in a [`ListOffsetsTopic`].
    pub struct ListOffsetsPartition {
        /// The partition index.
        pub partition_index: i32 [0..],
        /// The current leader epoch, for fencing (v4+).
        pub current_leader_epoch: i32 [4..] default(-1),
        /// The timestamp to look up, or a special value (-1 latest, -2 earliest, ...).
        pub timestamp: i64 [0..],
    }
}

wire_struct! {
    /// One topic in a [`ListOffsetsRequest`].
    pub struct ListOffsetsTopic {
        /// The topic name.
        pub name: String [0..],
        /// Each partition to look up.
        pub partitions: Vec<ListOffsetsPartition> [0..],
    }
}

wire_struct! {
    /// Looks up offsets. Versions 1–8; flexible from 6.
    pub struct ListOffsetsRequest {
        /// The requesting broker's id, or -1 for a consumer.
        pub replica_id: i32 [0..],
        /// 0 = READ_UNCOMMITTED, 1 = READ_COMMITTED (v2+).
        pub isolation_level: i8 [2..],
        /// Each topic to look up.
        pub topics: Vec<ListOffsetsTopic> [0..],
    }
}

wire_struct! {
    /// One partition in a [`ListOffsetsTopicResponse`].
    pub struct ListOffsetsPartitionResponse {
        /// The partition index.
        pub partition_index: i32 [0..],
        /// The error code, or 0.
        pub error_code: i16 [0..],
        /// The timestamp of the returned offset, or -1 (v1+).
        pub timestamp: i64 [1..] default(-1),
        /// The returned offset, or -1 (v1+).
        pub offset: i64 [1..] default(-1),
        /// The leader epoch of the returned offset, or -1 (v4+).
        pub leader_epoch: i32 [4..] default(-1),
    }
}

wire_struct! {
    /// One topic in a [`ListOffsetsResponse`].
    pub struct ListOffsetsTopicResponse {
        /// The topic name.
        pub name: String [0..],
        /// Each partition looked up.
        pub partitions: Vec<ListOffsetsPartitionResponse> [0..],
    }
}

wire_struct! {
    /// The offsets found. Versions 1–8; flexible from 6.
    pub struct ListOffsetsResponse {
        /// Throttle time in ms (v2+).
        pub throttle_time_ms: i32 [2..],
        /// Each topic looked up.
        pub topics: Vec<ListOffsetsTopicResponse> [0..],
    }
}

impl_message!(
    ListOffsetsRequest,
    key = 2,
    versions = 1..=8,
    flexible = 6,
    response = ListOffsetsResponse
);
impl_message!(ListOffsetsResponse, key = 2, versions = 1..=8, flexible = 6);
