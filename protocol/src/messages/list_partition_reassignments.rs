//! ListPartitionReassignments (API key 46, KIP-455): the reassignments in progress.
//!
//! Supported version 0, flexible. A null `topics` lists every reassignment.

use crate::{impl_message, wire_struct};

wire_struct! {
    /// The partitions of one topic to list.
    pub struct ListPartitionReassignmentsTopics {
        /// The topic name.
        pub name: String [0..],
        /// The partition indexes.
        pub partition_indexes: Vec<i32> [0..],
    }
}

wire_struct! {
    /// Lists reassignments in progress. Version 0; flexible.
    pub struct ListPartitionReassignmentsRequest {
        /// How long to wait for the request to complete, in milliseconds.
        pub timeout_ms: i32 [0..],
        /// The partitions to look at, or null for all.
        pub topics: Option<Vec<ListPartitionReassignmentsTopics>> [0..],
    }
}

wire_struct! {
    /// One partition's reassignment in progress.
    pub struct OngoingPartitionReassignment {
        /// The partition index.
        pub partition_index: i32 [0..],
        /// The current replica set (the old and the target replicas).
        pub replicas: Vec<i32> [0..],
        /// The replicas being added.
        pub adding_replicas: Vec<i32> [0..],
        /// The replicas being removed.
        pub removing_replicas: Vec<i32> [0..],
    }
}

wire_struct! {
    /// The reassignments in progress of one topic.
    pub struct OngoingTopicReassignment {
        /// The topic name.
        pub name: String [0..],
        /// One entry per partition being reassigned.
        pub partitions: Vec<OngoingPartitionReassignment> [0..],
    }
}

wire_struct! {
    /// Reassignments in progress. Version 0; flexible.
    pub struct ListPartitionReassignmentsResponse {
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [0..],
        /// Top-level error code, or 0.
        pub error_code: i16 [0..],
        /// Top-level error message, or null.
        pub error_message: Option<String> [0..],
        /// The topics with reassignments in progress.
        pub topics: Vec<OngoingTopicReassignment> [0..],
    }
}

impl_message!(
    ListPartitionReassignmentsRequest,
    key = 46,
    versions = 0..=0,
    flexible = 0,
    response = ListPartitionReassignmentsResponse
);
impl_message!(
    ListPartitionReassignmentsResponse,
    key = 46,
    versions = 0..=0,
    flexible = 0
);
