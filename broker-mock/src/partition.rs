//! A partition: its log plus the replication state around it.
//!
//! On a single node this broker leads every partition and the high watermark follows
//! the log end offset. The fields a replicated partition needs (leader, epoch,
//! replicas, ISR, high watermark) are here already so that replication can drive them.

use std::sync::{Mutex, MutexGuard};

use baton_protocol::record::{
    batches, set_base_offset, set_log_append_time, set_partition_leader_epoch, Compression,
    RecordBatch, TimestampType,
};
use baton_protocol::ErrorCode;
use bytes::{Bytes, BytesMut};

use crate::error::LogError;
use crate::log::Log;

/// Kafka's `isolation_level` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Read up to the high watermark.
    ReadUncommitted,
    /// Read up to the last stable offset.
    ReadCommitted,
}

impl Isolation {
    /// From the wire value (1 = read committed, anything else read uncommitted).
    pub fn from_wire(v: i8) -> Self {
        if v == 1 {
            Isolation::ReadCommitted
        } else {
            Isolation::ReadUncommitted
        }
    }
}

/// The outcome of a successful append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset given to the first record.
    pub base_offset: i64,
    /// The broker time stamped on the batches, -1 for CreateTime.
    pub log_append_time_ms: i64,
    /// The log start offset after the append.
    pub log_start_offset: i64,
}

/// The mutable state of a partition, behind [`Partition::lock`].
///
/// Invariants: `log_start_offset <= high_watermark <= log_end_offset`; the leader
/// epoch never decreases.
#[derive(Debug)]
pub struct PartitionState {
    log: Log,
    high_watermark: i64,
    /// Current leader's node id.
    pub leader: i32,
    leader_epoch: i32,
    /// Assigned replicas, preferred leader first.
    pub replicas: Vec<i32>,
    /// In-sync replicas.
    pub isr: Vec<i32>,
    /// Set when the topic is deleted; every later operation fails.
    deleted: bool,
}

impl PartitionState {
    /// The log.
    pub fn log(&self) -> &Log {
        &self.log
    }

    /// The high watermark: offsets below it are committed.
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    /// The last stable offset: the high watermark while there are no transactions.
    pub fn last_stable_offset(&self) -> i64 {
        self.high_watermark
    }

    /// The current leader epoch.
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }

    /// The log start offset.
    pub fn log_start_offset(&self) -> i64 {
        self.log.log_start_offset()
    }

    /// The log end offset.
    pub fn log_end_offset(&self) -> i64 {
        self.log.log_end_offset()
    }

    /// Whether the partition's topic was deleted.
    pub fn is_deleted(&self) -> bool {
        self.deleted
    }

    /// The readable bound for `isolation`.
    pub fn max_readable(&self, isolation: Isolation) -> i64 {
        match isolation {
            Isolation::ReadUncommitted => self.high_watermark,
            Isolation::ReadCommitted => self.last_stable_offset(),
        }
    }

    /// Moves the high watermark; asserts `log_start <= hw <= log end`.
    pub fn set_high_watermark(&mut self, hw: i64) {
        assert!(
            hw <= self.log_end_offset(),
            "high watermark {hw} past log end {}",
            self.log_end_offset()
        );
        self.high_watermark = hw.max(self.log_start_offset());
    }

    /// Sets a new leader epoch; asserts it does not go backwards.
    pub fn set_leader_epoch(&mut self, epoch: i32) {
        assert!(epoch >= self.leader_epoch, "leader epoch went backwards");
        self.leader_epoch = epoch;
    }

    /// Checks a client's `current_leader_epoch` (ignored when negative).
    pub fn check_epoch(&self, current_leader_epoch: i32) -> Result<(), ErrorCode> {
        if current_leader_epoch < 0 || current_leader_epoch == self.leader_epoch {
            Ok(())
        } else if current_leader_epoch < self.leader_epoch {
            Err(ErrorCode::FencedLeaderEpoch)
        } else {
            Err(ErrorCode::UnknownLeaderEpoch)
        }
    }

    /// Validates and appends a producer's records: every batch must be magic 2 with a
    /// valid CRC and consistent records, or nothing is appended. Offsets, leader
    /// epoch and (for LogAppendTime) timestamps are assigned here.
    pub fn append_records(
        &mut self,
        records: &Bytes,
        timestamp_type: TimestampType,
        now_ms: i64,
    ) -> Result<AppendInfo, ErrorCode> {
        if self.deleted {
            return Err(ErrorCode::UnknownTopicOrPartition);
        }
        let mut valid = Vec::new();
        let mut iter = batches(records.clone());
        for batch in iter.by_ref() {
            let batch = batch.map_err(|_| ErrorCode::CorruptMessage)?;
            batch.verify_crc().map_err(|_| ErrorCode::CorruptMessage)?;
            check_records(&batch)?;
            valid.push(batch);
        }
        if iter.position() != records.len() || valid.is_empty() {
            return Err(ErrorCode::CorruptMessage);
        }
        let base_offset = self.log_end_offset();
        let log_append_time_ms = match timestamp_type {
            TimestampType::CreateTime => -1,
            TimestampType::LogAppendTime => now_ms,
        };
        let mut next = base_offset;
        for batch in valid {
            let mut buf = BytesMut::from(&batch.as_bytes()[..]);
            set_base_offset(&mut buf, next);
            set_partition_leader_epoch(&mut buf, self.leader_epoch);
            if timestamp_type == TimestampType::LogAppendTime {
                set_log_append_time(&mut buf, now_ms);
            }
            next += batch.last_offset_delta() as i64 + 1;
            if let Err(e) = self.log.append(buf.freeze()) {
                tracing::error!(error = %e, "append failed");
                // What was appended before the failure stays; the HW covers it.
                let leo = self.log_end_offset();
                self.set_high_watermark(leo);
                return Err(ErrorCode::KafkaStorageError);
            }
        }
        let leo = self.log_end_offset();
        self.set_high_watermark(leo);
        Ok(AppendInfo {
            base_offset,
            log_append_time_ms,
            log_start_offset: self.log_start_offset(),
        })
    }

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
        let mut out = self.log.read(from, max_bytes).map_err(ReadError::Log)?;
        let keep = out
            .iter()
            .position(|b| last_offset(b) >= bound)
            .unwrap_or(out.len());
        out.truncate(keep);
        for b in &out {
            verify_stored(b)?;
        }
        Ok(out)
    }

    /// Removes batches at and past `offset` (see [`Log::truncate_to`]), pulling the
    /// high watermark down with the log end.
    pub fn truncate_to(&mut self, offset: i64) -> Result<(), LogError> {
        self.log.truncate_to(offset)?;
        let leo = self.log_end_offset();
        self.high_watermark = self.high_watermark.min(leo).max(self.log_start_offset());
        Ok(())
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
        find_record(&batch, bound, |t| t >= ts)
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
        find_record(&batch, bound, |t| t == max)
    }

    /// Flushes the log.
    pub fn flush(&mut self) -> Result<(), LogError> {
        self.log.flush()
    }
}

fn last_offset(batch: &Bytes) -> i64 {
    crate::log::header::BatchHeader::parse(batch).map_or(i64::MAX, |h| h.last_offset)
}

/// Finds the first record below `bound` whose timestamp matches. For LogAppendTime
/// and compressed batches, the batch's own max timestamp and base offset stand in.
fn find_record(
    batch: &RecordBatch,
    bound: i64,
    matches: impl Fn(i64) -> bool,
) -> Result<Option<(i64, i64)>, ReadError> {
    if batch.base_offset() >= bound {
        return Ok(None);
    }
    let log_append = batch.timestamp_type() == TimestampType::LogAppendTime;
    if log_append || batch.compression() != Compression::None {
        return Ok(Some((batch.base_offset(), batch.max_timestamp())));
    }
    let records = batch.records().map_err(|_| ReadError::Corrupt)?;
    for r in records {
        let r = r.map_err(|_| ReadError::Corrupt)?;
        if r.offset >= bound {
            break;
        }
        if matches(r.timestamp) {
            return Ok(Some((r.offset, r.timestamp)));
        }
    }
    Ok(None)
}

/// Producer-side checks of one batch beyond its CRC.
fn check_records(batch: &RecordBatch) -> Result<(), ErrorCode> {
    if batch.is_control() {
        return Err(ErrorCode::InvalidRecord);
    }
    if batch.record_count() == 0
        || batch.record_count() as i64 != batch.last_offset_delta() as i64 + 1
    {
        return Err(ErrorCode::InvalidRecord);
    }
    if batch.compression() == Compression::None {
        let records = batch.records().map_err(|_| ErrorCode::CorruptMessage)?;
        for (i, r) in records.enumerate() {
            let r = r.map_err(|_| ErrorCode::CorruptMessage)?;
            if r.offset != batch.base_offset() + i as i64 {
                return Err(ErrorCode::InvalidRecord);
            }
        }
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
    /// The log could not be read.
    #[error(transparent)]
    Log(LogError),
}

impl ReadError {
    /// The error code to report: storage problems are `KAFKA_STORAGE_ERROR`.
    pub fn code(&self) -> ErrorCode {
        match self {
            ReadError::Code(c) => *c,
            ReadError::Corrupt | ReadError::Log(_) => ErrorCode::KafkaStorageError,
        }
    }
}

/// One partition of a topic.
#[derive(Debug)]
pub struct Partition {
    topic: String,
    index: i32,
    state: Mutex<PartitionState>,
}

impl Partition {
    /// A partition led by `node_id` at epoch 0 over `log`, with the high watermark at
    /// the log end (single node: everything stored is committed).
    pub fn new(topic: impl Into<String>, index: i32, node_id: i32, log: Log) -> Self {
        let hw = log.log_end_offset();
        Partition {
            topic: topic.into(),
            index,
            state: Mutex::new(PartitionState {
                log,
                high_watermark: hw,
                leader: node_id,
                leader_epoch: 0,
                replicas: vec![node_id],
                isr: vec![node_id],
                deleted: false,
            }),
        }
    }

    /// The topic name.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The partition index.
    pub fn index(&self) -> i32 {
        self.index
    }

    /// Locks the partition's state. Holders do only short, bounded work (file reads
    /// and writes included), never await.
    pub fn lock(&self) -> MutexGuard<'_, PartitionState> {
        // A panic while holding the lock is a broken invariant; keep serving the data.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks the partition deleted and removes its data.
    pub(crate) fn delete(&self) -> Result<(), LogError> {
        let mut st = self.lock();
        st.deleted = true;
        let log = std::mem::replace(&mut st.log, Log::memory());
        log.delete()
    }
}
