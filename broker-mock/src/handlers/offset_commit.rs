//! OffsetCommit (key 8), versions 0–9 (advertised 2–9, Kafka 4.0's range).
//!
//! A commit from a current member of the current generation is accepted (also while
//! the group prepares a rebalance, so members can commit before they rejoin); one
//! with generation -1 and no member id is a "simple" commit, accepted for groups
//! without members (creating an empty group if needed). Otherwise the request fails
//! as a whole with UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID or
//! REBALANCE_IN_PROGRESS (between join and sync). Per partition: unknown topics or
//! partitions are UNKNOWN_TOPIC_OR_PARTITION and metadata longer than the
//! coordinator's limit (4096 bytes) is OFFSET_METADATA_TOO_LARGE. Accepted offsets
//! are appended to the group's `__consumer_offsets` partition before they are
//! answered, so they survive a restart.
//!
//! Deviations from Apache Kafka: retention times (v2–4) are ignored (offsets never
//! expire); the commit timestamp is the broker's clock except in v1, which sends
//! its own; a commit that would create one group more than
//! `BrokerLimits::max_groups` fails with POLICY_VIOLATION on every partition not
//! already refused (Kafka has no group count limit).
//!
//! With an authorizer, the group needs Read (else `GROUP_AUTHORIZATION_FAILED` on
//! every partition) and each topic Read (else `TOPIC_AUTHORIZATION_FAILED` on its
//! partitions), as in Kafka.

use baton_protocol::messages::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
};
use baton_protocol::ErrorCode;

use baton_protocol::acl::{AclOperation, ResourceType};

use tokio::sync::oneshot;

use crate::acl::RequestContext;
use crate::group::{replicated, CommittedOffset, OffsetToCommit};
use crate::replication::ProduceOutcome;
use crate::state::BrokerState;
use crate::topics::Topic;

/// The commits' replication, awaited by [`finish`] off the blocking pool.
pub(crate) type CommitWait = Option<oneshot::Receiver<ProduceOutcome>>;

/// Checks and stores the commits (on the blocking pool); the answer holds once
/// [`finish`] has seen them replicated.
pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: OffsetCommitRequest,
    version: i16,
) -> (OffsetCommitResponse, CommitWait) {
    if !state.allowed(ctx, AclOperation::Read, ResourceType::Group, &req.group_id) {
        return (refused(&req, ErrorCode::GroupAuthorizationFailed), None);
    }
    let now = state.clock.now_ms();
    let max_metadata = state.config.groups.offset_metadata_max_bytes;
    // Per partition: Ok(index into `to_commit`) or an error decided up front.
    let mut decided: Vec<Vec<(i32, Result<(), ErrorCode>)>> = Vec::with_capacity(req.topics.len());
    let mut to_commit = Vec::new();
    for t in &req.topics {
        let topic = state.topic(&t.name);
        let readable = state.allowed(ctx, AclOperation::Read, ResourceType::Topic, &t.name);
        let mut parts = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            let offset = CommittedOffset {
                offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: p.committed_metadata.clone().unwrap_or_default(),
                commit_timestamp: if version == 1 && p.commit_timestamp >= 0 {
                    p.commit_timestamp
                } else {
                    now
                },
            };
            let result = checked(
                topic.as_deref(),
                readable,
                max_metadata,
                p.partition_index,
                offset,
            )
            .map(|o| to_commit.push(o));
            parts.push((p.partition_index, result));
        }
        decided.push(parts);
    }
    let stored = state.groups.commit(
        state,
        &req.group_id,
        req.generation_id_or_member_epoch,
        &req.member_id,
        req.group_instance_id.as_deref(),
        to_commit,
    );
    let (outcome, wait) = match stored {
        Ok(wait) => (Ok(()), wait),
        Err(code) => {
            tracing::debug!(group = %req.group_id, ?code, "offset commit refused");
            (Err(code), None)
        }
    };
    let topics = req
        .topics
        .iter()
        .zip(decided)
        .map(|(t, parts)| OffsetCommitResponseTopic {
            name: t.name.clone(),
            partitions: parts
                .into_iter()
                .map(|(index, r)| OffsetCommitResponsePartition {
                    partition_index: index,
                    error_code: match (r, outcome) {
                        (Err(code), _) | (Ok(()), Err(code)) => code.code(),
                        (Ok(()), Ok(())) => 0,
                    },
                })
                .collect(),
        })
        .collect();
    let response = OffsetCommitResponse {
        throttle_time_ms: 0,
        topics,
    };
    (response, wait)
}

/// Waits (without a thread) until the stored commits are replicated; if they are
/// not, every partition that was stored gets the coordinator's error instead.
///
/// # Cancel safety
///
/// Cancel safe: the commits stand or fall whether or not this is awaited.
pub(crate) async fn finish(
    mut response: OffsetCommitResponse,
    wait: CommitWait,
) -> OffsetCommitResponse {
    if let Err(code) = replicated(wait).await {
        for p in response
            .topics
            .iter_mut()
            .flat_map(|t| t.partitions.iter_mut())
        {
            if p.error_code == 0 {
                p.error_code = code.code();
            }
        }
    }
    response
}

/// One partition of an OffsetCommit or a TxnOffsetCommit to `topic` (`None`:
/// unknown), checked before the coordinator sees the request: the offset to store,
/// or TOPIC_AUTHORIZATION_FAILED (the topic is not `readable`),
/// UNKNOWN_TOPIC_OR_PARTITION, or OFFSET_METADATA_TOO_LARGE (metadata longer than
/// `max_metadata` bytes), in that order.
pub(super) fn checked(
    topic: Option<&Topic>,
    readable: bool,
    max_metadata: usize,
    partition: i32,
    offset: CommittedOffset,
) -> Result<OffsetToCommit, ErrorCode> {
    let topic = topic.filter(|tp| tp.partition(partition).is_some());
    if !readable {
        Err(ErrorCode::TopicAuthorizationFailed)
    } else if let Some(topic) = topic {
        if offset.metadata.len() > max_metadata {
            Err(ErrorCode::OffsetMetadataTooLarge)
        } else {
            Ok(OffsetToCommit {
                topic: topic.name.clone(),
                partition,
                offset,
            })
        }
    } else {
        Err(ErrorCode::UnknownTopicOrPartition)
    }
}

/// Every partition of `req` answered `code`.
fn refused(req: &OffsetCommitRequest, code: ErrorCode) -> OffsetCommitResponse {
    OffsetCommitResponse {
        throttle_time_ms: 0,
        topics: req
            .topics
            .iter()
            .map(|t| OffsetCommitResponseTopic {
                name: t.name.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| OffsetCommitResponsePartition {
                        partition_index: p.partition_index,
                        error_code: code.code(),
                    })
                    .collect(),
            })
            .collect(),
    }
}
