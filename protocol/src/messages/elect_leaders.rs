//! ElectLeaders (API key 43): elects the preferred replica, or (KIP-460) a live
//! out-of-sync replica of a partition without a leader.
//!
//! Supported versions 0–2, flexible from 2. Version history, from Apache Kafka's spec:
//! v1 adds `election_type` to the request and a top-level `error_code` to the
//! response; v2 is the first flexible version. A null `topic_partitions` asks for
//! every partition.

use crate::{impl_message, wire_struct};

/// `election_type` electing the preferred (first) replica.
pub const ELECTION_PREFERRED: i8 = 0;
/// `election_type` electing the first live replica when no in-sync one is left.
pub const ELECTION_UNCLEAN: i8 = 1;

wire_struct! {
    /// The partitions of one topic to elect leaders for.
    pub struct ElectLeadersTopicPartitions {
        /// The topic name.
        pub topic: String [0..],
        /// The partition indexes.
        pub partitions: Vec<i32> [0..],
    }
}

wire_struct! {
    /// Elects leaders. Versions 0–2; flexible from 2.
    pub struct ElectLeadersRequest {
        /// [`ELECTION_PREFERRED`] or [`ELECTION_UNCLEAN`] (v1+; v0 is preferred).
        pub election_type: i8 [1..],
        /// The partitions, or null for every partition.
        pub topic_partitions: Option<Vec<ElectLeadersTopicPartitions>> [0..],
        /// How long to wait for the elections, in milliseconds.
        pub timeout_ms: i32 [0..],
    }
}

wire_struct! {
    /// The outcome for one partition.
    pub struct ElectLeadersPartitionResult {
        /// The partition index.
        pub partition_id: i32 [0..],
        /// The error code, or 0.
        pub error_code: i16 [0..],
        /// The error message, or null.
        pub error_message: Option<String> [0..],
    }
}

wire_struct! {
    /// The outcomes for one topic.
    pub struct ElectLeadersReplicaElectionResult {
        /// The topic name.
        pub topic: String [0..],
        /// One result per partition.
        pub partition_result: Vec<ElectLeadersPartitionResult> [0..],
    }
}

wire_struct! {
    /// Election results. Versions 0–2; flexible from 2.
    pub struct ElectLeadersResponse {
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [0..],
        /// Top-level error code (v1+).
        pub error_code: i16 [1..],
        /// One result per topic.
        pub replica_election_results: Vec<ElectLeadersReplicaElectionResult> [0..],
    }
}

impl_message!(
    ElectLeadersRequest,
    key = 43,
    versions = 0..=2,
    flexible = 2,
    response = ElectLeadersResponse
);
impl_message!(
    ElectLeadersResponse,
    key = 43,
    versions = 0..=2,
    flexible = 2
);
