//! AddPartitionsToTxn (key 24), versions 0–5.
//!
//! v0–3 come from a transactional producer: the partitions are added to its
//! ongoing transaction (starting one) at the coordinator of its transactional id,
//! which must be this node (else NOT_COORDINATOR). Every partition gets the one
//! outcome of the request, except that when some partitions are refused before the
//! coordinator is asked (unknown topic or partition, no Write on the topic) those
//! get their error and the others OPERATION_NOT_ATTEMPTED, as in Kafka.
//!
//! v4+ is the batched form partition leaders send (KIP-890 part 1): several
//! transactions, each either `verify_only` (each partition answered NONE if it is in
//! the producer's ongoing transaction, else INVALID_TXN_STATE; nothing is added) or
//! added as above. It needs ClusterAction on the cluster (else
//! CLUSTER_AUTHORIZATION_FAILED for the whole request).
//!
//! Errors: INVALID_PRODUCER_ID_MAPPING (another producer id, or an id without
//! InitProducerId), PRODUCER_FENCED (an older epoch; INVALID_PRODUCER_EPOCH before
//! v2), CONCURRENT_TRANSACTIONS (a commit or abort is in progress),
//! INVALID_TXN_STATE. With an authorizer: Write on the transactional id (else
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on each topic (else
//! TOPIC_AUTHORIZATION_FAILED).
//!
//! Deviations from Apache Kafka: a transaction growing past
//! `BrokerLimits::max_partitions_per_transaction` is POLICY_VIOLATION; a
//! transactional id the coordinator does not know is INVALID_PRODUCER_ID_MAPPING
//! (as in Kafka) also in verify-only requests.

use baton_protocol::acl::{AclOperation, ResourceType};
use baton_protocol::messages::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult, AddPartitionsToTxnTopic, AddPartitionsToTxnTopicResult,
    AddPartitionsToTxnTransaction,
};
use baton_protocol::ErrorCode;

use crate::acl::RequestContext;
use crate::state::BrokerState;

/// The answer `code` for every partition of `topics`, or per-partition codes.
fn results(
    topics: &[AddPartitionsToTxnTopic],
    mut code: impl FnMut(&str, i32) -> ErrorCode,
) -> Vec<AddPartitionsToTxnTopicResult> {
    topics
        .iter()
        .map(|t| AddPartitionsToTxnTopicResult {
            name: t.name.clone(),
            results_by_partition: t
                .partitions
                .iter()
                .map(|&p| AddPartitionsToTxnPartitionResult {
                    partition_index: p,
                    partition_error_code: code(&t.name, p).code(),
                })
                .collect(),
        })
        .collect()
}

/// The error of one partition before the coordinator is asked, if any.
fn precheck(state: &BrokerState, ctx: &RequestContext, topic: &str, p: i32) -> Option<ErrorCode> {
    if !state.allowed(ctx, AclOperation::Write, ResourceType::Topic, topic) {
        return Some(ErrorCode::TopicAuthorizationFailed);
    }
    match state.topic(topic) {
        Some(t) if t.partition(p).is_some() => None,
        _ => Some(ErrorCode::UnknownTopicOrPartition),
    }
}

fn flatten(topics: &[AddPartitionsToTxnTopic]) -> Vec<(String, i32)> {
    topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|&p| (t.name.clone(), p)))
        .collect()
}

/// One transaction: add (or verify) its partitions.
fn one(
    state: &BrokerState,
    ctx: &RequestContext,
    txn: &AddPartitionsToTxnTransaction,
    version: i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let (id, producer_id, epoch) = (
        txn.transactional_id.as_str(),
        txn.producer_id,
        txn.producer_epoch,
    );
    let topics = &txn.topics[..];
    let fenced = |code: ErrorCode| match code {
        ErrorCode::ProducerFenced if version < 2 => ErrorCode::InvalidProducerEpoch,
        other => other,
    };
    if !state.allowed(ctx, AclOperation::Write, ResourceType::TransactionalId, id) {
        return results(topics, |_, _| ErrorCode::TransactionalIdAuthorizationFailed);
    }
    let partitions = flatten(topics);
    if txn.verify_only {
        return match state.txn.verify(state, id, producer_id, epoch, &partitions) {
            Ok(found) => {
                let mut found = found.into_iter();
                results(topics, |_, _| {
                    if found.next().unwrap_or(false) {
                        ErrorCode::None
                    } else {
                        ErrorCode::InvalidTxnState
                    }
                })
            }
            Err(code) => results(topics, |_, _| fenced(code)),
        };
    }
    let refused = partitions
        .iter()
        .any(|(t, p)| precheck(state, ctx, t, *p).is_some());
    if refused {
        return results(topics, |t, p| {
            precheck(state, ctx, t, p).unwrap_or(ErrorCode::OperationNotAttempted)
        });
    }
    let code = match state
        .txn
        .add_partitions(state, id, producer_id, epoch, &partitions)
    {
        Ok(()) => ErrorCode::None,
        Err(code) => fenced(code),
    };
    results(topics, |_, _| code)
}

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    if version <= 3 {
        let txn = AddPartitionsToTxnTransaction {
            transactional_id: req.v3_and_below_transactional_id,
            producer_id: req.v3_and_below_producer_id,
            producer_epoch: req.v3_and_below_producer_epoch,
            verify_only: false,
            topics: req.v3_and_below_topics,
        };
        let results_by_topic_v3_and_below = one(state, ctx, &txn, version);
        return AddPartitionsToTxnResponse {
            results_by_topic_v3_and_below,
            ..Default::default()
        };
    }
    if !state.allowed_on_cluster(ctx, AclOperation::ClusterAction) {
        return AddPartitionsToTxnResponse {
            error_code: ErrorCode::ClusterAuthorizationFailed.code(),
            ..Default::default()
        };
    }
    let results_by_transaction = req
        .transactions
        .iter()
        .map(|t| AddPartitionsToTxnResult {
            transactional_id: t.transactional_id.clone(),
            topic_results: one(state, ctx, t, version),
        })
        .collect();
    AddPartitionsToTxnResponse {
        results_by_transaction,
        ..Default::default()
    }
}
