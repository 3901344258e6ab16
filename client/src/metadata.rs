//! Cluster metadata: which brokers exist and which broker leads each partition.
//!
//! The [`Client`](crate::Client) keeps one [`ClusterMetadata`] snapshot behind a
//! generation number. Every successful refresh installs a new snapshot and bumps the
//! generation. A caller that finds a cached leader wrong (NOT_LEADER_OR_FOLLOWER, a
//! broken connection) invalidates *the generation it used*; if a refresh already
//! happened since, the invalidation is a no-op, so a burst of failures from one stale
//! view causes one refresh, not one per failure.
//!
//! Refreshes are single-flight: concurrent callers wait for the refresh in progress
//! and reuse its result.
//!
//! Leaders that Produce responses name (KIP-951 hints) are kept here too, beside
//! the snapshot, until metadata catches up with their epoch: all leader knowledge
//! of the client lives in this cache.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use baton_protocol::messages::{MetadataRequest, MetadataRequestTopic, MetadataResponse};
use baton_protocol::{ErrorCode, Uuid};
use tokio::sync::Mutex as AsyncMutex;

/// A broker of the cluster, as metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BrokerMetadata {
    /// The broker's node id.
    pub node_id: i32,
    /// Host name clients connect to.
    pub host: String,
    /// Port clients connect to.
    pub port: i32,
    /// The broker's rack, if configured.
    pub rack: Option<String>,
}

impl BrokerMetadata {
    /// `host:port`, ready to dial.
    pub fn addr(&self) -> String {
        if self.host.contains(':') && !self.host.starts_with('[') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// One partition of a topic, as metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartitionMetadata {
    /// The partition index.
    pub partition: i32,
    /// The leader's node id, `None` while no leader is elected.
    pub leader: Option<i32>,
    /// The leader epoch, -1 if the broker does not report it.
    pub leader_epoch: i32,
    /// All replicas, preferred leader first.
    pub replicas: Vec<i32>,
    /// The in-sync replicas.
    pub isr: Vec<i32>,
    /// Replicas that are offline.
    pub offline_replicas: Vec<i32>,
    /// The partition-level error the broker reported, if any (for example
    /// LEADER_NOT_AVAILABLE).
    pub error: Option<ErrorCode>,
}

/// One topic, as metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopicMetadata {
    /// The topic name.
    pub name: String,
    /// The topic id (zero if the broker does not report ids).
    pub topic_id: Uuid,
    /// Whether this is an internal topic.
    pub is_internal: bool,
    /// Partitions, sorted by index.
    pub partitions: Vec<PartitionMetadata>,
}

impl TopicMetadata {
    /// The partition with index `partition`.
    pub fn partition(&self, partition: i32) -> Option<&PartitionMetadata> {
        self.partitions
            .binary_search_by_key(&partition, |p| p.partition)
            .ok()
            .map(|i| &self.partitions[i])
    }
}

/// A snapshot of the cluster's metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClusterMetadata {
    /// The cluster id, if the broker reports one.
    pub cluster_id: Option<String>,
    /// The controller's node id, if known.
    pub controller_id: Option<i32>,
    /// Brokers by node id.
    pub brokers: BTreeMap<i32, BrokerMetadata>,
    /// Topics by name. After a partial refresh this holds the topics the client has
    /// asked about; after a full refresh, every topic.
    pub topics: BTreeMap<String, TopicMetadata>,
    /// Topics the broker refused to describe (TOPIC_AUTHORIZATION_FAILED) when
    /// they were last asked about.
    pub(crate) unauthorized_topics: BTreeSet<String>,
}

impl ClusterMetadata {
    /// The topic named `name`.
    pub fn topic(&self, name: &str) -> Option<&TopicMetadata> {
        self.topics.get(name)
    }

    /// The broker with node id `node_id`.
    pub fn broker(&self, node_id: i32) -> Option<&BrokerMetadata> {
        self.brokers.get(&node_id)
    }

    /// The topic whose id is `id`.
    pub fn topic_by_id(&self, id: Uuid) -> Option<&TopicMetadata> {
        if id == Uuid::ZERO {
            return None;
        }
        self.topics.values().find(|t| t.topic_id == id)
    }
}

/// Which topics a refresh asks about.
#[derive(Debug, Clone)]
pub(crate) enum Scope {
    /// Every topic; the result replaces the whole snapshot.
    All,
    /// The topics the client uses (plus these); results are merged in.
    Topics(Vec<String>),
}

/// A partition's leader as a response named it (KIP-951), used until metadata
/// catches up with its epoch.
#[derive(Debug, Clone)]
pub(crate) struct LeaderHint {
    /// The leader's node id.
    pub(crate) leader: i32,
    /// The leader epoch the response gave; the hint is newer than metadata while
    /// this is greater than the cached partition's epoch.
    pub(crate) leader_epoch: i32,
    /// The leader's address if the response carried its endpoint.
    pub(crate) addr: Option<String>,
}

/// The current snapshot, its generation, and whether it was invalidated.
#[derive(Debug, Clone)]
struct Current {
    meta: Arc<ClusterMetadata>,
    generation: u64,
    stale: bool,
}

/// The metadata cache: a snapshot, a generation and single-flight refresh.
#[derive(Debug)]
pub(crate) struct MetadataCache {
    current: RwLock<Current>,
    /// The generation of the current snapshot while it is not stale, else 0 (no
    /// snapshot has generation 0). Written under `current`'s write lock; read
    /// without a lock by [`MetadataCache::fresh_generation`].
    fresh: AtomicU64,
    /// Topics the client has looked up; partial refreshes ask about all of them.
    interesting: Mutex<BTreeSet<String>>,
    refresh_lock: AsyncMutex<()>,
    /// KIP-951 leader hints by partition, newer than the snapshot when recorded.
    hints: Mutex<HashMap<(Arc<str>, i32), LeaderHint>>,
}

impl MetadataCache {
    pub(crate) fn new() -> Self {
        MetadataCache {
            current: RwLock::new(Current {
                meta: Arc::new(ClusterMetadata::default()),
                generation: 0,
                stale: true,
            }),
            fresh: AtomicU64::new(0),
            interesting: Mutex::new(BTreeSet::new()),
            refresh_lock: AsyncMutex::new(()),
            hints: Mutex::new(HashMap::new()),
        }
    }

    /// The leader hint recorded for `topic`/`partition`, if any.
    pub(crate) fn leader_hint(&self, topic: &Arc<str>, partition: i32) -> Option<LeaderHint> {
        let hints = self.hints.lock().expect("hint lock poisoned");
        hints.get(&(topic.clone(), partition)).cloned()
    }

    /// Records (or replaces) the leader hint for `topic`/`partition`.
    pub(crate) fn set_leader_hint(&self, topic: Arc<str>, partition: i32, hint: LeaderHint) {
        let mut hints = self.hints.lock().expect("hint lock poisoned");
        hints.insert((topic, partition), hint);
    }

    /// Drops the leader hint for `topic`/`partition` (metadata caught up, or the
    /// hinted leader failed).
    pub(crate) fn forget_leader_hint(&self, topic: &Arc<str>, partition: i32) {
        let mut hints = self.hints.lock().expect("hint lock poisoned");
        hints.remove(&(topic.clone(), partition));
    }

    /// The current snapshot and its generation.
    pub(crate) fn snapshot(&self) -> (Arc<ClusterMetadata>, u64) {
        let c = self.current.read().expect("metadata lock poisoned");
        (c.meta.clone(), c.generation)
    }

    /// Whether the snapshot was invalidated (or never loaded).
    pub(crate) fn is_stale(&self) -> bool {
        self.current.read().expect("metadata lock poisoned").stale
    }

    /// The generation of the current snapshot if it is not stale, without taking a
    /// lock: a cheap check that a value derived from generation `g` is still
    /// current (`fresh_generation() == Some(g)`).
    pub(crate) fn fresh_generation(&self) -> Option<u64> {
        match self.fresh.load(Ordering::Acquire) {
            0 => None,
            g => Some(g),
        }
    }

    /// Marks the snapshot stale if it is still generation `generation`; a no-op if a
    /// newer snapshot was installed since.
    pub(crate) fn invalidate(&self, generation: u64) {
        let mut c = self.current.write().expect("metadata lock poisoned");
        if c.generation == generation {
            c.stale = true;
            self.fresh.store(0, Ordering::Release);
        }
    }

    /// Remembers `topic` as one the client uses.
    pub(crate) fn track(&self, topic: &str) {
        let mut t = self.interesting.lock().expect("metadata lock poisoned");
        if !t.contains(topic) {
            t.insert(topic.to_string());
        }
    }

    /// The lock that makes refreshes single-flight.
    pub(crate) fn refresh_lock(&self) -> &AsyncMutex<()> {
        &self.refresh_lock
    }

    /// The Metadata request for `scope`.
    pub(crate) fn request(&self, scope: &Scope) -> MetadataRequest {
        let topics = match scope {
            Scope::All => None,
            Scope::Topics(extra) => {
                let mut names = self
                    .interesting
                    .lock()
                    .expect("metadata lock poisoned")
                    .clone();
                names.extend(extra.iter().cloned());
                Some(
                    names
                        .into_iter()
                        .map(|name| MetadataRequestTopic {
                            topic_id: Uuid::ZERO,
                            name: Some(name),
                        })
                        .collect(),
                )
            }
        };
        MetadataRequest {
            topics,
            allow_auto_topic_creation: false,
            include_cluster_authorized_operations: false,
            include_topic_authorized_operations: false,
        }
    }

    /// Installs the result of a refresh and returns the new snapshot and generation.
    pub(crate) fn install(
        &self,
        scope: &Scope,
        resp: MetadataResponse,
    ) -> (Arc<ClusterMetadata>, u64) {
        let mut c = self.current.write().expect("metadata lock poisoned");
        let mut meta = match scope {
            Scope::All => ClusterMetadata::default(),
            Scope::Topics(_) => ClusterMetadata {
                topics: c.meta.topics.clone(),
                unauthorized_topics: c.meta.unauthorized_topics.clone(),
                ..ClusterMetadata::default()
            },
        };
        meta.cluster_id = resp.cluster_id;
        meta.controller_id = (resp.controller_id >= 0).then_some(resp.controller_id);
        meta.brokers = resp
            .brokers
            .into_iter()
            .map(|b| {
                (
                    b.node_id,
                    BrokerMetadata {
                        node_id: b.node_id,
                        host: b.host,
                        port: b.port,
                        rack: b.rack,
                    },
                )
            })
            .collect();
        for t in resp.topics {
            let Some(name) = t.name else { continue };
            let code = ErrorCode::from_code(t.error_code);
            if code == ErrorCode::TopicAuthorizationFailed {
                meta.topics.remove(&name);
                meta.unauthorized_topics.insert(name);
                continue;
            }
            meta.unauthorized_topics.remove(&name);
            if !code.is_ok() {
                // An unknown topic is gone; other errors (LEADER_NOT_AVAILABLE while a
                // topic is being created) leave it without usable partitions.
                meta.topics.remove(&name);
                if code != ErrorCode::UnknownTopicOrPartition
                    && code != ErrorCode::InvalidTopicException
                {
                    meta.topics.insert(
                        name.clone(),
                        TopicMetadata {
                            name,
                            topic_id: t.topic_id,
                            is_internal: t.is_internal,
                            partitions: Vec::new(),
                        },
                    );
                }
                continue;
            }
            let mut partitions: Vec<PartitionMetadata> = t
                .partitions
                .into_iter()
                .map(|p| {
                    let error = ErrorCode::from_code(p.error_code);
                    PartitionMetadata {
                        partition: p.partition_index,
                        leader: (p.leader_id >= 0).then_some(p.leader_id),
                        leader_epoch: p.leader_epoch,
                        replicas: p.replica_nodes,
                        isr: p.isr_nodes,
                        offline_replicas: p.offline_replicas,
                        error: (!error.is_ok()).then_some(error),
                    }
                })
                .collect();
            partitions.sort_by_key(|p| p.partition);
            partitions.dedup_by_key(|p| p.partition);
            if let Some(cached) = c.meta.topics.get(&name) {
                keep_newer_epochs(cached, t.topic_id, &mut partitions);
            }
            meta.topics.insert(
                name.clone(),
                TopicMetadata {
                    name,
                    topic_id: t.topic_id,
                    is_internal: t.is_internal,
                    partitions,
                },
            );
        }
        log_leader_changes(&c.meta, &meta);
        c.meta = Arc::new(meta);
        c.generation += 1;
        c.stale = false;
        self.fresh.store(c.generation, Ordering::Release);
        (c.meta.clone(), c.generation)
    }
}

/// Keeps the cached metadata of each partition whose cached leader epoch is newer
/// than the one just received (KIP-320): a broker whose own metadata lags (one
/// just restarted, or cut off from the controller) must not move the client back
/// to a leader that was already replaced. A topic recreated under the same name
/// (another topic id) takes the new metadata whole.
fn keep_newer_epochs(cached: &TopicMetadata, topic_id: Uuid, partitions: &mut [PartitionMetadata]) {
    if cached.topic_id != topic_id && cached.topic_id != Uuid::ZERO && topic_id != Uuid::ZERO {
        return;
    }
    for p in partitions.iter_mut() {
        if let Some(old) = cached.partition(p.partition) {
            if p.leader_epoch >= 0 && old.leader_epoch > p.leader_epoch {
                *p = old.clone();
            }
        }
    }
}

/// Logs, at INFO, each partition whose leader differs between two snapshots.
fn log_leader_changes(old: &ClusterMetadata, new: &ClusterMetadata) {
    if !tracing::enabled!(tracing::Level::INFO) {
        return;
    }
    for (name, t) in &new.topics {
        let Some(before) = old.topics.get(name) else {
            continue;
        };
        for p in &t.partitions {
            match before.partition(p.partition) {
                Some(b) if b.leader != p.leader => {
                    tracing::info!(topic = %name, partition = p.partition, from = ?b.leader, to = ?p.leader, epoch = p.leader_epoch, "partition leader changed");
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_protocol::messages::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };

    fn response(leader: i32) -> MetadataResponse {
        MetadataResponse {
            brokers: vec![MetadataResponseBroker {
                node_id: 1,
                host: "127.0.0.1".into(),
                port: 9092,
                rack: None,
            }],
            controller_id: 1,
            topics: vec![MetadataResponseTopic {
                name: Some("t".into()),
                partitions: vec![MetadataResponsePartition {
                    partition_index: 0,
                    leader_id: leader,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn stale_invalidation_is_a_no_op() {
        let cache = MetadataCache::new();
        let scope = Scope::Topics(vec!["t".into()]);
        let (_, g1) = cache.install(&scope, response(1));
        let (_, g2) = cache.install(&scope, response(1));
        assert!(g2 > g1);
        cache.invalidate(g1);
        assert!(
            !cache.is_stale(),
            "an old generation must not invalidate a newer snapshot"
        );
        assert_eq!(cache.fresh_generation(), Some(g2));
        cache.invalidate(g2);
        assert!(cache.is_stale());
        assert_eq!(cache.fresh_generation(), None);
    }

    #[test]
    fn partial_refresh_merges_and_unknown_topics_are_dropped() {
        let cache = MetadataCache::new();
        let scope = Scope::Topics(vec![]);
        cache.install(&scope, response(-1));
        let (meta, _) = cache.snapshot();
        assert_eq!(meta.topic("t").unwrap().partition(0).unwrap().leader, None);
        let mut gone = response(1);
        gone.topics[0].error_code = ErrorCode::UnknownTopicOrPartition.code();
        cache.install(&scope, gone);
        assert!(cache.snapshot().0.topic("t").is_none());
    }

    #[test]
    fn an_older_leader_epoch_does_not_replace_a_newer_one() {
        let at = |leader, epoch, id| {
            let mut r = response(leader);
            r.topics[0].topic_id = id;
            r.topics[0].partitions[0].leader_epoch = epoch;
            r
        };
        let leader = |cache: &MetadataCache| {
            let p = cache
                .snapshot()
                .0
                .topic("t")
                .unwrap()
                .partition(0)
                .cloned()
                .unwrap();
            (p.leader, p.leader_epoch)
        };
        let id = Uuid::from_u64_pair(0, 7);
        for scope in [Scope::All, Scope::Topics(vec!["t".into()])] {
            let cache = MetadataCache::new();
            cache.install(&scope, at(1, 5, id));
            cache.install(&scope, at(2, 3, id));
            assert_eq!(
                leader(&cache),
                (Some(1), 5),
                "a lagging broker's answer is ignored"
            );
            cache.install(&scope, at(2, 6, id));
            assert_eq!(leader(&cache), (Some(2), 6), "a newer epoch replaces");
            cache.install(&scope, at(3, 0, Uuid::from_u64_pair(0, 8)));
            assert_eq!(
                leader(&cache),
                (Some(3), 0),
                "a recreated topic starts over"
            );
        }
    }

    #[test]
    fn leader_hints_are_kept_per_partition_until_forgotten() {
        let cache = MetadataCache::new();
        let t: Arc<str> = Arc::from("t");
        assert!(cache.leader_hint(&t, 0).is_none());
        let hint = |leader, leader_epoch| LeaderHint {
            leader,
            leader_epoch,
            addr: None,
        };
        cache.set_leader_hint(t.clone(), 0, hint(2, 5));
        cache.set_leader_hint(t.clone(), 1, hint(3, 7));
        cache.set_leader_hint(t.clone(), 0, hint(4, 6));
        let h = cache.leader_hint(&t, 0).expect("hint for partition 0");
        assert_eq!(
            (h.leader, h.leader_epoch),
            (4, 6),
            "the newer hint replaces"
        );
        cache.forget_leader_hint(&t, 0);
        assert!(cache.leader_hint(&t, 0).is_none());
        assert_eq!(cache.leader_hint(&t, 1).map(|h| h.leader), Some(3));
    }
}
