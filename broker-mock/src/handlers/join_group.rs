//! JoinGroup (key 11), versions 0–9.
//!
//! The classic protocol (see `group::machine`): first joins of dynamic members in
//! v4+ get MEMBER_ID_REQUIRED with their member id; the response is held until the
//! rebalance completes (every known member rejoined, or the rebalance timeout ran
//! out), and is sent through a deferred reply so later requests on the connection
//! keep their order. v0 uses the session timeout as rebalance timeout. Static members
//! (`group_instance_id`, v5+) rejoining a stable group unchanged get the current
//! generation without a rebalance; v9 leaders doing so get `skip_assignment`.
//!
//! With an authorizer, the group needs Read (else `GROUP_AUTHORIZATION_FAILED`).
//!
//! In a consumer group (KIP-848) with members, a JoinGroup is a classic member's
//! of that group (`group::consumer::classic`): answered at once with its member
//! epoch as generation and no leader (the coordinator's assignor assigns); an
//! empty consumer group gives way to a classic group.
//!
//! A member's `client_host` (shown by DescribeGroups) is its connection's address
//! as Kafka writes it (`/127.0.0.1`).
//!
//! The group's record in `__consumer_offsets` (Kafka's `GroupMetadataValue` v3:
//! generation, protocol, leader, members with subscriptions and assignments) is
//! written when a generation completes and when the leader's SyncGroup sets the
//! assignments; after a restart or a coordinator move the group is restored
//! `Stable` at its generation and its members carry on (see
//! `group::machine::snapshot`).
//!
//! Deviations from Apache Kafka: the join reason (v8+) is only logged; the
//! record is also written when a generation completes for a group with members
//! (Kafka writes it only at the leader's SyncGroup), and the JoinGroup answers
//! of a new generation wait, in a cluster, until that record is replicated, so
//! a member never holds a generation a new coordinator would not replay. A join
//! that would create one group more than `BrokerLimits::max_groups` is
//! POLICY_VIOLATION (Kafka has no group count limit). Pending member ids (handed out
//! with MEMBER_ID_REQUIRED) count against `group.max.size` like members, so a flood
//! of first joins is GROUP_MAX_SIZE_REACHED once the group is full (Kafka counts
//! only members and accepts any number of pending ones until they lapse). A group
//! left with no members, pending members or offsets is removed at once, with a
//! tombstone for its generation record (Kafka waits for its periodic offsets
//! cleanup), so a later join starts it again at generation 1.

use std::sync::Arc;

use baton_protocol::messages::{JoinGroupRequest, JoinGroupResponse};
use baton_protocol::{ErrorCode, Request};
use bytes::Bytes;
use tokio::sync::{oneshot, watch};

use baton_protocol::acl::{AclOperation, ResourceType};

use crate::acl::RequestContext;
use crate::group::machine::JoinRequest;
use crate::state::BrokerState;
use crate::wire::{decode, DispatchError, Reply};

/// Runs `work` on the blocking pool and answers with the response it parks, once it
/// is delivered; `error` builds the response for a coordinator-level error and `fix`
/// adapts a response to the request version.
pub(super) fn deferred<R, F>(
    state: Arc<BrokerState>,
    correlation_id: i32,
    version: i16,
    work: F,
    error: fn(ErrorCode) -> R::Response,
    fix: fn(R::Response, i16) -> R::Response,
) -> Reply
where
    R: Request + 'static,
    R::Response: Send + 'static,
    F: FnOnce(&BrokerState) -> Result<oneshot::Receiver<R::Response>, ErrorCode> + Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        let mut tx = tx;
        let st = state.clone();
        let parked = match baton_env::spawn_blocking(move || work(&st)).await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(api_key = R::API_KEY, error = %e, "group handler failed");
                Err(ErrorCode::UnknownServerError)
            }
        };
        let response = match parked {
            Ok(answer) => tokio::select! {
                r = answer => r.unwrap_or_else(|_| error(ErrorCode::CoordinatorNotAvailable)),
                // The connection went away; nobody will read the response.
                _ = tx.closed() => return,
            },
            Err(code) => error(code),
        };
        let response = fix(response, version);
        let bytes = match crate::metrics::errors::encode_counted::<R>(
            &state.metrics,
            correlation_id,
            version,
            &response,
        ) {
            Ok(b) => Some(b),
            Err(e) => {
                tracing::error!(error = %e, "encoding a group response failed");
                None
            }
        };
        let _ = tx.send(bytes);
    });
    Reply::Later(rx)
}

fn error(code: ErrorCode) -> JoinGroupResponse {
    JoinGroupResponse {
        error_code: code.code(),
        generation_id: -1,
        ..Default::default()
    }
}

fn fix(mut r: JoinGroupResponse, version: i16) -> JoinGroupResponse {
    if version < 7 && r.protocol_name.is_none() {
        // Not nullable before v7.
        r.protocol_name = Some(String::new());
    }
    r
}

/// Starts a JoinGroup; its response is delivered through the returned
/// [`Reply::Later`].
pub(crate) fn start(
    state: Arc<BrokerState>,
    ctx: &RequestContext,
    frame: Bytes,
    version: i16,
    stop: &watch::Receiver<bool>,
) -> Result<Reply, DispatchError> {
    let (header, req) = decode::<JoinGroupRequest>(frame, version)?;
    state.groups.ensure_driver(&state, stop);
    let allowed = state.allowed(ctx, AclOperation::Read, ResourceType::Group, &req.group_id);
    if let Some(reason) = &req.reason {
        tracing::debug!(group = %req.group_id, member = %req.member_id, %reason, "join");
    }
    let rebalance_timeout_ms = if version == 0 || req.rebalance_timeout_ms < 0 {
        req.session_timeout_ms
    } else {
        req.rebalance_timeout_ms
    };
    let join = JoinRequest {
        group_id: req.group_id,
        member_id: req.member_id,
        group_instance_id: req.group_instance_id,
        protocol_type: req.protocol_type,
        protocols: req
            .protocols
            .into_iter()
            .map(|p| (p.name, p.metadata))
            .collect(),
        session_timeout_ms: req.session_timeout_ms,
        rebalance_timeout_ms,
        client_id: header.client_id.unwrap_or_default(),
        client_host: format!("/{}", ctx.host),
        version,
    };
    Ok(deferred::<JoinGroupRequest, _>(
        state,
        header.correlation_id,
        version,
        move |st| {
            if !allowed {
                return Err(ErrorCode::GroupAuthorizationFailed);
            }
            // A consumer-protocol group with members takes no classic members
            // here (Kafka 4 mixes them; see consumer_group_heartbeat.rs).
            st.groups.join(st, join)
        },
        error,
        fix,
    ))
}
