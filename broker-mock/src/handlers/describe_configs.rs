//! DescribeConfigs (key 32), versions 1–4.
//!
//! Topics: every topic config this broker knows, its default (`DEFAULT_CONFIG`, the
//! value the broker really applies) or the topic's override (`DYNAMIC_TOPIC_CONFIG`).
//! On a cluster node the overrides come from the controller's metadata image, so
//! every node answers for every topic. Brokers: this node's settings
//! (`STATIC_BROKER_CONFIG`, read-only), under Kafka's names, and the retention
//! defaults that IncrementalAlterConfigs may change cluster-wide (alterable;
//! `DYNAMIC_DEFAULT_BROKER_CONFIG` once set); an empty name (the cluster-wide
//! dynamic defaults) lists those set. `configuration_keys` filters both.
//! An unknown topic is `UNKNOWN_TOPIC_OR_PARTITION`, another broker's id or another
//! resource type `INVALID_REQUEST`, each in that resource's result only. A resource
//! named twice is answered once and its repeats are `INVALID_REQUEST`, so a request
//! repeating one resource cannot make the answer grow faster than its own size
//! allows. With an authorizer, a topic needs DescribeConfigs on it (else
//! `TOPIC_AUTHORIZATION_FAILED`) and a broker DescribeConfigs on the cluster (else
//! `CLUSTER_AUTHORIZATION_FAILED`), as in Kafka.
//!
//! Deviations from Apache Kafka: only the configs this broker has are listed (Kafka
//! lists every topic and broker config); synonyms (with `include_synonyms`) name
//! only the config itself, not the broker default an override hides; no
//! documentation; `BROKER_LOGGER` resources and repeated resources are
//! `INVALID_REQUEST`. Retention without a limit (this broker's default) is
//! reported as `-1`.

use std::collections::HashSet;

use baton_protocol::acl::{AclOperation, ResourceType};
use baton_protocol::messages::{
    DescribeConfigsRequest, DescribeConfigsResource, DescribeConfigsResourceResult,
    DescribeConfigsResponse, DescribeConfigsResult, DescribeConfigsSynonym, CONFIG_SOURCE_DEFAULT,
    CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER, CONFIG_SOURCE_STATIC_BROKER, CONFIG_SOURCE_TOPIC,
    RESOURCE_TYPE_BROKER, RESOURCE_TYPE_TOPIC,
};
use baton_protocol::ErrorCode;

use crate::acl::RequestContext;

use crate::state::BrokerState;
use crate::topics::validate_topic_name;

use super::topic_defaults::{
    default_min_insync, topic_defaults, Entry, BOOLEAN, INT, LIST, LONG, STRING,
};

/// This node's settings under Kafka's broker config names.
fn broker_configs(state: &BrokerState) -> Vec<Entry> {
    let c = &state.config;
    let g = &c.groups;
    let mut all = vec![
        ("node.id", c.node_id.to_string(), INT),
        ("broker.id", c.node_id.to_string(), INT),
        ("process.roles", "broker".into(), LIST),
        (
            "listeners",
            c.listeners()
                .iter()
                .map(|l| format!("{}://{}", l.name, l.listen))
                .collect::<Vec<_>>()
                .join(","),
            LIST,
        ),
        (
            "advertised.listeners",
            state
                .listeners
                .iter()
                .map(|l| format!("{}://{}:{}", l.name, l.host, l.port))
                .collect::<Vec<_>>()
                .join(","),
            LIST,
        ),
        (
            "listener.security.protocol.map",
            state
                .listeners
                .iter()
                .map(|l| format!("{}:{}", l.name, l.protocol))
                .collect::<Vec<_>>()
                .join(","),
            LIST,
        ),
        (
            "auto.create.topics.enable",
            c.auto_create_topics.to_string(),
            BOOLEAN,
        ),
        ("num.partitions", c.default_num_partitions.to_string(), INT),
        (
            "min.insync.replicas",
            default_min_insync(state).to_string(),
            INT,
        ),
        ("log.segment.bytes", c.segment_bytes.to_string(), INT),
        (
            "log.index.interval.bytes",
            c.index_interval_bytes.to_string(),
            INT,
        ),
        (
            "socket.request.max.bytes",
            c.max_frame_bytes.to_string(),
            INT,
        ),
        (
            "group.initial.rebalance.delay.ms",
            g.initial_rebalance_delay_ms.to_string(),
            INT,
        ),
        (
            "group.min.session.timeout.ms",
            g.min_session_timeout_ms.to_string(),
            INT,
        ),
        (
            "group.max.session.timeout.ms",
            g.max_session_timeout_ms.to_string(),
            INT,
        ),
        ("group.max.size", g.max_group_size.to_string(), INT),
        (
            "group.consumer.session.timeout.ms",
            g.consumer_session_timeout_ms.to_string(),
            INT,
        ),
        (
            "group.consumer.heartbeat.interval.ms",
            g.consumer_heartbeat_interval_ms.to_string(),
            INT,
        ),
        (
            "group.consumer.max.size",
            g.consumer_max_size.to_string(),
            INT,
        ),
        (
            "group.consumer.migration.policy",
            g.consumer_migration_policy.name().to_owned(),
            STRING,
        ),
        (
            "offsets.topic.num.partitions",
            g.offsets_topic_partitions.to_string(),
            INT,
        ),
    ];
    if let Some(dir) = &c.data_dir {
        all.push(("log.dirs", dir.display().to_string(), STRING));
    }
    all
}

fn entry(
    name: &str,
    value: String,
    config_type: i8,
    source: i8,
    read_only: bool,
    synonyms: bool,
) -> DescribeConfigsResourceResult {
    DescribeConfigsResourceResult {
        name: name.to_owned(),
        value: Some(value.clone()),
        read_only,
        is_default: source == CONFIG_SOURCE_DEFAULT,
        config_source: source,
        is_sensitive: false,
        synonyms: if synonyms {
            vec![DescribeConfigsSynonym {
                name: name.to_owned(),
                value: Some(value),
                source,
            }]
        } else {
            Vec::new()
        },
        config_type,
        documentation: None,
    }
}

/// A topic's overrides: from the metadata image on a cluster node, else local.
fn topic_overrides(state: &BrokerState, name: &str) -> Option<Vec<(String, String)>> {
    if let Some(link) = state.mode.replica() {
        return link.image().topic_by_name(name).map(|t| t.configs.clone());
    }
    let topic = state.topic(name)?;
    Some(topic.config.entries.clone().into_iter().collect())
}

fn describe_topic(
    state: &BrokerState,
    name: &str,
    synonyms: bool,
) -> Result<Vec<DescribeConfigsResourceResult>, (ErrorCode, String)> {
    validate_topic_name(name).map_err(|e| (ErrorCode::InvalidTopicException, e))?;
    let overrides = topic_overrides(state, name).ok_or_else(|| {
        (
            ErrorCode::UnknownTopicOrPartition,
            format!("Topic {name} does not exist."),
        )
    })?;
    let mut out: Vec<DescribeConfigsResourceResult> = topic_defaults(state)
        .into_iter()
        .map(|(k, v, t)| entry(k, v, t, CONFIG_SOURCE_DEFAULT, false, synonyms))
        .collect();
    for (k, v) in overrides {
        let t = out
            .iter()
            .find(|e| e.name == k)
            .map_or(STRING, |e| e.config_type);
        out.retain(|e| e.name != k);
        out.push(entry(&k, v, t, CONFIG_SOURCE_TOPIC, false, synonyms));
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The dynamic cluster-wide broker defaults (alterable), each with the source
/// its value comes from.
fn dynamic_defaults(state: &BrokerState, synonyms: bool) -> Vec<DescribeConfigsResourceResult> {
    let set = state.broker_defaults();
    let r = state.config.retention;
    let statics = [
        ("log.retention.ms", r.retention_ms.unwrap_or(-1).to_string()),
        (
            "log.retention.bytes",
            r.retention_bytes
                .map_or(-1, |b| i64::try_from(b).unwrap_or(i64::MAX))
                .to_string(),
        ),
        (
            "log.roll.ms",
            r.roll_ms.map_or(String::new(), |ms| ms.to_string()),
        ),
    ];
    statics
        .into_iter()
        .map(|(k, static_value)| match set.get(k) {
            Some(v) => entry(
                k,
                v.clone(),
                LONG,
                CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER,
                false,
                synonyms,
            ),
            None => entry(
                k,
                static_value,
                LONG,
                CONFIG_SOURCE_STATIC_BROKER,
                false,
                synonyms,
            ),
        })
        .filter(|e| e.value.as_deref() != Some(""))
        .collect()
}

fn describe_broker(
    state: &BrokerState,
    name: &str,
    synonyms: bool,
) -> Result<Vec<DescribeConfigsResourceResult>, (ErrorCode, String)> {
    if name.is_empty() {
        // The cluster-wide default: only what is set dynamically.
        return Ok(dynamic_defaults(state, synonyms)
            .into_iter()
            .filter(|e| e.config_source == CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER)
            .collect());
    }
    if name.parse::<i32>().ok() != Some(state.config.node_id) {
        return Err((
            ErrorCode::InvalidRequest,
            format!(
                "Unexpected broker id, expected {} or empty string, but received {name}",
                state.config.node_id
            ),
        ));
    }
    let mut all: Vec<DescribeConfigsResourceResult> = broker_configs(state)
        .into_iter()
        .map(|(k, v, t)| entry(k, v, t, CONFIG_SOURCE_STATIC_BROKER, true, synonyms))
        .collect();
    all.extend(dynamic_defaults(state, synonyms));
    Ok(all)
}

fn describe(
    state: &BrokerState,
    ctx: &RequestContext,
    r: DescribeConfigsResource,
    synonyms: bool,
    seen: &mut HashSet<(i8, String)>,
) -> DescribeConfigsResult {
    let first = seen.insert((r.resource_type, r.resource_name.clone()));
    let configs = match r.resource_type {
        _ if !first => Err((
            ErrorCode::InvalidRequest,
            format!("Resource {} is named more than once", r.resource_name),
        )),
        RESOURCE_TYPE_TOPIC
            if !state.allowed(
                ctx,
                AclOperation::DescribeConfigs,
                ResourceType::Topic,
                &r.resource_name,
            ) =>
        {
            Err((
                ErrorCode::TopicAuthorizationFailed,
                "Topic authorization failed.".into(),
            ))
        }
        RESOURCE_TYPE_BROKER if !state.allowed_on_cluster(ctx, AclOperation::DescribeConfigs) => {
            Err((
                ErrorCode::ClusterAuthorizationFailed,
                "Cluster authorization failed.".into(),
            ))
        }
        RESOURCE_TYPE_TOPIC => describe_topic(state, &r.resource_name, synonyms),
        RESOURCE_TYPE_BROKER => describe_broker(state, &r.resource_name, synonyms),
        other => Err((
            ErrorCode::InvalidRequest,
            format!("Unsupported resource type {other}"),
        )),
    };
    let (error_code, error_message, configs) = match configs {
        Ok(mut all) => {
            if let Some(keys) = &r.configuration_keys {
                all.retain(|c| keys.contains(&c.name));
            }
            (0, None, all)
        }
        Err((code, message)) => (code.code(), Some(message), Vec::new()),
    };
    DescribeConfigsResult {
        error_code,
        error_message,
        resource_type: r.resource_type,
        resource_name: r.resource_name,
        configs,
    }
}

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: DescribeConfigsRequest,
    _version: i16,
) -> DescribeConfigsResponse {
    let synonyms = req.include_synonyms;
    let mut seen = HashSet::new();
    DescribeConfigsResponse {
        throttle_time_ms: 0,
        results: req
            .resources
            .into_iter()
            .map(|r| describe(state, ctx, r, synonyms, &mut seen))
            .collect(),
    }
}
