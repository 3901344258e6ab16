//! EndTxn (key 26), versions 0–5.
//!
//! Commits or aborts the producer's ongoing transaction at the coordinator of its
//! transactional id (else NOT_COORDINATOR). The answer comes once the decision
//! (`PrepareCommit` / `PrepareAbort`) is durable in `__transaction_state`; the
//! coordinator then writes the markers on every partition of the transaction in the
//! background and records the completion. Meanwhile the id answers
//! CONCURRENT_TRANSACTIONS to a new transaction; a retried EndTxn of a completed
//! transaction succeeds.
//!
//! v5 is KIP-890 part 2, used only by clients that negotiated it: the epoch is
//! bumped with every end and the response carries the producer id and epoch for
//! the next transaction; a retry naming the epoch before the bump is recognised, and
//! an abort without an open transaction is allowed (it bumps the epoch).
//!
//! Errors: INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH
//! before v2), CONCURRENT_TRANSACTIONS, INVALID_TXN_STATE (a commit after an abort
//! was decided, or no transaction). With an authorizer: Write on the transactional
//! id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
//!
//! Deviations from Apache Kafka: TRANSACTION_ABORTABLE (v4+) is never answered
//! here; in v5 a producer whose epoch
//! is exhausted keeps it at the end (the next InitProducerId takes a new id) where
//! Kafka hands out the next producer id in the response.

use baton_protocol::acl::{AclOperation, ResourceType};
use baton_protocol::messages::{EndTxnRequest, EndTxnResponse};
use baton_protocol::ErrorCode;

use crate::acl::RequestContext;
use crate::state::BrokerState;

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: EndTxnRequest,
    version: i16,
) -> EndTxnResponse {
    let id = req.transactional_id.as_str();
    let result = if state.allowed(ctx, AclOperation::Write, ResourceType::TransactionalId, id) {
        state.txn.end(
            state,
            id,
            req.producer_id,
            req.producer_epoch,
            req.committed,
            version >= 5,
        )
    } else {
        Err(ErrorCode::TransactionalIdAuthorizationFailed)
    };
    match result {
        Ok((producer_id, producer_epoch)) => EndTxnResponse {
            throttle_time_ms: 0,
            error_code: 0,
            producer_id,
            producer_epoch,
        },
        Err(code) => EndTxnResponse {
            throttle_time_ms: 0,
            error_code: match code {
                ErrorCode::ProducerFenced if version < 2 => ErrorCode::InvalidProducerEpoch,
                other => other,
            }
            .code(),
            ..Default::default()
        },
    }
}
