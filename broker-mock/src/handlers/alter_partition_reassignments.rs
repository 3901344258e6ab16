//! AlterPartitionReassignments (key 45), version 0 (KIP-455).
//!
//! Needs Alter on the cluster (else a top-level `CLUSTER_AUTHORIZATION_FAILED`).
//! A cluster node forwards the request to the controller, which records each
//! partition's target in its metadata log (`controller/reassign.rs`); the node
//! answers once its image shows every accepted change. The replicas then move
//! for real: see the reassignment data path in `docs/ARCHITECTURE.md`. Errors per
//! partition: `UNKNOWN_TOPIC_OR_PARTITION`, `INVALID_REPLICA_ASSIGNMENT` (empty,
//! repeated or unregistered replicas), `NO_REASSIGNMENT_IN_PROGRESS` (a null
//! target, cancelling, when nothing is in progress).
//!
//! A single node is its only broker: a target of exactly itself changes nothing,
//! any other is `INVALID_REPLICA_ASSIGNMENT`, and nothing can be cancelled.

use std::sync::Arc;

use baton_protocol::acl::AclOperation;
use baton_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use baton_protocol::ErrorCode;
use bytes::Bytes;

use super::forward::{call_controller, forwarded, wait_for_epochs};
use crate::acl::RequestContext;
use crate::state::BrokerState;
use crate::wire::{decode, encode, DispatchError, Reply};

/// A partition's replicas, whether it was being reassigned, and its partition
/// epoch, before a request.
type Before = (Vec<i32>, bool, i32);

/// Answers an AlterPartitionReassignments request (see the module docs).
pub(crate) async fn request(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    frame: Bytes,
    version: i16,
) -> Result<Reply, DispatchError> {
    let refused = || AlterPartitionReassignmentsResponse {
        error_code: ErrorCode::ClusterAuthorizationFailed.code(),
        error_message: Some("Authorization failed.".into()),
        ..Default::default()
    };
    if !state.mode.is_replica() {
        let (header, req) = decode::<AlterPartitionReassignmentsRequest>(frame, version)?;
        let resp = if state.allowed_on_cluster(ctx, AclOperation::Alter) {
            standalone(state, &req)
        } else {
            refused()
        };
        let bytes =
            encode::<AlterPartitionReassignmentsRequest>(header.correlation_id, version, &resp)?;
        return Ok(Reply::Now(Some(bytes)));
    }
    forwarded::<AlterPartitionReassignmentsRequest, _, _>(
        state,
        frame,
        version,
        |link, req| async move {
            if !state.allowed_on_cluster(ctx, AclOperation::Alter) {
                return Ok(refused());
            }
            // Each named partition's replicas, reassigning flag and partition
            // epoch before the change.
            let before: Vec<(String, i32, Option<Before>)> = {
                let img = link.image();
                req.topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(move |p| (t, p)))
                    .map(|(t, p)| {
                        let pi = img
                            .topic_by_name(&t.name)
                            .and_then(|ti| img.partition(ti.topic_id, p.partition_index))
                            .map(|pi| {
                                (pi.replicas.clone(), pi.is_reassigning(), pi.partition_epoch)
                            });
                        (t.name.clone(), p.partition_index, pi)
                    })
                    .collect()
            };
            let resp = call_controller(&link, &req, version, "AlterPartitionReassignments").await?;
            // Accepted changes; a target equal to the replicas in place changes
            // nothing, so only those that did differ are waited for.
            let accepted = resp.responses.iter().flat_map(|r| &r.partitions);
            let targets = req.topics.iter().flat_map(|t| &t.partitions);
            let changed: Vec<(String, i32, i32)> = before
                .into_iter()
                .zip(targets.zip(accepted))
                .filter(|(_, (_, r))| r.error_code == 0)
                .filter_map(|((topic, p, pi), (target, _))| {
                    let (replicas, reassigning, epoch) = pi?;
                    let same = target.replicas.as_ref() == Some(&replicas) && !reassigning;
                    (!same).then_some((topic, p, epoch))
                })
                .collect();
            wait_for_epochs(state, &link, &changed, |pi| pi.partition_epoch).await;
            Ok(resp)
        },
    )
    .await
}

/// A single node's answer (see the module docs).
fn standalone(
    state: &BrokerState,
    req: &AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    let me = state.config.node_id;
    let responses = req
        .topics
        .iter()
        .map(|t| {
            let topic = state.topic(&t.name);
            ReassignableTopicResponse {
                name: t.name.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| {
                        let known = topic
                            .as_ref()
                            .is_some_and(|t| t.partition(p.partition_index).is_some());
                        let (code, message) = match &p.replicas {
                            _ if !known => (ErrorCode::UnknownTopicOrPartition, None),
                            None => (ErrorCode::NoReassignmentInProgress, None),
                            Some(r) if r.as_slice() == [me] => (ErrorCode::None, None),
                            Some(r) if r.is_empty() => (
                                ErrorCode::InvalidReplicaAssignment,
                                Some("the target replica list is empty".to_owned()),
                            ),
                            Some(r) => (
                                ErrorCode::InvalidReplicaAssignment,
                                Some(format!("replicas {r:?}: broker {me} is the only broker")),
                            ),
                        };
                        ReassignablePartitionResponse {
                            partition_index: p.partition_index,
                            error_code: code.code(),
                            error_message: message
                                .or_else(|| (code != ErrorCode::None).then(|| format!("{code:?}"))),
                        }
                    })
                    .collect(),
            }
        })
        .collect();
    AlterPartitionReassignmentsResponse {
        responses,
        ..Default::default()
    }
}
