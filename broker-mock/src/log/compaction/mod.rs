//! Log compaction (`cleanup.policy=compact`): the cleaner that keeps the latest
//! record of every key, as Kafka's `LogCleaner` does.
//!
//! - [`plan`] is I/O-free: the transaction index, the bounded key map and the
//!   per-batch decision (see its docs for the rules and the deviations from Kafka).
//! - [`clean_log`] drives it over one log: it reads the batches (each checked:
//!   framing and CRC; a bad one stops the cleaning with [`CleanError::Corrupt`]),
//!   decides and swaps the cleaned ranges in with [`Log::replace_range`]. On disk
//!   that is one segment at a time through `.cleaned` and `.swap` files (see
//!   `log::disk::swap`); in memory the batches are replaced.
//! - [`TopicCleaning`] reads a topic's settings (`cleanup.policy`,
//!   `delete.retention.ms`, `min.compaction.lag.ms`, `max.compaction.lag.ms`,
//!   `min.cleanable.dirty.ratio`) with the broker's defaults.
//! - [`check_keys`] is the produce-side rule: a compacted topic refuses records
//!   without key (`INVALID_RECORD`, as Kafka's `LogValidator`).
//!
//! The cleanable range of a log ends at the first offset that may not be cleaned:
//! the last stable offset (so below the high watermark and before any open
//! transaction), the active segment's base (an in-memory log has no segments: its
//! whole batches below that bound), the log's last batch (never removed, so that a
//! reader below the log end always finds a batch) and the first batch younger than
//! `min.compaction.lag.ms`. A log is cleaned when the bytes written since the last
//! cleaning (its dirty part) are at least `min.cleanable.dirty.ratio` of the
//! cleanable range, when its oldest dirty batch is older than
//! `max.compaction.lag.ms`, or when a tombstone's delete horizon passed. Where the
//! last cleaning ended is kept in memory by the caller (Kafka keeps it in a
//! `cleaner-offset-checkpoint` file): after a restart the first round cleans.

pub(crate) mod plan;

use baton_protocol::record::{RecordBatch, BATCH_HEADER_LEN};
use baton_protocol::ErrorCode;
use bytes::Bytes;

use super::header::{validate, BatchHeader};
use super::Log;
use crate::error::LogError;
use crate::topics::TopicConfig;
pub(crate) use plan::CleanError;
use plan::{clean_batch, Decision, KeyMap, TxnIndex};

/// Bytes read from the log at a time while cleaning.
const READ_CHUNK: usize = 1 << 20;

/// Broker-wide cleaner settings (Kafka's `log.cleaner.*` properties).
#[derive(Debug, Clone, PartialEq)]
pub struct CleanerConfig {
    /// Whether the cleaner runs (`log.cleaner.enable`, default true).
    pub enable: bool,
    /// Pause between two rounds over the node's partitions
    /// (`log.cleaner.backoff.ms`, default 15 s).
    pub backoff_ms: u64,
    /// `min.cleanable.dirty.ratio` of topics that set none
    /// (`log.cleaner.min.cleanable.ratio`, default 0.5).
    pub min_cleanable_ratio: f64,
    /// `delete.retention.ms` of topics that set none
    /// (`log.cleaner.delete.retention.ms`, default one day).
    pub delete_retention_ms: i64,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            enable: true,
            backoff_ms: 15_000,
            min_cleanable_ratio: 0.5,
            delete_retention_ms: 86_400_000,
        }
    }
}

/// One topic's compaction settings, its overrides over the broker's defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TopicCleaning {
    /// `cleanup.policy` names `compact` (alone or with `delete`).
    pub compact: bool,
    /// How long a tombstone stays after the cleaning that first kept it.
    pub delete_retention_ms: i64,
    /// Records younger than this are not cleaned.
    pub min_compaction_lag_ms: i64,
    /// A log whose oldest dirty record is older than this is cleaned whatever its
    /// dirty ratio.
    pub max_compaction_lag_ms: i64,
    /// Dirty share of the cleanable bytes that makes a log worth cleaning.
    pub min_cleanable_dirty_ratio: f64,
}

impl TopicConfig {
    /// Whether `cleanup.policy` includes `compact`.
    pub fn is_compacted(&self) -> bool {
        self.entries
            .get("cleanup.policy")
            .is_some_and(|v| v.split(',').any(|p| p.trim() == "compact"))
    }

    /// The topic's compaction settings, with `broker`'s defaults where it sets none.
    pub fn cleaning(&self, broker: &CleanerConfig) -> TopicCleaning {
        let long = |k: &str, d: i64| {
            self.entries
                .get(k)
                .and_then(|v| v.trim().parse::<i64>().ok())
                .unwrap_or(d)
        };
        TopicCleaning {
            compact: self.is_compacted(),
            delete_retention_ms: long("delete.retention.ms", broker.delete_retention_ms),
            min_compaction_lag_ms: long("min.compaction.lag.ms", 0),
            max_compaction_lag_ms: long("max.compaction.lag.ms", i64::MAX),
            min_cleanable_dirty_ratio: self
                .entries
                .get("min.cleanable.dirty.ratio")
                .and_then(|v| v.trim().parse::<f64>().ok())
                .unwrap_or(broker.min_cleanable_ratio),
        }
    }
}

/// Where the last cleaning of a log left it; the caller keeps one per log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanPoint {
    /// Offsets below this were cleaned (the start of the dirty part).
    pub first_dirty: i64,
    /// The earliest delete horizon of a kept tombstone: the log is worth cleaning
    /// again once it passed.
    pub next_horizon: Option<i64>,
}

/// What one cleaning did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanStats {
    /// The cleaned offsets ended here (exclusive).
    pub clean_end: i64,
    /// Ranges (segments) rewritten.
    pub ranges_rewritten: usize,
    /// Records removed.
    pub records_removed: usize,
    /// Tombstones removed because their delete horizon passed.
    pub tombstones_removed: usize,
    /// Whole batches removed.
    pub batches_removed: usize,
    /// Bytes of the cleaned ranges before and after.
    pub bytes_before: usize,
    /// See `bytes_before`.
    pub bytes_after: usize,
    /// Distinct keys in the key map.
    pub keys: usize,
}

/// Calls `f` with every batch from the one holding `from` to the first at or past
/// `to`, each framing- and CRC-checked; `f` returns false to stop.
fn each_batch(
    log: &Log,
    from: i64,
    to: i64,
    mut f: impl FnMut(&Bytes, RecordBatch) -> Result<bool, CleanError>,
) -> Result<(), CleanError> {
    let mut at = from;
    while at < to {
        let batches = log.read(at, READ_CHUNK).map_err(|e| match e {
            LogError::Corrupt { reason, .. } => CleanError::Corrupt {
                offset: at,
                reason: reason.to_owned(),
            },
            other => CleanError::Log(other.to_string()),
        })?;
        if batches.is_empty() {
            return Ok(());
        }
        for data in batches {
            let h = validate(&data).map_err(|r| CleanError::Corrupt {
                offset: at,
                reason: r.to_owned(),
            })?;
            if h.base_offset >= to {
                return Ok(());
            }
            let b = RecordBatch::parse(data.clone()).map_err(|e| CleanError::Corrupt {
                offset: h.base_offset,
                reason: e.to_string(),
            })?;
            at = h.last_offset + 1;
            if !f(&data, b)? {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// Cleans `log` below `upto` (the caller's bound: the last stable offset) if it is
/// worth it (see the module docs), at `now_ms`. Returns `None` when nothing was
/// done. `point` is updated.
pub(crate) fn clean_log(
    log: &mut Log,
    upto: i64,
    settings: &TopicCleaning,
    dedupe_bytes: usize,
    now_ms: i64,
    point: &mut CleanPoint,
) -> Result<Option<CleanStats>, CleanError> {
    let start = log.log_start_offset();
    let end = log.log_end_offset();
    point.first_dirty = point.first_dirty.clamp(start, end);
    // Pass 1: transactions, producers, and the sizes and ages of the batches.
    let mut txn = TxnIndex::new(dedupe_bytes / 2);
    let mut lag_bound = i64::MAX;
    let mut sizes: Vec<(i64, usize, i64)> = Vec::new();
    let mut last_base = i64::MAX;
    let min_lag_cut = now_ms.saturating_sub(settings.min_compaction_lag_ms);
    each_batch(log, start, end, |data, b| {
        txn.observe(&b)?;
        last_base = b.base_offset();
        if b.base_offset() < upto {
            if settings.min_compaction_lag_ms > 0 && b.max_timestamp() > min_lag_cut {
                lag_bound = lag_bound.min(b.base_offset());
            }
            sizes.push((b.base_offset(), data.len(), b.max_timestamp()));
        }
        Ok(true)
    })?;
    // The log's last batch is never cleaned away, so a reader at any offset below
    // the log end finds a batch at or after it.
    let upto = upto.min(lag_bound).min(last_base);
    let ranges = log.cleanable_ranges(upto);
    let Some(&(_, mut clean_end)) = ranges.last() else {
        return Ok(None);
    };
    let in_range = sizes.iter().filter(|(b, _, _)| *b < clean_end);
    let total: usize = in_range.clone().map(|(_, n, _)| n).sum();
    let dirty: Vec<_> = in_range
        .filter(|(b, _, _)| *b >= point.first_dirty)
        .collect();
    let dirty_bytes: usize = dirty.iter().map(|(_, n, _)| n).sum();
    let ratio_due = total > 0
        && dirty_bytes > 0
        && dirty_bytes as f64 / total as f64 >= settings.min_cleanable_dirty_ratio;
    let lag_due = dirty
        .first()
        .is_some_and(|(_, _, ts)| now_ms.saturating_sub(*ts) > settings.max_compaction_lag_ms);
    let horizon_due = point.next_horizon.is_some_and(|h| now_ms >= h);
    if !(ratio_due || lag_due || horizon_due) {
        return Ok(None);
    }
    drop(sizes);
    // Pass 2: the key map over the cleanable range.
    let mut keys = KeyMap::new(dedupe_bytes / 2);
    let bound = clean_end;
    each_batch(log, start, bound, |_, b| {
        if keys.observe(&b, &txn)? {
            Ok(true)
        } else {
            clean_end = b.base_offset();
            Ok(false)
        }
    })?;
    let ranges = if clean_end < bound {
        log.cleanable_ranges(clean_end)
    } else {
        ranges
    };
    let Some(&(_, clean_end)) = ranges.last() else {
        return Ok(None);
    };
    // Pass 3: decide and swap, range by range.
    let mut stats = CleanStats {
        clean_end,
        keys: keys.len(),
        ..Default::default()
    };
    let mut next_horizon: Option<i64> = None;
    for (from, to) in ranges {
        let mut out: Vec<Bytes> = Vec::new();
        let mut changed = false;
        each_batch(log, from, to, |data, b| {
            stats.bytes_before += data.len();
            let c = clean_batch(&b, &keys, &txn, now_ms, settings.delete_retention_ms)?;
            stats.records_removed += c.removed;
            stats.tombstones_removed += c.tombstones_removed;
            if let Some(h) = c.horizon {
                next_horizon = Some(next_horizon.map_or(h, |n| n.min(h)));
            }
            match c.decision {
                Decision::Keep => out.push(data.clone()),
                Decision::Drop => {
                    changed = true;
                    stats.batches_removed += 1;
                }
                Decision::Rewrite(new) => {
                    changed = true;
                    out.push(new);
                }
            }
            Ok(true)
        })?;
        if changed {
            stats.bytes_after += out.iter().map(Bytes::len).sum::<usize>();
            log.replace_range(from, to, out)
                .map_err(|e| CleanError::Log(e.to_string()))?;
            stats.ranges_rewritten += 1;
        } else {
            stats.bytes_after += out.iter().map(Bytes::len).sum::<usize>();
        }
    }
    point.first_dirty = clean_end;
    point.next_horizon = next_horizon;
    Ok(Some(stats))
}

impl Log {
    /// Whether offsets may skip ahead between batches (a compacted log, or one that
    /// replicated a compacted leader): the checked reads then accept gaps.
    pub fn may_have_gaps(&self) -> bool {
        match self {
            Log::Memory(l) => l.has_gaps(),
            Log::Disk(l) => l.has_gaps(),
        }
    }

    /// The ranges `(from, to)` the cleaner may rewrite when nothing at or past
    /// `upto` may be: the whole non-active segments below it on disk; in memory,
    /// the whole batches below it.
    pub(crate) fn cleanable_ranges(&self, upto: i64) -> Vec<(i64, i64)> {
        match self {
            Log::Disk(l) => l.cleanable_segments(upto),
            Log::Memory(l) => {
                // From the base of the batch holding the log start (which may lie
                // inside a batch after DeleteRecords).
                let start = l
                    .first_base_at_or_after(l.start())
                    .map_or(l.start(), |(base, _)| base.min(l.start()));
                let end = match l.first_base_at_or_after(upto) {
                    Some((base, last)) if base < upto && last >= upto => base,
                    Some((base, _)) => base.min(upto),
                    None => l.end().min(upto),
                };
                // No batch straddles `end` now; `end` is a batch boundary or a gap.
                if end > start {
                    vec![(start, end)]
                } else {
                    Vec::new()
                }
            }
        }
    }

    /// Replaces the batches of `from..to` (a range from
    /// [`Log::cleanable_ranges`]) by `batches`, which keep their offsets and lie
    /// inside it: crash-safely on disk (see `log::disk::swap`).
    pub(crate) fn replace_range(
        &mut self,
        from: i64,
        to: i64,
        batches: Vec<Bytes>,
    ) -> Result<(), LogError> {
        let mut parsed = Vec::with_capacity(batches.len());
        let mut next = from;
        for b in &batches {
            let h = validate(b).map_err(LogError::InvalidBatch)?;
            if h.base_offset < next || h.last_offset >= to {
                return Err(LogError::InvalidBatch("cleaned batch outside its range"));
            }
            next = h.last_offset + 1;
            parsed.push(h);
        }
        match self {
            Log::Memory(l) => {
                l.replace_range(from, to, parsed.into_iter().zip(batches).collect());
                Ok(())
            }
            Log::Disk(l) => l.replace_segment(from, &batches),
        }
    }
}

/// Kafka's rule for compacted topics at produce: every record must have a key, or
/// the request's partition fails with `INVALID_RECORD`. Batches that do not parse
/// or fail their CRC are left to the produce checks (`CORRUPT_MESSAGE`).
pub(crate) fn check_keys(records: &[u8]) -> Result<(), ErrorCode> {
    let mut at = 0;
    while at + BATCH_HEADER_LEN <= records.len() {
        let Ok(h) = BatchHeader::parse(&records[at..]) else {
            return Ok(());
        };
        let Some(batch) = records.get(at..at + h.total_len) else {
            return Ok(());
        };
        if !h.crc_ok(batch) {
            return Ok(());
        }
        let Ok(b) = RecordBatch::parse(Bytes::copy_from_slice(batch)) else {
            return Ok(());
        };
        if !b.is_control() {
            let Ok(records) = b.records() else {
                return Ok(());
            };
            for r in records {
                match r {
                    Ok(r) if r.key.is_none() => return Err(ErrorCode::InvalidRecord),
                    Ok(_) => {}
                    Err(_) => return Ok(()),
                }
            }
        }
        at += h.total_len;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
