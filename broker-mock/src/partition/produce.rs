//! Producing to one partition: the checks of a batch (CRC and framing, the
//! producer's sequence), the append with offsets and leader epoch stamped in place,
//! and the `acks=all` wait for the high watermark.
//!
//! [`produce_batch`] is the whole sequence for one partition's batch of a Produce
//! request, and [`replication_result`] the end of its `acks=all` wait; the handler
//! only decodes the request, calls them per partition and builds the response.

use std::time::Duration;

use baton_protocol::record::{
    set_base_offset, set_log_append_time, set_partition_leader_epoch, TimestampType,
};
use baton_protocol::ErrorCode;
use bytes::{Bytes, BytesMut};
use tokio::sync::oneshot;

use super::handle::Partition;
use super::state::PartitionState;
use crate::clock::WallClock;
use crate::log::check::check_produced;
use crate::producer_state::{ProducerBatch, Verdict};
use crate::replication::ProduceOutcome;

/// A producer's records, borrowed (copied into the log) or owned (stored in place).
enum Produced<'a> {
    Shared(&'a Bytes),
    Owned(BytesMut),
}

impl Produced<'_> {
    fn as_slice(&self) -> &[u8] {
        match self {
            Produced::Shared(b) => b,
            Produced::Owned(b) => b,
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

impl PartitionState {
    /// Validates and appends a producer's records: every batch must be magic 2 with a
    /// valid CRC and consistent records, or nothing is appended. Offsets, leader
    /// epoch and (for LogAppendTime) timestamps are assigned here.
    ///
    /// The log keeps a copy of the batches; [`PartitionState::append_owned`] stores a
    /// uniquely owned buffer without copying.
    pub fn append_records(
        &mut self,
        records: &Bytes,
        timestamp_type: TimestampType,
        now_ms: i64,
    ) -> Result<AppendInfo, ErrorCode> {
        self.append_produced(Produced::Shared(records), timestamp_type, now_ms)
    }

    /// [`PartitionState::append_records`] for records the caller owns: each batch's
    /// base offset and leader epoch (both outside the CRC) and, for LogAppendTime,
    /// its timestamp are written into `records` in place, and the log stores slices
    /// of it, so the bytes are never copied. Whatever else `records`' allocation holds
    /// stays allocated as long as the batches do.
    pub fn append_owned(
        &mut self,
        records: BytesMut,
        timestamp_type: TimestampType,
        now_ms: i64,
    ) -> Result<AppendInfo, ErrorCode> {
        self.append_produced(Produced::Owned(records), timestamp_type, now_ms)
    }

    fn append_produced(
        &mut self,
        records: Produced<'_>,
        timestamp_type: TimestampType,
        now_ms: i64,
    ) -> Result<AppendInfo, ErrorCode> {
        if self.deleted {
            return Err(ErrorCode::UnknownTopicOrPartition);
        }
        let checked = check_produced(records.as_slice())?;
        let headers: Vec<ProducerBatch> = checked.iter().map(|c| c.producer).collect();
        let verdict = self.producers.check(&headers).inspect_err(|code| {
            if *code == ErrorCode::OutOfOrderSequenceNumber {
                if let Some(b) = headers.iter().find(|b| b.is_idempotent()) {
                    let known = self.producers.get(b.producer_id);
                    tracing::debug!(
                        producer_id = b.producer_id,
                        epoch = b.producer_epoch,
                        base_sequence = b.base_sequence,
                        known_epoch = known.map(|e| e.epoch()),
                        last_sequence = known.map(|e| e.last_seq()),
                        leader_epoch = self.leader_epoch,
                        log_end_offset = self.log_end_offset(),
                        "out-of-order sequence refused"
                    );
                }
            }
        })?;
        if let Verdict::Duplicate(d) = verdict {
            return Ok(AppendInfo {
                base_offset: d.base_offset,
                log_append_time_ms: d.log_append_time_ms,
                log_start_offset: self.log_start_offset(),
            });
        }
        let base_offset = self.log_end_offset();
        let log_append_time_ms = match timestamp_type {
            TimestampType::CreateTime => -1,
            TimestampType::LogAppendTime => now_ms,
        };
        let mut buf = match records {
            Produced::Owned(b) => b,
            Produced::Shared(b) => BytesMut::from(&b[..]),
        };
        let mut next = base_offset;
        for c in &checked {
            let batch = &mut buf[c.range.clone()];
            set_base_offset(batch, next);
            set_partition_leader_epoch(batch, self.leader_epoch);
            if timestamp_type == TimestampType::LogAppendTime {
                set_log_append_time(batch, now_ms);
            }
            next += c.producer.last_offset_delta as i64 + 1;
        }
        let stored = buf.freeze();
        let mut next = base_offset;
        for c in &checked {
            let batch_base = next;
            next += c.producer.last_offset_delta as i64 + 1;
            if let Err(e) = self.log.append(stored.slice(c.range.clone())) {
                tracing::error!(error = %e, "append failed");
                // What was appended before the failure stays.
                self.after_local_append();
                self.on_storage_failure(&e);
                return Err(ErrorCode::KafkaStorageError);
            }
            let _ = self.epoch_cache.assign(self.leader_epoch, batch_base);
            self.producers
                .record(&c.producer, batch_base, log_append_time_ms);
        }
        self.after_local_append();
        Ok(AppendInfo {
            base_offset,
            log_append_time_ms,
            log_start_offset: self.log_start_offset(),
        })
    }
}

/// One partition's records as taken out of a Produce request.
#[derive(Debug)]
pub(crate) enum ProduceRecords {
    /// A uniquely owned slice of the request frame: patched and stored in place.
    Owned(BytesMut),
    /// Shares memory with something else: the log copies it.
    Shared(Bytes),
}

/// What a Produce request asks of every partition it names.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProduceSettings<'a> {
    /// The request's `acks`: 0, 1 or -1 (all in-sync replicas).
    pub acks: i16,
    /// When a cluster leader's `acks=all` wait times out, on the replica clock.
    pub deadline_ms: u64,
    /// The node's wall clock, read under the partition's lock for each append
    /// (the timestamp of a `LogAppendTime` topic's batches).
    pub clock: &'a WallClock,
}

impl ProduceSettings<'_> {
    /// Whether `acks` is 0, 1 or -1; anything else is INVALID_REQUIRED_ACKS.
    pub fn acks_valid(&self) -> bool {
        (-1..=1).contains(&self.acks)
    }
}

/// One partition's batch, appended (or found already appended by a retry).
#[derive(Debug)]
pub(crate) struct ProducedBatch {
    /// Where the batch went.
    pub info: AppendInfo,
    /// With `acks=all` on a cluster leader: resolves when the high watermark passed
    /// the batch, or the wait failed (see [`replication_result`]).
    pub replicated: Option<oneshot::Receiver<ProduceOutcome>>,
}

/// Produces one partition's batch, in order: `acks` valid (INVALID_REQUIRED_ACKS),
/// the partition known (UNKNOWN_TOPIC_OR_PARTITION), records present
/// (CORRUPT_MESSAGE), this replica's log online (KAFKA_STORAGE_ERROR), this node
/// the leader (NOT_LEADER_OR_FOLLOWER), a cluster
/// leader's own checks (e.g. `min.insync.replicas` for `acks=all`), then the
/// append with its batch checks and idempotence check (see
/// [`PartitionState::append_records`]) and, with `acks=all`, the registration of
/// the wait for the high watermark. The partition's lock is held from the leader
/// check to the registration, never across an await.
pub(crate) fn produce_batch(
    partition: Option<&Partition>,
    records: Option<ProduceRecords>,
    timestamp_type: TimestampType,
    settings: ProduceSettings<'_>,
) -> Result<ProducedBatch, ErrorCode> {
    if !settings.acks_valid() {
        return Err(ErrorCode::InvalidRequiredAcks);
    }
    let Some(partition) = partition else {
        return Err(ErrorCode::UnknownTopicOrPartition);
    };
    let Some(records) = records else {
        return Err(ErrorCode::CorruptMessage);
    };
    let mut st = partition.lock();
    if st.log_offline() {
        return Err(ErrorCode::KafkaStorageError);
    }
    if !st.is_leader() {
        return Err(ErrorCode::NotLeaderOrFollower);
    }
    if let Some(l) = st.leader_state() {
        if let Err(r) = l.check_produce(settings.acks == -1) {
            return Err(r.error_code());
        }
    }
    let now_ms = settings.clock.now_ms();
    let result = match records {
        ProduceRecords::Owned(b) => st.append_owned(b, timestamp_type, now_ms),
        ProduceRecords::Shared(b) => st.append_records(&b, timestamp_type, now_ms),
    };
    let info = match result {
        Ok(info) => info,
        Err(code) => {
            tracing::debug!(topic = %partition.topic(), partition = partition.index(), ?code, "produce rejected");
            return Err(code);
        }
    };
    let replicated = if settings.acks == -1 {
        let leo = st.log_end_offset();
        st.await_replication(leo, settings.deadline_ms)
    } else {
        None
    };
    Ok(ProducedBatch { info, replicated })
}

/// The outcome of an `acks=all` wait as an error code: what the leader decided,
/// NOT_LEADER_OR_FOLLOWER when the wait was dropped (the leadership ended), or
/// REQUEST_TIMED_OUT when no answer came within the request's `timeout_ms` plus 5
/// seconds. The leader times waits out itself; that bound only guards against a
/// leader that stopped ticking.
///
/// # Cancel safety
///
/// Dropping the future drops the receiver; the leader's later answer is discarded.
pub(crate) async fn replication_result(
    replicated: oneshot::Receiver<ProduceOutcome>,
    timeout_ms: i32,
) -> ErrorCode {
    let bound = Duration::from_millis(timeout_ms.max(0) as u64 + 5_000);
    let outcome = match tokio::time::timeout(bound, replicated).await {
        Ok(Ok(o)) => o,
        Ok(Err(_)) => ProduceOutcome::NotLeader,
        Err(_) => ProduceOutcome::TimedOut,
    };
    outcome.error_code()
}
