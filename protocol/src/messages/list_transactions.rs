//! ListTransactions (API key 66): the transactional ids a coordinator holds
//! (KIP-664).
//!
//! Supported versions 0–1, flexible. Version history, from Apache Kafka's spec: v1
//! adds the duration filter (KIP-994).

use crate::{impl_message, wire_struct};

wire_struct! {
    /// Lists transactions. Versions 0–1; flexible.
    pub struct ListTransactionsRequest {
        /// Only transactions in these states; empty for all.
        pub state_filters: Vec<String> [0..],
        /// Only transactions of these producer ids; empty for all.
        pub producer_id_filters: Vec<i64> [0..],
        /// Only transactions running longer than this many ms; negative for all (v1+).
        pub duration_filter: i64 [1..] default(-1),
    }
}

wire_struct! {
    /// One listed transactional id.
    pub struct ListedTransaction {
        /// The transactional id.
        pub transactional_id: String [0..],
        /// The producer id.
        pub producer_id: i64 [0..],
        /// The state.
        pub transaction_state: String [0..],
    }
}

wire_struct! {
    /// The listed transactions. Versions 0–1; flexible.
    pub struct ListTransactionsResponse {
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [0..],
        /// The error code, or 0.
        pub error_code: i16 [0..],
        /// The state filters of the request that name no state.
        pub unknown_state_filters: Vec<String> [0..],
        /// The transactions.
        pub transaction_states: Vec<ListedTransaction> [0..],
    }
}

impl_message!(
    ListTransactionsRequest,
    key = 66,
    versions = 0..=1,
    flexible = 0,
    response = ListTransactionsResponse
);
impl_message!(
    ListTransactionsResponse,
    key = 66,
    versions = 0..=1,
    flexible = 0
);
