//! Verified reads: every stored batch is framing- and CRC-checked before it is
//! served to a consumer's fetch, a follower's replication or a timestamp lookup.

use baton_protocol::record::{Compression, RecordBatch, TimestampType};
use baton_protocol::ErrorCode;
use bytes::Bytes;

use super::state::{Isolation, PartitionState};
use crate::error::LogError;
use crate::log::Log;

impl PartitionState {
    /// Reads whole batches from `from` below the `isolation` bound, at most
    /// `max_bytes` (at least one batch, KIP-74), each CRC-checked before it is handed
    /// out. `Err` on a corrupt or unreadable log.
    pub fn read(
        &self,
        from: i64,
        max_bytes: usize,
        isolation: Isolation,
    ) -> Result<Vec<Bytes>, ReadError> {
        if self.deleted {
            return Err(ReadError::Code(ErrorCode::UnknownTopicOrPartition));
        }
        let bound = self.max_readable(isolation);
        if from < self.log_start_offset() || from > self.log_end_offset() {
            return Err(ReadError::Code(ErrorCode::OffsetOutOfRange));
        }
        if from >= bound {
            return Ok(Vec::new());
        }
        let mut out = read_verified(&self.log, from, max_bytes)?;
        let keep = out
            .iter()
            .position(|b| last_offset(b) >= bound)
            .unwrap_or(out.len());
        out.truncate(keep);
        Ok(out)
    }

    /// Reads whole batches from `from` up to the log end for a follower, each
    /// CRC-checked.
    pub fn read_for_replica(&self, from: i64, max_bytes: usize) -> Result<Vec<Bytes>, ReadError> {
        if self.deleted {
            return Err(ReadError::Code(ErrorCode::UnknownTopicOrPartition));
        }
        if from < self.log_start_offset() || from > self.log_end_offset() {
            return Err(ReadError::Code(ErrorCode::OffsetOutOfRange));
        }
        if from == self.log_end_offset() {
            return Ok(Vec::new());
        }
        let out = read_verified(&self.log, from, max_bytes)?;
        Ok(out)
    }

    /// The first committed record with timestamp at or after `ts`: `(offset, timestamp)`.
    pub fn offset_for_timestamp(
        &self,
        ts: i64,
        isolation: Isolation,
    ) -> Result<Option<(i64, i64)>, ReadError> {
        let Some(batch) = self
            .log
            .find_batch_by_timestamp(ts)
            .map_err(ReadError::Log)?
        else {
            return Ok(None);
        };
        let batch = verify_stored(&batch)?;
        let bound = self.max_readable(isolation);
        let start = self.log_start_offset();
        if batch.base_offset() >= start {
            return find_record(&batch, start, bound, |t| t >= ts);
        }
        // The batch found begins below the log start (DeleteRecords moved the start
        // inside the first segment): search from the start, as Kafka does.
        let mut from = start;
        while from < bound {
            let batches = read_verified(&self.log, from, 1 << 20)?;
            if batches.is_empty() {
                break;
            }
            for b in batches {
                let b = verify_stored(&b)?;
                if b.max_timestamp() >= ts {
                    if let Some(found) = find_record(&b, start, bound, |t| t >= ts)? {
                        return Ok(Some(found));
                    }
                }
                from = b.last_offset() + 1;
            }
        }
        Ok(None)
    }

    /// The committed record with the largest timestamp: `(offset, timestamp)`.
    pub fn max_timestamp_offset(
        &self,
        isolation: Isolation,
    ) -> Result<Option<(i64, i64)>, ReadError> {
        let Some(batch) = self.log.max_timestamp_batch().map_err(ReadError::Log)? else {
            return Ok(None);
        };
        let batch = verify_stored(&batch)?;
        let max = batch.max_timestamp();
        let bound = self.max_readable(isolation);
        find_record(&batch, self.log_start_offset(), bound, |t| t == max)
    }
}

fn last_offset(batch: &Bytes) -> i64 {
    crate::log::header::BatchHeader::parse(batch).map_or(i64::MAX, |h| h.last_offset)
}

/// Finds the first record from `start` (the log start: the first stored batch may
/// begin below it, and Kafka searches from it) and below `bound` whose timestamp
/// matches. For LogAppendTime and compressed batches, the batch's own max timestamp
/// and base offset (at least `start`) stand in.
fn find_record(
    batch: &RecordBatch,
    start: i64,
    bound: i64,
    matches: impl Fn(i64) -> bool,
) -> Result<Option<(i64, i64)>, ReadError> {
    if batch.base_offset() >= bound {
        return Ok(None);
    }
    let log_append = batch.timestamp_type() == TimestampType::LogAppendTime;
    if log_append || batch.compression() != Compression::None {
        return Ok(Some((
            batch.base_offset().max(start),
            batch.max_timestamp(),
        )));
    }
    let records = batch.records().map_err(|_| ReadError::Corrupt)?;
    for r in records {
        let r = r.map_err(|_| ReadError::Corrupt)?;
        if r.offset >= bound {
            break;
        }
        if r.offset >= start && matches(r.timestamp) {
            return Ok(Some((r.offset, r.timestamp)));
        }
    }
    Ok(None)
}

/// Reads whole batches from `from` (see [`Log::read`]) and checks each one before it
/// leaves the broker (see [`verify_served`]). The batches before a damaged one are
/// still returned; `Err` ([`ReadError::CorruptBatch`]) only when the first batch read
/// is damaged, so a reader gets everything intact up to the damage and then an error.
pub fn read_verified(log: &Log, from: i64, max_bytes: usize) -> Result<Vec<Bytes>, ReadError> {
    let mut out = match log.read(from, max_bytes) {
        Ok(out) => out,
        Err(LogError::Corrupt { reason, .. }) => {
            // The framing of a batch in the range is damaged: go batch by batch up to it.
            let mut out = Vec::new();
            let (mut at, mut total) = (from, 0usize);
            while let Ok(one) = log.read(at, 1) {
                let Some(b) = one.into_iter().next() else {
                    break;
                };
                if verify_served(at, std::slice::from_ref(&b), log.may_have_gaps()).is_err()
                    || (!out.is_empty() && total + b.len() > max_bytes)
                {
                    break;
                }
                total += b.len();
                at = last_offset(&b) + 1;
                out.push(b);
                if total >= max_bytes {
                    break;
                }
            }
            if out.is_empty() {
                return Err(ReadError::CorruptBatch {
                    offset: at,
                    reason: reason.to_owned(),
                });
            }
            return Ok(out);
        }
        Err(e) => return Err(ReadError::Log(e)),
    };
    match verify_served(from, &out, log.may_have_gaps()) {
        Ok(()) => Ok(out),
        Err(ReadError::CorruptBatch { offset, reason }) => {
            let keep = out
                .iter()
                .position(|b| last_offset(b) >= offset)
                .unwrap_or(out.len());
            if keep == 0 {
                return Err(ReadError::CorruptBatch { offset, reason });
            }
            out.truncate(keep);
            Ok(out)
        }
        Err(e) => Err(e),
    }
}

/// Checks batches read from `from` before they leave the broker: each one's framing
/// and CRC, that the first holds `from`, and that offsets run on without gaps or
/// going backwards (a wrong index entry or a damaged length shows up as one of those).
///
/// With `gaps` (a log that may have gaps between batches, compacted: see
/// [`Log::may_have_gaps`]) the first batch may start past `from` (which fell in a
/// gap) and later ones past the previous one's end; offsets still never go
/// backwards.
pub fn verify_served(from: i64, out: &[Bytes], gaps: bool) -> Result<(), ReadError> {
    let mut expected = from;
    for (i, b) in out.iter().enumerate() {
        let bad = |reason: &str| ReadError::CorruptBatch {
            offset: expected,
            reason: reason.to_owned(),
        };
        let h = crate::log::header::validate(b).map_err(bad)?;
        if i == 0 {
            if (h.base_offset > from && !gaps) || h.last_offset < from {
                return Err(bad("first batch read does not hold the offset asked for"));
            }
        } else if h.base_offset < expected || (h.base_offset != expected && !gaps) {
            return Err(bad("batch offsets are not contiguous"));
        }
        RecordBatch::parse(b.clone()).map_err(|_| bad("batch does not parse"))?;
        expected = h.last_offset + 1;
    }
    Ok(())
}

/// Checks a stored batch before it leaves the broker: framing and CRC.
fn verify_stored(batch: &Bytes) -> Result<RecordBatch, ReadError> {
    let parsed = RecordBatch::parse(batch.clone()).map_err(|_| ReadError::Corrupt)?;
    parsed.verify_crc().map_err(|_| ReadError::Corrupt)?;
    Ok(parsed)
}

/// Why a read failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// A Kafka error for the client (offset out of range, deleted topic).
    #[error("{0:?}")]
    Code(ErrorCode),
    /// A stored batch failed its CRC or framing check.
    #[error("stored batch failed its CRC check")]
    Corrupt,
    /// A stored batch at `offset` failed a CRC or framing check while being read.
    #[error("stored batch at offset {offset} is corrupt: {reason}")]
    CorruptBatch {
        /// The first offset known bad.
        offset: i64,
        /// What check failed.
        reason: String,
    },
    /// The log could not be read.
    #[error(transparent)]
    Log(LogError),
}

impl ReadError {
    /// The error code to report: storage problems are `KAFKA_STORAGE_ERROR`.
    pub fn code(&self) -> ErrorCode {
        match self {
            ReadError::Code(c) => *c,
            ReadError::Corrupt | ReadError::CorruptBatch { .. } | ReadError::Log(_) => {
                ErrorCode::KafkaStorageError
            }
        }
    }
}
