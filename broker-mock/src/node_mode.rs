//! What a node is: standalone (a single-node broker that leads every partition) or
//! a replica in a cluster. [`NodeMode`] is what handlers, the group coordinator and
//! the server ask; the cluster's drivers (`cluster/`) fill in the [`ClusterLink`] a
//! replica shares between its handlers and its cluster tasks.

use std::net::SocketAddr;
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, RwLock, RwLockReadGuard};
use std::time::Duration;
use tokio::time::Instant;

use tokio::sync::{mpsc, watch};

use crate::config::BrokerConfig;
use crate::controller::{ControllerState, TopicInfo};
use crate::corruption::CorruptionLog;
use crate::partition::LeaderReport;
use crate::replication::{LeaderConfig, TruncationMode};

/// Whether a node stands alone or is a replica in a cluster.
#[derive(Debug, Clone, Default)]
pub(crate) enum NodeMode {
    /// A single-node broker: it leads every partition.
    #[default]
    Standalone,
    /// A node of a cluster, tied to its controller and peers through the link.
    Replica(Arc<ClusterLink>),
}

impl NodeMode {
    /// The cluster link of a replica; `None` when standalone.
    pub fn replica(&self) -> Option<&Arc<ClusterLink>> {
        match self {
            NodeMode::Standalone => None,
            NodeMode::Replica(link) => Some(link),
        }
    }

    /// Whether this node is a replica in a cluster.
    pub fn is_replica(&self) -> bool {
        matches!(self, NodeMode::Replica(_))
    }
}

/// Settings of a cluster node.
#[derive(Debug, Clone)]
pub struct NodeOptions {
    /// The broker settings: listener, data directory, segment sizes. Its `node_id` is
    /// this node's id.
    pub broker: BrokerConfig,
    /// The controller's address.
    pub controller: SocketAddr,
    /// The cluster id reported to clients.
    pub cluster_id: String,
    /// Time between heartbeats.
    pub heartbeat_interval: Duration,
    /// `replica.lag.time.max.ms`.
    pub replica_lag_time_max_ms: u64,
    /// `min.insync.replicas` for topics that do not set it.
    pub default_min_insync_replicas: usize,
    /// The replica fetcher's `max_wait_ms`.
    pub replica_fetch_wait_ms: i32,
    /// How long a controlled shutdown may take before the node stops anyway.
    pub controlled_shutdown_timeout: Duration,
    /// How a returning follower finds where its log parted from the leader's.
    pub truncation_mode: TruncationMode,
    /// Most metadata log bytes asked for per fetch (the controller also caps it).
    pub metadata_fetch_max_bytes: i32,
    /// The background scrubber's rate in bytes per second over all local replicas;
    /// 0 turns it off.
    pub scrub_bytes_per_sec: u64,
    /// Where corruption events go (a cluster shares one list between its nodes).
    pub corruption_log: Arc<CorruptionLog>,
    /// How this node secures the connections it opens to other nodes and to the
    /// controller; `None` for plain TCP. Its listener security should also be
    /// `broker.security`, the first listener's, which the other nodes dial.
    pub inter_node: Option<Arc<crate::inter_node::InterNodeSecurity>>,
}

impl NodeOptions {
    /// Options for node `node_id` with controller `controller`, in memory, on
    /// `127.0.0.1:0`.
    pub fn new(node_id: i32, controller: SocketAddr) -> Self {
        NodeOptions {
            broker: BrokerConfig::in_memory().with_node_id(node_id),
            controller,
            cluster_id: "baton-cluster".to_owned(),
            heartbeat_interval: Duration::from_millis(200),
            replica_lag_time_max_ms: 10_000,
            default_min_insync_replicas: 1,
            replica_fetch_wait_ms: 500,
            controlled_shutdown_timeout: Duration::from_secs(60),
            truncation_mode: TruncationMode::FetchDivergingEpoch,
            metadata_fetch_max_bytes: 1 << 20,
            scrub_bytes_per_sec: 0,
            corruption_log: Arc::new(CorruptionLog::new()),
            inter_node: None,
        }
    }
}

/// What a node shares between its handlers and its cluster tasks.
#[derive(Debug)]
pub(crate) struct ClusterLink {
    pub node_id: i32,
    pub options: NodeOptions,
    /// This node's replay of the metadata log.
    pub image: RwLock<ControllerState>,
    /// The image's next offset, bumped after every change.
    pub image_tx: watch::Sender<i64>,
    /// The image offset the last reconcile applied to local roles.
    pub reconciled: watch::Sender<i64>,
    /// Leaders' reports for the controller.
    pub reports: mpsc::UnboundedSender<LeaderReport>,
    /// The broker epoch from registration, -1 before.
    pub broker_epoch: AtomicI64,
    /// Fault injection: while true, this node's replica fetchers send nothing.
    pub replication_paused: watch::Sender<bool>,
    pub clock: Instant,
}

impl ClusterLink {
    /// Milliseconds on this node's monotonic clock.
    pub fn now_ms(&self) -> u64 {
        self.clock.elapsed().as_millis() as u64
    }

    /// The metadata image.
    pub fn image(&self) -> RwLockReadGuard<'_, ControllerState> {
        self.image.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The leader settings for `topic`.
    pub fn leader_config(&self, topic: &TopicInfo) -> LeaderConfig {
        LeaderConfig {
            replica_lag_time_max_ms: self.options.replica_lag_time_max_ms,
            min_insync_replicas: topic
                .config("min.insync.replicas")
                .and_then(|v| v.parse().ok())
                .unwrap_or(self.options.default_min_insync_replicas)
                .max(1),
        }
    }

    /// A connection to `addr` (the controller or another node) secured as the
    /// cluster's inter-node security says.
    pub(crate) fn rpc(&self, addr: SocketAddr, client_id: impl Into<String>) -> crate::rpc::Rpc {
        crate::rpc::Rpc::new(addr, client_id, self.options.inter_node.clone())
    }

    /// A broker's address from the image.
    pub fn broker_addr(&self, id: i32) -> Option<SocketAddr> {
        let img = self.image();
        let b = img.broker(id)?;
        format!("{}:{}", b.host, b.port).parse().ok()
    }

    /// Whether the image shows this node leading `topic`/`partition` with a planned
    /// move away from it under way: the leader refuses writes, and the successor is
    /// not known to clients yet.
    pub(crate) fn handing_over(&self, topic: &str, partition: i32) -> bool {
        let img = self.image();
        let Some(t) = img.topic_by_name(topic) else {
            return false;
        };
        img.partition(t.topic_id, partition)
            .is_some_and(|p| p.leader == self.node_id)
            && img
                .leader_move(t.topic_id, partition)
                .is_some_and(|m| m.from == self.node_id)
    }

    /// Waits until none of `partitions` is [handing over](Self::handing_over) any
    /// more (the image names the successor, or the move was abandoned), or `max`
    /// passed. Woken by every image change, so it returns as soon as the controller's
    /// decision is replayed here.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only watches.
    pub(crate) async fn await_handover(&self, partitions: &[(String, i32)], max: Duration) {
        let deadline = tokio::time::Instant::now() + max;
        let mut rx = self.image_tx.subscribe();
        loop {
            rx.borrow_and_update();
            if !partitions.iter().any(|(t, p)| self.handing_over(t, *p)) {
                return;
            }
            tokio::select! {
                r = rx.changed() => if r.is_err() { return },
                _ = tokio::time::sleep_until(deadline) => return,
            }
        }
    }

    /// Waits until local roles reflect the published image (a reconcile runs right
    /// after every image change), or `max` passed. A produce that arrives between
    /// the two (typically at a new leader that clients were already told about)
    /// then finds the role the image gives instead of being refused.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only watches.
    pub(crate) async fn await_reconciled(&self, max: Duration) {
        let mut rx = self.reconciled.subscribe();
        let wait = async {
            while *rx.borrow_and_update() < *self.image_tx.borrow() {
                if rx.changed().await.is_err() {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(max, wait).await;
    }

    /// Watches the image offset local roles were last reconciled to.
    pub(crate) fn subscribe_reconciled(&self) -> watch::Receiver<i64> {
        self.reconciled.subscribe()
    }

    /// Whether a reconcile of the published image is still to run.
    pub(crate) fn reconcile_pending(&self) -> bool {
        *self.reconciled.borrow() < *self.image_tx.borrow()
    }
}
