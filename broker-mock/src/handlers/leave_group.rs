//! LeaveGroup (key 13), versions 0–5.
//!
//! v0–2 remove one member by member id (its error is the top-level error); v3+
//! remove a batch, each by member id or by `group_instance_id` (a member id that
//! does not match the instance's current one is FENCED_INSTANCE_ID), with one result
//! per member. Member ids handed out by MEMBER_ID_REQUIRED that never joined may
//! leave too. The rest of the group rebalances.
//!
//! In a consumer group (KIP-848) the leaving classic members are removed and
//! the group epoch moves.
//!
//! With an authorizer, the group needs Read (else `GROUP_AUTHORIZATION_FAILED`).
//!
//! Deviations from Apache Kafka: the leave reason (v5+) is only logged.

use baton_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse, LeaveGroupResponseMember};
use baton_protocol::ErrorCode;

use baton_protocol::acl::{AclOperation, ResourceType};

use crate::acl::RequestContext;
use crate::group::machine::LeavingMember;
use crate::state::BrokerState;

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: LeaveGroupRequest,
    version: i16,
) -> LeaveGroupResponse {
    if !state.allowed(ctx, AclOperation::Read, ResourceType::Group, &req.group_id) {
        return LeaveGroupResponse {
            error_code: ErrorCode::GroupAuthorizationFailed.code(),
            ..Default::default()
        };
    }
    let leaving: Vec<LeavingMember> = if version >= 3 {
        req.members
            .iter()
            .map(|m| {
                if let Some(reason) = &m.reason {
                    tracing::debug!(group = %req.group_id, member = %m.member_id, %reason, "leave");
                }
                LeavingMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                }
            })
            .collect()
    } else {
        vec![LeavingMember {
            member_id: req.member_id.clone(),
            group_instance_id: None,
        }]
    };
    let result = state.groups.leave(state, &req.group_id, &leaving);
    match result {
        Err(code) => LeaveGroupResponse {
            error_code: code.code(),
            ..Default::default()
        },
        Ok(codes) if version < 3 => LeaveGroupResponse {
            error_code: codes.first().map_or(0, |c| c.code()),
            ..Default::default()
        },
        Ok(codes) => LeaveGroupResponse {
            throttle_time_ms: 0,
            error_code: 0,
            members: leaving
                .into_iter()
                .zip(codes)
                .map(|(l, c)| LeaveGroupResponseMember {
                    member_id: l.member_id,
                    group_instance_id: l.group_instance_id,
                    error_code: c.code(),
                })
                .collect(),
        },
    }
}
