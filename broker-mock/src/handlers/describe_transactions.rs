//! DescribeTransactions (key 65), version 0 (KIP-664).
//!
//! Each transactional id is described by its coordinator: state, timeout, start
//! time, producer id and epoch, and the partitions of the current transaction
//! (while a commit or abort is in progress, all of them until every marker is
//! written). NOT_COORDINATOR for an id this node does not coordinate,
//! TRANSACTIONAL_ID_NOT_FOUND for an id it has no state for. With an authorizer,
//! as in Kafka: Describe on the id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
//! and only topics the principal may Describe are listed.
//!
//! Deviations from Apache Kafka: while markers are being written, Kafka lists only
//! the partitions still waiting for theirs; here the list shrinks at once, when
//! the last marker has landed.

use baton_protocol::acl::{AclOperation, ResourceType};
use baton_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, DescribedTransaction,
    DescribedTransactionTopic,
};
use baton_protocol::ErrorCode;

use crate::acl::RequestContext;
use crate::state::BrokerState;

fn describe(state: &BrokerState, ctx: &RequestContext, id: &str) -> DescribedTransaction {
    let failed = |code: ErrorCode| DescribedTransaction {
        error_code: code.code(),
        transactional_id: id.to_owned(),
        transaction_start_time_ms: -1,
        producer_id: -1,
        producer_epoch: -1,
        ..Default::default()
    };
    if !state.allowed(
        ctx,
        AclOperation::Describe,
        ResourceType::TransactionalId,
        id,
    ) {
        return failed(ErrorCode::TransactionalIdAuthorizationFailed);
    }
    let m = match state.txn.describe(state, id) {
        Ok(m) => m,
        Err(code) => return failed(code),
    };
    let mut topics: Vec<DescribedTransactionTopic> = Vec::new();
    for (topic, p) in &m.partitions {
        if !state.allowed(ctx, AclOperation::Describe, ResourceType::Topic, topic) {
            continue;
        }
        match topics.last_mut() {
            Some(t) if t.topic == *topic => t.partitions.push(*p),
            _ => topics.push(DescribedTransactionTopic {
                topic: topic.clone(),
                partitions: vec![*p],
            }),
        }
    }
    DescribedTransaction {
        error_code: 0,
        transactional_id: id.to_owned(),
        transaction_state: m.state.name().to_owned(),
        transaction_timeout_ms: m.timeout_ms,
        transaction_start_time_ms: m.start_ms,
        producer_id: m.producer_id,
        producer_epoch: m.producer_epoch,
        topics,
    }
}

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: DescribeTransactionsRequest,
    _version: i16,
) -> DescribeTransactionsResponse {
    DescribeTransactionsResponse {
        throttle_time_ms: 0,
        transaction_states: req
            .transactional_ids
            .iter()
            .map(|id| describe(state, ctx, id))
            .collect(),
    }
}
