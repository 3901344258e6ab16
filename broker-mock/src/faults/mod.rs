//! Fault injection for the in-process [`Cluster`](crate::Cluster): network partitions and latency,
//! paused nodes, request faults and disk faults. Every fault is recorded on the
//! cluster's timeline.
//!
//! The network faults act on the real TCP path. Each node's listener and the
//! controller's listener sit behind a small proxy ([`proxy`]); nodes advertise their
//! proxy's port and dial the controller through its proxy, and clients bootstrap
//! through the node proxies. A proxy knows which node a connection comes from (by the
//! client id of its first request), so "between node 1 and node 2" holds only the
//! frames flowing between those two nodes. The same proxy, with a [`proxy::Tap`],
//! watches and doctors a standalone broker's traffic for tests.
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
mod kinds;
pub mod proxy;

use std::collections::HashMap;

pub use disk::DiskFault;
pub use kinds::{Direction, Endpoint, Flow, FramingDamage, Peer, RequestFault, RequestFaultAction};
use proxy::Proxy;

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

    pub(crate) fn all(&self) -> impl Iterator<Item = &Proxy> {
        self.controller.iter().chain(self.nodes.values())
    }

    /// Frames flowing from `from` to `to` get `flow`.
    pub(crate) fn set_one_way(&self, from: Endpoint, to: Endpoint, flow: Flow) {
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
