//! A replicated cluster: a controller plus broker nodes, each with its own listener
//! and data directory, talking over real TCP.
//!
//! ```no_run
//! # async fn demo() -> Result<(), baton_broker::BrokerError> {
//! use baton_broker::cluster::Cluster;
//! let mut cluster = Cluster::builder().brokers(3).start().await?;
//! println!("bootstrap: {}", cluster.bootstrap());
//! cluster.node(2).kill();             // hard kill, nothing flushed
//! cluster.node(2).restart().await?;   // same data directory and port
//! cluster.node(3).stop().await;       // controlled shutdown
//! cluster.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! Map: [`controller_node`] (the controller's listener and persisted metadata log),
//! [`node`] (a broker node's session, metadata replay, role reconciliation, reports,
//! ticks), `fetcher` (one replica fetcher per followed partition), [`move_report`]
//! (the private planned-move message). Below them: the crate's `node_mode` (what a
//! node is, and the replica's link), `rpc` (request/response connections) and
//! `handlers::forward` (CreateTopics/DeleteTopics forwarded to the controller).

pub mod controller_node;
pub mod corrupt_inject;
pub mod corrupt_report;
mod fault_injection;
pub(crate) mod fetcher;
pub mod move_report;
pub mod node;
mod scrubber;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;

pub use crate::faults::FramingDamage;
pub use crate::rpc::RpcError;
pub use controller_node::{ControllerHandle, ControllerOptions, ControllerServer};
pub use node::{Node, NodeHandle, NodeOptions};

use crate::controller::{ControllerConfig, NO_LEADER};
use crate::error::BrokerError;
use crate::partition::Role;
pub use crate::replication::TruncationMode;

/// Builds a [`Cluster`].
#[derive(Debug, Clone)]
pub struct ClusterBuilder {
    brokers: usize,
    data_dir: Option<PathBuf>,
    controller: ControllerConfig,
    replica_lag_time_max: Duration,
    default_min_insync_replicas: usize,
    default_replication_factor: i16,
    default_num_partitions: i32,
    heartbeat_interval: Duration,
    segment_bytes: Option<u64>,
    listen_ip: std::net::IpAddr,
    base_port: u16,
    advertised_host: Option<String>,
    truncation_mode: TruncationMode,
    metadata_fetch_max_bytes: i32,
    network_proxies: bool,
    scrub_bytes_per_sec: u64,
    limits: crate::limits::BrokerLimits,
}

impl Default for ClusterBuilder {
    fn default() -> Self {
        ClusterBuilder {
            brokers: 3,
            data_dir: None,
            controller: ControllerConfig {
                session_timeout_ms: 6_000,
                move_timeout_ms: 30_000,
                auto_preferred_leader: true,
            },
            replica_lag_time_max: Duration::from_secs(10),
            default_min_insync_replicas: 1,
            default_replication_factor: 3,
            default_num_partitions: 1,
            heartbeat_interval: Duration::from_millis(200),
            segment_bytes: None,
            listen_ip: std::net::IpAddr::from([127, 0, 0, 1]),
            base_port: 0,
            advertised_host: None,
            truncation_mode: TruncationMode::FetchDivergingEpoch,
            metadata_fetch_max_bytes: 1 << 20,
            limits: crate::limits::BrokerLimits::default(),
            network_proxies: true,
            scrub_bytes_per_sec: 0,
        }
    }
}

impl ClusterBuilder {
    /// Number of broker nodes (ids `1..=n`); default 3.
    pub fn brokers(mut self, n: usize) -> Self {
        self.brokers = n.max(1);
        self
    }

    /// Keeps the controller's metadata log in `<dir>/controller` and node `i`'s data in
    /// `<dir>/node-<i>`. Without it everything is in memory (a restarted node then
    /// starts empty and re-replicates).
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.data_dir = Some(dir.into());
        self
    }

    /// Keeps everything in memory (the default).
    pub fn in_memory(mut self) -> Self {
        self.data_dir = None;
        self
    }

    /// `broker.session.timeout.ms`: a node without heartbeats for this long is fenced
    /// and its leaderships move. Default 6 s.
    pub fn session_timeout(mut self, t: Duration) -> Self {
        self.controller.session_timeout_ms = t.as_millis() as u64;
        self
    }

    /// How long a planned move may take before it is abandoned. Default 30 s.
    pub fn move_timeout(mut self, t: Duration) -> Self {
        self.controller.move_timeout_ms = t.as_millis() as u64;
        self
    }

    /// Whether preferred leaders are restored automatically. Default on.
    pub fn auto_preferred_leader(mut self, on: bool) -> Self {
        self.controller.auto_preferred_leader = on;
        self
    }

    /// `replica.lag.time.max.ms`. Default 10 s.
    pub fn replica_lag_time_max(mut self, t: Duration) -> Self {
        self.replica_lag_time_max = t;
        self
    }

    /// `min.insync.replicas` for topics that do not set it. Default 1.
    pub fn default_min_insync_replicas(mut self, n: usize) -> Self {
        self.default_min_insync_replicas = n.max(1);
        self
    }

    /// Replication factor for topics created with -1. Default 3 (capped at the live
    /// brokers).
    pub fn default_replication_factor(mut self, n: i16) -> Self {
        self.default_replication_factor = n.max(1);
        self
    }

    /// Partitions for topics created with -1. Default 1.
    pub fn default_num_partitions(mut self, n: i32) -> Self {
        self.default_num_partitions = n.max(1);
        self
    }

    /// Segment roll size of every node's logs.
    pub fn segment_bytes(mut self, n: u64) -> Self {
        self.segment_bytes = Some(n);
        self
    }

    /// The IP every listener binds (default 127.0.0.1).
    pub fn listen_ip(mut self, ip: std::net::IpAddr) -> Self {
        self.listen_ip = ip;
        self
    }

    /// Fixed ports: node `i` listens on `base + i - 1` and the controller on
    /// `base + n`. Default 0: every listener picks a free port.
    pub fn base_port(mut self, base: u16) -> Self {
        self.base_port = base;
        self
    }

    /// The host name nodes advertise to clients (default: the listen IP).
    pub fn advertised_host(mut self, host: impl Into<String>) -> Self {
        self.advertised_host = Some(host.into());
        self
    }

    /// How returning followers find their divergence point: the diverging epoch in
    /// Fetch responses (default) or OffsetForLeaderEpoch before the first fetch.
    pub fn truncation_mode(mut self, mode: TruncationMode) -> Self {
        self.truncation_mode = mode;
        self
    }

    /// Most metadata log bytes a node asks for per fetch (default 1 MiB); small values
    /// make nodes replay the log in many steps.
    pub fn metadata_fetch_max_bytes(mut self, n: i32) -> Self {
        self.metadata_fetch_max_bytes = n.max(1);
        self
    }

    /// Whether every listener sits behind a fault proxy (default on; see
    /// [`crate::faults`]). Without proxies the network faults do nothing.
    pub fn network_proxies(mut self, on: bool) -> Self {
        self.network_proxies = on;
        self
    }

    /// Runs every node's background scrubber at `bytes_per_sec` (0, the default, turns
    /// it off): stored batches are re-read and checked even when nobody fetches them.
    pub fn scrub_rate(mut self, bytes_per_sec: u64) -> Self {
        self.scrub_bytes_per_sec = bytes_per_sec;
        self
    }

    /// Resource limits of the controller (partitions, topics) and of every node
    /// (groups, producers, connections); see [`BrokerLimits`](crate::BrokerLimits).
    pub fn limits(mut self, limits: crate::limits::BrokerLimits) -> Self {
        self.limits = limits;
        self
    }

    fn port(&self, offset: usize) -> u16 {
        if self.base_port == 0 {
            0
        } else {
            self.base_port.saturating_add(offset as u16)
        }
    }

    /// Starts the controller and every node, and waits until all nodes are
    /// registered and unfenced.
    ///
    /// # Cancel safety
    ///
    /// Cancelling drops what was started so far (killing it).
    pub async fn start(self) -> Result<Cluster, BrokerError> {
        let proxied = self.network_proxies;
        let private = |port: u16| if proxied { 0 } else { port };
        let mut faults = crate::faults::ClusterFaults::default();
        let controller_opts = ControllerOptions {
            listen: SocketAddr::new(self.listen_ip, private(self.port(self.brokers))),
            data_dir: self.data_dir.as_ref().map(|d| d.join("controller")),
            config: self.controller,
            default_num_partitions: self.default_num_partitions,
            default_replication_factor: self.default_replication_factor,
            limits: self.limits.clone(),
        };
        let controller = ControllerServer::start(controller_opts.clone()).await?;
        let caddr = controller.local_addr();
        let mut dial_controller = caddr;
        if proxied {
            let listen = SocketAddr::new(self.listen_ip, self.port(self.brokers));
            let p = crate::faults::proxy::Proxy::start(listen, caddr).await?;
            dial_controller = p.addr;
            faults.controller = Some(p);
        }
        let mut nodes = Vec::new();
        let corruption_log = std::sync::Arc::new(crate::corruption::CorruptionLog::new());
        for id in 1..=self.brokers as i32 {
            let mut opts = NodeOptions::new(id, dial_controller);
            opts.heartbeat_interval = self.heartbeat_interval;
            opts.replica_lag_time_max_ms = self.replica_lag_time_max.as_millis() as u64;
            opts.default_min_insync_replicas = self.default_min_insync_replicas;
            opts.broker.data_dir = self.data_dir.as_ref().map(|d| d.join(format!("node-{id}")));
            opts.broker.default_num_partitions = self.default_num_partitions;
            opts.broker.limits = self.limits.clone();
            opts.broker.listen =
                SocketAddr::new(self.listen_ip, private(self.port(id as usize - 1)));
            let mut proxy = None;
            if proxied {
                let listen = SocketAddr::new(self.listen_ip, self.port(id as usize - 1));
                let p = crate::faults::proxy::Proxy::start(listen, opts.broker.listen).await?;
                opts.broker.advertised_port = Some(p.addr.port());
                proxy = Some(p);
            }
            opts.broker.advertised_host = self.advertised_host.clone();
            opts.truncation_mode = self.truncation_mode;
            opts.metadata_fetch_max_bytes = self.metadata_fetch_max_bytes;
            opts.scrub_bytes_per_sec = self.scrub_bytes_per_sec;
            opts.corruption_log = corruption_log.clone();
            if let Some(n) = self.segment_bytes {
                opts.broker.segment_bytes = n;
            }
            let handle = Node::start(opts.clone()).await?;
            opts.broker.listen = handle.local_addr();
            if let Some(p) = proxy {
                p.shared.set_target(handle.local_addr());
                faults.nodes.insert(id, p);
            }
            nodes.push(NodeSlot {
                id,
                options: opts,
                handle: Some(handle),
            });
        }
        let mut cluster = Cluster {
            controller: Some(controller),
            controller_options: Box::new(ControllerOptions {
                listen: caddr,
                ..controller_opts
            }),
            nodes,
            started: std::time::Instant::now(),
            timeline: Vec::new(),
            faults,
        };
        cluster.record(format!("cluster of {} nodes started", cluster.nodes.len()));
        cluster
            .wait_for(Duration::from_secs(60), |c| {
                c.unfenced_brokers().len() == c.nodes.len()
            })
            .await
            .map_err(|_| BrokerError::Config("nodes did not register in time".into()))?;
        Ok(cluster)
    }
}

#[derive(Debug)]
struct NodeSlot {
    id: i32,
    options: NodeOptions,
    handle: Option<NodeHandle>,
}

/// An in-process cluster: a controller and broker nodes `1..=n`.
///
/// Dropping it kills everything (nothing flushed); [`Cluster::shutdown`] stops nodes
/// and flushes.
#[derive(Debug)]
pub struct Cluster {
    controller: Option<ControllerHandle>,
    /// Boxed to keep `Cluster` small (it is often held in an enum beside other
    /// handles).
    controller_options: Box<ControllerOptions>,
    nodes: Vec<NodeSlot>,
    started: std::time::Instant,
    timeline: Vec<TimelineEvent>,
    /// The fault proxies (see [`crate::faults`]).
    pub(crate) faults: crate::faults::ClusterFaults,
}

/// One fault or lifecycle step applied to a [`Cluster`], for [`Cluster::timeline`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineEvent {
    /// Time since the cluster started.
    pub at: Duration,
    /// What happened, e.g. `"node 2 killed"`.
    pub what: String,
}

impl std::fmt::Display for TimelineEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:>9.3}s  {}", self.at.as_secs_f64(), self.what)
    }
}

/// One replica's view of a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaView {
    /// The node.
    pub node: i32,
    /// Whether the node is running.
    pub running: bool,
    /// `"leader"`, `"follower"`, `"none"` or `"standalone"`.
    pub role: &'static str,
    /// The node's leader epoch for the partition.
    pub leader_epoch: i32,
    /// Log end offset.
    pub log_end_offset: i64,
    /// High watermark.
    pub high_watermark: i64,
}

/// A partition as the controller and the replicas see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionView {
    /// The leader, or -1.
    pub leader: i32,
    /// The controller's leader epoch.
    pub leader_epoch: i32,
    /// The controller's partition epoch.
    pub partition_epoch: i32,
    /// Assigned replicas, preferred first.
    pub replicas: Vec<i32>,
    /// The committed ISR.
    pub isr: Vec<i32>,
    /// Each replica's local state (running nodes only report numbers).
    pub replica_states: Vec<ReplicaView>,
}

impl PartitionView {
    /// The state of `node`'s replica.
    pub fn replica(&self, node: i32) -> Option<&ReplicaView> {
        self.replica_states.iter().find(|r| r.node == node)
    }

    /// The leader's high watermark, if the leader is running.
    pub fn high_watermark(&self) -> Option<i64> {
        self.replica(self.leader)
            .filter(|r| r.running)
            .map(|r| r.high_watermark)
    }
}

/// A handle on one node of a [`Cluster`].
#[derive(Debug)]
pub struct NodeRef<'a> {
    cluster: &'a mut Cluster,
    index: usize,
}

impl NodeRef<'_> {
    fn slot(&mut self) -> &mut NodeSlot {
        &mut self.cluster.nodes[self.index]
    }

    /// The node id.
    pub fn id(&self) -> i32 {
        self.cluster.nodes[self.index].id
    }

    /// Whether the node is running.
    pub fn is_running(&self) -> bool {
        self.cluster.nodes[self.index].handle.is_some()
    }

    /// The node's address for clients (its proxy's, or its listener's without
    /// proxies; the last one it had when stopped).
    pub fn addr(&self) -> SocketAddr {
        self.cluster.public_addr(self.index)
    }

    /// Hard kill: tasks and connections abort, nothing is flushed, the controller
    /// notices only when the session times out. No-op if not running.
    pub fn kill(mut self) {
        if let Some(h) = self.slot().handle.take() {
            h.kill();
            let id = self.id();
            self.cluster.record(format!("node {id} killed"));
        }
    }

    /// Controlled shutdown (leaderships move away losslessly first), then stop.
    ///
    /// # Cancel safety
    ///
    /// If cancelled, the node is killed.
    pub async fn stop(mut self) {
        if let Some(h) = self.slot().handle.take() {
            let id = self.id();
            self.cluster
                .record(format!("node {id} controlled shutdown begins"));
            h.stop().await;
            self.cluster.record(format!("node {id} stopped"));
        }
    }

    /// Fault injection: stops or resumes this node's replica fetchers (see
    /// [`NodeHandle::pause_replication`]). No-op if not running.
    pub fn pause_replication(&mut self, paused: bool) {
        if let Some(h) = &self.cluster.nodes[self.index].handle {
            h.pause_replication(paused);
            let id = self.id();
            let what = if paused { "paused" } else { "resumed" };
            self.cluster.record(format!("node {id} replication {what}"));
        }
    }

    /// Starts the node again with the same id, data directory and (if free) port.
    /// No-op if running.
    ///
    /// # Cancel safety
    ///
    /// Cancelling before it completes leaves the node stopped.
    pub async fn restart(mut self) -> Result<(), BrokerError> {
        if self.is_running() {
            return Ok(());
        }
        let slot = self.slot();
        let mut opts = slot.options.clone();
        let handle = match retry_bind(|| Node::start(opts.clone())).await {
            Ok(h) => h,
            Err(BrokerError::Bind { .. }) => {
                opts.broker.listen.set_port(0);
                Node::start(opts.clone()).await?
            }
            Err(e) => return Err(e),
        };
        opts.broker.listen = handle.local_addr();
        slot.options = opts;
        slot.handle = Some(handle);
        let id = self.id();
        if let Some(p) = self.cluster.faults.nodes.get(&id) {
            p.shared
                .set_target(self.cluster.nodes[self.index].options.broker.listen);
        }
        self.cluster.record(format!("node {id} restarted"));
        Ok(())
    }
}

impl Cluster {
    /// A builder with 3 in-memory brokers.
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::default()
    }

    /// Comma-separated `host:port` of the running nodes, for bootstrap servers.
    pub fn bootstrap(&self) -> String {
        self.bootstrap_servers().join(",")
    }

    /// `host:port` of every node (running or not), in id order.
    pub fn bootstrap_servers(&self) -> Vec<String> {
        (0..self.nodes.len())
            .map(|i| self.public_addr(i).to_string())
            .collect()
    }

    fn public_addr(&self, index: usize) -> SocketAddr {
        let n = &self.nodes[index];
        self.faults
            .nodes
            .get(&n.id)
            .map_or(n.options.broker.listen, |p| p.addr)
    }

    /// The data directory of node `id`, if the cluster is on disk.
    pub(crate) fn node_data_dir(&self, id: i32) -> Option<PathBuf> {
        let n = self.nodes.iter().find(|n| n.id == id)?;
        n.options.broker.data_dir.clone()
    }

    /// The controller's address, as nodes dial it (its proxy's, if any).
    pub fn controller_addr(&self) -> SocketAddr {
        self.faults
            .controller
            .as_ref()
            .map_or(self.controller_options.listen, |p| p.addr)
    }

    /// Node ids, ascending.
    pub fn node_ids(&self) -> Vec<i32> {
        self.nodes.iter().map(|n| n.id).collect()
    }

    /// A handle on node `id`.
    ///
    /// # Panics
    ///
    /// If there is no such node (ids are `1..=n`).
    pub fn node(&mut self, id: i32) -> NodeRef<'_> {
        let index = self
            .nodes
            .iter()
            .position(|n| n.id == id)
            .unwrap_or_else(|| panic!("no node {id} in this cluster"));
        NodeRef {
            cluster: self,
            index,
        }
    }

    /// Appends an event to the timeline (tests may add their own steps).
    pub fn record(&mut self, what: String) {
        tracing::info!(event = %what, "cluster timeline");
        self.timeline.push(TimelineEvent {
            at: self.started.elapsed(),
            what,
        });
    }

    /// Every fault and lifecycle step so far, oldest first.
    pub fn timeline(&self) -> &[TimelineEvent] {
        &self.timeline
    }

    /// The timeline as text, one event per line.
    pub fn timeline_text(&self) -> String {
        self.timeline.iter().map(|e| format!("{e}\n")).collect()
    }

    /// Ids of registered, unfenced brokers according to the controller.
    pub fn unfenced_brokers(&self) -> Vec<i32> {
        match &self.controller {
            Some(c) => c
                .state()
                .brokers()
                .filter(|b| !b.fenced)
                .map(|b| b.broker_id)
                .collect(),
            None => Vec::new(),
        }
    }

    /// Kills the controller (its synced log stays on disk).
    pub fn kill_controller(&mut self) {
        if self.controller.take().is_some() {
            self.record("controller killed".into());
        }
    }

    /// Starts the controller again on the same address, replaying its log.
    ///
    /// # Cancel safety
    ///
    /// Cancelling before it completes leaves the controller stopped.
    pub async fn restart_controller(&mut self) -> Result<(), BrokerError> {
        if self.controller.is_none() {
            let opts = (*self.controller_options).clone();
            let c = retry_bind(|| ControllerServer::start(opts.clone())).await?;
            if let Some(p) = &self.faults.controller {
                p.shared.set_target(c.local_addr());
            }
            self.controller = Some(c);
            self.record("controller restarted".into());
        }
        Ok(())
    }

    /// The partition's state: the controller's assignment plus each replica's leader
    /// epoch, log end offset and high watermark. `None` for an unknown partition.
    pub fn partition_state(&self, topic: &str, partition: i32) -> Option<PartitionView> {
        let ctl = self.controller.as_ref()?.state();
        let t = ctl.topic_by_name(topic)?;
        let p = ctl.partition(t.topic_id, partition)?;
        let replica_states = p
            .replicas
            .iter()
            .map(|&r| {
                let local = self
                    .nodes
                    .iter()
                    .find(|n| n.id == r)
                    .and_then(|n| n.handle.as_ref())
                    .and_then(|h| h.state())
                    .and_then(|s| s.topic(topic))
                    .and_then(|tp| tp.partition(partition).cloned());
                match local {
                    Some(part) => {
                        let st = part.lock();
                        ReplicaView {
                            node: r,
                            running: true,
                            role: match st.role() {
                                Role::Leader(_) => "leader",
                                Role::Follower { .. } => "follower",
                                Role::Standalone => "standalone",
                                _ => "none",
                            },
                            leader_epoch: st.leader_epoch(),
                            log_end_offset: st.log_end_offset(),
                            high_watermark: st.high_watermark(),
                        }
                    }
                    None => ReplicaView {
                        node: r,
                        running: false,
                        role: "none",
                        leader_epoch: -1,
                        log_end_offset: -1,
                        high_watermark: -1,
                    },
                }
            })
            .collect();
        Some(PartitionView {
            leader: if p.leader == NO_LEADER { -1 } else { p.leader },
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            replicas: p.replicas.clone(),
            isr: p.isr.clone(),
            replica_states,
        })
    }

    /// The stored batches of `node`'s replica below `end_offset`, as bytes (for
    /// comparing replicas). `None` if the node is not running or has no such partition.
    pub fn stored_batches(
        &self,
        node: i32,
        topic: &str,
        partition: i32,
        end_offset: i64,
    ) -> Option<Vec<Bytes>> {
        let part = self
            .nodes
            .iter()
            .find(|n| n.id == node)?
            .handle
            .as_ref()?
            .state()?
            .topic(topic)?
            .partition(partition)?
            .clone();
        let st = part.lock();
        let mut out = Vec::new();
        let mut from = st.log_start_offset();
        while from < end_offset {
            let batches = st.log().read(from, 1 << 20).ok()?;
            if batches.is_empty() {
                break;
            }
            for b in batches {
                let h = crate::log::header::BatchHeader::parse(&b).ok()?;
                if h.last_offset >= end_offset {
                    return Some(out);
                }
                from = h.last_offset + 1;
                out.push(b);
            }
        }
        Some(out)
    }

    /// Polls `cond` every 50 ms until it holds or `timeout` passes.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        mut cond: impl FnMut(&Cluster) -> bool,
    ) -> Result<(), WaitTimedOut> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if cond(self) {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(WaitTimedOut);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops every node (controlled shutdown while the others still run), then the
    /// controller.
    ///
    /// # Cancel safety
    ///
    /// If cancelled, what is left is killed when the cluster is dropped.
    pub async fn shutdown(mut self) {
        for n in &mut self.nodes {
            if let Some(h) = n.handle.take() {
                h.stop().await;
            }
        }
        if let Some(c) = self.controller.take() {
            c.shutdown().await;
        }
    }
}

/// Runs `start` until it does not fail to bind, for up to 10 s: the listener of a
/// killed component is released when its aborted task is dropped, which the runtime
/// does a moment later.
async fn retry_bind<T, F, Fut>(mut start: F) -> Result<T, BrokerError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, BrokerError>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match start().await {
            Err(BrokerError::Bind { .. }) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => return other,
        }
    }
}

/// A [`Cluster::wait_for`] condition did not hold in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("condition did not hold in time")]
pub struct WaitTimedOut;
