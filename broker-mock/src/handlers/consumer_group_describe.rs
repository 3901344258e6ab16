//! ConsumerGroupDescribe (key 69), version 0 (KIP-848).
//!
//! Each consumer-protocol group's state (`Empty`, `Assigning`, `Reconciling`,
//! `Stable`), group and assignment epochs, assignor, and every member's ids,
//! client, epoch, subscription, current and target assignment (topic ids with
//! their names). A group this coordinator does not have, or a classic group, is
//! GROUP_ID_NOT_FOUND; a group of another coordinator NOT_COORDINATOR.
//!
//! With an authorizer, each group needs Describe (else GROUP_AUTHORIZATION_FAILED
//! for it) and every topic in its assignments Describe (else
//! TOPIC_AUTHORIZATION_FAILED for the group), as Kafka checks.
//!
//! Deviations from Apache Kafka: authorized operations are never computed
//! (`i32::MIN`).

use std::collections::HashMap;

use baton_protocol::acl::{AclOperation, ResourceType};
use baton_protocol::messages::{
    ConsumerGroupDescribeAssignment, ConsumerGroupDescribeGroup, ConsumerGroupDescribeMember,
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse,
    ConsumerGroupDescribeTopicPartitions,
};
use baton_protocol::primitives::Uuid;
use baton_protocol::ErrorCode;

use crate::acl::RequestContext;
use crate::group::consumer::{Assignment, ConsumerGroup};
use crate::state::BrokerState;

fn failed(group_id: &str, code: ErrorCode, message: Option<String>) -> ConsumerGroupDescribeGroup {
    ConsumerGroupDescribeGroup {
        error_code: code.code(),
        error_message: message,
        group_id: group_id.to_owned(),
        authorized_operations: i32::MIN,
        ..Default::default()
    }
}

fn assignment(a: &Assignment, names: &HashMap<Uuid, String>) -> ConsumerGroupDescribeAssignment {
    ConsumerGroupDescribeAssignment {
        topic_partitions: a
            .iter()
            .map(|(id, ps)| ConsumerGroupDescribeTopicPartitions {
                topic_id: *id,
                topic_name: names.get(id).cloned().unwrap_or_default(),
                partitions: ps.iter().copied().collect(),
            })
            .collect(),
    }
}

fn describe(g: &ConsumerGroup, names: &HashMap<Uuid, String>) -> ConsumerGroupDescribeGroup {
    let empty = Assignment::new();
    ConsumerGroupDescribeGroup {
        error_code: 0,
        error_message: None,
        group_id: g.id.clone(),
        group_state: g.state().name().to_owned(),
        group_epoch: g.epoch,
        assignment_epoch: g.assignment_epoch,
        assignor_name: g.assignor_name(),
        members: g
            .members
            .values()
            .map(|m| ConsumerGroupDescribeMember {
                member_id: m.id.clone(),
                instance_id: m.sub.instance_id.clone(),
                rack_id: m.sub.rack_id.clone(),
                member_epoch: m.current.epoch,
                client_id: m.sub.client_id.clone(),
                client_host: m.sub.client_host.clone(),
                subscribed_topic_names: m.sub.topic_names.clone(),
                subscribed_topic_regex: m.sub.topic_regex.clone(),
                assignment: assignment(&m.current.assigned, names),
                target_assignment: assignment(g.target.get(&m.id).unwrap_or(&empty), names),
            })
            .collect(),
        authorized_operations: i32::MIN,
    }
}

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: ConsumerGroupDescribeRequest,
    _version: i16,
) -> ConsumerGroupDescribeResponse {
    let groups = req
        .group_ids
        .iter()
        .map(|id| {
            if !state.allowed(ctx, AclOperation::Describe, ResourceType::Group, id) {
                return failed(id, ErrorCode::GroupAuthorizationFailed, None);
            }
            match state.groups.consumer_describe(state, id) {
                Err(code) => failed(id, code, None),
                Ok(None) => failed(
                    id,
                    ErrorCode::GroupIdNotFound,
                    Some(format!("Group {id} not found.")),
                ),
                Ok(Some((g, names))) => {
                    let d = describe(&g, &names);
                    let hidden = d.members.iter().any(|m| {
                        m.assignment
                            .topic_partitions
                            .iter()
                            .chain(&m.target_assignment.topic_partitions)
                            .any(|t| {
                                !state.allowed(
                                    ctx,
                                    AclOperation::Describe,
                                    ResourceType::Topic,
                                    &t.topic_name,
                                )
                            })
                    });
                    if hidden {
                        failed(id, ErrorCode::TopicAuthorizationFailed, None)
                    } else {
                        d
                    }
                }
            }
        })
        .collect();
    ConsumerGroupDescribeResponse {
        throttle_time_ms: 0,
        groups,
    }
}
