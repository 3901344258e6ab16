//! A raw Kafka client over TCP for broker tests: the broker's [`Channel`] with
//! panicking conveniences, and request builders.

use std::net::SocketAddr;
use std::time::Duration;

use baton_broker::rpc::{Channel, RpcError};
use baton_broker::Cluster;
use baton_protocol::envelope;
use baton_protocol::messages::*;
use baton_protocol::record::{RecordBatch, RecordBatchBuilder};
use baton_protocol::{Request, Uuid};
use bytes::Bytes;
use tokio::net::TcpStream;

/// The client id of the kit's requests.
const CLIENT_ID: &str = "broker-test";

/// One connection speaking Kafka frames: a [`Channel`] whose failures panic, as
/// tests want.
#[derive(Debug)]
pub struct Client {
    /// The connection to the broker.
    pub channel: Channel,
}

impl Client {
    /// Connects to `addr`.
    pub async fn connect(addr: SocketAddr) -> Client {
        Client {
            channel: Channel::connect(addr, CLIENT_ID).await.expect("connect"),
        }
    }

    /// A client over a stream connected by the caller (e.g. from a chosen source
    /// address).
    pub fn from_stream(stream: TcpStream) -> Client {
        Client {
            channel: Channel::from_stream(stream, CLIENT_ID).expect("connected stream"),
        }
    }

    /// The connection's stream, for writing around the framing.
    pub fn stream(&mut self) -> &mut baton_kafka::env::Socket {
        self.channel.stream_mut()
    }

    /// The frame of `req` in `version` with correlation id `corr`, length prefix included.
    pub fn encode<R: Request>(corr: i32, req: &R, version: i16) -> Bytes {
        envelope::encode_request(corr, Some(CLIENT_ID), req, version).expect("encode request")
    }

    /// Sends a request and returns its correlation id.
    pub async fn send<R: Request + Sync>(&mut self, req: &R, version: i16) -> i32 {
        self.channel.send(req, version).await.expect("write")
    }

    /// Writes `bytes` as they are (a frame built by hand, or garbage).
    pub async fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.channel.send_raw(bytes).await
    }

    /// Reads the next response frame, or `None` at end of stream (or a failed read).
    pub async fn recv_frame(&mut self) -> Option<Bytes> {
        match self.channel.recv_frame().await {
            Ok(frame) => Some(frame),
            Err(RpcError::Io { .. }) => None,
            Err(e) => panic!("frame: {e}"),
        }
    }

    /// Reads the next response as `R::Response` in `version`; returns its correlation id.
    pub async fn recv<R: Request>(&mut self, version: i16) -> (i32, R::Response) {
        let frame = self.recv_frame().await.expect("response");
        let (header, body) = envelope::decode_response::<R>(frame, version).expect("response");
        (header.correlation_id, body)
    }

    /// Sends `req` and reads its response.
    pub async fn call<R: Request + Sync>(&mut self, req: &R, version: i16) -> R::Response {
        self.channel.call(req, version).await.expect("call")
    }
}

/// A record batch of `values`, timestamps from `base_ts`.
pub fn records(base_ts: i64, values: &[&str]) -> Bytes {
    let mut b = RecordBatchBuilder::new(base_ts);
    for (i, v) in values.iter().enumerate() {
        b.push(base_ts + i as i64, Some(b"key"), Some(v.as_bytes()), &[]);
    }
    b.finish()
}

/// A Produce request of `records` to one partition.
pub fn produce_req(topic: &str, partition: i32, acks: i16, records: Bytes) -> ProduceRequest {
    ProduceRequest {
        transactional_id: None,
        acks,
        timeout_ms: 5000,
        topic_data: vec![TopicProduceData {
            name: topic.into(),
            partition_data: vec![PartitionProduceData {
                index: partition,
                records: Some(records.into()),
            }],
        }],
    }
}

/// A Fetch request for one partition.
pub fn fetch_req(
    topic: &str,
    partition: i32,
    offset: i64,
    max_wait_ms: i32,
    min_bytes: i32,
) -> FetchRequest {
    FetchRequest {
        replica_id: -1,
        max_wait_ms,
        min_bytes,
        max_bytes: 1 << 20,
        isolation_level: 0,
        session_id: 0,
        session_epoch: -1,
        topics: vec![FetchTopic {
            topic: topic.into(),
            topic_id: Uuid::ZERO,
            partitions: vec![FetchPartition {
                partition,
                fetch_offset: offset,
                partition_max_bytes: 1 << 20,
                ..Default::default()
            }],
        }],
        ..Default::default()
    }
}

/// A CreateTopics request for one topic (the broker's default replication factor).
pub fn create_req(name: &str, partitions: i32, configs: &[(&str, &str)]) -> CreateTopicsRequest {
    CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: name.into(),
            num_partitions: partitions,
            replication_factor: -1,
            assignments: vec![],
            configs: configs
                .iter()
                .map(|(k, v)| CreatableTopicConfig {
                    name: (*k).into(),
                    value: Some((*v).into()),
                })
                .collect(),
        }],
        timeout_ms: 5000,
        validate_only: false,
    }
}

/// Creates topic `name` through `c`, and checks that it worked.
pub async fn create_topic(c: &mut Client, name: &str, partitions: i32) {
    let resp = c.call(&create_req(name, partitions, &[]), 7).await;
    assert_eq!(
        resp.topics[0].error_code, 0,
        "{:?}",
        resp.topics[0].error_message
    );
}

/// How long [`create_replicated`] waits for the new topic's leaders.
const REPLICATED_WAIT: Duration = Duration::from_secs(60);

/// The address clients use for node `id` (1-based) of an in-process `cluster`.
pub fn node_addr(cluster: &Cluster, id: i32) -> SocketAddr {
    cluster.bootstrap_servers()[(id - 1) as usize]
        .parse()
        .expect("a bootstrap server is an address")
}

/// Creates topic `name` with `partitions` partitions of `rf` replicas and
/// `configs` through node 1 of an in-process `cluster`, checks that it worked,
/// and waits until every partition has a leader that knows it leads and every
/// replica has taken up its role.
pub async fn create_replicated(
    cluster: &Cluster,
    name: &str,
    partitions: i32,
    rf: i16,
    configs: &[(&str, &str)],
) {
    let mut c = Client::connect(node_addr(cluster, 1)).await;
    let mut req = create_req(name, partitions, configs);
    req.topics[0].replication_factor = rf;
    let resp = c.call(&req, 7).await;
    assert_eq!(
        resp.topics[0].error_code, 0,
        "{:?}",
        resp.topics[0].error_message
    );
    cluster
        .wait_for(REPLICATED_WAIT, |c| {
            (0..partitions).all(|p| {
                c.partition_state(name, p).is_some_and(|v| {
                    v.leader > 0
                        && v.replica_states.iter().all(|r| r.role != "none")
                        && v.replica(v.leader).is_some_and(|r| r.role == "leader")
                })
            })
        })
        .await
        .expect("the topic's partitions have leaders");
}

/// All record values in a fetch response partition's records.
pub fn values(records: &Option<Bytes>) -> Vec<String> {
    let mut out = Vec::new();
    for batch in baton_protocol::record::batches(records.clone().unwrap_or_default()) {
        let batch: RecordBatch = batch.unwrap();
        batch.verify_crc().unwrap();
        for r in batch.records().unwrap() {
            let r = r.unwrap();
            out.push(String::from_utf8(r.value.unwrap().to_vec()).unwrap());
        }
    }
    out
}

/// A unique topic name per call.
pub fn topic_name(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!("{prefix}-{}", N.fetch_add(1, Ordering::Relaxed))
}

pub use crate::{seed, Rng};
