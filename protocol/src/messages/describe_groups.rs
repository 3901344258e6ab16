//! DescribeGroups (API key 15): the state, protocol and members of groups.
//!
//! Supported versions 0–5, flexible from 5. Version history, from Apache Kafka's spec:
//! v1 adds throttle time; v2 is unchanged; v3 adds authorized operations (KIP-430); v4
//! adds the members' `group_instance_id` (KIP-345); v5 is the first flexible version.

use bytes::Bytes;

use crate::{impl_message, wire_struct};

wire_struct! {
    /// Describes groups. Versions 0–5; flexible from 5.
    pub struct DescribeGroupsRequest {
        /// The group ids.
        pub groups: Vec<String> [0..],
        /// Whether to include the authorized operations (v3+).
        pub include_authorized_operations: bool [3..],
    }
}

wire_struct! {
    /// One member of a described group.
    pub struct DescribedGroupMember {
        /// The member id.
        pub member_id: String [0..],
        /// The static instance id, or null (v4+).
        pub group_instance_id: Option<String> [4..],
        /// The client id of the member's latest join.
        pub client_id: String [0..],
        /// The client host.
        pub client_host: String [0..],
        /// The member's metadata for the selected protocol.
        pub member_metadata: Bytes [0..],
        /// The member's current assignment.
        pub member_assignment: Bytes [0..],
    }
}

wire_struct! {
    /// One described group.
    pub struct DescribedGroup {
        /// The error code, or 0.
        pub error_code: i16 [0..],
        /// The group id.
        pub group_id: String [0..],
        /// The state (`Empty`, `PreparingRebalance`, `CompletingRebalance`, `Stable`,
        /// `Dead`), or empty.
        pub group_state: String [0..],
        /// The protocol type, or empty.
        pub protocol_type: String [0..],
        /// The selected protocol, or empty.
        pub protocol_data: String [0..],
        /// The members.
        pub members: Vec<DescribedGroupMember> [0..],
        /// Authorized operations bit field, or `i32::MIN` when not requested (v3+).
        pub authorized_operations: i32 [3..] default(i32::MIN),
    }
}

wire_struct! {
    /// Described groups. Versions 0–5; flexible from 5.
    pub struct DescribeGroupsResponse {
        /// Throttle time in ms (v1+).
        pub throttle_time_ms: i32 [1..],
        /// One entry per requested group.
        pub groups: Vec<DescribedGroup> [0..],
    }
}

impl_message!(
    DescribeGroupsRequest,
    key = 15,
    versions = 0..=5,
    flexible = 5,
    response = DescribeGroupsResponse
);
impl_message!(
    DescribeGroupsResponse,
    key = 15,
    versions = 0..=5,
    flexible = 5
);
