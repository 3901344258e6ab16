//! Transactions on one partition: appending a commit or abort marker (a control
//! batch) as leader, and the aborted transactions a read_committed fetch reports.

use baton_protocol::record::control::{control_batch, EndTxnMarker};
use baton_protocol::record::{
    set_base_offset, set_log_append_time, set_partition_leader_epoch, TimestampType,
};
use baton_protocol::ErrorCode;
use bytes::BytesMut;

use super::state::PartitionState;
use crate::producer_state::{AbortedTxn, EndedTxn};

/// Where a marker went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MarkerAppend {
    /// The offset the marker was given.
    pub offset: i64,
    /// The transaction it ended, if the producer had one open here.
    pub ended: Option<EndedTxn>,
}

impl PartitionState {
    /// Appends the marker that ends (`producer_id`, `producer_epoch`)'s transaction,
    /// as leader: checks it against the producer state (INVALID_PRODUCER_EPOCH,
    /// TRANSACTION_COORDINATOR_FENCED), builds the one-record control batch with
    /// `now_ms` as its timestamp, stamps the next offset and the leader epoch (and,
    /// on a `LogAppendTime` topic, the log-append timestamp type, as Kafka does
    /// for control batches too), appends it and files it. The caller checked that
    /// this node leads; a marker for a producer without an open transaction here
    /// is still written, as Kafka does.
    pub(crate) fn append_marker(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTxnMarker,
        timestamp_type: TimestampType,
        now_ms: i64,
    ) -> Result<MarkerAppend, ErrorCode> {
        if self.deleted {
            return Err(ErrorCode::UnknownTopicOrPartition);
        }
        self.producers
            .check_marker(producer_id, producer_epoch, marker.coordinator_epoch)?;
        let offset = self.log_end_offset();
        let mut batch = BytesMut::from(control_batch(producer_id, producer_epoch, marker, now_ms));
        set_base_offset(&mut batch, offset);
        set_partition_leader_epoch(&mut batch, self.leader_epoch);
        if timestamp_type == TimestampType::LogAppendTime {
            set_log_append_time(&mut batch, now_ms);
        }
        if let Err(e) = self.log.append(batch.freeze()) {
            tracing::error!(error = %e, "marker append failed");
            self.on_storage_failure(&e);
            return Err(ErrorCode::KafkaStorageError);
        }
        let _ = self.epoch_cache.assign(self.leader_epoch, offset);
        let ended =
            self.producers
                .record_marker(producer_id, producer_epoch, marker, offset, now_ms);
        self.after_local_append();
        Ok(MarkerAppend { offset, ended })
    }

    /// The aborted transactions a read_committed fetch of the offsets `from..=to`
    /// must report: those that began at or before `to` and whose abort marker is at
    /// or after `from`.
    pub fn aborted_transactions(&self, from: i64, to: i64) -> Vec<AbortedTxn> {
        self.producers.txns().aborted_overlapping(from, to)
    }
}
