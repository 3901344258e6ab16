//! WriteTxnMarkers (API key 27): a transaction coordinator asks a partition leader to
//! append a commit or abort marker (a control batch) for one producer's transaction
//! on each listed partition (KIP-98).
//!
//! Supported versions 0–1, flexible from 1. Version history, from Apache Kafka's spec:
//! v0 came with exactly-once delivery (KIP-98); v1 is the first flexible version
//! (KIP-482).

use crate::{impl_message, wire_struct};

wire_struct! {
    /// One topic of a [`WritableTxnMarker`].
    pub struct WritableTxnMarkerTopic {
        /// The topic name.
        pub name: String [0..],
        /// The partitions to write the marker on.
        pub partition_indexes: Vec<i32> [0..],
    }
}

wire_struct! {
    /// One marker to write: a producer's transaction ends with `transaction_result`.
    pub struct WritableTxnMarker {
        /// The producer id whose transaction ends.
        pub producer_id: i64 [0..],
        /// The producer epoch the transaction ends with.
        pub producer_epoch: i16 [0..],
        /// `true` to commit, `false` to abort.
        pub transaction_result: bool [0..],
        /// The partitions to write the marker on.
        pub topics: Vec<WritableTxnMarkerTopic> [0..],
        /// The epoch of the coordinator's `__transaction_state` partition, which
        /// fences markers from a coordinator that lost that partition.
        pub coordinator_epoch: i32 [0..],
    }
}

wire_struct! {
    /// Asks a partition leader to write transaction markers. Versions 0–1; flexible
    /// from 1.
    pub struct WriteTxnMarkersRequest {
        /// The markers to write.
        pub markers: Vec<WritableTxnMarker> [0..],
    }
}

wire_struct! {
    /// The outcome for one partition of a marker.
    pub struct WritableTxnMarkerPartitionResult {
        /// The partition index.
        pub partition_index: i32 [0..],
        /// The error code, or 0.
        pub error_code: i16 [0..],
    }
}

wire_struct! {
    /// The outcomes for one topic of a marker.
    pub struct WritableTxnMarkerTopicResult {
        /// The topic name.
        pub name: String [0..],
        /// Each partition's outcome.
        pub partitions: Vec<WritableTxnMarkerPartitionResult> [0..],
    }
}

wire_struct! {
    /// The outcomes of one marker.
    pub struct WritableTxnMarkerResult {
        /// The producer id of the marker.
        pub producer_id: i64 [0..],
        /// Each topic's outcomes.
        pub topics: Vec<WritableTxnMarkerTopicResult> [0..],
    }
}

wire_struct! {
    /// The outcome of each marker on each partition. Versions 0–1; flexible from 1.
    pub struct WriteTxnMarkersResponse {
        /// One result per marker of the request, in request order.
        pub markers: Vec<WritableTxnMarkerResult> [0..],
    }
}

impl_message!(
    WriteTxnMarkersRequest,
    key = 27,
    versions = 0..=1,
    flexible = 1,
    response = WriteTxnMarkersResponse
);
impl_message!(
    WriteTxnMarkersResponse,
    key = 27,
    versions = 0..=1,
    flexible = 1
);
