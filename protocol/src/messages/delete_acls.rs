//! DeleteAcls (API key 31): removes the ACL bindings that match filters (KIP-140).
//!
//! Supported versions 1–3, flexible from 2. Version history, from Apache Kafka's
//! spec: v1 adds the resource pattern type (KIP-290, prefixed ACLs); v2 is the
//! first flexible version; v3 adds the USER_GROUP resource type on the broker side
//! (no wire change). Version 0 was removed in Kafka 4.0 (KIP-896). The codes are
//! those listed in [`crate::messages::describe_acls`].

use crate::{impl_message, wire_struct};

wire_struct! {
    /// One filter of the ACLs to delete.
    pub struct DeleteAclsFilter {
        /// The resource type.
        pub resource_type_filter: i8 [1..],
        /// The resource name, or null to match any.
        pub resource_name_filter: Option<String> [1..],
        /// The pattern type to match.
        pub pattern_type_filter: i8 [1..] default(3),
        /// The principal, or null to match any.
        pub principal_filter: Option<String> [1..],
        /// The host, or null to match any.
        pub host_filter: Option<String> [1..],
        /// The operation to match.
        pub operation: i8 [1..],
        /// The permission type to match.
        pub permission_type: i8 [1..],
    }
}

wire_struct! {
    /// The filters of the ACLs to delete. Versions 1–3; flexible from 2.
    pub struct DeleteAclsRequest {
        /// The filters.
        pub filters: Vec<DeleteAclsFilter> [1..],
    }
}

wire_struct! {
    /// One ACL binding that a filter matched (and that was deleted unless its error
    /// code says otherwise).
    pub struct DeleteAclsMatchingAcl {
        /// The deletion's error code, or 0.
        pub error_code: i16 [1..],
        /// The deletion's error message, or null.
        pub error_message: Option<String> [1..],
        /// The resource type.
        pub resource_type: i8 [1..],
        /// The resource name.
        pub resource_name: String [1..],
        /// The resource pattern type.
        pub pattern_type: i8 [1..] default(3),
        /// The principal.
        pub principal: String [1..],
        /// The host.
        pub host: String [1..],
        /// The operation.
        pub operation: i8 [1..],
        /// The permission type.
        pub permission_type: i8 [1..],
    }
}

wire_struct! {
    /// The outcome of one filter, in request order.
    pub struct DeleteAclsFilterResult {
        /// The filter's error code, or 0.
        pub error_code: i16 [1..],
        /// The filter's error message, or null.
        pub error_message: Option<String> [1..],
        /// The ACLs the filter matched.
        pub matching_acls: Vec<DeleteAclsMatchingAcl> [1..],
    }
}

wire_struct! {
    /// One result per filter. Versions 1–3; flexible from 2.
    pub struct DeleteAclsResponse {
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [1..],
        /// The results, in request order.
        pub filter_results: Vec<DeleteAclsFilterResult> [1..],
    }
}

impl_message!(
    DeleteAclsRequest,
    key = 31,
    versions = 1..=3,
    flexible = 2,
    response = DeleteAclsResponse
);
impl_message!(DeleteAclsResponse, key = 31, versions = 1..=3, flexible = 2);
