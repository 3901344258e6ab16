//! FindCoordinator (API key 10): which broker coordinates a consumer group or a
//! transactional id.
//!
//! Supported versions 0–6, flexible from 3. Version history, from Apache Kafka's spec:
//! v1 adds the key type (KIP-98) and the error message; v2 is unchanged on the wire;
//! v3 is the first flexible version (KIP-482); v4 looks up several keys in one request
//! (KIP-699), moving every result into `coordinators`; v5 may return
//! TRANSACTION_ABORTABLE (KIP-890); v6 adds the share-group key type (KIP-932).
//! Kafka 4.0 removed v0 (KIP-896).

use crate::{impl_message, wire_struct};

wire_struct! {
    /// Asks for the coordinator of one key (v0–3) or several keys (v4+).
    pub struct FindCoordinatorRequest {
        /// The coordinator key (v0–3).
        pub key: String [0..=3],
        /// The key type: 0 group, 1 transaction, 2 share (v1+).
        pub key_type: i8 [1..],
        /// The coordinator keys (v4+).
        pub coordinator_keys: Vec<String> [4..],
    }
}

wire_struct! {
    /// The coordinator found for one key (v4+).
    pub struct Coordinator {
        /// The coordinator key.
        pub key: String [4..],
        /// The node id.
        pub node_id: i32 [4..],
        /// The host name.
        pub host: String [4..],
        /// The port.
        pub port: i32 [4..],
        /// The error code, or 0.
        pub error_code: i16 [4..],
        /// The error message, or null.
        pub error_message: Option<String> [4..],
    }
}

wire_struct! {
    /// The coordinator of one key (v0–3) or of each key (v4+). Versions 0–6.
    pub struct FindCoordinatorResponse {
        /// Throttle time in ms (v1+).
        pub throttle_time_ms: i32 [1..],
        /// The error code, or 0 (v0–3).
        pub error_code: i16 [0..=3],
        /// The error message, or null (v1–3).
        pub error_message: Option<String> [1..=3],
        /// The node id (v0–3).
        pub node_id: i32 [0..=3],
        /// The host name (v0–3).
        pub host: String [0..=3],
        /// The port (v0–3).
        pub port: i32 [0..=3],
        /// One result per requested key (v4+).
        pub coordinators: Vec<Coordinator> [4..],
    }
}

impl_message!(
    FindCoordinatorRequest,
    key = 10,
    versions = 0..=6,
    flexible = 3,
    response = FindCoordinatorResponse
);
impl_message!(
    FindCoordinatorResponse,
    key = 10,
    versions = 0..=6,
    flexible = 3
);
