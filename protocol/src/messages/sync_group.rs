//! SyncGroup (API key 14): the leader hands out assignments; every member receives its
//! own.
//!
//! Supported versions 0–5, flexible from 4. Version history, from Apache Kafka's spec:
//! v1 adds throttle time; v2 is unchanged; v3 adds `group_instance_id` (KIP-345); v4
//! is the first flexible version; v5 adds the protocol type and name (KIP-559).

use bytes::Bytes;

use crate::{impl_message, wire_struct};

wire_struct! {
    /// The assignment of one member, sent by the leader.
    pub struct SyncGroupRequestAssignment {
        /// The member id.
        pub member_id: String [0..],
        /// The member's assignment (for consumers, a `ConsumerProtocolAssignment`).
        pub assignment: Bytes [0..],
    }
}

wire_struct! {
    /// Completes a rebalance. Versions 0–5; flexible from 4.
    pub struct SyncGroupRequest {
        /// The group id.
        pub group_id: String [0..],
        /// The generation the member joined.
        pub generation_id: i32 [0..],
        /// The member id.
        pub member_id: String [0..],
        /// The static instance id, or null (v3+).
        pub group_instance_id: Option<String> [3..],
        /// The protocol type, or null (v5+).
        pub protocol_type: Option<String> [5..],
        /// The protocol name, or null (v5+).
        pub protocol_name: Option<String> [5..],
        /// Every member's assignment (leader only; empty from followers).
        pub assignments: Vec<SyncGroupRequestAssignment> [0..],
    }
}

wire_struct! {
    /// This member's assignment. Versions 0–5; flexible from 4.
    pub struct SyncGroupResponse {
        /// Throttle time in ms (v1+).
        pub throttle_time_ms: i32 [1..],
        /// The error code, or 0.
        pub error_code: i16 [0..],
        /// The protocol type, or null (v5+).
        pub protocol_type: Option<String> [5..],
        /// The protocol name, or null (v5+).
        pub protocol_name: Option<String> [5..],
        /// The member's assignment.
        pub assignment: Bytes [0..],
    }
}

impl_message!(
    SyncGroupRequest,
    key = 14,
    versions = 0..=5,
    flexible = 4,
    response = SyncGroupResponse
);
impl_message!(SyncGroupResponse, key = 14, versions = 0..=5, flexible = 4);
