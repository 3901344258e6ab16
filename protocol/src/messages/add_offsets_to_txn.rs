//! AddOffsetsToTxn (API key 25): adds a consumer group's offsets partition to a
//! producer's ongoing transaction, before TxnOffsetCommit sends the offsets.
//!
//! Supported versions 0–4, flexible from 3. Version history, from Apache Kafka's spec:
//! v0 came with transactions (KIP-98); v1 is the same as v0 (throttling after the
//! response); v2 may return PRODUCER_FENCED (KIP-588); v3 is the first flexible
//! version (KIP-482); v4 may return TRANSACTION_ABORTABLE (KIP-890).

use crate::{impl_message, wire_struct};

wire_struct! {
    /// Adds a group's offsets to a transaction. Versions 0–4; flexible from 3.
    pub struct AddOffsetsToTxnRequest {
        /// The transactional id.
        pub transactional_id: String [0..],
        /// The producer id in use for the transactional id.
        pub producer_id: i64 [0..],
        /// The producer epoch.
        pub producer_epoch: i16 [0..],
        /// The consumer group whose offsets the transaction will commit.
        pub group_id: String [0..],
    }
}

wire_struct! {
    /// The result of AddOffsetsToTxn. Versions 0–4; flexible from 3.
    pub struct AddOffsetsToTxnResponse {
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [0..],
        /// The error code, or 0.
        pub error_code: i16 [0..],
    }
}

impl_message!(
    AddOffsetsToTxnRequest,
    key = 25,
    versions = 0..=4,
    flexible = 3,
    response = AddOffsetsToTxnResponse
);
impl_message!(
    AddOffsetsToTxnResponse,
    key = 25,
    versions = 0..=4,
    flexible = 3
);
