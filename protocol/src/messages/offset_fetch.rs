//! OffsetFetch (API key 9): reads a group's committed offsets.
//!
//! Supported versions 0–9, flexible from 6. Version history, from Apache Kafka's spec:
//! v1 reads Kafka-stored offsets; v2 accepts null topics (all committed partitions) and
//! adds a top-level error code; v3 adds throttle time; v4 is unchanged; v5 adds the
//! committed leader epoch (KIP-320); v6 is the first flexible version; v7 adds
//! `require_stable` (KIP-447); v8 reads several groups in one request (KIP-709),
//! moving everything into `groups`; v9 adds the KIP-848 member id and epoch. Kafka 4.0
//! removed v0 (KIP-896).

use crate::{impl_message, wire_struct};

wire_struct! {
    /// One topic whose offsets are wanted (v0–7).
    pub struct OffsetFetchRequestTopic {
        /// The topic name.
        pub name: String [0..=7],
        /// The partitions.
        pub partition_indexes: Vec<i32> [0..=7],
    }
}

wire_struct! {
    /// One topic whose offsets are wanted (v8+).
    pub struct OffsetFetchRequestTopics {
        /// The topic name.
        pub name: String [8..],
        /// The partitions.
        pub partition_indexes: Vec<i32> [8..],
    }
}

wire_struct! {
    /// One group whose offsets are wanted (v8+).
    pub struct OffsetFetchRequestGroup {
        /// The group id.
        pub group_id: String [8..],
        /// The KIP-848 member id, or null (v9+).
        pub member_id: Option<String> [9..],
        /// The KIP-848 member epoch, or -1 (v9+).
        pub member_epoch: i32 [9..] default(-1),
        /// The topics, or null for every committed partition.
        pub topics: Option<Vec<OffsetFetchRequestTopics>> [8..],
    }
}

wire_struct! {
    /// Reads committed offsets. Versions 0–9; flexible from 6.
    pub struct OffsetFetchRequest {
        /// The group id (v0–7).
        pub group_id: String [0..=7],
        /// The topics, or null for every committed partition (null from v2; v0–7).
        pub topics: Option<Vec<OffsetFetchRequestTopic>> [0..=7],
        /// The groups (v8+).
        pub groups: Vec<OffsetFetchRequestGroup> [8..],
        /// Whether to answer UNSTABLE_OFFSET_COMMIT while transactional offsets are
        /// pending (v7+).
        pub require_stable: bool [7..],
    }
}

wire_struct! {
    /// One partition's committed offset (v0–7).
    pub struct OffsetFetchResponsePartition {
        /// The partition index.
        pub partition_index: i32 [0..=7],
        /// The committed offset, or -1.
        pub committed_offset: i64 [0..=7],
        /// The committed leader epoch, or -1 (v5–7).
        pub committed_leader_epoch: i32 [5..=7] default(-1),
        /// The committed metadata, or null.
        pub metadata: Option<String> [0..=7],
        /// The error code, or 0.
        pub error_code: i16 [0..=7],
    }
}

wire_struct! {
    /// One topic's committed offsets (v0–7).
    pub struct OffsetFetchResponseTopic {
        /// The topic name.
        pub name: String [0..=7],
        /// The partitions.
        pub partitions: Vec<OffsetFetchResponsePartition> [0..=7],
    }
}

wire_struct! {
    /// One partition's committed offset (v8+).
    pub struct OffsetFetchResponsePartitions {
        /// The partition index.
        pub partition_index: i32 [8..],
        /// The committed offset, or -1.
        pub committed_offset: i64 [8..],
        /// The committed leader epoch, or -1.
        pub committed_leader_epoch: i32 [8..] default(-1),
        /// The committed metadata, or null.
        pub metadata: Option<String> [8..],
        /// The error code, or 0.
        pub error_code: i16 [8..],
    }
}

wire_struct! {
    /// One topic's committed offsets (v8+).
    pub struct OffsetFetchResponseTopics {
        /// The topic name.
        pub name: String [8..],
        /// The partitions.
        pub partitions: Vec<OffsetFetchResponsePartitions> [8..],
    }
}

wire_struct! {
    /// One group's committed offsets (v8+).
    pub struct OffsetFetchResponseGroup {
        /// The group id.
        pub group_id: String [8..],
        /// The topics.
        pub topics: Vec<OffsetFetchResponseTopics> [8..],
        /// The group-level error code, or 0.
        pub error_code: i16 [8..],
    }
}

wire_struct! {
    /// Committed offsets. Versions 0–9; flexible from 6.
    pub struct OffsetFetchResponse {
        /// Throttle time in ms (v3+).
        pub throttle_time_ms: i32 [3..],
        /// Results per topic (v0–7).
        pub topics: Vec<OffsetFetchResponseTopic> [0..=7],
        /// The top-level error code, or 0 (v2–7).
        pub error_code: i16 [2..=7],
        /// Results per group (v8+).
        pub groups: Vec<OffsetFetchResponseGroup> [8..],
    }
}

impl_message!(
    OffsetFetchRequest,
    key = 9,
    versions = 0..=9,
    flexible = 6,
    response = OffsetFetchResponse
);
impl_message!(OffsetFetchResponse, key = 9, versions = 0..=9, flexible = 6);
