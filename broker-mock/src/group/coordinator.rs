//! The group coordinator of one broker node: the [`Groups`] state machine behind a
//! mutex, the parked JoinGroup / SyncGroup replies, durable offsets in
//! `__consumer_offsets`, and a driver task for timers.
//!
//! Entry points are synchronous and may touch files (loading and appending offset
//! records), so handlers call them from the blocking pool. Parked requests are
//! answered through oneshot channels that the handlers turn into
//! [`Reply::Later`](crate::server::Reply).
//!
//! Durability: a commit is appended to the group's `__consumer_offsets` partition
//! while the coordinator lock is held, and applied to memory only once the append
//! succeeded, so memory and log agree on the order of commits. On first use the
//! coordinator replays that topic to rebuild the offsets (and the empty groups that
//! own them).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use baton_protocol::messages::{DescribedGroup, JoinGroupResponse, ListedGroup, SyncGroupResponse};
use baton_protocol::record::{RecordBatch, RecordBatchBuilder, TimestampType};
use baton_protocol::ErrorCode;
use tokio::sync::{oneshot, watch, Notify};

use super::machine::{
    CommittedOffset, Delivery, GroupConfig, Groups, JoinRequest, LeavingMember, SyncRequest, Waiter,
};
use super::records::{self, OffsetKey, OFFSETS_TOPIC};
use crate::partition::{Isolation, Partition};
use crate::state::{now_ms, BrokerState};
use crate::topics::{random_u64, TopicConfig};

/// Bytes read per step while replaying `__consumer_offsets`.
const LOAD_CHUNK: usize = 1 << 20;
/// Longest sleep of the driver when no timer is due (it is woken on changes).
const IDLE_SLEEP: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct Inner {
    groups: Groups,
    loaded: bool,
    next_waiter: Waiter,
    joins: HashMap<Waiter, oneshot::Sender<JoinGroupResponse>>,
    syncs: HashMap<Waiter, oneshot::Sender<SyncGroupResponse>>,
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
}

/// Committed offsets by topic, then partition (`None`: nothing committed).
pub(crate) type TopicOffsets = Vec<(String, Vec<(i32, Option<CommittedOffset>)>)>;

/// A committed offset to store, as validated by the OffsetCommit handler.
#[derive(Debug, Clone)]
pub(crate) struct OffsetToCommit {
    pub topic: String,
    pub partition: i32,
    pub offset: CommittedOffset,
}

/// The coordinator of every group whose `__consumer_offsets` partition this node
/// leads (on a single node: every group).
#[derive(Debug)]
pub(crate) struct GroupCoordinator {
    inner: Mutex<Inner>,
    /// Wakes the driver when a deadline may have moved earlier.
    wake: Notify,
    driver_running: AtomicBool,
}

impl GroupCoordinator {
    pub fn new(config: GroupConfig) -> Self {
        GroupCoordinator {
            inner: Mutex::new(Inner {
                groups: Groups::new(config, random_u64()),
                loaded: false,
                next_waiter: 0,
                joins: HashMap::new(),
                syncs: HashMap::new(),
            }),
            wake: Notify::new(),
            driver_running: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Locks and, on first use, replays `__consumer_offsets`.
    fn loaded(&self, state: &BrokerState) -> MutexGuard<'_, Inner> {
        let mut inner = self.lock();
        if !inner.loaded {
            load_offsets(state, &mut inner.groups);
            inner.loaded = true;
        }
        inner
    }

    /// Whether this node coordinates `group_id`: `Err(NOT_COORDINATOR)` when not.
    ///
    /// Cluster hook: a single node coordinates every group. In a cluster this must
    /// answer whether this node leads the group's `__consumer_offsets` partition
    /// ([`records::partition_for`]); FindCoordinator must name that leader; and on
    /// becoming leader the coordinator must replay that partition (answering
    /// COORDINATOR_LOAD_IN_PROGRESS meanwhile) and on losing it drop its groups
    /// ([`Groups::clear`] answers parked requests with NOT_COORDINATOR).
    pub fn check_coordinator(
        &self,
        _state: &BrokerState,
        _group_id: &str,
    ) -> Result<(), ErrorCode> {
        Ok(())
    }

    /// Starts the timer task if it is not running. It ends when `stop` turns true or
    /// its sender is dropped.
    pub fn ensure_driver(self: &Arc<Self>, stop: &watch::Receiver<bool>) {
        if self.driver_running.swap(true, Ordering::AcqRel) {
            return;
        }
        let coord = self.clone();
        let mut stop = stop.clone();
        tokio::spawn(async move {
            loop {
                if *stop.borrow() {
                    break;
                }
                let sleep = coord
                    .lock()
                    .groups
                    .next_deadline()
                    .map(|t| Duration::from_millis((t - now_ms()).max(0) as u64))
                    .unwrap_or(IDLE_SLEEP)
                    .min(IDLE_SLEEP);
                tokio::select! {
                    _ = coord.wake.notified() => {}
                    _ = tokio::time::sleep(sleep) => {}
                    r = stop.changed() => if r.is_err() { break },
                }
                coord.tick(now_ms());
            }
            coord.driver_running.store(false, Ordering::Release);
        });
    }

    /// Runs due timers (session expiry, rebalance completion).
    pub fn tick(&self, now: i64) {
        let mut inner = self.lock();
        let out = inner.groups.tick(now);
        inner.deliver(out);
    }

    /// Parks or answers a JoinGroup.
    pub fn join(
        &self,
        state: &BrokerState,
        req: JoinRequest,
    ) -> oneshot::Receiver<JoinGroupResponse> {
        let (tx, rx) = oneshot::channel();
        let mut inner = self.loaded(state);
        let w = inner.waiter();
        inner.joins.insert(w, tx);
        let out = inner.groups.join(req, w, now_ms());
        inner.deliver(out);
        drop(inner);
        self.wake.notify_one();
        rx
    }

    /// Parks or answers a SyncGroup.
    pub fn sync(
        &self,
        state: &BrokerState,
        req: SyncRequest,
    ) -> oneshot::Receiver<SyncGroupResponse> {
        let (tx, rx) = oneshot::channel();
        let mut inner = self.loaded(state);
        let w = inner.waiter();
        inner.syncs.insert(w, tx);
        let out = inner.groups.sync(req, w, now_ms());
        inner.deliver(out);
        drop(inner);
        self.wake.notify_one();
        rx
    }

    /// Handles a Heartbeat.
    pub fn heartbeat(
        &self,
        state: &BrokerState,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> ErrorCode {
        let mut inner = self.loaded(state);
        inner
            .groups
            .heartbeat(group_id, generation_id, member_id, instance_id, now_ms())
    }

    /// Handles a LeaveGroup: per-member errors or a group-level error.
    pub fn leave(
        &self,
        state: &BrokerState,
        group_id: &str,
        leaving: &[LeavingMember],
    ) -> Result<Vec<ErrorCode>, ErrorCode> {
        let mut inner = self.loaded(state);
        let (result, out) = inner.groups.leave(group_id, leaving, now_ms());
        inner.deliver(out);
        drop(inner);
        self.wake.notify_one();
        result
    }

    /// Validates and durably stores commits; one error for the whole request, or
    /// `Ok` when every offset was stored.
    pub fn commit(
        &self,
        state: &BrokerState,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        instance_id: Option<&str>,
        offsets: Vec<OffsetToCommit>,
    ) -> Result<(), ErrorCode> {
        let now = now_ms();
        let mut inner = self.loaded(state);
        inner
            .groups
            .validate_commit(group_id, generation_id, member_id, instance_id, now)?;
        if offsets.is_empty() {
            return Ok(());
        }
        let records: Vec<(OffsetKey, Option<CommittedOffset>)> = offsets
            .iter()
            .map(|o| {
                (
                    OffsetKey {
                        group: group_id.to_owned(),
                        topic: o.topic.clone(),
                        partition: o.partition,
                    },
                    Some(o.offset.clone()),
                )
            })
            .collect();
        append(state, inner.groups.config(), group_id, &records, now)?;
        for o in offsets {
            inner
                .groups
                .apply_offset(group_id, &o.topic, o.partition, Some(o.offset));
        }
        Ok(())
    }

    /// The committed offsets of a group: `None` lists every committed partition.
    pub fn fetch_offsets(
        &self,
        state: &BrokerState,
        group_id: &str,
        wanted: Option<&[(String, Vec<i32>)]>,
    ) -> TopicOffsets {
        let inner = self.loaded(state);
        match wanted {
            Some(topics) => topics
                .iter()
                .map(|(t, parts)| {
                    let ps = parts
                        .iter()
                        .map(|&p| (p, inner.groups.offset(group_id, t, p).cloned()))
                        .collect();
                    (t.clone(), ps)
                })
                .collect(),
            None => {
                let mut out: TopicOffsets = Vec::new();
                for (t, p, o) in inner.groups.offsets(group_id) {
                    match out.last_mut() {
                        Some((last, ps)) if *last == t => ps.push((p, Some(o))),
                        _ => out.push((t, vec![(p, Some(o))])),
                    }
                }
                out
            }
        }
    }

    /// Describes groups.
    pub fn describe(&self, state: &BrokerState, group_ids: &[String]) -> Vec<DescribedGroup> {
        let inner = self.loaded(state);
        group_ids.iter().map(|g| inner.groups.describe(g)).collect()
    }

    /// Lists groups.
    pub fn list(
        &self,
        state: &BrokerState,
        states: &[String],
        types: &[String],
    ) -> Vec<ListedGroup> {
        self.loaded(state).groups.list(states, types)
    }

    /// Deletes empty groups and their offsets (tombstones in `__consumer_offsets`).
    pub fn delete(&self, state: &BrokerState, group_id: &str) -> ErrorCode {
        let mut inner = self.loaded(state);
        let partitions = match inner.groups.check_delete(group_id) {
            Ok(p) => p,
            Err(code) => return code,
        };
        if !partitions.is_empty() {
            let records: Vec<(OffsetKey, Option<CommittedOffset>)> = partitions
                .into_iter()
                .map(|(topic, partition)| {
                    (
                        OffsetKey {
                            group: group_id.to_owned(),
                            topic,
                            partition,
                        },
                        None,
                    )
                })
                .collect();
            if let Err(code) = append(state, inner.groups.config(), group_id, &records, now_ms()) {
                return code;
            }
        }
        inner.groups.delete(group_id);
        ErrorCode::None
    }
}

/// The group's `__consumer_offsets` partition, creating the topic on first use.
///
/// Cluster hook: in a cluster the topic must be created through the controller with
/// the cluster's replication factor, and only the partition's leader may append.
fn offsets_partition(
    state: &BrokerState,
    config: &GroupConfig,
    group_id: &str,
) -> Result<Arc<Partition>, ErrorCode> {
    let topic = match state.topic(OFFSETS_TOPIC) {
        Some(t) => t,
        None => {
            let mut cfg = TopicConfig::default();
            cfg.entries
                .insert("cleanup.policy".to_owned(), "compact".to_owned());
            match state.create_topic(
                OFFSETS_TOPIC,
                config.offsets_topic_partitions.max(1),
                1,
                cfg,
                false,
            ) {
                Ok(t) => t,
                Err(_) => state
                    .topic(OFFSETS_TOPIC)
                    .ok_or(ErrorCode::CoordinatorNotAvailable)?,
            }
        }
    };
    let n = topic.partitions.len() as i32;
    topic
        .partition(records::partition_for(group_id, n))
        .cloned()
        .ok_or(ErrorCode::CoordinatorNotAvailable)
}

/// Appends offset records (a `None` value is a tombstone) as one batch, mapping log
/// errors the way Kafka's coordinator does.
///
/// Cluster hook: with replication, wait for the high watermark to pass the batch
/// (acks=all) before answering.
fn append(
    state: &BrokerState,
    config: &GroupConfig,
    group_id: &str,
    entries: &[(OffsetKey, Option<CommittedOffset>)],
    now: i64,
) -> Result<(), ErrorCode> {
    let partition = offsets_partition(state, config, group_id)?;
    let mut builder = RecordBatchBuilder::new(now);
    for (key, value) in entries {
        let k = records::encode_key(key);
        let v = value.as_ref().map(records::encode_value);
        builder.push(now, Some(&k), v.as_deref(), &[]);
    }
    let batch = builder.finish();
    let result = partition
        .lock()
        .append_records(&batch, TimestampType::CreateTime, now);
    match result {
        Ok(_) => {
            state.notify_append();
            Ok(())
        }
        Err(code) => {
            tracing::warn!(
                group = group_id,
                ?code,
                "appending to __consumer_offsets failed"
            );
            Err(match code {
                ErrorCode::UnknownTopicOrPartition
                | ErrorCode::NotEnoughReplicas
                | ErrorCode::NotEnoughReplicasAfterAppend => ErrorCode::CoordinatorNotAvailable,
                ErrorCode::NotLeaderOrFollower | ErrorCode::KafkaStorageError => {
                    ErrorCode::NotCoordinator
                }
                ErrorCode::MessageTooLarge
                | ErrorCode::RecordListTooLarge
                | ErrorCode::InvalidFetchSize => ErrorCode::InvalidCommitOffsetSize,
                other => other,
            })
        }
    }
}

/// Replays every partition of `__consumer_offsets` into `groups`. Undecodable
/// records are logged and skipped; an unreadable partition is logged and loading
/// goes on with the others.
fn load_offsets(state: &BrokerState, groups: &mut Groups) {
    let Some(topic) = state.topic(OFFSETS_TOPIC) else {
        return;
    };
    let mut loaded = 0usize;
    for partition in &topic.partitions {
        let p = partition.lock();
        let mut from = p.log_start_offset();
        let end = p.high_watermark();
        while from < end {
            let batches = match p.read(from, LOAD_CHUNK, Isolation::ReadUncommitted) {
                Ok(b) => b,
                Err(e) => {
                    tracing::error!(partition = partition.index(), offset = from, error = %e, "cannot replay __consumer_offsets");
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
                if batch.is_control() {
                    continue;
                }
                let recs = match batch.records() {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::error!(error = %e, "unreadable batch in __consumer_offsets");
                        continue;
                    }
                };
                for rec in recs {
                    let Ok(rec) = rec else {
                        tracing::error!("bad record in __consumer_offsets");
                        break;
                    };
                    let Some(key) = rec.key else { continue };
                    let key = match records::decode_key(key) {
                        Ok(Some(k)) => k,
                        Ok(None) => continue,
                        Err(e) => {
                            tracing::warn!(error = %e, "skipping undecodable offset key");
                            continue;
                        }
                    };
                    let value = match rec.value.map(records::decode_value).transpose() {
                        Ok(v) => v,
                        Err(e) => {
                            tracing::warn!(error = %e, "skipping undecodable offset value");
                            continue;
                        }
                    };
                    groups.apply_offset(&key.group, &key.topic, key.partition, value);
                    loaded += 1;
                }
            }
        }
    }
    tracing::info!(records = loaded, "replayed __consumer_offsets");
}
