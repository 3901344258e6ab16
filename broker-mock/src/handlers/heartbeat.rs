//! Heartbeat (key 12), versions 0–4.
//!
//! Keeps a member's session alive. Answers UNKNOWN_MEMBER_ID for members (and
//! groups) the coordinator does not know, FENCED_INSTANCE_ID when a static member's
//! instance id now belongs to another member id, ILLEGAL_GENERATION for another
//! generation and REBALANCE_IN_PROGRESS while the group waits for members to rejoin.
//!
//! Deviations from Apache Kafka: none known.

use baton_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use crate::state::BrokerState;

pub(crate) fn handle(
    state: &BrokerState,
    req: HeartbeatRequest,
    _version: i16,
) -> HeartbeatResponse {
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
