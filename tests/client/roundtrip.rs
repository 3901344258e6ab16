//! 100,000 random records through the producer and back through the consumer:
//! byte-identical, in order per partition, none lost or duplicated.

use std::collections::BTreeMap;
use std::time::Duration;

use baton_kafka::{Consumer, Producer, ProducerRecord, RecordHeader, StartOffset};
use baton_testkit::client::{broker_and_client, create_topic};
use baton_testkit::{seed, Rng, RngExt};
use bytes::Bytes;

const RECORDS: usize = 100_000;
const PARTITIONS: i32 = 3;

fn random_record(rng: &mut Rng, topic: &str, i: usize) -> ProducerRecord {
    let mut r = ProducerRecord::new(topic).timestamp(1_700_000_000_000 + i as i64);
    // ~10% null keys (round robin), the rest keyed.
    if rng.below(10) != 0 {
        r.key = Some(Bytes::from(rng.bytes_up_to(24)));
    }
    r.value = match rng.below(20) {
        0 | 1 => None,
        2 => Some(Bytes::new()),
        _ => Some(Bytes::from(rng.bytes_up_to(200))),
    };
    for h in 0..rng.below(4) {
        let value = match rng.below(4) {
            0 => None,
            _ => Some(Bytes::from(rng.bytes_up_to(16))),
        };
        r.headers
            .push(RecordHeader::new(format!("h{h}-{}", rng.below(3)), value));
    }
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_thousand_records_round_trip() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "roundtrip", PARTITIONS).await;

    let producer = Producer::builder(&client).build();
    let mut deliveries = Vec::with_capacity(RECORDS);
    for i in 0..RECORDS {
        let record = random_record(&mut rng, &topic, i);
        deliveries.push(producer.send(record).await.expect("accepted"));
    }
    producer.flush().await;

    // (partition, offset) -> the record as sent (handed back by the delivery).
    let mut sent: BTreeMap<(i32, i64), ProducerRecord> = BTreeMap::new();
    let mut last_offset: BTreeMap<i32, i64> = BTreeMap::new();
    for d in deliveries {
        let meta = d
            .await
            .unwrap_or_else(|e| panic!("seed {seed}: delivery failed: {e}"));
        // Sends happened in order, so offsets grow in send order per partition.
        let prev = last_offset.insert(meta.partition, meta.offset);
        assert!(
            prev.is_none_or(|p| p < meta.offset),
            "seed {seed}: partition {} offsets out of send order",
            meta.partition
        );
        let (p, o) = (meta.partition, meta.offset);
        assert!(
            sent.insert((p, o), meta.into_record()).is_none(),
            "seed {seed}: duplicate offset"
        );
    }
    producer.close().await;
    assert_eq!(sent.len(), RECORDS);

    let mut builder = Consumer::builder(&client);
    for p in 0..PARTITIONS {
        builder = builder.assign(topic.clone(), p, StartOffset::Earliest);
    }
    let mut consumer = builder.build().await.unwrap();
    let mut next: BTreeMap<i32, i64> = (0..PARTITIONS).map(|p| (p, 0)).collect();
    for n in 0..RECORDS {
        let got = tokio::time::timeout(Duration::from_secs(60), consumer.recv())
            .await
            .unwrap_or_else(|_| panic!("seed {seed}: stalled after {n} records"))
            .unwrap_or_else(|e| panic!("seed {seed}: consumer error: {e}"));
        let expected_offset = next.get_mut(&got.partition).unwrap();
        assert_eq!(
            got.offset, *expected_offset,
            "seed {seed}: gap or reorder in partition {}",
            got.partition
        );
        *expected_offset += 1;
        let want = sent
            .get(&(got.partition, got.offset))
            .unwrap_or_else(|| panic!("seed {seed}: consumed a record never acknowledged"));
        assert_eq!(&*got.topic, topic.as_str());
        assert_eq!(
            got.key, want.key,
            "seed {seed}: key at {}/{}",
            got.partition, got.offset
        );
        assert_eq!(
            got.value, want.value,
            "seed {seed}: value at {}/{}",
            got.partition, got.offset
        );
        assert_eq!(
            got.headers, want.headers,
            "seed {seed}: headers at {}/{}",
            got.partition, got.offset
        );
        assert_eq!(
            Some(got.timestamp),
            want.timestamp,
            "seed {seed}: timestamp"
        );
    }
    let total: i64 = next.values().sum();
    assert_eq!(total as usize, RECORDS);
    // Every partition got some records (keys hash across all three).
    assert!(next.values().all(|&n| n > 0), "seed {seed}: {next:?}");
    drop(consumer);
    broker.shutdown().await;
}
