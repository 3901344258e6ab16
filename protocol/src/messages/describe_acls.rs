//! DescribeAcls (API key 29): the ACL bindings that match a filter (KIP-140).
//!
//! Supported versions 1–3, flexible from 2. Version history, from Apache Kafka's
//! spec: v1 adds the resource pattern type (KIP-290, prefixed ACLs); v2 is the
//! first flexible version; v3 adds the USER_GROUP resource type on the broker side
//! (no wire change). Version 0 was removed in Kafka 4.0 (KIP-896).
//!
//! Codes used in the filter, from Kafka's `ResourceType`, `PatternType`,
//! `AclOperation` and `AclPermissionType`: resource type 1 any, 2 topic, 3 group,
//! 4 cluster, 5 transactional id; pattern type 1 any, 2 match, 3 literal,
//! 4 prefixed; operation 1 any, 2 all, 3 read, 4 write, 5 create, 6 delete,
//! 7 alter, 8 describe, 9 cluster action, 10 describe configs, 11 alter configs,
//! 12 idempotent write; permission 1 any, 2 deny, 3 allow.

use crate::{impl_message, wire_struct};

wire_struct! {
    /// The filter of the ACLs to describe. Versions 1–3; flexible from 2.
    pub struct DescribeAclsRequest {
        /// The resource type.
        pub resource_type_filter: i8 [1..],
        /// The resource name, or null to match any resource name.
        pub resource_name_filter: Option<String> [1..],
        /// The resource pattern to match.
        pub pattern_type_filter: i8 [1..] default(3),
        /// The principal to match, or null to match any principal.
        pub principal_filter: Option<String> [1..],
        /// The host to match, or null to match any host.
        pub host_filter: Option<String> [1..],
        /// The operation to match.
        pub operation: i8 [1..],
        /// The permission type to match.
        pub permission_type: i8 [1..],
    }
}

wire_struct! {
    /// One ACL of a described resource.
    pub struct AclDescription {
        /// The ACL principal, such as `User:alice`.
        pub principal: String [1..],
        /// The ACL host, `*` or an address.
        pub host: String [1..],
        /// The ACL operation.
        pub operation: i8 [1..],
        /// The ACL permission type.
        pub permission_type: i8 [1..],
    }
}

wire_struct! {
    /// A resource pattern referenced by described ACLs.
    pub struct DescribeAclsResource {
        /// The resource type.
        pub resource_type: i8 [1..],
        /// The resource name.
        pub resource_name: String [1..],
        /// The resource pattern type.
        pub pattern_type: i8 [1..] default(3),
        /// The ACLs.
        pub acls: Vec<AclDescription> [1..],
    }
}

wire_struct! {
    /// The matching ACLs, grouped by resource pattern. Versions 1–3; flexible from 2.
    pub struct DescribeAclsResponse {
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [1..],
        /// The error code, or 0.
        pub error_code: i16 [1..],
        /// The error message, or null.
        pub error_message: Option<String> [1..],
        /// Each resource pattern referenced in an ACL.
        pub resources: Vec<DescribeAclsResource> [1..],
    }
}

impl_message!(
    DescribeAclsRequest,
    key = 29,
    versions = 1..=3,
    flexible = 2,
    response = DescribeAclsResponse
);
impl_message!(
    DescribeAclsResponse,
    key = 29,
    versions = 1..=3,
    flexible = 2
);
