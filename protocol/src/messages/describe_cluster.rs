//! DescribeCluster (API key 60): the cluster id, the controller and the brokers, as
//! Admin's `describeCluster` asks for them (KIP-700).
//!
//! Supported versions 0–1, flexible from 0. Version history, from Apache Kafka's
//! spec: v1 adds the endpoint type, to describe brokers or controllers (KIP-919).

use crate::{impl_message, wire_struct};

wire_struct! {
    /// Describes the cluster. Versions 0–1; flexible from 0.
    pub struct DescribeClusterRequest {
        /// Whether to include the cluster's authorized operations.
        pub include_cluster_authorized_operations: bool [0..],
        /// What to describe: 1 brokers, 2 controllers (v1+).
        pub endpoint_type: i8 [1..] default(1),
    }
}

wire_struct! {
    /// One broker of a described cluster.
    pub struct DescribeClusterBroker {
        /// The broker id.
        pub broker_id: i32 [0..],
        /// The host name.
        pub host: String [0..],
        /// The port.
        pub port: i32 [0..],
        /// The rack, or null.
        pub rack: Option<String> [0..],
    }
}

wire_struct! {
    /// The described cluster. Versions 0–1; flexible from 0.
    pub struct DescribeClusterResponse {
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [0..],
        /// The error code, or 0.
        pub error_code: i16 [0..],
        /// The error message, or null.
        pub error_message: Option<String> [0..],
        /// What was described: 1 brokers, 2 controllers (v1+).
        pub endpoint_type: i8 [1..] default(1),
        /// The cluster id.
        pub cluster_id: String [0..],
        /// The controller's id, or -1.
        pub controller_id: i32 [0..] default(-1),
        /// The brokers.
        pub brokers: Vec<DescribeClusterBroker> [0..],
        /// The cluster's authorized operations as a bit field, or `i32::MIN` when
        /// not requested.
        pub cluster_authorized_operations: i32 [0..] default(i32::MIN),
    }
}

impl_message!(
    DescribeClusterRequest,
    key = 60,
    versions = 0..=1,
    flexible = 0,
    response = DescribeClusterResponse
);
impl_message!(
    DescribeClusterResponse,
    key = 60,
    versions = 0..=1,
    flexible = 0
);
