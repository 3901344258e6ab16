//! DescribeGroups (key 15), versions 0–5.
//!
//! Each group's state, protocol type, selected protocol and members; member metadata
//! and assignments are filled in only for `Stable` groups, as Kafka does. Unknown
//! groups are described as `Dead` without an error (Kafka answers
//! GROUP_ID_NOT_FOUND only from v6). A consumer group (KIP-848) is described as
//! Kafka describes it: its state (`Empty`, `Assigning`, `Reconciling`,
//! `Stable`), protocol type `consumer`, the classic members' protocol (else the
//! server assignor) as protocol data, and every member with its metadata (a
//! classic member's as it joined, a consumer-protocol member's subscription as a
//! `ConsumerProtocolSubscription`) and its assigned partitions.
//!
//! With an authorizer, each group needs Describe (else
//! `GROUP_AUTHORIZATION_FAILED` for it).
//!
//! Deviations from Apache Kafka: authorized operations (v3+) are never computed
//! (`i32::MIN`, "not requested").

use baton_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse, DescribedGroup};
use baton_protocol::ErrorCode;

use baton_protocol::acl::{AclOperation, ResourceType};

use crate::acl::RequestContext;
use crate::state::BrokerState;

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: DescribeGroupsRequest,
    _version: i16,
) -> DescribeGroupsResponse {
    let groups = req
        .groups
        .iter()
        .map(|g| {
            if state.allowed(ctx, AclOperation::Describe, ResourceType::Group, g) {
                state.groups.describe(state, g)
            } else {
                Err(ErrorCode::GroupAuthorizationFailed)
            }
        })
        .zip(&req.groups)
        .map(|(described, g)| match described {
            Err(code) => DescribedGroup {
                error_code: code.code(),
                group_id: g.clone(),
                ..Default::default()
            },
            Ok(d) => d,
        })
        .collect();
    DescribeGroupsResponse {
        throttle_time_ms: 0,
        groups,
    }
}
