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
//! One path serves both places that create topics: [`create_topics`] validates the
//! request and builds its response, and a [`TopicCreator`] applies each checked
//! topic. On a standalone node that is the node's topic table ([`handle`]); on a
//! cluster the request is forwarded to the controller (`handlers/forward.rs`), whose
//! creator proposes controller records and places replicas round-robin over the
//! unfenced brokers (replication factor -1 means min(3, brokers), checked against
//! the brokers only when the topic is created); explicit assignments are refused
//! there with `INVALID_REPLICA_ASSIGNMENT`.
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
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfigs, CreatableTopicResult,
    CreateTopicsRequest, CreateTopicsResponse,
};
use baton_protocol::ErrorCode;

use baton_protocol::acl::{AclOperation, ResourceType};

use crate::acl::RequestContext;
use crate::limits::BrokerLimits;
use crate::state::{BrokerState, Creation};
use crate::topic_limits::{Refusal, RequestBudget};
use crate::topics::{validate_config, validate_topic_name, Topic, TopicConfig};

/// Kafka's `ConfigSource.TOPIC_CONFIG`.
const SOURCE_TOPIC: i8 = 1;
/// Kafka's `ConfigSource.DEFAULT_CONFIG`.
const SOURCE_DEFAULT: i8 = 5;

/// A topic whose name, counts and configs passed the checks.
#[derive(Debug)]
pub(crate) struct CheckedTopic {
    /// The topic's name.
    pub name: String,
    /// Its partition count.
    pub partitions: i32,
    /// Its replication factor.
    pub replication_factor: i16,
    /// Its config overrides.
    pub config: TopicConfig,
}

/// Where a CreateTopics request's checked topics go, and what that side decides
/// alone: a standalone node's topic table or the cluster controller.
pub(crate) trait TopicCreator {
    /// Whether the requester may create the topic `name` (checked first, as
    /// Kafka does); the controller applies what nodes already authorized.
    fn authorized(&self, _name: &str) -> bool {
        true
    }

    /// The ceilings on partitions and topics.
    fn limits(&self) -> &BrokerLimits;

    /// The partition count of a topic asking for -1.
    fn default_num_partitions(&self) -> i32;

    /// The replication factor of a topic asking for `requested` (-1: the default).
    fn replication_factor(&self, requested: i16) -> Result<i16, Refusal>;

    /// Checks explicit assignments (already numbered 0..n, each once) and returns
    /// the replication factor they give.
    fn assigned_replication(
        &self,
        assignments: &[CreatableReplicaAssignment],
    ) -> Result<i16, Refusal>;

    /// Creates a checked topic (or, with [`Creation::ValidateOnly`], checks that it
    /// could be) within the broker-wide limits, and returns its result.
    fn create(
        &mut self,
        topic: &CheckedTopic,
        creation: Creation,
    ) -> Result<CreatableTopicResult, Refusal>;
}

/// A standalone node's topic table, and who asks.
struct LocalTopics<'a>(&'a BrokerState, &'a RequestContext);

impl TopicCreator for LocalTopics<'_> {
    fn authorized(&self, name: &str) -> bool {
        self.0.allowed_on_cluster(self.1, AclOperation::Create)
            || self
                .0
                .allowed(self.1, AclOperation::Create, ResourceType::Topic, name)
    }

    fn limits(&self) -> &BrokerLimits {
        &self.0.config.limits
    }

    fn default_num_partitions(&self) -> i32 {
        self.0.config.default_num_partitions
    }

    fn replication_factor(&self, requested: i16) -> Result<i16, Refusal> {
        let rf = match requested {
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
        Ok(rf)
    }

    fn assigned_replication(
        &self,
        assignments: &[CreatableReplicaAssignment],
    ) -> Result<i16, Refusal> {
        let me = self.0.config.node_id;
        match assignments.iter().find(|a| a.broker_ids != [me]) {
            Some(a) => Err((
                ErrorCode::InvalidReplicaAssignment,
                format!(
                    "Partition {} must be assigned to exactly broker {me}.",
                    a.partition_index
                ),
            )),
            None => Ok(1),
        }
    }

    fn create(
        &mut self,
        topic: &CheckedTopic,
        creation: Creation,
    ) -> Result<CreatableTopicResult, Refusal> {
        let created = self.0.create_topic(
            &topic.name,
            topic.partitions,
            topic.replication_factor,
            topic.config.clone(),
            creation,
        )?;
        Ok(success(self.0, &created, topic.partitions))
    }
}

/// Checks `t`'s name, counts and configs before anything is created.
fn plan(
    creator: &impl TopicCreator,
    budget: &RequestBudget,
    t: &CreatableTopic,
) -> Result<CheckedTopic, Refusal> {
    let limits = creator.limits();
    validate_topic_name(&t.name).map_err(|m| (ErrorCode::InvalidTopicException, m))?;
    let (partitions, rf) = if t.assignments.is_empty() {
        let partitions = match t.num_partitions {
            -1 => creator.default_num_partitions(),
            n => n,
        };
        if partitions < 1 {
            return Err((
                ErrorCode::InvalidPartitions,
                "Number of partitions must be larger than 0.".into(),
            ));
        }
        budget.check(limits, partitions as usize)?;
        (
            partitions,
            creator.replication_factor(t.replication_factor)?,
        )
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
        }
        (n as i32, creator.assigned_replication(&t.assignments)?)
    };
    let mut config = TopicConfig::default();
    for c in &t.configs {
        validate_config(&c.name, c.value.as_deref()).map_err(|m| (ErrorCode::InvalidConfig, m))?;
        config
            .entries
            .insert(c.name.clone(), c.value.clone().unwrap_or_default());
    }
    Ok(CheckedTopic {
        name: t.name.clone(),
        partitions,
        replication_factor: rf,
        config,
    })
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

/// The result of a topic refused with `code` and `message`.
pub(crate) fn failure(name: String, (code, message): Refusal) -> CreatableTopicResult {
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

/// Serves CreateTopics on a standalone node.
pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: CreateTopicsRequest,
    _version: i16,
) -> CreateTopicsResponse {
    create_topics(&mut LocalTopics(state, ctx), req)
}

/// Checks every topic of `req` in order (duplicates, names, counts, the request's
/// partition budget, configs), hands each checked one to `creator`, and builds the
/// response.
pub(crate) fn create_topics(
    creator: &mut impl TopicCreator,
    req: CreateTopicsRequest,
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
            if !creator.authorized(&t.name) {
                let msg = "Authorization failed.".to_owned();
                return failure(t.name, (ErrorCode::TopicAuthorizationFailed, msg));
            }
            let creation = if req.validate_only {
                Creation::ValidateOnly {
                    earlier: budget.used(),
                }
            } else {
                Creation::Create
            };
            let result = plan(creator, &budget, &t).and_then(|checked| {
                let result = creator.create(&checked, creation)?;
                budget.charge(checked.partitions as usize);
                Ok(result)
            });
            result.unwrap_or_else(|refusal| failure(t.name, refusal))
        })
        .collect();
    CreateTopicsResponse {
        throttle_time_ms: 0,
        topics,
    }
}
