//! `Cluster`, the handle on a running in-process cluster, and `NodeRef`, the handle
//! on one of its nodes: lifecycle (kill, stop, restart), the controller, partition
//! views, waits and the timeline.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;

use super::{
    ControllerHandle, ControllerOptions, ControllerServer, Node, NodeHandle, NodeOptions,
    PartitionView, ReplicaView, TimelineEvent,
};
use crate::controller::NO_LEADER;
use crate::error::BrokerError;
/// One node of a [`Cluster`]: its id, how it is started, and its handle while it
/// runs.
#[derive(Debug)]
pub(super) struct NodeSlot {
    pub(super) id: i32,
    pub(super) options: NodeOptions,
    pub(super) handle: Option<NodeHandle>,
    /// Logs a kill left torn ([`DiskFault::TornTailOnCrash`](crate::faults::DiskFault::TornTailOnCrash)):
    /// damaged before the node starts again.
    pub(super) torn_on_restart: Vec<(PathBuf, u64)>,
}

/// An in-process cluster: a controller and broker nodes `1..=n`.
///
/// Dropping it kills everything (nothing flushed); [`Cluster::shutdown`] stops nodes
/// and flushes.
#[derive(Debug)]
pub struct Cluster {
    pub(super) controller: Option<ControllerHandle>,
    /// Boxed to keep `Cluster` small (it is often held in an enum beside other
    /// handles).
    pub(super) controller_options: Box<ControllerOptions>,
    pub(super) nodes: Vec<NodeSlot>,
    pub(super) started: std::time::Instant,
    pub(super) timeline: Vec<TimelineEvent>,
    /// The fault proxies (see [`crate::faults`]).
    pub(crate) faults: crate::faults::ClusterFaults,
}

/// A handle on one node of a [`Cluster`].
#[derive(Debug)]
pub struct NodeRef<'a> {
    pub(super) cluster: &'a mut Cluster,
    pub(super) index: usize,
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

    /// A snapshot of the node's metrics (see [`crate::metrics`]); `None` while it
    /// is not running. A restarted node counts from zero again.
    pub fn metrics(&self) -> Option<crate::metrics::BrokerMetrics> {
        self.cluster.nodes[self.index].handle.as_ref()?.metrics()
    }

    /// The address of the node's Prometheus endpoint (with
    /// [`ClusterBuilder::metrics_listen`](super::ClusterBuilder::metrics_listen)),
    /// while it runs.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.cluster.nodes[self.index]
            .handle
            .as_ref()?
            .metrics_addr()
    }

    /// Hard kill: tasks and connections abort, nothing is flushed, the controller
    /// notices only when the session times out. No-op if not running.
    pub fn kill(mut self) {
        if let Some(h) = self.slot().handle.take() {
            h.kill();
            let id = self.id();
            self.cluster.record(format!("node {id} killed"));
            if let Some(dir) = self.cluster.node_data_dir(id) {
                self.slot().torn_on_restart = crate::faults::disk::tails_to_tear(&dir);
            }
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
        let id = self.id();
        for (dir, n) in std::mem::take(&mut self.slot().torn_on_restart) {
            match crate::faults::disk::tear_tail(&dir, n) {
                Ok(bytes) => self.cluster.record(format!(
                    "disk: node {id} crash tore {bytes} bytes off the tail of {}",
                    dir.display()
                )),
                Err(e) => return Err(crate::error::LogError::io(&dir, e).into()),
            }
        }
        let slot = self.slot();
        let mut opts = slot.options.clone();
        let handle = match retry_bind(|| Node::start(opts.clone())).await {
            Ok(h) => h,
            Err(BrokerError::Bind { .. }) => {
                opts.broker.listen.set_port(0);
                if let Some(m) = &mut opts.broker.metrics_listen {
                    m.set_port(0);
                }
                for l in &mut opts.broker.extra_listeners {
                    l.listen.set_port(0);
                }
                Node::start(opts.clone()).await?
            }
            Err(e) => return Err(e),
        };
        opts.broker.listen = handle.local_addr();
        handle.keep_extra_ports(&mut opts);
        slot.options = opts;
        slot.handle = Some(handle);
        if let Some(p) = self.cluster.faults.nodes.get(&id) {
            p.shared
                .set_target(self.cluster.nodes[self.index].options.broker.listen);
        }
        self.cluster.record(format!("node {id} restarted"));
        Ok(())
    }
}

impl Cluster {
    /// Comma-separated `host:port` of the running nodes, for bootstrap servers.
    pub fn bootstrap(&self) -> String {
        self.bootstrap_servers().join(",")
    }

    /// Comma-separated `host:port` of every running node's listener named `name`
    /// (see [`ClusterBuilder::client_listener`](crate::ClusterBuilder::client_listener)),
    /// for bootstrap servers.
    pub fn listener_bootstrap(&self, name: &str) -> String {
        self.nodes
            .iter()
            .filter_map(|n| n.handle.as_ref()?.listener_addr(name))
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(",")
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

    /// A snapshot of the controller's metrics: leader elections and ISR changes
    /// it wrote since it (re)started, offline partitions now. `None` while it is
    /// killed.
    pub fn controller_metrics(&self) -> Option<crate::metrics::ControllerMetrics> {
        Some(self.controller.as_ref()?.metrics())
    }

    /// Each running node's id and Prometheus endpoint address (with
    /// [`ClusterBuilder::metrics_listen`](super::ClusterBuilder::metrics_listen)).
    pub fn metrics_addrs(&self) -> Vec<(i32, SocketAddr)> {
        self.nodes
            .iter()
            .filter_map(|n| Some((n.id, n.handle.as_ref()?.metrics_addr()?)))
            .collect()
    }

    /// The address of the controller's Prometheus endpoint, if it has one.
    pub fn controller_metrics_addr(&self) -> Option<SocketAddr> {
        self.controller.as_ref()?.metrics_addr()
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
                    Some(part) => ReplicaView::of(r, &part.lock()),
                    None => ReplicaView {
                        node: r,
                        running: false,
                        role: "none",
                        leader_epoch: -1,
                        log_end_offset: -1,
                        high_watermark: -1,
                        log_start_offset: -1,
                        log_offline: false,
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
