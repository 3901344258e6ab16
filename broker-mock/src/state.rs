//! The broker's shared state: configuration, cluster identity and the topic table.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use baton_protocol::{ErrorCode, Uuid};
use tokio::sync::watch;

use crate::cluster::node::ClusterLink;
use crate::config::BrokerConfig;
use crate::error::BrokerError;
use crate::group::GroupCoordinator;
use crate::topics::{self, random_uuid, Storage, Topic, TopicConfig};

/// State shared by every connection of one broker node.
#[derive(Debug)]
pub(crate) struct BrokerState {
    pub config: BrokerConfig,
    pub cluster_id: String,
    /// Host and port put in Metadata responses.
    pub advertised_host: String,
    pub advertised_port: i32,
    storage: Storage,
    topics: RwLock<BTreeMap<String, Arc<Topic>>>,
    /// Bumped after every append or high watermark move; long-polling fetches wait on it.
    appended: watch::Sender<u64>,
    /// The group coordinator (consumer groups and committed offsets).
    pub groups: Arc<GroupCoordinator>,
    /// The node's link to its cluster; `None` for a single-node broker.
    pub cluster: Option<Arc<ClusterLink>>,
}

impl BrokerState {
    pub fn open(
        config: BrokerConfig,
        advertised_host: String,
        advertised_port: i32,
        cluster: Option<Arc<ClusterLink>>,
    ) -> Result<Self, BrokerError> {
        let storage = Storage {
            data_dir: config.data_dir.clone(),
            segment_bytes: config.segment_bytes,
            index_interval_bytes: config.index_interval_bytes,
            node_id: config.node_id,
            cluster: cluster.is_some(),
        };
        let cluster_id = topics::cluster_id(config.data_dir.as_deref())?;
        let loaded = storage.load_all()?;
        let topics = loaded
            .into_iter()
            .map(|t| (t.name.clone(), Arc::new(t)))
            .collect();
        let groups = Arc::new(GroupCoordinator::new(config.groups.clone()));
        Ok(BrokerState {
            config,
            cluster_id,
            advertised_host,
            advertised_port,
            storage,
            topics: RwLock::new(topics),
            appended: watch::Sender::new(0),
            groups,
            cluster,
        })
    }

    fn read_topics(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<Topic>>> {
        self.topics.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write_topics(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Arc<Topic>>> {
        self.topics.write().unwrap_or_else(|p| p.into_inner())
    }

    pub fn topic(&self, name: &str) -> Option<Arc<Topic>> {
        self.read_topics().get(name).cloned()
    }

    pub fn topic_by_id(&self, id: Uuid) -> Option<Arc<Topic>> {
        self.read_topics().values().find(|t| t.id == id).cloned()
    }

    /// All topics, ordered by name.
    pub fn all_topics(&self) -> Vec<Arc<Topic>> {
        self.read_topics().values().cloned().collect()
    }

    /// The topic, created with broker defaults when missing and `auto_create` is set
    /// (and the broker allows it).
    pub fn topic_or_auto_create(&self, name: &str, auto_create: bool) -> Option<Arc<Topic>> {
        if let Some(t) = self.topic(name) {
            return Some(t);
        }
        if !(auto_create && self.config.auto_create_topics) || self.cluster.is_some() {
            return None;
        }
        if topics::validate_topic_name(name).is_err() {
            return None;
        }
        let n = self.config.default_num_partitions.max(1);
        match self.create_topic(name, n, 1, TopicConfig::default(), false) {
            Ok(t) => Some(t),
            Err(_) => self.topic(name),
        }
    }

    /// Creates a topic (names and configs already validated). With `validate_only`
    /// nothing is created and the returned topic is a detached preview.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        config: TopicConfig,
        validate_only: bool,
    ) -> Result<Arc<Topic>, (ErrorCode, String)> {
        let mut topics = self.write_topics();
        if topics.contains_key(name) {
            return Err((
                ErrorCode::TopicAlreadyExists,
                format!("Topic '{name}' already exists."),
            ));
        }
        let id = random_uuid();
        if validate_only {
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
        topics.insert(name.to_owned(), topic.clone());
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
                return Ok(t);
            }
            let _ = self.delete_topic(name);
        }
        let topic = self
            .storage
            .create(name, id, partitions, replication_factor, config)?;
        let topic = Arc::new(topic);
        self.write_topics().insert(name.to_owned(), topic.clone());
        tracing::info!(
            topic = name,
            partitions,
            node = self.config.node_id,
            "replica topic created"
        );
        Ok(topic)
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

/// Wall-clock milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
