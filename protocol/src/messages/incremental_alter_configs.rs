//! IncrementalAlterConfigs (API key 44): set, delete, append to or subtract from
//! single configs of topics and brokers, leaving the others as they are (KIP-339).
//!
//! Supported versions 0–1, flexible from 1. Version history, from Apache Kafka's
//! spec: v1 is the first flexible version.

use crate::{impl_message, wire_struct};

/// `config_operation`: set the config to the value.
pub const CONFIG_OP_SET: i8 = 0;
/// `config_operation`: remove the override, reverting to the default.
pub const CONFIG_OP_DELETE: i8 = 1;
/// `config_operation`: add the value to a list config.
pub const CONFIG_OP_APPEND: i8 = 2;
/// `config_operation`: remove the value from a list config.
pub const CONFIG_OP_SUBTRACT: i8 = 3;

wire_struct! {
    /// One config change.
    pub struct AlterableConfig {
        /// The config key.
        pub name: String [0..],
        /// The operation, a `CONFIG_OP_*`.
        pub config_operation: i8 [0..],
        /// The value (null for a delete).
        pub value: Option<String> [0..],
    }
}

wire_struct! {
    /// The changes to one resource.
    pub struct AlterConfigsResource {
        /// The resource type (`RESOURCE_TYPE_TOPIC`, `RESOURCE_TYPE_BROKER`).
        pub resource_type: i8 [0..],
        /// The resource name: a topic, a broker id in decimal, or empty for the
        /// cluster-wide broker default.
        pub resource_name: String [0..],
        /// The changes.
        pub configs: Vec<AlterableConfig> [0..],
    }
}

wire_struct! {
    /// Alters configs incrementally. Versions 0–1; flexible from 1.
    pub struct IncrementalAlterConfigsRequest {
        /// The resources to change.
        pub resources: Vec<AlterConfigsResource> [0..],
        /// Validate only; change nothing.
        pub validate_only: bool [0..],
    }
}

wire_struct! {
    /// The outcome for one resource.
    pub struct AlterConfigsResourceResponse {
        /// The error code, or 0.
        pub error_code: i16 [0..],
        /// The error message, or null.
        pub error_message: Option<String> [0..],
        /// The resource type.
        pub resource_type: i8 [0..],
        /// The resource name.
        pub resource_name: String [0..],
    }
}

wire_struct! {
    /// Altered configs. Versions 0–1; flexible from 1.
    pub struct IncrementalAlterConfigsResponse {
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [0..],
        /// One outcome per resource.
        pub responses: Vec<AlterConfigsResourceResponse> [0..],
    }
}

impl_message!(
    IncrementalAlterConfigsRequest,
    key = 44,
    versions = 0..=1,
    flexible = 1,
    response = IncrementalAlterConfigsResponse
);
impl_message!(
    IncrementalAlterConfigsResponse,
    key = 44,
    versions = 0..=1,
    flexible = 1
);
