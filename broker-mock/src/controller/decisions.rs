//! The controller's decisions: requests in, metadata records out.
//!
//! Each decision validates the request against [`ControllerState`], builds records,
//! applies them at once (so later records of the same decision see their effect) and
//! queues the entries for the driver, which must persist them
//! ([`Controller::take_entries`]) before it answers the request or publishes metadata.
//! Broker sessions and move start times are soft state kept beside the replicated
//! state, as KRaft keeps heartbeats outside the log.

use std::collections::BTreeMap;

use baton_protocol::acl::{AclBinding, AclBindingFilter};
use baton_protocol::sasl::{ScramCredential, ScramHash};
use baton_protocol::{ErrorCode, Uuid};

use crate::acl::matching;

use super::records::{
    LeaderMoveRecord, ListenerRecord, MetadataLogEntry, MetadataRecord, MoveState,
    PartitionChangeRecord, PartitionRecord, RegisterBrokerRecord, TopicRecord, NO_LEADER,
};
use super::state::{ApplyError, ControllerState, PartitionInfo};

/// Longest topic name Kafka accepts.
pub const MAX_TOPIC_NAME_LEN: usize = 249;

/// Controller settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControllerConfig {
    /// A broker without a heartbeat for longer than this is fenced
    /// (`broker.session.timeout.ms`).
    pub session_timeout_ms: u64,
    /// A planned move not handed over within this time is aborted (the old leader then
    /// accepts writes again, or, in a controlled shutdown, the broker leaves anyway).
    pub move_timeout_ms: u64,
    /// Whether [`Controller::tick`] also restores preferred leaders
    /// (`auto.leader.rebalance.enable`).
    pub auto_preferred_leader: bool,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            session_timeout_ms: 9_000,
            move_timeout_ms: 30_000,
            auto_preferred_leader: true,
        }
    }
}

/// Why a request was refused. The state is unchanged and no record was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ControllerError {
    /// The broker id is not registered.
    #[error("broker {0} is not registered")]
    BrokerNotRegistered(i32),
    /// The heartbeat names an older registration of the broker.
    #[error("stale broker epoch {got} for broker {broker_id} (current {current})")]
    StaleBrokerEpoch {
        /// Broker id.
        broker_id: i32,
        /// Epoch given.
        got: i64,
        /// Current epoch.
        current: i64,
    },
    /// No such topic or partition.
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    /// The requester does not lead the partition.
    #[error("broker {0} is not the leader")]
    NotLeader(i32),
    /// The request's leader epoch is older than the partition's.
    #[error("fenced leader epoch {got} (current {current})")]
    FencedLeaderEpoch {
        /// Epoch given.
        got: i32,
        /// Current epoch.
        current: i32,
    },
    /// The request's leader epoch is newer than the partition's.
    #[error("unknown leader epoch {got} (current {current})")]
    UnknownLeaderEpoch {
        /// Epoch given.
        got: i32,
        /// Current epoch.
        current: i32,
    },
    /// The request's partition epoch is not the current one (AlterPartition).
    #[error("stale partition epoch {got} (current {current})")]
    InvalidUpdateVersion {
        /// Epoch given.
        got: i32,
        /// Current epoch.
        current: i32,
    },
    /// A replica to add is fenced or shutting down.
    #[error("replica {0} is not eligible")]
    IneligibleReplica(i32),
    /// The request is malformed (ISR without the leader, unknown replica, ...).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The replication factor is not positive or exceeds the live brokers.
    #[error("replication factor {requested} with {available} brokers available")]
    InvalidReplicationFactor {
        /// Requested factor.
        requested: i32,
        /// Eligible brokers.
        available: usize,
    },
    /// The partition count is not positive.
    #[error("invalid partition count {0}")]
    InvalidPartitions(i32),
    /// The topic name is empty, too long or has characters outside `[a-zA-Z0-9._-]`.
    #[error("invalid topic name {0:?}")]
    InvalidTopic(String),
    /// A topic with that name (or id) exists.
    #[error("topic {0} already exists")]
    TopicAlreadyExists(String),
    /// No planned move matches the report.
    #[error("no matching leader move in progress")]
    NoMoveInProgress,
    /// The election would change nothing (the preferred replica leads, or an
    /// unclean election for a partition that has a leader).
    #[error("election not needed")]
    ElectionNotNeeded,
    /// The preferred replica is not an eligible member of the ISR.
    #[error("preferred leader {0} is not available")]
    PreferredLeaderNotAvailable(i32),
    /// No replica may lead (none is eligible).
    #[error("no eligible leader available")]
    EligibleLeadersNotAvailable,
    /// A reassignment's target replicas are empty, repeated or not registered.
    #[error("invalid replica assignment: {0}")]
    InvalidReplicaAssignment(String),
    /// A cancellation of a partition that is not being reassigned.
    #[error("no reassignment in progress")]
    NoReassignmentInProgress,
}

impl ControllerError {
    /// The Kafka error code to answer with.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            ControllerError::BrokerNotRegistered(_) => ErrorCode::BrokerIdNotRegistered,
            ControllerError::StaleBrokerEpoch { .. } => ErrorCode::StaleBrokerEpoch,
            ControllerError::UnknownTopicOrPartition => ErrorCode::UnknownTopicOrPartition,
            ControllerError::NotLeader(_) => ErrorCode::NotLeaderOrFollower,
            ControllerError::FencedLeaderEpoch { .. } => ErrorCode::FencedLeaderEpoch,
            ControllerError::UnknownLeaderEpoch { .. } => ErrorCode::UnknownLeaderEpoch,
            ControllerError::InvalidUpdateVersion { .. } => ErrorCode::InvalidUpdateVersion,
            ControllerError::IneligibleReplica(_) => ErrorCode::IneligibleReplica,
            ControllerError::InvalidRequest(_) => ErrorCode::InvalidRequest,
            ControllerError::InvalidReplicationFactor { .. } => ErrorCode::InvalidReplicationFactor,
            ControllerError::InvalidPartitions(_) => ErrorCode::InvalidPartitions,
            ControllerError::InvalidTopic(_) => ErrorCode::InvalidTopicException,
            ControllerError::TopicAlreadyExists(_) => ErrorCode::TopicAlreadyExists,
            ControllerError::NoMoveInProgress => ErrorCode::InvalidRequest,
            ControllerError::ElectionNotNeeded => ErrorCode::ElectionNotNeeded,
            ControllerError::PreferredLeaderNotAvailable(_) => {
                ErrorCode::PreferredLeaderNotAvailable
            }
            ControllerError::EligibleLeadersNotAvailable => ErrorCode::EligibleLeadersNotAvailable,
            ControllerError::InvalidReplicaAssignment(_) => ErrorCode::InvalidReplicaAssignment,
            ControllerError::NoReassignmentInProgress => ErrorCode::NoReassignmentInProgress,
        }
    }
}

/// A broker's heartbeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    /// Broker id.
    pub broker_id: i32,
    /// The epoch returned by [`Controller::register_broker`].
    pub broker_epoch: i64,
    /// The metadata log offset the broker has applied up to (exclusive).
    pub metadata_offset: i64,
    /// The broker wants to shut down (controlled shutdown).
    pub want_shutdown: bool,
}

/// The answer to a heartbeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatReply {
    /// Still fenced (not caught up, or leaving).
    pub fenced: bool,
    /// In controlled shutdown.
    pub in_controlled_shutdown: bool,
    /// Controlled shutdown finished: the broker may stop now.
    pub should_shut_down: bool,
}

/// An AlterPartition request (one partition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartition {
    /// The requesting broker (must lead the partition).
    pub broker_id: i32,
    /// Topic id.
    pub topic_id: Uuid,
    /// Partition index.
    pub partition: i32,
    /// The requester's leader epoch.
    pub leader_epoch: i32,
    /// The partition epoch the proposal is based on.
    pub partition_epoch: i32,
    /// The proposed ISR.
    pub new_isr: Vec<i32>,
    /// Broker epochs of proposed members, where the leader knows them
    /// (AlterPartition v3, KIP-903): a member registered with another epoch now
    /// restarted since the fetches that qualified it, and is refused.
    pub broker_epochs: Vec<(i32, i64)>,
}

/// The controller: replicated state, soft state and the queue of new entries.
#[derive(Debug, Clone)]
pub struct Controller {
    /// What the log describes.
    state: ControllerState,
    /// The epoch stamped on entries written by this controller. Invariant: `>=` every
    /// epoch in the replayed log.
    controller_epoch: i32,
    /// Settings.
    config: ControllerConfig,
    /// Last heartbeat per broker (soft state).
    sessions: BTreeMap<i32, u64>,
    /// When each planned move was requested (soft state).
    move_started: BTreeMap<(Uuid, i32), u64>,
    /// Entries written and not yet taken by the driver.
    outbox: Vec<MetadataLogEntry>,
    /// Elections and ISR changes written since this controller started (soft
    /// state: a replay does not count them again).
    counters: ControllerCounters,
}

/// What a controller counts as it writes partition changes (`metrics`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ControllerCounters {
    /// Changes giving a partition a new live leader.
    pub leader_elections: u64,
    /// Of those, leaders from outside the ISR.
    pub unclean_leader_elections: u64,
    /// Changes removing replicas from an ISR.
    pub isr_shrinks: u64,
    /// Changes adding replicas to an ISR.
    pub isr_expands: u64,
}

impl ControllerCounters {
    /// Counts `change` of a partition that was `before`.
    fn count(&mut self, before: &PartitionInfo, change: &PartitionChangeRecord) {
        if let Some(leader) = change
            .leader
            .filter(|l| *l != NO_LEADER && *l != before.leader)
        {
            self.leader_elections += 1;
            if !before.isr.contains(&leader) {
                self.unclean_leader_elections += 1;
            }
        }
        if let Some(isr) = &change.isr {
            if before.isr.iter().any(|r| !isr.contains(r)) {
                self.isr_shrinks += 1;
            }
            if isr.iter().any(|r| !before.isr.contains(r)) {
                self.isr_expands += 1;
            }
        }
    }
}

impl Controller {
    /// A controller with an empty log.
    pub fn new(controller_epoch: i32, config: ControllerConfig) -> Self {
        Controller {
            state: ControllerState::new(),
            controller_epoch,
            config,
            sessions: BTreeMap::new(),
            move_started: BTreeMap::new(),
            outbox: Vec::new(),
            counters: ControllerCounters::default(),
        }
    }

    /// Rebuilds a controller from its persisted log. Its epoch is one more than the
    /// newest in the log. Every registered broker gets a fresh session starting at
    /// `now_ms`, and moves in progress restart their timeout.
    pub fn recover(
        entries: impl IntoIterator<Item = MetadataLogEntry>,
        config: ControllerConfig,
        now_ms: u64,
    ) -> Result<Self, ApplyError> {
        let mut state = ControllerState::new();
        for e in entries {
            state.apply(&e)?;
        }
        let sessions = state.brokers().map(|b| (b.broker_id, now_ms)).collect();
        let move_started = state.leader_moves().map(|(k, _)| (k, now_ms)).collect();
        Ok(Controller {
            controller_epoch: state.controller_epoch() + 1,
            state,
            config,
            sessions,
            move_started,
            outbox: Vec::new(),
            counters: ControllerCounters::default(),
        })
    }

    /// The replicated state.
    pub fn state(&self) -> &ControllerState {
        &self.state
    }

    /// A copy of a partition's state, for a decision that changes it;
    /// UNKNOWN_TOPIC_OR_PARTITION when there is no such partition.
    pub(super) fn partition_to_change(
        &self,
        topic_id: Uuid,
        partition: i32,
    ) -> Result<PartitionInfo, ControllerError> {
        self.state
            .partition(topic_id, partition)
            .cloned()
            .ok_or(ControllerError::UnknownTopicOrPartition)
    }

    /// Elections and ISR changes this controller wrote since it started.
    pub fn counters(&self) -> ControllerCounters {
        self.counters
    }

    /// This controller's epoch.
    pub fn controller_epoch(&self) -> i32 {
        self.controller_epoch
    }

    /// Removes and returns the entries written since the last call, in order, for the
    /// driver to persist.
    pub fn take_entries(&mut self) -> Vec<MetadataLogEntry> {
        std::mem::take(&mut self.outbox)
    }

    /// Registers a broker process. A new registration starts fenced; it is unfenced by a
    /// heartbeat once the broker has applied the metadata log up to its registration.
    /// The same incarnation registering again gets its existing epoch back. A new
    /// incarnation of a registered broker (it restarted) is fenced first, moving its
    /// leaderships, then registered. Returns the broker epoch.
    ///
    /// Deviation: KRaft refuses a new incarnation while the old session is alive
    /// (DUPLICATE_BROKER_REGISTRATION); here the new incarnation wins at once, since a
    /// restarted process proves the old one is gone.
    pub fn register_broker(
        &mut self,
        broker_id: i32,
        incarnation_id: u64,
        host: &str,
        port: u16,
        now_ms: u64,
    ) -> Result<i64, ControllerError> {
        self.register_broker_with_listeners(
            broker_id,
            incarnation_id,
            host,
            port,
            Vec::new(),
            now_ms,
        )
    }

    /// [`Controller::register_broker`] for a broker with further listeners
    /// (at most [`MAX_EXTRA_LISTENERS`](super::records::MAX_EXTRA_LISTENERS)).
    pub fn register_broker_with_listeners(
        &mut self,
        broker_id: i32,
        incarnation_id: u64,
        host: &str,
        port: u16,
        listeners: Vec<ListenerRecord>,
        now_ms: u64,
    ) -> Result<i64, ControllerError> {
        self.register_broker_in_rack(
            broker_id,
            incarnation_id,
            host,
            port,
            listeners,
            None,
            now_ms,
        )
    }

    /// [`Controller::register_broker_with_listeners`] for a broker in `rack`
    /// (at most [`MAX_RACK_BYTES`](super::records::MAX_RACK_BYTES)).
    #[allow(clippy::too_many_arguments)]
    pub fn register_broker_in_rack(
        &mut self,
        broker_id: i32,
        incarnation_id: u64,
        host: &str,
        port: u16,
        listeners: Vec<ListenerRecord>,
        rack: Option<String>,
        now_ms: u64,
    ) -> Result<i64, ControllerError> {
        if rack
            .as_ref()
            .is_some_and(|r| r.len() > super::records::MAX_RACK_BYTES)
        {
            return Err(ControllerError::InvalidRequest("rack too long".into()));
        }
        if listeners.len() > super::records::MAX_EXTRA_LISTENERS
            || listeners
                .iter()
                .any(|l| l.name.len() > 255 || l.host.len() > u16::MAX as usize)
        {
            return Err(ControllerError::InvalidRequest(
                "too many listeners, or a listener name or host too long".into(),
            ));
        }
        if broker_id < 0 {
            return Err(ControllerError::InvalidRequest(format!(
                "negative broker id {broker_id}"
            )));
        }
        if host.len() > u16::MAX as usize {
            return Err(ControllerError::InvalidRequest("host too long".into()));
        }
        if let Some(b) = self.state.broker(broker_id) {
            if b.incarnation_id == incarnation_id {
                self.sessions.insert(broker_id, now_ms);
                return Ok(b.broker_epoch);
            }
            if !b.fenced {
                self.fence(broker_id);
            }
        }
        let epoch = self.state.next_offset();
        self.append(MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id,
            incarnation_id,
            host: host.to_owned(),
            port,
            listeners,
            rack,
        }));
        self.sessions.insert(broker_id, now_ms);
        Ok(epoch)
    }

    /// Handles a heartbeat: refreshes the session, unfences a caught-up broker (and
    /// elects it where partitions are offline), and runs controlled shutdown.
    pub fn heartbeat(
        &mut self,
        hb: Heartbeat,
        now_ms: u64,
    ) -> Result<HeartbeatReply, ControllerError> {
        let b = self
            .state
            .broker(hb.broker_id)
            .ok_or(ControllerError::BrokerNotRegistered(hb.broker_id))?;
        if b.broker_epoch != hb.broker_epoch {
            return Err(ControllerError::StaleBrokerEpoch {
                broker_id: hb.broker_id,
                got: hb.broker_epoch,
                current: b.broker_epoch,
            });
        }
        let (fenced, shutting_down, epoch) = (b.fenced, b.in_controlled_shutdown, b.broker_epoch);
        self.sessions.insert(hb.broker_id, now_ms);

        if hb.want_shutdown {
            if fenced {
                return Ok(HeartbeatReply {
                    fenced: true,
                    in_controlled_shutdown: false,
                    should_shut_down: true,
                });
            }
            if !shutting_down {
                self.begin_controlled_shutdown(hb.broker_id, now_ms);
            }
            if self.shutdown_complete(hb.broker_id) {
                self.fence(hb.broker_id);
                return Ok(HeartbeatReply {
                    fenced: true,
                    in_controlled_shutdown: false,
                    should_shut_down: true,
                });
            }
            return Ok(HeartbeatReply {
                fenced: false,
                in_controlled_shutdown: true,
                should_shut_down: false,
            });
        }

        if fenced && hb.metadata_offset > epoch {
            self.append(MetadataRecord::UnfenceBroker {
                broker_id: hb.broker_id,
            });
            self.elect_offline_partitions();
        }
        let b = self.state.broker(hb.broker_id).expect("registered");
        Ok(HeartbeatReply {
            fenced: b.fenced,
            in_controlled_shutdown: b.in_controlled_shutdown,
            should_shut_down: false,
        })
    }

    /// Time passed: fences brokers whose session expired, aborts planned moves that
    /// took too long, and (if configured) restores preferred leaders.
    pub fn tick(&mut self, now_ms: u64) {
        let expired: Vec<i32> = self
            .state
            .brokers()
            .filter(|b| !b.fenced)
            .filter(|b| {
                let last = self.sessions.get(&b.broker_id).copied().unwrap_or(0);
                now_ms.saturating_sub(last) > self.config.session_timeout_ms
            })
            .map(|b| b.broker_id)
            .collect();
        for id in expired {
            self.fence(id);
        }
        let stuck: Vec<(Uuid, i32)> = self
            .move_started
            .iter()
            .filter(|(_, &t)| now_ms.saturating_sub(t) > self.config.move_timeout_ms)
            .map(|(k, _)| *k)
            .collect();
        for key in stuck {
            self.abort_move(key);
        }
        if self.config.auto_preferred_leader {
            self.restore_preferred_leaders(now_ms);
        }
    }

    /// AlterPartition: the leader proposes a new ISR. Rejected when the requester is
    /// not the leader, its leader epoch or the partition epoch is stale, the ISR drops
    /// the leader or names non-replicas, or an added replica is not eligible. Returns
    /// the partition after the change.
    pub fn alter_partition(
        &mut self,
        req: &AlterPartition,
    ) -> Result<PartitionInfo, ControllerError> {
        let key = (req.topic_id, req.partition);
        let p = self
            .state
            .partition(req.topic_id, req.partition)
            .ok_or(ControllerError::UnknownTopicOrPartition)?;
        if p.leader != req.broker_id {
            return Err(ControllerError::NotLeader(req.broker_id));
        }
        if req.leader_epoch < p.leader_epoch {
            return Err(ControllerError::FencedLeaderEpoch {
                got: req.leader_epoch,
                current: p.leader_epoch,
            });
        }
        if req.leader_epoch > p.leader_epoch {
            return Err(ControllerError::UnknownLeaderEpoch {
                got: req.leader_epoch,
                current: p.leader_epoch,
            });
        }
        if req.partition_epoch != p.partition_epoch {
            return Err(ControllerError::InvalidUpdateVersion {
                got: req.partition_epoch,
                current: p.partition_epoch,
            });
        }
        if !req.new_isr.contains(&p.leader) {
            return Err(ControllerError::InvalidRequest(
                "the ISR must contain the leader".into(),
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for r in &req.new_isr {
            if !p.replicas.contains(r) || !seen.insert(*r) {
                return Err(ControllerError::InvalidRequest(format!(
                    "ISR member {r} is not a replica or is repeated"
                )));
            }
        }
        for r in &req.new_isr {
            if !p.isr.contains(r) && !self.state.is_eligible(*r) {
                return Err(ControllerError::IneligibleReplica(*r));
            }
        }
        for (r, epoch) in &req.broker_epochs {
            let current = self.state.broker(*r).map(|b| b.broker_epoch);
            if req.new_isr.contains(r) && current != Some(*epoch) {
                return Err(ControllerError::IneligibleReplica(*r));
            }
        }
        if req.new_isr != p.isr {
            let removes_target = self
                .state
                .leader_move(req.topic_id, req.partition)
                .is_some_and(|m| !req.new_isr.contains(&m.to));
            if removes_target {
                self.abort_move(key);
            }
            self.append(MetadataRecord::PartitionChange(PartitionChangeRecord {
                topic_id: req.topic_id,
                partition: req.partition,
                isr: Some(req.new_isr.clone()),
                leader: None,
            }));
            self.complete_reassignment_if_caught_up(key);
        }
        Ok(self.partition_info(key))
    }

    /// Asks for a planned move of the leadership to `to` (an eligible ISR member).
    /// The driver tells the current leader to stop writes; see
    /// [`report_drain_started`](Self::report_drain_started).
    pub fn request_leader_move(
        &mut self,
        topic_id: Uuid,
        partition: i32,
        to: i32,
        now_ms: u64,
    ) -> Result<(), ControllerError> {
        let p = self
            .state
            .partition(topic_id, partition)
            .ok_or(ControllerError::UnknownTopicOrPartition)?;
        if p.is_offline() || p.leader == to {
            return Err(ControllerError::InvalidRequest(
                "no leader to move, or already the leader".into(),
            ));
        }
        if !p.isr.contains(&to) || !self.state.is_eligible(to) {
            return Err(ControllerError::IneligibleReplica(to));
        }
        if self.state.leader_move(topic_id, partition).is_some() {
            return Err(ControllerError::InvalidRequest(
                "a move is already in progress".into(),
            ));
        }
        let from = p.leader;
        self.append(MetadataRecord::LeaderMove(LeaderMoveRecord {
            topic_id,
            partition,
            from,
            to,
            state: MoveState::Requested,
        }));
        self.move_started.insert((topic_id, partition), now_ms);
        Ok(())
    }

    /// The old leader stopped accepting writes; its log ends at `log_end_offset`.
    /// Requested -> Draining.
    pub fn report_drain_started(
        &mut self,
        broker_id: i32,
        topic_id: Uuid,
        partition: i32,
        log_end_offset: i64,
    ) -> Result<(), ControllerError> {
        let m = self
            .state
            .leader_move(topic_id, partition)
            .copied()
            .ok_or(ControllerError::NoMoveInProgress)?;
        if m.from != broker_id || m.state != MoveState::Requested || log_end_offset < 0 {
            return Err(ControllerError::NoMoveInProgress);
        }
        self.append(MetadataRecord::LeaderMove(LeaderMoveRecord {
            topic_id,
            partition,
            from: m.from,
            to: m.to,
            state: MoveState::Draining {
                target_log_end_offset: log_end_offset,
            },
        }));
        Ok(())
    }

    /// The old leader saw the successor's LEO reach `log_end_offset`. When that covers
    /// the drain target, Draining -> HandedOver and the successor becomes leader (a
    /// broker in controlled shutdown also leaves the ISR). Returns whether the handover
    /// happened.
    pub fn report_successor_caught_up(
        &mut self,
        broker_id: i32,
        topic_id: Uuid,
        partition: i32,
        successor: i32,
        log_end_offset: i64,
    ) -> Result<bool, ControllerError> {
        let m = self
            .state
            .leader_move(topic_id, partition)
            .copied()
            .ok_or(ControllerError::NoMoveInProgress)?;
        let MoveState::Draining {
            target_log_end_offset,
        } = m.state
        else {
            return Err(ControllerError::NoMoveInProgress);
        };
        if m.from != broker_id || m.to != successor {
            return Err(ControllerError::NoMoveInProgress);
        }
        if log_end_offset < target_log_end_offset {
            return Ok(false);
        }
        if !self.state.is_eligible(successor) {
            self.abort_move((topic_id, partition));
            return Ok(false);
        }
        self.append(MetadataRecord::LeaderMove(LeaderMoveRecord {
            topic_id,
            partition,
            from: m.from,
            to: m.to,
            state: MoveState::HandedOver,
        }));
        self.move_started.remove(&(topic_id, partition));
        let p = self.partition_info((topic_id, partition));
        let leaving = self
            .state
            .broker(m.from)
            .is_some_and(|b| b.in_controlled_shutdown);
        let isr = leaving.then(|| p.isr.iter().copied().filter(|r| *r != m.from).collect());
        self.append(MetadataRecord::PartitionChange(PartitionChangeRecord {
            topic_id,
            partition,
            isr,
            leader: Some(successor),
        }));
        Ok(true)
    }

    /// Requests a planned move back to the preferred (first) replica wherever it is
    /// eligible, in the ISR and not the leader. Returns how many moves were requested.
    pub fn restore_preferred_leaders(&mut self, now_ms: u64) -> usize {
        let candidates: Vec<(Uuid, i32, i32)> = self
            .state
            .partitions()
            .filter(|p| !p.is_offline())
            .filter(|p| self.state.leader_move(p.topic_id, p.partition).is_none())
            .filter_map(|p| {
                let pref = p.preferred_leader()?;
                let ok = pref != p.leader
                    && p.isr.contains(&pref)
                    && self.state.is_eligible(pref)
                    && self.state.is_eligible(p.leader);
                ok.then_some((p.topic_id, p.partition, pref))
            })
            .collect();
        let n = candidates.len();
        for (topic_id, partition, to) in candidates {
            self.request_leader_move(topic_id, partition, to, now_ms)
                .expect("candidate checked");
        }
        n
    }

    /// A broker found corruption in `replica`'s copy of the partition, or its log went
    /// offline after a storage failure: remove it from the
    /// ISR and, if it leads, elect another healthy leader (clean first, unclean if the
    /// topic allows); offline if none. Returns the partition after the change.
    pub fn report_corrupt_replica(
        &mut self,
        topic_id: Uuid,
        partition: i32,
        replica: i32,
    ) -> Result<PartitionInfo, ControllerError> {
        let key = (topic_id, partition);
        let p = self
            .state
            .partition(topic_id, partition)
            .ok_or(ControllerError::UnknownTopicOrPartition)?;
        if !p.replicas.contains(&replica) {
            return Err(ControllerError::InvalidRequest(format!(
                "{replica} is not a replica"
            )));
        }
        if let Some(m) = self.state.leader_move(topic_id, partition) {
            if m.from == replica || m.to == replica {
                self.abort_move(key);
            }
        }
        let p = self.partition_info(key);
        if p.leader == replica {
            self.elect_excluding(key, replica, true);
        } else if p.isr.contains(&replica) {
            let isr = p.isr.iter().copied().filter(|r| *r != replica).collect();
            self.append(MetadataRecord::PartitionChange(PartitionChangeRecord {
                topic_id,
                partition,
                isr: Some(isr),
                leader: None,
            }));
        }
        Ok(self.partition_info(key))
    }

    /// Creates a topic with `partitions` partitions of `replication_factor` replicas,
    /// placed round-robin over eligible brokers (ascending id; the starting broker
    /// rotates with the number of topics so leaders spread). The first replica leads;
    /// the ISR is all replicas. `topic_id` comes from the caller (the driver draws it
    /// at random; this core has no randomness).
    pub fn create_topic(
        &mut self,
        name: &str,
        topic_id: Uuid,
        partitions: i32,
        replication_factor: i32,
        configs: Vec<(String, String)>,
    ) -> Result<(), ControllerError> {
        let valid_name = !name.is_empty()
            && name.len() <= MAX_TOPIC_NAME_LEN
            && name != "."
            && name != ".."
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-');
        if !valid_name {
            return Err(ControllerError::InvalidTopic(name.to_owned()));
        }
        if self.state.topic_by_name(name).is_some() {
            return Err(ControllerError::TopicAlreadyExists(name.to_owned()));
        }
        if topic_id == Uuid::ZERO || self.state.topic(topic_id).is_some() {
            return Err(ControllerError::InvalidRequest(
                "topic id is zero or in use".into(),
            ));
        }
        if configs
            .iter()
            .any(|(k, v)| k.len() > u16::MAX as usize || v.len() > u16::MAX as usize)
        {
            return Err(ControllerError::InvalidRequest("config too long".into()));
        }
        if partitions <= 0 {
            return Err(ControllerError::InvalidPartitions(partitions));
        }
        let live = self.state.eligible_brokers();
        if replication_factor <= 0 || replication_factor as usize > live.len() {
            return Err(ControllerError::InvalidReplicationFactor {
                requested: replication_factor,
                available: live.len(),
            });
        }
        let n = live.len();
        let start = self.state.topics().count() % n;
        self.append(MetadataRecord::Topic(TopicRecord {
            name: name.to_owned(),
            topic_id,
            configs,
        }));
        for p in 0..partitions {
            let replicas: Vec<i32> = (0..replication_factor as usize)
                .map(|i| live[(start + p as usize + i) % n])
                .collect();
            self.append(MetadataRecord::Partition(PartitionRecord {
                topic_id,
                partition: p,
                leader: replicas[0],
                isr: replicas.clone(),
                replicas,
                leader_epoch: 0,
                partition_epoch: 0,
            }));
        }
        Ok(())
    }

    /// Sets topic `name`'s config overrides to `configs` (already checked, see
    /// `config_change.rs`), writing one TopicConfig record per key that changes.
    pub fn set_topic_configs(
        &mut self,
        name: &str,
        configs: &BTreeMap<String, String>,
    ) -> Result<(), ControllerError> {
        let topic = self
            .state
            .topic_by_name(name)
            .ok_or(ControllerError::UnknownTopicOrPartition)?;
        let id = topic.topic_id;
        if configs
            .iter()
            .any(|(k, v)| k.len() > u16::MAX as usize || v.len() > u16::MAX as usize)
        {
            return Err(ControllerError::InvalidRequest("config too long".into()));
        }
        let current: BTreeMap<String, String> = topic.configs.iter().cloned().collect();
        let mut records = Vec::new();
        for k in current.keys().filter(|k| !configs.contains_key(*k)) {
            records.push(MetadataRecord::TopicConfig {
                topic_id: id,
                key: k.clone(),
                value: None,
            });
        }
        for (k, v) in configs.iter().filter(|(k, v)| current.get(*k) != Some(*v)) {
            records.push(MetadataRecord::TopicConfig {
                topic_id: id,
                key: k.clone(),
                value: Some(v.clone()),
            });
        }
        for r in records {
            self.append(r);
        }
        Ok(())
    }

    /// Sets the cluster-wide dynamic broker defaults to `configs` (already
    /// checked, see `config_change.rs`), one BrokerDefaultConfig record per key
    /// that changes.
    pub fn set_broker_defaults(
        &mut self,
        configs: &BTreeMap<String, String>,
    ) -> Result<(), ControllerError> {
        if configs
            .iter()
            .any(|(k, v)| k.len() > u16::MAX as usize || v.len() > u16::MAX as usize)
        {
            return Err(ControllerError::InvalidRequest("config too long".into()));
        }
        let current = self.state.broker_defaults().clone();
        for k in current.keys().filter(|k| !configs.contains_key(*k)) {
            self.append(MetadataRecord::BrokerDefaultConfig {
                key: k.clone(),
                value: None,
            });
        }
        for (k, v) in configs.iter().filter(|(k, v)| current.get(*k) != Some(*v)) {
            self.append(MetadataRecord::BrokerDefaultConfig {
                key: k.clone(),
                value: Some(v.clone()),
            });
        }
        Ok(())
    }

    /// Grows topic `name` to `count` partitions (CreatePartitions). `assignments`,
    /// if given, place each new partition (preferred leader first); else the new
    /// partitions go round-robin over the eligible brokers with the replication
    /// factor of partition 0. Each new partition is led by its first replica.
    /// With `validate_only` nothing is written. Refusals carry Kafka's error code
    /// and a message.
    pub fn create_partitions(
        &mut self,
        name: &str,
        count: i32,
        assignments: Option<&[Vec<i32>]>,
        validate_only: bool,
    ) -> Result<(), (ErrorCode, String)> {
        let topic = self.state.topic_by_name(name).ok_or_else(|| {
            (
                ErrorCode::UnknownTopicOrPartition,
                format!("Topic {name} does not exist."),
            )
        })?;
        let (id, have) = (topic.topic_id, topic.partitions);
        if count == have {
            return Err((
                ErrorCode::InvalidPartitions,
                format!("Topic already has {have} partitions."),
            ));
        }
        if count < have {
            return Err((
                ErrorCode::InvalidPartitions,
                format!(
                    "Topic currently has {have} partitions, which is higher than the                      requested {count}."
                ),
            ));
        }
        let added = (count - have) as usize;
        let rf = self
            .state
            .partition(id, 0)
            .map_or(1, |p| p.replicas.len().max(1));
        let live = self.state.eligible_brokers();
        let placed: Vec<Vec<i32>> = match assignments {
            Some(a) => {
                if a.len() != added {
                    return Err((
                        ErrorCode::InvalidReplicaAssignment,
                        format!(
                            "Attempted to add {added} additional partitions, but {}                              assignments were supplied.",
                            a.len()
                        ),
                    ));
                }
                for (i, replicas) in a.iter().enumerate() {
                    let p = have as usize + i;
                    if replicas.len() != rf {
                        return Err((
                            ErrorCode::InvalidReplicaAssignment,
                            format!(
                                "The assignment of partition {p} has {} replicas; the topic's                                  replication factor is {rf}.",
                                replicas.len()
                            ),
                        ));
                    }
                    let mut seen = std::collections::HashSet::new();
                    if let Some(b) = replicas.iter().find(|b| !seen.insert(**b)) {
                        return Err((
                            ErrorCode::InvalidReplicaAssignment,
                            format!("The assignment of partition {p} names broker {b} twice."),
                        ));
                    }
                    if let Some(b) = replicas.iter().find(|b| !live.contains(b)) {
                        return Err((
                            ErrorCode::InvalidReplicaAssignment,
                            format!(
                                "The assignment of partition {p} names broker {b}, which is                                  not a live broker of the cluster."
                            ),
                        ));
                    }
                }
                a.to_vec()
            }
            None => {
                if rf > live.len() {
                    return Err((
                        ErrorCode::InvalidReplicationFactor,
                        format!(
                            "Replication factor {rf} is larger than the {} live brokers.",
                            live.len()
                        ),
                    ));
                }
                let n = live.len();
                (0..added)
                    .map(|i| (0..rf).map(|r| live[(have as usize + i + r) % n]).collect())
                    .collect()
            }
        };
        if validate_only {
            return Ok(());
        }
        for (i, replicas) in placed.into_iter().enumerate() {
            self.append(MetadataRecord::Partition(PartitionRecord {
                topic_id: id,
                partition: have + i as i32,
                leader: replicas[0],
                isr: replicas.clone(),
                replicas,
                leader_epoch: 0,
                partition_epoch: 0,
            }));
        }
        Ok(())
    }

    /// Deletes a topic by name; returns its id.
    pub fn delete_topic(&mut self, name: &str) -> Result<Uuid, ControllerError> {
        let id = self
            .state
            .topic_by_name(name)
            .map(|t| t.topic_id)
            .ok_or(ControllerError::UnknownTopicOrPartition)?;
        self.move_started.retain(|(t, _), _| *t != id);
        self.append(MetadataRecord::RemoveTopic { topic_id: id });
        Ok(id)
    }

    /// Adds an ACL binding (already checked, see `handlers/create_acls.rs`); adding
    /// one that exists changes nothing.
    pub fn add_acl(&mut self, binding: AclBinding) {
        if !self.state.acls().contains(&binding) {
            self.append(MetadataRecord::AccessControlEntry(binding));
        }
    }

    /// Removes the ACL bindings `filter` selects and returns them.
    pub fn remove_acls(&mut self, filter: &AclBindingFilter) -> Vec<AclBinding> {
        let gone: Vec<AclBinding> = matching(self.state.acls(), filter).cloned().collect();
        for b in &gone {
            self.append(MetadataRecord::RemoveAccessControlEntry(b.clone()));
        }
        gone
    }

    /// Sets `user`'s SCRAM credential for its mechanism (already checked, see
    /// `handlers/alter_user_scram_credentials.rs`); `false`, writing nothing, when
    /// the cluster holds `max` credentials and this one is new.
    pub fn upsert_scram(&mut self, user: &str, credential: ScramCredential, max: usize) -> bool {
        let creds = self.state.scram_credentials();
        let key = (user.to_owned(), credential.hash().kafka_type());
        if !creds.contains_key(&key) && creds.len() >= max {
            return false;
        }
        self.append(MetadataRecord::UserScramCredential {
            name: user.to_owned(),
            credential,
        });
        true
    }

    /// Removes `user`'s SCRAM credential for `hash`, if it has one.
    pub fn remove_scram(&mut self, user: &str, hash: ScramHash) {
        let key = (user.to_owned(), hash.kafka_type());
        if self.state.scram_credentials().contains_key(&key) {
            self.append(MetadataRecord::RemoveUserScramCredential {
                name: user.to_owned(),
                hash,
            });
        }
    }

    /// Stamps, applies and queues a record. Records are built from validated state, so
    /// a failure to apply is a bug.
    pub(super) fn append(&mut self, record: MetadataRecord) {
        if let MetadataRecord::PartitionChange(c) = &record {
            if let Some(before) = self.state.partition(c.topic_id, c.partition) {
                self.counters.count(before, c);
            }
        }
        let entry = MetadataLogEntry {
            offset: self.state.next_offset(),
            controller_epoch: self.controller_epoch,
            record,
        };
        if let Err(e) = self.state.apply(&entry) {
            panic!("controller built an inapplicable record {entry:?}: {e}");
        }
        self.outbox.push(entry);
    }

    pub(super) fn partition_info(&self, key: (Uuid, i32)) -> PartitionInfo {
        self.state
            .partition(key.0, key.1)
            .expect("partition exists")
            .clone()
    }

    /// Fences a broker: aborts moves it takes part in, moves its leaderships (clean
    /// from the ISR, unclean if the topic allows, else offline keeping it in the ISR so
    /// it can lead again when it returns), removes it from other ISRs, then writes
    /// FenceBroker.
    fn fence(&mut self, broker_id: i32) {
        let involved: Vec<(Uuid, i32)> = self
            .state
            .leader_moves()
            .filter(|(_, m)| m.from == broker_id || m.to == broker_id)
            .map(|(k, _)| k)
            .collect();
        for key in involved {
            self.abort_move(key);
        }
        let parts: Vec<PartitionInfo> = self
            .state
            .partitions()
            .filter(|p| p.leader == broker_id || p.isr.contains(&broker_id))
            .cloned()
            .collect();
        for p in parts {
            let key = (p.topic_id, p.partition);
            if p.leader == broker_id {
                self.elect_excluding(key, broker_id, false);
            } else if p.isr.len() > 1 {
                let isr = p.isr.iter().copied().filter(|r| *r != broker_id).collect();
                self.append(MetadataRecord::PartitionChange(PartitionChangeRecord {
                    topic_id: p.topic_id,
                    partition: p.partition,
                    isr: Some(isr),
                    leader: None,
                }));
            }
        }
        self.append(MetadataRecord::FenceBroker { broker_id });
    }

    /// Replaces leader `old` of a partition. Clean: the first eligible ISR member in
    /// replica order. Unclean (topic option): the first eligible replica, with the ISR
    /// reset to it. None: offline; `old` stays in the ISR unless `drop_old` (it is
    /// corrupt), so that it can lead again when it returns healthy.
    fn elect_excluding(&mut self, key: (Uuid, i32), old: i32, drop_old: bool) {
        let p = self.partition_info(key);
        let unclean = self
            .state
            .topic(key.0)
            .is_some_and(|t| t.unclean_election());
        let clean = p
            .replicas
            .iter()
            .copied()
            .find(|r| *r != old && p.isr.contains(r) && self.state.is_eligible(*r));
        let change = if let Some(c) = clean {
            let isr = p.isr.iter().copied().filter(|r| *r != old).collect();
            PartitionChangeRecord {
                topic_id: key.0,
                partition: key.1,
                isr: Some(isr),
                leader: Some(c),
            }
        } else if let Some(u) = p
            .replicas
            .iter()
            .copied()
            .find(|r| unclean && *r != old && self.state.is_eligible(*r))
        {
            PartitionChangeRecord {
                topic_id: key.0,
                partition: key.1,
                isr: Some(vec![u]),
                leader: Some(u),
            }
        } else {
            let isr = if drop_old {
                p.isr.iter().copied().filter(|r| *r != old).collect()
            } else {
                p.isr.clone()
            };
            PartitionChangeRecord {
                topic_id: key.0,
                partition: key.1,
                isr: Some(isr),
                leader: Some(NO_LEADER),
            }
        };
        self.append(MetadataRecord::PartitionChange(change));
    }

    /// Elects leaders for offline partitions: an eligible ISR member (preferred order),
    /// or with the topic's unclean option any eligible replica.
    fn elect_offline_partitions(&mut self) {
        let offline: Vec<(Uuid, i32)> = self
            .state
            .partitions()
            .filter(|p| p.is_offline())
            .map(|p| (p.topic_id, p.partition))
            .collect();
        for key in offline {
            let p = self.partition_info(key);
            let unclean = self
                .state
                .topic(key.0)
                .is_some_and(|t| t.unclean_election());
            let clean = p
                .replicas
                .iter()
                .copied()
                .find(|r| p.isr.contains(r) && self.state.is_eligible(*r));
            if let Some(c) = clean {
                self.append(MetadataRecord::PartitionChange(PartitionChangeRecord {
                    topic_id: key.0,
                    partition: key.1,
                    isr: None,
                    leader: Some(c),
                }));
            } else if unclean {
                if let Some(u) = p
                    .replicas
                    .iter()
                    .copied()
                    .find(|r| self.state.is_eligible(*r))
                {
                    self.append(MetadataRecord::PartitionChange(PartitionChangeRecord {
                        topic_id: key.0,
                        partition: key.1,
                        isr: Some(vec![u]),
                        leader: Some(u),
                    }));
                }
            }
        }
    }

    /// Starts controlled shutdown: mark the broker, request a planned move for each
    /// leadership that has an eligible ISR successor, and remove it from the ISRs it
    /// follows in.
    fn begin_controlled_shutdown(&mut self, broker_id: i32, now_ms: u64) {
        // Moves toward this broker (preferred restore) are abandoned.
        let toward: Vec<(Uuid, i32)> = self
            .state
            .leader_moves()
            .filter(|(_, m)| m.to == broker_id)
            .map(|(k, _)| k)
            .collect();
        for key in toward {
            self.abort_move(key);
        }
        self.append(MetadataRecord::BrokerShutdownRequested { broker_id });
        let parts: Vec<PartitionInfo> = self
            .state
            .partitions()
            .filter(|p| p.leader == broker_id || p.isr.contains(&broker_id))
            .cloned()
            .collect();
        for p in parts {
            if p.leader == broker_id {
                if self.state.leader_move(p.topic_id, p.partition).is_some() {
                    continue; // an existing move away from it carries on
                }
                let successor =
                    p.replicas.iter().copied().find(|r| {
                        *r != broker_id && p.isr.contains(r) && self.state.is_eligible(*r)
                    });
                if let Some(to) = successor {
                    self.request_leader_move(p.topic_id, p.partition, to, now_ms)
                        .expect("successor checked");
                }
            } else if p.isr.len() > 1 {
                let isr = p.isr.iter().copied().filter(|r| *r != broker_id).collect();
                self.append(MetadataRecord::PartitionChange(PartitionChangeRecord {
                    topic_id: p.topic_id,
                    partition: p.partition,
                    isr: Some(isr),
                    leader: None,
                }));
            }
        }
    }

    /// Whether a broker in controlled shutdown has no planned move left (leaderships
    /// without a successor are left to go offline when it is fenced).
    fn shutdown_complete(&self, broker_id: i32) -> bool {
        !self.state.leader_moves().any(|(_, m)| m.from == broker_id)
    }

    pub(super) fn abort_move(&mut self, key: (Uuid, i32)) {
        self.move_started.remove(&key);
        if let Some(m) = self.state.leader_move(key.0, key.1).copied() {
            self.append(MetadataRecord::LeaderMove(LeaderMoveRecord {
                topic_id: key.0,
                partition: key.1,
                from: m.from,
                to: m.to,
                state: MoveState::Aborted,
            }));
        }
    }
}
