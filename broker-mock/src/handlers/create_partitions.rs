//! CreatePartitions (key 37), versions 0–3.
//!
//! Raises a topic's partition count to `count`. A count equal to or below the
//! current one is INVALID_PARTITIONS; an unknown topic UNKNOWN_TOPIC_OR_PARTITION;
//! a topic named twice INVALID_REQUEST. `assignments`, when given, must hold one
//! replica list per new partition, each as long as the topic's replication factor,
//! naming live brokers once each (else INVALID_REPLICA_ASSIGNMENT); the first
//! broker of each list leads the new partition. Without them, a standalone node
//! holds the new partitions itself and a cluster's controller places them
//! round-robin over the eligible brokers. `validate_only` checks and creates
//! nothing. With an authorizer, a topic needs Alter on it (else
//! TOPIC_AUTHORIZATION_FAILED).
//!
//! A standalone node opens the new partitions at once and rewrites the topic's
//! metadata file; a cluster node forwards the request to the controller
//! (`handlers/forward.rs`), which writes PartitionRecords to the metadata log, and
//! answers once its own copy of the topic has the new partitions.
//!
//! Deviations from Apache Kafka: the broker's limits bound what one request adds
//! (more than `max_partitions_per_request` new partitions of one topic is
//! INVALID_PARTITIONS; past `max_partitions` in all is POLICY_VIOLATION); creation
//! is synchronous, so the timeout is not needed.

use std::collections::HashSet;

use baton_protocol::acl::{AclOperation, ResourceType};
use baton_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreatePartitionsTopic,
    CreatePartitionsTopicResult,
};
use baton_protocol::ErrorCode;

use crate::acl::RequestContext;
use crate::limits::BrokerLimits;
use crate::state::BrokerState;
use crate::topic_limits::Refusal;

/// The answer for one topic.
pub(crate) fn outcome(name: &str, result: Result<(), Refusal>) -> CreatePartitionsTopicResult {
    let (error_code, error_message) = match result {
        Ok(()) => (0, None),
        Err((code, message)) => (code.code(), Some(message)),
    };
    CreatePartitionsTopicResult {
        name: name.to_owned(),
        error_code,
        error_message,
    }
}

/// Answers a topic on the node that received it (a repeat, no Alter permission),
/// or `None` to go on.
pub(crate) fn precheck(
    state: &BrokerState,
    ctx: &RequestContext,
    t: &CreatePartitionsTopic,
    seen: &mut HashSet<String>,
) -> Option<CreatePartitionsTopicResult> {
    if !seen.insert(t.name.clone()) {
        let why = format!("Topic {} is named more than once", t.name);
        return Some(outcome(&t.name, Err((ErrorCode::InvalidRequest, why))));
    }
    if !state.allowed(ctx, AclOperation::Alter, ResourceType::Topic, &t.name) {
        let why = "Topic authorization failed.".to_owned();
        return Some(outcome(
            &t.name,
            Err((ErrorCode::TopicAuthorizationFailed, why)),
        ));
    }
    None
}

/// The limits on what one topic of a request may add: `added` new partitions
/// when `existing` partitions exist in all.
pub(crate) fn check_limits(
    limits: &BrokerLimits,
    existing: usize,
    added: usize,
) -> Result<(), Refusal> {
    let per_request = limits.max_partitions_per_request;
    if added > per_request {
        return Err((
            ErrorCode::InvalidPartitions,
            format!(
                "Adding {added} partitions is above the broker's limit of {per_request} \
                 partitions per request (max_partitions_per_request)."
            ),
        ));
    }
    if existing.saturating_add(added) > limits.max_partitions {
        return Err((
            ErrorCode::PolicyViolation,
            format!(
                "adding {added} partitions would exceed the broker's limit of {} partitions \
                 (max_partitions); {existing} exist",
                limits.max_partitions
            ),
        ));
    }
    Ok(())
}

/// Grows one topic of a standalone node.
fn grow_local(
    state: &BrokerState,
    t: &CreatePartitionsTopic,
    validate_only: bool,
) -> Result<(), Refusal> {
    let me = state.config.node_id;
    state
        .update_topic_with(&t.name, |topic, usage| {
            let have = topic.partitions.len() as i32;
            if t.count == have {
                return Err((
                    ErrorCode::InvalidPartitions,
                    format!("Topic already has {have} partitions."),
                ));
            }
            if t.count < have {
                return Err((
                    ErrorCode::InvalidPartitions,
                    format!(
                        "Topic currently has {have} partitions, which is higher than the \
                         requested {}.",
                        t.count
                    ),
                ));
            }
            let added = (t.count - have) as usize;
            check_limits(&state.config.limits, usage.partitions, added)?;
            if let Some(assignments) = &t.assignments {
                if assignments.len() != added {
                    return Err((
                        ErrorCode::InvalidReplicaAssignment,
                        format!(
                            "Attempted to add {added} additional partitions, but {} \
                             assignments were supplied.",
                            assignments.len()
                        ),
                    ));
                }
                if let Some(a) = assignments.iter().find(|a| a.broker_ids != [me]) {
                    return Err((
                        ErrorCode::InvalidReplicaAssignment,
                        format!(
                            "Assignment {:?} does not fit this single broker: each new \
                             partition must be assigned to [{me}].",
                            a.broker_ids
                        ),
                    ));
                }
            }
            Ok((!validate_only).then(|| (t.count, topic.config.clone())))
        })
        .map(|_| ())
}

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: CreatePartitionsRequest,
    _version: i16,
) -> CreatePartitionsResponse {
    let mut seen = HashSet::new();
    CreatePartitionsResponse {
        throttle_time_ms: 0,
        results: req
            .topics
            .iter()
            .map(|t| {
                precheck(state, ctx, t, &mut seen)
                    .unwrap_or_else(|| outcome(&t.name, grow_local(state, t, req.validate_only)))
            })
            .collect(),
    }
}
