//! The fault-injection methods of [`Cluster`] (see [`crate::faults`] for the
//! faults themselves): network partitions, latency, per-API errors, pauses and
//! disk faults, each recorded on the cluster's timeline.

use std::time::Duration;

use crate::cluster::Cluster;
use crate::faults::*;

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

    /// Sets the disk fault of node `id`'s data directory, so of every partition log
    /// on the node (no effect on an in-memory cluster). [`DiskFault::None`] restores
    /// it. The faults act in the on-disk log's own write and fsync path; a log whose
    /// write or fsync fails goes offline on that node (see `docs/RELIABILITY.md`).
    pub fn disk_fault(&mut self, id: i32, fault: DiskFault) {
        if let Some(dir) = self.node_data_dir(id) {
            self.set_disk_fault(&dir, format!("node {id}"), fault);
        }
    }

    /// Sets the disk fault of node `id`'s log of `topic`/`partition` alone (its
    /// other logs keep working), like [`Cluster::disk_fault`].
    pub fn partition_disk_fault(&mut self, id: i32, topic: &str, partition: i32, fault: DiskFault) {
        if let Some(dir) = self.node_data_dir(id) {
            let dir = crate::topics::Storage::partition_dir(&dir, topic, partition);
            self.set_disk_fault(&dir, format!("node {id} {topic}-{partition}"), fault);
        }
    }

    fn set_disk_fault(&mut self, dir: &std::path::Path, what: String, fault: DiskFault) {
        disk::set(dir, fault);
        if fault == DiskFault::None {
            self.record(format!("disk: {what} restored"));
        } else {
            self.fault(format!("disk: {what} {fault:?}"));
        }
    }
}
