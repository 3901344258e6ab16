//! LeaveGroup (API key 13): one member (v0–2) or several (v3+) leave a group.
//!
//! Supported versions 0–5, flexible from 4. Version history, from Apache Kafka's spec:
//! v1 adds throttle time; v2 is unchanged; v3 leaves several members by member id or
//! instance id in one request (KIP-345); v4 is the first flexible version; v5 adds the
//! leave reason (KIP-800).

use crate::{impl_message, wire_struct};

wire_struct! {
    /// One member leaving (v3+).
    pub struct MemberIdentity {
        /// The member id, or empty when leaving by instance id.
        pub member_id: String [3..],
        /// The static instance id, or null.
        pub group_instance_id: Option<String> [3..],
        /// Why the member leaves, or null (v5+).
        pub reason: Option<String> [5..],
    }
}

wire_struct! {
    /// Leaves a group. Versions 0–5; flexible from 4.
    pub struct LeaveGroupRequest {
        /// The group id.
        pub group_id: String [0..],
        /// The member id (v0–2).
        pub member_id: String [0..=2],
        /// The leaving members (v3+).
        pub members: Vec<MemberIdentity> [3..],
    }
}

wire_struct! {
    /// The result for one leaving member (v3+).
    pub struct LeaveGroupResponseMember {
        /// The member id.
        pub member_id: String [3..],
        /// The static instance id, or null.
        pub group_instance_id: Option<String> [3..],
        /// The error code, or 0.
        pub error_code: i16 [3..],
    }
}

wire_struct! {
    /// The result of a leave. Versions 0–5; flexible from 4.
    pub struct LeaveGroupResponse {
        /// Throttle time in ms (v1+).
        pub throttle_time_ms: i32 [1..],
        /// The top-level error code, or 0.
        pub error_code: i16 [0..],
        /// One result per leaving member (v3+).
        pub members: Vec<LeaveGroupResponseMember> [3..],
    }
}

impl_message!(
    LeaveGroupRequest,
    key = 13,
    versions = 0..=5,
    flexible = 4,
    response = LeaveGroupResponse
);
impl_message!(LeaveGroupResponse, key = 13, versions = 0..=5, flexible = 4);
