//! Partitioning against the in-process broker: keyed records land where the Java
//! client (and librdkafka's `murmur2_random`) puts them, unkeyed records are sticky,
//! and the round-robin and custom partitioners do what they say.

use std::collections::BTreeSet;
use std::time::Duration;

use baton_kafka::producer::{
    murmur2, partition_for_key, DefaultPartitioner, Partitioner, RoundRobinPartitioner,
};
use baton_kafka::{Consumer, ProduceError, Producer, ProducerRecord, StartOffset};
use baton_protocol::record::{RecordBatchBuilder, BATCH_HEADER_LEN};
use baton_testkit::client::{broker_and_client, create_topic};
use baton_testkit::{seed, Rng, RngExt};
use bytes::Bytes;

/// An independent transcription of the Java client's `Utils.murmur2`, in Java's
/// signed 32-bit arithmetic (`>>>` is a logical shift of the bits), to check the
/// crate's version against on many keys.
fn java_murmur2(data: &[u8]) -> i32 {
    let length = data.len() as i32;
    let seed: i32 = 0x9747_b28c_u32 as i32;
    let m: i32 = 0x5bd1_e995;
    let r = 24;
    let ushr = |x: i32, n: u32| ((x as u32) >> n) as i32;
    let mut h = seed ^ length;
    let length4 = length / 4;
    for i in 0..length4 {
        let i4 = (i * 4) as usize;
        let mut k = (data[i4] as i32 & 0xff)
            .wrapping_add((data[i4 + 1] as i32 & 0xff) << 8)
            .wrapping_add((data[i4 + 2] as i32 & 0xff) << 16)
            .wrapping_add((data[i4 + 3] as i32 & 0xff) << 24);
        k = k.wrapping_mul(m);
        k ^= ushr(k, r);
        k = k.wrapping_mul(m);
        h = h.wrapping_mul(m);
        h ^= k;
    }
    let base = (length & !3) as usize;
    let rest = length % 4;
    if rest == 3 {
        h ^= (data[base + 2] as i32 & 0xff) << 16;
    }
    if rest >= 2 {
        h ^= (data[base + 1] as i32 & 0xff) << 8;
    }
    if rest >= 1 {
        h ^= data[base] as i32 & 0xff;
        h = h.wrapping_mul(m);
    }
    h ^= ushr(h, 13);
    h = h.wrapping_mul(m);
    h ^= ushr(h, 15);
    h
}

/// The Java client's `BuiltInPartitioner.partitionForKey`:
/// `Utils.toPositive(Utils.murmur2(key)) % numPartitions`, with
/// `toPositive(n) = n & 0x7fffffff`.
fn java_partition(key: &[u8], partitions: i32) -> i32 {
    (java_murmur2(key) & 0x7fff_ffff) % partitions
}

#[test]
fn murmur2_matches_published_vectors() {
    // Apache Kafka: clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java,
    // testMurmur2.
    let kafka: [(&[u8], i32); 6] = [
        (b"21", -973_932_308),
        (b"foobar", -790_332_482),
        (b"a-little-bit-long-string", -985_981_536),
        (b"a-little-bit-longer-string", -1_486_304_829),
        (
            b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
            -58_897_971,
        ),
        (b"abc", 479_470_107),
    ];
    // librdkafka: src/rdmurmur2.c, unittest_murmur2 (`java_murmur2_results`; the
    // suffixes of "1234" and of the long string exercise every tail length).
    let long = b"PreAmbleWillBeRemoved,ThePrePartThatIs";
    let rdkafka: [(&[u8], u32); 11] = [
        (b"kafka", 0xd067_cf64),
        (b"giberish123456789", 0x8f55_2b0c),
        (b"1234", 0x9fc9_7b14),
        (b"234", 0xe7c0_09ca),
        (b"34", 0x8739_30da),
        (b"4", 0x5a4b_5ca1),
        (&long[..], 0x7842_4f1c),
        (&long[1..], 0x4a62_b377),
        (&long[2..], 0xe0e4_e09e),
        (&long[3..], 0x62b8_b43f),
        (b"", 0x106e_08d9),
    ];
    let all = kafka
        .iter()
        .copied()
        .chain(rdkafka.iter().map(|&(k, h)| (k, h as i32)));
    for (key, want) in all {
        let shown = String::from_utf8_lossy(key);
        assert_eq!(murmur2(key), want, "crate murmur2 of {shown:?}");
        assert_eq!(java_murmur2(key), want, "reference murmur2 of {shown:?}");
    }
}

#[test]
fn murmur2_agrees_with_the_reference_on_random_keys() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    for _ in 0..100_000 {
        let key = rng.bytes_up_to(64);
        assert_eq!(murmur2(&key), java_murmur2(&key), "seed {seed}: {key:?}");
        let n = 1 + rng.below(1000) as i32;
        assert_eq!(partition_for_key(&key, n), java_partition(&key, n));
    }
}

const KEYS: usize = 10_000;

/// 10,000 keys produced with the default partitioner land on the partition the
/// Java formula gives, as the producer reports it and as the consumer finds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_keys_land_where_the_java_client_puts_them() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    let (broker, client) = broker_and_client().await;
    for partitions in [7, 12] {
        let topic = create_topic(&client, "keyed", partitions).await;
        let producer = Producer::builder(&client).build();
        let mut keys = BTreeSet::new();
        while keys.len() < KEYS {
            // Text keys like real ones, plus raw bytes of every length 0-40.
            let key = match rng.below(3) {
                0 => Bytes::from(rng.bytes_up_to(40)),
                _ => Bytes::from(format!("customer-{}", rng.below(1 << 40))),
            };
            keys.insert(key);
        }
        let mut deliveries = Vec::with_capacity(KEYS);
        for key in &keys {
            let record = ProducerRecord::new(topic.clone())
                .key(key.clone())
                .value("v");
            deliveries.push(producer.send(record).await.unwrap());
        }
        producer.flush().await;
        for d in deliveries {
            let meta = d.await.unwrap();
            let key = meta.record().key.clone().unwrap();
            assert_eq!(
                meta.partition,
                java_partition(&key, partitions),
                "seed {seed}: key {key:?} with {partitions} partitions"
            );
        }
        producer.close().await;

        let mut builder = Consumer::builder(&client);
        for p in 0..partitions {
            builder = builder.assign(topic.clone(), p, StartOffset::Earliest);
        }
        let mut consumer = builder.build().await.unwrap();
        let mut used = BTreeSet::new();
        for _ in 0..KEYS {
            let r = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
                .await
                .expect("records arrive")
                .unwrap();
            let key = r.key.unwrap();
            assert_eq!(r.partition, java_partition(&key, partitions), "seed {seed}");
            assert!(keys.contains(&key));
            used.insert(r.partition);
        }
        assert_eq!(used.len(), partitions as usize, "every partition gets keys");
    }
    broker.shutdown().await;
}

/// Unkeyed records fill one partition's batch, then move to another partition, at
/// random but never the same one twice in a row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unkeyed_records_stick_to_a_partition_until_its_batch_is_full() {
    let seed = seed();
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "sticky", 3).await;
    let batch_size = 4096;
    // Nothing is sent by linger: a batch closes only when full.
    let producer = Producer::builder(&client)
        .partitioner(DefaultPartitioner::with_seed(seed))
        .batch_size(batch_size)
        .linger(Duration::from_secs(3600))
        .build();
    let value = vec![b'x'; 100];
    let record_size = RecordBatchBuilder::estimate_record_size(0, value.len(), &[]);
    let per_batch = (batch_size - BATCH_HEADER_LEN) / record_size;
    let runs_wanted = 20;
    let total = per_batch * runs_wanted + per_batch / 2;
    let mut deliveries = Vec::new();
    for _ in 0..total {
        let record = ProducerRecord::new(topic.clone()).value(value.clone());
        deliveries.push(producer.send(record).await.unwrap());
    }
    producer.flush().await;
    let mut partitions = Vec::new();
    for d in deliveries {
        partitions.push(d.await.unwrap().partition);
    }
    producer.close().await;

    // Runs of consecutive records on one partition.
    let mut runs: Vec<(i32, usize)> = Vec::new();
    for p in partitions {
        match runs.last_mut() {
            Some((q, n)) if *q == p => *n += 1,
            _ => runs.push((p, 1)),
        }
    }
    let (last, full) = runs.split_last().unwrap();
    assert_eq!(full.len(), runs_wanted, "seed {seed}: {runs:?}");
    assert!(
        full.iter().all(|&(_, n)| n == per_batch),
        "seed {seed}: every run fills one batch of {per_batch} records: {runs:?}"
    );
    assert_eq!(last.1, per_batch / 2);
    let used: BTreeSet<i32> = runs.iter().map(|&(p, _)| p).collect();
    assert_eq!(used.len(), 3, "seed {seed}: {runs:?}");
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_robin_spreads_every_record() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "round-robin", 3).await;
    let producer = Producer::builder(&client)
        .partitioner(RoundRobinPartitioner::new())
        .build();
    let mut deliveries = Vec::new();
    for i in 0..30 {
        let mut record = ProducerRecord::new(topic.clone()).value(format!("v{i}"));
        if i % 2 == 0 {
            record = record.key("same-key");
        }
        deliveries.push(producer.send(record).await.unwrap());
    }
    for (i, d) in deliveries.into_iter().enumerate() {
        assert_eq!(d.await.unwrap().partition, i as i32 % 3);
    }
    // An explicit partition bypasses the partitioner.
    let meta = producer
        .send(ProducerRecord::new(topic.clone()).partition(1).key("k"))
        .await
        .unwrap()
        .await
        .unwrap();
    assert_eq!(meta.partition, 1);
    producer.close().await;
    broker.shutdown().await;
}

/// Sends every record to the last partition, or to a partition that does not
/// exist when the key is "bad".
#[derive(Debug)]
struct LastPartition;

impl Partitioner for LastPartition {
    fn partition(&self, _topic: &str, key: Option<&[u8]>, partition_count: i32) -> i32 {
        match key {
            Some(b"bad") => partition_count,
            _ => partition_count - 1,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_partitioners_are_used_and_checked() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "custom", 4).await;
    let producer = Producer::builder(&client)
        .partitioner(LastPartition)
        .build();
    for i in 0..10 {
        let meta = producer
            .send(ProducerRecord::new(topic.clone()).value(format!("v{i}")))
            .await
            .unwrap()
            .await
            .unwrap();
        assert_eq!(meta.partition, 3);
    }
    let err = producer
        .send(ProducerRecord::new(topic.clone()).key("bad").value("v"))
        .await
        .unwrap_err();
    match &err {
        ProduceError::InvalidPartition {
            partition,
            partition_count,
            ..
        } => assert_eq!((*partition, *partition_count), (4, 4)),
        other => panic!("unexpected {other:?}"),
    }
    let record = err.into_record().unwrap();
    assert_eq!(
        record.value.as_deref(),
        Some(&b"v"[..]),
        "handed back intact"
    );
    producer.close().await;
    broker.shutdown().await;
}
