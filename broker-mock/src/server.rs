//! The network side: a node's listeners, one task per connection, and request
//! dispatch.
//!
//! A node has one accept loop per listener (`BrokerConfig::listeners`), each with
//! its own name, security and advertised endpoint; Metadata, FindCoordinator and
//! DescribeCluster answer with the endpoint of the listener the request arrived
//! on, as Kafka does.
//!
//! Each connection reads ahead and handles requests in arrival order, so produces from
//! one connection are applied in order. A request's reply is either ready at once or,
//! for a long-polling Fetch, a pending result; a writer sends replies strictly in
//! request order, waiting for pending ones, so a slow Fetch never reorders responses
//! while later requests are still being handled. `acks=0` produces have no reply but
//! take their place in the order. A frame that cannot be handled (malformed, unknown
//! API, oversized) closes only its connection, after the replies already due are sent.
//!
//! Connections past `BrokerLimits::max_connections`, or past
//! `max_connections_per_ip` from one address, counted over all of the node's
//! listeners, are closed as soon as they are accepted, before anything is read
//! (see `connections`), as Kafka does. Every connection a listener closes for
//! breaking its rules (a limit, a failed TLS handshake, a failed or out-of-order
//! SASL exchange, a request before authentication, a bad frame) is counted on that
//! listener (`refusals`) and logged: one line per connection, except limit
//! refusals, which are logged at most once a second with a count so a flood costs
//! no log storm.
//!
//! A TLS listener (`SSL`, `SASL_SSL`) runs each connection's handshake in that
//! connection's task, within a timeout. Every request frame then passes the
//! connection's authentication gate (`security::ConnectionAuth`) before dispatch:
//! on a SASL listener nothing but ApiVersions and the SASL exchange is served
//! until authentication completes.
//!
//! Small frames share a read buffer; a frame larger than 64 KiB is read into a
//! buffer of its own, sized to the frame, so that the Produce handler can own it and
//! the log can keep its batches without copying them.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_env::{Listener, Socket};
use baton_protocol::{DecodeError, FrameCodec};
use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::acl::RequestContext;
use crate::config::BrokerConfig;
use crate::connections::{ConnectionLimiter, RefusalLog};
use crate::error::BrokerError;
use crate::handlers;
use crate::listener_config::check_names;
use crate::metrics::NodeMetrics;
use crate::node_mode::NodeMode;
use crate::refusals::{RefusalCounters, RefusalReason, RefusedConnections};
use crate::security::{
    certificate_principal, Admission, ConnectionAuth, ListenerSecurity, ScramStore,
    SecurityProtocol,
};
use crate::state::{BrokerState, Endpoint};
use crate::wire::{DispatchError, Reply};

/// Replies queued per connection before reading pauses (backpressure).
const MAX_IN_FLIGHT: usize = 128;
/// Read buffer size for small frames, and the least a large frame's own buffer starts
/// with.
const READ_CHUNK: usize = 64 * 1024;
/// A large frame's own buffer holds at most this many times the bytes received so far
/// (and at least [`READ_CHUNK`]), so a lying size prefix allocates nothing big.
const FRAME_GROWTH: usize = 32;
/// Reads into the shared buffer ask for at least this much.
const MIN_READ: usize = 4096;
/// Bytes of ciphertext read from a TLS connection's socket at once: rustls reads at
/// most 4 KiB per call, so a buffer below it turns a large Produce request's many
/// small reads into copies within memory and one read system call per 64 KiB.
const TLS_READ_BUFFER: usize = 64 * 1024;
/// Ciphertext a TLS connection encrypts ahead of the socket (rustls's send buffer
/// limit; its default is 64 KiB). A Fetch response of 1 MiB then leaves in 4
/// vectored writes of up to 16 records each, not 16 writes, and the buffer
/// holds at most this much beyond the reply itself.
const TLS_SEND_BUFFER: usize = 256 * 1024;
/// How long a TLS handshake may take before the connection is closed.
pub(crate) const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a connection stays open after its authentication failed and the
/// failure was answered: Kafka's `connection.failed.authentication.delay.ms`
/// default. Clients read the answer before they see the connection close
/// (kafka-python drops data that arrives together with the close).
const FAILED_AUTHENTICATION_DELAY: Duration = Duration::from_millis(100);
/// How long shutdown waits for connections to send what they owe.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Starts broker nodes.
#[derive(Debug)]
pub struct Broker;

impl Broker {
    /// Binds the listener, loads (and recovers) persisted topics, and starts serving.
    ///
    /// # Cancel safety
    ///
    /// Cancelling before it completes leaves nothing running: the listener is only
    /// spawned at the end. On-disk recovery already performed stays performed.
    pub async fn start(config: BrokerConfig) -> Result<BrokerHandle, BrokerError> {
        Broker::start_with(config, NodeMode::Standalone).await
    }

    /// Starts a node, standalone or a replica in a cluster.
    pub(crate) async fn start_with(
        config: BrokerConfig,
        mode: NodeMode,
    ) -> Result<BrokerHandle, BrokerError> {
        let listeners = config.listeners();
        check_names(listeners.iter().map(|l| l.name.as_str()))?;
        let mut tls = Vec::with_capacity(listeners.len());
        for l in &listeners {
            let acceptor = l
                .security
                .validate()
                .map_err(|e| BrokerError::Config(format!("listener {}: {e}", l.name)))?;
            tls.push(acceptor);
        }
        if config.default_num_partitions < 1 {
            return Err(BrokerError::Config(
                "default_num_partitions must be at least 1".into(),
            ));
        }
        let mut sockets = Vec::with_capacity(listeners.len());
        let mut endpoints = Vec::with_capacity(listeners.len());
        for l in &listeners {
            let bind_err = |source| BrokerError::Bind {
                addr: l.listen,
                source,
            };
            let socket = config.env.net.bind(l.listen).await.map_err(bind_err)?;
            let addr = socket.local_addr().map_err(bind_err)?;
            endpoints.push(Endpoint {
                name: l.name.clone(),
                host: l
                    .advertised_host
                    .clone()
                    .unwrap_or_else(|| addr.ip().to_string()),
                port: i32::from(l.advertised_port.unwrap_or(addr.port())),
                protocol: l.security.protocol,
            });
            sockets.push((socket, addr));
        }
        // SCRAM users are the node's, whichever listener's settings named them.
        let scram = Arc::new(ScramStore::default());
        for l in &listeners {
            for (user, credential) in l.security.sasl.scram_users() {
                scram.upsert(user, credential.clone()).map_err(|_| {
                    BrokerError::Config(format!(
                        "more than {} SCRAM credentials",
                        crate::security::MAX_SCRAM_CREDENTIALS
                    ))
                })?;
            }
        }
        let cfg = config.clone();
        let advertised = endpoints.clone();
        let node_scram = scram.clone();
        let state =
            baton_env::spawn_blocking(move || BrokerState::open(cfg, advertised, node_scram, mode))
                .await
                .map_err(|e| BrokerError::Config(format!("start-up task failed: {e}")))??;
        let state = Arc::new(state);
        let (stop_tx, stop_rx) = watch::channel(false);
        crate::txn::driver::start(&state, &stop_rx);
        crate::cleaner::start(&state, &stop_rx);
        crate::maintenance::start(&state, &stop_rx);
        // One limiter for every listener: the limits are the node's.
        let limiter = ConnectionLimiter::new(
            config.limits.max_connections,
            config.limits.max_connections_per_ip,
        );
        let mut bound = Vec::with_capacity(listeners.len());
        let mut accept = Vec::with_capacity(listeners.len());
        for (index, ((l, (socket, addr)), tls)) in
            listeners.iter().zip(sockets).zip(tls).enumerate()
        {
            let refusals = Arc::new(RefusalCounters::default());
            let options = ServeOptions {
                name: "broker",
                listener: l.name.clone(),
                max_frame_bytes: config.max_frame_bytes,
                limiter: limiter.clone(),
                refusals: refusals.clone(),
                shutdown_grace: SHUTDOWN_GRACE,
                security: Arc::new(l.security.clone().on_clock(state.clock.clone())),
                scram: scram.clone(),
                tls,
                metrics: Some(state.metrics.clone()),
            };
            let dispatch = Arc::new(BrokerDispatch {
                state: state.clone(),
                listener: index,
            });
            accept.push(tokio::spawn(serve(
                socket,
                dispatch,
                options,
                stop_rx.clone(),
            )));
            tracing::info!(
                %addr,
                node_id = config.node_id,
                listener = %l.name,
                security = %l.security.protocol,
                "broker listening"
            );
            bound.push(BoundListener {
                name: l.name.clone(),
                addr,
                refusals,
            });
        }
        let mut metrics_addr = None;
        if let Some(addr) = config.metrics_listen {
            let st = state.clone();
            let render = Arc::new(move || crate::metrics::snapshot(&st).to_prometheus());
            let (bound, task) = crate::metrics::http::start(addr, render, stop_rx.clone())
                .await
                .map_err(|source| BrokerError::Bind { addr, source })?;
            metrics_addr = Some(bound);
            accept.push(task);
        }
        Ok(BrokerHandle {
            listeners: bound,
            state,
            stop: stop_tx,
            accept,
            metrics_addr,
        })
    }
}

/// One bound listener of a running node.
#[derive(Debug)]
struct BoundListener {
    name: String,
    addr: SocketAddr,
    refusals: Arc<RefusalCounters>,
}

/// A running broker node. Dropping it without [`BrokerHandle::shutdown`] aborts its
/// tasks without flushing, like a crash (data written so far stays in the OS cache).
#[derive(Debug)]
pub struct BrokerHandle {
    /// Invariant: not empty; the first is the listener set up by
    /// `BrokerConfig::listen` and `BrokerConfig::security`.
    listeners: Vec<BoundListener>,
    state: Arc<BrokerState>,
    stop: watch::Sender<bool>,
    accept: Vec<tokio::task::JoinHandle<()>>,
    /// The metrics endpoint's bound address, when `BrokerConfig::metrics_listen`
    /// asked for one.
    metrics_addr: Option<SocketAddr>,
}

impl BrokerHandle {
    /// The address the Prometheus endpoint (`GET /metrics`) is bound to; `None`
    /// unless `BrokerConfig::metrics_listen` is set.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// A snapshot of this node's metrics: the numbers its endpoint shows
    /// (available whether or not the endpoint runs).
    pub fn metrics(&self) -> crate::metrics::BrokerMetrics {
        crate::metrics::snapshot(&self.state)
    }

    /// The address the first listener (`BrokerConfig::listen`) is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.listeners[0].addr
    }

    /// The address the listener named `name` (compared ignoring case) is bound
    /// to.
    pub fn listener_addr(&self, name: &str) -> Option<SocketAddr> {
        self.listener(name).map(|l| l.addr)
    }

    /// Every listener's name and bound address, the first listener first.
    pub fn listener_addrs(&self) -> Vec<(String, SocketAddr)> {
        self.listeners
            .iter()
            .map(|l| (l.name.clone(), l.addr))
            .collect()
    }

    /// How many connections the listener named `name` has closed because they
    /// broke its rules (a limit, TLS, SASL, a request before authentication, a
    /// bad frame), by reason.
    pub fn refused_connections(&self, name: &str) -> Option<RefusedConnections> {
        self.listener(name).map(|l| l.refusals.snapshot())
    }

    fn listener(&self, name: &str) -> Option<&BoundListener> {
        self.listeners
            .iter()
            .find(|l| l.name.eq_ignore_ascii_case(name))
    }

    /// The node's shared state.
    pub(crate) fn state(&self) -> &Arc<BrokerState> {
        &self.state
    }

    /// `"host:port"` of the first listener, for a client's bootstrap servers.
    pub fn bootstrap(&self) -> String {
        self.local_addr().to_string()
    }

    /// Stops accepting, lets connections send the replies they owe (up to a grace
    /// period), closes them, and flushes every log.
    ///
    /// # Cancel safety
    ///
    /// If cancelled, the broker is still told to stop and its tasks are aborted when
    /// the handle is dropped; logs are then not flushed.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        for accept in std::mem::take(&mut self.accept) {
            let _ = accept.await;
        }
        let state = self.state.clone();
        let _ = baton_env::spawn_blocking(move || state.flush_all()).await;
        tracing::info!(addr = %self.local_addr(), "broker stopped");
    }
}

impl Drop for BrokerHandle {
    fn drop(&mut self) {
        for accept in &self.accept {
            accept.abort();
        }
    }
}

/// What a server does with each request frame of a connection: the broker's
/// handlers, or the controller's.
pub(crate) trait Dispatch: Send + Sync + 'static {
    /// Handles one request frame; `Err` closes the connection with its reason.
    /// `stop` turns true when the server stops (long polls end early); `ctx` names
    /// the connection's principal and client address.
    fn dispatch(
        &self,
        frame: Bytes,
        ctx: &RequestContext,
        stop: &watch::Receiver<bool>,
    ) -> impl Future<Output = Result<Reply, DispatchError>> + Send;
}

/// The broker's requests go to its handlers, which answer with the endpoints of
/// the listener the request arrived on.
#[derive(Debug)]
struct BrokerDispatch {
    state: Arc<BrokerState>,
    /// Index of the listener in `BrokerState::listeners`.
    listener: usize,
}

impl Dispatch for BrokerDispatch {
    async fn dispatch(
        &self,
        frame: Bytes,
        ctx: &RequestContext,
        stop: &watch::Receiver<bool>,
    ) -> Result<Reply, DispatchError> {
        handlers::dispatch(&self.state, self.listener, frame, ctx, stop).await
    }
}

/// How a [`serve`] loop treats its connections.
#[derive(Debug, Clone)]
pub(crate) struct ServeOptions {
    /// Names the server in logs (`"broker"`, `"controller"`).
    pub name: &'static str,
    /// Names the listener in logs.
    pub listener: String,
    /// Frames larger than this close their connection before they are buffered.
    pub max_frame_bytes: usize,
    /// Open connections at most, in total and per client IP, shared by every
    /// listener of the node; one more is closed at once.
    pub limiter: Arc<ConnectionLimiter>,
    /// Counts the connections this listener closes for breaking its rules.
    pub refusals: Arc<RefusalCounters>,
    /// How long a stopping server lets connections send the replies they owe.
    pub shutdown_grace: Duration,
    /// The listener's security protocol and SASL settings; every connection's
    /// requests pass its authentication gate (`security::ConnectionAuth`).
    pub security: Arc<ListenerSecurity>,
    /// The node's SCRAM users, shared by all its SASL listeners.
    pub scram: Arc<ScramStore>,
    /// The TLS configuration of an `SSL` or `SASL_SSL` listener; the handshake
    /// runs in the connection's task, within [`TLS_HANDSHAKE_TIMEOUT`].
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// The node's counters (connections, bytes, requests and their latency);
    /// `None` counts nothing (the controller).
    pub metrics: Option<Arc<NodeMetrics>>,
}

/// A request's API key, version and arrival, for its count and latency once its
/// reply is written.
#[derive(Debug, Clone, Copy)]
struct RequestTag {
    api_key: i16,
    version: i16,
    read_at: Instant,
}

impl RequestTag {
    /// The tag of a request frame (API key and version are its first four
    /// bytes); `None` for a frame too short to name them.
    fn of(frame: &[u8]) -> Option<RequestTag> {
        let head = frame.get(..4)?;
        Some(RequestTag {
            api_key: i16::from_be_bytes([head[0], head[1]]),
            version: i16::from_be_bytes([head[2], head[3]]),
            read_at: Instant::now(),
        })
    }

    fn count(self, metrics: Option<&NodeMetrics>) {
        if let Some(m) = metrics {
            m.request(self.api_key, self.version, self.read_at.elapsed());
        }
    }
}

/// Counts a connection closed when dropped, however its task ends.
struct ClosedOnDrop(Option<Arc<NodeMetrics>>);

impl Drop for ClosedOnDrop {
    fn drop(&mut self) {
        if let Some(m) = &self.0 {
            crate::metrics::inc(&m.connections_closed);
        }
    }
}

/// Accepts connections on `listener` until `stop` turns true, within the
/// connection limits, and serves each: a reader that hands every frame to
/// `dispatch` in turn, and a writer that sends the replies in request order.
pub(crate) async fn serve<D: Dispatch>(
    listener: Listener,
    dispatch: Arc<D>,
    options: ServeOptions,
    mut stop: watch::Receiver<bool>,
) {
    let limiter = options.limiter.clone();
    let mut refused = RefusalLog::default();
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            res = listener.accept() => match res {
                Ok((stream, peer)) => {
                    let slot = match limiter.try_acquire(peer.ip()) {
                        Ok(slot) => slot,
                        Err(why) => {
                            // Dropping the stream closes it before anything is read.
                            refused.note(peer, why);
                            options.refusals.count(RefusalReason::ConnectionLimit);
                            continue;
                        }
                    };
                    stream.set_nodelay();
                    if let Some(m) = &options.metrics {
                        crate::metrics::inc(&m.connections_accepted);
                    }
                    let closed = ClosedOnDrop(options.metrics.clone());
                    let (dispatch, options, stop) = (dispatch.clone(), options.clone(), stop.clone());
                    conns.spawn(async move {
                        // Held for as long as the connection's task lives; dropped
                        // however it ends, panics and aborts included.
                        let _slot = (slot, closed);
                        match options.tls.clone() {
                            None => {
                                // TCP splits into owned halves without a lock between them.
                                let (rd, wr) = stream.into_split();
                                serve_connection(rd, wr, peer, None, dispatch, options, stop).await;
                            }
                            Some(config) => {
                                let acceptor = TlsAcceptor::from(config);
                                let stream = BufReader::with_capacity(TLS_READ_BUFFER, stream);
                                let Some(tls) = accept_tls(&acceptor, stream, peer, &options).await else {
                                    options.refusals.count(RefusalReason::TlsHandshake);
                                    return;
                                };
                                let principal = certificate_user(&tls, &options.security);
                                let (rd, wr) = tokio::io::split(tls);
                                serve_connection(rd, wr, peer, principal, dispatch, options, stop).await;
                            }
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!(server = options.name, error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(listener);
    let drain = async { while conns.join_next().await.is_some() {} };
    if tokio::time::timeout(options.shutdown_grace, drain)
        .await
        .is_err()
    {
        conns.shutdown().await;
    }
}

/// Runs the TLS handshake of a new connection and sets its send buffer to
/// [`TLS_SEND_BUFFER`]; `None` (after a log line) when it fails or times out, the
/// connection then being dropped.
async fn accept_tls(
    acceptor: &TlsAcceptor,
    stream: BufReader<Socket>,
    peer: SocketAddr,
    options: &ServeOptions,
) -> Option<TlsStream<BufReader<Socket>>> {
    let (server, listener) = (options.name, options.listener.as_str());
    match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(mut tls)) => {
            tls.get_mut().1.set_buffer_limit(Some(TLS_SEND_BUFFER));
            Some(tls)
        }
        Ok(Err(e)) => {
            tracing::warn!(server, listener, %peer, reason = %e, "closing connection: TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::warn!(server, listener, %peer, "closing connection: TLS handshake timed out");
            None
        }
    }
}

/// On an `SSL` listener, the principal of the client's certificate, if it sent
/// one (on `SASL_SSL` the SASL user is the principal, as in Kafka).
fn certificate_user(
    tls: &TlsStream<BufReader<Socket>>,
    security: &ListenerSecurity,
) -> Option<String> {
    if security.protocol != SecurityProtocol::Ssl {
        return None;
    }
    let certificate = tls.get_ref().1.peer_certificates()?.first()?;
    certificate_principal(certificate.as_ref())
}

/// Serves one connection over its read and write halves (TCP's or a TLS stream's);
/// `principal` is its certificate's, if any (else anonymous until SASL).
async fn serve_connection<D, R, W>(
    mut rd: R,
    wr: W,
    peer: SocketAddr,
    principal: Option<String>,
    dispatch: Arc<D>,
    options: ServeOptions,
    mut stop: watch::Receiver<bool>,
) where
    D: Dispatch,
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let codec = FrameCodec::new(options.max_frame_bytes);
    let (tx, rx) = mpsc::channel::<(Reply, Option<RequestTag>)>(MAX_IN_FLIGHT);
    let metrics = options.metrics.clone();
    let reader = async move {
        let mut buf = BytesMut::new();
        let mut auth = ConnectionAuth::new(&options.security, options.scram.clone());
        let mut ctx = match principal {
            Some(p) => RequestContext::new(&p, peer.ip()),
            None => RequestContext::anonymous(peer.ip()),
        };
        loop {
            match next_frame(&codec, &mut buf) {
                Ok(Some(frame)) => {
                    let tag = RequestTag::of(&frame);
                    let bad = RefusalReason::BadRequest;
                    let admission = auth.admit(frame);
                    let failed_authentication =
                        matches!(admission, Ok(Admission::AnswerAndClose(..)));
                    let (reply, close) = match admission {
                        Ok(Admission::Dispatch(frame)) => {
                            if let Some(user) = auth.principal() {
                                if ctx.principal.strip_prefix("User:") != Some(user) {
                                    ctx = RequestContext::new(&format!("User:{user}"), peer.ip());
                                }
                            }
                            match dispatch.dispatch(frame, &ctx, &stop).await {
                                Ok(reply) => (Some(reply), None),
                                Err(reason) => (None, Some((bad, reason.to_string()))),
                            }
                        }
                        Ok(Admission::Answer(bytes)) => (Some(Reply::Now(Some(bytes))), None),
                        Ok(Admission::AnswerAndClose(bytes, why, reason)) => {
                            (Some(Reply::Now(Some(bytes))), Some((why, reason)))
                        }
                        Ok(Admission::Close(why, reason)) => (None, Some((why, reason))),
                        Err(reason) => (None, Some((bad, reason.to_string()))),
                    };
                    if let Some(reply) = reply {
                        if tx.send((reply, tag)).await.is_err() {
                            return;
                        }
                    } else if let Some(tag) = tag {
                        tag.count(options.metrics.as_deref());
                    }
                    if let Some((why, reason)) = close {
                        options.refusals.count(why);
                        tracing::warn!(
                            server = options.name,
                            listener = %options.listener,
                            %peer,
                            refusal = why.name(),
                            %reason,
                            "closing connection"
                        );
                        if failed_authentication {
                            tokio::select! {
                                _ = tokio::time::sleep(FAILED_AUTHENTICATION_DELAY) => {}
                                _ = stop.changed() => {}
                            }
                        }
                        return;
                    }
                    continue;
                }
                Ok(None) => {}
                Err(e) => {
                    options.refusals.count(RefusalReason::BadRequest);
                    tracing::warn!(
                        server = options.name,
                        listener = %options.listener,
                        %peer,
                        reason = %e,
                        "closing connection: bad frame"
                    );
                    return;
                }
            }
            make_room(&codec, &mut buf);
            tokio::select! {
                r = rd.read_buf(&mut buf) => match r {
                    Ok(0) => {
                        if !buf.is_empty() {
                            tracing::warn!(%peer, pending = buf.len(), "connection closed mid-frame");
                        }
                        return;
                    }
                    Ok(n) => {
                        if let Some(m) = &options.metrics {
                            m.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
                        }
                    }
                    Err(e) => {
                        tracing::debug!(%peer, error = %e, "read failed");
                        return;
                    }
                },
                _ = stop.changed() => return,
            }
        }
    };
    let writer = write_replies(wr, rx, peer, metrics);
    tokio::join!(reader, writer);
}

/// Takes the next complete frame's body out of `buf`. A frame that is all of `buf`
/// and fills its allocation is handed over whole, so it owns its memory alone (a
/// Produce request's batches are then stored without a copy); others are split off
/// and share the read buffer.
fn next_frame(codec: &FrameCodec, buf: &mut BytesMut) -> Result<Option<Bytes>, DecodeError> {
    let Some(n) = codec.check(buf)? else {
        return Ok(None);
    };
    if buf.len() == n + 4 && buf.capacity() <= buf.len() + buf.len() / 8 {
        let mut frame = std::mem::take(buf);
        frame.advance(4);
        return Ok(Some(frame.freeze()));
    }
    codec.decode(buf)
}

/// Makes room in `buf` for the next read. Small frames are read into a shared
/// [`READ_CHUNK`] buffer, several per read. A frame larger than that gets a buffer of
/// its own, allocated at its exact size once [`FRAME_GROWTH`] times the bytes received
/// cover it (growing towards it before that), and reads fill it up to the frame's end
/// and no further; so large frames arrive with at most a small copy of their first
/// bytes, and each owns its memory.
fn make_room(codec: &FrameCodec, buf: &mut BytesMut) {
    let wanted = codec.wanted(buf);
    let spare = buf.capacity() - buf.len();
    if buf.len() >= 4 && buf.len() + wanted > READ_CHUNK {
        if spare >= wanted {
            return;
        }
        let frame = buf.len() + wanted;
        let target = frame.min(buf.len().saturating_mul(FRAME_GROWTH).max(READ_CHUNK));
        let mut own = BytesMut::with_capacity(target);
        own.extend_from_slice(buf);
        *buf = own;
    } else if spare < wanted.max(MIN_READ) {
        buf.reserve(READ_CHUNK);
    }
}

async fn write_replies<W: AsyncWrite + Unpin>(
    mut wr: W,
    mut rx: mpsc::Receiver<(Reply, Option<RequestTag>)>,
    peer: SocketAddr,
    metrics: Option<Arc<NodeMetrics>>,
) {
    while let Some((reply, tag)) = rx.recv().await {
        let bytes = match reply {
            Reply::Now(b) => b,
            Reply::Later(rx) => rx.await.ok().flatten(),
        };
        if let Some(b) = bytes {
            if let Err(e) = wr.write_all(&b).await {
                tracing::debug!(%peer, error = %e, "write failed");
                return;
            }
            if let Some(m) = &metrics {
                m.bytes_out.fetch_add(b.len() as u64, Ordering::Relaxed);
            }
        }
        if let Some(tag) = tag {
            tag.count(metrics.as_deref());
        }
    }
    let _ = wr.shutdown().await;
}
