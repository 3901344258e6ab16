//! WriteTxnMarkers (key 27), versions 0–1 (flexible from 1).
//!
//! A transaction coordinator asks this node, as partition leader, to end a
//! producer's transaction on each listed partition with a commit or abort marker:
//! a one-record control batch (see [`baton_protocol::record::control`]) appended
//! like a produce with `acks=all`, then filed in the partition's producer state (the
//! open transaction closes, the last stable offset moves on, an abort enters the
//! aborted-transactions index). Each partition is answered once its marker is
//! replicated to the in-sync replicas (on a single node, at once). On a topic with
//! `message.timestamp.type=LogAppendTime` the marker carries the log-append
//! timestamp type and the append time, as Kafka stamps control batches too.
//!
//! [`write_markers`] is the one path for markers: the wire handler below and the
//! transaction coordinator (for partitions this node leads) both call it. A
//! marker that lands on a `__consumer_offsets` partition is then handed to the
//! group coordinator (`GroupCoordinator::complete_transaction`), which makes the
//! producer's pending transactional offsets committed or drops them.
//!
//! Per-partition errors, as in Kafka: `UNKNOWN_TOPIC_OR_PARTITION` for a partition
//! this node does not know, `NOT_LEADER_OR_FOLLOWER` when it does not lead it (or
//! stops leading before the marker is replicated), `INVALID_PRODUCER_EPOCH` for a
//! producer epoch older than the partition's (a newer one fences the producer and
//! is written), `TRANSACTION_COORDINATOR_FENCED` for a coordinator epoch older than
//! the producer's last marker's, `NOT_ENOUGH_REPLICAS` below
//! `min.insync.replicas`, `REQUEST_TIMED_OUT` when the in-sync replicas do not
//! catch up within [`MARKER_REPLICATION_TIMEOUT_MS`], `KAFKA_STORAGE_ERROR` when the
//! append fails.
//!
//! With an authorizer the request needs ClusterAction on the cluster, else every
//! partition is `CLUSTER_AUTHORIZATION_FAILED` (Kafka answers the same).
//!
//! Deviations from Apache Kafka: the markers are appended one partition at a time
//! in request order and the replication waits run after all appends; a partition
//! named twice for one marker gets one marker and both places its answer (Kafka
//! would append one per mention), so a request appends at most one marker per
//! existing partition and marker.

use std::collections::HashMap;
use std::sync::Arc;

use baton_protocol::acl::AclOperation;
use baton_protocol::messages::{
    WritableTxnMarker, WritableTxnMarkerPartitionResult, WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use baton_protocol::record::control::EndTxnMarker;
use baton_protocol::record::TimestampType;
use baton_protocol::ErrorCode;
use tokio::sync::oneshot;

use crate::acl::RequestContext;
use crate::group::OFFSETS_TOPIC;
use crate::partition::{replication_result, Partition};
use crate::replication::ProduceOutcome;
use crate::state::BrokerState;
use crate::wire::{encode, Reply};

/// How long a marker waits for the in-sync replicas before its partition is
/// answered `REQUEST_TIMED_OUT` (Kafka's coordinator uses `request.timeout.ms`,
/// 30 s by default).
pub(crate) const MARKER_REPLICATION_TIMEOUT_MS: i32 = 30_000;

/// The answer of one partition of a request: an error code now, or the index of a
/// replication wait in its marker's `waits`.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Done(ErrorCode),
    Waiting(u32),
}

/// Appends `marker` for its producer's transaction on `partition`, as leader, and
/// returns the partition's answer (registering its replication wait in `waits`).
/// `now_ms` is the node's wall clock (the marker's timestamp). Runs on the
/// blocking pool (it writes the log).
fn append_one(
    partition: &Partition,
    timestamp_type: TimestampType,
    marker: &WritableTxnMarker,
    now_ms: i64,
    deadline_ms: u64,
    waits: &mut Vec<oneshot::Receiver<ProduceOutcome>>,
) -> Slot {
    let mut st = partition.lock();
    if !st.is_leader() {
        return Slot::Done(ErrorCode::NotLeaderOrFollower);
    }
    if let Some(l) = st.leader_state() {
        if let Err(r) = l.check_produce(true) {
            return Slot::Done(r.error_code());
        }
    }
    let end = EndTxnMarker {
        commit: marker.transaction_result,
        coordinator_epoch: marker.coordinator_epoch,
    };
    match st.append_marker(
        marker.producer_id,
        marker.producer_epoch,
        end,
        timestamp_type,
        now_ms,
    ) {
        Ok(appended) => {
            tracing::debug!(
                topic = %partition.topic(),
                partition = partition.index(),
                producer_id = marker.producer_id,
                commit = end.commit,
                offset = appended.offset,
                ended = ?appended.ended,
                "transaction marker written"
            );
            let leo = st.log_end_offset();
            match st.await_replication(leo, deadline_ms) {
                Some(rx) => {
                    waits.push(rx);
                    Slot::Waiting((waits.len() - 1) as u32)
                }
                None => Slot::Done(ErrorCode::None),
            }
        }
        Err(code) => Slot::Done(code),
    }
}

/// One marker of a request after its appends: for every partition of the request
/// (by topic, then position) its answer, and the replication waits they name.
struct MarkerOutcomes {
    marker: WritableTxnMarker,
    slots: Vec<Vec<Slot>>,
    waits: Vec<oneshot::Receiver<ProduceOutcome>>,
}

/// Appends one marker on every partition it names, each existing partition once
/// (a repeat gets the first place's answer, so a request cannot append more
/// markers than the partitions that exist).
fn append_marker(
    state: &BrokerState,
    marker: WritableTxnMarker,
    deadline_ms: u64,
) -> MarkerOutcomes {
    let mut waits = Vec::new();
    // The node's wall clock, read once for the marker's appends.
    let now_ms = state.clock.now_ms();
    // (topic position in the request, partition) -> answer, for existing partitions.
    let mut written: HashMap<(usize, i32), Slot> = HashMap::new();
    // A topic named twice shares its first position's answers.
    let mut first_position: HashMap<&str, usize> = HashMap::new();
    let mut slots = Vec::with_capacity(marker.topics.len());
    for (ti, t) in marker.topics.iter().enumerate() {
        let topic = state.topic(&t.name);
        if topic.is_none() {
            slots.push(vec![
                Slot::Done(ErrorCode::UnknownTopicOrPartition);
                t.partition_indexes.len()
            ]);
            continue;
        }
        let ti = *first_position.entry(t.name.as_str()).or_insert(ti);
        let timestamp_type = topic
            .as_ref()
            .map(|t| t.config.timestamp_type())
            .unwrap_or_default();
        let mut row = Vec::with_capacity(t.partition_indexes.len());
        for &p in &t.partition_indexes {
            let Some(partition) = topic.as_ref().and_then(|t| t.partition(p)) else {
                row.push(Slot::Done(ErrorCode::UnknownTopicOrPartition));
                continue;
            };
            let slot = *written.entry((ti, p)).or_insert_with(|| {
                append_one(
                    partition,
                    timestamp_type,
                    &marker,
                    now_ms,
                    deadline_ms,
                    &mut waits,
                )
            });
            row.push(slot);
        }
        slots.push(row);
    }
    MarkerOutcomes {
        marker,
        slots,
        waits,
    }
}

/// Writes every marker of `request` on the partitions it names, each answered once
/// its marker is replicated to the in-sync replicas or with the error that stopped
/// it (see the module docs). A partition named twice for one marker is written
/// once, and both places get its answer. The response lists markers, topics and
/// partitions in request order. No authorization check: callers inside the broker
/// are trusted, and the wire handler checks ClusterAction first.
///
/// # Cancel safety
///
/// Not cancel safe in effect: markers already appended stay in the log (as a
/// produce's batches do) and are replicated; only the answer is lost. The
/// coordinator retries unanswered markers, and a marker written twice is harmless
/// (the second finds no open transaction).
pub(crate) async fn write_markers(
    state: &Arc<BrokerState>,
    request: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    let st = state.clone();
    let appended = baton_env::spawn_blocking(move || {
        let deadline_ms = st
            .mode
            .replica()
            .map_or(0, |c| c.now_ms() + MARKER_REPLICATION_TIMEOUT_MS as u64);
        let markers: Vec<MarkerOutcomes> = request
            .markers
            .into_iter()
            .map(|marker| append_marker(&st, marker, deadline_ms))
            .collect();
        let wrote = markers.iter().any(|m| {
            m.slots
                .iter()
                .flatten()
                .any(|s| matches!(s, Slot::Waiting(_) | Slot::Done(ErrorCode::None)))
        });
        if wrote {
            st.notify_append();
        }
        markers
    })
    .await;
    let appended = match appended {
        Ok(a) => a,
        Err(e) => {
            tracing::error!(error = %e, "writing transaction markers failed");
            return WriteTxnMarkersResponse::default();
        }
    };
    let mut response = WriteTxnMarkersResponse {
        markers: Vec::with_capacity(appended.len()),
    };
    for m in appended {
        let mut replicated = Vec::with_capacity(m.waits.len());
        for rx in m.waits {
            replicated.push(replication_result(rx, MARKER_REPLICATION_TIMEOUT_MS).await);
        }
        let (producer_id, producer_epoch, commit) = (
            m.marker.producer_id,
            m.marker.producer_epoch,
            m.marker.transaction_result,
        );
        let topics = m
            .marker
            .topics
            .into_iter()
            .zip(m.slots)
            .map(|(t, row)| {
                let group_offsets = t.name == OFFSETS_TOPIC;
                WritableTxnMarkerTopicResult {
                    name: t.name,
                    partitions: t
                        .partition_indexes
                        .into_iter()
                        .zip(row)
                        .map(|(partition_index, slot)| {
                            let code = match slot {
                                Slot::Done(code) => code,
                                Slot::Waiting(i) => replicated[i as usize],
                            };
                            if group_offsets && code == ErrorCode::None {
                                // The marker landed on a `__consumer_offsets`
                                // partition: the producer's pending transactional
                                // offsets there become committed (or are dropped).
                                state.groups.complete_transaction(
                                    partition_index,
                                    producer_id,
                                    producer_epoch,
                                    commit,
                                );
                            }
                            WritableTxnMarkerPartitionResult {
                                partition_index,
                                error_code: code.code(),
                            }
                        })
                        .collect(),
                }
            })
            .collect();
        response.markers.push(WritableTxnMarkerResult {
            producer_id: m.marker.producer_id,
            topics,
        });
    }
    response
}

/// Every partition of `request` answered with `code`.
fn refuse_all(request: &WriteTxnMarkersRequest, code: ErrorCode) -> WriteTxnMarkersResponse {
    WriteTxnMarkersResponse {
        markers: request
            .markers
            .iter()
            .map(|m| WritableTxnMarkerResult {
                producer_id: m.producer_id,
                topics: m
                    .topics
                    .iter()
                    .map(|t| WritableTxnMarkerTopicResult {
                        name: t.name.clone(),
                        partitions: t
                            .partition_indexes
                            .iter()
                            .map(|&partition_index| WritableTxnMarkerPartitionResult {
                                partition_index,
                                error_code: code.code(),
                            })
                            .collect(),
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// The wire handler: checks ClusterAction, then answers from [`write_markers`] on
/// another task once every marker is replicated (or failed), so the connection
/// keeps serving other requests meanwhile.
pub(crate) fn start(
    state: Arc<BrokerState>,
    ctx: &RequestContext,
    request: WriteTxnMarkersRequest,
    version: i16,
    correlation_id: i32,
) -> Reply {
    let (tx, rx) = oneshot::channel();
    let allowed = state.allowed_on_cluster(ctx, AclOperation::ClusterAction);
    tokio::spawn(async move {
        let response = if allowed {
            write_markers(&state, request).await
        } else {
            refuse_all(&request, ErrorCode::ClusterAuthorizationFailed)
        };
        let bytes = encode::<WriteTxnMarkersRequest>(correlation_id, version, &response)
            .map_err(|e| tracing::error!(error = %e, "encoding WriteTxnMarkers response failed"))
            .ok();
        let _ = tx.send(bytes);
    });
    Reply::Later(rx)
}
