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
//! Deviations from Apache Kafka: there is no transaction coordinator, so a non-null
//! transactional id is answered with `UNSUPPORTED_VERSION` (Kafka would route it to
//! the coordinator; Redpanda answers transaction FindCoordinator requests with this
//! code when transactions are disabled). An empty transactional id is
//! `INVALID_REQUEST`, as in Kafka. A failure to persist the id block is
//! `UNKNOWN_SERVER_ERROR`.
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
    _version: i16,
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
        Some(_) => return failed(ErrorCode::UnsupportedVersion),
    }
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
                return failed(ErrorCode::UnknownServerError);
            }
        }
        (_, id) => id,
    };
    match id {
        Ok(producer_id) => {
            tracing::debug!(producer_id, "allocated producer id");
            InitProducerIdResponse {
                throttle_time_ms: 0,
                error_code: 0,
                producer_id,
                producer_epoch: 0,
            }
        }
        Err(e) => {
            tracing::error!(error = %e, "allocating a producer id failed");
            failed(ErrorCode::UnknownServerError)
        }
    }
}
