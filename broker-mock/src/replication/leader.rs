//! The leader's bookkeeping for one partition: follower progress, ISR, high watermark,
//! `acks=all` waits and the drain of a planned leadership move.
//!
//! Events come in as method calls (`on_local_append`, `on_follower_fetch`, `tick`, ...);
//! everything the driver must do goes to an outbox drained with
//! [`LeaderState::take_actions`]. No I/O, no clock: time is a `u64` of milliseconds
//! passed in by the driver, and only differences between those values matter.
//!
//! Kafka behaviour modelled (from `Partition`/`ReplicaState`):
//! - a follower's fetch offset is its LEO;
//! - a follower is caught up at fetch time `t` when its fetch offset is `>=` the leader's
//!   LEO at `t`; it is also credited with its previous fetch time when this fetch offset
//!   reaches the leader LEO seen at that previous fetch;
//! - HW = min LEO over the *maximal* ISR (committed ISR plus any member of an
//!   in-flight change), never moving backwards;
//! - shrink: an ISR follower whose LEO differs from the leader's and that has not been
//!   caught up for more than `replica_lag_time_max_ms`;
//! - expand: a follower whose LEO is `>=` HW and `>=` the start offset of this leader
//!   epoch;
//! - one ISR change in flight at a time (AlterPartition, KIP-497);
//! - `acks=all`: rejected up front with NOT_ENOUGH_REPLICAS when the committed ISR is
//!   smaller than `min.insync.replicas`; a waiting produce completes when HW reaches its
//!   required offset, with NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below the
//!   minimum meanwhile.
//!
//! Deviation: Kafka also holds the HW for a caught-up replica about to join the ISR;
//! here only the maximal ISR counts.

use std::collections::BTreeMap;

use baton_protocol::ErrorCode;

/// After the controller refuses an ISR change, how long before the leader proposes
/// again.
pub const REFUSAL_BACKOFF_MS: u64 = 100;

/// A broker (replica) id.
pub type ReplicaId = i32;

/// Settings the leader needs, from broker and topic configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderConfig {
    /// `replica.lag.time.max.ms`: how long an ISR follower may stay behind the leader's
    /// LEO before the leader proposes removing it.
    pub replica_lag_time_max_ms: u64,
    /// `min.insync.replicas`: the smallest ISR that accepts an `acks=all` produce.
    pub min_insync_replicas: usize,
}

impl Default for LeaderConfig {
    fn default() -> Self {
        LeaderConfig {
            replica_lag_time_max_ms: 30_000,
            min_insync_replicas: 1,
        }
    }
}

/// What the leader knows when it takes over a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderInit {
    /// This broker's id. Must be in `isr`.
    pub local_id: ReplicaId,
    /// The leader epoch this leadership runs under.
    pub leader_epoch: i32,
    /// The controller's partition epoch of the current assignment (AlterPartition
    /// requests must carry it).
    pub partition_epoch: i32,
    /// All replicas, preferred first.
    pub replicas: Vec<ReplicaId>,
    /// The committed ISR. Must contain `local_id` and only members of `replicas`.
    pub isr: Vec<ReplicaId>,
    /// The local log end offset; becomes the start offset of this leader epoch.
    pub log_end_offset: i64,
    /// The HW carried over from the follower role. Must be `<= log_end_offset`.
    pub high_watermark: i64,
    /// Current time.
    pub now_ms: u64,
}

/// Why an event was refused. A refusal leaves the state unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LeaderError {
    /// The fetching broker is not a replica of this partition.
    #[error("broker {0} is not a replica of this partition")]
    NotAReplica(ReplicaId),
    /// The fetch offset is negative or beyond the leader's log end offset.
    #[error("fetch offset {fetch_offset} outside [0, {log_end_offset}]")]
    OffsetOutOfRange {
        /// The offset asked for.
        fetch_offset: i64,
        /// The leader's LEO.
        log_end_offset: i64,
    },
    /// A new log end offset is smaller than the current one (a leader never truncates).
    #[error("leader log end offset would move back from {current} to {proposed}")]
    LogEndOffsetBackwards {
        /// The current LEO.
        current: i64,
        /// The proposed LEO.
        proposed: i64,
    },
    /// The committed ISR given does not contain the leader, or names non-replicas.
    #[error("invalid ISR {0:?}")]
    InvalidIsr(Vec<ReplicaId>),
    /// A partition epoch older than the one already known.
    #[error("stale partition epoch {got}, current {current}")]
    StalePartitionEpoch {
        /// The epoch given.
        got: i32,
        /// The epoch known.
        current: i32,
    },
}

/// Why a new produce is refused before it is appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProduceRejection {
    /// `acks=all` and the committed ISR is smaller than `min.insync.replicas`.
    #[error("ISR of {isr} is below min.insync.replicas {min}")]
    NotEnoughReplicas {
        /// Committed ISR size.
        isr: usize,
        /// Configured minimum.
        min: usize,
    },
    /// Leadership is being handed over; writes go to the successor.
    #[error("leadership is being handed over")]
    NotLeader,
}

impl ProduceRejection {
    /// The Kafka error code for the produce response.
    pub fn error_code(self) -> ErrorCode {
        match self {
            ProduceRejection::NotEnoughReplicas { .. } => ErrorCode::NotEnoughReplicas,
            ProduceRejection::NotLeader => ErrorCode::NotLeaderOrFollower,
        }
    }
}

/// How a waiting `acks=all` produce ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProduceOutcome {
    /// The HW reached the required offset with enough replicas in sync.
    Committed,
    /// The HW reached the required offset but the ISR had shrunk below
    /// `min.insync.replicas` (the records are stored; the client may retry).
    NotEnoughReplicasAfterAppend,
    /// The deadline passed first.
    TimedOut,
    /// Leadership ended first.
    NotLeader,
}

impl ProduceOutcome {
    /// The Kafka error code for the produce response (`None` for success).
    pub fn error_code(self) -> ErrorCode {
        match self {
            ProduceOutcome::Committed => ErrorCode::None,
            ProduceOutcome::NotEnoughReplicasAfterAppend => ErrorCode::NotEnoughReplicasAfterAppend,
            ProduceOutcome::TimedOut => ErrorCode::RequestTimedOut,
            ProduceOutcome::NotLeader => ErrorCode::NotLeaderOrFollower,
        }
    }
}

/// Whether a proposed ISR adds or removes members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsrChangeKind {
    /// Followers caught up and should join.
    Expand,
    /// Followers lagged too long and should leave.
    Shrink,
}

/// Something the driver must do.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaderAction {
    /// The HW moved forward: update the log's HW, answer waiting consumers.
    HighWatermarkAdvanced {
        /// Previous HW.
        from: i64,
        /// New HW.
        to: i64,
    },
    /// Send AlterPartition to the controller with this ISR. Answer with
    /// [`LeaderState::on_isr_committed`] or [`LeaderState::on_isr_rejected`].
    ProposeIsr {
        /// Expand or shrink.
        kind: IsrChangeKind,
        /// The full proposed ISR (replica order).
        isr: Vec<ReplicaId>,
        /// The broker epoch (registration) of each follower in `isr` whose fetches
        /// showed it qualified, where known (KIP-903): the controller refuses a
        /// member that has registered again since, so a restarted broker is not
        /// let back in on the strength of what its previous process had.
        broker_epochs: Vec<(ReplicaId, i64)>,
        /// The leader epoch to send.
        leader_epoch: i32,
        /// The partition epoch the proposal is based on.
        partition_epoch: i32,
    },
    /// An `acks=all` produce registered with [`LeaderState::await_replication`] ended.
    ProduceCompleted {
        /// The id given at registration.
        wait_id: u64,
        /// How it ended.
        outcome: ProduceOutcome,
    },
    /// During a drain the successor's LEO reached the frozen leader LEO: tell the
    /// controller the handover can happen.
    SuccessorCaughtUp {
        /// The successor.
        successor: ReplicaId,
        /// The leader's (frozen) LEO, now also the successor's.
        log_end_offset: i64,
    },
}

/// The leader's view of one follower.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerProgress {
    /// The follower's LEO from its last fetch offset; `None` before its first fetch
    /// under this leadership. Invariant: `<=` the leader's LEO.
    pub log_end_offset: Option<i64>,
    /// Last time the follower was caught up to the leader's LEO; `None` if never.
    pub last_caught_up_ms: Option<u64>,
    /// Time of the last fetch.
    pub last_fetch_ms: Option<u64>,
    /// The leader's LEO at the last fetch.
    pub last_fetch_leader_leo: Option<i64>,
    /// The follower's log start offset, from its last fetch; `None` before it
    /// reported one under this leadership. DeleteRecords waits on it.
    pub log_start_offset: Option<i64>,
    /// The broker epoch (registration) of the follower process whose fetches the
    /// fields above describe; -1 if not known. A fetch from a later registration
    /// (the broker restarted) starts the progress afresh.
    pub broker_epoch: i64,
}

impl FollowerProgress {
    /// Nothing known yet; `last_caught_up_ms` as given.
    fn unknown(last_caught_up_ms: Option<u64>, broker_epoch: i64) -> FollowerProgress {
        FollowerProgress {
            log_end_offset: None,
            last_caught_up_ms,
            last_fetch_ms: None,
            last_fetch_leader_leo: None,
            log_start_offset: None,
            broker_epoch,
        }
    }
}

/// An ISR change sent to the controller and not yet answered.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PendingIsr {
    kind: IsrChangeKind,
    isr: Vec<ReplicaId>,
}

/// A registered `acks=all` produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ProduceWait {
    required_offset: i64,
    deadline_ms: u64,
}

/// A planned move in progress on this leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Drain {
    successor: ReplicaId,
    reported: bool,
}

/// Leader-side state of one partition.
#[derive(Debug, Clone)]
pub struct LeaderState {
    /// This broker. Invariant: always in `isr`.
    local_id: ReplicaId,
    /// The leader epoch of this leadership; fixed for the life of the value.
    leader_epoch: i32,
    /// First offset written under `leader_epoch` (the LEO when leadership began).
    /// Invariant: `epoch_start_offset <= log_end_offset`.
    epoch_start_offset: i64,
    /// The controller's partition epoch of `isr`. Invariant: never decreases.
    partition_epoch: i32,
    /// All replicas, preferred first.
    replicas: Vec<ReplicaId>,
    /// The committed ISR. Invariant: contains `local_id`; subset of `replicas`.
    isr: Vec<ReplicaId>,
    /// The in-flight ISR change, if any (at most one).
    pending_isr: Option<PendingIsr>,
    /// Leader's LEO. Invariant: never decreases.
    log_end_offset: i64,
    /// Invariant: `high_watermark <= log_end_offset`; never decreases.
    high_watermark: i64,
    /// Per follower (every replica except `local_id`).
    followers: BTreeMap<ReplicaId, FollowerProgress>,
    /// `acks=all` produces waiting for the HW, by id.
    waits: BTreeMap<u64, ProduceWait>,
    /// The planned move being drained, if any. While set, writes are refused.
    drain: Option<Drain>,
    /// Replicas that may not join the ISR now (fenced, or in controlled shutdown):
    /// their expansion is not proposed (KIP-841), so the HW never waits on a
    /// proposal the controller must refuse.
    ineligible: Vec<ReplicaId>,
    /// The latest time seen (fetches and ticks), in ms.
    now_ms: u64,
    /// After a refused ISR change, no new proposal before this time, so a refusal
    /// cannot turn into a tight loop of proposals.
    proposals_paused_until_ms: u64,
    /// Settings.
    config: LeaderConfig,
    /// Actions not yet taken by the driver.
    outbox: Vec<LeaderAction>,
}

impl LeaderState {
    /// Takes over a partition. Followers in the ISR start as caught up at `now_ms`
    /// (as Kafka does) with unknown LEO, so the HW waits for their first fetch.
    pub fn new(init: LeaderInit, config: LeaderConfig) -> Result<Self, LeaderError> {
        let isr_ok = init.isr.contains(&init.local_id)
            && init.isr.iter().all(|r| init.replicas.contains(r))
            && init.replicas.contains(&init.local_id);
        if !isr_ok {
            return Err(LeaderError::InvalidIsr(init.isr));
        }
        assert!(
            0 <= init.high_watermark && init.high_watermark <= init.log_end_offset,
            "HW {} must be within [0, LEO {}]",
            init.high_watermark,
            init.log_end_offset
        );
        let followers = init
            .replicas
            .iter()
            .filter(|&&r| r != init.local_id)
            .map(|&r| {
                let in_isr = init.isr.contains(&r);
                (
                    r,
                    FollowerProgress::unknown(in_isr.then_some(init.now_ms), -1),
                )
            })
            .collect();
        let mut state = LeaderState {
            local_id: init.local_id,
            leader_epoch: init.leader_epoch,
            epoch_start_offset: init.log_end_offset,
            partition_epoch: init.partition_epoch,
            replicas: init.replicas,
            isr: init.isr,
            pending_isr: None,
            log_end_offset: init.log_end_offset,
            high_watermark: init.high_watermark,
            followers,
            waits: BTreeMap::new(),
            drain: None,
            ineligible: Vec::new(),
            now_ms: init.now_ms,
            proposals_paused_until_ms: 0,
            config,
            outbox: Vec::new(),
        };
        state.maybe_advance_hw();
        state.check_invariants();
        Ok(state)
    }

    /// This broker's id.
    pub fn local_id(&self) -> ReplicaId {
        self.local_id
    }

    /// The leader epoch.
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }

    /// The start offset of this leader epoch.
    pub fn epoch_start_offset(&self) -> i64 {
        self.epoch_start_offset
    }

    /// The partition epoch of the committed ISR.
    pub fn partition_epoch(&self) -> i32 {
        self.partition_epoch
    }

    /// All replicas, preferred first.
    pub fn replicas(&self) -> &[ReplicaId] {
        &self.replicas
    }

    /// The committed ISR.
    pub fn isr(&self) -> &[ReplicaId] {
        &self.isr
    }

    /// The committed ISR plus the members of an in-flight change: the set the HW waits
    /// for.
    pub fn maximal_isr(&self) -> Vec<ReplicaId> {
        let mut out = self.isr.clone();
        if let Some(p) = &self.pending_isr {
            for r in &p.isr {
                if !out.contains(r) {
                    out.push(*r);
                }
            }
        }
        out
    }

    /// The proposed ISR awaiting the controller's answer, if any.
    pub fn pending_isr(&self) -> Option<&[ReplicaId]> {
        self.pending_isr.as_ref().map(|p| p.isr.as_slice())
    }

    /// The leader's LEO.
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }

    /// The high watermark.
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    /// A follower's progress.
    pub fn follower(&self, id: ReplicaId) -> Option<&FollowerProgress> {
        self.followers.get(&id)
    }

    /// A follower's progress, to update (see `low_watermark.rs`).
    pub(super) fn follower_progress_mut(&mut self, id: ReplicaId) -> Option<&mut FollowerProgress> {
        self.followers.get_mut(&id)
    }

    /// Every follower's progress.
    pub(super) fn followers_progress(
        &self,
    ) -> impl Iterator<Item = (ReplicaId, &FollowerProgress)> {
        self.followers.iter().map(|(id, p)| (*id, p))
    }

    /// Whether `id` is fenced or shutting down (see [`LeaderState::set_ineligible`]).
    pub(super) fn is_ineligible(&self, id: ReplicaId) -> bool {
        self.ineligible.contains(&id)
    }

    /// Whether the leader accepts new writes (false while draining to a successor).
    pub fn accepts_writes(&self) -> bool {
        self.drain.is_none()
    }

    /// Number of `acks=all` produces still waiting.
    pub fn waiting_produces(&self) -> usize {
        self.waits.len()
    }

    /// Removes and returns the actions for the driver, oldest first.
    pub fn take_actions(&mut self) -> Vec<LeaderAction> {
        std::mem::take(&mut self.outbox)
    }

    /// Decides whether a new produce may be appended. `acks_all` is `acks=-1`.
    pub fn check_produce(&self, acks_all: bool) -> Result<(), ProduceRejection> {
        if self.drain.is_some() {
            return Err(ProduceRejection::NotLeader);
        }
        if acks_all && self.isr.len() < self.config.min_insync_replicas {
            return Err(ProduceRejection::NotEnoughReplicas {
                isr: self.isr.len(),
                min: self.config.min_insync_replicas,
            });
        }
        Ok(())
    }

    /// The local log grew to `new_log_end_offset` (a produce was appended).
    pub fn on_local_append(&mut self, new_log_end_offset: i64) -> Result<(), LeaderError> {
        if new_log_end_offset < self.log_end_offset {
            return Err(LeaderError::LogEndOffsetBackwards {
                current: self.log_end_offset,
                proposed: new_log_end_offset,
            });
        }
        self.log_end_offset = new_log_end_offset;
        self.maybe_advance_hw();
        self.check_invariants();
        Ok(())
    }

    /// Registers an `acks=all` produce whose last offset is `required_offset - 1`: it
    /// completes (via [`LeaderAction::ProduceCompleted`]) once the HW is
    /// `>= required_offset`, or at `deadline_ms` (checked by [`tick`](Self::tick)).
    /// Completes at once if the HW is already there. Reusing a waiting id replaces it.
    pub fn await_replication(&mut self, wait_id: u64, required_offset: i64, deadline_ms: u64) {
        self.waits.insert(
            wait_id,
            ProduceWait {
                required_offset,
                deadline_ms,
            },
        );
        self.complete_waits();
    }

    /// A follower fetched from `fetch_offset` at `now_ms`; the fetch offset is its LEO.
    /// Returns the HW to put in the fetch response. The fetching process's broker
    /// epoch is not known: [`LeaderState::on_follower_fetch_as`] with `None`.
    pub fn on_follower_fetch(
        &mut self,
        replica: ReplicaId,
        fetch_offset: i64,
        now_ms: u64,
    ) -> Result<i64, LeaderError> {
        self.on_follower_fetch_as(replica, None, fetch_offset, now_ms)
    }

    /// [`LeaderState::on_follower_fetch`] from the follower process registered
    /// with `broker_epoch`. When that differs from the epoch its progress was
    /// recorded under (the broker restarted, and may have lost its log's tail),
    /// the progress starts afresh: the new process is caught up, and may join
    /// the ISR, only on the strength of its own fetches (KIP-903).
    pub fn on_follower_fetch_as(
        &mut self,
        replica: ReplicaId,
        broker_epoch: Option<i64>,
        fetch_offset: i64,
        now_ms: u64,
    ) -> Result<i64, LeaderError> {
        if !self.followers.contains_key(&replica) {
            return Err(LeaderError::NotAReplica(replica));
        }
        if fetch_offset < 0 || fetch_offset > self.log_end_offset {
            return Err(LeaderError::OffsetOutOfRange {
                fetch_offset,
                log_end_offset: self.log_end_offset,
            });
        }
        self.now_ms = self.now_ms.max(now_ms);
        let leader_leo = self.log_end_offset;
        let p = self.followers.get_mut(&replica).expect("checked above");
        if let Some(e) = broker_epoch.filter(|e| *e >= 0 && *e != p.broker_epoch) {
            if p.broker_epoch >= 0 {
                *p = FollowerProgress::unknown(None, e);
            } else {
                p.broker_epoch = e;
            }
        }
        if fetch_offset >= leader_leo {
            p.last_caught_up_ms = Some(p.last_caught_up_ms.map_or(now_ms, |t| t.max(now_ms)));
        } else if let (Some(prev_leo), Some(prev_t)) = (p.last_fetch_leader_leo, p.last_fetch_ms) {
            if fetch_offset >= prev_leo {
                p.last_caught_up_ms = Some(p.last_caught_up_ms.map_or(prev_t, |t| t.max(prev_t)));
            }
        }
        p.last_fetch_leader_leo = Some(leader_leo);
        p.last_fetch_ms = Some(now_ms);
        p.log_end_offset = Some(fetch_offset);

        self.maybe_advance_hw();
        self.maybe_expand(replica);
        if let Some(d) = &mut self.drain {
            if d.successor == replica && !d.reported && fetch_offset >= self.log_end_offset {
                d.reported = true;
                self.outbox.push(LeaderAction::SuccessorCaughtUp {
                    successor: replica,
                    log_end_offset: self.log_end_offset,
                });
            }
        }
        self.check_invariants();
        Ok(self.high_watermark)
    }

    /// Time passed: proposes an ISR shrink for lagging followers and times out waits
    /// whose deadline is `<= now_ms`.
    pub fn tick(&mut self, now_ms: u64) {
        self.now_ms = self.now_ms.max(now_ms);
        let expired: Vec<u64> = self
            .waits
            .iter()
            .filter(|(_, w)| w.deadline_ms <= now_ms)
            .map(|(&id, _)| id)
            .collect();
        for id in expired {
            self.waits.remove(&id);
            self.outbox.push(LeaderAction::ProduceCompleted {
                wait_id: id,
                outcome: ProduceOutcome::TimedOut,
            });
        }
        if self.pending_isr.is_some() {
            return;
        }
        let lag_max = self.config.replica_lag_time_max_ms;
        let out_of_sync: Vec<ReplicaId> = self
            .isr
            .iter()
            .copied()
            .filter(|&r| r != self.local_id)
            .filter(|r| {
                let p = &self.followers[r];
                let behind = p.log_end_offset != Some(self.log_end_offset);
                let since = p
                    .last_caught_up_ms
                    .map_or(u64::MAX, |t| now_ms.saturating_sub(t));
                behind && since > lag_max
            })
            .collect();
        if !out_of_sync.is_empty() {
            let isr: Vec<ReplicaId> = self
                .isr
                .iter()
                .copied()
                .filter(|r| !out_of_sync.contains(r))
                .collect();
            self.propose(IsrChangeKind::Shrink, isr);
        }
        self.check_invariants();
    }

    /// The controller committed an ISR (AlterPartition answer or a metadata update for
    /// this leader epoch). Clears any in-flight change.
    pub fn on_isr_committed(
        &mut self,
        isr: Vec<ReplicaId>,
        partition_epoch: i32,
    ) -> Result<(), LeaderError> {
        if partition_epoch < self.partition_epoch {
            return Err(LeaderError::StalePartitionEpoch {
                got: partition_epoch,
                current: self.partition_epoch,
            });
        }
        if !isr.contains(&self.local_id) || !isr.iter().all(|r| self.replicas.contains(r)) {
            return Err(LeaderError::InvalidIsr(isr));
        }
        // A member that joined without ever matching the leader LEO exactly is credited
        // with its last fetch, so it is not removed by the very next tick.
        for r in &isr {
            if let Some(p) = self.followers.get_mut(r) {
                if !self.isr.contains(r) && p.last_caught_up_ms.is_none() {
                    p.last_caught_up_ms = p.last_fetch_ms;
                }
            }
        }
        self.isr = isr;
        self.partition_epoch = partition_epoch;
        self.pending_isr = None;
        self.maybe_advance_hw();
        // Waits may now see a different ISR size.
        self.complete_waits();
        // Someone may be eligible now that the slot is free.
        let followers: Vec<ReplicaId> = self.followers.keys().copied().collect();
        for r in followers {
            self.maybe_expand(r);
        }
        self.check_invariants();
        Ok(())
    }

    /// The controller rejected the in-flight change (stale epoch, ineligible replica,
    /// ...). The HW stops waiting on the proposed members at once; a fetch or tick
    /// from [`REFUSAL_BACKOFF_MS`] on may propose again.
    pub fn on_isr_rejected(&mut self) {
        self.pending_isr = None;
        self.proposals_paused_until_ms = self.now_ms + REFUSAL_BACKOFF_MS;
        self.maybe_advance_hw();
    }

    /// Starts a planned move to `successor`: stop accepting writes and report when the
    /// successor's LEO reaches the (now frozen) leader LEO.
    pub fn begin_drain(&mut self, successor: ReplicaId) -> Result<(), LeaderError> {
        let p = self
            .followers
            .get(&successor)
            .ok_or(LeaderError::NotAReplica(successor))?;
        let caught_up = p.log_end_offset == Some(self.log_end_offset);
        self.drain = Some(Drain {
            successor,
            reported: caught_up,
        });
        if caught_up {
            self.outbox.push(LeaderAction::SuccessorCaughtUp {
                successor,
                log_end_offset: self.log_end_offset,
            });
        }
        Ok(())
    }

    /// Sets the replicas that may not join the ISR now (from the cluster metadata:
    /// fenced brokers and brokers in controlled shutdown). One that becomes eligible
    /// again is proposed at once if it qualifies.
    pub fn set_ineligible(&mut self, ineligible: Vec<ReplicaId>) {
        if ineligible == self.ineligible {
            return;
        }
        self.ineligible = ineligible;
        let followers: Vec<ReplicaId> = self.followers.keys().copied().collect();
        for r in followers {
            self.maybe_expand(r);
        }
        self.check_invariants();
    }

    /// The controller changed the replica set under this leadership (a partition
    /// reassignment started, completed or was cancelled) and committed `isr` with
    /// it: added replicas start unknown, so they join the ISR only once a fetch
    /// shows them caught up; removed ones are forgotten. Waiting produces stay.
    pub fn on_replicas_changed(
        &mut self,
        replicas: Vec<ReplicaId>,
        isr: Vec<ReplicaId>,
        partition_epoch: i32,
    ) -> Result<(), LeaderError> {
        if partition_epoch < self.partition_epoch {
            return Err(LeaderError::StalePartitionEpoch {
                got: partition_epoch,
                current: self.partition_epoch,
            });
        }
        let ok = replicas.contains(&self.local_id)
            && isr.contains(&self.local_id)
            && isr.iter().all(|r| replicas.contains(r));
        if !ok {
            return Err(LeaderError::InvalidIsr(isr));
        }
        self.followers.retain(|r, _| replicas.contains(r));
        for &r in &replicas {
            if r != self.local_id {
                self.followers
                    .entry(r)
                    .or_insert(FollowerProgress::unknown(None, -1));
            }
        }
        if self.drain.is_some_and(|d| !replicas.contains(&d.successor)) {
            self.drain = None;
        }
        self.ineligible.retain(|r| replicas.contains(r));
        self.replicas = replicas;
        self.on_isr_committed(isr, partition_epoch)
    }

    /// Applies changed topic settings (`min.insync.replicas` altered on the live
    /// topic); the next `acks=all` produce is checked against them.
    pub fn set_config(&mut self, config: LeaderConfig) {
        self.config = config;
    }

    /// The planned move was abandoned: accept writes again.
    pub fn abort_drain(&mut self) {
        self.drain = None;
    }

    /// Leadership ended (new leader elected, partition deleted, broker stopping): every
    /// waiting produce completes with NOT_LEADER_OR_FOLLOWER. Returns the final actions.
    pub fn resign(mut self) -> Vec<LeaderAction> {
        let waits = std::mem::take(&mut self.waits);
        for id in waits.into_keys() {
            self.outbox.push(LeaderAction::ProduceCompleted {
                wait_id: id,
                outcome: ProduceOutcome::NotLeader,
            });
        }
        self.outbox
    }

    /// Proposes an ISR change unless one is in flight.
    fn propose(&mut self, kind: IsrChangeKind, isr: Vec<ReplicaId>) {
        if self.pending_isr.is_some()
            || isr == self.isr
            || self.now_ms < self.proposals_paused_until_ms
        {
            return;
        }
        assert!(
            isr.contains(&self.local_id),
            "an ISR proposal never drops the leader"
        );
        self.pending_isr = Some(PendingIsr {
            kind,
            isr: isr.clone(),
        });
        let broker_epochs = isr
            .iter()
            .filter_map(|r| Some((*r, self.followers.get(r)?.broker_epoch)))
            .filter(|(_, e)| *e >= 0)
            .collect();
        self.outbox.push(LeaderAction::ProposeIsr {
            kind,
            isr,
            broker_epochs,
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
        });
    }

    /// Proposes adding `replica` if it qualifies.
    fn maybe_expand(&mut self, replica: ReplicaId) {
        if self.pending_isr.is_some()
            || self.isr.contains(&replica)
            || self.ineligible.contains(&replica)
        {
            return;
        }
        let Some(leo) = self.followers.get(&replica).and_then(|p| p.log_end_offset) else {
            return;
        };
        if leo >= self.high_watermark && leo >= self.epoch_start_offset {
            // Keep replica order so proposals are deterministic.
            let isr: Vec<ReplicaId> = self
                .replicas
                .iter()
                .copied()
                .filter(|r| self.isr.contains(r) || *r == replica)
                .collect();
            self.propose(IsrChangeKind::Expand, isr);
        }
    }

    /// Moves the HW to the minimum LEO over the maximal ISR if that is higher.
    fn maybe_advance_hw(&mut self) {
        let mut min = self.log_end_offset;
        for r in self.maximal_isr() {
            if r == self.local_id {
                continue;
            }
            match self.followers.get(&r).and_then(|p| p.log_end_offset) {
                Some(leo) => min = min.min(leo),
                // Unknown LEO: cannot advance past what we have.
                None => return,
            }
        }
        if min > self.high_watermark {
            let from = self.high_watermark;
            self.high_watermark = min;
            self.outbox
                .push(LeaderAction::HighWatermarkAdvanced { from, to: min });
            self.complete_waits();
        }
    }

    /// Completes waits whose required offset is at or below the HW.
    fn complete_waits(&mut self) {
        let hw = self.high_watermark;
        let done: Vec<u64> = self
            .waits
            .iter()
            .filter(|(_, w)| w.required_offset <= hw)
            .map(|(&id, _)| id)
            .collect();
        let enough = self.maximal_isr().len() >= self.config.min_insync_replicas;
        for id in done {
            self.waits.remove(&id);
            self.outbox.push(LeaderAction::ProduceCompleted {
                wait_id: id,
                outcome: if enough {
                    ProduceOutcome::Committed
                } else {
                    ProduceOutcome::NotEnoughReplicasAfterAppend
                },
            });
        }
    }

    /// Asserts the invariants written on the fields.
    fn check_invariants(&self) {
        assert!(
            self.isr.contains(&self.local_id),
            "ISR must contain the leader"
        );
        assert!(
            self.high_watermark <= self.log_end_offset,
            "HW {} > LEO {}",
            self.high_watermark,
            self.log_end_offset
        );
        assert!(self.epoch_start_offset <= self.log_end_offset);
        for p in self.followers.values() {
            if let Some(leo) = p.log_end_offset {
                assert!(leo <= self.log_end_offset, "follower LEO beyond leader LEO");
            }
        }
        for r in &self.isr {
            assert!(self.replicas.contains(r), "ISR member {r} is not a replica");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAG: u64 = 10_000;

    fn leader(isr: &[ReplicaId], leo: i64, hw: i64, min_isr: usize) -> LeaderState {
        LeaderState::new(
            LeaderInit {
                local_id: 1,
                leader_epoch: 5,
                partition_epoch: 7,
                replicas: vec![1, 2, 3],
                isr: isr.to_vec(),
                log_end_offset: leo,
                high_watermark: hw,
                now_ms: 0,
            },
            LeaderConfig {
                replica_lag_time_max_ms: LAG,
                min_insync_replicas: min_isr,
            },
        )
        .unwrap()
    }

    fn hw_moves(actions: &[LeaderAction]) -> Vec<(i64, i64)> {
        actions
            .iter()
            .filter_map(|a| match a {
                LeaderAction::HighWatermarkAdvanced { from, to } => Some((*from, *to)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn hw_is_min_leo_over_isr_and_never_goes_back() {
        let mut l = leader(&[1, 2, 3], 10, 4, 1);
        assert_eq!(l.high_watermark(), 4, "unknown follower LEOs hold the HW");
        l.on_follower_fetch(2, 8, 1).unwrap();
        assert_eq!(l.high_watermark(), 4);
        l.on_follower_fetch(3, 6, 1).unwrap();
        assert_eq!(l.high_watermark(), 6);
        l.on_follower_fetch(3, 10, 2).unwrap();
        assert_eq!(l.high_watermark(), 8);
        // A follower that truncated reports a lower LEO: HW stays.
        l.on_follower_fetch(2, 5, 3).unwrap();
        assert_eq!(l.high_watermark(), 8);
        l.on_local_append(12).unwrap();
        l.on_follower_fetch(2, 12, 4).unwrap();
        l.on_follower_fetch(3, 12, 4).unwrap();
        assert_eq!(l.high_watermark(), 12);
        assert_eq!(
            hw_moves(&l.take_actions()),
            vec![(4, 6), (6, 8), (8, 10), (10, 12)]
        );
        assert!(l.on_local_append(11).is_err());
        assert!(l.on_follower_fetch(2, 13, 5).is_err());
        assert!(l.on_follower_fetch(9, 0, 5).is_err());
    }

    #[test]
    fn replicas_added_join_once_caught_up_and_removed_ones_are_forgotten() {
        let mut l = leader(&[1, 2, 3], 10, 10, 1);
        let wait_id = 1;
        l.on_local_append(12).unwrap();
        l.await_replication(wait_id, 12, u64::MAX);
        // Reassignment {1,2,3} -> {1,2,4}: 4 added, the union in place.
        l.on_replicas_changed(vec![1, 2, 4, 3], vec![1, 2, 3], 8)
            .unwrap();
        assert!(l.follower(4).is_some());
        assert_eq!(l.waiting_produces(), 1, "a replica change keeps the waits");
        l.on_follower_fetch(4, 5, 1).unwrap();
        assert_eq!(l.pending_isr(), None, "behind the HW: not in sync yet");
        l.on_follower_fetch(2, 12, 1).unwrap();
        l.on_follower_fetch(3, 12, 1).unwrap();
        l.on_follower_fetch(4, 12, 2).unwrap();
        assert_eq!(l.pending_isr(), Some(&[1, 2, 4, 3][..]));
        // Completed: 3 leaves.
        l.on_replicas_changed(vec![1, 2, 4], vec![1, 2, 4], 10)
            .unwrap();
        assert!(l.follower(3).is_none());
        assert_eq!(l.isr(), &[1, 2, 4]);
        assert!(
            l.on_follower_fetch(3, 12, 3).is_err(),
            "no longer a replica"
        );
        assert!(l.on_replicas_changed(vec![2, 4], vec![2, 4], 11).is_err());
        assert!(l.on_replicas_changed(vec![1, 2], vec![1, 2], 9).is_err());
    }

    #[test]
    fn sole_isr_member_advances_on_append() {
        let mut l = leader(&[1], 0, 0, 1);
        l.on_local_append(3).unwrap();
        assert_eq!(l.high_watermark(), 3);
    }

    #[test]
    fn shrink_after_lag_time_then_commit() {
        let mut l = leader(&[1, 2, 3], 10, 10, 2);
        l.on_follower_fetch(2, 10, 100).unwrap();
        l.on_follower_fetch(3, 10, 100).unwrap();
        l.take_actions();
        l.on_local_append(20).unwrap();
        // Follower 2 keeps up, 3 stops fetching.
        l.on_follower_fetch(2, 20, 5_000).unwrap();
        l.tick(LAG + 100);
        assert!(
            l.take_actions().is_empty(),
            "exactly lag max is not yet out"
        );
        l.tick(LAG + 101);
        let actions = l.take_actions();
        assert_eq!(
            actions,
            vec![LeaderAction::ProposeIsr {
                kind: IsrChangeKind::Shrink,
                isr: vec![1, 2],
                broker_epochs: Vec::new(),
                leader_epoch: 5,
                partition_epoch: 7,
            }]
        );
        // While pending, the HW still waits for 3 (maximal ISR).
        assert_eq!(l.high_watermark(), 10);
        l.tick(LAG + 200);
        assert!(
            l.take_actions().is_empty(),
            "one change in flight at a time"
        );
        l.on_isr_committed(vec![1, 2], 8).unwrap();
        assert_eq!(l.high_watermark(), 20);
        assert_eq!(l.isr(), &[1, 2]);
    }

    #[test]
    fn follower_fetching_but_behind_is_removed_caught_up_one_is_not() {
        let mut l = leader(&[1, 2, 3], 0, 0, 1);
        // The leader appends steadily; 2 always fetches the current LEO, 3 stays one behind
        // the LEO of its previous fetch (credited with that earlier time), ...
        for i in 1..=30 {
            let t = i * 1_000;
            l.on_local_append(i as i64 * 10).unwrap();
            l.on_follower_fetch(2, i as i64 * 10, t).unwrap();
            l.on_follower_fetch(3, (i as i64 - 1) * 10, t).unwrap();
            l.tick(t);
        }
        assert!(
            !l.take_actions()
                .iter()
                .any(|a| matches!(a, LeaderAction::ProposeIsr { .. })),
            "a follower reaching the LEO of its previous fetch stays in sync"
        );
        // ... until 3 stalls at an offset while the leader moves on.
        for i in 31..=45 {
            let t = i * 1_000;
            l.on_local_append(i as i64 * 10).unwrap();
            l.on_follower_fetch(2, i as i64 * 10, t).unwrap();
            l.on_follower_fetch(3, 300, t).unwrap();
            l.tick(t);
        }
        let proposals: Vec<_> = l
            .take_actions()
            .into_iter()
            .filter(|a| matches!(a, LeaderAction::ProposeIsr { .. }))
            .collect();
        assert_eq!(proposals.len(), 1);
        assert!(
            matches!(&proposals[0], LeaderAction::ProposeIsr { isr, kind: IsrChangeKind::Shrink, .. } if isr == &vec![1, 2])
        );
    }

    #[test]
    fn a_restarted_follower_is_proposed_only_on_its_new_process_fetches() {
        let mut l = leader(&[1, 2, 3], 10, 10, 1);
        l.on_follower_fetch_as(2, Some(20), 10, 1).unwrap();
        l.on_follower_fetch_as(3, Some(30), 10, 1).unwrap();
        l.take_actions();
        // Broker 3 restarted: the controller fenced it out of the ISR. What its old
        // process fetched still qualifies it here, so the leader proposes it back,
        // under the old registration, which the controller refuses.
        l.on_isr_committed(vec![1, 2], 8).unwrap();
        let proposed = l.take_actions();
        assert!(
            proposed.contains(&LeaderAction::ProposeIsr {
                kind: IsrChangeKind::Expand,
                isr: vec![1, 2, 3],
                broker_epochs: vec![(2, 20), (3, 30)],
                leader_epoch: 5,
                partition_epoch: 8,
            }),
            "{proposed:?}"
        );
        l.on_isr_rejected();
        // The new process lost its log's tail: it fetches from offset 4.
        l.on_follower_fetch_as(3, Some(31), 4, 500).unwrap();
        let p = l.follower(3).unwrap();
        assert_eq!(p.broker_epoch, 31);
        assert_eq!(p.log_end_offset, Some(4));
        assert_eq!(p.last_caught_up_ms, None, "nothing carried over");
        l.tick(1_000);
        assert!(l.take_actions().is_empty(), "behind: not proposed");
        // Caught up by its own fetches: proposed under its new registration.
        l.on_follower_fetch_as(3, Some(31), 10, 1_100).unwrap();
        let proposed = l.take_actions();
        assert!(
            proposed.iter().any(|a| matches!(
                a,
                LeaderAction::ProposeIsr { broker_epochs, .. } if broker_epochs == &vec![(2, 20), (3, 31)]
            )),
            "{proposed:?}"
        );
    }

    #[test]
    fn expand_requires_hw_and_epoch_start() {
        // Leader took over at LEO 10 with HW 6; follower 3 is out of the ISR.
        let mut l = leader(&[1, 2], 10, 6, 1);
        l.on_follower_fetch(2, 10, 1).unwrap();
        assert_eq!(l.high_watermark(), 10);
        l.take_actions();
        l.on_follower_fetch(3, 8, 2).unwrap();
        assert!(l.take_actions().is_empty(), "below HW: not eligible");
        l.on_local_append(15).unwrap();
        l.on_follower_fetch(3, 10, 3).unwrap();
        let a = l.take_actions();
        assert!(a.contains(&LeaderAction::ProposeIsr {
            kind: IsrChangeKind::Expand,
            isr: vec![1, 2, 3],
            broker_epochs: Vec::new(),
            leader_epoch: 5,
            partition_epoch: 7,
        }));
        // Maximal ISR now includes 3: HW waits for it.
        l.on_follower_fetch(2, 15, 4).unwrap();
        assert_eq!(l.high_watermark(), 10);
        assert!(l.on_isr_committed(vec![1, 2, 3], 6).is_err(), "stale epoch");
        l.on_isr_committed(vec![1, 2, 3], 8).unwrap();
        l.on_follower_fetch(3, 15, 5).unwrap();
        assert_eq!(l.high_watermark(), 15);
        assert!(
            l.on_isr_committed(vec![2, 3], 9).is_err(),
            "never drop the leader"
        );
    }

    #[test]
    fn ineligible_replica_is_not_proposed_until_eligible_again() {
        let mut l = leader(&[1, 2], 10, 10, 1);
        l.on_follower_fetch(2, 10, 1).unwrap();
        l.take_actions();
        // 3 restarted and is fenced: caught up, but not proposed, so the HW only
        // waits for the committed ISR.
        l.set_ineligible(vec![3]);
        l.on_follower_fetch(3, 10, 2).unwrap();
        assert!(l.pending_isr().is_none());
        l.on_local_append(12).unwrap();
        l.on_follower_fetch(2, 12, 3).unwrap();
        assert_eq!(l.high_watermark(), 12);
        l.on_follower_fetch(3, 12, 4).unwrap();
        assert!(l.pending_isr().is_none());
        l.take_actions();
        // Unfenced: proposed at once.
        l.set_ineligible(Vec::new());
        assert_eq!(l.pending_isr(), Some(&[1, 2, 3][..]));
    }

    #[test]
    fn refused_change_releases_the_hw_at_once_and_pauses_proposals() {
        let mut l = leader(&[1, 2], 10, 10, 1);
        l.on_follower_fetch(2, 10, 1).unwrap();
        l.on_follower_fetch(3, 10, 2).unwrap();
        assert_eq!(l.pending_isr(), Some(&[1, 2, 3][..]));
        l.take_actions();
        l.on_local_append(15).unwrap();
        l.on_follower_fetch(2, 15, 3).unwrap();
        assert_eq!(l.high_watermark(), 10, "the maximal ISR holds the HW");
        l.on_isr_rejected();
        assert_eq!(l.high_watermark(), 15, "released by the refusal");
        l.on_follower_fetch(3, 15, 4).unwrap();
        assert!(l.pending_isr().is_none(), "no new proposal right away");
        l.on_follower_fetch(3, 15, 4 + REFUSAL_BACKOFF_MS).unwrap();
        assert_eq!(l.pending_isr(), Some(&[1, 2, 3][..]));
    }

    #[test]
    fn expand_needs_epoch_start_offset_even_at_hw() {
        // HW 4 but this epoch started at LEO 10: a follower at 5 is past HW, not past
        // the epoch start, so it may still hold a divergent tail.
        let mut l = leader(&[1], 10, 4, 1);
        assert_eq!(l.high_watermark(), 10, "sole member: HW jumps to LEO");
        let mut l2 = leader(&[1, 2], 10, 4, 1);
        l2.take_actions();
        l2.on_follower_fetch(3, 5, 1).unwrap();
        assert!(!l2
            .take_actions()
            .iter()
            .any(|a| matches!(a, LeaderAction::ProposeIsr { .. })));
        l.take_actions();
    }

    #[test]
    fn acks_all_waits_for_hw_and_checks_min_isr() {
        let mut l = leader(&[1, 2, 3], 0, 0, 2);
        assert_eq!(l.check_produce(true), Ok(()));
        l.on_local_append(5).unwrap();
        l.await_replication(1, 5, 1_000);
        l.on_local_append(9).unwrap();
        l.await_replication(2, 9, 1_000);
        l.on_follower_fetch(2, 5, 10).unwrap();
        l.on_follower_fetch(3, 5, 10).unwrap();
        let done: Vec<_> = l
            .take_actions()
            .into_iter()
            .filter(|a| matches!(a, LeaderAction::ProduceCompleted { .. }))
            .collect();
        assert_eq!(
            done,
            vec![LeaderAction::ProduceCompleted {
                wait_id: 1,
                outcome: ProduceOutcome::Committed
            }]
        );
        // 3 is removed; ISR {1,2} still meets min 2.
        l.on_isr_committed(vec![1, 2], 8).unwrap();
        l.on_isr_committed(vec![1], 9).unwrap();
        assert_eq!(
            l.check_produce(true),
            Err(ProduceRejection::NotEnoughReplicas { isr: 1, min: 2 })
        );
        assert_eq!(l.check_produce(false), Ok(()), "acks=1 still accepted");
        // ISR {1}: HW jumps to 9, but wait 2 completes with the after-append error.
        let a = l.take_actions();
        assert!(a.contains(&LeaderAction::ProduceCompleted {
            wait_id: 2,
            outcome: ProduceOutcome::NotEnoughReplicasAfterAppend
        }));
        assert_eq!(
            ProduceRejection::NotEnoughReplicas { isr: 1, min: 2 }.error_code(),
            ErrorCode::NotEnoughReplicas
        );
    }

    #[test]
    fn waits_time_out_and_fail_on_resign() {
        let mut l = leader(&[1, 2], 0, 0, 1);
        l.on_local_append(5).unwrap();
        l.await_replication(1, 5, 100);
        l.await_replication(2, 5, 300);
        l.tick(100);
        assert_eq!(
            l.take_actions(),
            vec![LeaderAction::ProduceCompleted {
                wait_id: 1,
                outcome: ProduceOutcome::TimedOut
            }]
        );
        assert_eq!(
            l.resign(),
            vec![LeaderAction::ProduceCompleted {
                wait_id: 2,
                outcome: ProduceOutcome::NotLeader
            }]
        );
    }

    #[test]
    fn drain_stops_writes_and_reports_successor_caught_up() {
        let mut l = leader(&[1, 2, 3], 0, 0, 1);
        l.on_local_append(10).unwrap();
        l.on_follower_fetch(2, 7, 1).unwrap();
        l.take_actions();
        l.begin_drain(2).unwrap();
        assert_eq!(l.check_produce(false), Err(ProduceRejection::NotLeader));
        assert!(l.take_actions().is_empty());
        l.on_follower_fetch(2, 10, 2).unwrap();
        let a = l.take_actions();
        assert!(a.contains(&LeaderAction::SuccessorCaughtUp {
            successor: 2,
            log_end_offset: 10
        }));
        l.on_follower_fetch(2, 10, 3).unwrap();
        assert!(!l
            .take_actions()
            .iter()
            .any(|a| matches!(a, LeaderAction::SuccessorCaughtUp { .. })));
        l.abort_drain();
        assert!(l.accepts_writes());
        assert!(l.begin_drain(7).is_err());
    }

    /// Seeded random schedule: invariants hold and the HW never exceeds any ISR
    /// member's LEO.
    #[test]
    fn random_schedule_keeps_invariants() {
        for seed in 0..50u64 {
            let mut rng = crate::replication::test_rng::Rng::new(seed);
            let mut l = leader(&[1, 2, 3], 0, 0, 2);
            let mut leo = [0i64; 4];
            let mut now = 0u64;
            let mut last_hw = 0;
            for _ in 0..500 {
                now += rng.below(2_000);
                match rng.below(4) {
                    0 => {
                        leo[1] += rng.below(5) as i64;
                        l.on_local_append(leo[1]).unwrap();
                    }
                    1 | 2 => {
                        let r = 2 + rng.below(2) as usize;
                        leo[r] = (leo[r] + rng.below(6) as i64).min(leo[1]);
                        l.on_follower_fetch(r as i32, leo[r], now).unwrap();
                    }
                    _ => l.tick(now),
                }
                for a in l.take_actions() {
                    if let LeaderAction::ProposeIsr { isr, .. } = a {
                        if rng.below(4) == 0 {
                            l.on_isr_rejected();
                        } else {
                            let pe = l.partition_epoch() + 1;
                            l.on_isr_committed(isr, pe).unwrap();
                        }
                    }
                }
                let hw = l.high_watermark();
                assert!(hw >= last_hw, "seed {seed}: HW went back");
                last_hw = hw;
                for r in l.isr() {
                    let r_leo = if *r == 1 { leo[1] } else { leo[*r as usize] };
                    assert!(
                        hw <= r_leo,
                        "seed {seed}: HW {hw} beyond ISR member {r} LEO {r_leo}"
                    );
                }
            }
        }
    }
}
