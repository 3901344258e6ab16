//! ListGroups (key 16), versions 0–5.
//!
//! Every group this node coordinates, with its protocol type, state (v4+) and type
//! (v5+, always `classic`), filtered by the request's states (v4+, matched without
//! regard to case) and types (v5+).
//!
//! With an authorizer, Describe on the cluster lists every group; without it,
//! only the groups the principal may Describe are listed, as in Kafka.
//!
//! Deviations from Apache Kafka: none known (there are no KIP-848 `consumer` groups
//! to list).

use baton_protocol::messages::{ListGroupsRequest, ListGroupsResponse};

use baton_protocol::acl::{AclOperation, ResourceType};

use crate::acl::RequestContext;
use crate::state::BrokerState;

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: ListGroupsRequest,
    _version: i16,
) -> ListGroupsResponse {
    let mut groups = state
        .groups
        .list(state, &req.states_filter, &req.types_filter);
    if !state.allowed_on_cluster(ctx, AclOperation::Describe) {
        groups.retain(|g| {
            state.allowed(
                ctx,
                AclOperation::Describe,
                ResourceType::Group,
                &g.group_id,
            )
        });
    }
    ListGroupsResponse {
        throttle_time_ms: 0,
        error_code: 0,
        groups,
    }
}
