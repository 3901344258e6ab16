//! IncrementalAlterConfigs (key 44), versions 0–1.
//!
//! Topics: each resource's SET, DELETE, APPEND and SUBTRACT changes are checked
//! together by `config_change.rs` and apply all or none; `validate_only` checks and
//! changes nothing. The new overrides take effect on the live topic at once
//! (retention and cleaning on their next pass, produce checks on the next
//! request). A standalone node rewrites the topic's metadata file; a cluster node
//! forwards topic changes to the controller (`handlers/forward.rs`), which writes
//! TopicConfig records to the metadata log, so every node applies them and they
//! survive restarts; the node answers once its own copy of the topic shows them.
//! An unknown topic is UNKNOWN_TOPIC_OR_PARTITION. With an authorizer, a topic
//! needs AlterConfigs on it (else TOPIC_AUTHORIZATION_FAILED) and a broker
//! AlterConfigs on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
//!
//! Brokers: the cluster-wide default (the broker resource named "") takes the
//! retention defaults in `DYNAMIC_BROKER_DEFAULTS` (`log.retention.ms`,
//! `log.retention.bytes`, `log.roll.ms`) with SET and DELETE; they apply to
//! topics that set none on the next maintenance pass, are persisted (a
//! standalone node's data directory, or BrokerDefaultConfig records of the
//! controller's metadata log) and survive restarts.
//!
//! Deviations from Apache Kafka: only the topic configs in
//! [`LIVE_TOPIC_CONFIGS`](crate::config_change::LIVE_TOPIC_CONFIGS) can change
//! (others this broker takes at creation, such as `segment.bytes`, are
//! INVALID_CONFIG with a message saying so); other broker settings are static,
//! so any other broker key, and any change of one broker's own configs, is
//! INVALID_CONFIG naming the key (an empty change list succeeds); a broker id
//! other than this node's, another resource type, or a resource named twice is
//! INVALID_REQUEST.

use std::collections::HashSet;

use baton_protocol::acl::{AclOperation, ResourceType};
use baton_protocol::messages::{
    AlterConfigsResource, AlterConfigsResourceResponse, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse, RESOURCE_TYPE_BROKER, RESOURCE_TYPE_TOPIC,
};
use baton_protocol::ErrorCode;

use crate::acl::RequestContext;
use crate::config_change::{apply_broker_default_changes, apply_topic_changes};
use crate::controller::Controller;
use crate::state::BrokerState;
use crate::topic_limits::Refusal;
use crate::topics::TopicConfig;

/// The answer for one resource.
pub(crate) fn outcome(
    r: &AlterConfigsResource,
    result: Result<(), Refusal>,
) -> AlterConfigsResourceResponse {
    let (error_code, error_message) = match result {
        Ok(()) => (0, None),
        Err((code, message)) => (code.code(), Some(message)),
    };
    AlterConfigsResourceResponse {
        error_code,
        error_message,
        resource_type: r.resource_type,
        resource_name: r.resource_name.clone(),
    }
}

/// Answers a resource on the node that received it, or `None` for a topic
/// change that passed authorization and goes on (to this node's topics or to the
/// controller). `seen` catches resources named twice.
pub(crate) fn precheck(
    state: &BrokerState,
    ctx: &RequestContext,
    r: &AlterConfigsResource,
    seen: &mut HashSet<(i8, String)>,
) -> Option<AlterConfigsResourceResponse> {
    if !seen.insert((r.resource_type, r.resource_name.clone())) {
        let why = format!("Resource {} is named more than once", r.resource_name);
        return Some(outcome(r, Err((ErrorCode::InvalidRequest, why))));
    }
    let refusal = match r.resource_type {
        RESOURCE_TYPE_TOPIC => {
            if state.allowed(
                ctx,
                AclOperation::AlterConfigs,
                ResourceType::Topic,
                &r.resource_name,
            ) {
                return None;
            }
            (
                ErrorCode::TopicAuthorizationFailed,
                "Topic authorization failed.".to_owned(),
            )
        }
        RESOURCE_TYPE_BROKER => {
            if !state.allowed_on_cluster(ctx, AclOperation::AlterConfigs) {
                (
                    ErrorCode::ClusterAuthorizationFailed,
                    "Cluster authorization failed.".to_owned(),
                )
            } else if !r.resource_name.is_empty()
                && r.resource_name.parse::<i32>().ok() != Some(state.config.node_id)
            {
                (
                    ErrorCode::InvalidRequest,
                    format!(
                        "Unexpected broker id, expected {} or empty string, but received {}",
                        state.config.node_id, r.resource_name
                    ),
                )
            } else if r.resource_name.is_empty() {
                return None;
            } else if let Some(c) = r.configs.first() {
                (
                    ErrorCode::InvalidConfig,
                    format!(
                        "Cannot change broker config {} of broker {}: this broker takes only \
                         cluster-wide dynamic defaults (the broker resource named \"\")",
                        c.name, r.resource_name
                    ),
                )
            } else {
                return Some(outcome(r, Ok(())));
            }
        }
        other => (
            ErrorCode::InvalidRequest,
            format!("Unsupported resource type {other}"),
        ),
    };
    Some(outcome(r, Err(refusal)))
}

/// Applies one topic's changes to a standalone node's topic.
fn alter_local_topic(
    state: &BrokerState,
    r: &AlterConfigsResource,
    validate_only: bool,
) -> Result<(), Refusal> {
    state
        .update_topic_with(&r.resource_name, |topic, _| {
            let entries = apply_topic_changes(&topic.config.entries, &r.configs)?;
            let partitions = topic.partitions.len() as i32;
            Ok((!validate_only).then_some((partitions, TopicConfig { entries })))
        })
        .map(|_| ())
}

/// Applies changes of the cluster-wide broker defaults on a standalone node.
fn alter_local_defaults(
    state: &BrokerState,
    r: &AlterConfigsResource,
    validate_only: bool,
) -> Result<(), Refusal> {
    let defaults = apply_broker_default_changes(&state.broker_defaults(), &r.configs)?;
    if validate_only {
        return Ok(());
    }
    state.set_broker_defaults(defaults)
}

/// Applies one resource's changes on the controller: a topic's as TopicConfig
/// records, the cluster-wide broker defaults as BrokerDefaultConfig records.
pub(crate) fn alter_on_controller(
    ctl: &mut Controller,
    r: &AlterConfigsResource,
    validate_only: bool,
) -> AlterConfigsResourceResponse {
    let result = (|| {
        if r.resource_type == RESOURCE_TYPE_BROKER && r.resource_name.is_empty() {
            let defaults = apply_broker_default_changes(ctl.state().broker_defaults(), &r.configs)?;
            if validate_only {
                return Ok(());
            }
            return ctl
                .set_broker_defaults(&defaults)
                .map_err(|e| (e.error_code(), e.to_string()));
        }
        if r.resource_type != RESOURCE_TYPE_TOPIC {
            return Err((
                ErrorCode::InvalidRequest,
                "the controller takes topic configs and broker defaults only".to_owned(),
            ));
        }
        let name = &r.resource_name;
        let topic = ctl.state().topic_by_name(name).ok_or_else(|| {
            (
                ErrorCode::UnknownTopicOrPartition,
                format!("Topic {name} does not exist."),
            )
        })?;
        let current = topic.configs.iter().cloned().collect();
        let entries = apply_topic_changes(&current, &r.configs)?;
        if validate_only {
            return Ok(());
        }
        ctl.set_topic_configs(name, &entries)
            .map_err(|e| (e.error_code(), e.to_string()))
    })();
    outcome(r, result)
}

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: IncrementalAlterConfigsRequest,
    _version: i16,
) -> IncrementalAlterConfigsResponse {
    let mut seen = HashSet::new();
    IncrementalAlterConfigsResponse {
        throttle_time_ms: 0,
        responses: req
            .resources
            .iter()
            .map(|r| {
                precheck(state, ctx, r, &mut seen).unwrap_or_else(|| {
                    let result = if r.resource_type == RESOURCE_TYPE_BROKER {
                        alter_local_defaults(state, r, req.validate_only)
                    } else {
                        alter_local_topic(state, r, req.validate_only)
                    };
                    outcome(r, result)
                })
            })
            .collect(),
    }
}
