//! Fetch (API key 1): reads record batches from partitions; consumers and follower
//! replicas both use it.
//!
//! Supported versions 4–13 (Kafka 4.0 removed 0–3, KIP-896), flexible from 12. Version
//! history, from Apache Kafka's spec: v4 adds the isolation level and aborted
//! transactions (KIP-98); v5 the log start offset (KIP-107); v7 incremental fetch
//! sessions (KIP-227); v9 the current leader epoch (KIP-320); v10 allows ZStandard
//! (KIP-110); v11 the rack id and preferred read replica (KIP-392); v12 is the first
//! flexible version and adds `last_fetched_epoch`, the diverging epoch, current leader
//! and snapshot id (KIP-595); v13 names topics by id instead of name (KIP-516).

use bytes::Bytes;

use crate::primitives::Uuid;
use crate::{impl_message, wire_struct};

wire_struct! {
    /// One partition to fetch in a [`FetchTopic`].
    pub struct FetchPartition {
        /// The partition index.
        pub partition: i32 [0..],
        /// The fetcher's current leader epoch, for fencing (v9+).
        pub current_leader_epoch: i32 [9..] default(-1),
        /// The offset to fetch from.
        pub fetch_offset: i64 [0..],
        /// The epoch of the last fetched record, or -1 (v12+).
        pub last_fetched_epoch: i32 [12..] default(-1),
        /// The follower's log start offset; only followers set it (v5+).
        pub log_start_offset: i64 [5..] default(-1),
        /// The most bytes to return for this partition.
        pub partition_max_bytes: i32 [0..],
    }
}

wire_struct! {
    /// One topic to fetch in a [`FetchRequest`].
    pub struct FetchTopic {
        /// The topic name (v4–v12).
        pub topic: String [0..=12],
        /// The topic id (v13+).
        pub topic_id: Uuid [13..],
        /// The partitions to fetch.
        pub partitions: Vec<FetchPartition> [0..],
    }
}

wire_struct! {
    /// Partitions to remove from an incremental fetch session (v7+).
    pub struct ForgottenTopic {
        /// The topic name (v7–v12).
        pub topic: String [7..=12],
        /// The topic id (v13+).
        pub topic_id: Uuid [13..],
        /// The partition indexes to forget.
        pub partitions: Vec<i32> [7..],
    }
}

wire_struct! {
    /// Reads records. Versions 4–13; flexible from 12.
    pub struct FetchRequest {
        /// The cluster id if known, or null (v12+, tag 0).
        pub cluster_id: Option<String> [12..] tag(0),
        /// The follower's broker id, or -1 for a consumer.
        pub replica_id: i32 [0..=14] default(-1),
        /// The most time to wait for `min_bytes`, in ms.
        pub max_wait_ms: i32 [0..],
        /// The least bytes to accumulate before answering.
        pub min_bytes: i32 [0..],
        /// The most bytes to return in total (v3+).
        pub max_bytes: i32 [3..] default(i32::MAX),
        /// 0 = READ_UNCOMMITTED, 1 = READ_COMMITTED (v4+).
        pub isolation_level: i8 [4..],
        /// The fetch session id, 0 for none (v7+).
        pub session_id: i32 [7..],
        /// The fetch session epoch (v7+).
        pub session_epoch: i32 [7..] default(-1),
        /// The topics to fetch.
        pub topics: Vec<FetchTopic> [0..],
        /// Partitions to remove from the fetch session (v7+).
        pub forgotten_topics_data: Vec<ForgottenTopic> [7..],
        /// The consumer's rack id (v11+).
        pub rack_id: String [11..],
    }
}

wire_struct! {
    /// Where a follower's log diverges from the leader's (v12+, KIP-595).
    pub struct FetchResponseEpochEndOffset {
        /// The largest epoch the logs agree on, or -1.
        pub epoch: i32 [12..] default(-1),
        /// The end offset of that epoch, or -1.
        pub end_offset: i64 [12..] default(-1),
    }
}

wire_struct! {
    /// The partition's current leader, sent when the fetcher's view is stale (v12+).
    pub struct FetchResponseLeaderIdAndEpoch {
        /// The id of the current leader, or -1 if unknown.
        pub leader_id: i32 [12..] default(-1),
        /// The latest known leader epoch, or -1.
        pub leader_epoch: i32 [12..] default(-1),
    }
}

wire_struct! {
    /// The snapshot to fetch instead, when the offset is below the log start (v12+).
    pub struct FetchResponseSnapshotId {
        /// The snapshot's end offset, or -1.
        pub end_offset: i64 [0..] default(-1),
        /// The snapshot's epoch, or -1.
        pub epoch: i32 [0..] default(-1),
    }
}

wire_struct! {
    /// An aborted transaction overlapping the returned records (v4+).
    pub struct AbortedTransaction {
        /// The producer id of the aborted transaction.
        pub producer_id: i64 [4..],
        /// The first offset of the aborted transaction.
        pub first_offset: i64 [4..],
    }
}

wire_struct! {
    /// The fetched data for one partition in a [`FetchableTopicResponse`].
    pub struct FetchResponsePartitionData {
        /// The partition index.
        pub partition_index: i32 [0..],
        /// The error code, or 0.
        pub error_code: i16 [0..],
        /// The partition's high watermark.
        pub high_watermark: i64 [0..],
        /// The last stable offset (v4+).
        pub last_stable_offset: i64 [4..] default(-1),
        /// The log start offset (v5+).
        pub log_start_offset: i64 [5..] default(-1),
        /// Where the fetcher's log diverges, if it does (v12+, tag 0).
        pub diverging_epoch: FetchResponseEpochEndOffset [12..] tag(0),
        /// The current leader, if the fetcher's is stale (v12+, tag 1).
        pub current_leader: FetchResponseLeaderIdAndEpoch [12..] tag(1),
        /// The snapshot to fetch instead (v12+, tag 2).
        pub snapshot_id: FetchResponseSnapshotId [12..] tag(2),
        /// Aborted transactions in the returned range, or null (v4+).
        pub aborted_transactions: Option<Vec<AbortedTransaction>> [4..],
        /// The replica the consumer should fetch from next, or -1 (v11+).
        pub preferred_read_replica: i32 [11..] default(-1),
        /// The record batches, as raw bytes (zero-copy); the last one may be truncated.
        pub records: Option<Bytes> [0..],
    }
}

wire_struct! {
    /// The fetched data for one topic in a [`FetchResponse`].
    pub struct FetchableTopicResponse {
        /// The topic name (v4–v12).
        pub topic: String [0..=12],
        /// The topic id (v13+).
        pub topic_id: Uuid [13..],
        /// The partitions of the topic.
        pub partitions: Vec<FetchResponsePartitionData> [0..],
    }
}

wire_struct! {
    /// The records fetched. Versions 4–13; flexible from 12.
    pub struct FetchResponse {
        /// Throttle time in ms (v1+).
        pub throttle_time_ms: i32 [1..],
        /// The top-level error code (v7+).
        pub error_code: i16 [7..],
        /// The fetch session id, or 0 (v7+).
        pub session_id: i32 [7..],
        /// The response topics.
        pub responses: Vec<FetchableTopicResponse> [0..],
    }
}

impl_message!(
    FetchRequest,
    key = 1,
    versions = 4..=13,
    flexible = 12,
    response = FetchResponse
);
impl_message!(FetchResponse, key = 1, versions = 4..=13, flexible = 12);
