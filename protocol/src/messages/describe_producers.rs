//! DescribeProducers (API key 61): the active producers of partitions, with their
//! epochs, last sequences and open transactions (KIP-664, for finding and aborting
//! hanging transactions).
//!
//! Supported version 0, flexible from 0 (the only version, added in Kafka 2.8).

use crate::{impl_message, wire_struct};

wire_struct! {
    /// One topic of a [`DescribeProducersRequest`].
    pub struct DescribeProducersTopicRequest {
        /// The topic name.
        pub name: String [0..],
        /// The partitions to describe.
        pub partition_indexes: Vec<i32> [0..],
    }
}

wire_struct! {
    /// Asks for the active producers of partitions. Version 0; flexible.
    pub struct DescribeProducersRequest {
        /// The topics to describe.
        pub topics: Vec<DescribeProducersTopicRequest> [0..],
    }
}

wire_struct! {
    /// One active producer of a partition.
    pub struct DescribeProducersActiveProducer {
        /// The producer id.
        pub producer_id: i64 [0..],
        /// The producer's current epoch (an int32 on the wire).
        pub producer_epoch: i32 [0..],
        /// The sequence of the producer's last record, or -1.
        pub last_sequence: i32 [0..] default(-1),
        /// The max timestamp of the producer's last batch, or -1.
        pub last_timestamp: i64 [0..] default(-1),
        /// The coordinator epoch of the producer's last transaction marker, or -1.
        pub coordinator_epoch: i32 [0..],
        /// The first offset of the producer's open transaction, or -1.
        pub current_txn_start_offset: i64 [0..] default(-1),
    }
}

wire_struct! {
    /// The producers of one partition.
    pub struct DescribeProducersPartitionResponse {
        /// The partition index.
        pub partition_index: i32 [0..],
        /// The error code, or 0.
        pub error_code: i16 [0..],
        /// A message explaining the error, or null.
        pub error_message: Option<String> [0..],
        /// The partition's active producers.
        pub active_producers: Vec<DescribeProducersActiveProducer> [0..],
    }
}

wire_struct! {
    /// The producers of one topic's partitions.
    pub struct DescribeProducersTopicResponse {
        /// The topic name.
        pub name: String [0..],
        /// Each partition described.
        pub partitions: Vec<DescribeProducersPartitionResponse> [0..],
    }
}

wire_struct! {
    /// The active producers of each partition. Version 0; flexible.
    pub struct DescribeProducersResponse {
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [0..],
        /// Each topic described.
        pub topics: Vec<DescribeProducersTopicResponse> [0..],
    }
}

impl_message!(
    DescribeProducersRequest,
    key = 61,
    versions = 0..=0,
    flexible = 0,
    response = DescribeProducersResponse
);
impl_message!(
    DescribeProducersResponse,
    key = 61,
    versions = 0..=0,
    flexible = 0
);
