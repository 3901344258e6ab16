//! TxnOffsetCommit (key 28), versions 0–5 (Kafka 4.0's range).
//!
//! A transactional producer commits a consumer group's offsets inside its
//! transaction (KIP-98; the membership fields of v3+ are KIP-447's zombie fencing).
//! The group coordinator validates the request against the group as Kafka 4.0's
//! does for classic groups (see `Groups::validate_txn_commit`): an unknown group
//! accepts generation -1 and is created; a commit naming a member (v3+) must come
//! from a current member of the current generation (UNKNOWN_MEMBER_ID,
//! FENCED_INSTANCE_ID, ILLEGAL_GENERATION); unlike OffsetCommit a group completing a
//! rebalance does not refuse it. Per partition: unknown topics or partitions are
//! UNKNOWN_TOPIC_OR_PARTITION and metadata longer than the coordinator's limit is
//! OFFSET_METADATA_TOO_LARGE.
//!
//! Accepted offsets are appended to the group's `__consumer_offsets` partition as
//! one transactional batch carrying the producer id and epoch (offset commit records
//! in Kafka's layout, so Kafka's tools read them), and answered once durable. They
//! stay pending, invisible to OffsetFetch (or UNSTABLE_OFFSET_COMMIT with
//! `require_stable`), until the transaction's commit marker lands on that partition
//! (WriteTxnMarkers), which makes them committed; an abort marker drops them. A
//! producer epoch older than the one the partition has seen is
//! INVALID_PRODUCER_EPOCH. DeleteGroups on an empty group drops its pending offsets
//! with it (in memory and, through its tombstone, in a replay). Coordinator errors (NOT_COORDINATOR,
//! COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE) are as for OffsetCommit.
//!
//! With an authorizer, as in Kafka: the transactional id needs Write (else
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition), the group Read (else
//! GROUP_AUTHORIZATION_FAILED on every partition) and each topic Read (else
//! TOPIC_AUTHORIZATION_FAILED on its partitions).
//!
//! Deviations from Apache Kafka: the coordinator does not ask the transaction
//! coordinator whether the group's partition was added to the transaction
//! (AddOffsetsToTxn; with v5, the implicit add of transactions v2); pending offsets
//! over all groups are bounded by `BrokerLimits::max_pending_txn_offsets` and a
//! commit past it fails with POLICY_VIOLATION, as does one creating a group past
//! `BrokerLimits::max_groups` (Kafka has neither limit); retention is not applied
//! (offsets never expire).

use baton_protocol::acl::{AclOperation, ResourceType};
use baton_protocol::messages::{
    TxnOffsetCommitRequest, TxnOffsetCommitResponse, TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
};
use baton_protocol::ErrorCode;

use super::offset_commit::checked;
use crate::acl::RequestContext;
use crate::group::{CommittedOffset, TxnCommitter};
use crate::state::BrokerState;

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: TxnOffsetCommitRequest,
    _version: i16,
) -> TxnOffsetCommitResponse {
    if !state.allowed(
        ctx,
        AclOperation::Write,
        ResourceType::TransactionalId,
        &req.transactional_id,
    ) {
        return refused(&req, ErrorCode::TransactionalIdAuthorizationFailed);
    }
    if !state.allowed(ctx, AclOperation::Read, ResourceType::Group, &req.group_id) {
        return refused(&req, ErrorCode::GroupAuthorizationFailed);
    }
    let now = state.clock.now_ms();
    let max_metadata = state.config.groups.offset_metadata_max_bytes;
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
                commit_timestamp: now,
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
    let committer = TxnCommitter {
        group_id: &req.group_id,
        producer_id: req.producer_id,
        producer_epoch: req.producer_epoch,
        generation_id: req.generation_id,
        member_id: &req.member_id,
        instance_id: req.group_instance_id.as_deref(),
    };
    let outcome = state.groups.txn_commit(state, &committer, to_commit);
    if let Err(code) = outcome {
        tracing::debug!(group = %req.group_id, producer_id = req.producer_id, ?code, "transactional offset commit refused");
    }
    let topics = req
        .topics
        .iter()
        .zip(decided)
        .map(|(t, parts)| TxnOffsetCommitResponseTopic {
            name: t.name.clone(),
            partitions: parts
                .into_iter()
                .map(|(index, r)| TxnOffsetCommitResponsePartition {
                    partition_index: index,
                    error_code: match (r, outcome) {
                        (Err(code), _) | (Ok(()), Err(code)) => code.code(),
                        (Ok(()), Ok(())) => 0,
                    },
                })
                .collect(),
        })
        .collect();
    TxnOffsetCommitResponse {
        throttle_time_ms: 0,
        topics,
    }
}

/// Every partition of `req` answered `code`.
fn refused(req: &TxnOffsetCommitRequest, code: ErrorCode) -> TxnOffsetCommitResponse {
    TxnOffsetCommitResponse {
        throttle_time_ms: 0,
        topics: req
            .topics
            .iter()
            .map(|t| TxnOffsetCommitResponseTopic {
                name: t.name.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| TxnOffsetCommitResponsePartition {
                        partition_index: p.partition_index,
                        error_code: code.code(),
                    })
                    .collect(),
            })
            .collect(),
    }
}
