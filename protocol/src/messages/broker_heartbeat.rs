//! BrokerHeartbeat (API key 63): a KRaft broker keeps its session with the controller
//! alive, reports how far it has applied the metadata log, and asks for controlled
//! shutdown.
//!
//! Supported versions 0–1, all flexible. v0 came with KRaft (KIP-631); v1 adds the
//! offline log directories as a tagged field (KIP-858).

use crate::primitives::Uuid;
use crate::{impl_message, wire_struct};

wire_struct! {
    /// A broker's heartbeat. Versions 0–1; flexible from 0.
    pub struct BrokerHeartbeatRequest {
        /// The broker id.
        pub broker_id: i32 [0..],
        /// The broker epoch from the registration.
        pub broker_epoch: i64 [0..] default(-1),
        /// The highest metadata offset the broker has reached.
        pub current_metadata_offset: i64 [0..],
        /// Whether the broker wants to be fenced.
        pub want_fence: bool [0..],
        /// Whether the broker wants to shut down (controlled shutdown).
        pub want_shut_down: bool [0..],
        /// Log directories that failed and went offline (v1+, tag 0).
        pub offline_log_dirs: Vec<Uuid> [1..] tag(0),
    }
}

wire_struct! {
    /// The controller's answer to a heartbeat. Versions 0–1; flexible from 0.
    pub struct BrokerHeartbeatResponse {
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [0..],
        /// The error code, or 0.
        pub error_code: i16 [0..],
        /// Whether the broker has approximately caught up with the metadata log.
        pub is_caught_up: bool [0..],
        /// Whether the broker is fenced.
        pub is_fenced: bool [0..] default(true),
        /// Whether the broker should proceed with its shutdown.
        pub should_shut_down: bool [0..],
    }
}

impl_message!(
    BrokerHeartbeatRequest,
    key = 63,
    versions = 0..=1,
    flexible = 0,
    response = BrokerHeartbeatResponse
);
impl_message!(
    BrokerHeartbeatResponse,
    key = 63,
    versions = 0..=1,
    flexible = 0
);
