//! FindCoordinator (key 10), versions 0–6 (advertised 0–5).
//!
//! A group key (key type 0) is coordinated by the leader of its `__consumer_offsets`
//! partition (`group::records::partition_for`, Kafka's mapping): on a single node
//! that is always this node; in a cluster it is looked up in the metadata image, and
//! while the topic is being created (it is requested from the controller on the
//! first lookup) or the partition has no leader the answer is
//! COORDINATOR_NOT_AVAILABLE, as in Kafka. v4+ answers every key of the batch.
//!
//! With an authorizer, a group key needs Describe on the group (else
//! `GROUP_AUTHORIZATION_FAILED`) and a transactional id Describe on it (else
//! `TRANSACTIONAL_ID_AUTHORIZATION_FAILED`), as in Kafka.
//!
//! A transactional id (key type 1) is coordinated by the leader of its
//! `__transaction_state` partition (`txn::records::partition_for`, the same
//! mapping), found the same way; the topic is created on the first lookup.
//!
//! Deviations from Apache Kafka: share-group keys (type 2, v6) and unknown types are
//! INVALID_REQUEST.

use baton_protocol::messages::{Coordinator, FindCoordinatorRequest, FindCoordinatorResponse};
use baton_protocol::ErrorCode;

use baton_protocol::acl::{AclOperation, ResourceType};

use crate::acl::RequestContext;
use crate::state::BrokerState;

/// The coordinator node for `key`: node id, host and port.
fn coordinator_for(
    state: &BrokerState,
    ctx: &RequestContext,
    listener: usize,
    key_type: i8,
    key: &str,
) -> Result<(i32, String, i32), ErrorCode> {
    let refused = match key_type {
        0 => (!state.allowed(ctx, AclOperation::Describe, ResourceType::Group, key))
            .then_some(ErrorCode::GroupAuthorizationFailed),
        1 => (!state.allowed(
            ctx,
            AclOperation::Describe,
            ResourceType::TransactionalId,
            key,
        ))
        .then_some(ErrorCode::TransactionalIdAuthorizationFailed),
        _ => None,
    };
    if let Some(code) = refused {
        return Err(code);
    }
    let this_node = || {
        (
            state.config.node_id,
            state.endpoint(listener).host.clone(),
            state.endpoint(listener).port,
        )
    };
    let node = match key_type {
        0 => match state.groups.coordinator_node(state, key) {
            Some(found) => found.map(|(id, _, _)| id)?,
            None => {
                state.groups.offsets_topic(state)?;
                return Ok(this_node());
            }
        },
        1 => match state.txn.coordinator_node(state, key) {
            Some(found) => found?,
            None => {
                state.txn.state_topic(state)?;
                return Ok(this_node());
            }
        },
        _ => return Err(ErrorCode::InvalidRequest),
    };
    // A cluster node answers with the coordinator's endpoint of the listener the
    // request came on.
    let link = state
        .mode
        .replica()
        .ok_or(ErrorCode::CoordinatorNotAvailable)?;
    let img = link.image();
    let broker = img.broker(node).ok_or(ErrorCode::CoordinatorNotAvailable)?;
    broker
        .endpoint(state.listener_name(listener))
        .map(|(h, p)| (node, h.to_owned(), i32::from(p)))
        .ok_or(ErrorCode::CoordinatorNotAvailable)
}

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: FindCoordinatorRequest,
    version: i16,
    listener: usize,
) -> FindCoordinatorResponse {
    if version >= 4 {
        let coordinators = req
            .coordinator_keys
            .iter()
            .map(
                |key| match coordinator_for(state, ctx, listener, req.key_type, key) {
                    Ok((node_id, host, port)) => Coordinator {
                        key: key.clone(),
                        node_id,
                        host,
                        port,
                        error_code: 0,
                        error_message: None,
                    },
                    Err(code) => Coordinator {
                        key: key.clone(),
                        node_id: -1,
                        host: String::new(),
                        port: -1,
                        error_code: code.code(),
                        error_message: Some(format!(
                            "cannot find a coordinator for key type {}",
                            req.key_type
                        )),
                    },
                },
            )
            .collect();
        return FindCoordinatorResponse {
            coordinators,
            ..Default::default()
        };
    }
    match coordinator_for(state, ctx, listener, req.key_type, &req.key) {
        Ok((node_id, host, port)) => FindCoordinatorResponse {
            error_code: 0,
            node_id,
            host,
            port,
            ..Default::default()
        },
        Err(code) => FindCoordinatorResponse {
            error_code: code.code(),
            error_message: Some(format!(
                "cannot find a coordinator for key type {}",
                req.key_type
            )),
            node_id: -1,
            port: -1,
            ..Default::default()
        },
    }
}
