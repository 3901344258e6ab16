//! A recording proxy in front of one broker (baton-broker or Apache Kafka) that
//! tells what every Fetch request carried: its fetch session id and epoch
//! (KIP-227), how many partitions it named and forgot, and its rack id (KIP-392).
//!
//! Metadata answers that pass through it name the proxies as the brokers'
//! addresses, so a client bootstrapped from [`FetchTap::bootstrap`] sends all its
//! requests through them: one proxy in front of a single broker
//! ([`FetchTap::start`]), or one per node of a cluster
//! ([`FetchTap::start_cluster`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};

use baton_broker::faults::proxy::{
    Exchange, Proxy, ProxyOptions, Reply, RequestFrame, Tap, Verdict,
};
use baton_protocol::messages::{FetchRequest, MetadataRequest};
use baton_protocol::{envelope, Message};
use bytes::Bytes;

/// One Fetch request as the proxy saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenFetch {
    /// The node whose proxy saw it (`None` in front of a single broker).
    pub node: Option<i32>,
    /// The request's API version.
    pub version: i16,
    /// `session_id`: 0 for none.
    pub session_id: i32,
    /// `session_epoch`: 0 for a full request that opens a session, -1 for a
    /// sessionless one.
    pub session_epoch: i32,
    /// The partitions named in `topics`, as (topic or topic id, partition, fetch
    /// offset).
    pub partitions: Vec<(String, i32, i64)>,
    /// How many partitions `forgotten_topics_data` names.
    pub forgotten: usize,
    /// `rack_id`.
    pub rack_id: String,
}

/// A proxy in front of one broker that logs every Fetch request.
#[allow(missing_debug_implementations)] // holds the proxy
pub struct FetchTap {
    proxies: Vec<Proxy>,
    seen: Arc<Mutex<Vec<SeenFetch>>>,
}

/// Where the proxies listen: one port for every broker, or one per node id.
#[derive(Debug)]
enum Ports {
    One(u16),
    ByNode(HashMap<i32, u16>),
}

struct Recorder {
    node: Option<i32>,
    seen: Arc<Mutex<Vec<SeenFetch>>>,
    ports: Arc<OnceLock<Ports>>,
}

impl Tap for Recorder {
    fn request(&self, request: &RequestFrame) -> Verdict {
        if request.api_key == FetchRequest::API_KEY {
            if let Ok((_, r)) =
                envelope::decode_request::<FetchRequest>(request.frame.clone(), request.version)
            {
                let partitions = r
                    .topics
                    .iter()
                    .flat_map(|t| {
                        let name = if t.topic.is_empty() {
                            format!("{:?}", t.topic_id)
                        } else {
                            t.topic.clone()
                        };
                        t.partitions
                            .iter()
                            .map(move |p| (name.clone(), p.partition, p.fetch_offset))
                    })
                    .collect();
                self.seen.lock().unwrap().push(SeenFetch {
                    node: self.node,
                    version: request.version,
                    session_id: r.session_id,
                    session_epoch: r.session_epoch,
                    partitions,
                    forgotten: r
                        .forgotten_topics_data
                        .iter()
                        .map(|f| f.partitions.len())
                        .sum(),
                    rack_id: r.rack_id,
                });
            }
        }
        Verdict::default()
    }

    fn response(&self, exchange: Exchange, frame: Bytes) -> Reply {
        if exchange.api_key != MetadataRequest::API_KEY {
            return Reply::now(frame);
        }
        let Ok((header, mut resp)) =
            envelope::decode_response::<MetadataRequest>(frame.clone(), exchange.version)
        else {
            return Reply::now(frame);
        };
        for b in &mut resp.brokers {
            let port = match self.ports.get() {
                Some(Ports::One(port)) => Some(*port),
                Some(Ports::ByNode(ports)) => ports.get(&b.node_id).copied(),
                None => None,
            };
            if let Some(port) = port {
                b.host = "127.0.0.1".to_string();
                b.port = i32::from(port);
            }
        }
        match envelope::encode_response::<MetadataRequest>(
            header.correlation_id,
            exchange.version,
            &resp,
        ) {
            // Without the size prefix, which the proxy writes.
            Ok(encoded) => Reply::now(encoded.slice(4..)),
            Err(_) => Reply::now(frame),
        }
    }
}

impl FetchTap {
    /// Starts the proxy on 127.0.0.1 in front of the single broker `upstream`.
    pub async fn start(upstream: SocketAddr) -> FetchTap {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let ports = Arc::new(OnceLock::new());
        let proxy = proxy(None, upstream, &seen, &ports).await;
        let _ = ports.set(Ports::One(proxy.local_addr().port()));
        FetchTap {
            proxies: vec![proxy],
            seen,
        }
    }

    /// Starts one proxy on 127.0.0.1 in front of each `(node id, address)` of a
    /// cluster.
    pub async fn start_cluster(nodes: &[(i32, SocketAddr)]) -> FetchTap {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let ports = Arc::new(OnceLock::new());
        let mut proxies = Vec::new();
        let mut by_node = HashMap::new();
        for &(id, upstream) in nodes {
            let p = proxy(Some(id), upstream, &seen, &ports).await;
            by_node.insert(id, p.local_addr().port());
            proxies.push(p);
        }
        let _ = ports.set(Ports::ByNode(by_node));
        FetchTap { proxies, seen }
    }

    /// The proxies' addresses, to bootstrap a client from.
    pub fn bootstrap(&self) -> Vec<String> {
        self.proxies
            .iter()
            .map(|p| p.local_addr().to_string())
            .collect()
    }

    /// The Fetch requests seen so far, in order.
    pub fn fetches(&self) -> Vec<SeenFetch> {
        self.seen.lock().unwrap().clone()
    }

    /// Forgets the Fetch requests seen so far.
    pub fn clear(&self) {
        self.seen.lock().unwrap().clear();
    }
}

async fn proxy(
    node: Option<i32>,
    upstream: SocketAddr,
    seen: &Arc<Mutex<Vec<SeenFetch>>>,
    ports: &Arc<OnceLock<Ports>>,
) -> Proxy {
    let recorder = Recorder {
        node,
        seen: seen.clone(),
        ports: ports.clone(),
    };
    let options = ProxyOptions::default().tap(Arc::new(recorder));
    Proxy::start_with("127.0.0.1:0".parse().unwrap(), upstream, options)
        .await
        .expect("the fetch tap binds")
}

/// The fetch-session scenario (KIP-227), through `tap` with `client` bootstrapped
/// from it: a consumer of every one of `partitions` partitions of `topic` opens
/// a session with one full Fetch naming them all; once idle, its incremental
/// Fetches name no partition, and after records are written to `written` (and
/// read), they name only those partitions (whose fetch offsets moved), in the
/// same session with consecutive epochs and nothing forgotten.
pub async fn only_changed_partitions_are_sent(
    tap: &FetchTap,
    client: &baton_kafka::Client,
    topic: &str,
    partitions: i32,
    written: &[i32],
) {
    use std::collections::BTreeSet;
    use std::time::Duration;
    use tokio::time::Instant;

    let mut builder = baton_kafka::Consumer::builder(client).max_wait(Duration::from_millis(100));
    for p in 0..partitions {
        builder = builder.assign(topic.to_string(), p, baton_kafka::StartOffset::Earliest);
    }
    let mut consumer = builder.build().await.expect("consumer");
    let summary = |f: &[SeenFetch]| -> Vec<(i32, i32, usize, usize)> {
        f.iter()
            .map(|f| {
                (
                    f.session_id,
                    f.session_epoch,
                    f.partitions.len(),
                    f.forgotten,
                )
            })
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let before = loop {
        let f = tap.fetches();
        if f.iter()
            .any(|f| f.session_id != 0 && f.session_epoch > 0 && f.partitions.is_empty())
        {
            break f;
        }
        assert!(
            Instant::now() < deadline,
            "no idle incremental fetch: {:?}",
            summary(&f)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let first = &before[0];
    assert_eq!(
        (first.session_id, first.session_epoch),
        (0, 0),
        "the first Fetch is full and opens a session"
    );
    let named: BTreeSet<i32> = before
        .iter()
        .flat_map(|f| f.partitions.iter().map(|p| p.1))
        .collect();
    assert_eq!(
        named.len(),
        partitions as usize,
        "every partition joined the session"
    );
    let session = before.last().unwrap().session_id;
    tap.clear();

    let producer = baton_kafka::Producer::builder(client).build();
    let mut deliveries = Vec::new();
    for &p in written {
        for i in 0..5 {
            let r = baton_kafka::ProducerRecord::new(topic)
                .partition(p)
                .value(format!("{p}-{i}"));
            deliveries.push(producer.send(r).await.expect("send"));
        }
    }
    for d in deliveries {
        d.await.expect("delivered");
    }
    producer.close().await;
    let mut read: BTreeSet<(i32, i64)> = BTreeSet::new();
    while read.len() < 5 * written.len() {
        let r = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
            .await
            .expect("records arrive")
            .expect("no error");
        read.insert((r.partition, r.offset));
    }
    let want: BTreeSet<i32> = written.iter().copied().collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    let after = loop {
        let f = tap.fetches();
        let sent: BTreeSet<i32> = f
            .iter()
            .flat_map(|f| f.partitions.iter().map(|p| p.1))
            .collect();
        if sent == want && f.last().is_some_and(|f| f.partitions.is_empty()) {
            break f;
        }
        assert!(
            Instant::now() < deadline,
            "the written partitions are not sent alone: {:?} (want {want:?})",
            f.iter().map(|f| &f.partitions).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut epoch = None;
    for f in &after {
        assert_eq!(f.session_id, session, "one session: {:?}", summary(&after));
        assert_eq!(f.forgotten, 0, "nothing forgotten: {:?}", summary(&after));
        if let Some(e) = epoch {
            assert_eq!(
                f.session_epoch,
                e + 1,
                "consecutive epochs: {:?}",
                summary(&after)
            );
        }
        epoch = Some(f.session_epoch);
        for p in &f.partitions {
            assert!(
                want.contains(&p.1),
                "only changed partitions: {:?}",
                f.partitions
            );
            assert!(
                p.2 > 0,
                "sent because its fetch offset moved: {:?}",
                f.partitions
            );
        }
    }
    let total: usize = after.iter().map(|f| f.partitions.len()).sum();
    assert!(
        total < partitions as usize,
        "{total} partitions sent in {} requests",
        after.len()
    );
}

/// The follower-fetching scenario (KIP-392), through `tap` (one proxy per node)
/// with `client` bootstrapped from it: on partition 0 of `topic` (led by `leader`,
/// `follower` in sync and in `rack`), a consumer with `client_rack(rack)` reads 20
/// records, then 20 written after; every Fetch names the rack, the first ones go
/// to the leader, and from the first to the follower (which then names the
/// partition) every one goes to the follower.
pub async fn follower_in_rack_is_fetched_from(
    tap: &FetchTap,
    client: &baton_kafka::Client,
    topic: &str,
    leader: i32,
    follower: i32,
    rack: &str,
) {
    use std::time::Duration;

    let rack = rack.to_string();
    let topic = topic.to_string();
    let client = client.clone();

    let producer = baton_kafka::Producer::builder(&client).build();
    let send = |from: usize| {
        let producer = &producer;
        let topic = topic.clone();
        async move {
            let mut ds = Vec::new();
            for i in from..from + 20 {
                let r = baton_kafka::ProducerRecord::new(topic.as_str()).value(format!("r{i}"));
                ds.push(producer.send(r).await.expect("send"));
            }
            for d in ds {
                d.await.expect("delivered");
            }
        }
    };
    send(0).await;
    let mut consumer = baton_kafka::Consumer::builder(&client)
        .assign(topic.clone(), 0, baton_kafka::StartOffset::Earliest)
        .client_rack(rack.clone())
        .max_wait(Duration::from_millis(100))
        .build()
        .await
        .expect("consumer");
    let mut read = 0;
    let mut recv = async |n: usize| {
        for _ in 0..n {
            let r = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
                .await
                .expect("records arrive")
                .expect("no error");
            assert_eq!(r.offset, read);
            read += 1;
        }
    };
    recv(20).await;
    send(20).await;
    recv(20).await;
    producer.close().await;

    let fetches = tap.fetches();
    let summary: Vec<(Option<i32>, usize)> = fetches
        .iter()
        .map(|f| (f.node, f.partitions.len()))
        .collect();
    assert!(
        fetches.iter().all(|f| f.rack_id == rack),
        "every Fetch names the rack"
    );
    let first_to_follower = fetches
        .iter()
        .position(|f| f.node == Some(follower))
        .unwrap_or_else(|| panic!("no Fetch to follower {follower}: {summary:?}"));
    assert_eq!(
        fetches[first_to_follower].partitions.len(),
        1,
        "the partition moves to the follower: {summary:?}"
    );
    assert!(
        fetches[..first_to_follower]
            .iter()
            .all(|f| f.node == Some(leader)),
        "the leader first: {summary:?}"
    );
    assert!(
        fetches[first_to_follower..]
            .iter()
            .all(|f| f.node == Some(follower)),
        "then only the follower (leader {leader}): {summary:?}"
    );
}
