//! DeleteTopics (API key 20): deletes topics by name or (v6+) by id.
//!
//! Supported versions 1–6, flexible from 4. Version history, from Apache Kafka's spec:
//! v1 adds the throttle time; v3 may return TOPIC_DELETION_DISABLED; v4 is the first
//! flexible version (KIP-482); v5 adds error messages and may return
//! THROTTLING_QUOTA_EXCEEDED (KIP-599); v6 names topics by name or id (KIP-516).

use crate::primitives::Uuid;
use crate::{impl_message, wire_struct};

wire_struct! {
    /// One topic to delete, by name or id (v6+).
    pub struct DeleteTopicState {
        /// The topic name, or null when deleting by id.
        pub name: Option<String> [6..],
        /// The topic id, or zero when deleting by name.
        pub topic_id: Uuid [6..],
    }
}

wire_struct! {
    /// Deletes topics. Versions 1–6; flexible from 4.
    pub struct DeleteTopicsRequest {
        /// The topics to delete (v6+).
        pub topics: Vec<DeleteTopicState> [6..],
        /// The names of the topics to delete (v1–v5).
        pub topic_names: Vec<String> [0..=5],
        /// How long to wait for the deletions, in ms.
        pub timeout_ms: i32 [0..],
    }
}

wire_struct! {
    /// The outcome for one topic in a [`DeleteTopicsResponse`].
    pub struct DeletableTopicResult {
        /// The topic name; null (v6+) when deleted by an unknown id.
        pub name: Option<String> [0..],
        /// The topic id (v6+).
        pub topic_id: Uuid [6..],
        /// The error code, or 0.
        pub error_code: i16 [0..],
        /// The error message, or null (v5+).
        pub error_message: Option<String> [5..],
    }
}

wire_struct! {
    /// The outcome of a [`DeleteTopicsRequest`]. Versions 1–6; flexible from 4.
    pub struct DeleteTopicsResponse {
        /// Throttle time in ms (v1+).
        pub throttle_time_ms: i32 [1..],
        /// Each topic's outcome.
        pub responses: Vec<DeletableTopicResult> [0..],
    }
}

impl_message!(
    DeleteTopicsRequest,
    key = 20,
    versions = 1..=6,
    flexible = 4,
    response = DeleteTopicsResponse
);
impl_message!(
    DeleteTopicsResponse,
    key = 20,
    versions = 1..=6,
    flexible = 4
);
