//! AddPartitionsToTxn (API key 24): adds partitions to a producer's ongoing
//! transaction, or (v4+, broker to broker) checks that they are in it.
//!
//! Supported versions 0–5, flexible from 3. Version history, from Apache Kafka's spec:
//! v0 came with transactions (KIP-98); v1 is the same as v0 (it may be throttled
//! after the response is sent); v2 adds no field (it may return
//! PRODUCER_FENCED, KIP-588); v3 is the first flexible version (KIP-482); v4 is the
//! batched form partition leaders send to the transaction coordinator, several
//! transactions per request, with `verify_only` (KIP-890 part 1); v5 may return
//! TRANSACTION_ABORTABLE (KIP-890). Clients send v0–3, the `v3_and_below_*` fields;
//! brokers send v4+, the `transactions` array.

use crate::{impl_message, wire_struct};

wire_struct! {
    /// A topic and the partitions of it to add (or verify).
    pub struct AddPartitionsToTxnTopic {
        /// The topic name.
        pub name: String [0..],
        /// The partition indexes.
        pub partitions: Vec<i32> [0..],
    }
}

wire_struct! {
    /// One transaction of a batched (v4+) request.
    pub struct AddPartitionsToTxnTransaction {
        /// The transactional id.
        pub transactional_id: String [4..],
        /// The producer id in use for the transactional id.
        pub producer_id: i64 [4..],
        /// The producer epoch.
        pub producer_epoch: i16 [4..],
        /// Only check that the partitions are in the transaction, add nothing.
        pub verify_only: bool [4..],
        /// The partitions to add or verify.
        pub topics: Vec<AddPartitionsToTxnTopic> [4..],
    }
}

wire_struct! {
    /// Adds partitions to a transaction. Versions 0–5; flexible from 3.
    pub struct AddPartitionsToTxnRequest {
        /// The transactions (v4+, broker to broker).
        pub transactions: Vec<AddPartitionsToTxnTransaction> [4..],
        /// The transactional id (v0–3).
        pub v3_and_below_transactional_id: String [0..=3],
        /// The producer id (v0–3).
        pub v3_and_below_producer_id: i64 [0..=3],
        /// The producer epoch (v0–3).
        pub v3_and_below_producer_epoch: i16 [0..=3],
        /// The partitions to add (v0–3).
        pub v3_and_below_topics: Vec<AddPartitionsToTxnTopic> [0..=3],
    }
}

wire_struct! {
    /// One partition's result.
    pub struct AddPartitionsToTxnPartitionResult {
        /// The partition index.
        pub partition_index: i32 [0..],
        /// The error code, or 0.
        pub partition_error_code: i16 [0..],
    }
}

wire_struct! {
    /// One topic's results.
    pub struct AddPartitionsToTxnTopicResult {
        /// The topic name.
        pub name: String [0..],
        /// The results by partition.
        pub results_by_partition: Vec<AddPartitionsToTxnPartitionResult> [0..],
    }
}

wire_struct! {
    /// One transaction's results (v4+).
    pub struct AddPartitionsToTxnResult {
        /// The transactional id.
        pub transactional_id: String [4..],
        /// The results by topic.
        pub topic_results: Vec<AddPartitionsToTxnTopicResult> [4..],
    }
}

wire_struct! {
    /// The result of adding partitions. Versions 0–5; flexible from 3.
    pub struct AddPartitionsToTxnResponse {
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [0..],
        /// A top-level error code, or 0 (v4+).
        pub error_code: i16 [4..],
        /// The results by transaction (v4+).
        pub results_by_transaction: Vec<AddPartitionsToTxnResult> [4..],
        /// The results by topic (v0–3).
        pub results_by_topic_v3_and_below: Vec<AddPartitionsToTxnTopicResult> [0..=3],
    }
}

impl_message!(
    AddPartitionsToTxnRequest,
    key = 24,
    versions = 0..=5,
    flexible = 3,
    response = AddPartitionsToTxnResponse
);
impl_message!(
    AddPartitionsToTxnResponse,
    key = 24,
    versions = 0..=5,
    flexible = 3
);
