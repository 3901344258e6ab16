//! DeleteGroups (key 42), versions 0–2.
//!
//! Deletes groups without members and their committed offsets (tombstones are
//! written to `__consumer_offsets`, so the deletion survives a restart). Groups with
//! members are NON_EMPTY_GROUP; unknown ones GROUP_ID_NOT_FOUND.
//!
//! With an authorizer, each group needs Delete (else
//! `GROUP_AUTHORIZATION_FAILED` for it).
//!
//! Deviations from Apache Kafka: none known.

use baton_protocol::messages::{DeletableGroupResult, DeleteGroupsRequest, DeleteGroupsResponse};
use baton_protocol::ErrorCode;

use baton_protocol::acl::{AclOperation, ResourceType};

use crate::acl::RequestContext;
use crate::state::BrokerState;

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: DeleteGroupsRequest,
    _version: i16,
) -> DeleteGroupsResponse {
    let results = req
        .groups_names
        .into_iter()
        .map(|g| {
            let code = if state.allowed(ctx, AclOperation::Delete, ResourceType::Group, &g) {
                state.groups.delete(state, &g)
            } else {
                ErrorCode::GroupAuthorizationFailed
            };
            DeletableGroupResult {
                group_id: g,
                error_code: code.code(),
            }
        })
        .collect();
    DeleteGroupsResponse {
        throttle_time_ms: 0,
        results,
    }
}
