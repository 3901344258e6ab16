//! Retries: records sent while the broker is down are delivered once it is back on
//! the same address, through a fresh connection replacing the poisoned one.

use std::time::Duration;

use baton_broker::{Broker, BrokerConfig};
use baton_kafka::{Consumer, Producer, ProducerRecord, StartOffset};
use baton_testkit::client::create_topic;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_sent_during_a_restart_are_delivered_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(BrokerConfig::on_disk(dir.path()))
        .await
        .unwrap();
    let addr = broker.local_addr();
    let client = baton_kafka::Client::builder([broker.bootstrap()])
        .request_timeout(Duration::from_secs(5))
        .connect_timeout(Duration::from_secs(1))
        .build()
        .await
        .unwrap();
    let topic = create_topic(&client, "retry", 1).await;
    let producer = Producer::builder(&client)
        .request_timeout(Duration::from_secs(5))
        .retry_backoff(Duration::from_millis(20))
        .build();
    let mut deliveries = Vec::new();
    for i in 0..10 {
        deliveries.push(
            producer
                .send(ProducerRecord::new(topic.clone()).value(format!("v{i}")))
                .await
                .unwrap(),
        );
    }
    producer.flush().await;

    broker.shutdown().await;
    for i in 10..20 {
        deliveries.push(
            producer
                .send(ProducerRecord::new(topic.clone()).value(format!("v{i}")))
                .await
                .unwrap(),
        );
    }
    let broker = Broker::start(BrokerConfig::on_disk(dir.path()).with_listen(addr))
        .await
        .unwrap();
    for i in 20..30 {
        deliveries.push(
            producer
                .send(ProducerRecord::new(topic.clone()).value(format!("v{i}")))
                .await
                .unwrap(),
        );
    }
    for (i, d) in deliveries.into_iter().enumerate() {
        let meta = d.await.unwrap_or_else(|e| panic!("record {i}: {e}"));
        assert_eq!(meta.offset, i as i64);
    }
    producer.close().await;

    let mut consumer = Consumer::builder(&client)
        .assign(topic.clone(), 0, StartOffset::Earliest)
        .build()
        .await
        .unwrap();
    for i in 0..30 {
        let r = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (r.offset, r.value.as_deref()),
            (i, Some(format!("v{i}").as_bytes()))
        );
    }
    broker.shutdown().await;
}
