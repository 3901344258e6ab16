//! ListGroups (API key 16): the groups a broker coordinates.
//!
//! Supported versions 0–5, flexible from 3. Version history, from Apache Kafka's spec:
//! v1 adds throttle time; v2 is unchanged; v3 is the first flexible version; v4 adds
//! the state filter and each group's state (KIP-518); v5 adds the type filter and each
//! group's type (KIP-848).

use crate::{impl_message, wire_struct};

wire_struct! {
    /// Lists groups. Versions 0–5; flexible from 3.
    pub struct ListGroupsRequest {
        /// Only groups in these states; empty for all (v4+).
        pub states_filter: Vec<String> [4..],
        /// Only groups of these types; empty for all (v5+).
        pub types_filter: Vec<String> [5..],
    }
}

wire_struct! {
    /// One listed group.
    pub struct ListedGroup {
        /// The group id.
        pub group_id: String [0..],
        /// The protocol type (`consumer` for consumer groups; may be empty).
        pub protocol_type: String [0..],
        /// The state (v4+).
        pub group_state: String [4..],
        /// The group type, `classic` or `consumer` (v5+).
        pub group_type: String [5..],
    }
}

wire_struct! {
    /// Listed groups. Versions 0–5; flexible from 3.
    pub struct ListGroupsResponse {
        /// Throttle time in ms (v1+).
        pub throttle_time_ms: i32 [1..],
        /// The error code, or 0.
        pub error_code: i16 [0..],
        /// The groups.
        pub groups: Vec<ListedGroup> [0..],
    }
}

impl_message!(
    ListGroupsRequest,
    key = 16,
    versions = 0..=5,
    flexible = 3,
    response = ListGroupsResponse
);
impl_message!(ListGroupsResponse, key = 16, versions = 0..=5, flexible = 3);
