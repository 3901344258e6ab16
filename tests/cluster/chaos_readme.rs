//! The README's example: an application's integration test against the in-process
//! cluster through a rolling restart, checked with the history checker.

use baton_broker::history::{parse_payload, payload, History, ProduceOutcome};
use baton_broker::Cluster;
use baton_kafka::{Admin, Client, Consumer, NewTopic, Producer, ProducerRecord, StartOffset};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_survive_a_rolling_restart() {
    let mut cluster = Cluster::builder().brokers(3).start().await.unwrap();
    let client = Client::builder(cluster.bootstrap_servers())
        .build()
        .await
        .unwrap();
    Admin::new(&client)
        .create_topics([NewTopic::new("orders", 1, 3)])
        .await
        .unwrap();
    let producer = Producer::builder(&client).build(); // idempotent, acks=all
    let mut history = History::new();
    for (id, node) in (0..).zip(cluster.node_ids()) {
        cluster.node(node).stop().await; // controlled shutdown
        let order = payload(id, 32); // the app's message; id + checksum inside
        let sent = producer
            .send(ProducerRecord::new("orders").value(order.clone()))
            .await;
        let m = sent.unwrap().await.unwrap();
        let (_, sum) = parse_payload(&order).unwrap();
        history.produced(
            id,
            sum,
            ProduceOutcome::Acked {
                partition: m.partition,
                offset: m.offset,
            },
        );
        cluster.node(node).restart().await.unwrap();
        cluster
            .wait_fully_replicated("orders", Duration::from_secs(30))
            .await
            .unwrap();
    }
    let mut consumer = Consumer::builder(&client)
        .assign("orders", 0, StartOffset::Earliest)
        .build()
        .await
        .unwrap();
    while history.consumed_count() < 3 {
        let r = consumer.recv().await.unwrap();
        let (id, sum) = parse_payload(r.value.as_deref().unwrap()).unwrap();
        history.consumed(r.partition, r.offset, id, sum);
    }
    let report = history.check();
    assert!(report.passed(), "{report}\n{}", cluster.timeline_text());
    cluster.shutdown().await;
}
