//! CreateTopics (API key 19): creates topics with a partition count and replication
//! factor or a manual assignment.
//!
//! Supported versions 2–7, flexible from 5. Version history, from Apache Kafka's spec:
//! v1 adds `validate_only` (KIP-108) and per-topic error messages; v2 the throttle
//! time; v4 makes the partition count and replication factor optional (-1, KIP-464);
//! v5 is the first flexible version (KIP-482) and returns the topic configs (KIP-525);
//! v6 may return THROTTLING_QUOTA_EXCEEDED (KIP-599); v7 returns the topic id
//! (KIP-516).

use crate::primitives::Uuid;
use crate::{impl_message, wire_struct};

wire_struct! {
    /// A manual replica assignment for one partition of a [`CreatableTopic`].
    pub struct CreatableReplicaAssignment {
        /// The partition index.
        pub partition_index: i32 [0..],
        /// The brokers to place the partition on.
        pub broker_ids: Vec<i32> [0..],
    }
}

wire_struct! {
    /// A topic config to set at creation.
    pub struct CreatableTopicConfig {
        /// The config name.
        pub name: String [0..],
        /// The config value, or null.
        pub value: Option<String> [0..],
    }
}

wire_struct! {
    /// One topic to create in a [`CreateTopicsRequest`].
    pub struct CreatableTopic {
        /// The topic name.
        pub name: String [0..],
        /// The partition count, or -1 for a manual assignment or the broker default.
        pub num_partitions: i32 [0..],
        /// The replication factor, or -1 for a manual assignment or the broker default.
        pub replication_factor: i16 [0..],
        /// The manual assignment, or empty for automatic assignment.
        pub assignments: Vec<CreatableReplicaAssignment> [0..],
        /// Custom topic configs.
        pub configs: Vec<CreatableTopicConfig> [0..],
    }
}

wire_struct! {
    /// Creates topics. Versions 2–7; flexible from 5.
    pub struct CreateTopicsRequest {
        /// The topics to create.
        pub topics: Vec<CreatableTopic> [0..],
        /// How long to wait for the creation, in ms.
        pub timeout_ms: i32 [0..] default(60000),
        /// Only validate the request, create nothing (v1+).
        pub validate_only: bool [1..],
    }
}

wire_struct! {
    /// A config of a created topic (v5+).
    pub struct CreatableTopicConfigs {
        /// The config name.
        pub name: String [5..],
        /// The config value, or null.
        pub value: Option<String> [5..],
        /// Whether the config is read-only.
        pub read_only: bool [5..],
        /// Where the config value comes from, or -1.
        pub config_source: i8 [5..] default(-1),
        /// Whether the config is sensitive.
        pub is_sensitive: bool [5..],
    }
}

wire_struct! {
    /// The outcome for one topic in a [`CreateTopicsResponse`].
    pub struct CreatableTopicResult {
        /// The topic name.
        pub name: String [0..],
        /// The id of the created topic (v7+).
        pub topic_id: Uuid [7..],
        /// The error code, or 0.
        pub error_code: i16 [0..],
        /// The error message, or null (v1+).
        pub error_message: Option<String> [1..],
        /// Why the configs are missing, if they are (v5+, tag 0).
        pub topic_config_error_code: i16 [5..] tag(0),
        /// The topic's partition count (v5+).
        pub num_partitions: i32 [5..] default(-1),
        /// The topic's replication factor (v5+).
        pub replication_factor: i16 [5..] default(-1),
        /// The topic's configs, or null (v5+).
        pub configs: Option<Vec<CreatableTopicConfigs>> [5..],
    }
}

wire_struct! {
    /// The outcome of a [`CreateTopicsRequest`]. Versions 2–7; flexible from 5.
    pub struct CreateTopicsResponse {
        /// Throttle time in ms (v2+).
        pub throttle_time_ms: i32 [2..],
        /// Each topic's outcome.
        pub topics: Vec<CreatableTopicResult> [0..],
    }
}

impl_message!(
    CreateTopicsRequest,
    key = 19,
    versions = 2..=7,
    flexible = 5,
    response = CreateTopicsResponse
);
impl_message!(
    CreateTopicsResponse,
    key = 19,
    versions = 2..=7,
    flexible = 5
);
