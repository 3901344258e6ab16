//! Heartbeat (key 12), versions 0–4.
//!
//! Keeps a member's session alive. Answers UNKNOWN_MEMBER_ID for members (and
//! groups) the coordinator does not know, FENCED_INSTANCE_ID when a static member's
//! instance id now belongs to another member id, ILLEGAL_GENERATION for another
//! generation and REBALANCE_IN_PROGRESS while the group waits for members to rejoin.
//!
//! In a consumer group (KIP-848), a classic member's generation is its member
//! epoch, and REBALANCE_IN_PROGRESS tells it to rejoin whenever its assignment
//! must change.
//!
//! With an authorizer, the group needs Read (else `GROUP_AUTHORIZATION_FAILED`).
//!
//! Deviations from Apache Kafka: none known.

use baton_protocol::messages::{HeartbeatRequest, HeartbeatResponse};
use baton_protocol::ErrorCode;

use baton_protocol::acl::{AclOperation, ResourceType};

use crate::acl::RequestContext;
use crate::state::BrokerState;

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: HeartbeatRequest,
    _version: i16,
) -> HeartbeatResponse {
    if !state.allowed(ctx, AclOperation::Read, ResourceType::Group, &req.group_id) {
        return HeartbeatResponse {
            throttle_time_ms: 0,
            error_code: ErrorCode::GroupAuthorizationFailed.code(),
        };
    }
    let code = state.groups.heartbeat(
        state,
        &req.group_id,
        req.generation_id,
        &req.member_id,
        req.group_instance_id.as_deref(),
    );
    HeartbeatResponse {
        throttle_time_ms: 0,
        error_code: code.code(),
    }
}
