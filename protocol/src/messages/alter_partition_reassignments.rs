//! AlterPartitionReassignments (API key 45, KIP-455): starts or cancels moving
//! partitions' replicas to new brokers.
//!
//! Supported version 0, flexible. A null `replicas` cancels the partition's
//! reassignment in progress.

use crate::{impl_message, wire_struct};

wire_struct! {
    /// One partition and its target replicas.
    pub struct ReassignablePartition {
        /// The partition index.
        pub partition_index: i32 [0..],
        /// The target replicas, preferred first, or null to cancel.
        pub replicas: Option<Vec<i32>> [0..],
    }
}

wire_struct! {
    /// The partitions of one topic to reassign.
    pub struct ReassignableTopic {
        /// The topic name.
        pub name: String [0..],
        /// The partitions.
        pub partitions: Vec<ReassignablePartition> [0..],
    }
}

wire_struct! {
    /// Starts or cancels reassignments. Version 0; flexible.
    pub struct AlterPartitionReassignmentsRequest {
        /// How long to wait for the request to complete, in milliseconds.
        pub timeout_ms: i32 [0..],
        /// The topics to reassign.
        pub topics: Vec<ReassignableTopic> [0..],
    }
}

wire_struct! {
    /// The outcome for one partition.
    pub struct ReassignablePartitionResponse {
        /// The partition index.
        pub partition_index: i32 [0..],
        /// The error code, or 0.
        pub error_code: i16 [0..],
        /// The error message, or null.
        pub error_message: Option<String> [0..],
    }
}

wire_struct! {
    /// The outcomes for one topic.
    pub struct ReassignableTopicResponse {
        /// The topic name.
        pub name: String [0..],
        /// One result per requested partition.
        pub partitions: Vec<ReassignablePartitionResponse> [0..],
    }
}

wire_struct! {
    /// Reassignment results. Version 0; flexible.
    pub struct AlterPartitionReassignmentsResponse {
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [0..],
        /// Top-level error code, or 0.
        pub error_code: i16 [0..],
        /// Top-level error message, or null.
        pub error_message: Option<String> [0..],
        /// One result per requested topic.
        pub responses: Vec<ReassignableTopicResponse> [0..],
    }
}

impl_message!(
    AlterPartitionReassignmentsRequest,
    key = 45,
    versions = 0..=0,
    flexible = 0,
    response = AlterPartitionReassignmentsResponse
);
impl_message!(
    AlterPartitionReassignmentsResponse,
    key = 45,
    versions = 0..=0,
    flexible = 0
);
