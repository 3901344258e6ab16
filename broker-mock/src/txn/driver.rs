//! The transaction coordinator's driver task: it sends the markers of every
//! `Prepare*` transition to the partitions' leaders and then completes the
//! transaction, aborts transactions past their timeout, and (on a cluster) keeps
//! the coordinator's ownership of `__transaction_state` partitions up to date, so a
//! node that gains one finishes the transactions it finds prepared there (a single
//! node does the same for its own partitions after a restart).
//!
//! Markers for a partition this node leads go through
//! [`write_markers`](crate::handlers::write_txn_markers::write_markers), the same
//! path as a WriteTxnMarkers request; for another leader, a WriteTxnMarkers request
//! goes over an inter-node [`Rpc`](crate::rpc::Rpc) (secured as the cluster's
//! inter-node settings say). A partition whose leader is unknown, moving or refusing
//! is retried with a growing pause until its marker lands, for as long as this node
//! coordinates the transaction.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use baton_protocol::messages::{
    WritableTxnMarker, WritableTxnMarkerTopic, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use baton_protocol::ErrorCode;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::coordinator::MarkerJob;
use crate::controller::NO_LEADER;
use crate::handlers::write_txn_markers::write_markers;
use crate::state::BrokerState;

/// Longest sleep when no timeout is due (the driver is woken on changes).
const IDLE_SLEEP: Duration = Duration::from_secs(1);
/// How often a cluster node re-checks which state partitions it leads.
const OWNERSHIP_CHECK: Duration = Duration::from_millis(250);
/// First and longest pause between two attempts at a marker.
const RETRY_MIN: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_secs(1);
/// How long one WriteTxnMarkers request to another node may take.
const MARKER_RPC_TIMEOUT: Duration = Duration::from_secs(10);

/// Starts the driver of `state`'s transaction coordinator; it ends when `stop` turns
/// true or its sender is dropped, aborting the marker tasks it started.
pub(crate) fn start(state: &Arc<BrokerState>, stop: &watch::Receiver<bool>) {
    let weak = Arc::downgrade(state);
    let coord = state.txn.clone();
    let clock = state.clock.clone();
    let cluster = state.mode.is_replica();
    let mut stop = stop.clone();
    tokio::spawn(async move {
        let mut tasks = JoinSet::new();
        let mut next_timeout: Option<i64> = None;
        loop {
            if *stop.borrow() {
                break;
            }
            let mut sleep = next_timeout
                .map(|t| Duration::from_millis((t - clock.now_ms()).max(0) as u64))
                .unwrap_or(IDLE_SLEEP)
                .min(IDLE_SLEEP);
            if cluster {
                sleep = sleep.min(OWNERSHIP_CHECK);
            }
            tokio::select! {
                _ = coord.wake.notified() => {}
                _ = tokio::time::sleep(sleep) => {}
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
                r = stop.changed() => if r.is_err() { break } else { continue },
            }
            let Some(st) = weak.upgrade() else { break };
            let blocking = baton_env::spawn_blocking(move || {
                // Also on a single node: after a restart the state partitions are
                // loaded without waiting for a request, so prepared transactions
                // finish and open ones time out.
                st.txn.sync_ownership(&*st);
                let next = st.txn.abort_timed_out(&*st, st.clock.now_ms());
                (next, st.txn.take_jobs())
            })
            .await;
            let Ok((next, jobs)) = blocking else { continue };
            next_timeout = next;
            for job in jobs {
                tasks.spawn(run_job(weak.clone(), job));
            }
        }
    });
}

/// Sends `job`'s markers until each has landed, then completes the transaction;
/// gives the job back to the coordinator if this node stops coordinating it.
async fn run_job(weak: Weak<BrokerState>, job: MarkerJob) {
    let mut owed: Vec<(String, i32)> = job.partitions.clone();
    let mut pause = RETRY_MIN;
    while !owed.is_empty() {
        let Some(state) = weak.upgrade() else { return };
        if !state.txn.still_owes(&job) {
            state.txn.retry(&job);
            return;
        }
        let by_leader = leaders(&state, &owed);
        let mut landed: Vec<(String, i32)> = Vec::new();
        for (leader, partitions) in by_leader {
            let Some(leader) = leader else { continue };
            let req = request(&job, &partitions);
            let resp = if leader == state.config.node_id || !state.mode.is_replica() {
                write_markers(&state, req).await
            } else {
                let Some(link) = state.mode.replica() else {
                    continue;
                };
                let Some(addr) = link.broker_addr(leader) else {
                    continue;
                };
                let mut rpc = state.txn.peers.take(link, addr);
                match rpc.call(&req, 1, MARKER_RPC_TIMEOUT).await {
                    Ok(r) => {
                        state.txn.peers.give(addr, rpc);
                        r
                    }
                    Err(e) => {
                        tracing::debug!(leader, error = %e, "sending transaction markers failed");
                        continue;
                    }
                }
            };
            landed.extend(done_partitions(&job, &resp));
        }
        owed.retain(|p| !landed.contains(p));
        if !owed.is_empty() {
            drop(state);
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(RETRY_MAX);
        }
    }
    let Some(state) = weak.upgrade() else { return };
    let st = state.clone();
    let j = job.clone();
    let completed = baton_env::spawn_blocking(move || st.txn.complete(&*st, &j)).await;
    match completed {
        Ok(Ok(())) => {
            tracing::debug!(transactional_id = %job.transactional_id, commit = job.commit, "transaction complete")
        }
        other => {
            tracing::warn!(transactional_id = %job.transactional_id, ?other, "cannot complete a transaction; retrying");
            tokio::time::sleep(RETRY_MAX).await;
            state.txn.retry(&job);
        }
    }
}

/// The owed partitions by leader (`None`: no leader known now).
fn leaders(
    state: &BrokerState,
    owed: &[(String, i32)],
) -> BTreeMap<Option<i32>, Vec<(String, i32)>> {
    let mut out: BTreeMap<Option<i32>, Vec<(String, i32)>> = BTreeMap::new();
    let Some(link) = state.mode.replica() else {
        out.insert(Some(state.config.node_id), owed.to_vec());
        return out;
    };
    let img = link.image();
    for (topic, p) in owed {
        let leader = img
            .topic_by_name(topic)
            .and_then(|t| img.partition(t.topic_id, *p))
            .map(|pi| pi.leader)
            .filter(|l| *l != NO_LEADER);
        out.entry(leader).or_default().push((topic.clone(), *p));
    }
    out
}

/// The WriteTxnMarkers request for `partitions` of `job`.
fn request(job: &MarkerJob, partitions: &[(String, i32)]) -> WriteTxnMarkersRequest {
    let mut topics: Vec<WritableTxnMarkerTopic> = Vec::new();
    for (topic, p) in partitions {
        match topics.last_mut() {
            Some(t) if t.name == *topic => t.partition_indexes.push(*p),
            _ => topics.push(WritableTxnMarkerTopic {
                name: topic.clone(),
                partition_indexes: vec![*p],
            }),
        }
    }
    WriteTxnMarkersRequest {
        markers: vec![WritableTxnMarker {
            producer_id: job.producer_id,
            producer_epoch: job.producer_epoch,
            transaction_result: job.commit,
            topics,
            coordinator_epoch: job.coordinator_epoch,
        }],
    }
}

/// The partitions of `resp` whose marker is settled: written, or never to be
/// (the topic is gone, or a newer epoch of the producer already ended it there).
fn done_partitions(job: &MarkerJob, resp: &WriteTxnMarkersResponse) -> Vec<(String, i32)> {
    let mut out = Vec::new();
    for m in resp
        .markers
        .iter()
        .filter(|m| m.producer_id == job.producer_id)
    {
        for t in &m.topics {
            for p in &t.partitions {
                match ErrorCode::from_code(p.error_code) {
                    ErrorCode::None => out.push((t.name.clone(), p.partition_index)),
                    ErrorCode::InvalidProducerEpoch => {
                        tracing::warn!(transactional_id = %job.transactional_id, topic = %t.name, partition = p.partition_index, "a newer producer epoch ended the transaction on this partition");
                        out.push((t.name.clone(), p.partition_index));
                    }
                    code => {
                        tracing::debug!(transactional_id = %job.transactional_id, topic = %t.name, partition = p.partition_index, ?code, "marker refused; retrying")
                    }
                }
            }
        }
    }
    out
}
