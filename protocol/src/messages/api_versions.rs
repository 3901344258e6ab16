//! ApiVersions (API key 18): which APIs and versions a broker supports.
//!
//! KIP-35 introduced it, KIP-511 added the client name and version (v3) and the rule
//! that the response header is always v0, KIP-584 added the feature tags.

use crate::{impl_message, wire_struct};

wire_struct! {
    /// Asks a broker for its supported API versions. Versions 0–4; flexible from 3.
    pub struct ApiVersionsRequest {
        /// The name of the client (v3+).
        pub client_software_name: String [3..],
        /// The version of the client (v3+).
        pub client_software_version: String [3..],
    }
}

wire_struct! {
    /// One API and the versions the broker supports for it.
    pub struct ApiVersion {
        /// The API index.
        pub api_key: i16 [0..],
        /// The minimum supported version, inclusive.
        pub min_version: i16 [0..],
        /// The maximum supported version, inclusive.
        pub max_version: i16 [0..],
    }
}

wire_struct! {
    /// A feature the broker supports (v3+).
    pub struct SupportedFeatureKey {
        /// The name of the feature.
        pub name: String [3..],
        /// The minimum supported version for the feature.
        pub min_version: i16 [3..],
        /// The maximum supported version for the feature.
        pub max_version: i16 [3..],
    }
}

wire_struct! {
    /// A cluster-wide finalized feature (v3+).
    pub struct FinalizedFeatureKey {
        /// The name of the feature.
        pub name: String [3..],
        /// The cluster-wide finalized max version level for the feature.
        pub max_version_level: i16 [3..],
        /// The cluster-wide finalized min version level for the feature.
        pub min_version_level: i16 [3..],
    }
}

wire_struct! {
    /// The broker's supported API versions. Versions 0–4; flexible from 3.
    pub struct ApiVersionsResponse {
        /// The top-level error code.
        pub error_code: i16 [0..],
        /// The APIs supported by the broker.
        pub api_keys: Vec<ApiVersion> [0..],
        /// Throttle time in ms (v1+).
        pub throttle_time_ms: i32 [1..],
        /// Features supported by the broker (v3+, tag 0).
        pub supported_features: Vec<SupportedFeatureKey> [3..] tag(0),
        /// Epoch of the finalized features, -1 if unknown (v3+, tag 1).
        pub finalized_features_epoch: i64 [3..] tag(1) default(-1),
        /// Cluster-wide finalized features (v3+, tag 2).
        pub finalized_features: Vec<FinalizedFeatureKey> [3..] tag(2),
        /// Set by a KRaft controller ready for ZK migration (v3+, tag 3).
        pub zk_migration_ready: bool [3..] tag(3),
    }
}

impl_message!(
    ApiVersionsRequest,
    key = 18,
    versions = 0..=4,
    flexible = 3,
    response = ApiVersionsResponse
);
impl_message!(
    ApiVersionsResponse,
    key = 18,
    versions = 0..=4,
    flexible = 3
);
