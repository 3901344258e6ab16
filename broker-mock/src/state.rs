//! The broker's shared state: configuration, cluster identity and the topic table.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use baton_protocol::{ErrorCode, Uuid};
use tokio::sync::watch;

use baton_protocol::acl::{
    AclBinding, AclBindingFilter, AclOperation, ResourceType, CLUSTER_RESOURCE_NAME,
};

use crate::acl::{matching, Authorizer, RequestContext};
use crate::clock::WallClock;
use crate::config::BrokerConfig;
use crate::error::BrokerError;
use crate::group::GroupCoordinator;
use crate::node_mode::NodeMode;
use crate::topic_limits::{check_totals, Refusal, Usage};
use crate::topics::{self, random_uuid, Storage, Topic, TopicConfig};
use crate::txn::{TxnCoordinator, TxnLimits};

/// The topics of a node by name, with their partition count kept alongside.
#[derive(Debug, Default)]
struct TopicTable {
    by_name: BTreeMap<String, Arc<Topic>>,
    /// Invariant: the sum of `partitions.len()` over `by_name`.
    partitions: usize,
}

impl TopicTable {
    fn usage(&self) -> Usage {
        Usage {
            topics: self.by_name.len(),
            partitions: self.partitions,
        }
    }

    fn insert(&mut self, topic: Arc<Topic>) {
        self.partitions += topic.partitions.len();
        if let Some(old) = self.by_name.insert(topic.name.clone(), topic) {
            self.partitions -= old.partitions.len();
        }
    }

    fn remove(&mut self, name: &str) -> Option<Arc<Topic>> {
        let topic = self.by_name.remove(name)?;
        self.partitions -= topic.partitions.len();
        Some(topic)
    }
}

/// The file of a standalone node's dynamic broker defaults, `key=value` lines.
const BROKER_DEFAULTS_FILE: &str = "broker-defaults.properties";

fn load_broker_defaults(dir: &std::path::Path) -> Result<BTreeMap<String, String>, BrokerError> {
    let path = dir.join(BROKER_DEFAULTS_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(crate::error::LogError::io(&path, e).into()),
    };
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (k, v) = line
            .split_once('=')
            .ok_or_else(|| BrokerError::TopicMetadata {
                path: path.clone(),
                reason: format!("line without '=': {line:?}"),
            })?;
        out.insert(k.to_owned(), v.to_owned());
    }
    Ok(out)
}

fn save_broker_defaults(
    dir: &std::path::Path,
    defaults: &BTreeMap<String, String>,
) -> std::io::Result<()> {
    let text: String = defaults.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    let tmp = dir.join(format!("{BROKER_DEFAULTS_FILE}.tmp"));
    std::fs::write(&tmp, text)?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, dir.join(BROKER_DEFAULTS_FILE))
}

/// Whether [`BrokerState::create_topic`] creates a topic or only checks that it could.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Creation {
    /// Create it.
    Create,
    /// Create nothing; `earlier` is what the same request validated before this topic
    /// (counted against the limits as if it had been created).
    ValidateOnly { earlier: Usage },
}

/// One listener's advertised endpoint: what Metadata, FindCoordinator and
/// DescribeCluster tell the clients that connected to that listener.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// The listener's name.
    pub name: String,
    /// Host and port clients of this listener connect to.
    pub host: String,
    pub port: i32,
    /// The listener's security protocol.
    pub protocol: crate::security::SecurityProtocol,
}

/// State shared by every connection of one broker node.
#[derive(Debug)]
pub(crate) struct BrokerState {
    pub config: BrokerConfig,
    pub cluster_id: String,
    /// Each listener's advertised endpoint, in `BrokerConfig::listeners` order.
    /// Invariant: not empty.
    pub listeners: Vec<Endpoint>,
    /// The node's SCRAM users (every SASL listener checks them;
    /// AlterUserScramCredentials changes them).
    pub scram: Arc<crate::security::ScramStore>,
    storage: Storage,
    topics: RwLock<TopicTable>,
    /// Bumped after every append or high watermark move; long-polling fetches wait on it.
    appended: watch::Sender<u64>,
    /// The group coordinator (consumer groups and committed offsets).
    pub groups: Arc<GroupCoordinator>,
    /// The transaction coordinator (transactional ids and their transactions).
    pub txn: Arc<TxnCoordinator>,
    /// Standalone, or a replica in a cluster (with its link to the cluster).
    pub mode: NodeMode,
    /// The ACLs and their settings, when authorization is on.
    pub authorizer: Option<Authorizer>,
    /// Incremental fetch sessions (KIP-227), bounded by the fetch-session limits.
    pub fetch_sessions: std::sync::Mutex<crate::fetch_session::FetchSessionCache>,
    /// The cluster-wide dynamic broker defaults (IncrementalAlterConfigs on the
    /// broker resource ""): a cluster node's copy of the controller's, a
    /// standalone node's own (persisted in its data directory).
    broker_defaults: RwLock<BTreeMap<String, String>>,
    /// This node's counters (`metrics`), shared with its server and partitions.
    pub metrics: Arc<crate::metrics::NodeMetrics>,
    /// This node's wall clock (`config.env.clock`): record timestamps, group,
    /// transaction and fetch-session deadlines.
    pub clock: WallClock,
}

impl BrokerState {
    pub fn open(
        config: BrokerConfig,
        listeners: Vec<Endpoint>,
        scram: Arc<crate::security::ScramStore>,
        mode: NodeMode,
    ) -> Result<Self, BrokerError> {
        assert!(!listeners.is_empty(), "a node has at least one listener");
        let metrics = Arc::new(crate::metrics::NodeMetrics::default());
        let storage = Storage {
            metrics: metrics.clone(),
            data_dir: config.data_dir.clone(),
            segment_bytes: config.segment_bytes,
            index_interval_bytes: config.index_interval_bytes,
            node_id: config.node_id,
            cluster: mode.is_replica(),
            producer_limits: crate::producer_state::ProducerLimits {
                max_producers: config.limits.max_producers_per_partition,
                max_aborted_txns: config.limits.max_aborted_txns_per_partition,
            },
        };
        let cluster_id = topics::cluster_id(config.data_dir.as_deref())?;
        let broker_defaults = match config.data_dir.as_deref().filter(|_| !mode.is_replica()) {
            Some(dir) => load_broker_defaults(dir)?,
            None => BTreeMap::new(),
        };
        let loaded = storage.load_all()?;
        let mut topics = TopicTable::default();
        for t in loaded {
            topics.insert(Arc::new(t));
        }
        let groups = Arc::new(GroupCoordinator::new(
            config.groups.clone(),
            config.limits.max_groups,
            config.limits.max_pending_txn_offsets,
        ));
        let txn = Arc::new(TxnCoordinator::new(
            TxnLimits {
                max_timeout_ms: config.transaction_max_timeout_ms,
                max_partitions: config.limits.max_partitions_per_transaction,
            },
            config.limits.max_transactional_ids,
            config
                .transaction_state_partitions
                .unwrap_or(config.groups.offsets_topic_partitions),
        ));
        // A cluster node's ACLs are the controller's; a standalone node keeps its own.
        let acl_dir = config.data_dir.as_deref().filter(|_| !mode.is_replica());
        let authorizer = match config.authorizer.clone() {
            Some(a) => Some(Authorizer::open(a, config.limits.max_acls, acl_dir)?),
            None => None,
        };
        let fetch_sessions = std::sync::Mutex::new(crate::fetch_session::FetchSessionCache::new(
            config.limits.max_fetch_sessions,
            config.limits.max_fetch_session_partitions,
            topics::random_u64(),
        ));
        Ok(BrokerState {
            authorizer,
            clock: WallClock::of(&config.env),
            config,
            cluster_id,
            listeners,
            scram,
            storage,
            topics: RwLock::new(topics),
            appended: watch::Sender::new(0),
            fetch_sessions,
            groups,
            txn,
            mode,
            broker_defaults: RwLock::new(broker_defaults),
            metrics,
        })
    }

    /// The cluster-wide dynamic broker defaults.
    pub fn broker_defaults(&self) -> BTreeMap<String, String> {
        self.broker_defaults
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Replaces the dynamic broker defaults (already checked); a standalone node
    /// with a data directory persists them first.
    pub fn set_broker_defaults(&self, defaults: BTreeMap<String, String>) -> Result<(), Refusal> {
        if let Some(dir) = self
            .config
            .data_dir
            .as_deref()
            .filter(|_| !self.mode.is_replica())
        {
            save_broker_defaults(dir, &defaults).map_err(|e| {
                tracing::error!(error = %e, "persisting broker defaults failed");
                (ErrorCode::KafkaStorageError, e.to_string())
            })?;
        }
        *self
            .broker_defaults
            .write()
            .unwrap_or_else(|p| p.into_inner()) = defaults;
        Ok(())
    }

    /// The broker's retention defaults with the dynamic ones over the static.
    pub fn effective_retention(&self) -> crate::log::LogRetention {
        let mut r = self.config.retention;
        let d = self
            .broker_defaults
            .read()
            .unwrap_or_else(|p| p.into_inner());
        let long = |k: &str| d.get(k).and_then(|v| v.trim().parse::<i64>().ok());
        if let Some(ms) = long("log.retention.ms") {
            r.retention_ms = (ms >= 0).then_some(ms);
        }
        if let Some(b) = long("log.retention.bytes") {
            r.retention_bytes = u64::try_from(b).ok();
        }
        if let Some(ms) = long("log.roll.ms") {
            r.roll_ms = Some(ms);
        }
        r
    }

    /// Whether `ctx`'s principal may do `op` on `(resource_type, name)`; always
    /// when authorization is off.
    /// A cluster node decides with its metadata image's ACLs.
    pub fn allowed(
        &self,
        ctx: &RequestContext,
        op: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        let Some(a) = &self.authorizer else {
            return true;
        };
        match self.mode.replica() {
            Some(link) => a.allowed(Some(link.image().acls()), ctx, op, resource_type, name),
            None => a.allowed(None, ctx, op, resource_type, name),
        }
    }

    /// Whether `ctx`'s principal may do `op` on some resource of `resource_type`
    /// (Kafka's `authorizeByResourceType`); always when authorization is off.
    pub fn allowed_on_any(
        &self,
        ctx: &RequestContext,
        op: AclOperation,
        resource_type: ResourceType,
    ) -> bool {
        let Some(a) = &self.authorizer else {
            return true;
        };
        match self.mode.replica() {
            Some(link) => a.allowed_on_any(Some(link.image().acls()), ctx, op, resource_type),
            None => a.allowed_on_any(None, ctx, op, resource_type),
        }
    }

    /// The ACL bindings `filter` selects: a cluster node's image's, else this
    /// node's own (none without an authorizer).
    pub fn describe_acls(&self, filter: &AclBindingFilter) -> Vec<AclBinding> {
        match (self.mode.replica(), &self.authorizer) {
            (Some(link), Some(_)) => matching(link.image().acls(), filter).cloned().collect(),
            (None, Some(a)) => a.describe(filter),
            (_, None) => Vec::new(),
        }
    }

    /// Whether `ctx`'s principal may do `op` on the cluster.
    pub fn allowed_on_cluster(&self, ctx: &RequestContext, op: AclOperation) -> bool {
        self.allowed(ctx, op, ResourceType::Cluster, CLUSTER_RESOURCE_NAME)
    }

    /// The advertised endpoint of the listener at `index` (the first listener's
    /// for an index out of range).
    pub fn endpoint(&self, index: usize) -> &Endpoint {
        self.listeners.get(index).unwrap_or(&self.listeners[0])
    }

    /// The listener name a cluster node looks other brokers' endpoints up by for
    /// a request on the listener at `index`: `None` for the first listener (the
    /// brokers' registered host and port), its name for the others.
    pub fn listener_name(&self, index: usize) -> Option<&str> {
        (index > 0 && index < self.listeners.len()).then(|| self.listeners[index].name.as_str())
    }

    fn read_topics(&self) -> std::sync::RwLockReadGuard<'_, TopicTable> {
        self.topics.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write_topics(&self) -> std::sync::RwLockWriteGuard<'_, TopicTable> {
        self.topics.write().unwrap_or_else(|p| p.into_inner())
    }

    pub fn topic(&self, name: &str) -> Option<Arc<Topic>> {
        self.read_topics().by_name.get(name).cloned()
    }

    pub fn topic_by_id(&self, id: Uuid) -> Option<Arc<Topic>> {
        self.read_topics()
            .by_name
            .values()
            .find(|t| t.id == id)
            .cloned()
    }

    /// All topics, ordered by name.
    pub fn all_topics(&self) -> Vec<Arc<Topic>> {
        self.read_topics().by_name.values().cloned().collect()
    }

    /// The topic, created with broker defaults when missing and `auto_create` is set
    /// (and the broker allows it). A creation the limits refuse is logged and gives
    /// `None`.
    pub fn topic_or_auto_create(&self, name: &str, auto_create: bool) -> Option<Arc<Topic>> {
        if let Some(t) = self.topic(name) {
            return Some(t);
        }
        if !(auto_create && self.config.auto_create_topics) || self.mode.is_replica() {
            return None;
        }
        if topics::validate_topic_name(name).is_err() {
            return None;
        }
        let n = self.config.default_num_partitions.max(1);
        match self.create_topic(name, n, 1, TopicConfig::default(), Creation::Create) {
            Ok(t) => Some(t),
            Err((ErrorCode::TopicAlreadyExists, _)) => self.topic(name),
            Err((code, reason)) => {
                tracing::warn!(topic = name, ?code, reason, "topic auto-creation refused");
                None
            }
        }
    }

    /// Creates a topic (names and configs already validated) if the broker-wide
    /// limits (`max_topics`, `max_partitions`) allow it; the check and the creation
    /// hold the table's write lock together, so concurrent requests cannot both pass.
    /// With [`Creation::ValidateOnly`] nothing is created and the returned topic is a
    /// detached preview.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        config: TopicConfig,
        creation: Creation,
    ) -> Result<Arc<Topic>, Refusal> {
        let mut topics = self.write_topics();
        if topics.by_name.contains_key(name) {
            return Err((
                ErrorCode::TopicAlreadyExists,
                format!("Topic '{name}' already exists."),
            ));
        }
        let exists = match creation {
            Creation::Create => topics.usage(),
            Creation::ValidateOnly { earlier } => topics.usage().plus(earlier),
        };
        let wanted = usize::try_from(partitions).unwrap_or(0);
        check_totals(&self.config.limits, exists, wanted)?;
        let id = random_uuid();
        if let Creation::ValidateOnly { .. } = creation {
            return Ok(Arc::new(Topic {
                name: name.to_owned(),
                id,
                replication_factor,
                config,
                partitions: Vec::new(),
            }));
        }
        let topic = self
            .storage
            .create(name, id, partitions, replication_factor, config)
            .map_err(|e| {
                tracing::error!(topic = name, error = %e, "creating topic failed");
                (ErrorCode::KafkaStorageError, e.to_string())
            })?;
        let topic = Arc::new(topic);
        topics.insert(topic.clone());
        tracing::info!(topic = name, partitions, "created topic");
        Ok(topic)
    }

    /// Creates a cluster replica's local copy of a topic with the controller's id,
    /// replacing a local topic of that name with another id. Returns the topic.
    pub fn ensure_replica_topic(
        &self,
        name: &str,
        id: Uuid,
        partitions: i32,
        replication_factor: i16,
        config: TopicConfig,
    ) -> Result<Arc<Topic>, BrokerError> {
        if let Some(t) = self.topic(name) {
            if t.id == id {
                let grown = t.partitions.len() < usize::try_from(partitions).unwrap_or(0);
                if !grown && t.config == config {
                    return Ok(t);
                }
                // New partitions or configs from the controller.
                return self
                    .update_topic(name, partitions, config)
                    .map_err(|(_, reason)| BrokerError::TopicUpdate {
                        topic: name.to_owned(),
                        reason,
                    });
            }
            let _ = self.delete_topic(name);
        }
        let topic = self
            .storage
            .create(name, id, partitions, replication_factor, config)?;
        let topic = Arc::new(topic);
        self.write_topics().insert(topic.clone());
        tracing::info!(
            topic = name,
            partitions,
            node = self.config.node_id,
            "replica topic created"
        );
        Ok(topic)
    }

    /// Replaces topic `name`'s configs and grows it to `partitions` partitions
    /// (existing partitions carry over; a smaller count adds none), counted against
    /// `max_partitions`. Returns the new topic.
    pub fn update_topic(
        &self,
        name: &str,
        partitions: i32,
        config: TopicConfig,
    ) -> Result<Arc<Topic>, Refusal> {
        self.update_topic_with(name, |_, _| Ok(Some((partitions, config))))
            .map(|t| t.expect("a change was asked for"))
    }

    /// Like [`BrokerState::update_topic`], with the new partition count and
    /// configs decided by `change` from the current topic and the node's usage,
    /// under the topic table's write lock (so concurrent changes of one topic
    /// apply in turn, each on the other's result). `change` giving `None` changes
    /// nothing (validate only).
    pub fn update_topic_with(
        &self,
        name: &str,
        change: impl FnOnce(&Topic, Usage) -> Result<Option<(i32, TopicConfig)>, Refusal>,
    ) -> Result<Option<Arc<Topic>>, Refusal> {
        let mut topics = self.write_topics();
        let old = topics.by_name.get(name).cloned().ok_or_else(|| {
            (
                ErrorCode::UnknownTopicOrPartition,
                format!("Topic {name} does not exist."),
            )
        })?;
        let Some((partitions, config)) = change(&old, topics.usage())? else {
            return Ok(None);
        };
        let added = usize::try_from(partitions)
            .unwrap_or(0)
            .saturating_sub(old.partitions.len());
        if added > 0 {
            let exists = topics.usage();
            let limit = self.config.limits.max_partitions;
            if exists.partitions.saturating_add(added) > limit {
                return Err((
                    ErrorCode::PolicyViolation,
                    format!(
                        "adding {added} partitions would exceed the broker's limit of {limit} \
                         partitions (max_partitions); {} exist",
                        exists.partitions
                    ),
                ));
            }
        }
        let topic = self.storage.update(&old, partitions, config).map_err(|e| {
            tracing::error!(topic = name, error = %e, "updating topic failed");
            (ErrorCode::KafkaStorageError, e.to_string())
        })?;
        let topic = Arc::new(topic);
        topics.insert(topic.clone());
        drop(topics);
        if added > 0 {
            tracing::info!(topic = name, partitions, "added partitions");
        }
        Ok(Some(topic))
    }

    /// Deletes a topic and its data.
    pub fn delete_topic(&self, name: &str) -> Result<Arc<Topic>, ErrorCode> {
        let mut topics = self.write_topics();
        let topic = topics
            .remove(name)
            .ok_or(ErrorCode::UnknownTopicOrPartition)?;
        if let Err(e) = self.storage.delete(&topic) {
            tracing::error!(topic = name, error = %e, "deleting topic data failed");
        }
        tracing::info!(topic = name, "deleted topic");
        drop(topics);
        self.notify_append();
        Ok(topic)
    }

    /// Wakes long-polling fetches.
    pub fn notify_append(&self) {
        self.appended.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// A receiver that changes on every append.
    pub fn subscribe_appends(&self) -> watch::Receiver<u64> {
        self.appended.subscribe()
    }

    /// Flushes every log to disk.
    pub fn flush_all(&self) {
        for topic in self.all_topics() {
            for p in &topic.partitions {
                if let Err(e) = p.lock().flush() {
                    tracing::error!(topic = %topic.name, partition = p.index(), error = %e, "flush failed");
                }
            }
        }
    }
}

impl crate::group::GroupHost for BrokerState {
    fn topic(&self, name: &str) -> Option<Arc<Topic>> {
        BrokerState::topic(self, name)
    }

    fn topics(&self) -> Vec<Arc<Topic>> {
        self.all_topics()
    }

    fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        config: TopicConfig,
    ) -> Result<Arc<Topic>, (ErrorCode, String)> {
        BrokerState::create_topic(
            self,
            name,
            partitions,
            replication_factor,
            config,
            Creation::Create,
        )
    }

    fn mode(&self) -> &NodeMode {
        &self.mode
    }

    fn notify_append(&self) {
        BrokerState::notify_append(self)
    }

    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }
}
