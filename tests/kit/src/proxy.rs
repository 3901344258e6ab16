//! A broker behind a recording proxy, and a client connected through it.
//!
//! The broker listens on 127.0.0.2 and advertises 127.0.0.1 on the same port,
//! where the proxy listens: every connection the client makes (bootstrap and the
//! advertised address alike) goes through the proxy. It relays each connection in
//! lock step (a request, then its response; every request must expect one, so
//! tests produce with acks above 0), logs every request's API key and each
//! Produce request's batches, can lose the response to chosen Produce requests
//! after the broker wrote them, can rewrite responses and can hold them back
//! (as a coordinator that parks a JoinGroup does). (All of 127.0.0.0/8 is
//! loopback on Linux; macOS needs `ifconfig lo0 alias 127.0.0.2` first.)

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton::Client;
use baton_broker::{Broker, BrokerConfig, BrokerHandle};
use baton_protocol::messages::ProduceRequest;
use baton_protocol::{envelope, Message, RequestHeader};
use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

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

/// Decides from the exchange and the (rewritten) response frame whether the
/// response waits before reaching the client: it is relayed once the returned
/// future completes.
pub type Hold =
    Box<dyn FnMut(Exchange, &[u8]) -> Option<Pin<Box<dyn Future<Output = ()> + Send>>> + Send>;

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
    proxy: tokio::task::JoinHandle<()>,
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
        let listener = TcpListener::bind(proxy_addr)
            .await
            .expect("proxy binds the broker's port on 127.0.0.1");
        let state = Arc::new(Mutex::new(state));
        let proxy = tokio::spawn(run_proxy(listener, upstream, state.clone()));
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
        self.proxy.abort();
        self.broker.shutdown().await;
    }
}

async fn run_proxy(listener: TcpListener, upstream: SocketAddr, state: Arc<Mutex<ProxyState>>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            return;
        };
        let state = state.clone();
        tokio::spawn(async move {
            if let Ok(broker) = TcpStream::connect(upstream).await {
                let _ = relay(client, broker, state).await;
            }
        });
    }
}

async fn read_frame(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let len = s.read_u32().await? as usize;
    let mut frame = vec![0; len];
    s.read_exact(&mut frame).await?;
    Ok(frame)
}

async fn write_frame(s: &mut TcpStream, frame: &[u8]) -> std::io::Result<()> {
    s.write_u32(frame.len() as u32).await?;
    s.write_all(frame).await
}

/// Relays one connection in lock step, logging and losing as `state` says.
async fn relay(
    mut client: TcpStream,
    mut broker: TcpStream,
    state: Arc<Mutex<ProxyState>>,
) -> std::io::Result<()> {
    loop {
        let request = read_frame(&mut client).await?;
        let (api_key, version, _) = RequestHeader::peek(&request).expect("request header");
        let mut exchange = Exchange {
            api_key,
            version,
            produce: None,
        };
        let mut lose = false;
        state.lock().unwrap().api_keys.push(api_key);
        if api_key == ProduceRequest::API_KEY {
            let (_, produce) =
                envelope::decode_request::<ProduceRequest>(Bytes::from(request.clone()), version)
                    .expect("produce request");
            let mut st = state.lock().unwrap();
            let n = st.produce_requests;
            st.produce_requests += 1;
            exchange.produce = Some(n);
            lose = st.lose_responses.contains(&n);
            for topic in produce.topic_data {
                for p in topic.partition_data {
                    st.batches.push(SeenBatch {
                        request: n,
                        partition: p.index,
                        bytes: p.records.unwrap_or_default(),
                    });
                }
            }
        }
        write_frame(&mut broker, &request).await?;
        let mut response = read_frame(&mut broker).await?;
        if lose {
            // The broker wrote the batch; the client never hears of it.
            return Ok(());
        }
        if let Some(rewrite) = state.lock().unwrap().rewrite.as_mut() {
            response = rewrite(exchange, response);
        }
        let held = state
            .lock()
            .unwrap()
            .hold
            .as_mut()
            .and_then(|hold| hold(exchange, &response));
        if let Some(held) = held {
            held.await;
        }
        write_frame(&mut client, &response).await?;
    }
}
