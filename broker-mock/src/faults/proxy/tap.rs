//! The observer hook of a [`Proxy`](super::Proxy): a [`Tap`] sees every request a
//! client sends through the proxy and every response the target sends back, and
//! may lose, rewrite or hold responses.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;

/// One request frame, as the proxy read it from the connecting side.
#[derive(Debug, Clone)]
pub struct RequestFrame {
    /// The request's API key.
    pub api_key: i16,
    /// The request's API version.
    pub version: i16,
    /// The request's correlation id.
    pub correlation_id: i32,
    /// The frame after its size prefix: request header, then body, as
    /// [`envelope::decode_request`](baton_protocol::envelope::decode_request) takes it.
    pub frame: Bytes,
}

/// What a [`Tap`] decides about one request that expects a response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Forward the request, read the target's response, then close the connection
    /// instead of writing it: the target did the work, the client never hears.
    pub lose_response: bool,
    /// The tap's own note on this exchange (a sequence number, say), handed back in
    /// the [`Exchange`] of the request's response.
    pub tag: Option<u64>,
}

/// What [`Tap::response`] is told about the request a response answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exchange {
    /// The request's API key.
    pub api_key: i16,
    /// The request's API version.
    pub version: i16,
    /// The request's correlation id.
    pub correlation_id: i32,
    /// [`Verdict::tag`] as the tap returned it for the request.
    pub tag: Option<u64>,
}

/// A future a response waits for before it is written.
pub type HoldFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A response as the tap hands it back to the proxy.
pub struct Reply {
    /// The frame to write, after its size prefix (response header, then body); the
    /// proxy writes the size prefix.
    pub frame: Bytes,
    /// When set, the response (and every later one on its connection) waits until
    /// this future completes.
    pub hold: Option<HoldFuture>,
}

impl Reply {
    /// `frame`, written at once.
    pub fn now(frame: Bytes) -> Reply {
        Reply { frame, hold: None }
    }
}

impl fmt::Debug for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reply")
            .field("frame_len", &self.frame.len())
            .field("held", &self.hold.is_some())
            .finish()
    }
}

/// An observer of a proxy's traffic.
///
/// Both methods run on the connection's tasks, between reading a frame and
/// forwarding it: they must not block. A request whose header cannot be read, and
/// a request the proxy answers itself (an injected error), reach only
/// [`request`](Tap::request) or nothing; a request that expects no response (a
/// Produce with acks=0) reaches only [`request`](Tap::request), whose verdict is
/// then ignored.
pub trait Tap: Send + Sync + 'static {
    /// Called for every request frame whose header could be read, in the order the
    /// connection sent them, before the request is forwarded.
    fn request(&self, request: &RequestFrame) -> Verdict;

    /// Called for every response frame of the target (after its size prefix) that
    /// is not lost, before it is written; the default writes it unchanged.
    fn response(&self, exchange: Exchange, frame: Bytes) -> Reply {
        let _ = exchange;
        Reply::now(frame)
    }
}
