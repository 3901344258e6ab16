//! The rules of one proxy (flows, paused peers, request faults) and the state its
//! connections share: where to forward, the rules, and the observer.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::watch;
use tokio::time::Instant;

use super::answers::request_touches;
use super::tap::Tap;
use crate::faults::kinds::{Direction, Flow, Peer, RequestFault, RequestFaultAction};

/// The rules of one proxy, shared with its connections.
#[derive(Debug, Default)]
pub(crate) struct ProxyRules {
    /// Per (source, direction) flow; missing means [`Flow::Pass`].
    flows: HashMap<(Peer, Direction), Flow>,
    /// Holds every frame in both directions (a paused target).
    paused: bool,
    /// Nodes whose connections are held (paused nodes).
    paused_peers: HashSet<i32>,
    /// Request faults, consumed in order.
    requests: Vec<RequestFault>,
}

/// What a proxy's connections share.
pub(crate) struct ProxyShared {
    /// Where connections are forwarded (changes when the target restarts).
    target: Mutex<SocketAddr>,
    /// The faults in force.
    rules: Mutex<ProxyRules>,
    /// Bumped after every rule change, waking held frames.
    changed: watch::Sender<u64>,
    /// The observer of every request and response, if any.
    pub(super) tap: Option<Arc<dyn Tap>>,
    /// One request at a time per connection: the next request is read only once
    /// the previous one's response was written (or the proxy's own answer was).
    pub(super) lock_step: bool,
}

impl fmt::Debug for ProxyShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProxyShared")
            .field("target", &self.target)
            .field("rules", &self.rules)
            .field("tapped", &self.tap.is_some())
            .field("lock_step", &self.lock_step)
            .finish_non_exhaustive()
    }
}

impl ProxyShared {
    pub(super) fn new(
        target: SocketAddr,
        tap: Option<Arc<dyn Tap>>,
        lock_step: bool,
    ) -> ProxyShared {
        ProxyShared {
            target: Mutex::new(target),
            rules: Mutex::new(ProxyRules::default()),
            changed: watch::Sender::new(0),
            tap,
            lock_step,
        }
    }

    /// Where new connections are forwarded.
    pub(super) fn target(&self) -> SocketAddr {
        *self.target.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forwards new connections to `addr` (the target restarted elsewhere).
    pub(crate) fn set_target(&self, addr: SocketAddr) {
        *self.target.lock().unwrap_or_else(|p| p.into_inner()) = addr;
    }

    /// Changes the rules and wakes every held frame to look at them again.
    pub(crate) fn update(&self, f: impl FnOnce(&mut ProxyRules)) {
        f(&mut self.rules.lock().unwrap_or_else(|p| p.into_inner()));
        self.changed.send_modify(|g| *g += 1);
    }

    /// Uses of request faults not yet consumed.
    pub(crate) fn pending_requests(&self) -> u64 {
        let r = self.rules.lock().unwrap_or_else(|p| p.into_inner());
        r.requests.iter().map(|f| u64::from(f.remaining)).sum()
    }

    fn flow(&self, peer: Peer, dir: Direction) -> Flow {
        let r = self.rules.lock().unwrap_or_else(|p| p.into_inner());
        if r.paused || matches!(peer, Peer::Node(n) if r.paused_peers.contains(&n)) {
            return Flow::Hold;
        }
        r.flows.get(&(peer, dir)).copied().unwrap_or(Flow::Pass)
    }

    /// Waits until frames from `peer` in `dir` may pass, then applies latency
    /// counted from `read_at`.
    pub(super) async fn gate(&self, peer: Peer, dir: Direction, read_at: Instant) {
        let mut changed = self.changed.subscribe();
        loop {
            changed.borrow_and_update();
            match self.flow(peer, dir) {
                Flow::Pass => return,
                Flow::Latency(d) => {
                    tokio::time::sleep_until(read_at + d).await;
                    return;
                }
                Flow::Hold => {
                    if changed.changed().await.is_err() {
                        return;
                    }
                }
            }
        }
    }

    /// The action for a request, consuming one use of the first matching fault.
    pub(super) fn request_action(
        &self,
        api_key: i16,
        body: &Bytes,
        version: i16,
    ) -> Option<RequestFaultAction> {
        let mut r = self.rules.lock().unwrap_or_else(|p| p.into_inner());
        let pos = r.requests.iter().position(|f| {
            f.api_key == api_key
                && f.remaining > 0
                && match &f.partition {
                    None => true,
                    Some((t, p)) => request_touches(api_key, body, version, t, *p),
                }
        })?;
        let f = &mut r.requests[pos];
        f.remaining -= 1;
        let action = f.action;
        if f.remaining == 0 {
            r.requests.remove(pos);
        }
        Some(action)
    }
}

impl ProxyRules {
    pub(crate) fn set_flow(&mut self, peer: Peer, dir: Direction, flow: Flow) {
        if flow == Flow::Pass {
            self.flows.remove(&(peer, dir));
        } else {
            self.flows.insert((peer, dir), flow);
        }
    }

    pub(crate) fn set_paused(&mut self, paused: bool) {
        self.paused = paused;
    }

    pub(crate) fn add_request_fault(&mut self, f: RequestFault) {
        self.requests.push(f);
    }

    pub(crate) fn set_peer_paused(&mut self, node: i32, paused: bool) {
        if paused {
            self.paused_peers.insert(node);
        } else {
            self.paused_peers.remove(&node);
        }
    }

    pub(crate) fn clear_flows(&mut self) {
        self.flows.clear();
    }

    pub(crate) fn clear_requests(&mut self) {
        self.requests.clear();
    }
}
