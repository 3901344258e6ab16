//! Replacing a whole segment with its cleaned copy, crash-safely, as Kafka's cleaner
//! does with its `.cleaned` and `.swap` files:
//!
//! 1. the cleaned batches are written to `<base>.log.cleaned` and fsynced;
//! 2. the file is read back and checked (framing, CRC, offsets increasing inside
//!    the segment's range, the batch count) before anything is replaced;
//! 3. it is renamed to `<base>.log.swap` (the directory fsynced): from here the
//!    cleaned copy is complete and wins;
//! 4. it is renamed over `<base>.log` (atomic), the directory fsynced, and the
//!    segment reopened, which rebuilds its index.
//!
//! Opening a log finishes what a crash interrupted: a leftover `.cleaned` file is
//! deleted (the old segment is intact), a leftover `.swap` file is renamed over its
//! segment (step 4 again).
//!
//! A cleaned log has gaps between batches. The first time a log gets one (a swap,
//! or a follower appending a compacted leader's batches) the empty file
//! `offset-gaps` is created in its directory; from then on recovery and the served
//! reads accept offsets that skip ahead between batches, which they otherwise treat
//! as damage (a base offset is not covered by the CRC).

use std::fs::{self, File};
use std::path::Path;

use bytes::Bytes;

use super::{segment_paths, validate, write_at, DiskLog, Segment};
use crate::error::LogError;
use crate::log::header::{frame_len, LOG_OVERHEAD};
use crate::log::swap_files::{sync_dir, GAPS_MARKER};

/// Reads back a written cleaned file and checks it holds exactly `expected` valid
/// batches with increasing offsets in `base..limit`.
fn check_written(path: &Path, base: i64, limit: i64, expected: usize) -> Result<(), LogError> {
    let data = fs::read(path).map_err(|e| LogError::io(path, e))?;
    let bad = |position: usize, reason: &'static str| LogError::Corrupt {
        path: path.to_owned(),
        position: position as u64,
        reason,
    };
    let (mut at, mut count, mut next) = (0usize, 0usize, base);
    while at < data.len() {
        let rest = &data[at..];
        let (_, total) = frame_len(rest).ok_or(bad(at, "cleaned batch framing"))?;
        if total > rest.len() || total < LOG_OVERHEAD {
            return Err(bad(at, "cleaned batch runs past the file"));
        }
        let h = validate(&rest[..total]).map_err(|r| bad(at, r))?;
        if h.base_offset < next || h.last_offset >= limit {
            return Err(bad(at, "cleaned batch offsets out of order or range"));
        }
        next = h.last_offset + 1;
        count += 1;
        at += total;
    }
    if count != expected {
        return Err(bad(at, "cleaned segment lost batches while written"));
    }
    Ok(())
}

impl DiskLog {
    /// Notes that the log may have gaps between batches, in memory and in the
    /// marker file (fsynced with its directory before any gap is written).
    pub(super) fn mark_gaps(&mut self) -> Result<(), LogError> {
        if self.gaps {
            return Ok(());
        }
        let path = self.dir.join(GAPS_MARKER);
        File::create(&path)
            .and_then(|f| f.sync_all())
            .map_err(|e| LogError::io(&path, e))?;
        sync_dir(&self.dir)?;
        self.gaps = true;
        Ok(())
    }

    /// Whether offsets may skip ahead between batches.
    pub(crate) fn has_gaps(&self) -> bool {
        self.gaps
    }

    /// The segments the cleaner may rewrite when nothing at or past `upto` may be
    /// cleaned: every segment but the active one that ends (the next segment's base)
    /// at or below `upto`, as `(base, next segment's base)`.
    pub(crate) fn cleanable_segments(&self, upto: i64) -> Vec<(i64, i64)> {
        self.segments
            .windows(2)
            .map(|w| (w[0].base, w[1].base))
            .take_while(|(_, end)| *end <= upto)
            .collect()
    }

    /// Replaces the segment starting at `base` (not the active one) by `batches`,
    /// which must lie inside its offset range, in order (see the module docs).
    pub(crate) fn replace_segment(&mut self, base: i64, batches: &[Bytes]) -> Result<(), LogError> {
        let Some(i) = self.segments.iter().position(|s| s.base == base) else {
            return Err(LogError::InvalidBatch(
                "no segment at the cleaned base offset",
            ));
        };
        if i + 1 >= self.segments.len() {
            return Err(LogError::InvalidBatch(
                "the active segment is never cleaned",
            ));
        }
        let limit = self.segments[i + 1].base;
        let min_offset = if i == 0 { 0 } else { self.segments[i - 1].next };
        self.mark_gaps()?;
        let (log_path, _) = segment_paths(&self.dir, base);
        let cleaned = log_path.with_extension("log.cleaned");
        let swap = log_path.with_extension("log.swap");
        {
            let file = File::create(&cleaned).map_err(|e| LogError::io(&cleaned, e))?;
            let mut pos = 0u64;
            for b in batches {
                write_at(&file, b, pos).map_err(|e| LogError::io(&cleaned, e))?;
                pos += b.len() as u64;
            }
            file.sync_all().map_err(|e| LogError::io(&cleaned, e))?;
        }
        if let Err(e) = check_written(&cleaned, base, limit, batches.len()) {
            let _ = fs::remove_file(&cleaned);
            return Err(e);
        }
        fs::rename(&cleaned, &swap).map_err(|e| LogError::io(&swap, e))?;
        sync_dir(&self.dir)?;
        fs::rename(&swap, &log_path).map_err(|e| LogError::io(&log_path, e))?;
        sync_dir(&self.dir)?;
        let (seg, cut) = Segment::recover(&self.dir, base, min_offset, self.index_interval, true)?;
        self.segments[i] = seg;
        if let Some((reason, _, _)) = cut {
            return Err(LogError::Corrupt {
                path: log_path,
                position: 0,
                reason,
            });
        }
        Ok(())
    }
}
