//! Fetch (key 1), versions 4–13.
//!
//! Reads whole batches below the high watermark (read_uncommitted) or the last stable
//! offset (read_committed: the high watermark, or the first offset of the oldest
//! open transaction if lower). Every response carries the partition's last stable
//! offset; a read_committed one also lists the aborted transactions (producer id,
//! first offset) that overlap the batches returned, from the partition's
//! aborted-transactions index, so the consumer drops their records. Control batches
//! (transaction markers) are returned like any batch; clients skip them. Byte limits follow KIP-74: `max_bytes` bounds the response and
//! `partition_max_bytes` each partition, but the first batch of the first partition
//! with data is returned whole even when larger. Every batch's CRC is verified before
//! it is sent; a partition with a bad batch answers `KAFKA_STORAGE_ERROR` (and the
//! broker logs it) instead of sending the bytes. `max_wait_ms`/`min_bytes`
//! long-polling wakes on every append; errors answer at once. `current_leader_epoch`
//! (v9+) is checked when >= 0 (`FENCED_LEADER_EPOCH` / `UNKNOWN_LEADER_EPOCH`). v13
//! names topics by id (`UNKNOWN_TOPIC_ID`).
//!
//! In a cluster only the partition's leader serves fetches (`NOT_LEADER_OR_FOLLOWER`
//! elsewhere). A follower's fetch (`replica_id` >= 0) reads up to the log end rather
//! than the high watermark, updates the leader's view of that follower (its fetch
//! offset is its log end offset, which may advance the high watermark and complete
//! `acks=all` produces), and, from v12, is answered with `diverging_epoch` instead of
//! records when its `last_fetched_epoch` shows its log parted from the leader's.
//!
//! With an authorizer, a consumer's fetch needs Read on each topic and a
//! follower's fetch ClusterAction on the cluster; refused topics answer
//! `TOPIC_AUTHORIZATION_FAILED` on each partition, as in Kafka.
//!
//! Incremental fetch sessions (KIP-227, v7+) are Kafka's: a full fetch with
//! `session_epoch` 0 opens one if the cache allows (see `fetch_session`), later
//! incremental fetches name only changed partitions and `forgotten_topics_data`,
//! and their responses carry only partitions with records, a changed high
//! watermark, last stable offset or log start offset, an error or a diverging
//! epoch; an incremental fetch with nothing to send long-polls like any other.
//! Session errors answer at the top level (`FETCH_SESSION_ID_NOT_FOUND`,
//! `INVALID_FETCH_SESSION_EPOCH`, `FETCH_SESSION_TOPIC_ID_ERROR`) with no partitions.
//!
//! Fetching from the closest replica (KIP-392): with a replica selector
//! (`replica.selector.class`, see `replica_selector.rs`), a leader asked by a
//! consumer's v11+ fetch naming a `rack_id` answers `preferred_read_replica` (no
//! records, at once) when the selector picks an in-sync follower on an unfenced
//! broker whose log end reaches the fetch offset. A follower serves consumers'
//! v11+ fetches (with or without a rack) up to its own high watermark (read
//! committed: its last stable offset), which it learns from the leader's fetch
//! responses; below v11, or on a node that holds no replica, the answer is
//! `NOT_LEADER_OR_FOLLOWER`, and `current_leader_epoch` and the offset range are
//! checked against the follower's own state (`FENCED_LEADER_EPOCH`,
//! `UNKNOWN_LEADER_EPOCH`, `OFFSET_OUT_OF_RANGE`).
//!
//! Deviations from Apache Kafka: an incremental response also carries a partition
//! whose last stable offset alone moved (Kafka compares the high watermark and log
//! start only). The preferred-replica candidates are checked against the leader's
//! log start offset, not each follower's (the leader does not track them).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use baton_protocol::messages::{
    AbortedTransaction, FetchPartition, FetchRequest, FetchResponse, FetchResponsePartitionData,
    FetchTopic, FetchableTopicResponse,
};
use baton_protocol::{ErrorCode, Uuid};
use bytes::{Bytes, BytesMut};
use tokio::sync::{oneshot, watch};

use baton_protocol::acl::{AclOperation, ResourceType};

use crate::acl::RequestContext;
use crate::fetch_session::{PartitionKey, RequestMeta, Resolved};
use crate::partition::{Isolation, ReadError, Role};
use crate::replica_selector::{ReplicaSelector, ReplicaView};
use crate::state::BrokerState;
use crate::topics::Topic;
use crate::wire::Reply;

/// Longest wait honoured, so a pathological `max_wait_ms` cannot pin a task for days.
const MAX_WAIT_CAP: Duration = Duration::from_secs(300);

fn partition_error(p: &FetchPartition, code: ErrorCode) -> FetchResponsePartitionData {
    FetchResponsePartitionData {
        partition_index: p.partition,
        error_code: code.code(),
        high_watermark: -1,
        last_stable_offset: -1,
        log_start_offset: -1,
        records: Some(Bytes::new()),
        ..Default::default()
    }
}

struct ReadOutcome {
    response: FetchResponse,
    bytes: usize,
    error: bool,
    /// A leader's high watermark moved during the read (follower fetch).
    hw_moved: bool,
    /// A follower named a leader epoch newer than this node's roles know (it saw
    /// the controller's decision first): worth reading again after a reconcile.
    roles_behind: bool,
    /// A follower's log start offset is behind the leader's: answer at once, so
    /// it deletes too (DeleteRecords waits for it).
    log_start_behind: bool,
}

/// What reading the partitions of one request noticed beyond the data.
#[derive(Debug, Default, Clone, Copy)]
struct ReadFlags {
    /// A leader's high watermark moved (follower fetch).
    hw_moved: bool,
    /// A follower named a leader epoch this node's roles do not know yet.
    roles_behind: bool,
    /// A follower's log start offset is behind the leader's.
    log_start_behind: bool,
}

/// A follower's fetch, as seen by the leader.
#[derive(Debug, Clone, Copy)]
struct ReplicaFetch {
    replica_id: i32,
    /// The follower's broker epoch in this node's metadata image, if registered:
    /// the registration its fetches are credited to (KIP-903; Fetch before v15
    /// does not carry it).
    broker_epoch: Option<i64>,
    /// The first read of this request: the follower's progress is recorded then.
    first: bool,
    now_ms: u64,
}

/// Who reads a partition.
#[derive(Debug, Clone, Copy)]
enum Fetcher<'a> {
    /// A follower replicating from this leader.
    Replica(ReplicaFetch),
    /// A consumer.
    Consumer(&'a ClientFetch),
}

/// A consumer's fetch (`replica_id` -1), as KIP-392 sees it.
#[derive(Debug)]
struct ClientFetch {
    /// The request version: from v11 a consumer names its rack and may fetch from
    /// a follower.
    version: i16,
    /// The consumer's rack id (empty for none).
    rack: String,
    /// The node's replica selector.
    selector: ReplicaSelector,
    /// Racks of the cluster's unfenced brokers (this node included), when a
    /// selector may pick a follower for this fetch; empty otherwise.
    racks: HashMap<i32, Option<String>>,
    /// Now, on the cluster link's clock.
    now_ms: u64,
}

impl ClientFetch {
    /// Whether a follower may serve this fetch: v11+ (Kafka's `ClientMetadata`).
    fn may_read_follower(&self) -> bool {
        self.version >= 11
    }

    /// The follower a leader sends this consumer to, if its selector picks one
    /// (Kafka's `findPreferredReadReplica`): candidates are in-sync followers on an
    /// unfenced broker whose log end reaches `fetch_offset`.
    fn preferred_replica(
        &self,
        st: &crate::partition::PartitionState,
        fetch_offset: i64,
    ) -> Option<i32> {
        if self.racks.is_empty() || !self.may_read_follower() {
            return None;
        }
        let leader = st.leader_state()?;
        let rack = |id: i32| self.racks.get(&id).and_then(|r| r.as_deref());
        let local = leader.local_id();
        let followers: Vec<ReplicaView<'_>> = leader
            .isr()
            .iter()
            .filter(|id| **id != local && self.racks.contains_key(*id))
            .filter_map(|&id| {
                let progress = leader.follower(id)?;
                let leo = progress.log_end_offset?;
                (leo >= fetch_offset && st.log_start_offset() <= fetch_offset).then(|| {
                    ReplicaView {
                        id,
                        rack: rack(id),
                        log_end_offset: leo,
                        since_caught_up_ms: progress
                            .last_caught_up_ms
                            .map_or(u64::MAX, |t| self.now_ms.saturating_sub(t)),
                    }
                })
            })
            .collect();
        let me = ReplicaView {
            id: local,
            rack: rack(local),
            log_end_offset: st.log_end_offset(),
            since_caught_up_ms: 0,
        };
        crate::replica_selector::select(self.selector, &self.rack, me, &followers)
    }
}

fn concat(batches: Vec<Bytes>) -> Bytes {
    match batches.len() {
        0 => Bytes::new(),
        1 => batches.into_iter().next().unwrap_or_default(),
        _ => {
            let total = batches.iter().map(Bytes::len).sum();
            let mut buf = BytesMut::with_capacity(total);
            for b in batches {
                buf.extend_from_slice(&b);
            }
            buf.freeze()
        }
    }
}

fn read_partition(
    topic: &Topic,
    p: &FetchPartition,
    isolation: Isolation,
    remaining: &mut usize,
    min_one: &mut bool,
    fetcher: Fetcher<'_>,
    flags: &mut ReadFlags,
) -> (FetchResponsePartitionData, usize, bool) {
    let (replica, client) = match fetcher {
        Fetcher::Replica(r) => (Some(r), None),
        Fetcher::Consumer(c) => (None, Some(c)),
    };
    let Some(partition) = topic.partition(p.partition) else {
        return (
            partition_error(p, ErrorCode::UnknownTopicOrPartition),
            0,
            true,
        );
    };
    let mut st = partition.lock();
    if st.log_offline() {
        // The log failed a write or fsync: offline here, as Kafka answers for a
        // partition in a failed log directory.
        drop(st);
        return (partition_error(p, ErrorCode::KafkaStorageError), 0, true);
    }
    // KIP-392: a follower serves consumers' fetches (v11+) up to its high watermark.
    let follower_serves = client.is_some_and(ClientFetch::may_read_follower)
        && matches!(st.role(), Role::Follower { .. });
    if !st.is_leader() && !follower_serves {
        flags.roles_behind |= replica.is_some() && p.current_leader_epoch > st.leader_epoch();
        drop(st);
        return (partition_error(p, ErrorCode::NotLeaderOrFollower), 0, true);
    }
    if let Some(r) = replica {
        if let Err(code) = st.check_epoch(p.current_leader_epoch) {
            flags.roles_behind |= code == ErrorCode::UnknownLeaderEpoch;
            drop(st);
            return (partition_error(p, code), 0, true);
        }
        let leo = st.log_end_offset();
        if let Some(div) =
            st.epoch_cache()
                .diverging_epoch(p.fetch_offset, p.last_fetched_epoch, leo)
        {
            let mut out = partition_error(p, ErrorCode::None);
            out.high_watermark = st.high_watermark();
            out.last_stable_offset = st.last_stable_offset();
            out.log_start_offset = st.log_start_offset();
            out.diverging_epoch.epoch = div.epoch;
            out.diverging_epoch.end_offset = div.end_offset;
            return (out, 0, true);
        }
        if r.first {
            if let Some(l) = st.leader_state_mut() {
                let fetched =
                    l.on_follower_fetch_as(r.replica_id, r.broker_epoch, p.fetch_offset, r.now_ms);
                if let Err(e) = fetched {
                    let code = match e {
                        crate::replication::LeaderError::OffsetOutOfRange { .. } => {
                            ErrorCode::OffsetOutOfRange
                        }
                        _ => ErrorCode::NotLeaderOrFollower,
                    };
                    drop(st);
                    return (partition_error(p, code), 0, true);
                }
                l.on_follower_log_start(r.replica_id, p.log_start_offset);
                flags.hw_moved |= st.drive_leader();
            }
        }
        flags.log_start_behind |=
            p.log_start_offset >= 0 && p.log_start_offset < st.log_start_offset();
    }
    let mut out = FetchResponsePartitionData {
        partition_index: p.partition,
        error_code: 0,
        high_watermark: st.high_watermark(),
        last_stable_offset: st.last_stable_offset(),
        log_start_offset: st.log_start_offset(),
        aborted_transactions: match isolation {
            Isolation::ReadCommitted => Some(Vec::new()),
            Isolation::ReadUncommitted => None,
        },
        preferred_read_replica: -1,
        records: Some(Bytes::new()),
        ..Default::default()
    };
    if let Err(code) = st.check_epoch(p.current_leader_epoch) {
        out.error_code = code.code();
        return (out, 0, true);
    }
    if let Some(id) = client.and_then(|c| c.preferred_replica(&st, p.fetch_offset)) {
        // The consumer is sent to a follower of its rack: no records, answered now.
        out.preferred_read_replica = id;
        return (out, 0, true);
    }
    let budget = (p.partition_max_bytes.max(0) as usize).min(*remaining);
    let read = match replica {
        Some(_) => st.read_for_replica(p.fetch_offset, budget),
        None => st.read(p.fetch_offset, budget, isolation),
    };
    match read {
        Ok(batches) => {
            if batches.is_empty() {
                return (out, 0, false);
            }
            if !*min_one && batches[0].len() > budget {
                return (out, 0, false);
            }
            if let (Some(aborted), Some(last)) = (out.aborted_transactions.as_mut(), batches.last())
            {
                // The aborted transactions overlapping the offsets returned.
                let to = crate::log::header::BatchHeader::parse(last)
                    .map_or(p.fetch_offset, |h| h.last_offset);
                *aborted = st
                    .aborted_transactions(p.fetch_offset, to)
                    .into_iter()
                    .map(|a| AbortedTransaction {
                        producer_id: a.producer_id,
                        first_offset: a.first_offset,
                    })
                    .collect();
            }
            let data = concat(batches);
            let n = data.len();
            *remaining = remaining.saturating_sub(n);
            *min_one = false;
            out.records = Some(data);
            (out, n, false)
        }
        Err(e) => {
            if !matches!(e, ReadError::Code(_)) {
                tracing::error!(
                    topic = %topic.name,
                    partition = p.partition,
                    offset = p.fetch_offset,
                    error = %e,
                    "refusing to serve stored data"
                );
            }
            if let ReadError::CorruptBatch { offset, reason } = &e {
                // Stop serving the range at once: resign (in a cluster) and report.
                let at = match replica {
                    Some(_) => crate::corruption::Where::FollowerFetch,
                    None => crate::corruption::Where::Serve,
                };
                st.on_corruption(*offset, at, reason);
            }
            out.error_code = e.code().code();
            (out, 0, true)
        }
    }
}

/// What a consumer's fetch needs for KIP-392: the brokers' racks are looked up
/// only when the node's selector may pick a follower for it.
fn client_fetch(state: &BrokerState, req: &FetchRequest, version: i16) -> ClientFetch {
    let selector = state.config.replica_selector;
    let mut racks = HashMap::new();
    let mut now_ms = 0;
    if let Some(link) = state.mode.replica() {
        now_ms = link.now_ms();
        let wanted = version >= 11 && !req.rack_id.is_empty();
        if wanted && selector != ReplicaSelector::LeaderOnly {
            racks = link
                .image()
                .brokers()
                .filter(|b| !b.fenced)
                .map(|b| (b.broker_id, b.rack.clone()))
                .collect();
        }
    }
    ClientFetch {
        version,
        rack: req.rack_id.clone(),
        selector,
        racks,
        now_ms,
    }
}

fn read_once(
    state: &BrokerState,
    req: &FetchRequest,
    refused: &[bool],
    version: i16,
    first: bool,
) -> ReadOutcome {
    let isolation = Isolation::from_wire(req.isolation_level);
    let mut remaining = req.max_bytes.max(0) as usize;
    let mut min_one = true;
    let mut bytes = 0;
    let mut error = false;
    let mut flags = ReadFlags::default();
    let replica = match state.mode.replica() {
        Some(link) if req.replica_id >= 0 => Some(ReplicaFetch {
            replica_id: req.replica_id,
            broker_epoch: link.image().broker(req.replica_id).map(|b| b.broker_epoch),
            first,
            now_ms: link.now_ms(),
        }),
        _ => None,
    };
    let client = client_fetch(state, req, version);
    let fetcher = match replica {
        Some(r) => Fetcher::Replica(r),
        None => Fetcher::Consumer(&client),
    };
    let mut responses = Vec::with_capacity(req.topics.len());
    for (i, t) in req.topics.iter().enumerate() {
        if refused.get(i).copied().unwrap_or(false) {
            responses.push(FetchableTopicResponse {
                topic: t.topic.clone(),
                topic_id: t.topic_id,
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| partition_error(p, ErrorCode::TopicAuthorizationFailed))
                    .collect(),
            });
            continue;
        }
        let topic = if version >= 13 {
            state.topic_by_id(t.topic_id)
        } else {
            state.topic(&t.topic)
        };
        let missing = if version >= 13 {
            ErrorCode::UnknownTopicId
        } else {
            ErrorCode::UnknownTopicOrPartition
        };
        let partitions = t
            .partitions
            .iter()
            .map(|p| match &topic {
                None => {
                    error = true;
                    partition_error(p, missing)
                }
                Some(topic) => {
                    let (data, n, err) = read_partition(
                        topic,
                        p,
                        isolation,
                        &mut remaining,
                        &mut min_one,
                        fetcher,
                        &mut flags,
                    );
                    bytes += n;
                    error |= err;
                    data
                }
            })
            .collect();
        responses.push(FetchableTopicResponse {
            topic: t.topic.clone(),
            topic_id: t.topic_id,
            partitions,
        });
    }
    ReadOutcome {
        response: FetchResponse {
            throttle_time_ms: 0,
            error_code: 0,
            session_id: 0,
            responses,
        },
        bytes,
        error,
        hw_moved: flags.hw_moved,
        roles_behind: flags.roles_behind,
        log_start_behind: flags.log_start_behind,
    }
}

async fn long_poll(
    state: Arc<BrokerState>,
    req: FetchRequest,
    refused: Vec<bool>,
    version: i16,
    mut stop: watch::Receiver<bool>,
) -> FetchResponse {
    // Every topic refused: nothing to wait for (Kafka answers at once).
    let all_refused = !refused.is_empty() && refused.iter().all(|r| *r);
    let wait = Duration::from_millis(req.max_wait_ms.max(0) as u64).min(MAX_WAIT_CAP);
    let deadline = tokio::time::Instant::now() + wait;
    let min_bytes = req.min_bytes.max(0) as usize;
    let mut appended = state.subscribe_appends();
    // A follower's fetch that names a leader epoch this node has not taken up yet
    // waits for the next reconcile instead of being refused (the follower would
    // back off): a new leader's followers start fetching as soon as it leads.
    let mut roles = match state.mode.replica() {
        Some(link) if req.replica_id >= 0 => Some(link.subscribe_reconciled()),
        _ => None,
    };
    let req = Arc::new(req);
    let refused = Arc::new(refused);
    let mut first = true;
    loop {
        appended.borrow_and_update();
        if let Some(r) = roles.as_mut() {
            r.borrow_and_update();
        }
        let (st, rq, rf) = (state.clone(), req.clone(), refused.clone());
        let once = first;
        first = false;
        let outcome =
            match baton_env::spawn_blocking(move || read_once(&st, &rq, &rf[..], version, once))
                .await
            {
                Ok(o) => o,
                Err(e) => {
                    tracing::error!(error = %e, "fetch read failed");
                    return FetchResponse {
                        error_code: ErrorCode::UnknownServerError.code(),
                        ..Default::default()
                    };
                }
            };
        if outcome.hw_moved {
            state.notify_append();
        }
        if let Some(r) = roles.as_mut().filter(|_| outcome.roles_behind) {
            if tokio::time::Instant::now() < deadline && !*stop.borrow() {
                tokio::select! {
                    res = r.changed() => if res.is_err() { return outcome.response },
                    _ = tokio::time::sleep_until(deadline) => {}
                    res = stop.changed() => if res.is_err() { return outcome.response },
                }
                // Refused reads record no progress: the next read is the first.
                first = once;
                continue;
            }
        }
        let done = outcome.error
            || outcome.log_start_behind
            || all_refused
            || outcome.bytes >= min_bytes
            || tokio::time::Instant::now() >= deadline
            || *stop.borrow();
        if done {
            return outcome.response;
        }
        tokio::select! {
            r = appended.changed() => if r.is_err() { return outcome.response },
            _ = tokio::time::sleep_until(deadline) => {}
            r = stop.changed() => if r.is_err() { return outcome.response },
        }
    }
}

/// Which topics of `req` `ctx` may not fetch (answered
/// `TOPIC_AUTHORIZATION_FAILED`): every topic of a follower without ClusterAction,
/// else the topics without Read. A topic id that names no topic is not refused (it
/// is answered `UNKNOWN_TOPIC_ID`).
fn refused_topics(
    state: &BrokerState,
    ctx: &RequestContext,
    req: &FetchRequest,
    version: i16,
) -> Vec<bool> {
    if state.authorizer.is_none() {
        return vec![false; req.topics.len()];
    }
    let follower_refused =
        req.replica_id >= 0 && !state.allowed_on_cluster(ctx, AclOperation::ClusterAction);
    req.topics
        .iter()
        .map(|t| {
            if follower_refused {
                return true;
            }
            if req.replica_id >= 0 {
                return false;
            }
            let name = if version >= 13 {
                match state.topic_by_id(t.topic_id) {
                    Some(topic) => topic.name.clone(),
                    None => return false,
                }
            } else {
                t.topic.clone()
            };
            !state.allowed(ctx, AclOperation::Read, ResourceType::Topic, &name)
        })
        .collect()
}

/// A topic's session name: its id from v13 (the name left empty), its name before.
fn session_topic(version: i16, topic: &str, topic_id: Uuid) -> (Uuid, Arc<str>) {
    if version >= 13 {
        (topic_id, Arc::from(""))
    } else {
        (Uuid::ZERO, Arc::from(topic))
    }
}

/// `partitions` by topic, consecutive partitions of one topic grouped (as Kafka
/// groups a response's partitions).
fn group_topics<T>(partitions: Vec<(PartitionKey, T)>) -> Vec<(PartitionKey, Vec<T>)> {
    let mut out: Vec<(PartitionKey, Vec<T>)> = Vec::new();
    for (k, item) in partitions {
        match out.last_mut() {
            Some((last, items)) if last.topic == k.topic && last.topic_id == k.topic_id => {
                items.push(item)
            }
            _ => out.push((k, vec![item])),
        }
    }
    out
}

/// The response topics of `partitions`.
fn response_topics(
    partitions: Vec<(PartitionKey, FetchResponsePartitionData)>,
) -> Vec<FetchableTopicResponse> {
    group_topics(partitions)
        .into_iter()
        .map(|(k, partitions)| FetchableTopicResponse {
            topic: k.topic.to_string(),
            topic_id: k.topic_id,
            partitions,
        })
        .collect()
}

/// Resolves `req`'s session fields: the request to read (every partition of the
/// session for an incremental fetch) and how to shape the answer, or the
/// top-level error.
fn resolve_session(
    state: &BrokerState,
    req: FetchRequest,
    version: i16,
) -> Result<(FetchRequest, Resolved), ErrorCode> {
    let meta = RequestMeta {
        session_id: req.session_id,
        epoch: req.session_epoch,
        version,
        privileged: req.replica_id >= 0,
    };
    let mut fetch = Vec::new();
    for t in &req.topics {
        let (topic_id, topic) = session_topic(version, &t.topic, t.topic_id);
        for p in &t.partitions {
            let key = PartitionKey {
                topic_id,
                topic: topic.clone(),
                partition: p.partition,
            };
            fetch.push((key, p.clone()));
        }
    }
    let mut forget = Vec::new();
    for t in &req.forgotten_topics_data {
        let (topic_id, topic) = session_topic(version, &t.topic, t.topic_id);
        for &partition in &t.partitions {
            forget.push(PartitionKey {
                topic_id,
                topic: topic.clone(),
                partition,
            });
        }
    }
    let resolved = state
        .fetch_sessions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .resolve(meta, fetch, forget, state.clock.now_ms().max(0) as u64)?;
    let topics = group_topics(resolved.partitions.clone())
        .into_iter()
        .map(|(k, partitions)| FetchTopic {
            topic: k.topic.to_string(),
            topic_id: k.topic_id,
            partitions,
        })
        .collect();
    let read = FetchRequest {
        topics,
        forgotten_topics_data: Vec::new(),
        ..req
    };
    Ok((read, resolved))
}

/// Shapes a read's response through the session: the session id, and only the
/// changed partitions of an incremental fetch.
fn finish_session(
    state: &BrokerState,
    resolved: Resolved,
    mut response: FetchResponse,
) -> FetchResponse {
    if response.error_code != 0 {
        return response;
    }
    let data: Vec<FetchResponsePartitionData> = std::mem::take(&mut response.responses)
        .into_iter()
        .flat_map(|t| t.partitions)
        .collect();
    if data.len() != resolved.partitions.len() {
        tracing::error!("fetch response does not match its partitions; sent without a session");
        response.responses = response_topics(
            resolved
                .partitions
                .into_iter()
                .map(|(k, _)| k)
                .zip(data)
                .collect(),
        );
        return response;
    }
    let read = resolved
        .partitions
        .into_iter()
        .zip(data)
        .map(|((k, req), resp)| (k, req, resp))
        .collect();
    let (error, session_id, out) = state
        .fetch_sessions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .finish(resolved.context, read, state.clock.now_ms().max(0) as u64);
    response.error_code = error.code();
    response.session_id = session_id;
    response.responses = response_topics(out);
    response
}

/// Starts a fetch; its response is delivered through the returned [`Reply::Later`].
pub(crate) fn start(
    state: Arc<BrokerState>,
    ctx: &RequestContext,
    req: FetchRequest,
    version: i16,
    correlation_id: i32,
    stop: watch::Receiver<bool>,
) -> Reply {
    let (tx, rx) = oneshot::channel();
    let resolved = resolve_session(&state, req, version);
    let refused = match &resolved {
        Ok((read, _)) => refused_topics(&state, ctx, read, version),
        Err(_) => Vec::new(),
    };
    tokio::spawn(async move {
        let mut tx = tx;
        let work = async {
            match resolved {
                Err(code) => FetchResponse {
                    error_code: code.code(),
                    ..Default::default()
                },
                Ok((read, resolved)) => {
                    let response = long_poll(state.clone(), read, refused, version, stop).await;
                    finish_session(&state, resolved, response)
                }
            }
        };
        tokio::pin!(work);
        let response = tokio::select! {
            r = &mut work => r,
            // The connection went away; nobody will read the response.
            _ = tx.closed() => return,
        };
        let encoded = crate::metrics::errors::encode_counted::<FetchRequest>(
            &state.metrics,
            correlation_id,
            version,
            &response,
        );
        let bytes = match encoded {
            Ok(b) => Some(b),
            Err(e) => {
                tracing::error!(error = %e, "encoding fetch response failed");
                None
            }
        };
        let _ = tx.send(bytes);
    });
    Reply::Later(rx)
}
