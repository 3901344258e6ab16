//! What the application side and the membership task share: the coordinator's
//! whereabouts, the member's identity and generation, and the offset bookkeeping,
//! plus the requests that need them (FindCoordinator, OffsetCommit, OffsetFetch).
//!
//! Invariant: a committed offset never decreases. Commits are serialised by one
//! lock, each commit picks its offsets while holding it, and an offset is sent only
//! if it is above the last one acknowledged (or fetched) for its partition.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use baton_protocol::messages::{
    FindCoordinatorRequest, OffsetCommitRequest, OffsetCommitRequestPartition,
    OffsetCommitRequestTopic, OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
};
use baton_protocol::ErrorCode;
use tokio::time::Instant;

use super::position::PositionCell;
use super::{GroupError, TopicPartition};
use crate::backoff::Backoff;
use crate::client::{Client, ClientError};
use crate::connection::Connection;
use crate::metrics::ConsumerMeter;

/// The member's standing in the group.
#[derive(Debug)]
pub(crate) struct State {
    /// The coordinator's node id, `None` until found (or after it failed).
    pub(crate) coordinator: Option<i32>,
    /// Bumped whenever a coordinator request fails, so the dedicated connections
    /// are opened afresh.
    coordinator_epoch: u64,
    /// Empty until the coordinator assigns one.
    pub(crate) member_id: String,
    /// -1 outside a generation.
    pub(crate) generation: i32,
    /// What the group protocol says this member owns; only these are committed.
    pub(crate) owned: BTreeSet<TopicPartition>,
    /// Positions the application has finished with, per assigned partition (with
    /// the leader epoch of the record before each): what automatic and plain
    /// [`commit`](super::GroupConsumer::commit) calls commit. The consumer updates
    /// a partition's cell without this lock as it hands out records.
    pub(crate) positions: HashMap<TopicPartition, Arc<PositionCell>>,
    /// The highest offset known committed per partition (acknowledged by an
    /// OffsetCommit, or found by OffsetFetch). Never decreases while the partition is
    /// owned.
    pub(crate) committed: HashMap<TopicPartition, i64>,
    /// The leader epoch of the record before a position or committed offset
    /// (KIP-320), with that offset: committed with it (OffsetCommit
    /// `committed_leader_epoch`), and used to validate a position resumed from a
    /// committed offset, found by OffsetFetch. Applies only while its offset is
    /// the one meant; the epoch of a finished position is in its
    /// [`PositionCell`].
    pub(crate) leader_epochs: HashMap<TopicPartition, (i64, i32)>,
    /// Set once, when the membership task stops for good.
    pub(crate) fatal: Option<GroupError>,
}

/// Shared between the consumer, its membership task and its auto-commit task.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) client: Client,
    pub(crate) group_id: String,
    pub(crate) instance_id: Option<String>,
    /// The wait between retries of a group request (the consumer's `retry_backoff`).
    pub(crate) retry_backoff: Duration,
    /// `retry_backoff`, fixed and jittered: commit and offset-fetch retries, and
    /// the group consumer's retries of start-offset resolution.
    pub(crate) retry: Backoff,
    state: Mutex<State>,
    /// Serialises commits, which is what keeps them from overtaking each other.
    commit_lock: tokio::sync::Mutex<()>,
    /// Single-flight FindCoordinator.
    find_lock: tokio::sync::Mutex<()>,
    /// The member's own connections to the coordinator, one per [`Lane`], with the
    /// node and coordinator epoch they were opened for.
    lanes: [tokio::sync::Mutex<Option<(i32, u64, Connection)>>; 2],
    /// The member's metrics (rebalances, commits; shared with its fetch task).
    pub(crate) meter: Arc<ConsumerMeter>,
}

/// Which of the member's own coordinator connections a request uses.
///
/// Brokers answer one request per connection at a time, and the coordinator holds
/// JoinGroup and SyncGroup until the whole group has arrived; on a connection
/// shared with other members of the group (consumers built on one [`Client`]),
/// their heartbeats would wait behind it and never learn of the rebalance. Kafka's
/// consumer likewise talks to its coordinator on a connection of its own.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Lane {
    /// JoinGroup, SyncGroup, Heartbeat.
    Membership = 0,
    /// OffsetCommit, OffsetFetch, and the LeaveGroup of `close` (not stuck behind
    /// a held JoinGroup).
    Offsets = 1,
}

/// Outcome of one commit attempt that did not succeed.
enum CommitAttempt {
    /// Try again after a backoff (coordinator moved, connection failed).
    Retry(GroupError),
    /// Give up with this error.
    Fail(GroupError),
}

impl Shared {
    pub(crate) fn new(
        client: Client,
        group_id: String,
        instance_id: Option<String>,
        retry_backoff: Duration,
        meter: Arc<ConsumerMeter>,
    ) -> Self {
        Shared {
            meter,
            client,
            group_id,
            instance_id,
            retry_backoff,
            retry: Backoff::fixed(retry_backoff),
            state: Mutex::new(State {
                coordinator: None,
                coordinator_epoch: 0,
                member_id: String::new(),
                generation: -1,
                owned: BTreeSet::new(),
                positions: HashMap::new(),
                committed: HashMap::new(),
                leader_epochs: HashMap::new(),
                fatal: None,
            }),
            commit_lock: tokio::sync::Mutex::new(()),
            find_lock: tokio::sync::Mutex::new(()),
            lanes: [tokio::sync::Mutex::new(None), tokio::sync::Mutex::new(None)],
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the maps half-updated in a way
        // that matters more than losing them, so recover the guard.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets the coordinator if it is still `node`, and the connections to it.
    pub(crate) fn coordinator_failed(&self, node: i32) {
        let mut st = self.lock();
        st.coordinator_epoch += 1;
        if st.coordinator == Some(node) {
            tracing::info!(group = %self.group_id, node, "coordinator lost; will look it up again");
            st.coordinator = None;
        }
    }

    /// This member's `lane` connection to the group coordinator, looking the
    /// coordinator up if unknown. One attempt: retriable failures come back as
    /// retriable errors.
    pub(crate) async fn coordinator(&self, lane: Lane) -> Result<(i32, Connection), GroupError> {
        let known = self.lock().coordinator;
        let node = match known {
            Some(node) => node,
            None => self.find_coordinator().await?,
        };
        let epoch = self.lock().coordinator_epoch;
        let mut slot = self.lanes[lane as usize].lock().await;
        if let Some((n, e, conn)) = slot.as_ref() {
            if *n == node && *e == epoch && !conn.is_poisoned() {
                return Ok((node, conn.clone()));
            }
        }
        *slot = None;
        let result = async {
            let addr = self.broker_addr(node).await?;
            Ok::<_, ClientError>(Connection::connect(&addr, self.client.connection_config()).await?)
        }
        .await;
        match result {
            Ok(conn) => {
                conn.set_node_id(node);
                *slot = Some((node, epoch, conn.clone()));
                Ok((node, conn))
            }
            Err(e) => {
                self.coordinator_failed(node);
                Err(e.into())
            }
        }
    }

    /// The address of broker `node`, refreshing metadata once if it is unknown.
    async fn broker_addr(&self, node: i32) -> Result<String, ClientError> {
        if let Some(b) = self.client.metadata().broker(node) {
            return Ok(b.addr());
        }
        let meta = self.client.refresh_metadata().await?;
        meta.broker(node)
            .map(|b| b.addr())
            .ok_or(ClientError::UnknownBroker { node_id: node })
    }

    async fn find_coordinator(&self) -> Result<i32, GroupError> {
        let _single = self.find_lock.lock().await;
        if let Some(node) = self.lock().coordinator {
            return Ok(node);
        }
        let conn = self.any_broker().await?;
        let req = FindCoordinatorRequest {
            key: self.group_id.clone(),
            key_type: 0,
            coordinator_keys: vec![self.group_id.clone()],
        };
        let version = conn
            .version_for::<FindCoordinatorRequest>()
            .map_err(ClientError::from)?;
        let resp = conn.send(&req).await.map_err(ClientError::from)?;
        let (code, node) = if version >= 4 {
            match resp.coordinators.iter().find(|c| c.key == self.group_id) {
                Some(c) => (c.error_code, c.node_id),
                None => (ErrorCode::CoordinatorNotAvailable.code(), -1),
            }
        } else {
            (resp.error_code, resp.node_id)
        };
        let code = ErrorCode::from_code(code);
        if code != ErrorCode::None {
            return Err(GroupError::Coordinator {
                code,
                request: "FindCoordinator",
            });
        }
        tracing::debug!(group = %self.group_id, node, "found coordinator");
        self.lock().coordinator = Some(node);
        Ok(node)
    }

    /// A connection to some live broker (for FindCoordinator).
    async fn any_broker(&self) -> Result<Connection, ClientError> {
        let mut meta = self.client.metadata();
        if meta.brokers.is_empty() {
            meta = self.client.refresh_metadata().await?;
        }
        let mut last = None;
        for &node in meta.brokers.keys() {
            match self.client.node_connection(node).await {
                Ok(conn) => return Ok(conn),
                Err(e) => last = Some(e),
            }
        }
        // Every known broker failed: the metadata is probably stale.
        let _ = self.client.refresh_metadata().await;
        Err(last.unwrap_or(ClientError::UnknownBroker { node_id: -1 }))
    }

    /// Commits `offsets` (or, with `None`, the positions of every owned partition),
    /// skipping any offset not above the last committed one. Retries coordinator
    /// moves and connection failures until the request timeout has elapsed.
    pub(crate) async fn commit(
        &self,
        offsets: Option<Vec<(TopicPartition, i64)>>,
    ) -> Result<(), GroupError> {
        let _serial = self.commit_lock.lock().await;
        let started = Instant::now();
        let deadline = started + self.client.request_timeout();
        loop {
            match self.commit_once(offsets.as_deref()).await {
                Ok(()) => {
                    self.meter.committed(started.elapsed());
                    return Ok(());
                }
                Err(CommitAttempt::Fail(e)) => return Err(e),
                Err(CommitAttempt::Retry(e)) => {
                    let wait = self.retry.delay(1);
                    if Instant::now() + wait >= deadline {
                        return Err(e);
                    }
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    async fn commit_once(
        &self,
        offsets: Option<&[(TopicPartition, i64)]>,
    ) -> Result<(), CommitAttempt> {
        let (generation, member_id, chosen) = {
            let st = self.lock();
            // Each finished position read once, as one consistent (offset, epoch)
            // pair.
            let finished: HashMap<&TopicPartition, (i64, i32)> = st
                .positions
                .iter()
                .map(|(tp, cell)| (tp, cell.get()))
                .collect();
            let candidates: Vec<(TopicPartition, i64)> = match offsets {
                Some(list) => list.to_vec(),
                None => finished
                    .iter()
                    .map(|(tp, &(o, _))| ((*tp).clone(), o))
                    .collect(),
            };
            let mut chosen: BTreeMap<TopicPartition, i64> = BTreeMap::new();
            for (tp, offset) in candidates {
                let above = st.committed.get(&tp).is_none_or(|&c| offset > c);
                if offset >= 0 && above && st.owned.contains(&tp) {
                    let e = chosen.entry(tp).or_insert(offset);
                    *e = (*e).max(offset);
                }
            }
            let epochs: HashMap<TopicPartition, i32> = chosen
                .iter()
                .filter_map(|(tp, offset)| match finished.get(tp) {
                    Some(&(o, e)) if o == *offset && e >= 0 => Some((tp.clone(), e)),
                    _ => match st.leader_epochs.get(tp) {
                        Some(&(o, e)) if o == *offset => Some((tp.clone(), e)),
                        _ => None,
                    },
                })
                .collect();
            (st.generation, st.member_id.clone(), (chosen, epochs))
        };
        let (chosen, epochs) = chosen;
        tracing::trace!(group = %self.group_id, candidates = ?offsets.map(|o| o.len()), chosen = chosen.len(), generation, "commit");
        if chosen.is_empty() {
            return Ok(());
        }
        if generation < 0 {
            // Between JoinGroup and SyncGroup (or after losing the generation): the
            // coordinator would refuse, so do not ask.
            return Err(CommitAttempt::Fail(GroupError::RebalanceInProgress));
        }
        let (node, conn) = self
            .coordinator(Lane::Offsets)
            .await
            .map_err(retry_or_fail)?;
        let mut topics: Vec<OffsetCommitRequestTopic> = Vec::new();
        for (tp, &offset) in &chosen {
            let p = OffsetCommitRequestPartition {
                partition_index: tp.partition,
                committed_offset: offset,
                committed_leader_epoch: epochs.get(tp).copied().unwrap_or(-1),
                commit_timestamp: -1,
                committed_metadata: None,
            };
            match topics.last_mut() {
                Some(t) if *t.name == *tp.topic => t.partitions.push(p),
                _ => topics.push(OffsetCommitRequestTopic {
                    name: tp.topic.to_string(),
                    partitions: vec![p],
                }),
            }
        }
        let req = OffsetCommitRequest {
            group_id: self.group_id.clone(),
            generation_id_or_member_epoch: generation,
            member_id,
            group_instance_id: self.instance_id.clone(),
            retention_time_ms: -1,
            topics,
        };
        let resp = match conn.send(&req).await {
            Ok(r) => r,
            Err(e) => {
                self.coordinator_failed(node);
                return Err(CommitAttempt::Retry(ClientError::from(e).into()));
            }
        };
        let mut worst: Option<ErrorCode> = None;
        {
            let mut st = self.lock();
            for t in &resp.topics {
                for p in &t.partitions {
                    let code = ErrorCode::from_code(p.error_code);
                    let tp = TopicPartition::new(t.name.as_str(), p.partition_index);
                    if code == ErrorCode::None {
                        if let Some(&offset) = chosen.get(&tp) {
                            let e = st.committed.entry(tp).or_insert(offset);
                            *e = (*e).max(offset);
                        }
                    } else if worst.is_none() || !code.is_retriable() {
                        worst = Some(code);
                    }
                }
            }
        }
        tracing::trace!(group = %self.group_id, partitions = chosen.len(), generation, error = ?worst, "offset commit");
        match worst {
            None => Ok(()),
            Some(code) => Err(self.commit_error(node, code)),
        }
    }

    fn commit_error(&self, node: i32, code: ErrorCode) -> CommitAttempt {
        match code {
            ErrorCode::NotCoordinator
            | ErrorCode::CoordinatorNotAvailable
            | ErrorCode::CoordinatorLoadInProgress
            | ErrorCode::RequestTimedOut => {
                self.coordinator_failed(node);
                CommitAttempt::Retry(GroupError::Coordinator {
                    code,
                    request: "OffsetCommit",
                })
            }
            ErrorCode::RebalanceInProgress => CommitAttempt::Fail(GroupError::RebalanceInProgress),
            // Consumer protocol (KIP-848): the commit carried an epoch the member has
            // since moved past; the next attempt takes the current one.
            ErrorCode::StaleMemberEpoch => CommitAttempt::Retry(GroupError::Coordinator {
                code,
                request: "OffsetCommit",
            }),
            ErrorCode::IllegalGeneration | ErrorCode::UnknownMemberId => {
                CommitAttempt::Fail(GroupError::CommitFailed { code })
            }
            ErrorCode::FencedInstanceId => CommitAttempt::Fail(GroupError::FencedInstanceId {
                group_instance_id: self.instance_id.clone().unwrap_or_default(),
            }),
            code if code.is_retriable() => CommitAttempt::Retry(GroupError::Coordinator {
                code,
                request: "OffsetCommit",
            }),
            code => CommitAttempt::Fail(GroupError::Coordinator {
                code,
                request: "OffsetCommit",
            }),
        }
    }

    /// The committed offsets of `partitions` (absent: nothing committed), retrying
    /// coordinator moves until the request timeout has elapsed. Records what it finds
    /// as the partitions' committed baseline.
    pub(crate) async fn fetch_committed(
        &self,
        partitions: &[TopicPartition],
    ) -> Result<HashMap<TopicPartition, i64>, GroupError> {
        let deadline = Instant::now() + self.client.request_timeout();
        loop {
            let err = match self.fetch_committed_once(partitions).await {
                Ok((found, epochs)) => {
                    let mut st = self.lock();
                    for (tp, &offset) in &found {
                        let e = st.committed.entry(tp.clone()).or_insert(offset);
                        *e = (*e).max(offset);
                    }
                    for (tp, offset, epoch) in epochs {
                        st.leader_epochs.insert(tp, (offset, epoch));
                    }
                    return Ok(found);
                }
                Err(e) => e,
            };
            let wait = self.retry.delay(1);
            if !err.is_retriable() || Instant::now() + wait >= deadline {
                return Err(err);
            }
            tokio::time::sleep(wait).await;
        }
    }

    async fn fetch_committed_once(
        &self,
        partitions: &[TopicPartition],
    ) -> Result<CommittedOffsets, GroupError> {
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for tp in partitions {
            by_topic.entry(&tp.topic).or_default().push(tp.partition);
        }
        let (node, conn) = self.coordinator(Lane::Offsets).await?;
        let req = OffsetFetchRequest {
            group_id: self.group_id.clone(),
            topics: Some(
                by_topic
                    .iter()
                    .map(|(t, ps)| OffsetFetchRequestTopic {
                        name: t.to_string(),
                        partition_indexes: ps.clone(),
                    })
                    .collect(),
            ),
            groups: vec![OffsetFetchRequestGroup {
                group_id: self.group_id.clone(),
                member_id: None,
                member_epoch: -1,
                topics: Some(
                    by_topic
                        .iter()
                        .map(|(t, ps)| OffsetFetchRequestTopics {
                            name: t.to_string(),
                            partition_indexes: ps.clone(),
                        })
                        .collect(),
                ),
            }],
            require_stable: true,
        };
        let version = conn
            .version_for::<OffsetFetchRequest>()
            .map_err(ClientError::from)?;
        let resp = match conn.send(&req).await {
            Ok(r) => r,
            Err(e) => {
                self.coordinator_failed(node);
                return Err(ClientError::from(e).into());
            }
        };
        // (topic, partition, offset, leader epoch, error) from either layout.
        let mut rows: Vec<(String, i32, i64, i32, i16)> = Vec::new();
        let group_code = if version >= 8 {
            let g = resp
                .groups
                .into_iter()
                .find(|g| g.group_id == self.group_id);
            match g {
                Some(g) => {
                    for t in g.topics {
                        for p in t.partitions {
                            rows.push((
                                t.name.clone(),
                                p.partition_index,
                                p.committed_offset,
                                p.committed_leader_epoch,
                                p.error_code,
                            ));
                        }
                    }
                    g.error_code
                }
                None => ErrorCode::CoordinatorNotAvailable.code(),
            }
        } else {
            for t in resp.topics {
                for p in t.partitions {
                    rows.push((
                        t.name.clone(),
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch,
                        p.error_code,
                    ));
                }
            }
            resp.error_code
        };
        let mut worst = ErrorCode::from_code(group_code);
        let mut found = HashMap::new();
        let mut epochs = Vec::new();
        for (topic, partition, offset, epoch, code) in rows {
            let code = ErrorCode::from_code(code);
            if code != ErrorCode::None {
                if worst == ErrorCode::None {
                    worst = code;
                }
                continue;
            }
            if offset >= 0 {
                let tp = TopicPartition::new(topic.as_str(), partition);
                if epoch >= 0 {
                    epochs.push((tp.clone(), offset, epoch));
                }
                found.insert(tp, offset);
            }
        }
        match worst {
            ErrorCode::None => Ok((found, epochs)),
            code @ (ErrorCode::NotCoordinator
            | ErrorCode::CoordinatorNotAvailable
            | ErrorCode::CoordinatorLoadInProgress) => {
                self.coordinator_failed(node);
                Err(GroupError::Coordinator {
                    code,
                    request: "OffsetFetch",
                })
            }
            code => Err(GroupError::Coordinator {
                code,
                request: "OffsetFetch",
            }),
        }
    }
}

/// Committed offsets found, and the leader epochs committed with them.
type CommittedOffsets = (
    HashMap<TopicPartition, i64>,
    Vec<(TopicPartition, i64, i32)>,
);

fn retry_or_fail(e: GroupError) -> CommitAttempt {
    if e.is_retriable() {
        CommitAttempt::Retry(e)
    } else {
        CommitAttempt::Fail(e)
    }
}
