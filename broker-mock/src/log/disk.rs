//! The segmented on-disk log.
//!
//! A partition directory holds segments named by their base offset, 20 digits as in
//! Kafka: `00000000000000000000.log` holds raw record batches exactly as stored, and
//! `00000000000000000000.index` a sparse offset index of 8-byte entries (offset
//! relative to the segment base as `u32`, file position as `u32`), one entry every
//! `index_interval_bytes` of appended data.
//!
//! Opening a log recovers it: every batch of every segment is checked (framing, magic,
//! CRC, offsets increasing). At the first bad batch the segment is cut there, later
//! segments are removed, and each segment's index is rebuilt from the scan. Kafka only
//! rechecks past its recovery point; this log trusts nothing it did not just read.
//!
//! Segment and index files are written and synced through `faults::disk`'s wrapper
//! (where tests inject ENOSPC, EIO and short writes). A failed write or fsync takes the
//! log offline: the failed batch never counts (end offset and index unchanged), and
//! every later operation fails with [`LogError::Offline`] until the log is reopened.

use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::header::{frame_len, validate, BatchHeader, HEADER_LEN, LOG_OVERHEAD};
use crate::error::LogError;
use crate::faults::disk as disk_faults;

mod swap;

const INDEX_ENTRY: usize = 8;

/// Why recovery cut a segment, how many bytes it cut, and whether a valid batch
/// followed the cut (mid-log damage rather than a torn tail).
type Cut = (&'static str, u64, bool);

/// Most bytes after a bad batch searched for a later valid batch.
const RESYNC_SCAN_MAX: u64 = 64 << 20;

/// Whether a whole valid batch with offsets at or past `min_offset` starts anywhere in
/// `from..len` of `file`: if one does, the damage before it is not a torn tail. Reads
/// at most [`RESYNC_SCAN_MAX`] bytes.
fn valid_batch_follows(file: &File, from: u64, len: u64, min_offset: i64) -> bool {
    if from >= len {
        return false;
    }
    let n = (len - from).min(RESYNC_SCAN_MAX) as usize;
    let mut buf = vec![0u8; n];
    if read_at(file, &mut buf, from).is_err() {
        return false;
    }
    (0..n.saturating_sub(HEADER_LEN)).any(|i| {
        let b = &buf[i..];
        // Cheap checks first: magic 2 and a plausible frame.
        if b[16] != 2 {
            return false;
        }
        let Some((base, total)) = frame_len(b) else {
            return false;
        };
        base >= min_offset && total <= b.len() && validate(&b[..total]).is_ok()
    })
}

/// What recovery found and removed while opening a log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Bytes cut from the end of the segment where the first bad batch was found.
    pub truncated_bytes: u64,
    /// Whole segments removed because they followed a bad batch.
    pub removed_segments: usize,
    /// Why the cut was made, if one was.
    pub reason: Option<&'static str>,
    /// Set when the cut was not a torn tail: a valid batch (or a later segment)
    /// followed the bad one, so data that may have been acknowledged was removed. The
    /// value is the first offset removed. A cluster replica reports this and re-fetches
    /// the removed range from a healthy leader.
    pub corrupt_offset: Option<i64>,
}

#[derive(Debug)]
struct Segment {
    base: i64,
    /// Offset after the last batch; `base` when empty.
    next: i64,
    path: PathBuf,
    file: File,
    size: u64,
    index_path: PathBuf,
    index_file: File,
    /// In-memory copy of the index file: (relative offset, position).
    index: Vec<(u32, u32)>,
    since_index: u64,
    /// Largest batch max timestamp in the segment, -1 when empty.
    max_ts: i64,
}

fn segment_paths(dir: &Path, base: i64) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("{base:020}.log")),
        dir.join(format!("{base:020}.index")),
    )
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], pos: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.read_exact_at(buf, pos)
}

#[cfg(unix)]
fn write_at(file: &File, buf: &[u8], pos: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.write_all_at(buf, pos)
}

#[cfg(not(unix))]
fn read_at(file: &File, buf: &mut [u8], pos: u64) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom};
    let mut f = file.try_clone()?;
    f.seek(SeekFrom::Start(pos))?;
    f.read_exact(buf)
}

#[cfg(not(unix))]
fn write_at(file: &File, buf: &[u8], pos: u64) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom};
    let mut f = file.try_clone()?;
    f.seek(SeekFrom::Start(pos))?;
    f.write_all(buf)
}

fn open_rw(path: &Path) -> Result<File, LogError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| LogError::io(path, e))
}

impl Segment {
    fn create(dir: &Path, base: i64) -> Result<Segment, LogError> {
        let (path, index_path) = segment_paths(dir, base);
        let file = open_rw(&path)?;
        file.set_len(0).map_err(|e| LogError::io(&path, e))?;
        let index_file = open_rw(&index_path)?;
        index_file
            .set_len(0)
            .map_err(|e| LogError::io(&index_path, e))?;
        Ok(Segment {
            base,
            next: base,
            path,
            file,
            size: 0,
            index_path,
            index_file,
            index: Vec::new(),
            since_index: 0,
            max_ts: -1,
        })
    }

    /// Scans the segment file, keeping the longest valid prefix whose offsets start at
    /// or after `min_offset`. Returns the segment and the reason for a cut, if any.
    fn recover(
        dir: &Path,
        base: i64,
        min_offset: i64,
        interval: u32,
        gaps: bool,
    ) -> Result<(Segment, Option<Cut>), LogError> {
        let (path, index_path) = segment_paths(dir, base);
        let file = open_rw(&path)?;
        let len = file.metadata().map_err(|e| LogError::io(&path, e))?.len();
        let mut seg = Segment {
            base,
            next: base,
            path,
            file,
            size: 0,
            index_path: index_path.clone(),
            index_file: open_rw(&index_path)?,
            index: Vec::new(),
            since_index: 0,
            max_ts: -1,
        };
        let mut reader = BufReader::new(
            seg.file
                .try_clone()
                .map_err(|e| LogError::io(&seg.path, e))?,
        );
        let mut cut = None;
        let mut expected = min_offset.max(base);
        let mut pos = 0u64;
        while pos < len {
            let left = len - pos;
            if left < LOG_OVERHEAD as u64 {
                cut = Some(("torn batch header at end of segment", left));
                break;
            }
            let mut head = [0u8; LOG_OVERHEAD];
            reader
                .read_exact(&mut head)
                .map_err(|e| LogError::io(&seg.path, e))?;
            let Some((_, total)) = frame_len(&head) else {
                cut = Some(("impossible batch length", left));
                break;
            };
            if total as u64 > left {
                cut = Some(("torn batch at end of segment", left));
                break;
            }
            let mut batch = vec![0u8; total];
            batch[..LOG_OVERHEAD].copy_from_slice(&head);
            reader
                .read_exact(&mut batch[LOG_OVERHEAD..])
                .map_err(|e| LogError::io(&seg.path, e))?;
            let h = match validate(&batch) {
                Ok(h) => h,
                Err(reason) => {
                    cut = Some((reason, left));
                    break;
                }
            };
            if h.base_offset < expected {
                cut = Some(("batch offsets go backwards", left));
                break;
            }
            if pos > 0 && h.base_offset != expected && !gaps {
                cut = Some(("batch offsets skip ahead", left));
                break;
            }
            if h.last_offset - base > u32::MAX as i64 {
                cut = Some(("batch offset out of segment range", left));
                break;
            }
            seg.note_append(&h, pos, interval);
            expected = h.last_offset + 1;
            pos += total as u64;
        }
        let mut mid_log = false;
        if cut.is_some() {
            mid_log = valid_batch_follows(&seg.file, pos + 1, len, expected);
            seg.file
                .set_len(pos)
                .map_err(|e| LogError::io(&seg.path, e))?;
        }
        seg.rewrite_index()?;
        Ok((seg, cut.map(|(r, b)| (r, b, mid_log))))
    }

    /// Updates in-memory state for a batch written at `pos`; returns the index entry
    /// added for it, if one was.
    fn note_append(&mut self, h: &BatchHeader, pos: u64, interval: u32) -> Option<(u32, u32)> {
        let mut entry = None;
        if self.since_index >= interval as u64 {
            let e = ((h.base_offset - self.base) as u32, pos as u32);
            self.index.push(e);
            self.since_index = 0;
            entry = Some(e);
        }
        self.since_index += h.total_len as u64;
        self.next = h.last_offset + 1;
        self.size = pos + h.total_len as u64;
        self.max_ts = self.max_ts.max(h.max_timestamp);
        entry
    }

    fn rewrite_index(&mut self) -> Result<(), LogError> {
        let mut buf = Vec::with_capacity(self.index.len() * INDEX_ENTRY);
        for (rel, pos) in &self.index {
            buf.extend_from_slice(&rel.to_be_bytes());
            buf.extend_from_slice(&pos.to_be_bytes());
        }
        self.index_file
            .set_len(0)
            .and_then(|_| write_at(&self.index_file, &buf, 0))
            .map_err(|e| LogError::io(&self.index_path, e))
    }

    /// Reads and parses the batch header at `pos` (bounded by the segment size).
    fn header_at(&self, pos: u64) -> Result<BatchHeader, LogError> {
        let left = self.size.saturating_sub(pos);
        if left < HEADER_LEN as u64 {
            return Err(self.corrupt(pos, "batch header past segment end"));
        }
        let mut buf = [0u8; HEADER_LEN];
        read_at(&self.file, &mut buf, pos).map_err(|e| LogError::io(&self.path, e))?;
        let h = BatchHeader::parse(&buf).map_err(|r| self.corrupt(pos, r))?;
        if h.total_len as u64 > left {
            return Err(self.corrupt(pos, "batch runs past segment end"));
        }
        Ok(h)
    }

    fn corrupt(&self, pos: u64, reason: &'static str) -> LogError {
        LogError::Corrupt {
            path: self.path.clone(),
            position: pos,
            reason,
        }
    }

    /// Position of the first batch whose last offset is at or past `offset` (or the
    /// segment size when there is none), with its header.
    fn locate(&self, offset: i64) -> Result<(u64, Option<BatchHeader>), LogError> {
        let rel = (offset - self.base).clamp(0, u32::MAX as i64) as u32;
        let i = self.index.partition_point(|(r, _)| *r <= rel);
        let mut pos = if i == 0 {
            0
        } else {
            self.index[i - 1].1 as u64
        };
        while pos < self.size {
            let h = self.header_at(pos)?;
            if h.last_offset >= offset {
                return Ok((pos, Some(h)));
            }
            pos += h.total_len as u64;
        }
        Ok((self.size, None))
    }

    /// Like [`Segment::locate`] but for cutting a damaged log: walks from the start of
    /// the segment (an index entry may be wrong) and stops at the first batch at or
    /// past `offset` or at the first header that does not parse. Returns the cut
    /// position and the offset that follows the kept batches.
    fn locate_lenient(&self, offset: i64) -> (u64, i64) {
        let mut pos = 0;
        let mut next = self.base;
        while pos < self.size {
            match self.header_at(pos) {
                Ok(h) if h.last_offset < offset && h.base_offset >= next => {
                    next = h.last_offset + 1;
                    pos += h.total_len as u64;
                }
                _ => return (pos, next),
            }
        }
        (pos, next)
    }

    fn read_range(&self, from: u64, to: u64) -> Result<Bytes, LogError> {
        let mut buf = vec![0u8; (to - from) as usize];
        read_at(&self.file, &mut buf, from).map_err(|e| LogError::io(&self.path, e))?;
        Ok(Bytes::from(buf))
    }

    /// Cuts the segment at `pos` (a batch boundary) and drops index entries past it.
    fn cut_at(&mut self, pos: u64, next: i64) -> Result<(), LogError> {
        if self.size == 0 || pos == 0 {
            self.file
                .set_len(0)
                .map_err(|e| LogError::io(&self.path, e))?;
            self.size = 0;
            self.next = self.base;
            self.index.clear();
            self.since_index = 0;
            self.max_ts = -1;
            return self.rewrite_index();
        }
        self.file
            .set_len(pos)
            .map_err(|e| LogError::io(&self.path, e))?;
        self.size = pos;
        self.next = next;
        self.index.retain(|(_, p)| (*p as u64) < pos);
        self.since_index = pos - self.index.last().map_or(0, |(_, p)| *p as u64);
        self.max_ts = -1;
        let mut p = 0;
        while p < self.size {
            let h = self.header_at(p)?;
            self.max_ts = self.max_ts.max(h.max_timestamp);
            p += h.total_len as u64;
        }
        self.rewrite_index()
    }

    fn remove_files(self) -> Result<(), LogError> {
        let Segment {
            path,
            file,
            index_path,
            index_file,
            ..
        } = self;
        drop(file);
        drop(index_file);
        fs::remove_file(&path).map_err(|e| LogError::io(&path, e))?;
        match fs::remove_file(&index_path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(LogError::io(&index_path, e)),
        }
    }
}

/// A segmented log in one directory.
///
/// Invariant: `segments` is never empty, is sorted by base offset, segment `i + 1`
/// starts at or after segment `i`'s next offset, and only the last one is appended to.
#[derive(Debug)]
pub struct DiskLog {
    dir: PathBuf,
    segment_bytes: u64,
    index_interval: u32,
    segments: Vec<Segment>,
    /// Whether offsets may have gaps between batches (a compacted log, or one that
    /// replicated a compacted leader; see `swap`). Sticky: kept in a marker file.
    gaps: bool,
    /// Where reads may begin: at or past the first segment's base, at most the log
    /// end (see [`super::start_offset`]). Persisted in the partition directory.
    log_start: i64,
    /// Set by the first failed write, fsync or cut: the log is offline from then on
    /// (every append, read, cut and flush fails with [`LogError::Offline`]) until it
    /// is opened again, which recovers it from what is durably on disk. Kafka takes
    /// a log directory offline the same way on its first `IOException`.
    failure: Option<String>,
}

impl DiskLog {
    /// Opens (creating if needed) the log in `dir`, recovering every segment.
    pub fn open(
        dir: impl Into<PathBuf>,
        segment_bytes: u64,
        index_interval_bytes: u32,
    ) -> Result<(DiskLog, Recovery), LogError> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(|e| LogError::io(&dir, e))?;
        crate::log::swap_files::finish_leftovers(&dir)?;
        let gaps = crate::log::swap_files::has_gaps_marker(&dir);
        let mut bases = Vec::new();
        for entry in fs::read_dir(&dir).map_err(|e| LogError::io(&dir, e))? {
            let entry = entry.map_err(|e| LogError::io(&dir, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(stem) = name.strip_suffix(".log") {
                if stem.len() == 20 {
                    if let Ok(base) = stem.parse::<i64>() {
                        bases.push(base);
                    }
                }
            } else if let Some(stem) = name.strip_suffix(".index") {
                // Indexes without a segment are leftovers of a crash mid-roll.
                if !dir.join(format!("{stem}.log")).exists() {
                    let _ = fs::remove_file(entry.path());
                }
            }
        }
        bases.sort_unstable();
        let mut recovery = Recovery::default();
        let mut segments: Vec<Segment> = Vec::new();
        let mut iter = bases.into_iter();
        for base in iter.by_ref() {
            let min = segments.last().map_or(0, |s| s.next);
            if base < min {
                // Overlaps its predecessor: treat as damage and stop here.
                let (path, index) = segment_paths(&dir, base);
                let _ = fs::remove_file(index);
                fs::remove_file(&path).map_err(|e| LogError::io(&path, e))?;
                recovery.removed_segments += 1;
                recovery
                    .reason
                    .get_or_insert("segment overlaps its predecessor");
                break;
            }
            let (seg, cut) = Segment::recover(&dir, base, min, index_interval_bytes, gaps)?;
            let had_cut = cut.is_some();
            if let Some((reason, bytes, mid_log)) = cut {
                recovery.truncated_bytes += bytes;
                recovery.reason = Some(reason);
                if mid_log {
                    recovery.corrupt_offset = Some(seg.next);
                }
            }
            let next = seg.next;
            segments.push(seg);
            if had_cut {
                if iter.len() > 0 {
                    recovery.corrupt_offset.get_or_insert(next);
                }
                break;
            }
        }
        for base in iter {
            let (path, index) = segment_paths(&dir, base);
            let _ = fs::remove_file(index);
            fs::remove_file(&path).map_err(|e| LogError::io(&path, e))?;
            recovery.removed_segments += 1;
        }
        if segments.is_empty() {
            segments.push(Segment::create(&dir, 0)?);
        }
        let stored_start = super::start_offset::read(&dir)?;
        let mut log = DiskLog {
            dir,
            segment_bytes: segment_bytes.max(HEADER_LEN as u64),
            index_interval: index_interval_bytes,
            segments,
            gaps,
            log_start: 0,
            failure: None,
        };
        log.log_start = stored_start.unwrap_or(0).max(log.segments[0].base);
        if log.log_start > log.end() {
            // Everything below the stored start was deleted, and recovery cut the
            // rest: the log restarts, empty, at its start (as Kafka's loader does).
            let start = log.log_start;
            log.truncate_fully_and_start_at(start)?;
        }
        Ok((log, recovery))
    }

    /// The directory holding this log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Number of segments (for tests and diagnostics).
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    pub(super) fn start(&self) -> i64 {
        self.log_start.max(self.segments[0].base)
    }

    pub(super) fn end(&self) -> i64 {
        self.segments[self.segments.len() - 1].next
    }

    fn active(&mut self) -> &mut Segment {
        let n = self.segments.len();
        &mut self.segments[n - 1]
    }

    /// Fails with [`LogError::Offline`] once a write or fsync failed.
    fn check_online(&self) -> Result<(), LogError> {
        match &self.failure {
            None => Ok(()),
            Some(reason) => Err(LogError::Offline {
                dir: self.dir.clone(),
                reason: reason.clone(),
            }),
        }
    }

    /// Why the log went offline, if it did.
    pub fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }

    /// Takes the log offline on an I/O failure of `r` (other errors leave it be).
    fn offline_on_io<T>(&mut self, r: Result<T, LogError>) -> Result<T, LogError> {
        if let Err(e @ LogError::Io { .. }) = &r {
            tracing::error!(dir = %self.dir.display(), error = %e, "log storage failed; the log is offline");
            self.failure = Some(e.to_string());
        }
        r
    }

    /// Appends one batch. On a failed write or fsync nothing of the batch counts:
    /// the end offset, size and index stay as they were (the written prefix of a short
    /// write is cut off again where the disk allows it, and recovery cuts it
    /// otherwise), and the log goes offline.
    pub(super) fn append(&mut self, h: BatchHeader, data: Bytes) -> Result<(), LogError> {
        self.check_online()?;
        let r = self.append_inner(h, data);
        self.offline_on_io(r)
    }

    fn append_inner(&mut self, h: BatchHeader, data: Bytes) -> Result<(), LogError> {
        if h.base_offset > self.end() {
            self.mark_gaps()?;
        }
        let len = data.len() as u64;
        let seg_bytes = self.segment_bytes.min(u32::MAX as u64);
        let active = self.active();
        if active.size > 0
            && (active.size + len > seg_bytes || h.last_offset - active.base > u32::MAX as i64)
        {
            disk_faults::sync_data(&active.path, &active.file)
                .map_err(|e| LogError::io(&active.path, e))?;
            let seg = Segment::create(&self.dir, h.base_offset)?;
            self.segments.push(seg);
        }
        let interval = self.index_interval;
        let active = self.active();
        let pos = active.size;
        if let Err(e) = disk_faults::write_at(&active.path, &active.file, &data, pos) {
            // Whatever prefix reached the file is not part of the log.
            let _ = active.file.set_len(pos);
            return Err(LogError::io(&active.path, e));
        }
        let before = (active.next, active.size, active.since_index, active.max_ts);
        if let Some((rel, p)) = active.note_append(&h, pos, interval) {
            let mut e = [0u8; INDEX_ENTRY];
            e[..4].copy_from_slice(&rel.to_be_bytes());
            e[4..].copy_from_slice(&p.to_be_bytes());
            let at = ((active.index.len() - 1) * INDEX_ENTRY) as u64;
            if let Err(e) = disk_faults::write_at(&active.index_path, &active.index_file, &e, at) {
                // The batch does not count: back to the state before it.
                active.index.pop();
                (active.next, active.size, active.since_index, active.max_ts) = before;
                let _ = active.file.set_len(pos);
                return Err(LogError::io(&active.index_path, e));
            }
        }
        Ok(())
    }

    fn segment_for(&self, offset: i64) -> usize {
        self.segments
            .partition_point(|s| s.base <= offset)
            .saturating_sub(1)
    }

    pub(super) fn read(&self, from: i64, max_bytes: usize) -> Result<Vec<Bytes>, LogError> {
        self.check_online()?;
        let mut out = Vec::new();
        let mut total = 0usize;
        for seg in &self.segments[self.segment_for(from)..] {
            let (start, first) = seg.locate(from)?;
            let Some(first) = first else { continue };
            let mut lens = Vec::new();
            let mut pos = start;
            let mut next = Some(first);
            while let Some(h) = next.take() {
                let len = h.total_len;
                if (!out.is_empty() || !lens.is_empty()) && total + len > max_bytes {
                    break;
                }
                lens.push(len);
                total += len;
                pos += len as u64;
                if total >= max_bytes || pos >= seg.size {
                    break;
                }
                next = Some(seg.header_at(pos)?);
            }
            let mut data = seg.read_range(start, pos)?;
            for len in lens {
                out.push(data.split_to(len));
            }
            if total >= max_bytes || pos < seg.size {
                break;
            }
        }
        Ok(out)
    }

    pub(super) fn truncate_to(&mut self, offset: i64) -> Result<(), LogError> {
        self.check_online()?;
        let r = self.truncate_inner(offset);
        self.offline_on_io(r)
    }

    fn truncate_inner(&mut self, offset: i64) -> Result<(), LogError> {
        if offset >= self.end() {
            return Ok(());
        }
        if offset <= self.start() {
            for seg in self.segments.drain(..) {
                seg.remove_files()?;
            }
            let base = offset.max(0);
            self.segments.push(Segment::create(&self.dir, base)?);
            self.log_start = base;
            return super::start_offset::write(&self.dir, base);
        }
        while self.segments.len() > 1 && self.segments[self.segments.len() - 1].base >= offset {
            let seg = self.segments.pop().expect("more than one segment");
            seg.remove_files()?;
        }
        let active = self.active();
        let (pos, next) = active.locate_lenient(offset);
        if pos < active.size {
            active.cut_at(pos, next)?;
        }
        Ok(())
    }

    /// Test hook: points every in-memory index entry at the batch after the one it
    /// names (a wrong index must be noticed by the reader's offset checks).
    #[cfg(test)]
    pub(crate) fn skew_index_for_test(&mut self) {
        for seg in &mut self.segments {
            for i in 0..seg.index.len() {
                let (_, pos) = seg.index[i];
                if let Ok(h) = seg.header_at(pos as u64) {
                    seg.index[i].1 = pos + h.total_len as u32;
                }
            }
        }
    }

    /// Where the batch holding `offset` is stored: segment file, position and length.
    /// `None` if no stored batch holds it.
    pub fn batch_location(&self, offset: i64) -> Option<(PathBuf, u64, usize)> {
        let seg = &self.segments[self.segment_for(offset)];
        let (pos, h) = seg.locate(offset).ok()?;
        let h = h?;
        (h.base_offset <= offset).then(|| (seg.path.clone(), pos, h.total_len))
    }

    pub(super) fn find_by_timestamp(&self, ts: i64) -> Result<Option<Bytes>, LogError> {
        for seg in self.segments.iter().filter(|s| s.max_ts >= ts) {
            let mut pos = 0;
            while pos < seg.size {
                let h = seg.header_at(pos)?;
                if h.max_timestamp >= ts {
                    return seg.read_range(pos, pos + h.total_len as u64).map(Some);
                }
                pos += h.total_len as u64;
            }
        }
        Ok(None)
    }

    pub(super) fn max_timestamp_batch(&self) -> Result<Option<Bytes>, LogError> {
        let mut best: Option<&Segment> = None;
        for seg in self.segments.iter().filter(|s| s.size > 0) {
            if best.is_none_or(|b| seg.max_ts > b.max_ts) {
                best = Some(seg);
            }
        }
        let Some(seg) = best else { return Ok(None) };
        let mut pos = 0;
        while pos < seg.size {
            let h = seg.header_at(pos)?;
            if h.max_timestamp == seg.max_ts {
                return seg.read_range(pos, pos + h.total_len as u64).map(Some);
            }
            pos += h.total_len as u64;
        }
        Ok(None)
    }

    pub(super) fn flush(&mut self) -> Result<(), LogError> {
        self.check_online()?;
        let r = self.flush_inner();
        self.offline_on_io(r)
    }

    fn flush_inner(&mut self) -> Result<(), LogError> {
        for seg in &mut self.segments {
            disk_faults::sync_data(&seg.path, &seg.file).map_err(|e| LogError::io(&seg.path, e))?;
            seg.index_file
                .flush()
                .map_err(|e| LogError::io(&seg.index_path, e))?;
            disk_faults::sync_data(&seg.index_path, &seg.index_file)
                .map_err(|e| LogError::io(&seg.index_path, e))?;
        }
        Ok(())
    }

    /// Removes the log's files and directory.
    pub(super) fn delete(self) -> Result<(), LogError> {
        let dir = self.dir.clone();
        drop(self);
        fs::remove_dir_all(&dir).map_err(|e| LogError::io(&dir, e))
    }
}

/// Finds the batch holding `offset` in the segment files of the log directory `dir`
/// without opening (and so without recovering) the log: the segment file, the batch's
/// position and its length. For fault injection and offline inspection; it follows
/// the length fields only, so it works while the log is open elsewhere.
pub fn locate_batch_in_dir(
    dir: &Path,
    offset: i64,
) -> Result<Option<(PathBuf, u64, usize)>, LogError> {
    let mut bases = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| LogError::io(dir, e))? {
        let entry = entry.map_err(|e| LogError::io(dir, e))?;
        let name = entry.file_name();
        if let Some(base) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".log"))
            .filter(|s| s.len() == 20)
            .and_then(|s| s.parse::<i64>().ok())
        {
            bases.push(base);
        }
    }
    bases.sort_unstable();
    let Some(&base) = bases.iter().rev().find(|b| **b <= offset) else {
        return Ok(None);
    };
    let (path, _) = segment_paths(dir, base);
    let file = File::open(&path).map_err(|e| LogError::io(&path, e))?;
    let len = file.metadata().map_err(|e| LogError::io(&path, e))?.len();
    let mut pos = 0u64;
    while pos + HEADER_LEN as u64 <= len {
        let mut head = [0u8; HEADER_LEN];
        read_at(&file, &mut head, pos).map_err(|e| LogError::io(&path, e))?;
        let Ok(h) = BatchHeader::parse(&head) else {
            return Ok(None);
        };
        if h.base_offset <= offset && offset <= h.last_offset {
            return Ok(Some((path, pos, h.total_len)));
        }
        pos += h.total_len as u64;
    }
    Ok(None)
}

/// What retention needs to know of one segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SegmentInfo {
    /// The segment's base offset.
    pub base: i64,
    /// The offset after its last batch (`base` when empty).
    pub next: i64,
    /// Its size in bytes.
    pub size: u64,
    /// The largest batch max timestamp in it, -1 when empty.
    pub max_ts: i64,
}

/// Segment deletion, rolling and the log start offset (see `log/retention.rs`).
impl DiskLog {
    /// Every segment, oldest first; the last one is the active segment.
    pub(super) fn segment_infos(&self) -> Vec<SegmentInfo> {
        self.segments
            .iter()
            .map(|s| SegmentInfo {
                base: s.base,
                next: s.next,
                size: s.size,
                max_ts: s.max_ts,
            })
            .collect()
    }

    /// The max timestamp of the active segment's first batch, if it has one.
    pub(super) fn active_first_timestamp(&self) -> Result<Option<i64>, LogError> {
        let seg = &self.segments[self.segments.len() - 1];
        if seg.size == 0 {
            return Ok(None);
        }
        Ok(Some(seg.header_at(0)?.max_timestamp))
    }

    /// Closes the active segment (synced) and starts an empty one at the log end;
    /// a no-op when the active segment is empty.
    pub(super) fn roll(&mut self) -> Result<(), LogError> {
        self.check_online()?;
        let end = self.end();
        let active = self.active();
        if active.size == 0 {
            return Ok(());
        }
        let synced = disk_faults::sync_data(&active.path, &active.file)
            .map_err(|e| LogError::io(&active.path, e));
        self.offline_on_io(synced)?;
        let seg = Segment::create(&self.dir, end)?;
        self.segments.push(seg);
        Ok(())
    }

    /// Deletes the oldest segment (rolling first if it is the only one, so the log
    /// always has an active segment) and moves the log start to the next segment's
    /// base if it was below it.
    pub(super) fn delete_oldest_segment(&mut self) -> Result<(), LogError> {
        self.check_online()?;
        if self.segments.len() == 1 {
            self.roll()?;
            if self.segments.len() == 1 {
                return Ok(());
            }
        }
        let seg = self.segments.remove(0);
        let next_base = self.segments[0].base;
        if self.log_start < next_base {
            self.log_start = next_base;
            super::start_offset::write(&self.dir, next_base)?;
        }
        seg.remove_files()
    }

    /// Moves the log start offset up to `offset` (at most the log end), persists it,
    /// and deletes the segments wholly below it (never the active one).
    pub(super) fn advance_start(&mut self, offset: i64) -> Result<(), LogError> {
        self.check_online()?;
        let offset = offset.min(self.end());
        if offset > self.log_start {
            self.log_start = offset;
            super::start_offset::write(&self.dir, offset)?;
        }
        while self.segments.len() > 1 && self.segments[1].base <= self.log_start {
            let seg = self.segments.remove(0);
            seg.remove_files()?;
        }
        Ok(())
    }

    /// Removes every segment and restarts the log, empty, at `offset` (its start
    /// and end), as a replica does when its leader's log starts past its own end.
    pub(super) fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), LogError> {
        self.check_online()?;
        for seg in self.segments.drain(..) {
            seg.remove_files()?;
        }
        let base = offset.max(0);
        self.segments.push(Segment::create(&self.dir, base)?);
        self.log_start = base;
        super::start_offset::write(&self.dir, base)
    }
}
