//! Replication through the in-process cluster: `acks=all` records reach every replica
//! byte for byte, and the high watermark is the minimum log end over the ISR.

use std::time::Duration;

use baton_broker::Cluster;
use baton_kafka::{Acks, Admin, Client, Consumer, NewTopic, Producer, ProducerRecord, StartOffset};
use baton_testkit::topic_name;
use bytes::Bytes;

const RECORDS: usize = 50_000;

async fn client(cluster: &Cluster) -> Client {
    Client::builder(cluster.bootstrap_servers())
        .client_id("baton-cluster-tests")
        .build()
        .await
        .expect("client connects")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_all_records_are_byte_identical_on_every_replica() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::builder()
        .brokers(3)
        .data_dir(dir.path())
        .start()
        .await
        .expect("cluster starts");
    let client = client(&cluster).await;
    let topic = topic_name("replicated");
    Admin::new(&client)
        .create_topics([NewTopic::new(topic.clone(), 2, 3).config("min.insync.replicas", "2")])
        .await
        .expect("topic created");

    let producer = Producer::builder(&client)
        .acks(Acks::All)
        .idempotence(false)
        .build();
    let mut deliveries = Vec::with_capacity(RECORDS);
    for i in 0..RECORDS {
        let record = ProducerRecord::new(topic.clone())
            .key(Bytes::from(format!("k{}", i % 97)))
            .value(Bytes::from(format!("record-{i:08}")));
        deliveries.push(producer.send(record).await.expect("accepted"));
    }
    let mut acked = 0;
    for d in deliveries {
        d.await.expect("acks=all delivery");
        acked += 1;
    }
    producer.close().await;
    assert_eq!(acked, RECORDS);

    for p in 0..2 {
        cluster
            .wait_for(Duration::from_secs(60), |c| {
                let v = c.partition_state(&topic, p).unwrap();
                v.isr.len() == 3
                    && v.replica_states
                        .iter()
                        .all(|r| r.log_end_offset == v.replica_states[0].log_end_offset)
            })
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "replicas converge: {:?}",
                    cluster.partition_state(&topic, p)
                )
            });
        let view = cluster.partition_state(&topic, p).unwrap();
        let hw = view.high_watermark().expect("leader running");
        assert!(hw > 0);
        let leader_log = cluster.stored_batches(view.leader, &topic, p, hw).unwrap();
        for r in &view.replicas {
            let log = cluster.stored_batches(*r, &topic, p, hw).unwrap();
            assert_eq!(
                log.len(),
                leader_log.len(),
                "partition {p}: batch count on node {r}"
            );
            assert!(
                log == leader_log,
                "partition {p}: node {r} differs below the HW"
            );
        }
    }

    let mut consumer = Consumer::builder(&client)
        .assign(topic.clone(), 0, StartOffset::Earliest)
        .assign(topic.clone(), 1, StartOffset::Earliest)
        .build()
        .await
        .unwrap();
    let mut seen = std::collections::HashSet::new();
    while seen.len() < RECORDS {
        let r = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
            .await
            .expect("records arrive")
            .expect("consume");
        seen.insert(r.value.unwrap());
    }
    drop(consumer);
    cluster.shutdown().await;
}
