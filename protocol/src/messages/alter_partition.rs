//! AlterPartition (API key 56): a partition leader asks the controller to change the
//! partition's ISR (KIP-497, renamed from AlterIsr by KIP-841).
//!
//! Supported versions 0–3, all flexible. Version history, from Apache Kafka's spec:
//! v1 adds the leader recovery state (KIP-704); v2 names topics by id instead of name;
//! v3 sends the ISR with broker epochs (KIP-903).

use crate::primitives::Uuid;
use crate::{impl_message, wire_struct};

wire_struct! {
    /// One proposed ISR member with its broker epoch (v3+).
    pub struct AlterPartitionRequestBrokerState {
        /// The broker id.
        pub broker_id: i32 [3..],
        /// The broker epoch, or -1 if the epoch check is not supported.
        pub broker_epoch: i64 [3..] default(-1),
    }
}

wire_struct! {
    /// One partition whose ISR is to change.
    pub struct AlterPartitionRequestPartitionData {
        /// The partition index.
        pub partition_index: i32 [0..],
        /// The leader epoch of this partition.
        pub leader_epoch: i32 [0..],
        /// The proposed ISR (v0–2).
        pub new_isr: Vec<i32> [0..=2],
        /// The proposed ISR with broker epochs (v3+).
        pub new_isr_with_epochs: Vec<AlterPartitionRequestBrokerState> [3..],
        /// 1 while recovering from an unclean election, else 0 (v1+).
        pub leader_recovery_state: i8 [1..],
        /// The partition epoch the proposal is based on.
        pub partition_epoch: i32 [0..],
    }
}

wire_struct! {
    /// One topic in an [`AlterPartitionRequest`].
    pub struct AlterPartitionRequestTopicData {
        /// The topic name (v0–1).
        pub topic_name: String [0..=1],
        /// The topic id (v2+).
        pub topic_id: Uuid [2..],
        /// The partitions.
        pub partitions: Vec<AlterPartitionRequestPartitionData> [0..],
    }
}

wire_struct! {
    /// Proposes ISR changes. Versions 0–3; flexible from 0.
    pub struct AlterPartitionRequest {
        /// The requesting broker.
        pub broker_id: i32 [0..],
        /// The epoch of the requesting broker.
        pub broker_epoch: i64 [0..] default(-1),
        /// The topics.
        pub topics: Vec<AlterPartitionRequestTopicData> [0..],
    }
}

wire_struct! {
    /// The outcome for one partition.
    pub struct AlterPartitionResponsePartitionData {
        /// The partition index.
        pub partition_index: i32 [0..],
        /// The partition error code, or 0.
        pub error_code: i16 [0..],
        /// The leader's broker id.
        pub leader_id: i32 [0..],
        /// The leader epoch.
        pub leader_epoch: i32 [0..],
        /// The in-sync replicas.
        pub isr: Vec<i32> [0..],
        /// 1 while recovering from an unclean election, else 0 (v1+).
        pub leader_recovery_state: i8 [1..],
        /// The current partition epoch.
        pub partition_epoch: i32 [0..],
    }
}

wire_struct! {
    /// One topic in an [`AlterPartitionResponse`].
    pub struct AlterPartitionResponseTopicData {
        /// The topic name (v0–1).
        pub topic_name: String [0..=1],
        /// The topic id (v2+).
        pub topic_id: Uuid [2..],
        /// The partitions.
        pub partitions: Vec<AlterPartitionResponsePartitionData> [0..],
    }
}

wire_struct! {
    /// The controller's answer. Versions 0–3; flexible from 0.
    pub struct AlterPartitionResponse {
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [0..],
        /// The top-level error code.
        pub error_code: i16 [0..],
        /// The topics.
        pub topics: Vec<AlterPartitionResponseTopicData> [0..],
    }
}

impl_message!(
    AlterPartitionRequest,
    key = 56,
    versions = 0..=3,
    flexible = 0,
    response = AlterPartitionResponse
);
impl_message!(
    AlterPartitionResponse,
    key = 56,
    versions = 0..=3,
    flexible = 0
);
