//! [`Client`]: the broker pool and the metadata cache of one cluster, shared by
//! producers, consumers and the admin API built on it.

use std::fmt;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::task::AbortHandle;

use crate::connection::{Connection, ConnectionConfig, ConnectionError};
use crate::metadata::{BrokerMetadata, ClusterMetadata, LeaderHint, MetadataCache, Scope};
use crate::pool::{BrokerPool, PoolKey};
use crate::sasl::SaslCredentials;
#[cfg(feature = "tls")]
use crate::tls::TlsConfig;
use baton_protocol::security::SecurityProtocol;
use baton_protocol::ErrorCode;

/// Errors of the cluster layer (broker pool and metadata), wrapping the connection
/// layer's [`ConnectionError`].
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// A request on one connection failed.
    #[error(transparent)]
    Connection(#[from] ConnectionError),
    /// No bootstrap server or known broker answered a metadata request.
    #[error("no broker answered (tried {tried:?}); last error: {last}")]
    NoBrokerAvailable {
        /// Addresses tried, in order.
        tried: Vec<String>,
        /// The error of the last attempt.
        #[source]
        last: Box<ConnectionError>,
    },
    /// The client was built without bootstrap servers.
    #[error("no bootstrap servers given")]
    NoBootstrapServers,
    /// The topic does not exist (after a metadata refresh).
    #[error("unknown topic {topic}")]
    UnknownTopic {
        /// The topic.
        topic: String,
    },
    /// The broker refused to describe the topic to this client's principal
    /// (TOPIC_AUTHORIZATION_FAILED: no Describe ACL). Not retriable.
    #[error("not authorized to access topic {topic}")]
    TopicAuthorizationFailed {
        /// The topic.
        topic: String,
    },
    /// The topic exists but has no such partition.
    #[error("topic {topic} has no partition {partition}")]
    UnknownPartition {
        /// The topic.
        topic: String,
        /// The partition asked for.
        partition: i32,
    },
    /// The partition has no leader right now (an election is under way, or the
    /// leader's broker is not in the metadata).
    #[error("no leader available for {topic}/{partition}")]
    LeaderNotAvailable {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
    },
    /// Metadata names no controller.
    #[error("the cluster reports no controller")]
    NoController,
    /// The node id is not among the brokers in the metadata.
    #[error("unknown broker {node_id}")]
    UnknownBroker {
        /// The node id.
        node_id: i32,
    },
    /// A broker answered with an error code.
    #[error("broker error {code} for {context}")]
    Broker {
        /// The error code.
        code: ErrorCode,
        /// What the request was about (a topic, a partition).
        context: String,
    },
}

impl ClientError {
    /// Whether the operation might succeed if retried after a metadata refresh.
    pub fn is_retriable(&self) -> bool {
        match self {
            ClientError::Connection(e) => e.is_retriable(),
            ClientError::NoBrokerAvailable { .. } => true,
            ClientError::LeaderNotAvailable { .. } => true,
            ClientError::UnknownBroker { .. } => true,
            ClientError::NoController => true,
            ClientError::Broker { code, .. } => code.is_retriable(),
            _ => false,
        }
    }
}

/// Builds a [`Client`]; see [`Client::builder`].
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    bootstrap: Vec<String>,
    connection: ConnectionConfig,
    metadata_refresh_interval: Duration,
    metadata_fast_refresh_interval: Duration,
}

impl ClientBuilder {
    /// The client id sent in every request header (default `"baton"`).
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.connection.client_id = Some(id.into());
        self
    }

    /// How long a single request may wait for its response (default 30 s).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.connection.request_timeout = timeout;
        self
    }

    /// How long opening a connection and negotiating versions may take (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connection.connect_timeout = timeout;
        self
    }

    /// The environment connections are opened through and whose wall clock
    /// stamps produced records (default: the process's, tokio's TCP and the
    /// system clock). A deterministic simulation passes its own, one per
    /// simulated host, so each host's clock may be skewed; see [`baton_env`].
    pub fn env(mut self, env: baton_env::Env) -> Self {
        self.connection.env = env;
        self
    }

    /// The largest frame accepted or sent (default 100 MiB).
    pub fn max_frame_size(mut self, bytes: usize) -> Self {
        self.connection.max_frame_size = bytes;
        self
    }

    /// How connections are secured (Kafka's `security.protocol`; default
    /// `PLAINTEXT`). The SASL protocols need [`sasl`](Self::sasl) credentials.
    pub fn security_protocol(mut self, protocol: SecurityProtocol) -> Self {
        self.connection.security_protocol = protocol;
        self
    }

    /// The SASL mechanism and credentials every connection authenticates with
    /// under `SASL_PLAINTEXT` or `SASL_SSL`.
    pub fn sasl(mut self, credentials: SaslCredentials) -> Self {
        self.connection.sasl = Some(credentials);
        self
    }

    /// TLS settings for `SSL` and `SASL_SSL` (default: the operating system's
    /// roots, the broker's host name verified). Needs the `tls` feature.
    #[cfg(feature = "tls")]
    pub fn tls(mut self, tls: TlsConfig) -> Self {
        self.connection.tls = Some(tls);
        self
    }

    /// How often metadata is refreshed in the background even without errors
    /// (default 5 minutes, Kafka's `metadata.max.age.ms`).
    pub fn metadata_refresh_interval(mut self, interval: Duration) -> Self {
        self.metadata_refresh_interval = interval;
        self
    }

    /// How often metadata is refreshed while a partition's leader cannot be
    /// reached (default 50 ms, at least 1 ms; librdkafka's
    /// `topic.metadata.refresh.fast.interval.ms`).
    ///
    /// A producer whose batches failed against a partition's leader (connection
    /// refused or lost, request timed out, `NOT_LEADER_OR_FOLLOWER`,
    /// `LEADER_NOT_AVAILABLE`, ...) polls metadata at this interval while the
    /// batches wait out their retry backoff, and retries them as soon as a leader
    /// with a newer leader epoch is named, so a crashed leader costs about the
    /// cluster's failure detection time rather than that plus a backoff. The
    /// polls go through the client's single metadata refresh (one request in
    /// flight per client) and stop when no batch waits for a leader.
    pub fn metadata_fast_refresh_interval(mut self, interval: Duration) -> Self {
        self.metadata_fast_refresh_interval = interval.max(Duration::from_millis(1));
        self
    }

    /// Connects to the first bootstrap server that answers, loads the cluster's
    /// metadata and starts the periodic refresh.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future closes any connection it opened.
    pub async fn build(self) -> Result<Client, ClientError> {
        if self.bootstrap.is_empty() {
            return Err(ClientError::NoBootstrapServers);
        }
        let interval = self.metadata_refresh_interval;
        let inner = Arc::new_cyclic(|weak: &Weak<ClientInner>| {
            let weak = weak.clone();
            let refresher = tokio::spawn(async move {
                loop {
                    tokio::time::sleep(interval).await;
                    let Some(inner) = weak.upgrade() else { return };
                    if let Err(e) = (Client { inner })
                        .refresh(Scope::Topics(Vec::new()), None)
                        .await
                    {
                        tracing::debug!(error = %e, "periodic metadata refresh failed");
                    }
                }
            })
            .abort_handle();
            ClientInner {
                fast_refresh_interval: self.metadata_fast_refresh_interval,
                bootstrap: self.bootstrap,
                pool: BrokerPool::new(self.connection),
                metadata: MetadataCache::new(),
                refresher,
            }
        });
        let client = Client { inner };
        client.refresh(Scope::Topics(Vec::new()), None).await?;
        Ok(client)
    }
}

/// A handle on one Kafka cluster: connections to its brokers and a metadata cache.
///
/// Cheap to clone (an [`Arc`] inside); clones share connections and metadata.
/// Background work (the periodic metadata refresh) stops when the last clone is
/// dropped.
#[derive(Clone)]
pub struct Client {
    inner: Arc<ClientInner>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("bootstrap", &self.inner.bootstrap)
            .field("pool", &self.inner.pool)
            .finish_non_exhaustive()
    }
}

struct ClientInner {
    /// See [`ClientBuilder::metadata_fast_refresh_interval`].
    fast_refresh_interval: Duration,
    bootstrap: Vec<String>,
    pool: BrokerPool,
    metadata: MetadataCache,
    refresher: AbortHandle,
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        self.refresher.abort();
    }
}

impl Client {
    /// Starts building a client that bootstraps from `servers` (`host:port` each),
    /// trying them in order until one answers.
    pub fn builder(servers: impl IntoIterator<Item = impl Into<String>>) -> ClientBuilder {
        ClientBuilder {
            bootstrap: servers.into_iter().map(Into::into).collect(),
            connection: ConnectionConfig::default(),
            metadata_refresh_interval: Duration::from_secs(300),
            metadata_fast_refresh_interval: Duration::from_millis(50),
        }
    }

    /// The current metadata snapshot, without contacting any broker.
    pub fn metadata(&self) -> Arc<ClusterMetadata> {
        self.inner.metadata.snapshot().0
    }

    /// Fetches fresh metadata for every topic of the cluster and installs it.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the cached snapshot is either replaced whole or left as it was.
    pub async fn refresh_metadata(&self) -> Result<Arc<ClusterMetadata>, ClientError> {
        self.refresh(Scope::All, None).await.map(|(m, _)| m)
    }

    /// A connection to the broker with node id `node_id`, opened if needed.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a connection being opened is dropped with the future.
    pub async fn broker_connection(&self, node_id: i32) -> Result<Connection, ClientError> {
        self.node_connection(node_id).await
    }

    /// Now, in ms since the Unix epoch, on this client's wall clock (its
    /// [`ClientBuilder::env`]'s): what records are stamped with.
    pub(crate) fn now_ms(&self) -> i64 {
        self.inner.pool.config().env.clock.now_ms()
    }

    /// The configured per-request timeout.
    pub fn request_timeout(&self) -> Duration {
        self.inner.pool.config().request_timeout
    }
}

/// Narrow access for the layers above: leaders, connections, metadata generations.
impl Client {
    /// Refreshes metadata for `scope`. With `seen = Some(g)`, skips the round trip if
    /// a refresh newer than generation `g` already happened (single-flight).
    pub(crate) async fn refresh(
        &self,
        scope: Scope,
        seen: Option<u64>,
    ) -> Result<(Arc<ClusterMetadata>, u64), ClientError> {
        let _guard = self.inner.metadata.refresh_lock().lock().await;
        if let Some(seen) = seen {
            let (meta, generation) = self.inner.metadata.snapshot();
            if generation > seen && !self.inner.metadata.is_stale() {
                return Ok((meta, generation));
            }
        }
        let req = self.inner.metadata.request(&scope);
        let (meta, _) = self.inner.metadata.snapshot();
        let mut tried = Vec::new();
        let mut last = None;
        let known: Vec<BrokerMetadata> = meta.brokers.values().cloned().collect();
        let mut candidates: Vec<(PoolKey, String)> = known
            .into_iter()
            .map(|b| (PoolKey::Node(b.node_id), b.addr()))
            .collect();
        // Prefer brokers we already hold a healthy connection to.
        candidates.sort_by_key(|(k, _)| self.inner.pool.existing(k).is_none());
        candidates.extend(
            self.inner
                .bootstrap
                .iter()
                .map(|a| (PoolKey::Bootstrap(a.clone()), a.clone())),
        );
        for (key, addr) in candidates {
            tried.push(addr.clone());
            let result = async {
                let conn = self.inner.pool.get(key, &addr).await?;
                conn.send(&req).await
            }
            .await;
            match result {
                Ok(resp) => {
                    let installed = self.inner.metadata.install(&scope, resp);
                    let live: Vec<i32> = installed.0.brokers.keys().copied().collect();
                    self.inner.pool.retain_nodes(&live);
                    return Ok(installed);
                }
                Err(
                    e @ (ConnectionError::Authentication { .. }
                    | ConnectionError::Tls { .. }
                    | ConnectionError::SecurityConfig(_)),
                ) => {
                    // The same settings fail on every broker: say so at once.
                    return Err(e.into());
                }
                Err(e) => {
                    tracing::debug!(%addr, error = %e, "metadata request failed");
                    last = Some(e);
                }
            }
        }
        Err(ClientError::NoBrokerAvailable {
            tried,
            last: Box::new(last.expect("at least one bootstrap server")),
        })
    }

    /// Metadata that knows `topic`, refreshing once if the cached snapshot does not
    /// or is stale.
    pub(crate) async fn topic_metadata(
        &self,
        topic: &str,
    ) -> Result<(Arc<ClusterMetadata>, u64), ClientError> {
        self.inner.metadata.track(topic);
        let (meta, generation) = self.inner.metadata.snapshot();
        if !self.inner.metadata.is_stale() && meta.topic(topic).is_some() {
            return Ok((meta, generation));
        }
        let (meta, generation) = self
            .refresh(Scope::Topics(vec![topic.to_string()]), Some(generation))
            .await?;
        if meta.topic(topic).is_none() {
            // The single-flight shortcut may have returned a snapshot from a refresh
            // that did not ask about this topic.
            let (meta, generation) = self
                .refresh(Scope::Topics(vec![topic.to_string()]), None)
                .await?;
            if meta.unauthorized_topics.contains(topic) {
                return Err(ClientError::TopicAuthorizationFailed {
                    topic: topic.to_string(),
                });
            }
            if meta.topic(topic).is_none() {
                return Err(ClientError::UnknownTopic {
                    topic: topic.to_string(),
                });
            }
            return Ok((meta, generation));
        }
        Ok((meta, generation))
    }

    /// The number of partitions of `topic`.
    pub(crate) async fn partition_count(&self, topic: &str) -> Result<i32, ClientError> {
        Ok(self.partition_count_at(topic).await?.0)
    }

    /// The number of partitions of `topic` and the metadata generation it came
    /// from: the count stays valid while
    /// [`MetadataCache::fresh_generation`] returns that generation.
    pub(crate) async fn partition_count_at(&self, topic: &str) -> Result<(i32, u64), ClientError> {
        let (meta, generation) = self.topic_metadata(topic).await?;
        let t = meta.topic(topic).expect("topic_metadata checked");
        if t.partitions.is_empty() {
            return Err(ClientError::LeaderNotAvailable {
                topic: topic.to_string(),
                partition: -1,
            });
        }
        Ok((t.partitions.len() as i32, generation))
    }

    /// The leader of `topic`/`partition` and the metadata generation it came from
    /// (pass that to [`MetadataCache::invalidate`] when the leader turns out wrong).
    pub(crate) async fn leader(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<(i32, u64), ClientError> {
        let (meta, generation) = self.topic_metadata(topic).await?;
        let t = meta.topic(topic).expect("topic_metadata checked");
        let p = match t.partition(partition) {
            Some(p) => p,
            None if t.partitions.is_empty() => {
                return Err(ClientError::LeaderNotAvailable {
                    topic: topic.to_string(),
                    partition,
                })
            }
            None => {
                return Err(ClientError::UnknownPartition {
                    topic: topic.to_string(),
                    partition,
                })
            }
        };
        match p.leader {
            Some(leader) if meta.broker(leader).is_some() => Ok((leader, generation)),
            _ => {
                self.inner.metadata.invalidate(generation);
                Err(ClientError::LeaderNotAvailable {
                    topic: topic.to_string(),
                    partition,
                })
            }
        }
    }

    /// A connection to broker `node_id`, opened if needed.
    pub(crate) async fn node_connection(&self, node_id: i32) -> Result<Connection, ClientError> {
        self.node_connection_in(&self.inner.pool, node_id).await
    }

    /// A connection to broker `node_id` from `pool` (the shared pool, or a private
    /// one such as a consumer's fetch connections), opened if needed.
    pub(crate) async fn node_connection_in(
        &self,
        pool: &BrokerPool,
        node_id: i32,
    ) -> Result<Connection, ClientError> {
        let (meta, generation) = self.inner.metadata.snapshot();
        let broker = match meta.broker(node_id) {
            Some(b) => b.clone(),
            None => {
                let (meta, _) = self
                    .refresh(Scope::Topics(Vec::new()), Some(generation))
                    .await?;
                meta.broker(node_id)
                    .cloned()
                    .ok_or(ClientError::UnknownBroker { node_id })?
            }
        };
        Ok(pool.get(PoolKey::Node(node_id), &broker.addr()).await?)
    }

    /// The settings every connection of this client is opened with (for private
    /// pools and connections of the layers above).
    /// Counts this client's connections (its pool's and its consumers' fetch
    /// pools').
    pub(crate) fn connection_meter(&self) -> &Arc<crate::metrics::ConnectionMeter> {
        self.inner.pool.meter()
    }

    pub(crate) fn connection_config(&self) -> &ConnectionConfig {
        self.inner.pool.config()
    }

    /// Marks metadata of `generation` stale (a leader or broker it named turned out
    /// wrong); a no-op if a newer generation is installed.
    pub(crate) fn invalidate_metadata(&self, generation: u64) {
        self.inner.metadata.invalidate(generation);
    }

    /// The generation of the installed metadata while it is fresh; see
    /// [`MetadataCache::fresh_generation`].
    pub(crate) fn fresh_metadata_generation(&self) -> Option<u64> {
        self.inner.metadata.fresh_generation()
    }

    /// The installed metadata and its generation, without contacting any broker.
    pub(crate) fn metadata_snapshot(&self) -> (Arc<ClusterMetadata>, u64) {
        self.inner.metadata.snapshot()
    }

    /// How often metadata is polled while a partition's leader is unreachable.
    pub(crate) fn fast_refresh_interval(&self) -> Duration {
        self.inner.fast_refresh_interval
    }

    /// Whether the installed metadata was invalidated and awaits a refresh.
    pub(crate) fn metadata_is_stale(&self) -> bool {
        self.inner.metadata.is_stale()
    }

    /// The shared pool's healthy connection to broker `node_id`, if it has one.
    pub(crate) fn existing_node_connection(&self, node_id: i32) -> Option<Connection> {
        self.inner.pool.existing(&PoolKey::Node(node_id))
    }

    /// A connection to broker `node_id` at `addr` (an address metadata does not
    /// know yet, such as a KIP-951 hint's), opened in the shared pool if needed.
    pub(crate) async fn node_connection_at(
        &self,
        node_id: i32,
        addr: &str,
    ) -> Result<Connection, ClientError> {
        Ok(self.inner.pool.get(PoolKey::Node(node_id), addr).await?)
    }

    /// The KIP-951 leader hint recorded for `topic`/`partition`, if any.
    pub(crate) fn leader_hint(&self, topic: &Arc<str>, partition: i32) -> Option<LeaderHint> {
        self.inner.metadata.leader_hint(topic, partition)
    }

    /// Records a KIP-951 leader hint for `topic`/`partition`.
    pub(crate) fn set_leader_hint(&self, topic: Arc<str>, partition: i32, hint: LeaderHint) {
        self.inner.metadata.set_leader_hint(topic, partition, hint);
    }

    /// Drops the leader hint for `topic`/`partition`.
    pub(crate) fn forget_leader_hint(&self, topic: &Arc<str>, partition: i32) {
        self.inner.metadata.forget_leader_hint(topic, partition);
    }

    /// A connection to the controller (for admin requests).
    pub(crate) async fn controller_connection(&self) -> Result<Connection, ClientError> {
        let (meta, generation) = self.inner.metadata.snapshot();
        let id = match meta.controller_id {
            Some(id) => id,
            None => self
                .refresh(Scope::Topics(Vec::new()), Some(generation))
                .await?
                .0
                .controller_id
                .ok_or(ClientError::NoController)?,
        };
        self.node_connection(id).await
    }
}
