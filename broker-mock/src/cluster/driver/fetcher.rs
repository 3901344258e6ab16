//! The replica fetcher of one followed partition: runs a [`FollowerState`] against
//! the leader over Fetch with this node's replica id.
//!
//! Truncation uses, by default, the diverging epoch of Fetch v12+ (KIP-595): every
//! fetch carries the epoch of the last local batch, and a leader whose log parted from
//! ours answers with the end offset of that epoch, to which the local log is cut
//! before fetching again. With [`TruncationMode::OffsetsForLeaderEpoch`] the
//! follower first asks OffsetForLeaderEpoch (KIP-101/279) and truncates before its
//! first fetch. Every fetched batch's CRC is checked before it is appended; a bad batch ends
//! the response there (the next fetch asks again).
//!
//! The task appends only while the partition still follows the same leader at the
//! same epoch (checked under the partition lock), so a stale fetcher that has not yet
//! been aborted cannot touch a log that changed role.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use baton_protocol::messages::{
    FetchPartition, FetchRequest, FetchTopic, OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use baton_protocol::record::{batches, RecordBatch};
use bytes::Bytes;

use crate::node_mode::ClusterLink;
use crate::partition::{Partition, PartitionState, Role};
#[cfg(doc)]
use crate::replication::TruncationMode;
use crate::replication::{
    AppendedBatch, EpochEndOffset, FollowerAction, FollowerState, LeaderEpochCache,
};
use crate::rpc::Rpc;
use crate::state::BrokerState;

/// Fetch version used between replicas (diverging epoch, topic names).
const REPLICA_FETCH_VERSION: i16 = 12;
/// Most bytes asked per fetch.
const FETCH_MAX_BYTES: i32 = 8 << 20;
/// Pause after a failed exchange.
const BACKOFF: Duration = Duration::from_millis(100);

fn still_following(st: &PartitionState, leader: i32, epoch: i32) -> bool {
    matches!(st.role(), Role::Follower { leader: l } if *l == leader) && st.leader_epoch() == epoch
}

pub(crate) async fn run_fetcher(
    state: Arc<BrokerState>,
    link: Arc<ClusterLink>,
    topic: String,
    partition: i32,
    leader: i32,
    epoch: i32,
) {
    let me = link.node_id;
    let Some(part) = state
        .topic(&topic)
        .and_then(|t| t.partition(partition).cloned())
    else {
        return;
    };
    let addr: SocketAddr = loop {
        if let Some(a) = link.broker_addr(leader) {
            break a;
        }
        tokio::time::sleep(BACKOFF).await;
    };
    let mut rpc = link.rpc(addr, format!("replica-{me}"));
    let pending_repair = part
        .lock()
        .corrupt_mark()
        .filter(|m| m.repair_started.is_none());
    if let Some(m) = pending_repair {
        // Cut nothing before the leader has shown a healthy copy of the damaged range:
        // if it is corrupt there too, the local data past the damage is all that is
        // left of it.
        if !leader_has_healthy_copy(&mut rpc, &topic, partition, m.offset).await {
            tracing::warn!(node = me, %topic, partition, leader, offset = m.offset, "leader has no healthy copy of the damaged range; not cutting");
            tokio::time::sleep(Duration::from_secs(1)).await;
            return;
        }
    }
    let mut follower = {
        let mut st = part.lock();
        if !still_following(&st, leader, epoch) || st.log_offline() {
            return;
        }
        // A replica with a corrupt batch cuts its log below it first and re-fetches
        // the rest from the leader (the repair ends when it has caught up).
        if st
            .corrupt_mark()
            .is_some_and(|m| m.repair_started.is_none())
        {
            match st.begin_repair() {
                Ok(leo) => {
                    tracing::warn!(node = me, %topic, partition, leo, leader, "repairing a corrupt replica from the leader")
                }
                Err(e) => {
                    tracing::error!(node = me, %topic, partition, error = %e, "cutting the corrupt range failed");
                    return;
                }
            }
        }
        FollowerState::new(
            leader,
            epoch,
            link.options.truncation_mode,
            st.epoch_cache().clone(),
            st.log_end_offset(),
            st.high_watermark(),
        )
    };
    tracing::debug!(node = me, %topic, partition, leader, epoch, %addr, "replica fetcher started");
    let mut actions: VecDeque<FollowerAction> = follower.take_actions().into();
    while let Some(action) = actions.pop_front() {
        match action {
            FollowerAction::Truncate { offset } => {
                let mut st = part.lock();
                if !still_following(&st, leader, epoch) {
                    return;
                }
                tracing::info!(node = me, %topic, partition, from = st.log_end_offset(), to = offset, "truncating divergent suffix");
                if let Err(e) = st.truncate_to(offset) {
                    tracing::error!(node = me, %topic, partition, error = %e, "truncation failed");
                    return;
                }
                st.set_epoch_cache(follower.epoch_cache().clone());
            }
            FollowerAction::HighWatermarkChanged { high_watermark } => {
                let mut st = part.lock();
                if !still_following(&st, leader, epoch) {
                    return;
                }
                st.set_follower_high_watermark(high_watermark);
                drop(st);
                // Consumers fetching from this follower (KIP-392) wait on it.
                state.notify_append();
            }
            FollowerAction::Fetch {
                fetch_offset,
                last_fetched_epoch,
                current_leader_epoch,
            } => {
                if part
                    .lock()
                    .corrupt_mark()
                    .is_some_and(|m| m.repair_started.is_none())
                {
                    // New corruption found in the local log: restart to repair it.
                    return;
                }
                let mut paused = link.replication_paused.subscribe();
                while *paused.borrow_and_update() {
                    if paused.changed().await.is_err() {
                        return;
                    }
                }
                let again = FollowerAction::Fetch {
                    fetch_offset,
                    last_fetched_epoch,
                    current_leader_epoch,
                };
                // Told to the leader, whose DeleteRecords waits on every replica's.
                let log_start_offset = part.lock().log_start_offset();
                let req = FetchRequest {
                    replica_id: me,
                    max_wait_ms: link.options.replica_fetch_wait_ms,
                    min_bytes: 1,
                    max_bytes: FETCH_MAX_BYTES,
                    session_epoch: -1,
                    topics: vec![FetchTopic {
                        topic: topic.clone(),
                        partitions: vec![FetchPartition {
                            partition,
                            current_leader_epoch,
                            fetch_offset,
                            last_fetched_epoch,
                            log_start_offset,
                            partition_max_bytes: FETCH_MAX_BYTES,
                        }],
                        ..Default::default()
                    }],
                    ..Default::default()
                };
                let timeout = Duration::from_millis(
                    link.options.replica_fetch_wait_ms.max(0) as u64 + 10_000,
                );
                let resp = match rpc.call(&req, REPLICA_FETCH_VERSION, timeout).await {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::debug!(node = me, %topic, partition, error = %e, "replica fetch failed");
                        tokio::time::sleep(BACKOFF).await;
                        actions.push_back(again);
                        continue;
                    }
                };
                let pd = resp
                    .responses
                    .into_iter()
                    .next()
                    .and_then(|t| t.partitions.into_iter().next());
                let Some(pd) = pd.filter(|_| resp.error_code == 0) else {
                    tokio::time::sleep(BACKOFF).await;
                    actions.push_back(again);
                    continue;
                };
                if pd.error_code == baton_protocol::ErrorCode::OffsetOutOfRange.code()
                    && pd.log_start_offset > fetch_offset
                {
                    // The leader deleted what we would fetch next (retention or
                    // DeleteRecords): restart, empty, at its log start (Kafka's
                    // truncateFullyAndStartAt). The fetcher is restarted from there.
                    let mut st = part.lock();
                    if !still_following(&st, leader, epoch) {
                        return;
                    }
                    tracing::info!(node = me, %topic, partition, fetch_offset, leader_log_start = pd.log_start_offset, "leader's log starts past our end; restarting the replica there");
                    if let Err(e) = st.truncate_fully_and_start_at(pd.log_start_offset) {
                        tracing::error!(node = me, %topic, partition, error = %e, "restarting the replica failed");
                    }
                    return;
                }
                if pd.error_code != 0 {
                    tracing::debug!(node = me, %topic, partition, code = pd.error_code, "leader refused replica fetch");
                    tokio::time::sleep(BACKOFF).await;
                    actions.push_back(again);
                    continue;
                }
                let div = &pd.diverging_epoch;
                if div.epoch >= 0 || div.end_offset >= 0 {
                    let answer = EpochEndOffset {
                        epoch: div.epoch,
                        end_offset: div.end_offset,
                    };
                    if let Err(e) = follower.on_diverging_epoch(answer) {
                        tracing::warn!(node = me, %topic, partition, error = %e, "diverging epoch refused");
                        tokio::time::sleep(BACKOFF).await;
                        actions.push_back(again);
                        continue;
                    }
                } else {
                    let fetched = checked_batches(&part, pd.records.unwrap_or_default());
                    let info: Vec<AppendedBatch> = fetched.iter().map(|(_, a)| *a).collect();
                    if let Err(e) = follower.on_fetch_response(&info, pd.high_watermark) {
                        tracing::warn!(node = me, %topic, partition, error = %e, "fetched batches refused");
                        tokio::time::sleep(BACKOFF).await;
                        actions.push_back(again);
                        continue;
                    }
                    if !fetched.is_empty() {
                        let cache = follower.epoch_cache().clone();
                        let appended = if state.config.data_dir.is_none() {
                            // An in-memory log never blocks: append in place.
                            append(&part, cache, leader, epoch, fetched)
                        } else {
                            // On the blocking pool: a write (and, at a segment roll,
                            // an fsync) under the partition lock.
                            let p = part.clone();
                            baton_env::spawn_blocking(move || {
                                append(&p, cache, leader, epoch, fetched)
                            })
                            .await
                            .unwrap_or(false)
                        };
                        if !appended {
                            return;
                        }
                    }
                    let mut st = part.lock();
                    if still_following(&st, leader, epoch) {
                        if let Err(e) = st.follow_leader_log_start(pd.log_start_offset) {
                            tracing::error!(node = me, %topic, partition, error = %e, "moving the log start failed");
                        }
                    }
                    let repaired = st.corrupt_mark().is_some_and(|m| {
                        m.repair_started.is_some() && st.log_end_offset() >= pd.high_watermark
                    });
                    if repaired && still_following(&st, leader, epoch) {
                        st.clear_corruption();
                    }
                }
            }
            FollowerAction::SendOffsetsForLeaderEpoch {
                current_leader_epoch,
                leader_epoch,
            } => {
                let req = OffsetForLeaderEpochRequest {
                    replica_id: me,
                    topics: vec![OffsetForLeaderTopic {
                        topic: topic.clone(),
                        partitions: vec![OffsetForLeaderPartition {
                            partition,
                            current_leader_epoch,
                            leader_epoch,
                        }],
                    }],
                };
                let answer = rpc
                    .call(&req, 4, Duration::from_secs(10))
                    .await
                    .ok()
                    .and_then(|r| r.topics.into_iter().next())
                    .and_then(|t| t.partitions.into_iter().next())
                    .filter(|p| p.error_code == 0);
                let Some(answer) = answer else {
                    tokio::time::sleep(BACKOFF).await;
                    actions.push_back(FollowerAction::SendOffsetsForLeaderEpoch {
                        current_leader_epoch,
                        leader_epoch,
                    });
                    continue;
                };
                let answer = EpochEndOffset {
                    epoch: answer.leader_epoch,
                    end_offset: answer.end_offset,
                };
                if let Err(e) = follower.on_epoch_end_offset(answer) {
                    tracing::warn!(node = me, %topic, partition, error = %e, "epoch end offset refused");
                    return;
                }
            }
        }
        actions.extend(follower.take_actions());
    }
}

/// Asks the leader, as a consumer would (so its follower bookkeeping is untouched),
/// for the batch at `offset`: true when it serves one that passes its CRC, or nothing
/// because `offset` is past its HW (uncommitted data may be cut anyway).
async fn leader_has_healthy_copy(rpc: &mut Rpc, topic: &str, partition: i32, offset: i64) -> bool {
    let req = FetchRequest {
        replica_id: -1,
        max_wait_ms: 0,
        min_bytes: 0,
        max_bytes: 1,
        session_epoch: -1,
        topics: vec![FetchTopic {
            topic: topic.to_owned(),
            partitions: vec![FetchPartition {
                partition,
                current_leader_epoch: -1,
                fetch_offset: offset,
                last_fetched_epoch: -1,
                log_start_offset: -1,
                partition_max_bytes: 1,
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let Ok(resp) = rpc
        .call(&req, REPLICA_FETCH_VERSION, Duration::from_secs(10))
        .await
    else {
        return false;
    };
    let Some(pd) = resp
        .responses
        .into_iter()
        .next()
        .and_then(|t| t.partitions.into_iter().next())
    else {
        return false;
    };
    if resp.error_code != 0 || pd.error_code != 0 {
        return false;
    }
    let records = pd.records.unwrap_or_default();
    if records.is_empty() {
        return offset >= pd.high_watermark;
    }
    match batches(records).next() {
        Some(Ok(b)) => {
            b.verify_crc().is_ok() && b.base_offset() <= offset && offset <= b.last_offset()
        }
        _ => false,
    }
}

/// Appends fetched batches under the partition lock; false when the fetcher must end.
fn append(
    part: &Partition,
    cache: LeaderEpochCache,
    leader: i32,
    epoch: i32,
    fetched: Vec<(Bytes, AppendedBatch)>,
) -> bool {
    let mut st = part.lock();
    if !still_following(&st, leader, epoch) {
        return false;
    }
    for (bytes, b) in fetched {
        if let Err(e) = st.append_replica_batch(bytes) {
            tracing::error!(topic = part.topic(), partition = part.index(), base = b.base_offset, error = %e, "replica append failed");
            return false;
        }
    }
    st.set_epoch_cache(cache);
    true
}

/// The whole batches of a fetch response up to the first one that is torn or fails
/// its CRC.
fn checked_batches(part: &Partition, records: Bytes) -> Vec<(Bytes, AppendedBatch)> {
    let mut out = Vec::new();
    for batch in batches(records) {
        let Ok(batch): Result<RecordBatch, _> = batch else {
            break;
        };
        if batch.verify_crc().is_err() {
            // The leader checks what it serves, so this was damaged on the way; the
            // next fetch asks again.
            part.lock()
                .corruption_event(crate::corruption::CorruptionKind::Detected {
                    at: crate::corruption::Where::FollowerAppend,
                    offset: batch.base_offset(),
                    reason: "fetched batch failed its CRC; not appended".into(),
                });
            break;
        }
        let info = AppendedBatch {
            base_offset: batch.base_offset(),
            last_offset: batch.last_offset(),
            leader_epoch: batch.partition_leader_epoch(),
        };
        out.push((batch.as_bytes().clone(), info));
    }
    out
}
