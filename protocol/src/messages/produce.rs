//! Produce (API key 0): appends record batches to partitions.
//!
//! Supported versions 3–10 (Kafka 4.0 removed 0–2, KIP-896), flexible from 9. Version
//! history, from Apache Kafka's spec: v3 adds the transactional id and record format v2
//! (KIP-98); v4 may return KAFKA_STORAGE_ERROR; v5 adds the log start offset to the
//! response; v7 allows ZStandard compression (KIP-110); v8 adds record errors and an
//! error message to the response (KIP-467); v9 is the first flexible version (KIP-482);
//! v10 adds the leader hints `current_leader` and `node_endpoints` as tagged fields
//! (KIP-951).

use crate::record::BatchSegments;
use crate::{impl_message, wire_struct};

wire_struct! {
    /// Records for one partition in a [`ProduceRequest`].
    pub struct PartitionProduceData {
        /// The partition index.
        pub index: i32 [0..],
        /// The record batches to append, as raw bytes (zero-copy); null is allowed by
        /// the protocol but carries no records. Encoded, each large segment goes out
        /// of line (see [`BatchSegments`]); decoded, it is one segment of the frame.
        pub records: Option<BatchSegments> [0..],
    }
}

wire_struct! {
    /// Records for one topic in a [`ProduceRequest`].
    pub struct TopicProduceData {
        /// The topic name.
        pub name: String [0..],
        /// Each partition to produce to.
        pub partition_data: Vec<PartitionProduceData> [0..],
    }
}

wire_struct! {
    /// Appends record batches. Versions 3–10; flexible from 9.
    pub struct ProduceRequest {
        /// The transactional id, or null if the producer is not transactional (v3+).
        pub transactional_id: Option<String> [3..],
        /// Acknowledgements required: 0 none, 1 the leader, -1 the full ISR.
        pub acks: i16 [0..],
        /// How long to wait for the acknowledgements, in ms.
        pub timeout_ms: i32 [0..],
        /// Each topic to produce to.
        pub topic_data: Vec<TopicProduceData> [0..],
    }
}

wire_struct! {
    /// A record that caused its batch to be dropped (v8+).
    pub struct BatchIndexAndErrorMessage {
        /// The index of the record in its batch.
        pub batch_index: i32 [8..],
        /// Why the record was rejected, or null.
        pub batch_index_error_message: Option<String> [8..],
    }
}

wire_struct! {
    /// The partition's current leader, sent with NOT_LEADER_OR_FOLLOWER (v10+, KIP-951).
    pub struct ProduceResponseLeaderIdAndEpoch {
        /// The id of the current leader, or -1 if unknown.
        pub leader_id: i32 [10..] default(-1),
        /// The latest known leader epoch, or -1.
        pub leader_epoch: i32 [10..] default(-1),
    }
}

wire_struct! {
    /// The result for one partition in a [`ProduceResponse`].
    pub struct PartitionProduceResponse {
        /// The partition index.
        pub index: i32 [0..],
        /// The error code, or 0.
        pub error_code: i16 [0..],
        /// The offset of the first appended record.
        pub base_offset: i64 [0..],
        /// The broker's append time if the topic uses LogAppendTime, else -1 (v2+).
        pub log_append_time_ms: i64 [2..] default(-1),
        /// The log start offset (v5+).
        pub log_start_offset: i64 [5..] default(-1),
        /// Records that caused the batch to be dropped (v8+).
        pub record_errors: Vec<BatchIndexAndErrorMessage> [8..],
        /// A summary of why the batch was dropped, or null (v8+).
        pub error_message: Option<String> [8..],
        /// The current leader, when this broker is not it (v10+, tag 0).
        pub current_leader: ProduceResponseLeaderIdAndEpoch [10..] tag(0),
    }
}

wire_struct! {
    /// The results for one topic in a [`ProduceResponse`].
    pub struct TopicProduceResponse {
        /// The topic name.
        pub name: String [0..],
        /// Each partition produced to.
        pub partition_responses: Vec<PartitionProduceResponse> [0..],
    }
}

wire_struct! {
    /// A broker endpoint named by a leader hint (v10+, KIP-951).
    pub struct ProduceResponseNodeEndpoint {
        /// The broker id.
        pub node_id: i32 [10..],
        /// The broker host name.
        pub host: String [10..],
        /// The broker port.
        pub port: i32 [10..],
        /// The broker's rack, or null.
        pub rack: Option<String> [10..],
    }
}

wire_struct! {
    /// The outcome of a [`ProduceRequest`]. Versions 3–10; flexible from 9.
    pub struct ProduceResponse {
        /// Each topic produced to.
        pub responses: Vec<TopicProduceResponse> [0..],
        /// Throttle time in ms (v1+).
        pub throttle_time_ms: i32 [1..],
        /// Endpoints of the leaders named in `current_leader` hints (v10+, tag 0).
        pub node_endpoints: Vec<ProduceResponseNodeEndpoint> [10..] tag(0),
    }
}

impl_message!(
    ProduceRequest,
    key = 0,
    versions = 3..=10,
    flexible = 9,
    response = ProduceResponse
);
impl_message!(ProduceResponse, key = 0, versions = 3..=10, flexible = 9);
