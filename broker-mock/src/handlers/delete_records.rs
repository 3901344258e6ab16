//! DeleteRecords (key 21), versions 0–2 (KIP-107).
//!
//! Moves each named partition's log start offset up to the given offset (-1 means
//! the high watermark), making the records below it unreadable: ListOffsets
//! EARLIEST answers the new start and a Fetch below it is `OFFSET_OUT_OF_RANGE`.
//! Whole segments below the new start are deleted at once; the rest of the first
//! segment stays on disk until retention deletes it, as in Kafka.
//!
//! Only a partition's leader deletes (`NOT_LEADER_OR_FOLLOWER` elsewhere, so a
//! client sends each partition to its leader); an offset past the high watermark or
//! below -1 is `OFFSET_OUT_OF_RANGE`, an offset at or below the current start
//! changes nothing. The response's `low_watermark` is the partition's low watermark:
//! the smallest log start offset among its replicas. As in Kafka (the delayed
//! DeleteRecords of the purgatory), a cluster leader answers once every live replica
//! (not fenced, not shutting down) has moved its log start to the requested offset,
//! which each does on its next fetch; past `timeout_ms` the partition is
//! `REQUEST_TIMED_OUT`. A single node answers at once.
//!
//! With an authorizer, each topic needs Delete (else `TOPIC_AUTHORIZATION_FAILED`
//! per partition), as in Kafka. A topic whose `cleanup.policy` lacks `delete` is
//! `POLICY_VIOLATION`, as in Kafka.
//!
//! Deviations from Apache Kafka: the wait polls the low watermark every
//! [`POLL`] rather than being woken by follower fetches; `timeout_ms` is capped at
//! [`MAX_WAIT`]; a partition named twice in one request is handled twice (Kafka
//! answers the last); a partition whose topic has remote storage is not a concept
//! here.

use std::sync::Arc;
use std::time::Duration;

use baton_protocol::acl::{AclOperation, ResourceType};
use baton_protocol::messages::{
    DeleteRecordsPartitionResult, DeleteRecordsRequest, DeleteRecordsResponse,
    DeleteRecordsTopicResult,
};
use baton_protocol::ErrorCode;
use bytes::Bytes;

use crate::acl::RequestContext;
use crate::partition::Partition;
use crate::state::BrokerState;
use crate::wire::{decode, encode, DispatchError, Reply};

/// How often a waiting request looks at the replicas' log start offsets again.
pub const POLL: Duration = Duration::from_millis(20);

/// Longest wait honoured, whatever `timeout_ms` asks.
pub const MAX_WAIT: Duration = Duration::from_secs(300);

/// A partition whose deletion is done locally and waits for the followers.
struct Waiting {
    topic: usize,
    partition: usize,
    target: i64,
    part: Arc<Partition>,
}

/// Applies the deletions (on the blocking pool) and answers, at once on a single
/// node or once the replicas have followed (see the module docs).
pub(crate) async fn request(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    frame: Bytes,
    version: i16,
) -> Result<Reply, DispatchError> {
    let (header, req) = decode::<DeleteRecordsRequest>(frame, version)?;
    let timeout = Duration::from_millis(req.timeout_ms.max(0) as u64).min(MAX_WAIT);
    let st = state.clone();
    let ctx = ctx.clone();
    let (response, waiting) = baton_env::spawn_blocking(move || apply(&st, &ctx, req))
        .await
        .map_err(|source| DispatchError::Handler {
            api_key: 21,
            source,
        })?;
    if !waiting.is_empty() {
        // Wake the followers' parked fetches: a follower behind the new start is
        // answered at once and deletes too.
        state.notify_append();
    }
    if waiting.is_empty() {
        let bytes = encode::<DeleteRecordsRequest>(header.correlation_id, version, &response)?;
        return Ok(Reply::Now(Some(bytes)));
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let response = wait(response, waiting, timeout).await;
        let bytes = encode::<DeleteRecordsRequest>(header.correlation_id, version, &response)
            .map_err(|e| tracing::error!(error = %e, "encoding DeleteRecords response failed"))
            .ok();
        let _ = tx.send(bytes);
    });
    Ok(Reply::Later(rx))
}

/// Moves the log starts; returns the response so far and the partitions whose
/// replicas have yet to follow.
fn apply(
    state: &BrokerState,
    ctx: &RequestContext,
    req: DeleteRecordsRequest,
) -> (DeleteRecordsResponse, Vec<Waiting>) {
    let mut waiting = Vec::new();
    let topics = req
        .topics
        .into_iter()
        .enumerate()
        .map(|(ti, t)| {
            let authorized = state.allowed(ctx, AclOperation::Delete, ResourceType::Topic, &t.name);
            let topic = state.topic(&t.name);
            let partitions = t
                .partitions
                .into_iter()
                .enumerate()
                .map(|(pi, p)| {
                    let mut out = DeleteRecordsPartitionResult {
                        partition_index: p.partition_index,
                        low_watermark: -1,
                        error_code: 0,
                    };
                    if !authorized {
                        out.error_code = ErrorCode::TopicAuthorizationFailed.code();
                        return out;
                    }
                    let Some(part) = topic
                        .as_ref()
                        .and_then(|t| t.partition(p.partition_index))
                    else {
                        out.error_code = ErrorCode::UnknownTopicOrPartition.code();
                        return out;
                    };
                    if topic.as_ref().is_some_and(|t| !t.config.deletes()) {
                        // As Kafka: a compact-only topic's records are not deleted.
                        out.error_code = ErrorCode::PolicyViolation.code();
                        return out;
                    }
                    let mut st = part.lock();
                    match st.delete_records_to(p.offset) {
                        Ok(_) => {
                            // The low watermark reached the requested offset (or the
                            // high watermark for -1) once every replica deleted.
                            let target = if p.offset == -1 {
                                st.high_watermark()
                            } else {
                                p.offset
                            };
                            let low = st.low_watermark();
                            if low >= target {
                                out.low_watermark = low;
                            } else {
                                waiting.push(Waiting {
                                    topic: ti,
                                    partition: pi,
                                    target,
                                    part: part.clone(),
                                });
                            }
                        }
                        Err(e) => {
                            if let crate::partition::LogStartError::Log(err) = &e {
                                tracing::error!(topic = %t.name, partition = p.partition_index, error = %err, "DeleteRecords failed");
                            }
                            out.error_code = e.code().code();
                        }
                    }
                    out
                })
                .collect();
            DeleteRecordsTopicResult {
                name: t.name,
                partitions,
            }
        })
        .collect();
    (
        DeleteRecordsResponse {
            throttle_time_ms: 0,
            topics,
        },
        waiting,
    )
}

/// Waits until each waiting partition's low watermark reaches its target, or the
/// timeout (`REQUEST_TIMED_OUT`); a partition that lost its leadership meanwhile is
/// `NOT_LEADER_OR_FOLLOWER`.
async fn wait(
    mut response: DeleteRecordsResponse,
    mut waiting: Vec<Waiting>,
    timeout: Duration,
) -> DeleteRecordsResponse {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        waiting.retain(|w| {
            let st = w.part.lock();
            let out = &mut response.topics[w.topic].partitions[w.partition];
            if !st.is_leader() || st.is_deleted() {
                out.error_code = ErrorCode::NotLeaderOrFollower.code();
                return false;
            }
            let low = st.low_watermark();
            if low >= w.target {
                out.low_watermark = low;
                return false;
            }
            true
        });
        if waiting.is_empty() {
            return response;
        }
        if tokio::time::Instant::now() >= deadline {
            for w in waiting {
                let out = &mut response.topics[w.topic].partitions[w.partition];
                out.error_code = ErrorCode::RequestTimedOut.code();
            }
            return response;
        }
        tokio::time::sleep(POLL).await;
    }
}
