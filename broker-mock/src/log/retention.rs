//! Retention: deleting a log's oldest data by age (`retention.ms`) and by size
//! (`retention.bytes`), rolling the active segment by age (`segment.ms`), and moving
//! the log start offset forward (DeleteRecords, a follower copying its leader's).
//!
//! As in Kafka (`UnifiedLog.deleteOldSegments`), only whole segments are deleted, the
//! oldest first, and deletion stops at the first segment that must stay:
//!
//! - by time, a segment goes when its largest batch max timestamp is more than
//!   `retention.ms` before now;
//! - by size, the oldest segments go while the log without them is still at least
//!   `retention.bytes`;
//! - a segment goes only when it lies wholly below `upper_bound` (the caller passes
//!   the high watermark), so no uncommitted data is ever deleted. The active segment
//!   can go too when it is wholly committed: a new empty one is rolled first.
//!
//! The log start offset becomes the base of the first segment left (it never moves
//! back). In memory each batch is its own segment: retention deletes whole batches,
//! and `segment.ms`/`segment.bytes` have nothing to roll.
//!
//! `segment.ms` rolls the active segment when its first batch's max timestamp is more
//! than `segment.ms` before now. Kafka checks that on append against the new batch's
//! timestamp; here the maintenance pass checks it against the wall clock, so an idle
//! partition's segment rolls too (and its data can age out).

use super::policy::{RetentionOutcome, RetentionPolicy};
use super::Log;
use crate::error::LogError;

/// A deletion unit: a segment on disk, a batch in memory.
#[derive(Debug, Clone, Copy)]
struct Unit {
    /// The offset after the unit (the next unit's base, or the log end).
    upper: i64,
    size: u64,
    max_ts: i64,
    /// The last (active) unit and empty: never deleted.
    empty_last: bool,
}

impl Log {
    fn units(&self) -> Vec<Unit> {
        match self {
            Log::Memory(l) => l
                .batch_infos()
                .map(|(upper, size, max_ts)| Unit {
                    upper,
                    size,
                    max_ts,
                    empty_last: false,
                })
                .collect(),
            Log::Disk(l) => {
                let infos = l.segment_infos();
                let end = l.end();
                infos
                    .iter()
                    .enumerate()
                    .map(|(i, s)| Unit {
                        upper: infos.get(i + 1).map_or(end, |n| n.base),
                        size: s.size,
                        max_ts: s.max_ts,
                        empty_last: i + 1 == infos.len() && s.size == 0,
                    })
                    .collect()
            }
        }
    }

    fn delete_oldest_unit(&mut self) -> Result<(), LogError> {
        match self {
            Log::Memory(l) => {
                l.delete_oldest_batch();
                Ok(())
            }
            Log::Disk(l) => l.delete_oldest_segment(),
        }
    }

    /// The bytes the log holds (segment files, or batches in memory).
    pub fn size_bytes(&self) -> u64 {
        self.units().iter().map(|u| u.size).sum()
    }

    /// Applies `policy` at `now_ms`, deleting nothing at or past `upper_bound` (the
    /// high watermark). See the module docs for what goes.
    pub fn apply_retention(
        &mut self,
        policy: &RetentionPolicy,
        now_ms: i64,
        upper_bound: i64,
    ) -> Result<RetentionOutcome, LogError> {
        let mut out = RetentionOutcome {
            start_before: self.log_start_offset(),
            ..RetentionOutcome::default()
        };
        if let (Some(segment_ms), Log::Disk(l)) = (policy.segment_ms, &mut *self) {
            if let Some(first_ts) = l.active_first_timestamp()? {
                if first_ts >= 0 && now_ms.saturating_sub(first_ts) > segment_ms {
                    l.roll()?;
                    out.rolled = true;
                }
            }
        }
        let deletable = |u: &Unit| !u.empty_last && u.upper <= upper_bound;
        if let Some(ms) = policy.retention_ms.filter(|ms| *ms >= 0) {
            loop {
                let units = self.units();
                let Some(u) = units.first().filter(|u| deletable(u)) else {
                    break;
                };
                if now_ms.saturating_sub(u.max_ts) <= ms {
                    break;
                }
                self.delete_oldest_unit()?;
                out.deleted_by_time += 1;
                out.deleted_bytes += u.size;
            }
        }
        if let Some(limit) = policy.retention_bytes {
            let units = self.units();
            let total: u64 = units.iter().map(|u| u.size).sum();
            let mut excess = total.saturating_sub(limit);
            for u in units {
                if !deletable(&u) || u.size > excess {
                    break;
                }
                self.delete_oldest_unit()?;
                excess -= u.size;
                out.deleted_by_size += 1;
                out.deleted_bytes += u.size;
            }
        }
        out.start_after = self.log_start_offset();
        debug_assert!(out.start_after >= out.start_before);
        Ok(out)
    }

    /// Moves the log start offset up to `offset` (capped at the log end; a lower
    /// `offset` is a no-op) and deletes the data wholly below it. Returns whether the
    /// start moved.
    pub fn advance_start(&mut self, offset: i64) -> Result<bool, LogError> {
        let before = self.log_start_offset();
        match self {
            Log::Memory(l) => l.advance_start(offset),
            Log::Disk(l) => l.advance_start(offset)?,
        }
        Ok(self.log_start_offset() > before)
    }

    /// Removes everything and restarts the log, empty, at `offset`: its start and
    /// end offset. A replica does this when its leader's log starts past its own end.
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), LogError> {
        match self {
            Log::Memory(l) => {
                l.truncate_fully_and_start_at(offset);
                Ok(())
            }
            Log::Disk(l) => l.truncate_fully_and_start_at(offset),
        }
    }
}
