//! CreatePartitions (API key 37): raise a topic's partition count (KIP-195).
//!
//! Supported versions 0–3, flexible from 2. Version history, from Apache Kafka's
//! spec: v1 is v0 with throttling after the response (KIP-219); v2 is the first
//! flexible version; v3 is unchanged (KIP-599's quota error).

use crate::{impl_message, wire_struct};

wire_struct! {
    /// The replicas of one new partition.
    pub struct CreatePartitionsAssignment {
        /// The brokers that hold the new partition; the first is its preferred leader.
        pub broker_ids: Vec<i32> [0..],
    }
}

wire_struct! {
    /// One topic to grow.
    pub struct CreatePartitionsTopic {
        /// The topic name.
        pub name: String [0..],
        /// The new partition count (total, not the number added).
        pub count: i32 [0..],
        /// The replicas of each new partition, or null to let the controller place them.
        pub assignments: Option<Vec<CreatePartitionsAssignment>> [0..],
    }
}

wire_struct! {
    /// Creates partitions. Versions 0–3; flexible from 2.
    pub struct CreatePartitionsRequest {
        /// The topics to grow.
        pub topics: Vec<CreatePartitionsTopic> [0..],
        /// How long to wait for the partitions to be created, in ms.
        pub timeout_ms: i32 [0..],
        /// Validate only; create nothing.
        pub validate_only: bool [0..],
    }
}

wire_struct! {
    /// The outcome for one topic.
    pub struct CreatePartitionsTopicResult {
        /// The topic name.
        pub name: String [0..],
        /// The error code, or 0.
        pub error_code: i16 [0..],
        /// The error message, or null.
        pub error_message: Option<String> [0..],
    }
}

wire_struct! {
    /// Created partitions. Versions 0–3; flexible from 2.
    pub struct CreatePartitionsResponse {
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [0..],
        /// One outcome per topic.
        pub results: Vec<CreatePartitionsTopicResult> [0..],
    }
}

impl_message!(
    CreatePartitionsRequest,
    key = 37,
    versions = 0..=3,
    flexible = 2,
    response = CreatePartitionsResponse
);
impl_message!(
    CreatePartitionsResponse,
    key = 37,
    versions = 0..=3,
    flexible = 2
);
