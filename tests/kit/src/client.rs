//! Helpers shared by the client integration tests: an in-process broker on
//! 127.0.0.1:0, a client on it, unique topic names, reading
//! partitions from the start.

use std::time::Duration;

use crate::topic_name;
use baton_broker::{Broker, BrokerConfig, BrokerHandle};
use baton_kafka::{Admin, Client, Consumer, ConsumerRecord, Producer, ProducerRecord, StartOffset};

/// Starts an in-memory broker and a client bootstrapped from it.
pub async fn broker_and_client() -> (BrokerHandle, Client) {
    let broker = Broker::start(BrokerConfig::in_memory())
        .await
        .expect("broker starts");
    let client = Client::builder([broker.bootstrap()])
        .client_id("baton-tests")
        .build()
        .await
        .expect("client connects");
    (broker, client)
}

/// Creates a topic with `partitions` partitions and returns its name.
pub async fn create_topic(client: &Client, prefix: &str, partitions: i32) -> String {
    let name = topic_name(prefix);
    Admin::new(client)
        .create_topic(name.clone(), partitions, 1)
        .await
        .expect("topic created");
    name
}

/// Consumes records of partitions `0..partitions` of `topic` from the start until
/// `count` arrived; a 30 s stall or a consumer error fails the test (naming `seed`).
pub async fn consume_from_start(
    client: &Client,
    topic: &str,
    partitions: i32,
    count: usize,
    seed: u64,
) -> Vec<ConsumerRecord> {
    let mut builder = Consumer::builder(client);
    for p in 0..partitions {
        builder = builder.assign(topic.to_string(), p, StartOffset::Earliest);
    }
    let mut consumer = builder.build().await.unwrap();
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let r = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
            .await
            .unwrap_or_else(|_| panic!("seed {seed}: stalled after {} records", out.len()))
            .unwrap_or_else(|e| panic!("seed {seed}: consumer error: {e}"));
        out.push(r);
    }
    out
}

/// Reads partition 0 of `topic` from `start` until a record at offset `last` or
/// beyond arrived (fetches wait at most 50 ms, so gaps left by compaction are
/// crossed quickly); a 30 s stall or a consumer error fails the test.
pub async fn read_partition_through(
    client: &Client,
    topic: &str,
    start: StartOffset,
    last: i64,
) -> Vec<ConsumerRecord> {
    let mut consumer = Consumer::builder(client)
        .assign(topic.to_owned(), 0, start)
        .max_wait(Duration::from_millis(50))
        .build()
        .await
        .unwrap();
    let mut out = Vec::new();
    loop {
        let r = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
            .await
            .expect("records arrive")
            .expect("consume");
        let offset = r.offset;
        out.push(r);
        if offset >= last {
            return out;
        }
    }
}

/// Produces `n` records with values `v0`, `v1`, ... to `partition` of `topic`
/// (all sent before any delivery is awaited) and waits until every one is
/// delivered.
pub async fn produce_values(client: &Client, topic: &str, partition: i32, n: usize) {
    let producer = Producer::builder(client).build();
    let mut deliveries = Vec::new();
    for i in 0..n {
        let record = ProducerRecord::new(topic.to_owned())
            .partition(partition)
            .value(format!("v{i}"));
        deliveries.push(producer.send(record).await.expect("accepted"));
    }
    for d in deliveries {
        d.await.expect("delivered");
    }
    producer.close().await;
}
