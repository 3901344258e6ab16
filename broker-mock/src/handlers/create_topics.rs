//! CreateTopics (key 19), versions 2–7.
//!
//! `num_partitions` and `replication_factor` of -1 take the broker defaults (the
//! default partition count, replication factor 1). Explicit `assignments` replace
//! both (sending both is `INVALID_REQUEST`): partitions must be numbered 0..n, each
//! listing exactly this node. Errors: `INVALID_TOPIC_EXCEPTION` for names outside
//! Kafka's rules, `TOPIC_ALREADY_EXISTS`, `INVALID_PARTITIONS` (< 1),
//! `INVALID_REPLICATION_FACTOR` (< 1 or more than the one broker),
//! `INVALID_REPLICA_ASSIGNMENT`, `INVALID_CONFIG` for unknown keys or bad values,
//! `INVALID_REQUEST` for a topic named twice. `validate_only` checks everything and
//! creates nothing. v5+ results carry the partition count, replication factor and the
//! topic's configs; v7 the topic id.
//!
//! On a cluster node this handler is not used: the request is forwarded to the
//! controller (`cluster/forward.rs`), which places replicas round-robin over the
//! unfenced brokers (replication factor -1 means min(3, brokers)); explicit
//! assignments are refused there with `INVALID_REPLICA_ASSIGNMENT`.
//!
//! Deviations from Apache Kafka: creation is synchronous (the timeout is not needed);
//! the configs returned are the overrides plus the defaults of the few keys this
//! broker uses, not Kafka's full list; and the broker's [`BrokerLimits`] bound what a
//! request can create, where Kafka has no ceiling (see `topic_limits.rs`, shared with
//! the controller): a topic of more than `max_partitions_per_request` partitions is
//! `INVALID_PARTITIONS`, and a topic that would push the request's sum of partitions
//! past that limit, or the broker's partitions or topics past `max_partitions` or
//! `max_topics` (internal topics count), is `POLICY_VIOLATION`, each with a message
//! naming the limit. `validate_only` requests are counted the same way.
//!
//! [`BrokerLimits`]: crate::limits::BrokerLimits

use std::collections::{BTreeMap, HashMap, HashSet};

use baton_protocol::messages::{
    CreatableTopic, CreatableTopicConfigs, CreatableTopicResult, CreateTopicsRequest,
    CreateTopicsResponse,
};
use baton_protocol::ErrorCode;

use crate::state::{BrokerState, Creation};
use crate::topic_limits::RequestBudget;
use crate::topics::{validate_config, validate_topic_name, Topic, TopicConfig};

/// Kafka's `ConfigSource.TOPIC_CONFIG`.
const SOURCE_TOPIC: i8 = 1;
/// Kafka's `ConfigSource.DEFAULT_CONFIG`.
const SOURCE_DEFAULT: i8 = 5;

type Fail = (ErrorCode, String);

fn plan(
    state: &BrokerState,
    budget: &RequestBudget,
    t: &CreatableTopic,
) -> Result<(i32, i16, TopicConfig), Fail> {
    let limits = &state.config.limits;
    validate_topic_name(&t.name).map_err(|m| (ErrorCode::InvalidTopicException, m))?;
    let (partitions, rf) = if t.assignments.is_empty() {
        let partitions = match t.num_partitions {
            -1 => state.config.default_num_partitions,
            n => n,
        };
        if partitions < 1 {
            return Err((
                ErrorCode::InvalidPartitions,
                "Number of partitions must be larger than 0.".into(),
            ));
        }
        budget.check(limits, partitions as usize)?;
        let rf = match t.replication_factor {
            -1 => 1,
            n => n,
        };
        if rf < 1 {
            return Err((
                ErrorCode::InvalidReplicationFactor,
                "Replication factor must be larger than 0.".into(),
            ));
        }
        if rf > 1 {
            return Err((
                ErrorCode::InvalidReplicationFactor,
                format!("Replication factor: {rf} larger than available brokers: 1."),
            ));
        }
        (partitions, rf)
    } else {
        if t.num_partitions != -1 || t.replication_factor != -1 {
            return Err((
                ErrorCode::InvalidRequest,
                "Both numPartitions or replicationFactor and replicasAssignments were set.".into(),
            ));
        }
        let n = t.assignments.len();
        budget.check(limits, n)?;
        let mut seen = vec![false; n];
        for a in &t.assignments {
            let idx = usize::try_from(a.partition_index).ok().filter(|i| *i < n);
            let Some(idx) = idx.filter(|i| !seen[*i]) else {
                return Err((
                    ErrorCode::InvalidReplicaAssignment,
                    "Partitions should be numbered 0 to n-1, each once.".into(),
                ));
            };
            seen[idx] = true;
            if a.broker_ids != [state.config.node_id] {
                return Err((
                    ErrorCode::InvalidReplicaAssignment,
                    format!(
                        "Partition {} must be assigned to exactly broker {}.",
                        a.partition_index, state.config.node_id
                    ),
                ));
            }
        }
        (n as i32, 1)
    };
    let mut config = TopicConfig::default();
    for c in &t.configs {
        validate_config(&c.name, c.value.as_deref()).map_err(|m| (ErrorCode::InvalidConfig, m))?;
        config
            .entries
            .insert(c.name.clone(), c.value.clone().unwrap_or_default());
    }
    Ok((partitions, rf, config))
}

fn describe_configs(state: &BrokerState, config: &TopicConfig) -> Vec<CreatableTopicConfigs> {
    let mut all: BTreeMap<String, (String, i8)> = BTreeMap::new();
    for (k, v, _) in super::topic_defaults::topic_defaults(state) {
        all.insert(k.to_owned(), (v, SOURCE_DEFAULT));
    }
    for (k, v) in &config.entries {
        all.insert(k.clone(), (v.clone(), SOURCE_TOPIC));
    }
    all.into_iter()
        .map(|(name, (value, source))| CreatableTopicConfigs {
            name,
            value: Some(value),
            read_only: false,
            config_source: source,
            is_sensitive: false,
        })
        .collect()
}

fn success(state: &BrokerState, topic: &Topic, partitions: i32) -> CreatableTopicResult {
    CreatableTopicResult {
        name: topic.name.clone(),
        topic_id: topic.id,
        error_code: 0,
        error_message: None,
        topic_config_error_code: 0,
        num_partitions: partitions,
        replication_factor: topic.replication_factor,
        configs: Some(describe_configs(state, &topic.config)),
    }
}

fn failure(name: String, (code, message): Fail) -> CreatableTopicResult {
    CreatableTopicResult {
        name,
        error_code: code.code(),
        error_message: Some(message),
        num_partitions: -1,
        replication_factor: -1,
        configs: None,
        ..Default::default()
    }
}

pub(crate) fn handle(
    state: &BrokerState,
    req: CreateTopicsRequest,
    _version: i16,
) -> CreateTopicsResponse {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for t in &req.topics {
        *counts.entry(t.name.as_str()).or_default() += 1;
    }
    let duplicated: HashSet<String> = counts
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(name, _)| name.to_owned())
        .collect();
    let mut budget = RequestBudget::default();
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            if duplicated.contains(&t.name) {
                let msg = format!(
                    "Create topics request from client contains duplicate topic '{}'.",
                    t.name
                );
                return failure(t.name, (ErrorCode::InvalidRequest, msg));
            }
            let creation = if req.validate_only {
                Creation::ValidateOnly {
                    earlier: budget.used(),
                }
            } else {
                Creation::Create
            };
            let result = plan(state, &budget, &t).and_then(|(partitions, rf, config)| {
                let topic = state.create_topic(&t.name, partitions, rf, config, creation)?;
                budget.charge(partitions as usize);
                Ok((topic, partitions))
            });
            match result {
                Ok((topic, partitions)) => success(state, &topic, partitions),
                Err(fail) => failure(t.name, fail),
            }
        })
        .collect();
    CreateTopicsResponse {
        throttle_time_ms: 0,
        topics,
    }
}
