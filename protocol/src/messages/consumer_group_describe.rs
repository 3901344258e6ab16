//! ConsumerGroupDescribe (API key 69): describes groups of the consumer rebalance
//! protocol of KIP-848: their epochs, assignor and each member's subscription,
//! current assignment and target assignment.
//!
//! Supported version 0, flexible from 0.

use crate::primitives::Uuid;
use crate::{impl_message, wire_struct};

wire_struct! {
    /// Which groups to describe. Version 0; flexible.
    pub struct ConsumerGroupDescribeRequest {
        /// The group ids.
        pub group_ids: Vec<String> [0..],
        /// Whether to include the authorized operations.
        pub include_authorized_operations: bool [0..],
    }
}

wire_struct! {
    /// The described groups. Version 0; flexible.
    pub struct ConsumerGroupDescribeResponse {
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [0..],
        /// One entry per requested group.
        pub groups: Vec<ConsumerGroupDescribeGroup> [0..],
    }
}

wire_struct! {
    /// One described group.
    pub struct ConsumerGroupDescribeGroup {
        /// The error code, or 0.
        pub error_code: i16 [0..],
        /// The error message, or null.
        pub error_message: Option<String> [0..],
        /// The group id.
        pub group_id: String [0..],
        /// The group state (`Empty`, `Assigning`, `Reconciling`, `Stable`, `Dead`), or
        /// the empty string.
        pub group_state: String [0..],
        /// The group epoch.
        pub group_epoch: i32 [0..],
        /// The target assignment's epoch.
        pub assignment_epoch: i32 [0..],
        /// The selected server-side assignor.
        pub assignor_name: String [0..],
        /// The members.
        pub members: Vec<ConsumerGroupDescribeMember> [0..],
        /// Bit field of the authorized operations; `i32::MIN` if not requested.
        pub authorized_operations: i32 [0..] default(i32::MIN),
    }
}

wire_struct! {
    /// One member of a described group.
    pub struct ConsumerGroupDescribeMember {
        /// The member id.
        pub member_id: String [0..],
        /// The static instance id, or null.
        pub instance_id: Option<String> [0..],
        /// The rack id, or null.
        pub rack_id: Option<String> [0..],
        /// The member's current epoch.
        pub member_epoch: i32 [0..],
        /// The client id.
        pub client_id: String [0..],
        /// The client host.
        pub client_host: String [0..],
        /// The subscribed topic names.
        pub subscribed_topic_names: Vec<String> [0..],
        /// The subscribed topic regular expression, or null.
        pub subscribed_topic_regex: Option<String> [0..],
        /// The member's current assignment.
        pub assignment: ConsumerGroupDescribeAssignment [0..],
        /// The member's target assignment.
        pub target_assignment: ConsumerGroupDescribeAssignment [0..],
    }
}

wire_struct! {
    /// A member's assignment.
    pub struct ConsumerGroupDescribeAssignment {
        /// The assigned partitions, by topic.
        pub topic_partitions: Vec<ConsumerGroupDescribeTopicPartitions> [0..],
    }
}

wire_struct! {
    /// Partitions of one topic.
    pub struct ConsumerGroupDescribeTopicPartitions {
        /// The topic id.
        pub topic_id: Uuid [0..],
        /// The topic name.
        pub topic_name: String [0..],
        /// The partition indexes.
        pub partitions: Vec<i32> [0..],
    }
}

impl_message!(
    ConsumerGroupDescribeRequest,
    key = 69,
    versions = 0..=0,
    flexible = 0,
    response = ConsumerGroupDescribeResponse
);
impl_message!(
    ConsumerGroupDescribeResponse,
    key = 69,
    versions = 0..=0,
    flexible = 0
);
