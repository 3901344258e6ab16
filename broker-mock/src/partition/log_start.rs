//! The log start offset of a partition: retention, DeleteRecords and a follower
//! copying its leader's, with what follows a move (the epoch cache and the producer
//! state drop what lies below it, the high watermark never falls below it).
//!
//! Invariant: the log start offset only moves forward, except when a replica
//! empties its log and restarts at its leader's start
//! ([`PartitionState::truncate_fully_and_start_at`]).

use baton_protocol::ErrorCode;

use super::state::{PartitionState, Role};
use crate::error::LogError;
use crate::log::{RetentionOutcome, RetentionPolicy};
use crate::producer_state;

/// Why the log start offset could not move.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogStartError {
    /// A Kafka error for the client (offset out of range, not the leader).
    #[error("{0:?}")]
    Code(ErrorCode),
    /// The log could not be changed.
    #[error(transparent)]
    Log(#[from] LogError),
}

impl LogStartError {
    /// The error code to report: storage problems are `KAFKA_STORAGE_ERROR`.
    pub fn code(&self) -> ErrorCode {
        match self {
            LogStartError::Code(c) => *c,
            LogStartError::Log(_) => ErrorCode::KafkaStorageError,
        }
    }
}

impl PartitionState {
    /// DeleteRecords on the leader: moves the log start offset to `offset` (-1 means
    /// the high watermark). `OFFSET_OUT_OF_RANGE` for an offset past the high
    /// watermark or below -1; an offset at or below the log start changes nothing.
    /// Returns the new log start offset.
    pub fn delete_records_to(&mut self, offset: i64) -> Result<i64, LogStartError> {
        if self.is_deleted() {
            return Err(LogStartError::Code(ErrorCode::UnknownTopicOrPartition));
        }
        if !self.is_leader() {
            return Err(LogStartError::Code(ErrorCode::NotLeaderOrFollower));
        }
        let hw = self.high_watermark();
        let target = if offset == -1 { hw } else { offset };
        if target < 0 || target > hw {
            return Err(LogStartError::Code(ErrorCode::OffsetOutOfRange));
        }
        if self.log.advance_start(target)? {
            self.after_log_start_moved();
        }
        Ok(self.log_start_offset())
    }

    /// The partition's low watermark: on a cluster leader the smallest log start
    /// offset among its live replicas (-1 while one has not reported), elsewhere its
    /// own log start offset.
    pub fn low_watermark(&self) -> i64 {
        match &self.role {
            Role::Leader(l) => l.low_watermark(self.log_start_offset()),
            _ => self.log_start_offset(),
        }
    }

    /// A follower learnt its leader's log start offset from a fetch response and
    /// moves its own up to it (Kafka's `maybeIncrementLogStartOffset` with
    /// `LeaderOffsetIncremented`), capped at its own log end: what it has not
    /// fetched yet it cannot delete. Returns whether the start moved.
    pub(crate) fn follow_leader_log_start(
        &mut self,
        leader_log_start: i64,
    ) -> Result<bool, LogError> {
        if leader_log_start <= self.log_start_offset() {
            return Ok(false);
        }
        let moved = self
            .log
            .advance_start(leader_log_start.min(self.log_end_offset()))?;
        if moved {
            self.after_log_start_moved();
        }
        Ok(moved)
    }

    /// Applies `policy` at `now_ms`, deleting nothing at or past the high watermark.
    pub fn apply_retention(
        &mut self,
        policy: &RetentionPolicy,
        now_ms: i64,
    ) -> Result<RetentionOutcome, LogError> {
        if self.is_deleted() {
            return Ok(RetentionOutcome::default());
        }
        let hw = self.high_watermark();
        let out = self.log.apply_retention(policy, now_ms, hw)?;
        if out.start_after > out.start_before {
            self.after_log_start_moved();
        }
        Ok(out)
    }

    /// Empties the log and restarts it at `offset` (a follower whose leader's log
    /// starts past its fetch position, Kafka's `truncateFullyAndStartAt`): the high
    /// watermark, epoch cache and producer state restart with it.
    pub(crate) fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), LogError> {
        self.log.truncate_fully_and_start_at(offset)?;
        self.epoch_cache = crate::replication::LeaderEpochCache::new();
        self.high_watermark = self.log_start_offset();
        self.producers = producer_state::rebuild_or_empty(
            &self.log,
            self.producers.limits(),
            self.high_watermark,
        );
        Ok(())
    }

    /// A replica reassigned away from this node: its log is emptied (segments
    /// deleted) and restarts at 0, so a later reassignment back fetches it anew.
    pub(crate) fn drop_replica_data(&mut self) -> Result<(), LogError> {
        self.truncate_fully_and_start_at(0)
    }

    /// After the log start moved up: history below it leaves the epoch cache and
    /// the aborted-transaction index, and the high watermark is at least the start.
    fn after_log_start_moved(&mut self) {
        let start = self.log_start_offset();
        self.epoch_cache.truncate_from_start(start);
        self.producers.on_log_start_offset(start);
        if self.high_watermark < start {
            self.store_high_watermark(start);
        }
    }
}
