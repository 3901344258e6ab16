//! A broker behind a recording proxy, and a client connected through it.
//!
//! The broker listens on 127.0.0.2 and advertises 127.0.0.1 on the same port,
//! where the proxy listens: every connection the client makes (bootstrap and the
//! advertised address alike) goes through the proxy. The proxy is
//! [`baton_broker::faults::proxy`] in lock step (a request, then its response),
//! with a [`Tap`] that logs every request's API key and each Produce request's
//! batches, loses the response to chosen Produce requests after the broker wrote
//! them, rewrites responses and holds them back (as a coordinator that parks a
//! JoinGroup does). (All of 127.0.0.0/8 is loopback on Linux; macOS needs
//! `ifconfig lo0 alias 127.0.0.2` first.)

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_broker::faults::proxy::{
    self, HoldFuture, Proxy, ProxyOptions, Reply, RequestFrame, Tap, Verdict,
};
use baton_broker::{Broker, BrokerConfig, BrokerHandle};
use baton_kafka::Client;
use baton_protocol::messages::ProduceRequest;
use baton_protocol::{envelope, Message, Request};
use bytes::Bytes;

/// One batch of one Produce request, as the proxy saw it.
#[derive(Debug, Clone)]
pub struct SeenBatch {
    /// Which Produce request (0, 1, ...) carried it.
    pub request: usize,
    /// The partition the batch is for.
    pub partition: i32,
    /// The batch's bytes as sent.
    pub bytes: Bytes,
}

/// What a response rewrite is told about the exchange.
#[derive(Debug, Clone, Copy)]
pub struct Exchange {
    /// The request's API key.
    pub api_key: i16,
    /// The request's API version.
    pub version: i16,
    /// The Produce request's number, for Produce requests.
    pub produce: Option<usize>,
}

/// Turns a response frame (without its length prefix) into the one the client gets.
pub type Rewrite = Box<dyn FnMut(Exchange, Vec<u8>) -> Vec<u8> + Send>;

/// For a [`Rewrite`]: decodes the response `frame` (without its length prefix) of
/// a request of type `R` at `version`, lets `edit` change it, and encodes it again
/// (without its length prefix, under the same correlation id).
pub fn rewrite_response<R: Request>(
    frame: &[u8],
    version: i16,
    edit: impl FnOnce(&mut R::Response),
) -> Vec<u8> {
    let (header, mut resp) = envelope::decode_response::<R>(Bytes::copy_from_slice(frame), version)
        .expect("a response the broker encoded decodes");
    edit(&mut resp);
    envelope::encode_response::<R>(header.correlation_id, version, &resp)
        .expect("the edited response encodes")[4..]
        .to_vec()
}

/// Decides from the exchange and the (rewritten) response frame whether the
/// response waits before reaching the client: it is relayed once the returned
/// future completes.
pub type Hold = Box<dyn FnMut(Exchange, &[u8]) -> Option<HoldFuture> + Send>;

/// What the proxy logs and does.
#[derive(Default)]
#[allow(missing_debug_implementations)] // holds closures
pub struct ProxyState {
    /// Every Produce batch seen, in order.
    pub batches: Vec<SeenBatch>,
    /// Produce requests seen so far.
    pub produce_requests: usize,
    /// API keys of the requests, in order.
    pub api_keys: Vec<i16>,
    /// Produce requests (by number) whose response is lost: the proxy forwards the
    /// request, reads the broker's response, then closes both connections.
    pub lose_responses: Vec<usize>,
    /// Applied to every response that is not lost.
    pub rewrite: Option<Rewrite>,
    /// Asked about every response after `rewrite`.
    pub hold: Option<Hold>,
}

impl ProxyState {
    /// Loses the responses to the Produce requests numbered `requests`.
    pub fn losing(requests: Vec<usize>) -> ProxyState {
        ProxyState {
            lose_responses: requests,
            ..ProxyState::default()
        }
    }
}

/// A broker behind a recording proxy, and a client connected through it.
#[allow(missing_debug_implementations)] // holds the proxy's closures
pub struct Proxied {
    /// The broker, on 127.0.0.2.
    pub broker: BrokerHandle,
    /// What the proxy logs and does, shared with its connections.
    pub state: Arc<Mutex<ProxyState>>,
    /// A client connected through the proxy.
    pub client: Client,
    proxy: Proxy,
}

impl Proxied {
    /// Starts an in-memory broker on 127.0.0.2, the proxy with `state` on
    /// 127.0.0.1, and a client named `client_id` through it.
    pub async fn start(client_id: &str, state: ProxyState) -> Proxied {
        let listen: SocketAddr = "127.0.0.2:0".parse().unwrap();
        let broker = Broker::start(
            BrokerConfig::in_memory()
                .with_listen(listen)
                .with_advertised_host("127.0.0.1"),
        )
        .await
        .expect("broker starts on 127.0.0.2");
        let upstream = broker.local_addr();
        let proxy_addr = SocketAddr::new("127.0.0.1".parse().unwrap(), upstream.port());
        let state = Arc::new(Mutex::new(state));
        let recorder = Recorder {
            state: state.clone(),
        };
        let options = ProxyOptions::default().tap(Arc::new(recorder)).lock_step();
        let proxy = Proxy::start_with(proxy_addr, upstream, options)
            .await
            .expect("proxy binds the broker's port on 127.0.0.1");
        let client = Client::builder([proxy_addr.to_string()])
            .client_id(client_id)
            .request_timeout(Duration::from_secs(10))
            .build()
            .await
            .expect("client connects through the proxy");
        Proxied {
            broker,
            state,
            client,
            proxy,
        }
    }

    /// The Produce batches seen so far.
    pub fn batches(&self) -> Vec<SeenBatch> {
        self.state.lock().unwrap().batches.clone()
    }

    /// Stops the proxy and the broker.
    pub async fn shutdown(self) {
        drop(self.proxy);
        self.broker.shutdown().await;
    }
}

/// The proxy's tap: logs and loses as the state says, then rewrites and holds.
struct Recorder {
    state: Arc<Mutex<ProxyState>>,
}

impl Tap for Recorder {
    fn request(&self, request: &RequestFrame) -> Verdict {
        let mut st = self.state.lock().unwrap();
        st.api_keys.push(request.api_key);
        if request.api_key != ProduceRequest::API_KEY {
            return Verdict::default();
        }
        let n = st.produce_requests;
        st.produce_requests += 1;
        let decoded =
            envelope::decode_request::<ProduceRequest>(request.frame.clone(), request.version);
        for topic in decoded.map(|(_, r)| r.topic_data).unwrap_or_default() {
            for p in topic.partition_data {
                st.batches.push(SeenBatch {
                    request: n,
                    partition: p.index,
                    bytes: p.records.unwrap_or_default().into_bytes(),
                });
            }
        }
        Verdict {
            lose_response: st.lose_responses.contains(&n),
            tag: Some(n as u64),
        }
    }

    fn response(&self, exchange: proxy::Exchange, frame: Bytes) -> Reply {
        let exchange = Exchange {
            api_key: exchange.api_key,
            version: exchange.version,
            produce: exchange.tag.map(|n| n as usize),
        };
        let mut st = self.state.lock().unwrap();
        let frame = match st.rewrite.as_mut() {
            Some(rewrite) => Bytes::from(rewrite(exchange, frame.to_vec())),
            None => frame,
        };
        let hold = st.hold.as_mut().and_then(|hold| hold(exchange, &frame));
        Reply { frame, hold }
    }
}
