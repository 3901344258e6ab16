//! Values of 1 MiB and 16 MiB, which the producer sends as segments of their own
//! (the caller's buffers, not copies), reach the broker and come back intact, with
//! their keys and headers, also when the first attempt's response is lost and the
//! producer resends the same batch.

use std::time::Duration;

use baton_broker::faults::RequestFault;
use baton_broker::Cluster;
use baton_kafka::{Client, Consumer, Producer, ProducerRecord, RecordHeader, StartOffset};
use baton_testkit::client::{broker_and_client, create_topic};
use baton_testkit::cluster::client;
use baton_testkit::{seed, Rng};
use bytes::Bytes;

const MIB: usize = 1024 * 1024;

/// `len` seeded random bytes.
fn value(rng: &mut Rng, len: usize) -> Bytes {
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        out.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    out.truncate(len);
    Bytes::from(out)
}

/// A record of `len` bytes with a key and headers.
fn record(rng: &mut Rng, topic: &str, i: usize, len: usize) -> ProducerRecord {
    let mut r = ProducerRecord::new(topic)
        .partition(0)
        .key(format!("key-{i}"))
        .value(value(rng, len));
    r.headers
        .push(RecordHeader::new("i", Some(Bytes::from(i.to_string()))));
    r.headers.push(RecordHeader::new("null", None));
    r
}

/// Sends `records` and waits for each delivery (with a 16 MiB value limit), then
/// reads partition 0 back from the start and checks every record byte for byte.
async fn round_trip(client: &Client, topic: &str, records: Vec<ProducerRecord>, seed: u64) {
    let producer = Producer::builder(client)
        .max_request_size(20 * MIB)
        .buffer_memory(64 * MIB)
        .batch_size(MIB)
        .build();
    let mut deliveries = Vec::new();
    for r in records.iter().cloned() {
        deliveries.push(producer.send(r).await.expect("accepted"));
    }
    for (i, d) in deliveries.into_iter().enumerate() {
        let meta = d
            .await
            .unwrap_or_else(|e| panic!("seed {seed}: delivery {i} failed: {e}"));
        assert_eq!(meta.offset, i as i64, "seed {seed}: offsets in send order");
    }
    producer.close().await;

    let mut consumer = Consumer::builder(client)
        .assign(topic.to_owned(), 0, StartOffset::Earliest)
        .build()
        .await
        .unwrap();
    for (i, want) in records.iter().enumerate() {
        let got = tokio::time::timeout(Duration::from_secs(60), consumer.recv())
            .await
            .unwrap_or_else(|_| panic!("seed {seed}: stalled before record {i}"))
            .unwrap_or_else(|e| panic!("seed {seed}: consumer error: {e}"));
        assert_eq!(got.offset, i as i64, "seed {seed}: no duplicate, no gap");
        assert_eq!(got.key, want.key, "seed {seed}: key of record {i}");
        assert!(
            got.value == want.value,
            "seed {seed}: value of record {i} ({} bytes) differs",
            want.value.as_ref().map_or(0, Bytes::len)
        );
        assert_eq!(
            got.headers, want.headers,
            "seed {seed}: headers of record {i}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_and_sixteen_mib_values_round_trip_intact() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    let (_broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "large-values", 1).await;
    // Around the sharing threshold, 1 MiB values sharing batches with small ones,
    // and 16 MiB values alone in theirs.
    let sizes = [
        MIB,
        10,
        MIB,
        MIB - 1,
        64 * 1024 - 1,
        64 * 1024,
        16 * MIB,
        0,
        16 * MIB,
        MIB,
    ];
    let records = sizes
        .iter()
        .enumerate()
        .map(|(i, &len)| record(&mut rng, &topic, i, len))
        .collect();
    round_trip(&client, &topic, records, seed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_response_resends_the_large_values_once() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    let mut cluster = Cluster::builder()
        .brokers(1)
        .in_memory()
        .start()
        .await
        .unwrap();
    let client = client(&cluster).await;
    let topic = create_topic(&client, "large-values-retry", 1).await;
    // The first Produce is applied, then its response is lost: the producer
    // resends the same batch and the broker keeps one copy of it (idempotence).
    cluster.inject(None, RequestFault::drop_response(0));
    let records = [MIB, 16 * MIB, 3 * MIB]
        .iter()
        .enumerate()
        .map(|(i, &len)| record(&mut rng, &topic, i, len))
        .collect();
    round_trip(&client, &topic, records, seed).await;
    cluster.shutdown().await;
}
