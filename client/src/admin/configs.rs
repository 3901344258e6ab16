//! Topic and broker configs: [`Admin::describe_configs`] (DescribeConfigs, API key
//! 32) and [`Admin::incremental_alter_configs`] (IncrementalAlterConfigs, API key
//! 44, KIP-339).
//!
//! A topic's configs and the cluster-wide broker default go to any broker (a
//! KRaft broker forwards alterations to the controller); one broker's own configs
//! go to that broker.

use std::collections::BTreeMap;
use std::fmt;

use baton_protocol::messages::{
    AlterConfigsResource, AlterableConfig, DescribeConfigsRequest, DescribeConfigsResource,
    IncrementalAlterConfigsRequest, CONFIG_OP_APPEND, CONFIG_OP_DELETE, CONFIG_OP_SET,
    CONFIG_OP_SUBTRACT, RESOURCE_TYPE_BROKER, RESOURCE_TYPE_TOPIC,
};
use baton_protocol::ErrorCode;

use super::retry::retriable_code;
use super::{Admin, AdminError};

/// A resource that has configs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum ConfigResource {
    /// A topic.
    Topic(String),
    /// One broker, by node id.
    Broker(i32),
    /// The cluster-wide default of every broker (Kafka's `--entity-default`).
    BrokerDefault,
}

impl ConfigResource {
    /// A topic's configs.
    pub fn topic(name: impl Into<String>) -> Self {
        ConfigResource::Topic(name.into())
    }

    fn wire(&self) -> (i8, String) {
        match self {
            ConfigResource::Topic(t) => (RESOURCE_TYPE_TOPIC, t.clone()),
            ConfigResource::Broker(id) => (RESOURCE_TYPE_BROKER, id.to_string()),
            ConfigResource::BrokerDefault => (RESOURCE_TYPE_BROKER, String::new()),
        }
    }

    /// The broker that must answer for this resource, if any must.
    fn node(&self) -> Option<i32> {
        match self {
            ConfigResource::Broker(id) => Some(*id),
            _ => None,
        }
    }
}

impl fmt::Display for ConfigResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigResource::Topic(t) => write!(f, "topic {t}"),
            ConfigResource::Broker(id) => write!(f, "broker {id}"),
            ConfigResource::BrokerDefault => f.write_str("broker default"),
        }
    }
}

/// Where a config's value comes from (DescribeConfigs' `ConfigSource`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigSource {
    /// A dynamic override of the topic.
    DynamicTopic,
    /// A dynamic override of this broker.
    DynamicBroker,
    /// A dynamic cluster-wide broker default.
    DynamicDefaultBroker,
    /// The broker's static configuration (its properties file or flags).
    StaticBroker,
    /// The built-in default.
    Default,
    /// Another source, by its wire code (loggers, client metrics, groups), or
    /// unknown (0).
    Other(i8),
}

impl ConfigSource {
    /// The source with wire code `code`.
    pub fn from_code(code: i8) -> Self {
        match code {
            1 => ConfigSource::DynamicTopic,
            2 => ConfigSource::DynamicBroker,
            3 => ConfigSource::DynamicDefaultBroker,
            4 => ConfigSource::StaticBroker,
            5 => ConfigSource::Default,
            other => ConfigSource::Other(other),
        }
    }
}

/// Another name or source of the same setting, highest precedence first
/// (`retention.ms` of a topic has `log.retention.ms` of the broker as a synonym).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigSynonym {
    /// The synonym's name.
    pub name: String,
    /// Its value, or `None` if sensitive.
    pub value: Option<String>,
    /// Where it is set.
    pub source: ConfigSource,
}

/// One config of a described resource.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigEntry {
    /// The config key.
    pub name: String,
    /// The value in effect, or `None` if sensitive or unset.
    pub value: Option<String>,
    /// Where the value comes from.
    pub source: ConfigSource,
    /// Whether it cannot be altered.
    pub read_only: bool,
    /// Whether its value is secret (and so not shown).
    pub sensitive: bool,
    /// Synonyms, if asked for ([`DescribeConfigsOptions::include_synonyms`]).
    pub synonyms: Vec<ConfigSynonym>,
    /// The documentation, if asked for and the broker has it.
    pub documentation: Option<String>,
}

impl ConfigEntry {
    /// Whether the value is a default rather than an override.
    pub fn is_default(&self) -> bool {
        matches!(
            self.source,
            ConfigSource::Default | ConfigSource::StaticBroker
        )
    }
}

/// The described configs of one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResourceConfig {
    /// The resource.
    pub resource: ConfigResource,
    /// Its configs, in the broker's order.
    pub entries: Vec<ConfigEntry>,
}

impl ResourceConfig {
    /// The entry for `name`.
    pub fn get(&self, name: &str) -> Option<&ConfigEntry> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// The value in effect for `name`.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(|e| e.value.as_deref())
    }
}

/// What [`Admin::describe_configs`] asks for besides the values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DescribeConfigsOptions {
    /// Include each config's synonyms.
    pub include_synonyms: bool,
    /// Include each config's documentation.
    pub include_documentation: bool,
}

impl DescribeConfigsOptions {
    /// Asks for synonyms.
    pub fn synonyms(mut self) -> Self {
        self.include_synonyms = true;
        self
    }

    /// Asks for documentation.
    pub fn documentation(mut self) -> Self {
        self.include_documentation = true;
        self
    }
}

/// One change of [`Admin::incremental_alter_configs`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AlterConfigOp {
    /// Sets `key` to `value`.
    Set(String, String),
    /// Removes the override of `key`, so that its default applies again.
    Delete(String),
    /// Adds `value` to the list config `key` (such as `cleanup.policy`).
    Append(String, String),
    /// Removes `value` from the list config `key`.
    Subtract(String, String),
}

impl AlterConfigOp {
    /// Sets `key` to `value`.
    pub fn set(key: impl Into<String>, value: impl Into<String>) -> Self {
        AlterConfigOp::Set(key.into(), value.into())
    }

    /// Removes the override of `key`.
    pub fn delete(key: impl Into<String>) -> Self {
        AlterConfigOp::Delete(key.into())
    }

    /// Adds `value` to the list config `key`.
    pub fn append(key: impl Into<String>, value: impl Into<String>) -> Self {
        AlterConfigOp::Append(key.into(), value.into())
    }

    /// Removes `value` from the list config `key`.
    pub fn subtract(key: impl Into<String>, value: impl Into<String>) -> Self {
        AlterConfigOp::Subtract(key.into(), value.into())
    }

    fn wire(&self) -> AlterableConfig {
        let (name, op, value) = match self {
            AlterConfigOp::Set(k, v) => (k, CONFIG_OP_SET, Some(v)),
            AlterConfigOp::Delete(k) => (k, CONFIG_OP_DELETE, None),
            AlterConfigOp::Append(k, v) => (k, CONFIG_OP_APPEND, Some(v)),
            AlterConfigOp::Subtract(k, v) => (k, CONFIG_OP_SUBTRACT, Some(v)),
        };
        AlterableConfig {
            name: name.clone(),
            config_operation: op,
            value: value.cloned(),
        }
    }
}

/// One resource whose configs could not be described or altered.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigError {
    /// The resource.
    pub resource: ConfigResource,
    /// The error code the broker sent: INVALID_CONFIG (a bad value, an unknown or
    /// read-only key; the message names it), UNKNOWN_TOPIC_OR_PARTITION,
    /// TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED,
    /// INVALID_REQUEST, or the last retriable error at the operation timeout.
    pub code: ErrorCode,
    /// The broker's message, if it sent one.
    pub message: Option<String>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.message {
            Some(m) => write!(f, "{}: {} ({m})", self.resource, self.code),
            None => write!(f, "{}: {}", self.resource, self.code),
        }
    }
}

/// Requests grouped by the broker that must answer them (`None`: any broker).
fn by_node<T>(items: Vec<(ConfigResource, T)>) -> BTreeMap<Option<i32>, Vec<(ConfigResource, T)>> {
    let mut out: BTreeMap<Option<i32>, Vec<(ConfigResource, T)>> = BTreeMap::new();
    for (r, t) in items {
        out.entry(r.node()).or_default().push((r, t));
    }
    out
}

impl Admin {
    /// Describes the configs of topics and brokers (DescribeConfigs): every
    /// config's value in effect, where it comes from, whether it is read-only or
    /// sensitive, and, as `options` ask, its synonyms and documentation. Results
    /// come in the order of `resources`.
    ///
    /// Retriable errors are retried until the operation timeout. Resources that
    /// fail are reported together in [`AdminError::Configs`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: this only reads.
    pub async fn describe_configs(
        &self,
        resources: impl IntoIterator<Item = ConfigResource>,
        options: DescribeConfigsOptions,
    ) -> Result<Vec<ResourceConfig>, AdminError> {
        let resources: Vec<ConfigResource> = resources.into_iter().collect();
        let mut found: BTreeMap<ConfigResource, ResourceConfig> = BTreeMap::new();
        let mut failed: Vec<ConfigError> = Vec::new();
        let groups = by_node(resources.iter().cloned().map(|r| (r, ())).collect());
        for (node, group) in groups {
            let req = DescribeConfigsRequest {
                resources: group
                    .iter()
                    .map(|(r, ())| {
                        let (resource_type, resource_name) = r.wire();
                        DescribeConfigsResource {
                            resource_type,
                            resource_name,
                            configuration_keys: None,
                        }
                    })
                    .collect(),
                include_synonyms: options.include_synonyms,
                include_documentation: options.include_documentation,
            };
            let resp = self
                .with_retries("describe configs", || async {
                    let resp = match node {
                        Some(id) => self.node_attempt(id, &req).await?,
                        None => self.controller_attempt(&req).await?,
                    };
                    for r in &resp.results {
                        retriable_code(r.error_code, || format!("configs of {}", r.resource_name))?;
                    }
                    Ok(resp)
                })
                .await?;
            for (result, (resource, ())) in resp.results.into_iter().zip(group) {
                if result.error_code != 0 {
                    failed.push(ConfigError {
                        resource,
                        code: ErrorCode::from_code(result.error_code),
                        message: result.error_message,
                    });
                    continue;
                }
                let entries = result
                    .configs
                    .into_iter()
                    .map(|c| ConfigEntry {
                        name: c.name,
                        value: c.value,
                        source: ConfigSource::from_code(c.config_source),
                        read_only: c.read_only,
                        sensitive: c.is_sensitive,
                        synonyms: c
                            .synonyms
                            .into_iter()
                            .map(|s| ConfigSynonym {
                                name: s.name,
                                value: s.value,
                                source: ConfigSource::from_code(s.source),
                            })
                            .collect(),
                        documentation: c.documentation,
                    })
                    .collect();
                found.insert(resource.clone(), ResourceConfig { resource, entries });
            }
        }
        if !failed.is_empty() {
            return Err(AdminError::Configs(failed));
        }
        Ok(resources
            .iter()
            .filter_map(|r| found.get(r).cloned())
            .collect())
    }

    /// Changes single configs of topics and brokers (IncrementalAlterConfigs),
    /// leaving the others as they are. With `validate_only` the broker checks the
    /// changes and applies none. A topic's new configs take effect on its live
    /// partitions.
    ///
    /// Each resource's changes apply all or none. Resources that fail are reported
    /// together in [`AdminError::Configs`]; the others' changes were applied.
    /// Retriable errors (NOT_CONTROLLER, a broken connection, a request timeout)
    /// are retried until the operation timeout; SET, DELETE and SUBTRACT are
    /// idempotent, but an APPEND repeated after a lost answer finds its value
    /// there already and leaves it once.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in effect: if the future is dropped after a request was
    /// sent, the changes may or may not be applied. The connections stay usable.
    pub async fn incremental_alter_configs(
        &self,
        changes: impl IntoIterator<Item = (ConfigResource, Vec<AlterConfigOp>)>,
        validate_only: bool,
    ) -> Result<(), AdminError> {
        let mut failed: Vec<ConfigError> = Vec::new();
        for (node, group) in by_node(changes.into_iter().collect()) {
            let req = IncrementalAlterConfigsRequest {
                resources: group
                    .iter()
                    .map(|(r, ops)| {
                        let (resource_type, resource_name) = r.wire();
                        AlterConfigsResource {
                            resource_type,
                            resource_name,
                            configs: ops.iter().map(AlterConfigOp::wire).collect(),
                        }
                    })
                    .collect(),
                validate_only,
            };
            let resp = self
                .with_retries("alter configs", || async {
                    let resp = match node {
                        Some(id) => self.node_attempt(id, &req).await?,
                        None => self.controller_attempt(&req).await?,
                    };
                    for r in &resp.responses {
                        retriable_code(r.error_code, || format!("configs of {}", r.resource_name))?;
                    }
                    Ok(resp)
                })
                .await?;
            for (resource, _) in group {
                let (resource_type, resource_name) = resource.wire();
                let Some(result) = resp
                    .responses
                    .iter()
                    .find(|r| r.resource_type == resource_type && r.resource_name == resource_name)
                else {
                    failed.push(ConfigError {
                        resource,
                        code: ErrorCode::UnknownServerError,
                        message: Some("the broker did not answer for this resource".into()),
                    });
                    continue;
                };
                if result.error_code != 0 {
                    failed.push(ConfigError {
                        resource,
                        code: ErrorCode::from_code(result.error_code),
                        message: result.error_message.clone(),
                    });
                }
            }
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(AdminError::Configs(failed))
        }
    }
}
