//! OffsetDelete (key 47), version 0 (KIP-496).
//!
//! Deletes a group's committed offsets of some partitions: tombstones are written to
//! the group's `__consumer_offsets` partition (and replicated, in a cluster) before
//! the answer, so the deletion survives a restart and a coordinator failover. The
//! group-level error is GROUP_ID_NOT_FOUND for an unknown group, NON_EMPTY_GROUP for
//! a classic group with members whose protocol type is not `consumer`, and
//! NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE as for every group request. Per
//! partition: GROUP_SUBSCRIBED_TO_TOPIC while a member of the group subscribes to
//! the topic (classic members by their subscription metadata, consumer-protocol
//! members by topic names and regular expressions), UNKNOWN_TOPIC_OR_PARTITION for
//! a partition that does not exist. A partition without a committed offset
//! succeeds.
//!
//! With an authorizer, as in Kafka: the group needs Delete (else
//! `GROUP_AUTHORIZATION_FAILED` for the request) and each topic Read (else
//! `TOPIC_AUTHORIZATION_FAILED` on its partitions).
//!
//! Deviations from Apache Kafka: a request naming more partitions than
//! `BrokerLimits::max_partitions_per_request` fails with POLICY_VIOLATION (Kafka
//! has no ceiling).

use std::collections::HashMap;

use baton_protocol::acl::{AclOperation, ResourceType};
use baton_protocol::messages::{
    OffsetDeleteRequest, OffsetDeleteResponse, OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
};
use baton_protocol::ErrorCode;

use crate::acl::RequestContext;
use crate::state::BrokerState;

/// A partition and an error decided before the coordinator is asked, or `None`.
type Decided = (i32, Option<ErrorCode>);

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: OffsetDeleteRequest,
    _version: i16,
) -> OffsetDeleteResponse {
    let failed = |code: ErrorCode| OffsetDeleteResponse {
        error_code: code.code(),
        ..Default::default()
    };
    if !state.allowed(
        ctx,
        AclOperation::Delete,
        ResourceType::Group,
        &req.group_id,
    ) {
        return failed(ErrorCode::GroupAuthorizationFailed);
    }
    let count: usize = req.topics.iter().map(|t| t.partitions.len()).sum();
    if count > state.config.limits.max_partitions_per_request {
        return failed(ErrorCode::PolicyViolation);
    }
    let mut decided: Vec<(String, Vec<Decided>)> = Vec::new();
    let mut to_delete = Vec::new();
    for t in req.topics {
        let readable = state.allowed(ctx, AclOperation::Read, ResourceType::Topic, &t.name);
        let topic = state.topic(&t.name);
        let parts = t
            .partitions
            .iter()
            .map(|p| {
                let index = p.partition_index;
                let exists = topic
                    .as_ref()
                    .is_some_and(|tp| tp.partition(index).is_some());
                let code = if !readable {
                    Some(ErrorCode::TopicAuthorizationFailed)
                } else if !exists {
                    Some(ErrorCode::UnknownTopicOrPartition)
                } else {
                    to_delete.push((t.name.clone(), index));
                    None
                };
                (index, code)
            })
            .collect();
        decided.push((t.name, parts));
    }
    let outcome = match state.groups.delete_offsets(state, &req.group_id, to_delete) {
        Ok(outcome) => outcome,
        Err(code) => {
            tracing::debug!(group = %req.group_id, ?code, "offset deletion refused");
            return failed(code);
        }
    };
    let answered: HashMap<(String, i32), ErrorCode> = outcome
        .into_iter()
        .map(|(t, p, code)| ((t, p), code))
        .collect();
    let topics = decided
        .into_iter()
        .map(|(name, parts)| OffsetDeleteResponseTopic {
            partitions: parts
                .into_iter()
                .map(|(index, code)| {
                    let code = code.unwrap_or_else(|| {
                        answered
                            .get(&(name.clone(), index))
                            .copied()
                            .unwrap_or(ErrorCode::None)
                    });
                    OffsetDeleteResponsePartition {
                        partition_index: index,
                        error_code: code.code(),
                    }
                })
                .collect(),
            name,
        })
        .collect();
    OffsetDeleteResponse {
        error_code: 0,
        throttle_time_ms: 0,
        topics,
    }
}
