//! OffsetDelete (API key 47, KIP-496): deletes a group's committed offsets of some
//! partitions, for partitions the group no longer consumes.
//!
//! Supported version 0, not flexible. From Apache Kafka's spec: a top-level error
//! (the group's: GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, ...) and one error per
//! partition (GROUP_SUBSCRIBED_TO_TOPIC while a member subscribes to its topic).

use crate::{impl_message, wire_struct};

wire_struct! {
    /// One topic whose offsets are deleted.
    pub struct OffsetDeleteRequestTopic {
        /// The topic name.
        pub name: String [0..],
        /// The partition indexes.
        pub partitions: Vec<OffsetDeleteRequestPartition> [0..],
    }
}

wire_struct! {
    /// One partition whose offset is deleted.
    pub struct OffsetDeleteRequestPartition {
        /// The partition index.
        pub partition_index: i32 [0..],
    }
}

wire_struct! {
    /// Deletes committed offsets of one group. Version 0; not flexible.
    pub struct OffsetDeleteRequest {
        /// The group id.
        pub group_id: String [0..],
        /// The topics.
        pub topics: Vec<OffsetDeleteRequestTopic> [0..],
    }
}

wire_struct! {
    /// One partition's outcome.
    pub struct OffsetDeleteResponsePartition {
        /// The partition index.
        pub partition_index: i32 [0..],
        /// The error code, or 0.
        pub error_code: i16 [0..],
    }
}

wire_struct! {
    /// One topic's outcomes.
    pub struct OffsetDeleteResponseTopic {
        /// The topic name.
        pub name: String [0..],
        /// The partitions.
        pub partitions: Vec<OffsetDeleteResponsePartition> [0..],
    }
}

wire_struct! {
    /// Outcome of an OffsetDelete. Version 0; not flexible.
    pub struct OffsetDeleteResponse {
        /// The top-level (group) error code, or 0.
        pub error_code: i16 [0..],
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [0..],
        /// The topics.
        pub topics: Vec<OffsetDeleteResponseTopic> [0..],
    }
}

impl_message!(
    OffsetDeleteRequest,
    key = 47,
    versions = 0..=0,
    flexible = i16::MAX,
    response = OffsetDeleteResponse
);
impl_message!(
    OffsetDeleteResponse,
    key = 47,
    versions = 0..=0,
    flexible = i16::MAX
);
