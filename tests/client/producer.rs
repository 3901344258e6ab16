//! Producer: each acks level delivers, backpressure waits without losing records,
//! records are handed back, errors carry the record, and create times come from
//! the client's own clock.

use std::time::Duration;

use baton_kafka::env::{Clock, Env, RealClock};
use baton_kafka::{Acks, Consumer, ProduceError, Producer, ProducerRecord, StartOffset};
use baton_testkit::client::{broker_and_client, create_topic};
use bytes::Bytes;

async fn consume_values(
    client: &baton_kafka::Client,
    topic: &str,
    partition: i32,
    n: usize,
) -> Vec<Bytes> {
    let mut consumer = Consumer::builder(client)
        .assign(topic, partition, StartOffset::Earliest)
        .build()
        .await
        .unwrap();
    let mut out = Vec::new();
    while out.len() < n {
        let r = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
            .await
            .expect("records arrive")
            .unwrap();
        out.push(r.value.unwrap());
    }
    out
}

#[tokio::test]
async fn every_acks_level_delivers() {
    let (broker, client) = broker_and_client().await;
    for (acks, name) in [
        (Acks::None, "acks0"),
        (Acks::Leader, "acks1"),
        (Acks::All, "acksall"),
    ] {
        let topic = create_topic(&client, name, 1).await;
        let producer = Producer::builder(&client).acks(acks).build();
        let mut deliveries = Vec::new();
        for i in 0..50 {
            let record = ProducerRecord::new(topic.clone()).value(format!("{name}-{i}"));
            deliveries.push(producer.send(record).await.unwrap());
        }
        for (i, d) in deliveries.into_iter().enumerate() {
            let meta = d.await.unwrap();
            assert_eq!(meta.partition, 0);
            if acks == Acks::None {
                assert_eq!(meta.offset, -1, "acks=0 reports no offset");
            } else {
                assert_eq!(meta.offset, i as i64);
            }
            assert_eq!(
                meta.record().value.as_deref(),
                Some(format!("{name}-{i}").as_bytes())
            );
        }
        producer.close().await;
        let values = consume_values(&client, &topic, 0, 50).await;
        for (i, v) in values.iter().enumerate() {
            assert_eq!(&v[..], format!("{name}-{i}").as_bytes());
        }
    }
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiny_buffer_memory_makes_send_wait_and_loses_nothing() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "backpressure", 2).await;

    // Deterministic first phase: nothing drains (long linger, big batches), so once
    // the buffer is full a send must wait, and a flush lets it through.
    let held = Producer::builder(&client)
        .buffer_memory(4 * 1024)
        .linger(Duration::from_secs(3600))
        .build();
    let mut first = Vec::new();
    for _ in 0..3 {
        let r = ProducerRecord::new(topic.clone())
            .partition(0)
            .value(vec![1u8; 1000]);
        first.push(held.send(r).await.unwrap());
    }
    let fourth = held.send(
        ProducerRecord::new(topic.clone())
            .partition(0)
            .value(vec![2u8; 1000]),
    );
    tokio::pin!(fourth);
    tokio::select! {
        biased;
        _ = &mut fourth => panic!("send must wait while the buffer is full"),
        _ = std::future::ready(()) => {}
    }
    let (fourth, ()) = tokio::join!(fourth, held.flush());
    let fourth = fourth.unwrap();
    held.flush().await;
    for (i, d) in first.into_iter().chain([fourth]).enumerate() {
        assert_eq!(d.await.unwrap().offset, i as i64);
    }
    held.close().await;
    // Room for only a handful of 1 KiB records at a time.
    let producer = Producer::builder(&client)
        .buffer_memory(4 * 1024)
        .batch_size(2 * 1024)
        .linger(Duration::from_millis(20))
        .build();
    const N: usize = 2_000;
    let mut deliveries = Vec::new();
    for i in 0..N {
        let mut value = vec![0u8; 1000];
        value[..8].copy_from_slice(&(i as u64).to_be_bytes());
        let record = ProducerRecord::new(topic.clone())
            .partition((i % 2) as i32)
            .value(value);
        deliveries.push(producer.send(record).await.unwrap());
    }
    // A record larger than the whole buffer is refused and handed back.
    let huge = ProducerRecord::new(topic.clone()).value(vec![7u8; 8 * 1024]);
    match producer.send(huge).await {
        Err(e @ ProduceError::RecordTooLarge { .. }) => {
            assert_eq!(e.into_record().unwrap().value.unwrap().len(), 8 * 1024)
        }
        other => panic!("expected RecordTooLarge, got {other:?}"),
    }
    let mut per_partition = [0i64; 2];
    for (i, d) in deliveries.into_iter().enumerate() {
        let meta = d.await.unwrap();
        assert_eq!(meta.partition, (i % 2) as i32);
        let base = if meta.partition == 0 { 4 } else { 0 };
        assert_eq!(meta.offset, base + per_partition[meta.partition as usize]);
        per_partition[meta.partition as usize] += 1;
    }
    producer.close().await;
    let values = consume_values(&client, &topic, 0, 4 + N / 2).await;
    assert_eq!(&values[3][..], &[2u8; 1000][..]);
    for p in 0..2 {
        let values = consume_values(&client, &topic, p, N / 2 + if p == 0 { 4 } else { 0 }).await;
        let skip = if p == 0 { 4 } else { 0 };
        for (k, v) in values[skip..].iter().enumerate() {
            let i = u64::from_be_bytes(v[..8].try_into().unwrap()) as usize;
            assert_eq!(i, k * 2 + p as usize);
        }
    }
    broker.shutdown().await;
}

#[tokio::test]
async fn delivered_records_are_handed_back_for_reuse() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "handback", 1).await;
    let producer = Producer::builder(&client).build();
    let value = Bytes::from(vec![42u8; 64]);
    let delivery = producer
        .send(ProducerRecord::new(topic.clone()).value(value))
        .await
        .unwrap();
    let record = delivery.await.unwrap().into_record();
    // The producer kept no reference: the buffer is ours again.
    let buf = record
        .value
        .unwrap()
        .try_into_mut()
        .expect("sole owner after delivery");
    assert_eq!(buf.len(), 64);
    producer.close().await;
    broker.shutdown().await;
}

#[tokio::test]
async fn errors_hand_the_record_back() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "errors", 2).await;
    let producer = Producer::builder(&client)
        .delivery_timeout(Duration::from_millis(500))
        .build();
    match producer
        .send(ProducerRecord::new(topic.clone()).partition(5).value("x"))
        .await
    {
        Err(ProduceError::InvalidPartition {
            partition_count,
            record,
            ..
        }) => {
            assert_eq!(partition_count, 2);
            assert_eq!(record.value.as_deref(), Some(&b"x"[..]));
        }
        other => panic!("expected InvalidPartition, got {other:?}"),
    }
    match producer
        .send(ProducerRecord::new("no-such-topic-anywhere").value("y"))
        .await
    {
        Err(e @ ProduceError::Client { .. }) => {
            assert_eq!(e.into_record().unwrap().value.as_deref(), Some(&b"y"[..]))
        }
        other => panic!("expected Client error, got {other:?}"),
    }
    producer.close().await;
    match producer.send(ProducerRecord::new(topic).value("z")).await {
        Err(ProduceError::Closed { record: Some(r) }) => {
            assert_eq!(r.value.as_deref(), Some(&b"z"[..]))
        }
        other => panic!("expected Closed, got {other:?}"),
    }
    broker.shutdown().await;
}

/// The system clock shifted by a fixed offset.
#[derive(Debug)]
struct SkewedClock(i64);

impl Clock for SkewedClock {
    fn now_ms(&self) -> i64 {
        RealClock.now_ms() + self.0
    }
}

#[tokio::test]
async fn create_time_is_the_client_env_clock() {
    // The client's clock runs ten years behind the process's (and the broker's).
    const SKEW_MS: i64 = -10 * 365 * 24 * 3_600_000;
    let (broker, _) = broker_and_client().await;
    let client = baton_kafka::Client::builder([broker.bootstrap()])
        .env(Env {
            clock: std::sync::Arc::new(SkewedClock(SKEW_MS)),
            ..Env::real()
        })
        .build()
        .await
        .unwrap();
    let topic = create_topic(&client, "client-clock", 1).await;
    let producer = Producer::builder(&client).build();
    let before = RealClock.now_ms() + SKEW_MS;
    let mut deliveries = Vec::new();
    // The first send waits for the topic's metadata (the slow path), the rest
    // find it loaded.
    for i in 0..5 {
        let record = ProducerRecord::new(topic.clone()).value(format!("r{i}"));
        deliveries.push(producer.send(record).await.unwrap());
    }
    let mut stamped = Vec::new();
    for d in deliveries {
        stamped.push(d.await.unwrap().timestamp);
    }
    let after = RealClock.now_ms() + SKEW_MS;
    for t in &stamped {
        assert!(
            (before..=after).contains(t),
            "create time {t} is not on the client's clock [{before}, {after}] \
             (the process's clock reads about {})",
            RealClock.now_ms()
        );
    }
    let mut consumer = Consumer::builder(&client)
        .assign(&topic, 0, StartOffset::Earliest)
        .build()
        .await
        .unwrap();
    for t in stamped {
        let r = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
            .await
            .expect("records arrive")
            .unwrap();
        assert_eq!(r.timestamp, t, "the broker stored the client's create time");
    }
    producer.close().await;
    broker.shutdown().await;
}
