//! Baton's SDK against Apache Kafka (the release pinned in
//! `tests/apache-kafka/pom.xml`), started by `tests/apache_kafka_util`.
//!
//! The functional tests share one single-node KRaft cluster (random topic names);
//! the rolling-restart test owns a 3-node cluster. Kafka is the referee here: a
//! failure is a bug in Baton, never something to work around in the test.

mod apache_kafka_util;
mod client_util;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use apache_kafka_util::{single_node, KafkaCluster};
use baton::group::{CooperativeStickyAssignor, RangeAssignor, RoundRobinAssignor};
use baton::producer::partition_for_key;
use baton::{
    Acks, Admin, CancelOutcome, Client, Compression, Consumer, ConsumerRecord, GroupConsumer,
    NewTopic, OffsetSpec, Producer, ProducerRecord, RecordHeader, StartOffset, TopicPartition,
};
use bytes::Bytes;
use client_util::{seed, topic_name, Rng};

/// A client on the shared single node.
async fn client() -> Client {
    single_node().client().await
}

/// Creates a topic on the single node and returns its name.
async fn create_topic(client: &Client, prefix: &str, partitions: i32) -> String {
    let name = topic_name(prefix);
    Admin::new(client)
        .create_topic(name.clone(), partitions, 1)
        .await
        .unwrap_or_else(|e| panic!("creating {name}: {e}"));
    name
}

/// Reads `count` records from `partitions` of `topic`, from the start.
async fn read(
    client: &Client,
    topic: &str,
    partitions: &[i32],
    count: usize,
) -> Vec<ConsumerRecord> {
    let mut builder = Consumer::builder(client).max_wait(Duration::from_millis(100));
    for &p in partitions {
        builder = builder.assign(topic.to_string(), p, StartOffset::Earliest);
    }
    let mut consumer = builder.build().await.expect("consumer");
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let r = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
            .await
            .unwrap_or_else(|_| panic!("{topic}: stalled after {} of {count} records", out.len()))
            .unwrap_or_else(|e| panic!("{topic}: consumer error: {e}"));
        out.push(r);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_creates_lists_offsets_describes_and_deletes_topics() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let client = client().await;
    let admin = Admin::new(&client);
    let topic = create_topic(&client, "ak-admin", 3).await;

    let cluster = admin.describe_cluster().await.expect("describe cluster");
    assert_eq!(cluster.brokers.len(), 1, "{cluster:?}");
    let broker = &cluster.brokers[&1];
    assert_eq!(broker.port as u16, kafka.broker_port(1));
    assert!(cluster.cluster_id.is_some(), "KRaft has a cluster id");
    assert_eq!(cluster.controller_id.map(|_| ()), Some(()));
    let described = cluster.topic(&topic).expect("topic described");
    assert_eq!(described.partitions.len(), 3);
    for p in &described.partitions {
        assert_eq!(p.leader, Some(1));
        assert_eq!(p.replicas, vec![1]);
    }

    // Three records 1 s apart in create time, on partition 1.
    let t0 = 1_700_000_000_000i64;
    let producer = Producer::builder(&client).build();
    for i in 0..3 {
        producer
            .send(
                ProducerRecord::new(topic.clone())
                    .partition(1)
                    .timestamp(t0 + i * 1000)
                    .value(format!("v{i}")),
            )
            .await
            .unwrap()
            .await
            .expect("delivered");
    }
    producer.close().await;
    let specs = [
        OffsetSpec::Earliest,
        OffsetSpec::Latest,
        OffsetSpec::Timestamp(t0 + 1000),
        OffsetSpec::Timestamp(t0 + 1500),
        OffsetSpec::Timestamp(t0 + 10_000),
    ];
    let listed = admin
        .list_offsets(specs.iter().map(|&s| (topic.clone(), 1, s)))
        .await
        .expect("list offsets");
    let offsets: Vec<i64> = listed.iter().map(|l| l.offset).collect();
    assert_eq!(offsets, vec![0, 3, 1, 2, -1], "{listed:?}");
    assert_eq!(listed[2].timestamp, t0 + 1000);
    let empty = admin
        .list_offsets([(topic.clone(), 0, OffsetSpec::Latest)])
        .await
        .unwrap();
    assert_eq!(empty[0].offset, 0);

    admin.delete_topics([topic.clone()]).await.expect("delete");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while client
        .refresh_metadata()
        .await
        .unwrap()
        .topic(&topic)
        .is_some()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{topic} still listed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
