//! OffsetForLeaderEpoch (API key 23): the end offset of a leader epoch, which a
//! follower or consumer uses to find where its log diverges from the leader's and
//! truncate to it.
//!
//! Supported versions 2–4, flexible from 4. Version history, from Apache Kafka's spec:
//! v0 came with leader-epoch based truncation (KIP-101); v1 returns the leader epoch
//! (KIP-279); v2 adds the current leader epoch for fencing and the throttle time
//! (KIP-320); v3 adds the replica id (-2 for a debug consumer, -1 for a consumer);
//! v4 is the first flexible version (KIP-482).

use crate::{impl_message, wire_struct};

wire_struct! {
    /// One partition in an [`OffsetForLeaderTopic`].
    pub struct OffsetForLeaderPartition {
        /// The partition index.
        pub partition: i32 [0..],
        /// The requester's current leader epoch, for fencing (v2+).
        pub current_leader_epoch: i32 [2..] default(-1),
        /// The epoch whose end offset is wanted.
        pub leader_epoch: i32 [0..],
    }
}

wire_struct! {
    /// One topic in an [`OffsetForLeaderEpochRequest`].
    pub struct OffsetForLeaderTopic {
        /// The topic name.
        pub topic: String [0..],
        /// Each partition to look up.
        pub partitions: Vec<OffsetForLeaderPartition> [0..],
    }
}

wire_struct! {
    /// Asks for the end offsets of leader epochs. Versions 2–4; flexible from 4.
    pub struct OffsetForLeaderEpochRequest {
        /// The follower's broker id, -1 for a consumer, -2 for a debug consumer (v3+).
        pub replica_id: i32 [3..] default(-2),
        /// Each topic to look up.
        pub topics: Vec<OffsetForLeaderTopic> [0..],
    }
}

wire_struct! {
    /// The end offset of the requested epoch for one partition.
    pub struct EpochEndOffset {
        /// The error code, or 0.
        pub error_code: i16 [0..],
        /// The partition index.
        pub partition: i32 [0..],
        /// The largest epoch not above the requested one, or -1 (v1+).
        pub leader_epoch: i32 [1..] default(-1),
        /// The end offset of that epoch, or -1.
        pub end_offset: i64 [0..] default(-1),
    }
}

wire_struct! {
    /// One topic in an [`OffsetForLeaderEpochResponse`].
    pub struct OffsetForLeaderTopicResult {
        /// The topic name.
        pub topic: String [0..],
        /// Each partition looked up.
        pub partitions: Vec<EpochEndOffset> [0..],
    }
}

wire_struct! {
    /// The end offsets found. Versions 2–4; flexible from 4.
    pub struct OffsetForLeaderEpochResponse {
        /// Throttle time in ms (v2+).
        pub throttle_time_ms: i32 [2..],
        /// Each topic looked up.
        pub topics: Vec<OffsetForLeaderTopicResult> [0..],
    }
}

impl_message!(
    OffsetForLeaderEpochRequest,
    key = 23,
    versions = 2..=4,
    flexible = 4,
    response = OffsetForLeaderEpochResponse
);
impl_message!(
    OffsetForLeaderEpochResponse,
    key = 23,
    versions = 2..=4,
    flexible = 4
);
