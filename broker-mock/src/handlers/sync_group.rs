//! SyncGroup (key 14), versions 0–5.
//!
//! Followers' requests are held until the leader's arrives with the assignments;
//! then every member gets its own (members the leader left out get an empty one).
//! Requests for a generation that is being rebalanced get REBALANCE_IN_PROGRESS;
//! a protocol type or name (v5+) that differs from the group's is
//! INCONSISTENT_GROUP_PROTOCOL.
//!
//! In a consumer group (KIP-848), a classic member gets its partitions as the
//! coordinator assigned them, in `ConsumerProtocolAssignment` form, at once; a
//! generation other than its member epoch is ILLEGAL_GENERATION.
//!
//! With an authorizer, the group needs Read (else `GROUP_AUTHORIZATION_FAILED`).
//!
//! The leader's assignments are written to `__consumer_offsets` with the group's
//! record, so a new coordinator restores them.
//!
//! Deviations from Apache Kafka: the answers do not wait for that record's
//! replication (Kafka answers once it is appended); if it is lost in a
//! failover, the new coordinator restores the group from its join record (no
//! assignments) preparing a rebalance, and the members rejoin into the next
//! generation.

use std::sync::Arc;

use baton_protocol::messages::{SyncGroupRequest, SyncGroupResponse};
use baton_protocol::ErrorCode;
use bytes::Bytes;
use tokio::sync::watch;

use baton_protocol::acl::{AclOperation, ResourceType};

use super::join_group::deferred;
use crate::acl::RequestContext;
use crate::group::machine::SyncRequest;
use crate::state::BrokerState;
use crate::wire::{decode, DispatchError, Reply};

fn error(code: ErrorCode) -> SyncGroupResponse {
    SyncGroupResponse {
        error_code: code.code(),
        ..Default::default()
    }
}

fn fix(r: SyncGroupResponse, _version: i16) -> SyncGroupResponse {
    r
}

/// Starts a SyncGroup; its response is delivered through the returned
/// [`Reply::Later`].
pub(crate) fn start(
    state: Arc<BrokerState>,
    ctx: &RequestContext,
    frame: Bytes,
    version: i16,
    stop: &watch::Receiver<bool>,
) -> Result<Reply, DispatchError> {
    let (header, req) = decode::<SyncGroupRequest>(frame, version)?;
    state.groups.ensure_driver(&state, stop);
    let allowed = state.allowed(ctx, AclOperation::Read, ResourceType::Group, &req.group_id);
    let sync = SyncRequest {
        group_id: req.group_id,
        generation_id: req.generation_id,
        member_id: req.member_id,
        group_instance_id: req.group_instance_id,
        protocol_type: req.protocol_type,
        protocol_name: req.protocol_name,
        assignments: req
            .assignments
            .into_iter()
            .map(|a| (a.member_id, a.assignment))
            .collect(),
    };
    Ok(deferred::<SyncGroupRequest, _>(
        state,
        header.correlation_id,
        version,
        move |st| {
            if !allowed {
                return Err(ErrorCode::GroupAuthorizationFailed);
            }
            st.groups.sync(st, sync)
        },
        error,
        fix,
    ))
}
