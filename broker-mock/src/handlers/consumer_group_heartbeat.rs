//! ConsumerGroupHeartbeat (key 68), versions 0–1: the consumer group protocol of
//! KIP-848.
//!
//! A member joins (epoch 0), heartbeats with its epoch and owned partitions, and
//! leaves (-1, or -2 for a static member that will come back); the coordinator
//! answers with its member epoch, the heartbeat interval and, when it changed or
//! the request was a full one, the partitions it may own. The rules are in
//! `group::consumer` (group epoch, server-side `uniform`/`range` assignment,
//! incremental reconciliation, session and rebalance timeouts, static members);
//! every change is written to `__consumer_offsets` in Kafka's record layout before
//! the answer, so a new coordinator replays members and epochs. From v1 the member
//! id is chosen by the client (KIP-1082) and `SubscribedTopicRegex` is accepted
//! (an RE2-like, linear-time matcher; INVALID_REGULAR_EXPRESSION for a bad one).
//!
//! With an authorizer the group needs Read (else GROUP_AUTHORIZATION_FAILED) and
//! every subscribed topic name Describe (else TOPIC_AUTHORIZATION_FAILED), as in
//! Kafka.
//!
//! Mixed groups as in Kafka 4: joining a classic group with members upgrades it to
//! a consumer group of all its members when `group.consumer.migration.policy`
//! allows it (`bidirectional`, the default, or `upgrade`; else
//! GROUP_ID_NOT_FOUND), and the last member of this protocol leaving a group of
//! classic members downgrades it (`bidirectional` or `downgrade`); see
//! `group::consumer::classic`.
//!
//! Deviations from Apache Kafka: the assignors are not rack-aware; regexes are
//! resolved at once, not asynchronously, and never match internal (`__`) topics;
//! `group.consumer.max.size` defaults to 1000 (unbounded in Kafka).

use baton_protocol::acl::{AclOperation, ResourceType};
use baton_protocol::messages::{
    ConsumerGroupHeartbeatAssignment, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, ConsumerGroupHeartbeatTopicPartitions,
};
use baton_protocol::ErrorCode;

use crate::acl::RequestContext;
use crate::group::consumer::Heartbeat;
use crate::state::BrokerState;

fn error(code: ErrorCode, message: Option<String>) -> ConsumerGroupHeartbeatResponse {
    ConsumerGroupHeartbeatResponse {
        error_code: code.code(),
        error_message: message,
        member_epoch: 0,
        ..Default::default()
    }
}

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: ConsumerGroupHeartbeatRequest,
    version: i16,
    client_id: String,
) -> ConsumerGroupHeartbeatResponse {
    if !state.allowed(ctx, AclOperation::Read, ResourceType::Group, &req.group_id) {
        return error(ErrorCode::GroupAuthorizationFailed, None);
    }
    if let Some(names) = &req.subscribed_topic_names {
        if names
            .iter()
            .any(|t| !state.allowed(ctx, AclOperation::Describe, ResourceType::Topic, t))
        {
            return error(ErrorCode::TopicAuthorizationFailed, None);
        }
    }
    let hb = Heartbeat {
        version,
        group_id: req.group_id,
        member_id: req.member_id,
        member_epoch: req.member_epoch,
        instance_id: req.instance_id,
        rack_id: req.rack_id,
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        topic_names: req.subscribed_topic_names,
        topic_regex: req.subscribed_topic_regex,
        server_assignor: req.server_assignor,
        owned: req.topic_partitions.map(|tps| {
            tps.into_iter()
                .map(|t| (t.topic_id, t.partitions))
                .collect()
        }),
        client_id,
        client_host: format!("/{}", ctx.host),
    };
    match state.groups.consumer_heartbeat(state, hb) {
        Err(code) => error(code, None),
        Ok(a) if a.error != ErrorCode::None => error(a.error, a.message),
        Ok(a) => ConsumerGroupHeartbeatResponse {
            throttle_time_ms: 0,
            error_code: 0,
            error_message: None,
            member_id: a.member_id,
            member_epoch: a.member_epoch,
            heartbeat_interval_ms: a.heartbeat_interval_ms,
            assignment: a.assignment.map(|asg| ConsumerGroupHeartbeatAssignment {
                topic_partitions: asg
                    .into_iter()
                    .map(|(topic_id, ps)| ConsumerGroupHeartbeatTopicPartitions {
                        topic_id,
                        partitions: ps.into_iter().collect(),
                    })
                    .collect(),
            }),
        },
    }
}
