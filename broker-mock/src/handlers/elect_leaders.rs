//! ElectLeaders (key 43), versions 0–2 (KIP-183 preferred, KIP-460 unclean).
//!
//! Needs Alter on the cluster (else `CLUSTER_AUTHORIZATION_FAILED`, top level and
//! for each partition named). A cluster node forwards the request to the
//! controller (`cluster/partition_admin.rs`, decided by `controller/elect.rs`) and
//! answers once its metadata image shows every new leader. A single node is the
//! only replica of its partitions, so each known partition is
//! `ELECTION_NOT_NEEDED` and an unknown one `UNKNOWN_TOPIC_OR_PARTITION`, as a
//! one-broker Kafka answers. A null partition list means every partition; those
//! needing no election are left out of the answer, as in Kafka.
//!
//! Deviations from Apache Kafka: the answer does not wait past the controller's
//! decision for the new leaders to take over (`timeout_ms` bounds nothing here).

use std::collections::HashMap;
use std::sync::Arc;

use baton_protocol::acl::AclOperation;
use baton_protocol::messages::{
    ElectLeadersPartitionResult, ElectLeadersReplicaElectionResult, ElectLeadersRequest,
    ElectLeadersResponse,
};
use baton_protocol::ErrorCode;
use bytes::Bytes;

use super::forward::{call_controller, forwarded, wait_for_epochs};
use crate::acl::RequestContext;
use crate::state::BrokerState;
use crate::wire::{decode, encode, DispatchError, Reply};

/// Answers an ElectLeaders request (see the module docs).
pub(crate) async fn request(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    frame: Bytes,
    version: i16,
) -> Result<Reply, DispatchError> {
    if !state.mode.is_replica() {
        let (header, req) = decode::<ElectLeadersRequest>(frame, version)?;
        let resp = if state.allowed_on_cluster(ctx, AclOperation::Alter) {
            standalone(state, &req)
        } else {
            everywhere(&req, ErrorCode::ClusterAuthorizationFailed)
        };
        let bytes = encode::<ElectLeadersRequest>(header.correlation_id, version, &resp)?;
        return Ok(Reply::Now(Some(bytes)));
    }
    forwarded::<ElectLeadersRequest, _, _>(state, frame, version, |link, req| async move {
        if !state.allowed_on_cluster(ctx, AclOperation::Alter) {
            return Ok(everywhere(&req, ErrorCode::ClusterAuthorizationFailed));
        }
        // Every partition's leader epoch before the election.
        let before: HashMap<(String, i32), i32> = {
            let img = link.image();
            img.partitions()
                .filter_map(|p| {
                    let name = img.topic(p.topic_id)?.name.clone();
                    Some(((name, p.partition), p.leader_epoch))
                })
                .collect()
        };
        let resp = call_controller(&link, &req, version, "ElectLeaders").await?;
        let elected: Vec<(String, i32, i32)> = resp
            .replica_election_results
            .iter()
            .flat_map(|t| {
                t.partition_result
                    .iter()
                    .filter(|p| p.error_code == 0)
                    .map(|p| (t.topic.clone(), p.partition_id))
            })
            .filter_map(|(topic, p)| {
                let epoch = *before.get(&(topic.clone(), p))?;
                Some((topic, p, epoch))
            })
            .collect();
        wait_for_epochs(state, &link, &elected, |pi| pi.leader_epoch).await;
        Ok(resp)
    })
    .await
}

/// A single node's answer: it leads every partition it has.
fn standalone(state: &BrokerState, req: &ElectLeadersRequest) -> ElectLeadersResponse {
    let Some(topics) = &req.topic_partitions else {
        return ElectLeadersResponse::default();
    };
    let results = topics
        .iter()
        .map(|t| {
            let topic = state.topic(&t.topic);
            ElectLeadersReplicaElectionResult {
                topic: t.topic.clone(),
                partition_result: t
                    .partitions
                    .iter()
                    .map(|&p| {
                        let known = topic.as_ref().is_some_and(|t| t.partition(p).is_some());
                        let code = if known {
                            ErrorCode::ElectionNotNeeded
                        } else {
                            ErrorCode::UnknownTopicOrPartition
                        };
                        result(p, code)
                    })
                    .collect(),
            }
        })
        .collect();
    ElectLeadersResponse {
        replica_election_results: results,
        ..Default::default()
    }
}

/// The same error, top level and for every partition named.
fn everywhere(req: &ElectLeadersRequest, code: ErrorCode) -> ElectLeadersResponse {
    ElectLeadersResponse {
        throttle_time_ms: 0,
        error_code: code.code(),
        replica_election_results: req
            .topic_partitions
            .iter()
            .flatten()
            .map(|t| ElectLeadersReplicaElectionResult {
                topic: t.topic.clone(),
                partition_result: t.partitions.iter().map(|&p| result(p, code)).collect(),
            })
            .collect(),
    }
}

fn result(partition: i32, code: ErrorCode) -> ElectLeadersPartitionResult {
    ElectLeadersPartitionResult {
        partition_id: partition,
        error_code: code.code(),
        error_message: (code != ErrorCode::None).then(|| format!("{code:?}")),
    }
}
