//! Idle inter-node connections of the transaction paths (markers to partition
//! leaders, KIP-890 verification at the coordinator), kept for reuse so that each
//! transaction does not open a new connection per peer.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;

use crate::node_mode::ClusterLink;
use crate::rpc::Rpc;

/// Idle connections kept per peer; more are dropped when given back.
const MAX_IDLE_PER_PEER: usize = 8;

/// Idle connections to other nodes, by address.
#[derive(Debug, Default)]
pub(crate) struct PeerPool {
    /// Invariant: at most [`MAX_IDLE_PER_PEER`] per address.
    idle: Mutex<HashMap<SocketAddr, Vec<Rpc>>>,
}

impl PeerPool {
    /// An idle connection to `addr`, or a new one (opened on first use).
    pub fn take(&self, link: &ClusterLink, addr: SocketAddr) -> Rpc {
        let reused = self
            .idle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(&addr)
            .and_then(Vec::pop);
        reused.unwrap_or_else(|| link.rpc(addr, format!("node-{}-txn", link.node_id)))
    }

    /// Gives back a connection whose last call succeeded.
    pub fn give(&self, addr: SocketAddr, rpc: Rpc) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let slot = idle.entry(addr).or_default();
        if slot.len() < MAX_IDLE_PER_PEER {
            slot.push(rpc);
        }
    }
}
