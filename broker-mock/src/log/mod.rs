//! Partition logs: an append-only sequence of record batches, on disk ([`DiskLog`]) or
//! in memory ([`MemoryLog`]), behind one type, [`Log`].
//!
//! The log stores batches exactly as given: offsets, leader epoch and timestamps are
//! assigned by the partition before [`Log::append`]. Reads return whole batches, at
//! least one even if it exceeds the byte budget (KIP-74). The log does not check CRCs
//! on read; the partition does that before serving anything.

pub(crate) mod check;
pub(crate) mod compaction;
mod disk;
pub mod header;
mod memory;
pub mod policy;
mod retention;
pub mod start_offset;
pub(crate) mod swap_files;

use bytes::Bytes;

pub use disk::{locate_batch_in_dir, DiskLog, Recovery};
pub use memory::MemoryLog;
pub use policy::{LogRetention, RetentionOutcome, RetentionPolicy};

use crate::error::LogError;
use header::BatchHeader;

/// A partition's log, on disk or in memory.
#[derive(Debug)]
#[non_exhaustive]
pub enum Log {
    /// Kept in memory; lost when the broker stops.
    Memory(MemoryLog),
    /// Segment files in a directory.
    Disk(DiskLog),
}

impl Log {
    /// An empty in-memory log.
    pub fn memory() -> Log {
        Log::Memory(MemoryLog::new())
    }

    /// Opens (and recovers) an on-disk log in `dir`.
    pub fn open(
        dir: impl Into<std::path::PathBuf>,
        segment_bytes: u64,
        index_interval_bytes: u32,
    ) -> Result<(Log, Recovery), LogError> {
        let (log, rec) = DiskLog::open(dir, segment_bytes, index_interval_bytes)?;
        Ok((Log::Disk(log), rec))
    }

    /// The first offset in the log.
    pub fn log_start_offset(&self) -> i64 {
        match self {
            Log::Memory(l) => l.start(),
            Log::Disk(l) => l.start(),
        }
    }

    /// The offset the next appended batch must start at or after.
    pub fn log_end_offset(&self) -> i64 {
        match self {
            Log::Memory(l) => l.end(),
            Log::Disk(l) => l.end(),
        }
    }

    /// Appends one batch whose offsets are already assigned. The batch's framing is
    /// checked (not its CRC: the caller checked it or rewrote fields it covers not).
    pub fn append(&mut self, batch: Bytes) -> Result<(), LogError> {
        let h = BatchHeader::parse(&batch).map_err(LogError::InvalidBatch)?;
        if h.total_len != batch.len() {
            return Err(LogError::InvalidBatch("length field does not match size"));
        }
        let end = self.log_end_offset();
        if h.base_offset < end {
            return Err(LogError::NonMonotonic {
                expected: end,
                got: h.base_offset,
            });
        }
        match self {
            Log::Memory(l) => {
                l.append(h, batch);
                Ok(())
            }
            Log::Disk(l) => l.append(h, batch),
        }
    }

    /// Whole batches starting with the one containing `from`, up to `max_bytes` in
    /// total but always at least one batch when any exists at or after `from`.
    pub fn read(&self, from: i64, max_bytes: usize) -> Result<Vec<Bytes>, LogError> {
        match self {
            Log::Memory(l) => Ok(l.read(from, max_bytes)),
            Log::Disk(l) => l.read(from, max_bytes),
        }
    }

    /// Removes every batch whose last offset is at or past `offset`. The log end
    /// offset becomes the base offset of the first removed batch (so it may end below
    /// `offset` when `offset` falls inside a batch). Below the log start, the log is
    /// emptied and restarts at `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> Result<(), LogError> {
        match self {
            Log::Memory(l) => {
                l.truncate_to(offset);
                Ok(())
            }
            Log::Disk(l) => l.truncate_to(offset),
        }
    }

    /// The first batch whose max timestamp is at or after `ts`.
    pub fn find_batch_by_timestamp(&self, ts: i64) -> Result<Option<Bytes>, LogError> {
        match self {
            Log::Memory(l) => Ok(l.find_by_timestamp(ts)),
            Log::Disk(l) => l.find_by_timestamp(ts),
        }
    }

    /// The first batch holding the log's largest timestamp.
    pub fn max_timestamp_batch(&self) -> Result<Option<Bytes>, LogError> {
        match self {
            Log::Memory(l) => Ok(l.max_timestamp_batch()),
            Log::Disk(l) => l.max_timestamp_batch(),
        }
    }

    /// Why the log is offline, if a write or fsync failed (see
    /// [`LogError::Offline`]); an in-memory log never is.
    pub fn offline_reason(&self) -> Option<&str> {
        match self {
            Log::Memory(_) => None,
            Log::Disk(l) => l.failure(),
        }
    }

    /// Makes appended data durable (fsync); a no-op in memory.
    pub fn flush(&mut self) -> Result<(), LogError> {
        match self {
            Log::Memory(l) => l.check(),
            Log::Disk(l) => l.flush(),
        }
    }

    /// Removes the log's data (its directory for an on-disk log).
    pub fn delete(self) -> Result<(), LogError> {
        match self {
            Log::Memory(_) => Ok(()),
            Log::Disk(l) => l.delete(),
        }
    }
}

#[cfg(test)]
mod fault_tests;
#[cfg(test)]
mod retention_tests;
#[cfg(test)]
mod tests;
