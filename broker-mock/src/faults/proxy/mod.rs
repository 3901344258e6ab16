//! The one frame-aware TCP proxy: in front of a listener of the in-process
//! [`Cluster`](crate::Cluster) (a node or the controller) for its fault injection, and
//! in front of a standalone broker for tests that watch or doctor the traffic
//! through a [`Tap`].
//!
//! Every accepted connection is classified by the client id of its first request:
//! `replica-N`, `node-N`, `node-N-metadata`, `node-N-reports` come from node `N`,
//! anything else from a client. Each direction of a connection is pumped frame by
//! frame through the proxy's [`Flow`](super::Flow) rules, so a partition holds frames
//! (the sockets stay open, as when a network drops packets) and latency delays them.
//! Request faults act on request frames: an injected error is answered by the proxy
//! itself, "drop the response" forwards the request and closes the connection when
//! its response comes back, and a delayed response is held before it is written.
//!
//! Requests are pipelined by default (responses keep request order); in lock step
//! ([`ProxyOptions::lock_step`]) a connection has one request in flight, as a relay
//! that reads the next request only after writing the previous response.
//!
//! ```no_run
//! # async fn demo() -> Result<(), baton_broker::BrokerError> {
//! use std::sync::Arc;
//! use baton_broker::faults::proxy::{Proxy, ProxyOptions, RequestFrame, Tap, Verdict};
//!
//! #[derive(Debug)]
//! struct LoseEveryProduce;
//! impl Tap for LoseEveryProduce {
//!     fn request(&self, request: &RequestFrame) -> Verdict {
//!         Verdict { lose_response: request.api_key == 0, tag: None }
//!     }
//! }
//!
//! let options = ProxyOptions::default().tap(Arc::new(LoseEveryProduce));
//! let proxy = Proxy::start_with(
//!     "127.0.0.1:0".parse().unwrap(),
//!     "127.0.0.1:9092".parse().unwrap(),
//!     options,
//! )
//! .await?;
//! println!("clients connect to {}", proxy.local_addr());
//! # Ok(()) }
//! ```

mod answers;
mod rules;
mod tap;

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use baton_protocol::frame::DEFAULT_MAX_FRAME;
use baton_protocol::messages::ProduceRequest;
use baton_protocol::primitives::Decoder;
use baton_protocol::{FrameCodec, Message, RequestHeader};
use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::kinds::{Direction, Peer, RequestFaultAction};
use crate::cluster::driver::node::AbortOnDrop;
use crate::error::BrokerError;
use answers::{error_response, produce_acks};
pub(crate) use rules::ProxyShared;
pub use tap::{Exchange, HoldFuture, Reply, RequestFrame, Tap, Verdict};

/// How a proxy started with [`Proxy::start_with`] treats its connections.
#[derive(Clone, Default)]
pub struct ProxyOptions {
    /// The observer of every request and response.
    tap: Option<Arc<dyn Tap>>,
    /// One request in flight per connection.
    lock_step: bool,
}

impl ProxyOptions {
    /// Hands every request and response to `tap` (see [`Tap`]).
    pub fn tap(mut self, tap: Arc<dyn Tap>) -> ProxyOptions {
        self.tap = Some(tap);
        self
    }

    /// Relays each connection in lock step: the next request is read from the
    /// client only once the previous request's response was written (a request
    /// that expects no response does not wait). Pipelined requests then wait in
    /// the client's socket, and a connection closed for a lost response takes them
    /// with it, unseen by the target.
    pub fn lock_step(mut self) -> ProxyOptions {
        self.lock_step = true;
        self
    }
}

impl fmt::Debug for ProxyOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProxyOptions")
            .field("tapped", &self.tap.is_some())
            .field("lock_step", &self.lock_step)
            .finish()
    }
}

/// A running proxy; dropping it stops accepting (connections already accepted
/// end when either side closes).
#[derive(Debug)]
pub struct Proxy {
    /// The address it listens on.
    pub(crate) addr: SocketAddr,
    /// Target, rules and observer, shared with the connections.
    pub(crate) shared: Arc<ProxyShared>,
    _accept: AbortOnDrop,
}

impl Proxy {
    /// Binds `listen` and forwards every connection to `target`, pipelined, with
    /// no observer.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future before it completes drops the listener
    /// (nothing was accepted yet).
    pub async fn start(listen: SocketAddr, target: SocketAddr) -> Result<Proxy, BrokerError> {
        Proxy::start_with(listen, target, ProxyOptions::default()).await
    }

    /// Binds `listen` and forwards every connection to `target` as `options` say.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future before it completes drops the listener
    /// (nothing was accepted yet).
    pub async fn start_with(
        listen: SocketAddr,
        target: SocketAddr,
        options: ProxyOptions,
    ) -> Result<Proxy, BrokerError> {
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|source| BrokerError::Bind {
                addr: listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| BrokerError::Bind {
            addr: listen,
            source,
        })?;
        let shared = Arc::new(ProxyShared::new(target, options.tap, options.lock_step));
        let accept = AbortOnDrop(tokio::spawn(accept_loop(listener, shared.clone())));
        Ok(Proxy {
            addr,
            shared,
            _accept: accept,
        })
    }

    /// The address clients connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Forwards connections accepted from now on to `target` (a target that
    /// restarted elsewhere, or one started after the proxy because it advertises
    /// the proxy's port).
    pub fn set_target(&self, target: SocketAddr) {
        self.shared.set_target(target);
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<ProxyShared>) {
    loop {
        let Ok((sock, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        // As the listeners behind it do: without it, small responses wait for the
        // peer's delayed ACK (Nagle), up to 40 ms each.
        let _ = sock.set_nodelay(true);
        let shared = shared.clone();
        tokio::spawn(async move {
            if let Err(e) = connection(sock, shared).await {
                tracing::debug!(error = %e, "proxied connection ended");
            }
        });
    }
}

/// Reads one whole frame (size prefix included); `None` at a clean end of stream.
async fn read_frame(
    r: &mut OwnedReadHalf,
    buf: &mut BytesMut,
    codec: &FrameCodec,
) -> std::io::Result<Option<Bytes>> {
    loop {
        match codec.check(buf) {
            Ok(Some(n)) => return Ok(Some(buf.split_to(4 + n).freeze())),
            Ok(None) => {}
            Err(e) => return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
        }
        buf.reserve(codec.wanted(buf).min(1 << 16));
        if r.read_buf(buf).await? == 0 {
            return Ok(None);
        }
    }
}

/// The source of a connection, from the client id of its first request.
fn classify(frame: &[u8]) -> Peer {
    let body = Bytes::copy_from_slice(&frame[4.min(frame.len())..]);
    // Every request header from v1 on names the client first; v1 reads v2's too.
    let Ok(RequestHeader {
        client_id: Some(id),
        ..
    }) = RequestHeader::decode(&mut Decoder::new(body), 1)
    else {
        return Peer::Client;
    };
    let rest = id
        .strip_prefix("replica-")
        .or_else(|| id.strip_prefix("node-"))
        .map(|r| r.split('-').next().unwrap_or(""));
    match rest.and_then(|n| n.parse::<i32>().ok()) {
        Some(n) => Peer::Node(n),
        None => Peer::Client,
    }
}

/// What the response pump does for one request, in request order.
enum Pending {
    /// Write this frame (the proxy's own answer).
    Answer(Bytes),
    /// Forward the target's next response, after `delay`; with `drop`, close
    /// instead. With a tap, `exchange` is what it is told about the response.
    Forward {
        delay: Duration,
        drop: bool,
        exchange: Option<Exchange>,
    },
}

async fn connection(client: TcpStream, shared: Arc<ProxyShared>) -> std::io::Result<()> {
    let codec = FrameCodec::new(DEFAULT_MAX_FRAME.max(64 << 20));
    let (mut cr, mut cw) = client.into_split();
    let mut cbuf = BytesMut::new();
    let Some(first) = read_frame(&mut cr, &mut cbuf, &codec).await? else {
        return Ok(());
    };
    let peer = classify(&first);
    let server = TcpStream::connect(shared.target()).await?;
    let _ = server.set_nodelay(true);
    let (mut sr, mut sw) = server.into_split();
    let (to_server_tx, mut to_server_rx) = mpsc::unbounded_channel::<(Instant, Bytes)>();
    let (pending_tx, mut pending_rx) = mpsc::unbounded_channel::<Pending>();
    let (responses_tx, mut responses_rx) = mpsc::unbounded_channel::<(Instant, Bytes)>();
    // One message per response written; read in lock step only.
    let (written_tx, mut written_rx) = mpsc::unbounded_channel::<()>();

    let requests = {
        let shared = shared.clone();
        async move {
            let mut next = Some(first);
            loop {
                let frame = match next.take() {
                    Some(f) => f,
                    None => match read_frame(&mut cr, &mut cbuf, &codec).await? {
                        Some(f) => f,
                        None => return Ok::<(), std::io::Error>(()),
                    },
                };
                let at = Instant::now();
                let answered = route_request(&shared, frame, at, &to_server_tx, &pending_tx);
                if answered && shared.lock_step && written_rx.recv().await.is_none() {
                    return Ok(());
                }
            }
        }
    };
    let to_server = {
        let shared = shared.clone();
        async move {
            while let Some((at, frame)) = to_server_rx.recv().await {
                shared.gate(peer, Direction::ToTarget, at).await;
                sw.write_all(&frame).await?;
            }
            Ok::<(), std::io::Error>(())
        }
    };
    let responses = async move {
        let mut buf = BytesMut::new();
        let codec = FrameCodec::new(DEFAULT_MAX_FRAME.max(64 << 20));
        while let Some(f) = read_frame(&mut sr, &mut buf, &codec).await? {
            let _ = responses_tx.send((Instant::now(), f));
        }
        Ok::<(), std::io::Error>(())
    };
    let to_client = {
        let shared = shared.clone();
        async move {
            while let Some(p) = pending_rx.recv().await {
                let (at, frame) = match p {
                    Pending::Answer(f) => (Instant::now(), f),
                    Pending::Forward {
                        delay,
                        drop,
                        exchange,
                    } => {
                        let Some((at, mut f)) = responses_rx.recv().await else {
                            return Ok(());
                        };
                        if drop {
                            tracing::info!("fault: response dropped, closing the connection");
                            return Ok(());
                        }
                        if let (Some(tap), Some(exchange)) = (&shared.tap, exchange) {
                            let reply = tap.response(exchange, f.slice(4..));
                            if let Some(hold) = reply.hold {
                                hold.await;
                            }
                            f = framed(&reply.frame);
                        }
                        if !delay.is_zero() {
                            tokio::time::sleep(delay).await;
                        }
                        (at, f)
                    }
                };
                shared.gate(peer, Direction::FromTarget, at).await;
                cw.write_all(&frame).await?;
                let _ = written_tx.send(());
            }
            Ok::<(), std::io::Error>(())
        }
    };
    tokio::select! {
        r = requests => r,
        r = to_server => r,
        r = responses => r,
        r = to_client => r,
    }
}

/// `frame` behind its size prefix.
fn framed(frame: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(4 + frame.len());
    // A tap's frame fits: the proxy caps frames far below i32::MAX bytes.
    out.put_u32(frame.len() as u32);
    out.extend_from_slice(frame);
    out.freeze()
}

/// Queues one request frame (size prefix included) for the target and its response
/// for the client, applying the request faults and the tap; returns whether a
/// response to it will be written.
fn route_request(
    shared: &ProxyShared,
    frame: Bytes,
    at: Instant,
    to_server: &mpsc::UnboundedSender<(Instant, Bytes)>,
    pending: &mpsc::UnboundedSender<Pending>,
) -> bool {
    let body = frame.slice(4..);
    let Ok((api_key, version, correlation_id)) = RequestHeader::peek(&body) else {
        let _ = to_server.send((at, frame));
        return false;
    };
    let verdict = shared.tap.as_ref().map(|tap| {
        tap.request(&RequestFrame {
            api_key,
            version,
            correlation_id,
            frame: body.clone(),
        })
    });
    let expects_response =
        !(api_key == ProduceRequest::API_KEY && produce_acks(&body, version) == Some(0));
    let action = shared.request_action(api_key, &body, version);
    if let Some(RequestFaultAction::Error(code)) = action {
        match error_response(api_key, &body, version, correlation_id, code) {
            Some(answer) => {
                tracing::info!(
                    api_key,
                    code,
                    "fault: request answered with an injected error"
                );
                if expects_response {
                    let _ = pending.send(Pending::Answer(answer));
                }
                return expects_response;
            }
            None => {
                tracing::warn!(
                    api_key,
                    "fault: cannot answer this api with an error; forwarding"
                );
            }
        }
    }
    if expects_response {
        let (delay, drop) = match action {
            Some(RequestFaultAction::DropResponse) => (Duration::ZERO, true),
            Some(RequestFaultAction::DelayResponse(d)) => (d, false),
            _ => (Duration::ZERO, false),
        };
        let drop = drop || verdict.is_some_and(|v| v.lose_response);
        let exchange = verdict.map(|v| Exchange {
            api_key,
            version,
            correlation_id,
            tag: v.tag,
        });
        let _ = pending.send(Pending::Forward {
            delay,
            drop,
            exchange,
        });
    }
    let _ = to_server.send((at, frame));
    expects_response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(client_id: Option<&str>) -> Bytes {
        let req = baton_protocol::messages::MetadataRequest::default();
        baton_protocol::envelope::encode_request(7, client_id, &req, 12).unwrap()
    }

    #[test]
    fn connections_are_classified_by_client_id() {
        assert_eq!(classify(&frame(Some("replica-3"))), Peer::Node(3));
        assert_eq!(classify(&frame(Some("node-2"))), Peer::Node(2));
        assert_eq!(classify(&frame(Some("node-12-metadata"))), Peer::Node(12));
        assert_eq!(classify(&frame(Some("baton-app"))), Peer::Client);
        assert_eq!(classify(&frame(Some("node-x"))), Peer::Client);
        assert_eq!(classify(&frame(None)), Peer::Client);
        assert_eq!(classify(&[0, 0, 0, 2, 1]), Peer::Client);
    }
}
