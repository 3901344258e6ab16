//! DescribeConfigs (API key 32): the configuration of topics and brokers, with where
//! each value comes from.
//!
//! Supported versions 1–4, flexible from 4 (v0 is gone from Kafka 4.0, KIP-896).
//! Version history, from Apache Kafka's spec: v1 adds `include_synonyms`, each
//! config's source and synonyms, and drops `is_default` (KIP-226); v2 is unchanged;
//! v3 adds `include_documentation` and each config's type and documentation
//! (KIP-569); v4 is the first flexible version.

use crate::{impl_message, wire_struct};

/// `resource_type` of a topic.
pub const RESOURCE_TYPE_TOPIC: i8 = 2;
/// `resource_type` of a broker.
pub const RESOURCE_TYPE_BROKER: i8 = 4;

/// `config_source`: unknown.
pub const CONFIG_SOURCE_UNKNOWN: i8 = 0;
/// `config_source`: a dynamic override of one topic.
pub const CONFIG_SOURCE_TOPIC: i8 = 1;
/// `config_source`: a dynamic override of one broker.
pub const CONFIG_SOURCE_DYNAMIC_BROKER: i8 = 2;
/// `config_source`: a dynamic cluster-wide default of every broker.
pub const CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER: i8 = 3;
/// `config_source`: the broker's static configuration.
pub const CONFIG_SOURCE_STATIC_BROKER: i8 = 4;
/// `config_source`: the built-in default.
pub const CONFIG_SOURCE_DEFAULT: i8 = 5;

wire_struct! {
    /// One resource whose configs are asked for.
    pub struct DescribeConfigsResource {
        /// The resource type ([`RESOURCE_TYPE_TOPIC`], [`RESOURCE_TYPE_BROKER`], ...).
        pub resource_type: i8 [0..],
        /// The resource name: a topic name, or a broker id in decimal.
        pub resource_name: String [0..],
        /// The config keys to list, or null for all.
        pub configuration_keys: Option<Vec<String>> [0..],
    }
}

wire_struct! {
    /// Describes configs. Versions 1–4; flexible from 4.
    pub struct DescribeConfigsRequest {
        /// The resources.
        pub resources: Vec<DescribeConfigsResource> [0..],
        /// Whether to include every synonym of each config (v1+).
        pub include_synonyms: bool [1..],
        /// Whether to include each config's documentation (v3+).
        pub include_documentation: bool [3..],
    }
}

wire_struct! {
    /// A synonym of a config (v1+): the same setting under another name or source.
    pub struct DescribeConfigsSynonym {
        /// The synonym name.
        pub name: String [1..],
        /// The synonym value, or null.
        pub value: Option<String> [1..],
        /// The synonym source (a `CONFIG_SOURCE_*`).
        pub source: i8 [1..],
    }
}

wire_struct! {
    /// One config of a described resource.
    pub struct DescribeConfigsResourceResult {
        /// The config name.
        pub name: String [0..],
        /// The config value, or null (sensitive or unset).
        pub value: Option<String> [0..],
        /// Whether the config is read-only.
        pub read_only: bool [0..],
        /// Whether the config is not set (v0 only).
        pub is_default: bool [0..1],
        /// Where the value comes from, a `CONFIG_SOURCE_*` (v1+).
        pub config_source: i8 [1..] default(-1),
        /// Whether the config is sensitive.
        pub is_sensitive: bool [0..],
        /// The config's synonyms (v1+).
        pub synonyms: Vec<DescribeConfigsSynonym> [1..],
        /// The data type: 1 BOOLEAN, 2 STRING, 3 INT, 4 SHORT, 5 LONG, 6 DOUBLE,
        /// 7 LIST, 8 CLASS, 9 PASSWORD; 0 unknown (v3+).
        pub config_type: i8 [3..],
        /// The documentation, or null (v3+).
        pub documentation: Option<String> [3..],
    }
}

wire_struct! {
    /// The outcome for one resource.
    pub struct DescribeConfigsResult {
        /// The error code, or 0.
        pub error_code: i16 [0..],
        /// The error message, or null.
        pub error_message: Option<String> [0..],
        /// The resource type.
        pub resource_type: i8 [0..],
        /// The resource name.
        pub resource_name: String [0..],
        /// The configs.
        pub configs: Vec<DescribeConfigsResourceResult> [0..],
    }
}

wire_struct! {
    /// Described configs. Versions 1–4; flexible from 4.
    pub struct DescribeConfigsResponse {
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [0..],
        /// One result per requested resource.
        pub results: Vec<DescribeConfigsResult> [0..],
    }
}

impl_message!(
    DescribeConfigsRequest,
    key = 32,
    versions = 1..=4,
    flexible = 4,
    response = DescribeConfigsResponse
);
impl_message!(
    DescribeConfigsResponse,
    key = 32,
    versions = 1..=4,
    flexible = 4
);
