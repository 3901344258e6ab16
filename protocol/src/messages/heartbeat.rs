//! Heartbeat (API key 12): a member tells the coordinator it is alive and learns
//! whether a rebalance started.
//!
//! Supported versions 0–4, flexible from 4. Version history, from Apache Kafka's spec:
//! v1 adds throttle time; v2 is unchanged; v3 adds `group_instance_id` (KIP-345); v4
//! is the first flexible version.

use crate::{impl_message, wire_struct};

wire_struct! {
    /// A member's heartbeat. Versions 0–4; flexible from 4.
    pub struct HeartbeatRequest {
        /// The group id.
        pub group_id: String [0..],
        /// The member's generation.
        pub generation_id: i32 [0..],
        /// The member id.
        pub member_id: String [0..],
        /// The static instance id, or null (v3+).
        pub group_instance_id: Option<String> [3..],
    }
}

wire_struct! {
    /// The heartbeat's result. Versions 0–4; flexible from 4.
    pub struct HeartbeatResponse {
        /// Throttle time in ms (v1+).
        pub throttle_time_ms: i32 [1..],
        /// The error code, or 0; REBALANCE_IN_PROGRESS asks the member to rejoin.
        pub error_code: i16 [0..],
    }
}

impl_message!(
    HeartbeatRequest,
    key = 12,
    versions = 0..=4,
    flexible = 4,
    response = HeartbeatResponse
);
impl_message!(HeartbeatResponse, key = 12, versions = 0..=4, flexible = 4);
