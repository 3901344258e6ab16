//! DescribeTransactions (API key 65): the state of transactional ids, asked of
//! their transaction coordinator (KIP-664).
//!
//! Supported version 0, flexible.

use crate::{impl_message, wire_struct};

wire_struct! {
    /// Describes transactions. Version 0; flexible.
    pub struct DescribeTransactionsRequest {
        /// The transactional ids to describe.
        pub transactional_ids: Vec<String> [0..],
    }
}

wire_struct! {
    /// A topic's partitions in a described transaction.
    pub struct DescribedTransactionTopic {
        /// The topic name.
        pub topic: String [0..],
        /// The partition indexes.
        pub partitions: Vec<i32> [0..],
    }
}

wire_struct! {
    /// One described transactional id.
    pub struct DescribedTransaction {
        /// The error code, or 0.
        pub error_code: i16 [0..],
        /// The transactional id.
        pub transactional_id: String [0..],
        /// The state (`Empty`, `Ongoing`, `PrepareCommit`...).
        pub transaction_state: String [0..],
        /// The transaction timeout in ms.
        pub transaction_timeout_ms: i32 [0..],
        /// When the current transaction started, in ms since the epoch, or -1.
        pub transaction_start_time_ms: i64 [0..],
        /// The producer id.
        pub producer_id: i64 [0..],
        /// The producer epoch.
        pub producer_epoch: i16 [0..],
        /// The partitions of the current transaction (while preparing to commit or
        /// abort, those without their marker yet).
        pub topics: Vec<DescribedTransactionTopic> [0..],
    }
}

wire_struct! {
    /// The described transactions. Version 0; flexible.
    pub struct DescribeTransactionsResponse {
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [0..],
        /// One entry per transactional id asked for.
        pub transaction_states: Vec<DescribedTransaction> [0..],
    }
}

impl_message!(
    DescribeTransactionsRequest,
    key = 65,
    versions = 0..=0,
    flexible = 0,
    response = DescribeTransactionsResponse
);
impl_message!(
    DescribeTransactionsResponse,
    key = 65,
    versions = 0..=0,
    flexible = 0
);
