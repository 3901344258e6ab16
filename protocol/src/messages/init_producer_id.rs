//! InitProducerId (API key 22): obtains a producer id and epoch for an idempotent or
//! transactional producer.
//!
//! Supported versions 0–5, flexible from 2. Version history, from Apache Kafka's spec:
//! v0 came with exactly-once delivery (KIP-98); v1 sends responses before throttling;
//! v2 is the first flexible version (KIP-482); v3 adds `producer_id` and
//! `producer_epoch` so that a producer can resume after INVALID_PRODUCER_EPOCH
//! (KIP-360); v4 may return PRODUCER_FENCED (KIP-588); v5 may return
//! TRANSACTION_ABORTABLE (KIP-890).

use crate::{impl_message, wire_struct};

wire_struct! {
    /// Asks for a producer id and epoch. Versions 0–5; flexible from 2.
    pub struct InitProducerIdRequest {
        /// The transactional id, or null if the producer is not transactional.
        pub transactional_id: Option<String> [0..],
        /// How long an idle transaction may stay open, in ms; only for transactions.
        pub transaction_timeout_ms: i32 [0..],
        /// The producer's current id, or -1 (v3+).
        pub producer_id: i64 [3..] default(-1),
        /// The producer's current epoch, or -1 (v3+).
        pub producer_epoch: i16 [3..] default(-1),
    }
}

wire_struct! {
    /// The producer id and epoch granted. Versions 0–5; flexible from 2.
    pub struct InitProducerIdResponse {
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [0..],
        /// The error code, or 0.
        pub error_code: i16 [0..],
        /// The producer id, or -1.
        pub producer_id: i64 [0..] default(-1),
        /// The producer epoch.
        pub producer_epoch: i16 [0..],
    }
}

impl_message!(
    InitProducerIdRequest,
    key = 22,
    versions = 0..=5,
    flexible = 2,
    response = InitProducerIdResponse
);
impl_message!(
    InitProducerIdResponse,
    key = 22,
    versions = 0..=5,
    flexible = 2
);
