//! [`Admin::describe_groups`]: each group asked of its coordinator, first with
//! ConsumerGroupDescribe (API key 69, KIP-848) where the broker has it, then, for
//! the groups that are not consumer-protocol groups, with DescribeGroups (API key
//! 15), whose members' metadata and assignments are decoded from the consumer
//! embedded protocol. Both kinds come back as one [`GroupDescription`].

use std::sync::Arc;

use baton_protocol::messages::{
    ConsumerGroupDescribeAssignment, ConsumerGroupDescribeGroup, ConsumerGroupDescribeRequest,
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, DescribeGroupsRequest,
    DescribedGroup,
};
use baton_protocol::ErrorCode;

use super::group_coordinators::{GroupFailure, GroupOutcome};
use super::{Admin, AdminError, GroupState, GroupType};
use crate::client::ClientError;
use crate::connection::Connection;
use crate::group::TopicPartition;

/// A group as [`Admin::describe_groups`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupDescription {
    /// The group id.
    pub group_id: String,
    /// Which protocol the group runs.
    pub group_type: GroupType,
    /// Its state ([`GroupState::Dead`] for a classic group that does not exist).
    pub state: GroupState,
    /// The protocol type (`consumer` for consumer groups; empty for a group
    /// without members).
    pub protocol_type: String,
    /// The assignor: the classic protocol the members agreed on (`range`,
    /// `cooperative-sticky`, ...), or the consumer protocol's server-side assignor
    /// (`uniform`, `range`).
    pub assignor: String,
    /// The node that coordinates the group.
    pub coordinator: i32,
    /// The group epoch (consumer protocol only).
    pub group_epoch: Option<i32>,
    /// The epoch of the target assignment (consumer protocol only).
    pub assignment_epoch: Option<i32>,
    /// The members.
    pub members: Vec<MemberDescription>,
}

/// One member of a described group.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemberDescription {
    /// The member id.
    pub member_id: String,
    /// The static instance id (`group.instance.id`), if any.
    pub instance_id: Option<String>,
    /// The client id.
    pub client_id: String,
    /// The client's host as the coordinator saw it.
    pub host: String,
    /// The topics it subscribes to (classic: from its subscription metadata,
    /// when the group runs the `consumer` protocol type).
    pub subscribed_topics: Vec<String>,
    /// The topic regular expression it subscribes with (consumer protocol only).
    pub subscribed_regex: Option<String>,
    /// The partitions assigned to it (classic: decoded from its assignment, when
    /// the group runs the `consumer` protocol type).
    pub assignment: Vec<TopicPartition>,
    /// The partitions the coordinator is moving it to (consumer protocol only).
    pub target_assignment: Option<Vec<TopicPartition>>,
    /// Its epoch (consumer protocol only).
    pub member_epoch: Option<i32>,
}

impl Admin {
    /// Describes groups, asking each group's coordinator. Results come in the
    /// order of `group_ids` (duplicates once). Consumer-protocol groups (KIP-848)
    /// are described with their epochs and target assignments; classic groups
    /// with their members' assignments decoded from the consumer protocol. A
    /// classic group that does not exist is described as [`GroupState::Dead`]
    /// without members, as Apache Kafka does.
    ///
    /// Coordinator moves, loading coordinators and connection failures are retried
    /// with backoff until the operation timeout. Groups that fail
    /// (GROUP_AUTHORIZATION_FAILED, ...) are reported together in
    /// [`AdminError::Groups`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: this only reads.
    pub async fn describe_groups(
        &self,
        group_ids: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Vec<GroupDescription>, AdminError> {
        let groups: Vec<String> = group_ids.into_iter().map(Into::into).collect();
        let results = self
            .per_coordinator(groups, |node, conn, groups| {
                Box::pin(async move { describe_on(node, &conn, groups).await })
            })
            .await?;
        collect(results)
    }
}

/// The successes, or every failure in one [`AdminError::Groups`].
pub(super) fn collect<T>(
    results: Vec<(String, Result<T, GroupFailure>)>,
) -> Result<Vec<T>, AdminError> {
    let mut ok = Vec::with_capacity(results.len());
    let mut failed = Vec::new();
    for (_, r) in results {
        match r {
            Ok(v) => ok.push(v),
            Err(f) => failed.push(f),
        }
    }
    if failed.is_empty() {
        Ok(ok)
    } else {
        Err(AdminError::Groups(failed))
    }
}

/// Describes `groups` on their coordinator `node`, reached through `conn`.
async fn describe_on(
    node: i32,
    conn: &Connection,
    groups: Vec<String>,
) -> Result<Vec<(String, GroupOutcome<GroupDescription>)>, ClientError> {
    let mut out = Vec::with_capacity(groups.len());
    let mut classic = groups.clone();
    if conn.version_for::<ConsumerGroupDescribeRequest>().is_ok() {
        let req = ConsumerGroupDescribeRequest {
            group_ids: groups,
            include_authorized_operations: false,
        };
        let resp = conn.send(&req).await?;
        classic.clear();
        for g in resp.groups {
            let code = ErrorCode::from_code(g.error_code);
            if code == ErrorCode::GroupIdNotFound {
                // Not a consumer-protocol group: maybe a classic one.
                classic.push(g.group_id);
            } else if code.is_ok() {
                out.push((g.group_id.clone(), GroupOutcome::Done(consumer(g, node))));
            } else {
                out.push((
                    g.group_id.clone(),
                    GroupOutcome::from_error(&g.group_id, code, g.error_message),
                ));
            }
        }
    }
    if !classic.is_empty() {
        let req = DescribeGroupsRequest {
            groups: classic,
            include_authorized_operations: false,
        };
        let resp = conn.send(&req).await?;
        for g in resp.groups {
            let code = ErrorCode::from_code(g.error_code);
            let outcome = if code.is_ok() {
                GroupOutcome::Done(classic_group(g.clone(), node))
            } else if code == ErrorCode::GroupIdNotFound {
                // DescribeGroups v6 answers this for an unknown group; earlier
                // versions describe it as Dead.
                GroupOutcome::Done(dead(&g.group_id, node))
            } else {
                GroupOutcome::from_error(&g.group_id, code, None)
            };
            out.push((g.group_id, outcome));
        }
    }
    Ok(out)
}

fn dead(group_id: &str, coordinator: i32) -> GroupDescription {
    GroupDescription {
        group_id: group_id.to_owned(),
        group_type: GroupType::Classic,
        state: GroupState::Dead,
        protocol_type: String::new(),
        assignor: String::new(),
        coordinator,
        group_epoch: None,
        assignment_epoch: None,
        members: Vec::new(),
    }
}

fn partitions(a: &ConsumerGroupDescribeAssignment) -> Vec<TopicPartition> {
    let mut out = Vec::new();
    for t in &a.topic_partitions {
        let topic: Arc<str> = Arc::from(t.topic_name.as_str());
        out.extend(
            t.partitions
                .iter()
                .map(|&p| TopicPartition::new(topic.clone(), p)),
        );
    }
    out.sort();
    out
}

fn consumer(g: ConsumerGroupDescribeGroup, coordinator: i32) -> GroupDescription {
    GroupDescription {
        group_type: GroupType::Consumer,
        state: GroupState::parse(&g.group_state),
        protocol_type: "consumer".to_owned(),
        assignor: g.assignor_name,
        coordinator,
        group_epoch: Some(g.group_epoch),
        assignment_epoch: Some(g.assignment_epoch),
        members: g
            .members
            .into_iter()
            .map(|m| MemberDescription {
                assignment: partitions(&m.assignment),
                target_assignment: Some(partitions(&m.target_assignment)),
                member_id: m.member_id,
                instance_id: m.instance_id,
                client_id: m.client_id,
                host: m.client_host,
                subscribed_topics: m.subscribed_topic_names,
                subscribed_regex: m.subscribed_topic_regex,
                member_epoch: Some(m.member_epoch),
            })
            .collect(),
        group_id: g.group_id,
    }
}

fn classic_group(g: DescribedGroup, coordinator: i32) -> GroupDescription {
    let consumer_protocol = g.protocol_type == "consumer";
    GroupDescription {
        group_type: GroupType::Classic,
        state: GroupState::parse(&g.group_state),
        assignor: g.protocol_data,
        coordinator,
        group_epoch: None,
        assignment_epoch: None,
        members: g
            .members
            .into_iter()
            .map(|m| {
                // Only a `consumer` protocol type carries the consumer embedded
                // protocol; bytes that do not decode are shown as nothing.
                let (subscribed_topics, assignment) = if consumer_protocol {
                    let topics = ConsumerProtocolSubscription::decode_versioned(m.member_metadata)
                        .map(|(_, s)| s.topics)
                        .unwrap_or_default();
                    let assigned =
                        ConsumerProtocolAssignment::decode_versioned(m.member_assignment)
                            .map(|(_, a)| {
                                let mut out = Vec::new();
                                for t in a.assigned_partitions {
                                    let topic: Arc<str> = Arc::from(t.topic.as_str());
                                    out.extend(
                                        t.partitions
                                            .into_iter()
                                            .map(|p| TopicPartition::new(topic.clone(), p)),
                                    );
                                }
                                out.sort();
                                out
                            })
                            .unwrap_or_default();
                    (topics, assigned)
                } else {
                    (Vec::new(), Vec::new())
                };
                MemberDescription {
                    member_id: m.member_id,
                    instance_id: m.group_instance_id,
                    client_id: m.client_id,
                    host: m.client_host,
                    subscribed_topics,
                    subscribed_regex: None,
                    assignment,
                    target_assignment: None,
                    member_epoch: None,
                }
            })
            .collect(),
        protocol_type: g.protocol_type,
        group_id: g.group_id,
    }
}
