//! Fault injection for the in-process [`Cluster`]: network partitions and latency,
//! paused nodes, request faults and disk faults. Every fault is recorded on the
//! cluster's timeline.
//!
//! The network faults act on the real TCP path. Each node's listener and the
//! controller's listener sit behind a small proxy (the `proxy` module); nodes advertise their
//! proxy's port and dial the controller through its proxy, and clients bootstrap
//! through the node proxies. A proxy knows which node a connection comes from (by the
//! client id of its first request), so "between node 1 and node 2" holds only the
//! frames flowing between those two nodes.
//!
//! ```no_run
//! # async fn demo() -> Result<(), baton_broker::BrokerError> {
//! use baton_broker::faults::{Endpoint, RequestFault};
//! use baton_broker::Cluster;
//! let mut cluster = Cluster::builder().brokers(3).start().await?;
//! // node 1 can no longer reach node 2 (node 2 still reaches node 1)
//! cluster.partition_one_way(Endpoint::Node(1), Endpoint::Node(2));
//! cluster.heal();
//! // the next Produce handled by node 1 is applied, then its response is lost
//! cluster.inject(Some(1), RequestFault::drop_response(0));
//! cluster.pause_node(3);
//! cluster.resume_node(3);
//! println!("{}", cluster.timeline_text());
//! # Ok(()) }
//! ```

pub mod disk;
pub(crate) mod proxy;

use std::collections::HashMap;
use std::time::Duration;

use baton_protocol::ErrorCode;

pub use disk::DiskFault;
use proxy::Proxy;

use crate::cluster::Cluster;

/// Where a connection comes from, as a proxy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Peer {
    /// Any connection not opened by a cluster node.
    Client,
    /// A connection opened by node `n` (replica fetchers, controller sessions).
    Node(i32),
}

/// A direction of a proxied connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Requests, from the connecting side to the proxied listener.
    ToTarget,
    /// Responses, from the proxied listener back.
    FromTarget,
}

/// What a proxy does with frames of one direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Forward at once.
    Pass,
    /// Stop forwarding (sockets stay open; held frames flow again on heal, like
    /// retransmissions after a network partition ends).
    Hold,
    /// Forward each frame this long after it was read.
    Latency(Duration),
}

/// One side of a network fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// A broker node.
    Node(i32),
    /// The controller.
    Controller,
    /// Every client (anything that is not a node).
    Clients,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Node(n) => write!(f, "node {n}"),
            Endpoint::Controller => f.write_str("controller"),
            Endpoint::Clients => f.write_str("clients"),
        }
    }
}

/// What a request fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestFaultAction {
    /// Answer with this error code for every partition, without applying the request
    /// (Produce and Fetch only; other APIs are forwarded untouched).
    Error(i16),
    /// Apply the request, then close the connection instead of answering.
    DropResponse,
    /// Apply the request and answer this much later.
    DelayResponse(Duration),
}

/// A fault for the next requests of one API key, see [`Cluster::inject`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestFault {
    /// The API key (e.g. 0 for Produce, 1 for Fetch).
    pub api_key: i16,
    /// How many more matching requests it affects.
    pub remaining: u32,
    /// Only requests naming this topic partition (Produce and Fetch), if set.
    pub partition: Option<(String, i32)>,
    /// What happens to them.
    pub action: RequestFaultAction,
}

impl RequestFault {
    /// The next request of `api_key` is answered with `code`.
    pub fn error(api_key: i16, code: ErrorCode) -> Self {
        Self::new(api_key, RequestFaultAction::Error(code.code()))
    }

    /// The next request of `api_key` is applied and its response dropped (the
    /// connection closes).
    pub fn drop_response(api_key: i16) -> Self {
        Self::new(api_key, RequestFaultAction::DropResponse)
    }

    /// The next request of `api_key` is answered `delay` late.
    pub fn delay_response(api_key: i16, delay: Duration) -> Self {
        Self::new(api_key, RequestFaultAction::DelayResponse(delay))
    }

    fn new(api_key: i16, action: RequestFaultAction) -> Self {
        RequestFault {
            api_key,
            remaining: 1,
            partition: None,
            action,
        }
    }

    /// Affects the next `n` matching requests instead of one.
    pub fn times(mut self, n: u32) -> Self {
        self.remaining = n;
        self
    }

    /// Affects only requests naming `topic`/`partition`.
    pub fn on_partition(mut self, topic: impl Into<String>, partition: i32) -> Self {
        self.partition = Some((topic.into(), partition));
        self
    }
}

/// The proxies of a cluster.
#[derive(Debug, Default)]
pub(crate) struct ClusterFaults {
    pub controller: Option<Proxy>,
    pub nodes: HashMap<i32, Proxy>,
    pub applied: u64,
}

impl ClusterFaults {
    fn proxy(&self, e: Endpoint) -> Option<&Proxy> {
        match e {
            Endpoint::Node(n) => self.nodes.get(&n),
            Endpoint::Controller => self.controller.as_ref(),
            Endpoint::Clients => None,
        }
    }

    fn all(&self) -> impl Iterator<Item = &Proxy> {
        self.controller.iter().chain(self.nodes.values())
    }

    /// Frames flowing from `from` to `to` get `flow`.
    fn set_one_way(&self, from: Endpoint, to: Endpoint, flow: Flow) {
        if let (Some(p), Some(peer)) = (self.proxy(to), peer_of(from)) {
            p.shared
                .update(|r| r.set_flow(peer, Direction::ToTarget, flow));
        }
        if let (Some(p), Some(peer)) = (self.proxy(from), peer_of(to)) {
            p.shared
                .update(|r| r.set_flow(peer, Direction::FromTarget, flow));
        }
    }
}

fn peer_of(e: Endpoint) -> Option<Peer> {
    match e {
        Endpoint::Node(n) => Some(Peer::Node(n)),
        Endpoint::Clients => Some(Peer::Client),
        Endpoint::Controller => None,
    }
}

impl Cluster {
    fn fault(&mut self, what: String) {
        self.faults.applied += 1;
        self.record(what);
    }

    /// How many faults were applied so far: the ones of this module plus node kills,
    /// controlled shutdowns, controller kills, replication pauses and stored-batch
    /// corruption from the timeline (heals, resumes and restarts not counted).
    pub fn faults_applied(&self) -> u64 {
        let lifecycle = self
            .timeline()
            .iter()
            .filter(|e| {
                let w = e.what.as_str();
                (w.starts_with("node ") && w.ends_with(" killed"))
                    || w.ends_with("controlled shutdown begins")
                    || w == "controller killed"
                    || w.ends_with("replication paused")
                    || w.contains(": flipped a byte of the stored batch")
                    || w.contains(": damaged the ")
            })
            .count() as u64;
        self.faults.applied + lifecycle
    }

    /// One-way partition: frames from `from` to `to` stop flowing on every connection
    /// between them (requests `from` sends, and responses `from` owes); the other
    /// direction still flows. Sockets stay open.
    pub fn partition_one_way(&mut self, from: Endpoint, to: Endpoint) {
        self.faults.set_one_way(from, to, Flow::Hold);
        self.fault(format!("network: {from} -> {to} partitioned (one way)"));
    }

    /// Two-way partition between `a` and `b`.
    pub fn partition(&mut self, a: Endpoint, b: Endpoint) {
        self.faults.set_one_way(a, b, Flow::Hold);
        self.faults.set_one_way(b, a, Flow::Hold);
        self.fault(format!("network: {a} <-> {b} partitioned"));
    }

    /// Isolates `node` from every other node, the controller and the clients.
    pub fn isolate(&mut self, node: i32) {
        let me = Endpoint::Node(node);
        for other in self.node_ids().into_iter().filter(|&n| n != node) {
            self.faults
                .set_one_way(me, Endpoint::Node(other), Flow::Hold);
            self.faults
                .set_one_way(Endpoint::Node(other), me, Flow::Hold);
        }
        for other in [Endpoint::Controller, Endpoint::Clients] {
            self.faults.set_one_way(me, other, Flow::Hold);
            self.faults.set_one_way(other, me, Flow::Hold);
        }
        self.fault(format!("network: node {node} isolated"));
    }

    /// Adds `delay` to frames in both directions between `a` and `b`.
    pub fn add_latency(&mut self, a: Endpoint, b: Endpoint, delay: Duration) {
        self.faults.set_one_way(a, b, Flow::Latency(delay));
        self.faults.set_one_way(b, a, Flow::Latency(delay));
        self.fault(format!("network: {a} <-> {b} latency {delay:?}"));
    }

    /// Ends every partition and latency (held frames are delivered).
    pub fn heal(&mut self) {
        for p in self.faults.all() {
            p.shared.update(|r| r.clear_flows());
        }
        self.record("network: healed".into());
    }

    /// Makes node `id` unresponsive but connected: every proxied frame to or from
    /// it is held (its clients, peers and the controller see silence, its sockets
    /// stay open). Its heartbeats stop, so the controller fences it after the
    /// session timeout.
    pub fn pause_node(&mut self, id: i32) {
        for (&n, p) in &self.faults.nodes {
            p.shared.update(|r| {
                if n == id {
                    r.set_paused(true)
                } else {
                    r.set_peer_paused(id, true)
                }
            });
        }
        if let Some(p) = &self.faults.controller {
            p.shared.update(|r| r.set_peer_paused(id, true));
        }
        self.fault(format!("node {id} paused"));
    }

    /// Resumes a node paused by [`Cluster::pause_node`].
    pub fn resume_node(&mut self, id: i32) {
        for (&n, p) in &self.faults.nodes {
            p.shared.update(|r| {
                if n == id {
                    r.set_paused(false)
                } else {
                    r.set_peer_paused(id, false)
                }
            });
        }
        if let Some(p) = &self.faults.controller {
            p.shared.update(|r| r.set_peer_paused(id, false));
        }
        self.record(format!("node {id} resumed"));
    }

    /// Adds a request fault at node `node` (every node if `None`; each node then
    /// counts its own `remaining`). Requests reach a node through its proxy, so this
    /// affects clients and replica fetchers alike; use
    /// [`RequestFault::on_partition`] to narrow it.
    pub fn inject(&mut self, node: Option<i32>, fault: RequestFault) {
        for (&n, p) in &self.faults.nodes {
            if node.is_none_or(|id| id == n) {
                let f = fault.clone();
                p.shared.update(|r| r.add_request_fault(f));
            }
        }
        let at = node.map_or("every node".to_owned(), |n| format!("node {n}"));
        self.fault(format!(
            "requests: {:?} for the next {} api key {} requests{} at {at}",
            fault.action,
            fault.remaining,
            fault.api_key,
            fault
                .partition
                .as_ref()
                .map_or(String::new(), |(t, p)| format!(" of {t}-{p}")),
        ));
    }

    /// Waits until every partition of `topic` has a leader and all its replicas in
    /// the ISR (e.g. between the steps of a rolling restart).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn wait_fully_replicated(
        &self,
        topic: &str,
        timeout: Duration,
    ) -> Result<(), crate::cluster::WaitTimedOut> {
        self.wait_for(timeout, |c| {
            let mut p = 0;
            while let Some(v) = c.partition_state(topic, p) {
                if v.leader < 0 || v.isr.len() != v.replicas.len() {
                    return false;
                }
                p += 1;
            }
            p > 0
        })
        .await
    }

    /// Request faults not used up yet, over every node.
    pub fn pending_request_faults(&self) -> u64 {
        self.faults.all().map(|p| p.shared.pending_requests()).sum()
    }

    /// Removes every request fault not used up yet.
    pub fn clear_request_faults(&mut self) {
        for p in self.faults.all() {
            p.shared.update(|r| r.clear_requests());
        }
        self.record("requests: faults cleared".into());
    }

    /// Sets the fsync behaviour of node `id`'s data directory (no effect on an
    /// in-memory cluster). [`DiskFault::None`] restores it.
    pub fn disk_fault(&mut self, id: i32, fault: DiskFault) {
        if let Some(dir) = self.node_data_dir(id) {
            disk::set(&dir, fault);
            if fault == DiskFault::None {
                self.record(format!("disk: node {id} fsync restored"));
            } else {
                self.fault(format!("disk: node {id} fsync {fault:?}"));
            }
        }
    }
}
