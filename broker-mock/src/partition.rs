//! A partition: its log plus the replication state around it.
//!
//! A partition plays one [`Role`]. A single-node broker is `Standalone`: it leads and
//! its high watermark follows the log end offset. In a cluster a partition is led
//! through a [`LeaderState`] machine (HW = min LEO over the ISR, `acks=all` waits), or
//! followed (the replica fetcher appends the leader's batches), or not hosted. The
//! leader epoch cache (which epoch wrote which offsets) is kept beside the log and
//! rebuilt from the stored batches when a replica opens, so it needs no file of its own.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use baton_protocol::record::{
    set_base_offset, set_log_append_time, set_partition_leader_epoch, Compression, RecordBatch,
    TimestampType,
};
use baton_protocol::ErrorCode;
use bytes::{Bytes, BytesMut};
use tokio::sync::{mpsc, oneshot};

use crate::corruption::{CorruptionKind, CorruptionLog, Where};
use crate::error::LogError;
use crate::log::check::check_produced;
use crate::log::Log;
use crate::producer_state::{self, ProducerBatch, ProducerStateTable, Verdict};
use crate::replication::{LeaderAction, LeaderEpochCache, LeaderState, ProduceOutcome};

/// What this node does for a partition.
#[derive(Debug)]
#[non_exhaustive]
pub enum Role {
    /// The single-node broker: leads, and the HW follows the log end offset.
    Standalone,
    /// Leads in a cluster, through the leader state machine.
    Leader(Box<LeaderState>),
    /// Follows `leader` (`-1` while the partition has no leader).
    Follower {
        /// The leader's node id, or -1.
        leader: i32,
    },
    /// Not a replica of this partition on this node.
    NotReplica,
}

/// Something a partition leader must tell the controller; sent by the node's
/// controller channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LeaderReport {
    /// Propose a new ISR (AlterPartition).
    AlterIsr {
        topic: String,
        partition: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        isr: Vec<i32>,
    },
    /// A planned move: writes stopped with the log ending at `log_end_offset`.
    DrainStarted {
        topic: String,
        partition: i32,
        log_end_offset: i64,
    },
    /// A planned move: the successor reached the frozen log end.
    SuccessorCaughtUp {
        topic: String,
        partition: i32,
        successor: i32,
        log_end_offset: i64,
    },
    /// This node's replica holds a corrupt batch at `offset` (sent by any role).
    CorruptReplica {
        topic: String,
        partition: i32,
        offset: i64,
    },
}

/// A replica's known corruption: set when a check fails, cleared when the repair
/// caught up with the leader. While set the replica never leads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CorruptMark {
    /// The first offset known bad.
    pub offset: i64,
    /// When it was detected.
    pub detected: std::time::Instant,
    /// Found by start-up recovery and not yet reported (no node to report to then).
    pub from_recovery: bool,
    /// When the repair cut the log (the replica is re-fetching since).
    pub repair_started: Option<std::time::Instant>,
}

/// Where a cluster replica reports corruption.
#[derive(Debug, Clone)]
struct CorruptionLink {
    node: i32,
    events: std::sync::Arc<CorruptionLog>,
    reports: mpsc::UnboundedSender<LeaderReport>,
}

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
    /// What this node does for the partition.
    role: Role,
    /// Which leader epoch wrote which offsets. Invariant: every entry starts below the
    /// log end offset.
    epoch_cache: LeaderEpochCache,
    /// `acks=all` produces waiting for the HW, by wait id.
    waiters: BTreeMap<u64, oneshot::Sender<ProduceOutcome>>,
    /// Next wait id.
    next_wait_id: u64,
    /// Where a leader's reports to the controller go (cluster mode).
    reports: Option<mpsc::UnboundedSender<LeaderReport>>,
    /// Topic name (shared by the topic's partitions) and partition index, for reports.
    ident: Option<(Arc<str>, i32)>,
    /// Idempotent producers' last batches, derived from the log: rebuilt when the
    /// partition opens and after truncation, updated after every append.
    producers: ProducerStateTable,
    /// Known corruption of this replica (boxed: rare, and every partition pays for
    /// the field's size).
    corrupt: Option<Box<CorruptMark>>,
    /// Where corruption is reported (cluster replicas; boxed as `corrupt` is).
    corruption_link: Option<Box<CorruptionLink>>,
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
        if let Verdict::Duplicate(d) = self.producers.check(&headers)? {
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

    /// Removes batches at and past `offset` (see [`Log::truncate_to`]), pulling the
    /// high watermark and the epoch cache down with the log end.
    pub fn truncate_to(&mut self, offset: i64) -> Result<(), LogError> {
        self.log.truncate_to(offset)?;
        let leo = self.log_end_offset();
        self.high_watermark = self.high_watermark.min(leo).max(self.log_start_offset());
        self.epoch_cache.truncate_from_end(leo);
        self.producers =
            producer_state::rebuild_or_empty(&self.log, self.producers.max_producers());
        Ok(())
    }

    /// The idempotent producers' state.
    pub fn producers(&self) -> &ProducerStateTable {
        &self.producers
    }

    /// Rebuilds the producer state from the log (see [`producer_state::rebuild`]).
    /// Followers keep it current as they append, so becoming leader needs this only
    /// if the log changed behind the partition's back.
    pub fn rebuild_producer_state(&mut self) {
        self.producers =
            producer_state::rebuild_or_empty(&self.log, self.producers.max_producers());
    }

    /// What this node does for the partition.
    pub fn role(&self) -> &Role {
        &self.role
    }

    /// The leader state machine, when leading in a cluster.
    pub fn leader_state(&self) -> Option<&LeaderState> {
        match &self.role {
            Role::Leader(l) => Some(l),
            _ => None,
        }
    }

    /// Whether this node serves clients' produce and fetch for the partition.
    pub fn is_leader(&self) -> bool {
        matches!(self.role, Role::Standalone | Role::Leader(_))
    }

    /// The leader epoch cache.
    pub fn epoch_cache(&self) -> &LeaderEpochCache {
        &self.epoch_cache
    }

    /// Replaces the epoch cache (a follower's, after truncation or appends).
    pub(crate) fn set_epoch_cache(&mut self, cache: LeaderEpochCache) {
        self.epoch_cache = cache;
    }

    /// The HW moves with the log end on a standalone node; a cluster leader tells its
    /// state machine and applies what follows.
    fn after_local_append(&mut self) {
        let leo = self.log_end_offset();
        match &mut self.role {
            Role::Leader(l) => {
                if let Err(e) = l.on_local_append(leo) {
                    tracing::error!(error = %e, "leader state refused an append");
                }
                self.drive_leader();
            }
            _ => self.set_high_watermark(leo),
        }
    }

    /// Applies the leader machine's pending actions: HW moves, completed waits and
    /// reports for the controller. Returns whether the HW moved.
    pub(crate) fn drive_leader(&mut self) -> bool {
        let actions = match &mut self.role {
            Role::Leader(l) => l.take_actions(),
            _ => return false,
        };
        self.apply_leader_actions(actions)
    }

    fn apply_leader_actions(&mut self, actions: Vec<LeaderAction>) -> bool {
        let mut moved = false;
        for a in actions {
            match a {
                LeaderAction::HighWatermarkAdvanced { to, .. } => {
                    let to = to.min(self.log_end_offset());
                    if to > self.high_watermark {
                        self.set_high_watermark(to);
                        moved = true;
                    }
                }
                LeaderAction::ProduceCompleted { wait_id, outcome } => {
                    if let Some(tx) = self.waiters.remove(&wait_id) {
                        let _ = tx.send(outcome);
                    }
                }
                LeaderAction::ProposeIsr {
                    isr,
                    leader_epoch,
                    partition_epoch,
                    ..
                } => self.report(|topic, partition| LeaderReport::AlterIsr {
                    topic,
                    partition,
                    leader_epoch,
                    partition_epoch,
                    isr,
                }),
                LeaderAction::SuccessorCaughtUp {
                    successor,
                    log_end_offset,
                } => self.report(|topic, partition| LeaderReport::SuccessorCaughtUp {
                    topic,
                    partition,
                    successor,
                    log_end_offset,
                }),
            }
        }
        moved
    }

    fn report(&self, make: impl FnOnce(String, i32) -> LeaderReport) {
        if let (Some(tx), Some((topic, partition))) = (&self.reports, &self.ident) {
            let _ = tx.send(make(topic.to_string(), *partition));
        }
    }

    /// Tells the controller a planned move stopped writes at the current log end.
    pub(crate) fn report_drain_started(&self) {
        let leo = self.log_end_offset();
        self.report(|topic, partition| LeaderReport::DrainStarted {
            topic,
            partition,
            log_end_offset: leo,
        });
    }

    /// Takes the leadership under `leader_epoch`: assignment from the controller, the
    /// local log end starts the epoch. Any previous role ends first.
    pub(crate) fn become_leader(
        &mut self,
        init: crate::replication::LeaderInit,
        config: crate::replication::LeaderConfig,
        reports: mpsc::UnboundedSender<LeaderReport>,
    ) -> Result<(), crate::replication::LeaderError> {
        let epoch = init.leader_epoch;
        let leader = LeaderState::new(init, config)?;
        self.end_role();
        if epoch > self.leader_epoch {
            self.leader_epoch = epoch;
        }
        self.leader = leader.local_id();
        self.reports = Some(reports);
        self.role = Role::Leader(Box::new(leader));
        self.drive_leader();
        Ok(())
    }

    /// Follows `leader` (or waits for one when `-1`) at `leader_epoch`.
    pub(crate) fn become_follower(&mut self, leader: i32, leader_epoch: i32) {
        self.end_role();
        if leader_epoch > self.leader_epoch {
            self.leader_epoch = leader_epoch;
        }
        self.leader = leader;
        self.role = Role::Follower { leader };
    }

    /// Stops hosting the partition as a replica.
    pub(crate) fn become_not_replica(&mut self, leader: i32, leader_epoch: i32) {
        self.end_role();
        if leader_epoch > self.leader_epoch {
            self.leader_epoch = leader_epoch;
        }
        self.leader = leader;
        self.role = Role::NotReplica;
    }

    /// Ends a leadership: waiting produces fail with NOT_LEADER_OR_FOLLOWER.
    fn end_role(&mut self) {
        if let Role::Leader(l) = std::mem::replace(&mut self.role, Role::NotReplica) {
            let actions = l.resign();
            self.apply_leader_actions(actions);
        }
        self.reports = None;
        for (_, tx) in std::mem::take(&mut self.waiters) {
            let _ = tx.send(ProduceOutcome::NotLeader);
        }
    }

    /// Mutable access to the leader machine; call [`drive_leader`](Self::drive_leader)
    /// after using it.
    pub(crate) fn leader_state_mut(&mut self) -> Option<&mut LeaderState> {
        match &mut self.role {
            Role::Leader(l) => Some(l),
            _ => None,
        }
    }

    /// Registers an `acks=all` produce that needs the HW at `required_offset`.
    pub(crate) fn await_replication(
        &mut self,
        required_offset: i64,
        deadline_ms: u64,
    ) -> Option<oneshot::Receiver<ProduceOutcome>> {
        let Role::Leader(l) = &mut self.role else {
            return None;
        };
        let id = self.next_wait_id;
        self.next_wait_id += 1;
        let (tx, rx) = oneshot::channel();
        self.waiters.insert(id, tx);
        l.await_replication(id, required_offset, deadline_ms);
        self.drive_leader();
        Some(rx)
    }

    /// Appends a batch fetched from the leader as it is (offsets and epoch already
    /// assigned). The caller checked its CRC and contiguity.
    pub(crate) fn append_replica_batch(&mut self, batch: Bytes) -> Result<(), LogError> {
        let parsed = RecordBatch::parse(batch.clone()).ok();
        self.log.append(batch)?;
        if let Some(b) = parsed {
            self.producers.record_stored(&b);
        }
        Ok(())
    }

    /// Sets a follower's HW (bounded by the log end).
    pub(crate) fn set_follower_high_watermark(&mut self, hw: i64) {
        let hw = hw.min(self.log_end_offset()).max(self.log_start_offset());
        self.high_watermark = hw;
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

    /// The first offset of this replica known to be corrupt, while it is not repaired.
    pub fn corrupt_offset(&self) -> Option<i64> {
        self.corrupt.as_ref().map(|m| m.offset)
    }

    pub(crate) fn corrupt_mark(&self) -> Option<CorruptMark> {
        self.corrupt.as_deref().copied()
    }

    /// Start-up recovery cut valid data at `offset` (not a torn tail): the replica must
    /// not lead and must re-fetch from `offset`.
    pub(crate) fn mark_recovered_corruption(&mut self, offset: i64) {
        self.corrupt = Some(Box::new(CorruptMark {
            offset,
            detected: std::time::Instant::now(),
            from_recovery: true,
            repair_started: None,
        }));
    }

    /// Connects the replica to its node's corruption reporting; reports corruption
    /// found by recovery before the node existed.
    pub(crate) fn attach_corruption_link(
        &mut self,
        node: i32,
        events: std::sync::Arc<CorruptionLog>,
        reports: mpsc::UnboundedSender<LeaderReport>,
    ) {
        if self.corruption_link.is_some() {
            return;
        }
        self.corruption_link = Some(Box::new(CorruptionLink {
            node,
            events,
            reports,
        }));
        if let Some(m) = self.corrupt_mark().filter(|m| m.from_recovery) {
            self.corrupt = Some(Box::new(CorruptMark {
                from_recovery: false,
                ..m
            }));
            self.corruption_event(CorruptionKind::Detected {
                at: Where::Recovery,
                offset: m.offset,
                reason: "recovery cut valid data after a damaged batch".into(),
            });
            self.report_corrupt(m.offset);
        }
    }

    fn report_corrupt(&self, offset: i64) {
        if let (Some(l), Some((topic, partition))) = (&self.corruption_link, &self.ident) {
            let _ = l.reports.send(LeaderReport::CorruptReplica {
                topic: topic.to_string(),
                partition: *partition,
                offset,
            });
        }
    }

    /// Records a corruption event of this replica (cluster replicas only).
    pub(crate) fn corruption_event(&self, kind: CorruptionKind) {
        if let (Some(l), Some((topic, partition))) = (&self.corruption_link, &self.ident) {
            l.events.push(l.node, topic, *partition, kind);
        } else if let Some((topic, partition)) = &self.ident {
            tracing::error!(target: crate::corruption::TARGET, topic = &**topic, partition, ?kind, "corruption");
        }
    }

    /// A check found a corrupt stored batch at `offset`: remembers it (the replica
    /// stops being eligible to lead), reports the replica to the controller and, if it
    /// leads, resigns at once so nothing more is served from it. A standalone broker
    /// keeps refusing the bad range.
    pub(crate) fn on_corruption(&mut self, offset: i64, at: Where, reason: &str) {
        let known = self.corrupt.as_ref().is_some_and(|m| m.offset <= offset);
        if !known {
            self.corrupt = Some(Box::new(CorruptMark {
                offset,
                detected: std::time::Instant::now(),
                from_recovery: false,
                repair_started: None,
            }));
            self.corruption_event(CorruptionKind::Detected {
                at,
                offset,
                reason: reason.to_owned(),
            });
            self.report_corrupt(offset);
        }
        if let Role::Leader(l) = &self.role {
            let leader_epoch = l.leader_epoch();
            self.become_follower(-1, self.leader_epoch);
            self.corruption_event(CorruptionKind::LeaderResigned { leader_epoch });
        }
    }

    /// Starts repairing: cuts the log below the first corrupt batch (the batch holding
    /// the mark's offset and everything after it go) so that the replica fetcher
    /// re-fetches that range. Returns the new log end.
    pub(crate) fn begin_repair(&mut self) -> Result<i64, LogError> {
        let Some(m) = self.corrupt_mark() else {
            return Ok(self.log_end_offset());
        };
        self.truncate_to(m.offset)?;
        let leo = self.log_end_offset();
        self.corrupt = Some(Box::new(CorruptMark {
            repair_started: Some(std::time::Instant::now()),
            ..m
        }));
        self.corruption_event(CorruptionKind::RepairStarted { truncated_to: leo });
        Ok(leo)
    }

    /// The repair caught up with the leader: the replica is healthy again.
    pub(crate) fn clear_corruption(&mut self) -> Option<CorruptMark> {
        let m = *self.corrupt.take()?;
        let started = m.repair_started.unwrap_or(m.detected);
        self.corruption_event(CorruptionKind::RepairFinished {
            since_detected: m.detected.elapsed(),
            since_started: started.elapsed(),
        });
        Some(m)
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
                if verify_served(at, std::slice::from_ref(&b)).is_err()
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
    match verify_served(from, &out) {
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
pub fn verify_served(from: i64, out: &[Bytes]) -> Result<(), ReadError> {
    let mut expected = from;
    for (i, b) in out.iter().enumerate() {
        let bad = |reason: &str| ReadError::CorruptBatch {
            offset: expected,
            reason: reason.to_owned(),
        };
        let h = crate::log::header::validate(b).map_err(bad)?;
        if i == 0 {
            if h.base_offset > from || h.last_offset < from {
                return Err(bad("first batch read does not hold the offset asked for"));
            }
        } else if h.base_offset != expected {
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

/// Rebuilds the epoch cache from the stored batches' leader epochs.
fn rebuild_epoch_cache(log: &Log) -> LeaderEpochCache {
    let mut cache = LeaderEpochCache::new();
    let mut from = log.log_start_offset();
    let end = log.log_end_offset();
    while from < end {
        let Ok(batches) = log.read(from, 1 << 20) else {
            break;
        };
        if batches.is_empty() {
            break;
        }
        for b in &batches {
            let Ok(h) = crate::log::header::BatchHeader::parse(b) else {
                return cache;
            };
            let epoch = i32::from_be_bytes([b[12], b[13], b[14], b[15]]);
            if epoch >= 0 {
                let _ = cache.assign(epoch, h.base_offset);
            }
            from = h.last_offset + 1;
        }
    }
    cache
}

/// One partition of a topic.
#[derive(Debug)]
pub struct Partition {
    /// Shared by all partitions of the topic, not copied per partition.
    topic: Arc<str>,
    index: i32,
    state: Mutex<PartitionState>,
}

impl Partition {
    /// A partition led by `node_id` at epoch 0 over `log`, with the high watermark at
    /// the log end (single node: everything stored is committed), remembering at
    /// most `max_producers` idempotent producers.
    pub fn new(
        topic: impl Into<Arc<str>>,
        index: i32,
        node_id: i32,
        log: Log,
        max_producers: usize,
    ) -> Self {
        let hw = log.log_end_offset();
        let producers = producer_state::rebuild_or_empty(&log, max_producers);
        let topic = topic.into();
        Partition {
            state: Mutex::new(PartitionState {
                log,
                high_watermark: hw,
                leader: node_id,
                leader_epoch: 0,
                replicas: vec![node_id],
                isr: vec![node_id],
                deleted: false,
                role: Role::Standalone,
                epoch_cache: LeaderEpochCache::new(),
                waiters: BTreeMap::new(),
                next_wait_id: 0,
                reports: None,
                ident: Some((topic.clone(), index)),
                producers,
                corrupt: None,
                corruption_link: None,
            }),
            topic,
            index,
        }
    }

    /// A cluster replica over `log`, with no role yet. Its HW starts at the log start
    /// (a restarted replica does not know what was committed) and its epoch cache is
    /// rebuilt from the stored batches. It remembers at most `max_producers`
    /// idempotent producers.
    pub fn new_replica(
        topic: impl Into<Arc<str>>,
        index: i32,
        log: Log,
        max_producers: usize,
    ) -> Self {
        let hw = log.log_start_offset();
        let cache = rebuild_epoch_cache(&log);
        let producers = producer_state::rebuild_or_empty(&log, max_producers);
        let topic = topic.into();
        Partition {
            state: Mutex::new(PartitionState {
                log,
                high_watermark: hw,
                leader: -1,
                leader_epoch: cache.latest_epoch().unwrap_or(0),
                replicas: Vec::new(),
                isr: Vec::new(),
                deleted: false,
                role: Role::NotReplica,
                epoch_cache: cache,
                waiters: BTreeMap::new(),
                next_wait_id: 0,
                reports: None,
                ident: Some((topic.clone(), index)),
                producers,
                corrupt: None,
                corruption_link: None,
            }),
            topic,
            index,
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
        st.end_role();
        let log = std::mem::replace(&mut st.log, Log::memory());
        log.delete()
    }
}
