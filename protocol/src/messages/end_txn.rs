//! EndTxn (API key 26): commits or aborts a producer's ongoing transaction.
//!
//! Supported versions 0–5, flexible from 3. Version history, from Apache Kafka's spec:
//! v0 came with transactions (KIP-98); v1 is the same as v0 (throttling after the
//! response); v2 may return PRODUCER_FENCED (KIP-588); v3 is the first flexible
//! version (KIP-482); v4 may return TRANSACTION_ABORTABLE (KIP-890); v5 returns the
//! producer id and epoch, as the coordinator bumps the epoch at the end of every
//! transaction for a client that negotiated v5 (KIP-890 part 2).

use crate::{impl_message, wire_struct};

wire_struct! {
    /// Ends a transaction. Versions 0–5; flexible from 3.
    pub struct EndTxnRequest {
        /// The transactional id.
        pub transactional_id: String [0..],
        /// The producer id.
        pub producer_id: i64 [0..],
        /// The producer epoch.
        pub producer_epoch: i16 [0..],
        /// True to commit, false to abort.
        pub committed: bool [0..],
    }
}

wire_struct! {
    /// The result of EndTxn. Versions 0–5; flexible from 3.
    pub struct EndTxnResponse {
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [0..],
        /// The error code, or 0.
        pub error_code: i16 [0..],
        /// The producer id for the next transaction (v5+).
        pub producer_id: i64 [5..] default(-1),
        /// The producer epoch for the next transaction (v5+).
        pub producer_epoch: i16 [5..] default(-1),
    }
}

impl_message!(
    EndTxnRequest,
    key = 26,
    versions = 0..=5,
    flexible = 3,
    response = EndTxnResponse
);
impl_message!(EndTxnResponse, key = 26, versions = 0..=5, flexible = 3);
