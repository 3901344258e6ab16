//! A frame-aware TCP proxy in front of one listener (a node or the controller).
//!
//! Every accepted connection is classified by the client id of its first request:
//! `replica-N`, `node-N`, `node-N-metadata`, `node-N-reports` come from node `N`,
//! anything else from a client. Each direction of a connection is pumped frame by
//! frame through the proxy's [`Flow`] rules, so a partition holds frames (the sockets
//! stay open, as when a network drops packets) and latency delays them. Request faults
//! act on request frames: an injected error is answered by the proxy itself, "drop the
//! response" forwards the request and closes the connection when its response comes
//! back, and a delayed response is held before it is written.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_protocol::frame::DEFAULT_MAX_FRAME;
use baton_protocol::messages::{
    FetchRequest, FetchResponse, FetchResponsePartitionData, FetchableTopicResponse,
    PartitionProduceResponse, ProduceRequest, ProduceResponse, TopicProduceResponse,
};
use baton_protocol::primitives::Decoder;
use baton_protocol::{envelope, FrameCodec, Message, RequestHeader};
use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::kinds::{Direction, Flow, Peer, RequestFault, RequestFaultAction};
use crate::cluster::driver::node::AbortOnDrop;
use crate::error::BrokerError;

/// The rules of one proxy, shared with its connections.
#[derive(Debug, Default)]
pub(crate) struct ProxyRules {
    /// Per (source, direction) flow; missing means [`Flow::Pass`].
    flows: HashMap<(Peer, Direction), Flow>,
    /// Holds every frame in both directions (a paused target).
    paused: bool,
    /// Nodes whose connections are held (paused nodes).
    paused_peers: std::collections::HashSet<i32>,
    /// Request faults, consumed in order.
    requests: Vec<RequestFault>,
}

#[derive(Debug)]
pub(crate) struct ProxyShared {
    /// Where connections are forwarded (changes when the target restarts).
    target: Mutex<SocketAddr>,
    rules: Mutex<ProxyRules>,
    /// Bumped after every rule change, waking held frames.
    changed: watch::Sender<u64>,
}

/// A running proxy; dropping it stops accepting and closes its connections.
#[derive(Debug)]
pub(crate) struct Proxy {
    pub addr: SocketAddr,
    pub shared: Arc<ProxyShared>,
    _accept: AbortOnDrop,
}

impl Proxy {
    /// Binds `listen` and forwards to `target`.
    pub(crate) async fn start(
        listen: SocketAddr,
        target: SocketAddr,
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
        let shared = Arc::new(ProxyShared {
            target: Mutex::new(target),
            rules: Mutex::new(ProxyRules::default()),
            changed: watch::Sender::new(0),
        });
        let accept = AbortOnDrop(tokio::spawn(accept_loop(listener, shared.clone())));
        Ok(Proxy {
            addr,
            shared,
            _accept: accept,
        })
    }
}

impl ProxyShared {
    pub(crate) fn set_target(&self, addr: SocketAddr) {
        *self.target.lock().unwrap_or_else(|p| p.into_inner()) = addr;
    }

    pub(crate) fn update(&self, f: impl FnOnce(&mut ProxyRules)) {
        f(&mut self.rules.lock().unwrap_or_else(|p| p.into_inner()));
        self.changed.send_modify(|g| *g += 1);
    }

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
    async fn gate(&self, peer: Peer, dir: Direction, read_at: Instant) {
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
    fn request_action(
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
    /// Forward the target's next response, after `delay`; with `drop`, close instead.
    Forward { delay: Duration, drop: bool },
}

async fn connection(client: TcpStream, shared: Arc<ProxyShared>) -> std::io::Result<()> {
    let codec = FrameCodec::new(DEFAULT_MAX_FRAME.max(64 << 20));
    let (mut cr, mut cw) = client.into_split();
    let mut cbuf = BytesMut::new();
    let Some(first) = read_frame(&mut cr, &mut cbuf, &codec).await? else {
        return Ok(());
    };
    let peer = classify(&first);
    let target = *shared.target.lock().unwrap_or_else(|p| p.into_inner());
    let server = TcpStream::connect(target).await?;
    let _ = server.set_nodelay(true);
    let (mut sr, mut sw) = server.into_split();
    let (to_server_tx, mut to_server_rx) = mpsc::unbounded_channel::<(Instant, Bytes)>();
    let (pending_tx, mut pending_rx) = mpsc::unbounded_channel::<Pending>();
    let (responses_tx, mut responses_rx) = mpsc::unbounded_channel::<(Instant, Bytes)>();

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
                route_request(&shared, frame, at, &to_server_tx, &pending_tx);
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
                    Pending::Forward { delay, drop } => {
                        let Some((at, f)) = responses_rx.recv().await else {
                            return Ok(());
                        };
                        if drop {
                            tracing::info!("fault: response dropped, closing the connection");
                            return Ok(());
                        }
                        if !delay.is_zero() {
                            tokio::time::sleep(delay).await;
                        }
                        (at, f)
                    }
                };
                shared.gate(peer, Direction::FromTarget, at).await;
                write_all(&mut cw, &frame).await?;
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

async fn write_all(w: &mut OwnedWriteHalf, frame: &[u8]) -> std::io::Result<()> {
    w.write_all(frame).await
}

fn route_request(
    shared: &ProxyShared,
    frame: Bytes,
    at: Instant,
    to_server: &mpsc::UnboundedSender<(Instant, Bytes)>,
    pending: &mpsc::UnboundedSender<Pending>,
) {
    let body = frame.slice(4..);
    let Ok((api_key, version, correlation_id)) = RequestHeader::peek(&body) else {
        let _ = to_server.send((at, frame));
        return;
    };
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
                return;
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
        let _ = pending.send(Pending::Forward { delay, drop });
    }
    let _ = to_server.send((at, frame));
}

fn produce_acks(body: &Bytes, version: i16) -> Option<i16> {
    let (_, req) = envelope::decode_request::<ProduceRequest>(body.clone(), version).ok()?;
    Some(req.acks)
}

/// Whether a Produce or Fetch request names `topic`/`partition` (other APIs: never).
fn request_touches(api_key: i16, body: &Bytes, version: i16, topic: &str, partition: i32) -> bool {
    if api_key == ProduceRequest::API_KEY {
        if let Ok((_, req)) = envelope::decode_request::<ProduceRequest>(body.clone(), version) {
            return req
                .topic_data
                .iter()
                .any(|t| t.name == topic && t.partition_data.iter().any(|p| p.index == partition));
        }
    } else if api_key == FetchRequest::API_KEY {
        if let Ok((_, req)) = envelope::decode_request::<FetchRequest>(body.clone(), version) {
            return req.topics.iter().any(|t| {
                t.topic == topic && t.partitions.iter().any(|p| p.partition == partition)
            });
        }
    }
    false
}

/// The proxy's own answer to a Produce or Fetch request: `code` for every partition.
fn error_response(
    api_key: i16,
    body: &Bytes,
    version: i16,
    correlation_id: i32,
    code: i16,
) -> Option<Bytes> {
    if api_key == ProduceRequest::API_KEY {
        let (_, req) = envelope::decode_request::<ProduceRequest>(body.clone(), version).ok()?;
        let resp = ProduceResponse {
            responses: req
                .topic_data
                .iter()
                .map(|t| TopicProduceResponse {
                    name: t.name.clone(),
                    partition_responses: t
                        .partition_data
                        .iter()
                        .map(|p| PartitionProduceResponse {
                            index: p.index,
                            error_code: code,
                            base_offset: -1,
                            ..Default::default()
                        })
                        .collect(),
                })
                .collect(),
            ..Default::default()
        };
        return envelope::encode_response::<ProduceRequest>(correlation_id, version, &resp).ok();
    }
    if api_key == FetchRequest::API_KEY {
        let (_, req) = envelope::decode_request::<FetchRequest>(body.clone(), version).ok()?;
        let resp = FetchResponse {
            responses: req
                .topics
                .iter()
                .map(|t| FetchableTopicResponse {
                    topic: t.topic.clone(),
                    topic_id: t.topic_id,
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| FetchResponsePartitionData {
                            partition_index: p.partition,
                            error_code: code,
                            high_watermark: -1,
                            ..Default::default()
                        })
                        .collect(),
                })
                .collect(),
            ..Default::default()
        };
        return envelope::encode_response::<FetchRequest>(correlation_id, version, &resp).ok();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(client_id: Option<&str>) -> Vec<u8> {
        let mut b = BytesMut::new();
        RequestHeader {
            api_key: 1,
            api_version: 12,
            correlation_id: 7,
            client_id: client_id.map(str::to_owned),
        }
        .encode(&mut b, 2);
        let mut out = (b.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(&b);
        out
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
