//! The group coordinator of one broker node: the [`Groups`] state machine behind a
//! mutex, the parked JoinGroup / SyncGroup replies, durable offsets in
//! `__consumer_offsets`, and a driver task for timers.
//!
//! Ownership follows the log: a node coordinates exactly the groups whose
//! `__consumer_offsets` partition ([`records::partition_for`]) it leads. Before
//! serving a group the coordinator checks that leadership; when it has just gained
//! it (or the leader epoch changed) it replays that partition into memory, and when
//! it has lost it it forgets the partition's groups, answering their parked
//! requests with NOT_COORDINATOR. On a single node every partition is led here, so
//! every group is served. The driver re-checks ownership periodically, so that a
//! node that lost leadership lets go of its groups without waiting for a request.
//!
//! Entry points are synchronous and may touch files (replaying and appending offset
//! records) or wait for replication, so handlers call them from the blocking pool.
//! Parked requests are answered through oneshot channels that the handlers turn into
//! deferred replies.
//!
//! Durability: a commit is appended to the group's partition while the coordinator
//! lock is held and applied to memory in the same critical section, so memory
//! follows the leader's log order; in a cluster the answer then waits (without the
//! lock) until the high watermark covers the commit, like `acks=all`. The topic is
//! created on first use: locally on a single node, through the controller in a
//! cluster (COORDINATOR_NOT_AVAILABLE until it exists).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use baton_protocol::messages::{DescribedGroup, JoinGroupResponse, ListedGroup, SyncGroupResponse};
use baton_protocol::primitives::Uuid;
use baton_protocol::record::{
    ControlRecordType, Record, RecordBatch, RecordBatchBuilder, TimestampType,
};
use baton_protocol::ErrorCode;
use bytes::Bytes;
use tokio::sync::{oneshot, watch, Notify};

use super::consumer::{self as cg, ConsumerGroups, ConsumerRecord};
use super::host::GroupHost;
use super::internal_topic::{self, InternalTopic};
use super::machine::{
    CommittedOffset, Delivery, GroupConfig, GroupState, Groups, JoinRequest, LeavingMember,
    SyncRequest, Waiter,
};
use super::records::{self, GroupRecord, LogKey, OffsetKey, OFFSETS_TOPIC};
use crate::partition::{Partition, PartitionState};
use crate::replication::ProduceOutcome;
use crate::topics::{random_u64, Topic};

mod offset_delete;

/// Bytes read per step while replaying `__consumer_offsets`.
const LOAD_CHUNK: usize = 1 << 20;
/// Longest sleep of the driver when no timer is due (it is woken on changes).
const IDLE_SLEEP: Duration = Duration::from_secs(60);
/// How often a cluster node re-checks which partitions it still leads.
const OWNERSHIP_CHECK: Duration = Duration::from_millis(250);
/// How long a commit waits for replication (Kafka's `offsets.commit.timeout.ms`).
const COMMIT_TIMEOUT_MS: u64 = 5_000;

/// A consumer group as ConsumerGroupDescribe shows it, with topic names by id.
pub(crate) type DescribedConsumerGroup = (cg::ConsumerGroup, HashMap<Uuid, String>);

/// Committed offsets by topic, then partition (`None`: nothing committed; an
/// error: UNSTABLE_OFFSET_COMMIT while stable offsets were asked for and a
/// transactional offset is pending).
pub(crate) type TopicOffsets = Vec<(
    String,
    Vec<(i32, Result<Option<CommittedOffset>, ErrorCode>)>,
)>;

#[derive(Debug)]
struct Inner {
    groups: Groups,
    /// Consumer-protocol (KIP-848) groups; their committed offsets live in
    /// `groups` like every group's.
    consumer: ConsumerGroups,
    /// `__consumer_offsets` partitions whose groups are in memory, with the leader
    /// epoch at which they were replayed.
    owned: HashMap<i32, i32>,
    /// Partition count of `__consumer_offsets` (0 before it exists).
    partitions: i32,
    next_waiter: Waiter,
    joins: HashMap<Waiter, oneshot::Sender<JoinGroupResponse>>,
    syncs: HashMap<Waiter, oneshot::Sender<SyncGroupResponse>>,
    /// New classic generations and consumer group epochs written since the node
    /// started (rebalances).
    rebalances: u64,
}

impl Inner {
    fn deliver(&mut self, deliveries: Vec<Delivery>) {
        for d in deliveries {
            match d {
                Delivery::Join(w, r) => {
                    if let Some(tx) = self.joins.remove(&w) {
                        let _ = tx.send(r);
                    }
                }
                Delivery::Sync(w, r) => {
                    if let Some(tx) = self.syncs.remove(&w) {
                        let _ = tx.send(r);
                    }
                }
            }
        }
    }

    fn waiter(&mut self) -> Waiter {
        self.next_waiter += 1;
        self.next_waiter
    }

    /// Appends a tombstone for every group removed since the last call (so a replay
    /// does not bring it back), then a record for every new generation and every
    /// group whose assignments or member ids changed (best effort: a failure is
    /// logged; the next record is written anyway, and a replay of an older one
    /// still never lowers the generation a member saw below the one it wrote).
    /// Returns the replication waits of the new generations' records (none on a
    /// single node), which the JoinGroup answers wait for (see
    /// [`Inner::deliver_after`]).
    fn persist_generations(
        &mut self,
        state: &dyn GroupHost,
    ) -> Vec<oneshot::Receiver<ProduceOutcome>> {
        let mut waits = Vec::new();
        for group_id in self.groups.take_removed() {
            let entry = (records::encode_group_key(&group_id), None);
            if let Err(code) = append(state, &group_id, &[entry], None, state.now_ms()) {
                tracing::warn!(group = %group_id, ?code, "cannot persist the removal of a group");
            }
        }
        for g in self.groups.take_group_records() {
            if g.new_generation {
                self.rebalances += 1;
            }
            let generation = g.snapshot.generation_id;
            let record = GroupRecord {
                group: g.snapshot,
                state_timestamp: state.now_ms(),
            };
            let entry = (
                records::encode_group_key(&g.group_id),
                Some(records::encode_group_value(&record)),
            );
            match append(state, &g.group_id, &[entry], None, state.now_ms()) {
                Ok((_, Some(wait))) if g.new_generation => waits.push(wait),
                Ok(_) => {}
                Err(code) => {
                    tracing::warn!(group = %g.group_id, generation, ?code, "cannot persist the group");
                }
            }
        }
        waits
    }

    /// Answers `deliveries`: SyncGroup at once, JoinGroup once every record of
    /// `waits` is replicated (at once when there is none), so that a member
    /// never learns a generation that a new coordinator would not replay; if a
    /// wait fails (leadership lost, the ISR too small), the joins get its error
    /// and rejoin.
    fn deliver_after(
        &mut self,
        deliveries: Vec<Delivery>,
        waits: Vec<oneshot::Receiver<ProduceOutcome>>,
    ) {
        let runtime = tokio::runtime::Handle::try_current();
        let (joins, other): (Vec<Delivery>, Vec<Delivery>) = deliveries
            .into_iter()
            .partition(|d| matches!(d, Delivery::Join(..)));
        self.deliver(other);
        let runtime = match runtime {
            Ok(rt) if !waits.is_empty() && !joins.is_empty() => rt,
            // No wait (a single node), or no runtime to wait on.
            _ => return self.deliver(joins),
        };
        let mut held = Vec::new();
        for d in joins {
            if let Delivery::Join(w, r) = d {
                if let Some(tx) = self.joins.remove(&w) {
                    held.push((tx, r));
                }
            }
        }
        runtime.spawn(async move {
            let mut outcome = Ok(());
            for w in waits {
                if let Err(code) = replicated(Some(w)).await {
                    outcome = Err(code);
                    break;
                }
            }
            for (tx, r) in held {
                let r = match outcome {
                    Ok(()) => r,
                    Err(code) => JoinGroupResponse {
                        error_code: code.code(),
                        generation_id: -1,
                        member_id: r.member_id,
                        ..Default::default()
                    },
                };
                let _ = tx.send(r);
            }
        });
    }

    /// Hands the classic members of downgraded consumer groups to the classic
    /// machine, then writes the consumer group records queued so far and the
    /// classic generations; returns the replication waits of the consumer
    /// records.
    fn persist_consumer_changes(
        &mut self,
        state: &dyn GroupHost,
    ) -> Result<Vec<oneshot::Receiver<ProduceOutcome>>, ErrorCode> {
        if self.consumer.has_downgrade_candidates() {
            let now = state.now_ms();
            for (group_id, classic) in self.consumer.take_downgrades(&catalog(state)) {
                self.groups.adopt_members(&group_id, classic, now);
            }
        }
        let records = self.consumer.take_records();
        let epochs = records
            .iter()
            .filter(|r| matches!(r, ConsumerRecord::Group { value: Some(_), .. }));
        self.rebalances += epochs.count() as u64;
        let waits = persist_consumer(state, &records);
        // Classic members adopted here prepare a rebalance: no join to hold.
        drop(self.persist_generations(state));
        waits
    }

    /// Forgets the groups of `partition`.
    fn unload(&mut self, partition: i32) {
        self.owned.remove(&partition);
        let n = self.partitions;
        let out = self
            .groups
            .remove_where(|g| records::partition_for(g, n) == partition);
        self.consumer
            .remove_where(|g| records::partition_for(g, n) == partition);
        if !out.is_empty() {
            tracing::info!(partition, parked = out.len(), "no longer coordinating");
        }
        self.deliver(out);
    }
}

/// A committed offset to store, as validated by the OffsetCommit handler.
#[derive(Debug, Clone)]
pub(crate) struct OffsetToCommit {
    pub topic: String,
    pub partition: i32,
    pub offset: CommittedOffset,
}

/// Who sends a TxnOffsetCommit: the group, the transactional producer, and the
/// consumer's membership (v3+; generation -1 and empty ids before).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TxnCommitter<'a> {
    pub group_id: &'a str,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub generation_id: i32,
    pub member_id: &'a str,
    pub instance_id: Option<&'a str>,
}

/// The coordinator of every group whose `__consumer_offsets` partition this node
/// leads.
#[derive(Debug)]
pub(crate) struct GroupCoordinator {
    inner: Mutex<Inner>,
    /// Wakes the driver when a deadline may have moved earlier.
    wake: Notify,
    driver_running: AtomicBool,
    /// `__consumer_offsets`, created on first use.
    topic: InternalTopic,
}

/// Whether this node leads `p`, and at which epoch.
fn leadership(p: &Partition) -> Option<i32> {
    let st = p.lock();
    st.is_leader().then(|| st.leader_epoch())
}

/// The `__consumer_offsets` records (key, value) storing `offsets` of `group_id`.
fn offset_entries(group_id: &str, offsets: &[OffsetToCommit]) -> Vec<(Bytes, Option<Bytes>)> {
    offsets
        .iter()
        .map(|o| {
            let key = OffsetKey {
                group: group_id.to_owned(),
                topic: o.topic.clone(),
                partition: o.partition,
            };
            (
                records::encode_key(&key),
                Some(records::encode_value(&o.offset)),
            )
        })
        .collect()
}

/// Brings `partition`'s ownership up to date: its groups replayed at the current
/// leader epoch when it is led here, forgotten when not.
fn own(inner: &mut Inner, partition: &Partition, now_ms: i64) {
    let p = partition.index();
    match leadership(partition) {
        None => {
            if inner.owned.contains_key(&p) {
                inner.unload(p);
            }
        }
        Some(epoch) => {
            if inner.owned.get(&p) != Some(&epoch) {
                inner.unload(p);
                let n = inner.partitions;
                let Inner {
                    groups, consumer, ..
                } = &mut *inner;
                load_partition_all(partition, n, groups, Some(consumer), now_ms);
                inner.owned.insert(p, epoch);
                tracing::info!(partition = p, epoch, "coordinating");
            }
        }
    }
}

impl GroupCoordinator {
    /// A coordinator holding at most `max_groups` groups (`BrokerLimits::max_groups`)
    /// and `max_pending_offsets` pending transactional offsets
    /// (`BrokerLimits::max_pending_txn_offsets`).
    pub fn new(config: GroupConfig, max_groups: usize, max_pending_offsets: usize) -> Self {
        GroupCoordinator {
            inner: Mutex::new(Inner {
                consumer: ConsumerGroups::new(config.clone(), random_u64()),
                groups: Groups::new(config, random_u64())
                    .with_max_groups(max_groups)
                    .with_max_pending_offsets(max_pending_offsets),
                owned: HashMap::new(),
                partitions: 0,
                next_waiter: 0,
                joins: HashMap::new(),
                syncs: HashMap::new(),
                rebalances: 0,
            }),
            wake: Notify::new(),
            driver_running: AtomicBool::new(false),
            topic: InternalTopic::new(OFFSETS_TOPIC, "groups"),
        }
    }

    /// Group rebalances here: new classic generations and new consumer group
    /// epochs (KIP-848) written.
    pub(crate) fn rebalances(&self) -> u64 {
        self.lock().rebalances
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `__consumer_offsets`, created if missing: at once on a single node; in a
    /// cluster a creation request goes to the controller and the caller gets
    /// COORDINATOR_NOT_AVAILABLE meanwhile.
    pub fn offsets_topic(&self, state: &dyn GroupHost) -> Result<Arc<Topic>, ErrorCode> {
        self.topic
            .get_or_create(state, || self.offsets_topic_partitions())
    }

    /// Partitions of `__consumer_offsets` when this node creates it.
    fn offsets_topic_partitions(&self) -> i32 {
        self.lock().groups.config().offsets_topic_partitions
    }

    /// Locks the coordinator for a request about `group_id`: NOT_COORDINATOR unless
    /// this node leads the group's partition, which is replayed first if it was not
    /// loaded at the current leader epoch.
    fn owned(
        &self,
        state: &dyn GroupHost,
        group_id: &str,
    ) -> Result<MutexGuard<'_, Inner>, ErrorCode> {
        let topic = self.offsets_topic(state)?;
        let n = topic.partitions.len() as i32;
        let p = records::partition_for(group_id, n);
        let partition = topic
            .partition(p)
            .ok_or(ErrorCode::CoordinatorNotAvailable)?;
        let mut inner = self.lock();
        inner.partitions = n;
        own(&mut inner, partition, state.now_ms());
        if inner.owned.contains_key(&p) {
            Ok(inner)
        } else {
            Err(ErrorCode::NotCoordinator)
        }
    }

    /// Loads every partition led here and forgets those no longer led.
    fn sync_ownership(&self, state: &dyn GroupHost) -> MutexGuard<'_, Inner> {
        let topic = state.topic(OFFSETS_TOPIC);
        let mut inner = self.lock();
        let Some(topic) = topic else {
            let owned: Vec<i32> = inner.owned.keys().copied().collect();
            for p in owned {
                inner.unload(p);
            }
            return inner;
        };
        inner.partitions = topic.partitions.len() as i32;
        let now = state.now_ms();
        for partition in &topic.partitions {
            own(&mut inner, partition, now);
        }
        inner
    }

    /// The node that coordinates `key` in a cluster: its id, host and port, or
    /// COORDINATOR_NOT_AVAILABLE while `__consumer_offsets` or its leader is
    /// missing. `None` on a single node.
    pub fn coordinator_node(
        &self,
        state: &dyn GroupHost,
        key: &str,
    ) -> Option<Result<(i32, String, i32), ErrorCode>> {
        let link = state.mode().replica()?;
        let found = {
            let img = link.image();
            img.topic_by_name(OFFSETS_TOPIC).map(|t| {
                let p = records::partition_for(key, t.partitions);
                img.partition(t.topic_id, p)
                    .filter(|pi| pi.leader != crate::controller::NO_LEADER)
                    .and_then(|pi| img.broker(pi.leader))
                    .map(|b| (b.broker_id, b.host.clone(), b.port as i32))
                    .ok_or(ErrorCode::CoordinatorNotAvailable)
            })
        };
        Some(match found {
            Some(r) => r,
            None => {
                self.topic.request(state, self.offsets_topic_partitions());
                Err(ErrorCode::CoordinatorNotAvailable)
            }
        })
    }

    /// Starts the timer task if it is not running. It ends when `stop` turns true or
    /// its sender is dropped.
    pub fn ensure_driver<S: GroupHost>(
        self: &Arc<Self>,
        state: &Arc<S>,
        stop: &watch::Receiver<bool>,
    ) {
        if self.driver_running.swap(true, Ordering::AcqRel) {
            return;
        }
        let coord = self.clone();
        let weak = Arc::downgrade(state);
        let cluster = state.mode().is_replica();
        let mut stop = stop.clone();
        tokio::spawn(async move {
            loop {
                if *stop.borrow() {
                    break;
                }
                let next = {
                    let inner = coord.lock();
                    match (inner.groups.next_deadline(), inner.consumer.next_deadline()) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    }
                };
                let mut sleep = next
                    .map(|t| {
                        // A node gone has no clock: no wait, and the loop ends below.
                        let now = weak.upgrade().map_or(t, |s| s.now_ms());
                        Duration::from_millis((t - now).max(0) as u64)
                    })
                    .unwrap_or(IDLE_SLEEP)
                    .min(IDLE_SLEEP);
                if cluster {
                    sleep = sleep.min(OWNERSHIP_CHECK);
                }
                tokio::select! {
                    _ = coord.wake.notified() => {}
                    _ = tokio::time::sleep(sleep) => {}
                    r = stop.changed() => if r.is_err() { break } else { continue },
                }
                let Some(state) = weak.upgrade() else { break };
                let c = coord.clone();
                let _ = baton_env::spawn_blocking(move || {
                    if cluster {
                        drop(c.sync_ownership(&*state));
                    }
                    c.tick(&*state, state.now_ms());
                })
                .await;
            }
            // Parked requests would hold their connections open through shutdown.
            coord.answer_parked(ErrorCode::CoordinatorNotAvailable);
            coord.driver_running.store(false, Ordering::Release);
        });
    }

    /// Answers every parked JoinGroup and SyncGroup with `code` (the broker stops).
    fn answer_parked(&self, code: ErrorCode) {
        let mut inner = self.lock();
        for (_, tx) in inner.joins.drain() {
            let _ = tx.send(JoinGroupResponse {
                error_code: code.code(),
                generation_id: -1,
                ..Default::default()
            });
        }
        for (_, tx) in inner.syncs.drain() {
            let _ = tx.send(SyncGroupResponse {
                error_code: code.code(),
                ..Default::default()
            });
        }
    }

    /// Runs due timers (session expiry, rebalance completion).
    pub fn tick(&self, state: &dyn GroupHost, now: i64) {
        let mut inner = self.lock();
        let out = inner.groups.tick(now);
        let waits = inner.persist_generations(state);
        inner.deliver_after(out, waits);
        inner.consumer.tick(now);
        if let Err(code) = inner.persist_consumer_changes(state) {
            tracing::warn!(?code, "cannot persist consumer group changes");
        }
    }

    /// Parks or answers a JoinGroup. A consumer group with members takes it as
    /// a classic member's (answered at once, once its records are replicated);
    /// an empty consumer group is deleted so that the classic group takes its
    /// place, as Kafka converts it.
    pub fn join(
        &self,
        state: &dyn GroupHost,
        req: JoinRequest,
    ) -> Result<oneshot::Receiver<JoinGroupResponse>, ErrorCode> {
        let (tx, rx) = oneshot::channel();
        let catalog = catalog(state);
        let mut inner = self.owned(state, &req.group_id)?;
        match inner
            .consumer
            .get(&req.group_id)
            .map(|g| g.members.is_empty())
        {
            Some(false) => {
                let answer = inner.consumer.classic_join(&req, &catalog, state.now_ms());
                let waits = inner.persist_consumer_changes(state);
                drop(inner);
                self.wake.notify_one();
                for w in waits? {
                    await_replicated(Some(w))?;
                }
                let _ = tx.send(answer);
                return Ok(rx);
            }
            Some(true) => {
                let _ = inner.consumer.delete(&req.group_id);
                if let Err(code) = inner.persist_consumer_changes(state) {
                    tracing::warn!(group = %req.group_id, ?code, "cannot persist a consumer group's conversion");
                }
            }
            None => {}
        }
        let w = inner.waiter();
        inner.joins.insert(w, tx);
        let out = inner.groups.join(req, w, state.now_ms());
        let waits = inner.persist_generations(state);
        inner.deliver_after(out, waits);
        drop(inner);
        self.wake.notify_one();
        Ok(rx)
    }

    /// Parks or answers a SyncGroup.
    pub fn sync(
        &self,
        state: &dyn GroupHost,
        req: SyncRequest,
    ) -> Result<oneshot::Receiver<SyncGroupResponse>, ErrorCode> {
        let (tx, rx) = oneshot::channel();
        let catalog = catalog(state);
        let mut inner = self.owned(state, &req.group_id)?;
        if inner.consumer.get(&req.group_id).is_some() {
            let answer = inner.consumer.classic_sync(
                &req.group_id,
                &req.member_id,
                req.group_instance_id.as_deref(),
                req.generation_id,
                req.protocol_name.as_deref(),
                &catalog,
                state.now_ms(),
            );
            let _ = tx.send(answer);
            return Ok(rx);
        }
        let w = inner.waiter();
        inner.syncs.insert(w, tx);
        let out = inner.groups.sync(req, w, state.now_ms());
        inner.deliver(out);
        // The leader's assignments: the group's record is written again, as
        // Kafka's storeGroup does, so a new coordinator restores them. The
        // answers do not wait: losing this record loses only the assignments
        // (the group is restored rebalancing at the same generation).
        drop(inner.persist_generations(state));
        drop(inner);
        self.wake.notify_one();
        Ok(rx)
    }

    /// Handles a Heartbeat.
    pub fn heartbeat(
        &self,
        state: &dyn GroupHost,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> ErrorCode {
        let catalog = catalog(state);
        match self.owned(state, group_id) {
            Ok(mut inner) if inner.consumer.get(group_id).is_some() => {
                let code = inner.consumer.classic_heartbeat(
                    group_id,
                    member_id,
                    instance_id,
                    generation_id,
                    &catalog,
                    state.now_ms(),
                );
                if let Err(e) = inner.persist_consumer_changes(state) {
                    tracing::warn!(group = group_id, code = ?e, "cannot persist consumer group changes");
                }
                code
            }
            Ok(mut inner) => inner.groups.heartbeat(
                group_id,
                generation_id,
                member_id,
                instance_id,
                state.now_ms(),
            ),
            Err(code) => code,
        }
    }

    /// Handles a LeaveGroup: per-member errors or a group-level error.
    pub fn leave(
        &self,
        state: &dyn GroupHost,
        group_id: &str,
        leaving: &[LeavingMember],
    ) -> Result<Vec<ErrorCode>, ErrorCode> {
        let mut inner = self.owned(state, group_id)?;
        if inner.consumer.get(group_id).is_some() {
            let result = inner.consumer.classic_leave(group_id, leaving);
            let waits = inner.persist_consumer_changes(state);
            drop(inner);
            self.wake.notify_one();
            for w in waits? {
                await_replicated(Some(w))?;
            }
            return Ok(result);
        }
        let (result, out) = inner.groups.leave(group_id, leaving, state.now_ms());
        let waits = inner.persist_generations(state);
        inner.deliver_after(out, waits);
        drop(inner);
        self.wake.notify_one();
        result
    }

    /// Validates and stores commits: one error for the whole request, or the
    /// wait for their replication (`None`: nothing to wait for), to be awaited
    /// with [`replicated`] off the blocking pool before they are answered.
    pub fn commit(
        &self,
        state: &dyn GroupHost,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        instance_id: Option<&str>,
        offsets: Vec<OffsetToCommit>,
    ) -> Result<Option<oneshot::Receiver<ProduceOutcome>>, ErrorCode> {
        let now = state.now_ms();
        let mut inner = self.owned(state, group_id)?;
        match inner.consumer.get(group_id) {
            Some(g) => validate_consumer_commit(g, generation_id, member_id)?,
            None => inner.groups.validate_commit(
                group_id,
                generation_id,
                member_id,
                instance_id,
                now,
            )?,
        }
        if offsets.is_empty() {
            return Ok(None);
        }
        inner.groups.admit_group(group_id)?;
        let entries = offset_entries(group_id, &offsets);
        let (base, wait) = append(state, group_id, &entries, None, now)?;
        for (o, position) in offsets.into_iter().zip(base..) {
            inner
                .groups
                .apply_offset(group_id, &o.topic, o.partition, Some(o.offset), position);
        }
        drop(inner);
        Ok(wait)
    }

    /// Validates and durably stores a TxnOffsetCommit: the offsets are written to
    /// the group's `__consumer_offsets` partition as one transactional batch of
    /// `producer` (id, epoch) and kept pending, apart from the committed offsets,
    /// until [`GroupCoordinator::complete_transaction`] sees the transaction's
    /// marker. One error for the whole request, or `Ok` when every offset was
    /// stored (and, in a cluster, replicated). A stale producer epoch is
    /// INVALID_PRODUCER_EPOCH (the partition's producer state decides, as it does
    /// for Kafka's coordinator appends).
    pub fn txn_commit(
        &self,
        state: &dyn GroupHost,
        committer: &TxnCommitter<'_>,
        offsets: Vec<OffsetToCommit>,
    ) -> Result<(), ErrorCode> {
        let now = state.now_ms();
        let group_id = committer.group_id;
        let producer = (committer.producer_id, committer.producer_epoch);
        let mut inner = self.owned(state, group_id)?;
        // TxnOffsetCommit below v3 names no member: Kafka accepts it for a consumer
        // group whatever its members (the producer's transaction guards it).
        let anonymous = committer.generation_id == -1
            && committer.member_id.is_empty()
            && committer.instance_id.is_none();
        match inner.consumer.get(group_id) {
            Some(_) if anonymous => {}
            Some(g) => validate_consumer_commit(g, committer.generation_id, committer.member_id)?,
            None => inner.groups.validate_txn_commit(
                group_id,
                committer.generation_id,
                committer.member_id,
                committer.instance_id,
            )?,
        }
        if offsets.is_empty() {
            return Ok(());
        }
        inner.groups.admit_group(group_id)?;
        inner.groups.admit_pending(offsets.len())?;
        let entries = offset_entries(group_id, &offsets);
        let (base, wait) = append(state, group_id, &entries, Some(producer), now)?;
        for (o, position) in offsets.into_iter().zip(base..) {
            inner.groups.apply_txn_offset(
                group_id,
                producer.0,
                &o.topic,
                o.partition,
                o.offset,
                position,
            );
        }
        drop(inner);
        await_replicated(wait)
    }

    /// The marker hook: a transaction marker of `producer_id` (commit or abort)
    /// has landed on `__consumer_offsets` partition `partition`. The pending
    /// offsets that producer wrote for the groups of that partition become
    /// committed or are dropped. Nothing happens when the partition is not
    /// loaded here: its replay reads the marker from the log.
    pub fn complete_transaction(
        &self,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
    ) {
        let mut inner = self.lock();
        if !inner.owned.contains_key(&partition) {
            return;
        }
        let n = inner.partitions;
        let resolved = inner.groups.complete_transaction(producer_id, commit, |g| {
            records::partition_for(g, n) == partition
        });
        tracing::debug!(
            partition,
            producer_id,
            producer_epoch,
            commit,
            resolved,
            "transaction marker applied to group offsets"
        );
        // A group left empty gets its tombstone at the next persist (the timer).
        drop(inner);
        self.wake.notify_one();
    }

    /// The committed offsets of a group: `None` lists every committed partition.
    /// With `require_stable` (OffsetFetch v7+), a partition with a pending
    /// transactional offset answers UNSTABLE_OFFSET_COMMIT instead, as in Kafka;
    /// without it pending offsets are invisible.
    pub fn fetch_offsets(
        &self,
        state: &dyn GroupHost,
        group_id: &str,
        wanted: Option<&[(String, Vec<i32>)]>,
        require_stable: bool,
    ) -> Result<TopicOffsets, ErrorCode> {
        let inner = self.owned(state, group_id)?;
        let groups = &inner.groups;
        let answer = |t: &str, p: i32, o: Option<CommittedOffset>| {
            if require_stable && groups.has_pending(group_id, t, p) {
                Err(ErrorCode::UnstableOffsetCommit)
            } else {
                Ok(o)
            }
        };
        Ok(match wanted {
            Some(topics) => topics
                .iter()
                .map(|(t, parts)| {
                    let ps = parts
                        .iter()
                        .map(|&p| (p, answer(t, p, groups.offset(group_id, t, p).cloned())))
                        .collect();
                    (t.clone(), ps)
                })
                .collect(),
            None => {
                let mut out: TopicOffsets = Vec::new();
                for (t, p, o) in groups.offsets(group_id) {
                    let a = answer(&t, p, Some(o));
                    match out.last_mut() {
                        Some((last, ps)) if *last == t => ps.push((p, a)),
                        _ => out.push((t, vec![(p, a)])),
                    }
                }
                out
            }
        })
    }

    /// Describes a group.
    pub fn describe(
        &self,
        state: &dyn GroupHost,
        group_id: &str,
    ) -> Result<DescribedGroup, ErrorCode> {
        let catalog = catalog(state);
        let inner = self.owned(state, group_id)?;
        if let Some(g) = inner.consumer.get(group_id) {
            // As Kafka describes a consumer group: its state, protocol type
            // `consumer`, and its members (classic ones as they joined).
            return Ok(cg::classic::describe(g, &catalog));
        }
        Ok(inner.groups.describe(group_id))
    }

    /// Lists the groups of every partition led here (none without
    /// `__consumer_offsets`; listing does not create it).
    pub fn list(
        &self,
        state: &dyn GroupHost,
        states: &[String],
        types: &[String],
    ) -> Vec<ListedGroup> {
        let inner = self.sync_ownership(state);
        let mut out: Vec<ListedGroup> = inner
            .groups
            .list(states, types)
            .into_iter()
            .filter(|g| inner.consumer.get(&g.group_id).is_none())
            .collect();
        let want_type =
            types.is_empty() || types.iter().any(|t| t.eq_ignore_ascii_case("consumer"));
        if want_type {
            for g in inner.consumer.iter() {
                let st = g.state().name();
                if states.is_empty() || states.iter().any(|s| s.eq_ignore_ascii_case(st)) {
                    out.push(ListedGroup {
                        group_id: g.id.clone(),
                        protocol_type: "consumer".to_owned(),
                        group_state: st.to_owned(),
                        group_type: "consumer".to_owned(),
                    });
                }
            }
        }
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        out
    }

    /// Deletes an empty group and its offsets (tombstones in `__consumer_offsets`).
    pub fn delete(&self, state: &dyn GroupHost, group_id: &str) -> ErrorCode {
        let mut inner = match self.owned(state, group_id) {
            Ok(i) => i,
            Err(code) => return code,
        };
        let consumer_group = match inner.consumer.delete(group_id) {
            Ok(existed) => existed,
            Err(code) => return code,
        };
        if consumer_group {
            let records = inner.consumer.take_records();
            if let Err(code) = persist_consumer(state, &records) {
                return code;
            }
        }
        let partitions = match inner.groups.check_delete(group_id) {
            Ok(p) => p,
            Err(ErrorCode::GroupIdNotFound) if consumer_group => return ErrorCode::None,
            Err(code) => return code,
        };
        let mut entries: Vec<(Bytes, Option<Bytes>)> = partitions
            .into_iter()
            .map(|(topic, partition)| {
                let key = OffsetKey {
                    group: group_id.to_owned(),
                    topic,
                    partition,
                };
                (records::encode_key(&key), None)
            })
            .collect();
        entries.push((records::encode_group_key(group_id), None));
        let wait = match append(state, group_id, &entries, None, state.now_ms()) {
            Ok((_, w)) => w,
            Err(code) => return code,
        };
        inner.groups.delete(group_id);
        drop(inner);
        match await_replicated(wait) {
            Ok(()) => ErrorCode::None,
            Err(code) => code,
        }
    }
    /// Handles a ConsumerGroupHeartbeat (KIP-848): the machine's answer once its
    /// records are in `__consumer_offsets` (and, in a cluster, replicated), or
    /// NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE. A member joining a classic
    /// group with members upgrades it to a consumer group of them all when
    /// `group.consumer.migration.policy` allows (else GROUP_ID_NOT_FOUND); an
    /// empty classic group (offsets only) becomes a consumer group. A member
    /// leaving may downgrade the group (see `persist_consumer_changes`).
    pub fn consumer_heartbeat(
        &self,
        state: &dyn GroupHost,
        hb: cg::Heartbeat,
    ) -> Result<cg::HeartbeatAnswer, ErrorCode> {
        let catalog = catalog(state);
        let mut inner = self.owned(state, &hb.group_id)?;
        if inner.consumer.get(&hb.group_id).is_none() {
            // Online upgrade: a consumer-protocol member joining a classic group
            // with members makes it a consumer group of them all.
            let upgrade = inner
                .groups
                .migration_snapshot(&hb.group_id)
                .filter(|_| hb.member_epoch == 0);
            if let Some(classic) = upgrade {
                match inner
                    .consumer
                    .adopt_classic(&hb.group_id, &classic, &catalog, state.now_ms())
                {
                    Ok(()) => {
                        let out = inner.groups.release_members(&hb.group_id);
                        inner.deliver(out);
                    }
                    Err(code) => {
                        tracing::info!(group = %hb.group_id, ?code, "classic group not upgraded");
                    }
                }
            }
        }
        if inner.consumer.get(&hb.group_id).is_none() {
            if let Some((st, _)) = inner.groups.state_of(&hb.group_id) {
                if !matches!(st, GroupState::Empty | GroupState::Dead) {
                    return Ok(cg::HeartbeatAnswer {
                        error: ErrorCode::GroupIdNotFound,
                        message: Some(format!("Group {} is not a consumer group.", hb.group_id)),
                        member_id: None,
                        member_epoch: 0,
                        heartbeat_interval_ms: 0,
                        assignment: None,
                    });
                }
            }
        }
        let may_create = {
            let total = inner.groups.len() + inner.consumer.len();
            let known = inner.groups.state_of(&hb.group_id).is_some();
            if known || total < inner.groups.max_groups() {
                Ok(())
            } else {
                Err((
                    ErrorCode::PolicyViolation,
                    format!(
                        "The coordinator holds its maximum of {} groups.",
                        inner.groups.max_groups()
                    ),
                ))
            }
        };
        let answer = inner
            .consumer
            .heartbeat(&hb, &catalog, may_create, state.now_ms());
        let waits = inner.persist_consumer_changes(state);
        drop(inner);
        self.wake.notify_one();
        for w in waits? {
            await_replicated(Some(w))?;
        }
        Ok(answer)
    }

    /// OffsetFetch v9+ from a consumer-protocol group's member (Kafka's
    /// `validateOffsetFetch`): epoch -1 passes (an admin client); otherwise the
    /// member must exist (UNKNOWN_MEMBER_ID) and send its current epoch
    /// (STALE_MEMBER_EPOCH). Classic groups are not checked.
    pub fn validate_fetch_member(
        &self,
        state: &dyn GroupHost,
        group_id: &str,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), ErrorCode> {
        if member_epoch == -1 {
            return Ok(());
        }
        let inner = self.owned(state, group_id)?;
        let Some(g) = inner.consumer.get(group_id) else {
            return Ok(());
        };
        let m = g
            .members
            .get(member_id.unwrap_or_default())
            .ok_or(ErrorCode::UnknownMemberId)?;
        if m.current.epoch != member_epoch {
            return Err(ErrorCode::StaleMemberEpoch);
        }
        Ok(())
    }

    /// A consumer group for ConsumerGroupDescribe (`None`: no such consumer
    /// group) and the topic names by id.
    pub fn consumer_describe(
        &self,
        state: &dyn GroupHost,
        group_id: &str,
    ) -> Result<Option<DescribedConsumerGroup>, ErrorCode> {
        let names = catalog(state)
            .into_iter()
            .map(|(name, (id, _))| (id, name))
            .collect();
        let inner = self.owned(state, group_id)?;
        Ok(inner.consumer.get(group_id).map(|g| (g.clone(), names)))
    }
}

/// The topics as a coordinator sees them: a cluster node's metadata image, a
/// standalone node's topic table.
fn catalog(state: &dyn GroupHost) -> cg::Catalog {
    match state.mode().replica() {
        Some(link) => link
            .image()
            .topics()
            .map(|t| (t.name.clone(), (t.topic_id, t.partitions)))
            .collect(),
        None => state
            .topics()
            .iter()
            .map(|t| (t.name.clone(), (t.id, t.partitions.len() as i32)))
            .collect(),
    }
}

/// Kafka's offset commit check for a consumer-protocol group: a commit without a
/// member (epoch < 0) is accepted only while the group is empty; otherwise the
/// member must exist (UNKNOWN_MEMBER_ID) and send its current epoch
/// (STALE_MEMBER_EPOCH; ILLEGAL_GENERATION for a classic member, whose
/// generation is its member epoch).
fn validate_consumer_commit(
    g: &cg::ConsumerGroup,
    member_epoch: i32,
    member_id: &str,
) -> Result<(), ErrorCode> {
    if member_epoch < 0 && g.members.is_empty() {
        return Ok(());
    }
    let m = g.members.get(member_id).ok_or(ErrorCode::UnknownMemberId)?;
    if m.current.epoch != member_epoch {
        return Err(if m.sub.is_classic() {
            ErrorCode::IllegalGeneration
        } else {
            ErrorCode::StaleMemberEpoch
        });
    }
    Ok(())
}

/// Appends consumer group records, each group's to its partition, in order;
/// returns the replication waits.
fn persist_consumer(
    state: &dyn GroupHost,
    records: &[ConsumerRecord],
) -> Result<Vec<oneshot::Receiver<ProduceOutcome>>, ErrorCode> {
    let mut waits = Vec::new();
    let mut i = 0;
    while i < records.len() {
        let group = records[i].group();
        let mut j = i;
        while j < records.len() && records[j].group() == group {
            j += 1;
        }
        let entries: Vec<(Bytes, Option<Bytes>)> =
            records[i..j].iter().map(cg::records::encode).collect();
        let (_, wait) = append(state, group, &entries, None, state.now_ms())?;
        waits.extend(wait);
        i = j;
    }
    Ok(waits)
}

/// Appends records (key, value; a `None` value is a tombstone) as one batch to the
/// group's partition, which this node leads; with `producer` (id, epoch) the batch
/// is transactional, as Kafka's coordinator writes a TxnOffsetCommit. Returns the
/// log offset of the first record and the replication wait in a cluster. Errors
/// are mapped the way Kafka's coordinator maps them.
fn append(
    state: &dyn GroupHost,
    group_id: &str,
    entries: &[(Bytes, Option<Bytes>)],
    producer: Option<(i64, i16)>,
    now: i64,
) -> Result<(i64, Option<oneshot::Receiver<ProduceOutcome>>), ErrorCode> {
    let topic = state
        .topic(OFFSETS_TOPIC)
        .ok_or(ErrorCode::CoordinatorNotAvailable)?;
    let n = topic.partitions.len() as i32;
    let partition = topic
        .partition(records::partition_for(group_id, n))
        .ok_or(ErrorCode::CoordinatorNotAvailable)?;
    let mut st = partition.lock();
    if !st.is_leader() {
        return Err(ErrorCode::NotCoordinator);
    }
    if let Some(l) = st.leader_state() {
        if let Err(r) = l.check_produce(true) {
            return Err(map_append_error(r.error_code()));
        }
    }
    let mut builder = RecordBatchBuilder::new(now);
    if let Some((producer_id, producer_epoch)) = producer {
        let sequence = next_sequence(&st, producer_id, producer_epoch);
        builder = builder
            .producer(producer_id, producer_epoch, sequence)
            .transactional(true);
    }
    for (key, value) in entries {
        builder.push(now, Some(key), value.as_deref(), &[]);
    }
    let batch = builder.finish();
    let base = match st.append_records(&batch, TimestampType::CreateTime, now) {
        Ok(info) => info.base_offset,
        Err(code) => {
            drop(st);
            tracing::warn!(
                group = group_id,
                ?code,
                "appending to __consumer_offsets failed"
            );
            return Err(map_append_error(code));
        }
    };
    let wait = match state.mode().replica() {
        Some(link) => {
            let leo = st.log_end_offset();
            st.await_replication(leo, link.now_ms() + COMMIT_TIMEOUT_MS)
        }
        None => None,
    };
    drop(st);
    state.notify_append();
    Ok((base, wait))
}

/// The sequence a coordinator batch of `producer_id` must carry to pass the
/// partition's idempotence check: the one after the producer's last batch at the
/// same epoch, 0 for a new epoch or an unknown producer. (Kafka skips sequence
/// checks for coordinator appends; here the coordinator numbers its own batches.)
/// A stale epoch is left to the check, which refuses it.
fn next_sequence(st: &PartitionState, producer_id: i64, producer_epoch: i16) -> i32 {
    match st.producers().get(producer_id) {
        Some(e) if e.epoch() == producer_epoch => {
            if e.last_seq() == i32::MAX {
                0
            } else {
                e.last_seq() + 1
            }
        }
        _ => 0,
    }
}

/// Kafka's mapping of log errors to coordinator errors.
fn map_append_error(code: ErrorCode) -> ErrorCode {
    match code {
        ErrorCode::UnknownTopicOrPartition
        | ErrorCode::NotEnoughReplicas
        | ErrorCode::NotEnoughReplicasAfterAppend
        | ErrorCode::RequestTimedOut => ErrorCode::CoordinatorNotAvailable,
        ErrorCode::NotLeaderOrFollower | ErrorCode::KafkaStorageError => ErrorCode::NotCoordinator,
        ErrorCode::MessageTooLarge
        | ErrorCode::RecordListTooLarge
        | ErrorCode::InvalidFetchSize => ErrorCode::InvalidCommitOffsetSize,
        other => other,
    }
}

/// Waits (on a blocking-pool thread) until the high watermark covers an append.
fn await_replicated(wait: Option<oneshot::Receiver<ProduceOutcome>>) -> Result<(), ErrorCode> {
    internal_topic::await_replicated(wait, map_append_error)
}

/// Waits, without a thread, until the high watermark covers an append (`None`:
/// nothing to wait for); the error is the coordinator's answer for it (a lost
/// wait is NOT_LEADER_OR_FOLLOWER before mapping).
///
/// # Cancel safety
///
/// Cancel safe: the append stands whether or not this is awaited.
pub async fn replicated(wait: Option<oneshot::Receiver<ProduceOutcome>>) -> Result<(), ErrorCode> {
    let Some(rx) = wait else {
        return Ok(());
    };
    match rx.await.unwrap_or(ProduceOutcome::NotLeader).error_code() {
        ErrorCode::None => Ok(()),
        code => Err(map_append_error(code)),
    }
}

/// Replays one `__consumer_offsets` partition (its whole log: a new leader's log is
/// the truth, committed or not yet) of a topic of `partitions` partitions into
/// `groups`. Offsets in transactional batches stay pending until their producer's
/// commit or abort marker follows in the log (a transaction still open at the end
/// of the log stays pending). Undecodable records are logged and skipped.
#[cfg(test)]
pub(super) fn load_partition(partition: &Partition, partitions: i32, groups: &mut Groups) {
    load_partition_all(partition, partitions, groups, None, baton_env::now_ms())
}

/// [`load_partition`], also replaying consumer group records into `consumer`;
/// `now` is the node's wall clock (the replayed groups' deadlines start from it).
fn load_partition_all(
    partition: &Partition,
    partitions: i32,
    groups: &mut Groups,
    mut consumer: Option<&mut ConsumerGroups>,
    now: i64,
) {
    let index = partition.index();
    let p = partition.lock();
    let mut from = p.log_start_offset();
    let end = p.log_end_offset();
    let mut loaded = 0usize;
    while from < end {
        let batches = match p.read_for_replica(from, LOAD_CHUNK) {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(partition = index, offset = from, error = %e, "cannot replay __consumer_offsets");
                break;
            }
        };
        if batches.is_empty() {
            break;
        }
        for bytes in batches {
            let batch = match RecordBatch::parse(bytes) {
                Ok(b) => b,
                Err(e) => {
                    tracing::error!(offset = from, error = %e, "bad batch in __consumer_offsets");
                    from = end;
                    break;
                }
            };
            from = batch.next_offset();
            let recs = match batch.records() {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!(error = %e, "unreadable batch in __consumer_offsets");
                    continue;
                }
            };
            if batch.is_control() {
                if batch.is_transactional() {
                    replay_marker(
                        recs,
                        batch.producer_id(),
                        |g| records::partition_for(g, partitions) == index,
                        groups,
                    );
                }
                continue;
            }
            let txn_producer = batch.is_transactional().then(|| batch.producer_id());
            for rec in recs {
                let Ok(rec) = rec else {
                    tracing::error!("bad record in __consumer_offsets");
                    break;
                };
                if let (Some(c), Some(key)) = (consumer.as_deref_mut(), rec.key.as_ref()) {
                    match cg::records::decode(key, rec.value.clone()) {
                        Ok(Some(r)) => {
                            c.replay(r, now);
                            loaded += 1;
                            continue;
                        }
                        Ok(None) => {}
                        Err(e) => {
                            tracing::warn!(error = %e, "skipping undecodable consumer group record");
                            continue;
                        }
                    }
                }
                if replay_record(rec, txn_producer, groups, now) {
                    loaded += 1;
                }
            }
        }
    }
    let in_partition = |g: &str| records::partition_for(g, partitions) == index;
    if let Some(c) = consumer.as_deref() {
        // A consumer group took over these members (an upgrade whose emptied
        // classic record did not make it to the log): the classic group lets go.
        let taken: Vec<String> = groups
            .ids_with_members()
            .into_iter()
            .filter(|g| in_partition(g) && c.get(g).is_some())
            .collect();
        for g in taken {
            tracing::info!(group = %g, "classic members replayed for a consumer group dropped");
            let parked = groups.release_members(&g);
            debug_assert!(parked.is_empty(), "nothing is parked during a replay");
        }
    }
    groups.finish_restore(now, in_partition);
    // Groups the log left with nothing in them (an old generation record without
    // members or offsets) are removed, with a tombstone at the next persist.
    groups.remove_unused();
    if let Some(c) = consumer {
        c.finish_replay(now);
    }
    tracing::debug!(
        partition = index,
        records = loaded,
        "replayed __consumer_offsets"
    );
}

/// Applies the commit or abort marker of a control batch of `producer_id` to the
/// groups `in_partition` accepts.
fn replay_marker(
    recs: baton_protocol::record::Records,
    producer_id: i64,
    in_partition: impl Fn(&str) -> bool,
    groups: &mut Groups,
) {
    for rec in recs {
        let kind = rec.and_then(|r| r.control_type());
        match kind {
            Ok(ControlRecordType::Commit) => {
                groups.complete_transaction(producer_id, true, &in_partition);
            }
            Ok(ControlRecordType::Abort) => {
                groups.complete_transaction(producer_id, false, &in_partition);
            }
            Ok(ControlRecordType::Other(_)) => {}
            Err(e) => tracing::warn!(error = %e, "skipping undecodable control record"),
        }
    }
}

/// Applies one record of `__consumer_offsets`: an offset (pending for
/// `txn_producer` when it is in a transactional batch) or a group (its members'
/// sessions starting at `now`). Returns whether it was applied.
fn replay_record(rec: Record, txn_producer: Option<i64>, groups: &mut Groups, now: i64) -> bool {
    let Some(key) = rec.key else { return false };
    let key = match records::decode_log_key(key) {
        Ok(Some(k)) => k,
        Ok(None) => return false,
        Err(e) => {
            tracing::warn!(error = %e, "skipping undecodable key");
            return false;
        }
    };
    match key {
        LogKey::Offset(key) => match (
            rec.value.map(records::decode_value).transpose(),
            txn_producer,
        ) {
            (Ok(Some(v)), Some(producer_id)) => groups.apply_txn_offset(
                &key.group,
                producer_id,
                &key.topic,
                key.partition,
                v,
                rec.offset,
            ),
            (Ok(v), _) => groups.apply_offset(&key.group, &key.topic, key.partition, v, rec.offset),
            (Err(e), _) => {
                tracing::warn!(error = %e, "skipping undecodable offset value");
                return false;
            }
        },
        LogKey::Group(group) => {
            let max_members = groups.config().max_group_size;
            match rec
                .value
                .map(|v| records::decode_group_value(v, max_members))
                .transpose()
            {
                Ok(v) => groups.restore(&group, v.map(|r| r.group), now),
                Err(e) => {
                    tracing::warn!(group = %group, error = %e, "skipping undecodable group value");
                    return false;
                }
            }
        }
    }
    true
}
