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
//! Deviations from Apache Kafka: fetch sessions (KIP-227) are never created; every
//! response has `session_id` 0, so clients keep sending full fetches, and a request
//! naming a non-zero session is `FETCH_SESSION_ID_NOT_FOUND`. `preferred_read_replica` is always -1; rack ids
//! are ignored.

use std::sync::Arc;
use std::time::Duration;

use baton_protocol::messages::{
    AbortedTransaction, FetchPartition, FetchRequest, FetchResponse, FetchResponsePartitionData,
    FetchableTopicResponse,
};
use baton_protocol::ErrorCode;
use bytes::{Bytes, BytesMut};
use tokio::sync::{oneshot, watch};

use baton_protocol::acl::{AclOperation, ResourceType};

use crate::acl::RequestContext;
use crate::partition::{Isolation, ReadError};
use crate::state::BrokerState;
use crate::topics::Topic;
use crate::wire::{encode, Reply};

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
    /// The first read of this request: the follower's progress is recorded then.
    first: bool,
    now_ms: u64,
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
    replica: Option<ReplicaFetch>,
    flags: &mut ReadFlags,
) -> (FetchResponsePartitionData, usize, bool) {
    let Some(partition) = topic.partition(p.partition) else {
        return (
            partition_error(p, ErrorCode::UnknownTopicOrPartition),
            0,
            true,
        );
    };
    let mut st = partition.lock();
    if !st.is_leader() {
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
                if let Err(e) = l.on_follower_fetch(r.replica_id, p.fetch_offset, r.now_ms) {
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

fn read_once(state: &BrokerState, req: &FetchRequest, version: i16, first: bool) -> ReadOutcome {
    let isolation = Isolation::from_wire(req.isolation_level);
    let mut remaining = req.max_bytes.max(0) as usize;
    let mut min_one = true;
    let mut bytes = 0;
    let mut error = false;
    let mut flags = ReadFlags::default();
    let replica = match state.mode.replica() {
        Some(link) if req.replica_id >= 0 => Some(ReplicaFetch {
            replica_id: req.replica_id,
            first,
            now_ms: link.now_ms(),
        }),
        _ => None,
    };
    let mut responses = Vec::with_capacity(req.topics.len());
    for t in &req.topics {
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
                        replica,
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
    version: i16,
    mut stop: watch::Receiver<bool>,
) -> FetchResponse {
    if req.session_id != 0 {
        return FetchResponse {
            error_code: ErrorCode::FetchSessionIdNotFound.code(),
            ..Default::default()
        };
    }
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
    let mut first = true;
    loop {
        appended.borrow_and_update();
        if let Some(r) = roles.as_mut() {
            r.borrow_and_update();
        }
        let (st, rq) = (state.clone(), req.clone());
        let once = first;
        first = false;
        let outcome =
            match tokio::task::spawn_blocking(move || read_once(&st, &rq, version, once)).await {
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

/// Takes the topics `ctx` may not fetch out of `req`, answered
/// `TOPIC_AUTHORIZATION_FAILED`: every topic of a follower without ClusterAction,
/// else the topics without Read. A topic id that names no topic stays (it is
/// answered `UNKNOWN_TOPIC_ID`).
fn take_refused(
    state: &BrokerState,
    ctx: &RequestContext,
    req: &mut FetchRequest,
    version: i16,
) -> Vec<FetchableTopicResponse> {
    if state.authorizer.is_none() {
        return Vec::new();
    }
    let follower_refused =
        req.replica_id >= 0 && !state.allowed_on_cluster(ctx, AclOperation::ClusterAction);
    let (refused, kept): (Vec<_>, Vec<_>) =
        std::mem::take(&mut req.topics).into_iter().partition(|t| {
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
        });
    req.topics = kept;
    refused
        .into_iter()
        .map(|t| FetchableTopicResponse {
            partitions: t
                .partitions
                .iter()
                .map(|p| partition_error(p, ErrorCode::TopicAuthorizationFailed))
                .collect(),
            topic: t.topic,
            topic_id: t.topic_id,
        })
        .collect()
}

/// Starts a fetch; its response is delivered through the returned [`Reply::Later`].
pub(crate) fn start(
    state: Arc<BrokerState>,
    ctx: &RequestContext,
    mut req: FetchRequest,
    version: i16,
    correlation_id: i32,
    stop: watch::Receiver<bool>,
) -> Reply {
    let (tx, rx) = oneshot::channel();
    let refused = take_refused(&state, ctx, &mut req, version);
    tokio::spawn(async move {
        let mut tx = tx;
        let refused_all = !refused.is_empty() && req.topics.is_empty();
        let work = async {
            if refused_all {
                // Nothing left to wait for.
                FetchResponse::default()
            } else {
                long_poll(state, req, version, stop).await
            }
        };
        tokio::pin!(work);
        let mut response = tokio::select! {
            r = &mut work => r,
            // The connection went away; nobody will read the response.
            _ = tx.closed() => return,
        };
        response.responses.extend(refused);
        let bytes = match encode::<FetchRequest>(correlation_id, version, &response) {
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
