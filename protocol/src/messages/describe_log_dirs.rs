//! DescribeLogDirs (API key 35): each log directory of a broker, the partitions in
//! it and their sizes (KIP-113), and the volume's capacity (KIP-827).
//!
//! Supported versions 1–4, flexible from 2 (v0 is deprecated). Version history,
//! from Apache Kafka's spec: v1 is v0 with throttling after the response; v2 is
//! the first flexible version; v3 adds the top-level error code; v4 adds each
//! directory's total and usable bytes.

use crate::{impl_message, wire_struct};

wire_struct! {
    /// One topic's partitions to describe.
    pub struct DescribableLogDirTopic {
        /// The topic name.
        pub topic: String [0..],
        /// The partition indexes.
        pub partitions: Vec<i32> [0..],
    }
}

wire_struct! {
    /// Describes log directories. Versions 1–4; flexible from 2.
    pub struct DescribeLogDirsRequest {
        /// The partitions to describe, or null for every partition.
        pub topics: Option<Vec<DescribableLogDirTopic>> [0..],
    }
}

wire_struct! {
    /// One partition's replica in a log directory.
    pub struct DescribeLogDirsPartition {
        /// The partition index.
        pub partition_index: i32 [0..],
        /// The size of its log segments in bytes.
        pub partition_size: i64 [0..],
        /// How far its log end offset is behind the high watermark (0 on the leader).
        pub offset_lag: i64 [0..],
        /// Whether this is a future log (AlterReplicaLogDirs).
        pub is_future_key: bool [0..],
    }
}

wire_struct! {
    /// One topic in a log directory.
    pub struct DescribeLogDirsTopic {
        /// The topic name.
        pub name: String [0..],
        /// Its partitions in the directory.
        pub partitions: Vec<DescribeLogDirsPartition> [0..],
    }
}

wire_struct! {
    /// One log directory.
    pub struct DescribeLogDirsResult {
        /// The error code, or 0.
        pub error_code: i16 [0..],
        /// The absolute path of the directory.
        pub log_dir: String [0..],
        /// The topics in it.
        pub topics: Vec<DescribeLogDirsTopic> [0..],
        /// The total size of the directory's volume in bytes, or -1 (v4+).
        pub total_bytes: i64 [4..] default(-1),
        /// The usable size of the directory's volume in bytes, or -1 (v4+).
        pub usable_bytes: i64 [4..] default(-1),
    }
}

wire_struct! {
    /// Described log directories. Versions 1–4; flexible from 2.
    pub struct DescribeLogDirsResponse {
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [0..],
        /// The error code, or 0 (v3+).
        pub error_code: i16 [3..],
        /// The log directories.
        pub results: Vec<DescribeLogDirsResult> [0..],
    }
}

impl_message!(
    DescribeLogDirsRequest,
    key = 35,
    versions = 1..=4,
    flexible = 2,
    response = DescribeLogDirsResponse
);
impl_message!(
    DescribeLogDirsResponse,
    key = 35,
    versions = 1..=4,
    flexible = 2
);
