//! InitProducerId (key 22), versions 0–5.
//!
//! A producer without a transactional id gets a fresh producer id with epoch 0
//! (KIP-98), unique within the process and, with a data directory, across restarts
//! (see [`ProducerIdAllocator`]). As in Apache Kafka, the `producer_id` and
//! `producer_epoch` fields (v3+, KIP-360) are ignored for such a producer: it gets a
//! new id even when it names its current one. An idempotent producer that wants to
//! keep its id after an unknown outcome bumps its epoch itself (KIP-360), and the
//! partitions accept the newer epoch when it restarts at sequence 0.
//!
//! On a cluster node the id is `local id * 1024 + node id`: each node allocates from
//! its own data directory, and the node id (which must be below 1024) keeps ids
//! unique across the cluster. (KRaft brokers instead take id blocks from the
//! controller with AllocateProducerIds.)
//!
//! With a transactional id the request goes to the transaction coordinator
//! (`txn::coordinator`), and only on the node that coordinates the id (else
//! NOT_COORDINATOR): a new id gets a fresh producer id with epoch 0; a known id gets
//! its epoch bumped (a new producer id once the epoch is exhausted), which fences
//! the previous producer; an open transaction of the id is aborted first, and the
//! request is answered CONCURRENT_TRANSACTIONS until that abort completes (the
//! client retries). With v3+ (KIP-360) the client may name its current producer id
//! and epoch to keep the id; a name the coordinator does not know is
//! PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v4, as Kafka maps it). A timeout
//! above `transaction_max_timeout_ms` is INVALID_TRANSACTION_TIMEOUT.
//!
//! Deviations from Apache Kafka: an empty transactional id is `INVALID_REQUEST`, as
//! in Kafka; a failure to persist the id block is `UNKNOWN_SERVER_ERROR`; a new
//! transactional id beyond `BrokerLimits::max_transactional_ids` is
//! `POLICY_VIOLATION` (Kafka has no such ceiling).
//!
//! With an authorizer, as in Kafka: a transactional id needs Write on it (else
//! `TRANSACTIONAL_ID_AUTHORIZATION_FAILED`); an idempotent producer needs
//! IdempotentWrite on the cluster or Write on some topic (else
//! `CLUSTER_AUTHORIZATION_FAILED`).

use baton_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse};
use baton_protocol::ErrorCode;

use baton_protocol::acl::{AclOperation, ResourceType};

use crate::acl::RequestContext;
use crate::producer_state::ProducerIdAllocator;
use crate::state::BrokerState;

fn failed(code: ErrorCode) -> InitProducerIdResponse {
    InitProducerIdResponse {
        throttle_time_ms: 0,
        error_code: code.code(),
        producer_id: -1,
        producer_epoch: -1,
    }
}

/// Node ids below this limit can allocate cluster-unique producer ids.
const CLUSTER_NODE_ID_LIMIT: i64 = 1024;

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: InitProducerIdRequest,
    version: i16,
) -> InitProducerIdResponse {
    match req.transactional_id.as_deref() {
        Some(id)
            if !id.is_empty()
                && !state.allowed(ctx, AclOperation::Write, ResourceType::TransactionalId, id) =>
        {
            return failed(ErrorCode::TransactionalIdAuthorizationFailed)
        }
        None if !state.allowed_on_cluster(ctx, AclOperation::IdempotentWrite)
            && !state.allowed_on_any(ctx, AclOperation::Write, ResourceType::Topic) =>
        {
            return failed(ErrorCode::ClusterAuthorizationFailed)
        }
        None => {}
        Some("") => return failed(ErrorCode::InvalidRequest),
        Some(id) => return transactional(state, id, &req, version),
    }
    match allocate(state) {
        Ok(producer_id) => {
            tracing::debug!(producer_id, "allocated producer id");
            InitProducerIdResponse {
                throttle_time_ms: 0,
                error_code: 0,
                producer_id,
                producer_epoch: 0,
            }
        }
        Err(code) => failed(code),
    }
}

/// InitProducerId for a transactional id, at its coordinator.
fn transactional(
    state: &BrokerState,
    id: &str,
    req: &InitProducerIdRequest,
    version: i16,
) -> InitProducerIdResponse {
    let mut next_id = || allocate(state);
    let expected = (req.producer_id, req.producer_epoch);
    match state.txn.init_producer_id(
        state,
        id,
        req.transaction_timeout_ms,
        expected,
        &mut next_id,
    ) {
        Ok((producer_id, producer_epoch)) => InitProducerIdResponse {
            throttle_time_ms: 0,
            error_code: 0,
            producer_id,
            producer_epoch,
        },
        Err(ErrorCode::ProducerFenced) if version < 4 => failed(ErrorCode::InvalidProducerEpoch),
        Err(code) => failed(code),
    }
}

/// A new producer id, unique across the cluster.
fn allocate(state: &BrokerState) -> Result<i64, ErrorCode> {
    let id = ProducerIdAllocator::for_data_dir(state.config.data_dir.as_deref())
        .and_then(|a| a.next_id());
    // In a cluster every node allocates from its own data directory, so the node id
    // goes into the low bits to keep ids unique across the cluster.
    let id = match (state.mode.replica(), id) {
        (Some(_), Ok(local)) => {
            let node = state.config.node_id as i64;
            if (0..CLUSTER_NODE_ID_LIMIT).contains(&node) {
                local
                    .checked_mul(CLUSTER_NODE_ID_LIMIT)
                    .map(|x| x + node)
                    .ok_or(crate::producer_state::AllocatorError::Exhausted)
            } else {
                tracing::error!(
                    node,
                    "node ids of {CLUSTER_NODE_ID_LIMIT} and above cannot allocate producer ids"
                );
                return Err(ErrorCode::UnknownServerError);
            }
        }
        (_, id) => id,
    };
    id.map_err(|e| {
        tracing::error!(error = %e, "allocating a producer id failed");
        ErrorCode::UnknownServerError
    })
}
