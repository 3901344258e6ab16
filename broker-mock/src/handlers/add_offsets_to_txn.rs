//! AddOffsetsToTxn (key 25), versions 0–4.
//!
//! Adds the group's `__consumer_offsets` partition (Kafka's mapping,
//! `group::records::partition_for`) to the producer's ongoing transaction at the
//! coordinator of its transactional id, so that the commit or abort marker also
//! lands there and makes the transaction's offsets (TxnOffsetCommit) visible or
//! drops them. `__consumer_offsets` is created first if missing.
//!
//! Errors as AddPartitionsToTxn: NOT_COORDINATOR, INVALID_PRODUCER_ID_MAPPING,
//! PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2), CONCURRENT_TRANSACTIONS,
//! INVALID_TXN_STATE. With an authorizer, as in Kafka: Write on the transactional
//! id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED), Read on the group (else
//! GROUP_AUTHORIZATION_FAILED).
//!
//! Deviations from Apache Kafka: past `BrokerLimits::max_partitions_per_transaction`
//! the answer is POLICY_VIOLATION.

use baton_protocol::acl::{AclOperation, ResourceType};
use baton_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};
use baton_protocol::ErrorCode;

use crate::acl::RequestContext;
use crate::group::records::partition_for;
use crate::group::OFFSETS_TOPIC;
use crate::state::BrokerState;

fn add(
    state: &BrokerState,
    ctx: &RequestContext,
    req: &AddOffsetsToTxnRequest,
) -> Result<(), ErrorCode> {
    let id = req.transactional_id.as_str();
    if !state.allowed(ctx, AclOperation::Write, ResourceType::TransactionalId, id) {
        return Err(ErrorCode::TransactionalIdAuthorizationFailed);
    }
    if !state.allowed(ctx, AclOperation::Read, ResourceType::Group, &req.group_id) {
        return Err(ErrorCode::GroupAuthorizationFailed);
    }
    let offsets = state.groups.offsets_topic(state)?;
    let p = partition_for(&req.group_id, offsets.partitions.len() as i32);
    state.txn.add_partitions(
        state,
        id,
        req.producer_id,
        req.producer_epoch,
        &[(OFFSETS_TOPIC.to_owned(), p)],
    )
}

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: AddOffsetsToTxnRequest,
    version: i16,
) -> AddOffsetsToTxnResponse {
    let code = match add(state, ctx, &req) {
        Ok(()) => ErrorCode::None,
        Err(ErrorCode::ProducerFenced) if version < 2 => ErrorCode::InvalidProducerEpoch,
        Err(code) => code,
    };
    AddOffsetsToTxnResponse {
        throttle_time_ms: 0,
        error_code: code.code(),
    }
}
