//! CreateAcls (API key 30): adds ACL bindings (KIP-140).
//!
//! Supported versions 1–3, flexible from 2. Version history, from Apache Kafka's
//! spec: v1 adds the resource pattern type (KIP-290, prefixed ACLs); v2 is the
//! first flexible version; v3 adds the USER_GROUP resource type on the broker side
//! (no wire change). Version 0 was removed in Kafka 4.0 (KIP-896). The codes are
//! those listed in [`crate::messages::describe_acls`].

use crate::{impl_message, wire_struct};

wire_struct! {
    /// One ACL binding to create.
    pub struct AclCreation {
        /// The resource type.
        pub resource_type: i8 [1..],
        /// The resource name (a literal name, `*`, or a prefix).
        pub resource_name: String [1..],
        /// The pattern type: 3 literal or 4 prefixed.
        pub resource_pattern_type: i8 [1..] default(3),
        /// The principal, such as `User:alice` or `User:*`.
        pub principal: String [1..],
        /// The host, `*` or an address.
        pub host: String [1..],
        /// The operation.
        pub operation: i8 [1..],
        /// The permission type: 2 deny or 3 allow.
        pub permission_type: i8 [1..],
    }
}

wire_struct! {
    /// The ACL bindings to create. Versions 1–3; flexible from 2.
    pub struct CreateAclsRequest {
        /// The ACLs to create.
        pub creations: Vec<AclCreation> [1..],
    }
}

wire_struct! {
    /// The outcome of one creation, in request order.
    pub struct AclCreationResult {
        /// The error code, or 0.
        pub error_code: i16 [1..],
        /// The error message, or null.
        pub error_message: Option<String> [1..],
    }
}

wire_struct! {
    /// One result per requested creation. Versions 1–3; flexible from 2.
    pub struct CreateAclsResponse {
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [1..],
        /// The results, in request order.
        pub results: Vec<AclCreationResult> [1..],
    }
}

impl_message!(
    CreateAclsRequest,
    key = 30,
    versions = 1..=3,
    flexible = 2,
    response = CreateAclsResponse
);
impl_message!(CreateAclsResponse, key = 30, versions = 1..=3, flexible = 2);
