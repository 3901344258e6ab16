//! ListPartitionReassignments (key 46), version 0 (KIP-455).
//!
//! Needs Describe on the cluster (else a top-level `CLUSTER_AUTHORIZATION_FAILED`).
//! A cluster node answers from its metadata image (replicas, adding and removing
//! replicas of each partition being reassigned); a single node never reassigns,
//! so its list is empty. Unknown topics and partitions not being reassigned are
//! left out, as in Kafka.

use baton_protocol::acl::AclOperation;
use baton_protocol::messages::{
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};
use baton_protocol::ErrorCode;

use crate::acl::RequestContext;
use crate::cluster::partition_admin::list_reassignments;
use crate::state::BrokerState;

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: ListPartitionReassignmentsRequest,
    _version: i16,
) -> ListPartitionReassignmentsResponse {
    if !state.allowed_on_cluster(ctx, AclOperation::Describe) {
        return ListPartitionReassignmentsResponse {
            error_code: ErrorCode::ClusterAuthorizationFailed.code(),
            error_message: Some("Authorization failed.".into()),
            ..Default::default()
        };
    }
    match state.mode.replica() {
        Some(link) => list_reassignments(&link.image(), &req),
        None => ListPartitionReassignmentsResponse::default(),
    }
}
