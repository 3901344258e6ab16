//! DeleteGroups (API key 42): deletes empty groups and their committed offsets.
//!
//! Supported versions 0–2, flexible from 2. Version history, from Apache Kafka's spec:
//! v1 is unchanged on the wire; v2 is the first flexible version. Kafka 4.0 keeps v0
//! deprecated.

use crate::{impl_message, wire_struct};

wire_struct! {
    /// Deletes groups. Versions 0–2; flexible from 2.
    pub struct DeleteGroupsRequest {
        /// The group ids to delete.
        pub groups_names: Vec<String> [0..],
    }
}

wire_struct! {
    /// The deletion result of one group.
    pub struct DeletableGroupResult {
        /// The group id.
        pub group_id: String [0..],
        /// The error code, or 0.
        pub error_code: i16 [0..],
    }
}

wire_struct! {
    /// Deletion results. Versions 0–2; flexible from 2.
    pub struct DeleteGroupsResponse {
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [0..],
        /// One result per requested group.
        pub results: Vec<DeletableGroupResult> [0..],
    }
}

impl_message!(
    DeleteGroupsRequest,
    key = 42,
    versions = 0..=2,
    flexible = 2,
    response = DeleteGroupsResponse
);
impl_message!(
    DeleteGroupsResponse,
    key = 42,
    versions = 0..=2,
    flexible = 2
);
