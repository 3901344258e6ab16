//! The faults a cluster's proxies and fault-injection methods apply: where a
//! connection comes from and goes, what happens to its frames, and per-API request
//! faults.

use std::time::Duration;

use baton_protocol::ErrorCode;

/// Which part of a batch's framing
/// [`NodeRef::corrupt_framing`](crate::cluster::NodeRef::corrupt_framing) damages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FramingDamage {
    /// The batch length field becomes far larger than the batch.
    Length,
    /// The base offset goes one below its value (overlapping the previous batch); the
    /// CRC does not cover it, so only the offset checks can notice.
    BaseOffset,
}

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

/// A fault for the next requests of one API key, see
/// [`Cluster::inject`](crate::cluster::Cluster::inject).
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
