//! The in-memory log: batches kept as `Bytes`, read without copying.

use std::collections::VecDeque;

use bytes::Bytes;

use super::header::BatchHeader;
use crate::error::LogError;

#[derive(Debug, Clone)]
struct Stored {
    header: BatchHeader,
    data: Bytes,
}

/// A log held in memory, for tests and `--in-memory` brokers.
///
/// Invariant: batches are in offset order and do not overlap; `start <= end`, and
/// `end` is past the last batch.
#[derive(Debug, Clone, Default)]
pub struct MemoryLog {
    start: i64,
    end: i64,
    batches: VecDeque<Stored>,
    /// Whether offsets may have gaps between batches (compacted, or replicated from
    /// a compacted leader).
    gaps: bool,
}

impl MemoryLog {
    /// An empty log starting at offset 0.
    pub fn new() -> Self {
        MemoryLog::default()
    }

    pub(super) fn start(&self) -> i64 {
        self.start
    }

    pub(super) fn end(&self) -> i64 {
        self.end
    }

    pub(super) fn append(&mut self, header: BatchHeader, data: Bytes) {
        debug_assert!(header.base_offset >= self.end);
        self.gaps |= header.base_offset > self.end;
        self.end = header.last_offset + 1;
        self.batches.push_back(Stored { header, data });
    }

    /// Index of the first batch whose last offset is at or past `offset`.
    fn locate(&self, offset: i64) -> usize {
        self.batches
            .partition_point(|b| b.header.last_offset < offset)
    }

    pub(super) fn read(&self, from: i64, max_bytes: usize) -> Vec<Bytes> {
        let mut out = Vec::new();
        let mut total = 0usize;
        for b in self.batches.range(self.locate(from)..) {
            if !out.is_empty() && total + b.data.len() > max_bytes {
                break;
            }
            total += b.data.len();
            out.push(b.data.clone());
            if total >= max_bytes {
                break;
            }
        }
        out
    }

    pub(super) fn truncate_to(&mut self, offset: i64) {
        if offset < self.start {
            self.batches.clear();
            self.start = offset.max(0);
            self.end = self.start;
            return;
        }
        let keep = self.locate(offset);
        if let Some(first_removed) = self.batches.get(keep) {
            // `offset` may fall in a gap of a compacted log, before the batch.
            self.end = first_removed.header.base_offset.min(offset);
            self.batches.truncate(keep);
        } else {
            self.end = self.end.min(offset);
        }
    }

    pub(super) fn find_by_timestamp(&self, ts: i64) -> Option<Bytes> {
        self.batches
            .iter()
            .find(|b| b.header.max_timestamp >= ts)
            .map(|b| b.data.clone())
    }

    pub(super) fn max_timestamp_batch(&self) -> Option<Bytes> {
        let mut best: Option<&Stored> = None;
        for b in &self.batches {
            if best.is_none_or(|x| b.header.max_timestamp > x.header.max_timestamp) {
                best = Some(b);
            }
        }
        best.map(|b| b.data.clone())
    }

    pub(super) fn has_gaps(&self) -> bool {
        self.gaps
    }

    /// Replaces the batches whose base offset is in `from..to` by `batches` (headers
    /// parsed, in order, within the same range): the cleaner's swap.
    pub(super) fn replace_range(&mut self, from: i64, to: i64, batches: Vec<(BatchHeader, Bytes)>) {
        let lo = self
            .batches
            .partition_point(|b| b.header.base_offset < from);
        let hi = self.batches.partition_point(|b| b.header.base_offset < to);
        let tail = self.batches.split_off(hi);
        self.batches.truncate(lo);
        self.batches.extend(
            batches
                .into_iter()
                .map(|(header, data)| Stored { header, data }),
        );
        self.batches.extend(tail);
        self.gaps = true;
    }

    /// Base offsets of the stored batches in order (the cleaner's range boundaries).
    pub(super) fn first_base_at_or_after(&self, offset: i64) -> Option<(i64, i64)> {
        self.batches
            .get(self.locate(offset))
            .map(|b| (b.header.base_offset, b.header.last_offset))
    }

    pub(super) fn check(&self) -> Result<(), LogError> {
        Ok(())
    }
}

/// Retention and the log start offset (see `log/retention.rs`): in memory each batch
/// is its own segment.
impl MemoryLog {
    /// Every batch as (the offset after it, size in bytes, max timestamp), oldest
    /// first.
    pub(super) fn batch_infos(&self) -> impl Iterator<Item = (i64, u64, i64)> + '_ {
        self.batches.iter().map(|b| {
            (
                b.header.last_offset + 1,
                b.data.len() as u64,
                b.header.max_timestamp,
            )
        })
    }

    /// Drops the oldest batch; the log start moves past it.
    pub(super) fn delete_oldest_batch(&mut self) {
        if let Some(b) = self.batches.pop_front() {
            self.start = self.start.max(b.header.last_offset + 1);
        }
    }

    /// Moves the log start up to `offset` (at most the log end) and drops the
    /// batches wholly below it.
    pub(super) fn advance_start(&mut self, offset: i64) {
        self.start = self.start.max(offset.min(self.end));
        while self
            .batches
            .front()
            .is_some_and(|b| b.header.last_offset < self.start)
        {
            self.batches.pop_front();
        }
    }

    /// Empties the log and restarts it at `offset`.
    pub(super) fn truncate_fully_and_start_at(&mut self, offset: i64) {
        self.batches.clear();
        self.start = offset.max(0);
        self.end = self.start;
    }
}
