//! Metadata (API key 3): brokers, topics, partitions, leaders and replicas.
//!
//! Supported versions 0–12, flexible from 9. Version history, from Apache Kafka's spec:
//! v1 adds racks, the controller id and `is_internal`; v2 the cluster id (KIP-78); v3
//! the throttle time; v4 `allow_auto_topic_creation`; v5 offline replicas (KIP-112);
//! v7 the partition leader epoch (KIP-320); v8 authorized operations (KIP-430); v9 is
//! the first flexible version (KIP-482); v10 adds topic ids (KIP-516); v11 drops the
//! cluster authorized operations (KIP-700, now in DescribeCluster); v12 lets a request
//! name topics by id only.
//!
//! In v0 an empty `topics` list means "all topics"; from v1 it means "no topics" and a
//! null list means "all topics".

use crate::primitives::Uuid;
use crate::{impl_message, wire_struct};

wire_struct! {
    /// One topic a [`MetadataRequest`] asks about.
    pub struct MetadataRequestTopic {
        /// The topic id (v10+); zero when asking by name.
        pub topic_id: Uuid [10..],
        /// The topic name; may be null from v10 when asking by id.
        pub name: Option<String> [0..],
    }
}

wire_struct! {
    /// Asks for cluster and topic metadata. Versions 0–12; flexible from 9.
    pub struct MetadataRequest {
        /// The topics to fetch metadata for; null (v1+) for all topics.
        pub topics: Option<Vec<MetadataRequestTopic>> [0..],
        /// Whether the broker may auto-create requested topics that do not exist (v4+).
        pub allow_auto_topic_creation: bool [4..] default(true),
        /// Whether to include cluster authorized operations (v8–v10).
        pub include_cluster_authorized_operations: bool [8..=10],
        /// Whether to include topic authorized operations (v8+).
        pub include_topic_authorized_operations: bool [8..],
    }
}

wire_struct! {
    /// One broker in a [`MetadataResponse`].
    pub struct MetadataResponseBroker {
        /// The broker id.
        pub node_id: i32 [0..],
        /// The broker host name.
        pub host: String [0..],
        /// The broker port.
        pub port: i32 [0..],
        /// The broker's rack, or null if it has none (v1+).
        pub rack: Option<String> [1..],
    }
}

wire_struct! {
    /// One partition of a [`MetadataResponseTopic`].
    pub struct MetadataResponsePartition {
        /// The partition error, or 0.
        pub error_code: i16 [0..],
        /// The partition index.
        pub partition_index: i32 [0..],
        /// The id of the leader broker, -1 if none.
        pub leader_id: i32 [0..],
        /// The leader epoch of this partition (v7+).
        pub leader_epoch: i32 [7..] default(-1),
        /// All nodes that host this partition.
        pub replica_nodes: Vec<i32> [0..],
        /// The nodes in sync with the leader.
        pub isr_nodes: Vec<i32> [0..],
        /// The offline replicas of this partition (v5+).
        pub offline_replicas: Vec<i32> [5..],
    }
}

wire_struct! {
    /// One topic in a [`MetadataResponse`].
    pub struct MetadataResponseTopic {
        /// The topic error, or 0.
        pub error_code: i16 [0..],
        /// The topic name; null (v12+) for unknown topics asked for by id.
        pub name: Option<String> [0..],
        /// The topic id (v10+); zero for unknown topics asked for by name.
        pub topic_id: Uuid [10..],
        /// Whether the topic is internal (v1+).
        pub is_internal: bool [1..],
        /// Each partition of the topic.
        pub partitions: Vec<MetadataResponsePartition> [0..],
        /// Bitfield of authorized operations on this topic (v8+).
        pub topic_authorized_operations: i32 [8..] default(i32::MIN),
    }
}

wire_struct! {
    /// Cluster and topic metadata. Versions 0–12; flexible from 9.
    pub struct MetadataResponse {
        /// Throttle time in ms (v3+).
        pub throttle_time_ms: i32 [3..],
        /// The brokers in the cluster.
        pub brokers: Vec<MetadataResponseBroker> [0..],
        /// The cluster id, or null (v2+).
        pub cluster_id: Option<String> [2..],
        /// The id of the controller broker (v1+).
        pub controller_id: i32 [1..] default(-1),
        /// Each topic in the response.
        pub topics: Vec<MetadataResponseTopic> [0..],
        /// Bitfield of authorized operations on the cluster (v8–v10).
        pub cluster_authorized_operations: i32 [8..=10] default(i32::MIN),
    }
}

impl_message!(
    MetadataRequest,
    key = 3,
    versions = 0..=12,
    flexible = 9,
    response = MetadataResponse
);
impl_message!(MetadataResponse, key = 3, versions = 0..=12, flexible = 9);
