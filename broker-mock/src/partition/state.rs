//! A partition's state: its log, high watermark, leader epoch, replicas and ISR,
//! the role it plays, the epoch cache, the idempotent producers and any known
//! corruption, with the accessors and invariant-keeping setters around them.

use std::collections::BTreeMap;
use std::sync::Arc;

use baton_protocol::ErrorCode;
use tokio::sync::{mpsc, oneshot};

use crate::corruption::CorruptionLog;
use crate::error::LogError;
use crate::log::Log;
use crate::producer_state::{self, ProducerStateTable};
use crate::replication::{LeaderEpochCache, LeaderState, ProduceOutcome};

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
        /// Followers' broker epochs where known (AlterPartition v3, KIP-903).
        broker_epochs: Vec<(i32, i64)>,
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
    /// This node's replica's log went offline after a failed write or fsync (sent by
    /// any role); it ended at `log_end_offset`.
    OfflineReplica {
        topic: String,
        partition: i32,
        log_end_offset: i64,
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
pub(super) struct CorruptionLink {
    pub(super) node: i32,
    pub(super) events: std::sync::Arc<CorruptionLog>,
    pub(super) reports: mpsc::UnboundedSender<LeaderReport>,
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

/// The mutable state of a partition, behind [`Partition::lock`](super::handle::Partition::lock).
///
/// Invariants: `log_start_offset <= high_watermark <= log_end_offset`; the leader
/// epoch never decreases.
#[derive(Debug)]
pub struct PartitionState {
    pub(super) log: Log,
    pub(super) high_watermark: i64,
    /// Current leader's node id.
    pub leader: i32,
    pub(super) leader_epoch: i32,
    /// Assigned replicas, preferred leader first.
    pub replicas: Vec<i32>,
    /// In-sync replicas.
    pub isr: Vec<i32>,
    /// Set when the topic is deleted; every later operation fails.
    pub(super) deleted: bool,
    /// What this node does for the partition.
    pub(super) role: Role,
    /// Which leader epoch wrote which offsets. Invariant: every entry starts below the
    /// log end offset.
    pub(super) epoch_cache: LeaderEpochCache,
    /// `acks=all` produces waiting for the HW, by wait id.
    pub(super) waiters: BTreeMap<u64, oneshot::Sender<ProduceOutcome>>,
    /// Next wait id.
    pub(super) next_wait_id: u64,
    /// Where a leader's reports to the controller go (cluster mode).
    pub(super) reports: Option<mpsc::UnboundedSender<LeaderReport>>,
    /// Topic name (shared by the topic's partitions) and partition index, for reports.
    pub(super) ident: Option<(Arc<str>, i32)>,
    /// Idempotent producers' last batches and the partition's transactions,
    /// derived from the log: rebuilt when the partition opens and after truncation,
    /// updated after every append (a leader's, a follower's, a marker's).
    pub(super) producers: ProducerStateTable,
    /// Known corruption of this replica (boxed: rare, and every partition pays for
    /// the field's size).
    pub(super) corrupt: Option<Box<CorruptMark>>,
    /// Where corruption is reported (cluster replicas; boxed as `corrupt` is).
    pub(super) corruption_link: Option<Box<CorruptionLink>>,
    /// The node's counters (ISR changes, corruption, repairs), once opened by a node.
    pub(crate) metrics: Option<std::sync::Arc<crate::metrics::NodeMetrics>>,
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

    /// The last stable offset: the high watermark, or the first offset of the oldest
    /// unstable transaction if that is lower. A transaction is unstable while it is
    /// open and, once its marker is written, until the high watermark passes the
    /// marker (as in Kafka), so the last stable offset never passes a transaction
    /// whose outcome is not replicated and a new leader's never goes below an old
    /// one's for a lack of the marker. Read_committed readers stop here.
    ///
    /// Invariant: `log_start_offset <= last_stable_offset <= high_watermark`.
    pub fn last_stable_offset(&self) -> i64 {
        match self.producers.first_unstable_offset() {
            Some(first) => first.max(self.log_start_offset()).min(self.high_watermark),
            None => self.high_watermark,
        }
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
        self.store_high_watermark(hw);
    }

    /// Stores `hw` (raised to the log start) and tells the producer state, which
    /// makes transactions whose marker it passed stable. Every move of the high
    /// watermark goes through here.
    pub(super) fn store_high_watermark(&mut self, hw: i64) {
        self.high_watermark = hw.max(self.log_start_offset());
        self.producers.on_high_watermark(self.high_watermark);
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

    /// Removes batches at and past `offset` (see [`Log::truncate_to`]), pulling the
    /// high watermark and the epoch cache down with the log end.
    pub fn truncate_to(&mut self, offset: i64) -> Result<(), LogError> {
        let r = self.log.truncate_to(offset);
        self.storage_result(r)?;
        let leo = self.log_end_offset();
        self.high_watermark = self.high_watermark.min(leo).max(self.log_start_offset());
        self.epoch_cache.truncate_from_end(leo);
        self.producers = producer_state::rebuild_or_empty(
            &self.log,
            self.producers.limits(),
            self.high_watermark,
        );
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
        self.producers = producer_state::rebuild_or_empty(
            &self.log,
            self.producers.limits(),
            self.high_watermark,
        );
    }

    /// The leader epoch cache.
    pub fn epoch_cache(&self) -> &LeaderEpochCache {
        &self.epoch_cache
    }

    /// Replaces the epoch cache (a follower's, after truncation or appends).
    pub(crate) fn set_epoch_cache(&mut self, cache: LeaderEpochCache) {
        self.epoch_cache = cache;
        // A follower's copy still holds history below a log start moved since.
        self.epoch_cache
            .truncate_from_start(self.log_start_offset());
    }

    /// Flushes the log.
    pub fn flush(&mut self) -> Result<(), LogError> {
        let r = self.log.flush();
        self.storage_result(r)
    }
}
