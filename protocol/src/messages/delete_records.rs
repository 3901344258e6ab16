//! DeleteRecords (API key 21): moves partitions' log start offsets forward, making
//! the records below them unreadable (KIP-107).
//!
//! Supported versions 0–2, flexible from 2. Version history, from Apache Kafka's spec:
//! v1 is unchanged on the wire (KIP-110 throttling); v2 is the first flexible version.
//! An `offset` of -1 means the partition's high watermark.

use crate::{impl_message, wire_struct};

wire_struct! {
    /// One partition and the offset its records are deleted up to.
    pub struct DeleteRecordsPartition {
        /// The partition index.
        pub partition_index: i32 [0..],
        /// The deletion offset: records below it are deleted; -1 means the high
        /// watermark.
        pub offset: i64 [0..],
    }
}

wire_struct! {
    /// The partitions of one topic to delete records from.
    pub struct DeleteRecordsTopic {
        /// The topic name.
        pub name: String [0..],
        /// The partitions.
        pub partitions: Vec<DeleteRecordsPartition> [0..],
    }
}

wire_struct! {
    /// Deletes records below given offsets. Versions 0–2; flexible from 2.
    pub struct DeleteRecordsRequest {
        /// Each topic to delete records from.
        pub topics: Vec<DeleteRecordsTopic> [0..],
        /// How long to wait for the deletion to complete (every replica moved its
        /// log start), in milliseconds.
        pub timeout_ms: i32 [0..],
    }
}

wire_struct! {
    /// The outcome for one partition.
    pub struct DeleteRecordsPartitionResult {
        /// The partition index.
        pub partition_index: i32 [0..],
        /// The partition's low watermark: the smallest log start offset among its
        /// replicas, or -1 on error.
        pub low_watermark: i64 [0..],
        /// The error code, or 0.
        pub error_code: i16 [0..],
    }
}

wire_struct! {
    /// The outcomes for one topic.
    pub struct DeleteRecordsTopicResult {
        /// The topic name.
        pub name: String [0..],
        /// One result per requested partition.
        pub partitions: Vec<DeleteRecordsPartitionResult> [0..],
    }
}

wire_struct! {
    /// Deletion results. Versions 0–2; flexible from 2.
    pub struct DeleteRecordsResponse {
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [0..],
        /// One result per requested topic.
        pub topics: Vec<DeleteRecordsTopicResult> [0..],
    }
}

impl_message!(
    DeleteRecordsRequest,
    key = 21,
    versions = 0..=2,
    flexible = 2,
    response = DeleteRecordsResponse
);
impl_message!(
    DeleteRecordsResponse,
    key = 21,
    versions = 0..=2,
    flexible = 2
);
