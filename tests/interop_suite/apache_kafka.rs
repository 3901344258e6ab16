//! Baton's SDK against Apache Kafka (the release pinned in
//! `tests/apache-kafka/pom.xml`), started by `tests/apache_kafka_util`.
//!
//! The functional tests share one single-node KRaft cluster (random topic names);
//! the tests that restart nodes share a 3-node cluster, one at a time. The mixed
//! groups run the Java client's `KafkaConsumer` (`tests/interop/java`) beside
//! Baton's `GroupConsumer`. Kafka is the referee here: a
//! failure is a bug in Baton, never something to work around in the test.

mod admin_groups;
mod configs;
mod consumer_group;
mod delete_records;
mod fetch;
mod partition_admin;
mod transactions;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::apache_kafka_util::{single_node, three_nodes, KafkaCluster};
use crate::interop_java_util::mixed_group::{self, baton_member as group_member, Strategy};
use crate::interop_java_util::{field, harness, int};
use baton_kafka::connection::ConnectionError;
use baton_kafka::group::{CooperativeStickyAssignor, RangeAssignor, RoundRobinAssignor};
use baton_kafka::producer::partition_for_key;
use baton_kafka::{
    Acks, Admin, BoxError, CancelOutcome, Client, ClientError, Compression, Consumer,
    ConsumerRecord, GroupConsumer, NewTopic, OAuthToken, OAuthTokenProvider, OffsetSpec, Producer,
    ProducerRecord, RecordHeader, SaslCredentials, SecurityProtocol, StartOffset, TlsConfig,
    TopicPartition,
};
use baton_testkit::security::{PLAIN_LOGIN, SCRAM_SHA512_LOGIN};
use baton_testkit::{seed, topic_name, Rng, RngExt};
use bytes::Bytes;

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

/// Produces `count` records round-robin over `partitions` with `producer`, awaiting
/// each delivery; values are `"{tag}-{i}"`.
async fn produce_all(producer: &Producer, topic: &str, partitions: i32, count: usize, tag: &str) {
    let mut deliveries = Vec::with_capacity(count);
    for i in 0..count {
        let r = ProducerRecord::new(topic)
            .partition(i as i32 % partitions)
            .value(format!("{tag}-{i}"));
        deliveries.push(producer.send(r).await.expect("send"));
    }
    for d in deliveries {
        d.await
            .unwrap_or_else(|e| panic!("{topic}: not delivered: {e}"));
    }
}

/// The values of `records` per partition, in offset order, checking that offsets
/// are dense from 0.
fn values_by_partition(records: &[ConsumerRecord]) -> BTreeMap<i32, Vec<String>> {
    let mut out: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for r in records {
        let values = out.entry(r.partition).or_default();
        assert_eq!(
            r.offset,
            values.len() as i64,
            "partition {}: dense offsets",
            r.partition
        );
        values.push(String::from_utf8(r.value.as_deref().unwrap_or_default().to_vec()).unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_acks_none_leader_and_all_all_arrive_in_order() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let client = client().await;
    for (acks, idempotent) in [
        (Acks::None, false),
        (Acks::Leader, false),
        (Acks::All, true),
    ] {
        let topic = create_topic(&client, "ak-acks", 2).await;
        // acks=0 gets no answer, so a Produce that reaches Kafka before it serves a
        // new partition is dropped without a word, as acks=0 allows (one run lost
        // all of one partition that way). Wait until both partitions answer
        // ListOffsets, so that every record is expected to arrive.
        Admin::new(&client)
            .list_offsets([
                (topic.clone(), 0, OffsetSpec::Latest),
                (topic.clone(), 1, OffsetSpec::Latest),
            ])
            .await
            .unwrap_or_else(|e| panic!("{topic} served: {e}"));
        let producer = Producer::builder(&client)
            .acks(acks)
            .idempotence(idempotent)
            .build();
        let mut deliveries = Vec::new();
        for i in 0..200 {
            let r = ProducerRecord::new(topic.clone())
                .partition(i % 2)
                .value(format!("{acks:?}-{i}"));
            deliveries.push(producer.send(r).await.unwrap());
        }
        for (i, d) in deliveries.into_iter().enumerate() {
            let meta = d.await.unwrap_or_else(|e| panic!("{acks:?}: {e}"));
            let expected = if acks == Acks::None { -1 } else { i as i64 / 2 };
            assert_eq!(meta.offset, expected, "{acks:?}: record {i}");
        }
        producer.close().await;
        let got = values_by_partition(&read(&client, &topic, &[0, 1], 200).await);
        for p in 0..2 {
            let want: Vec<String> = (0..200)
                .filter(|i| i % 2 == p)
                .map(|i| format!("{acks:?}-{i}"))
                .collect();
            assert_eq!(got[&p], want, "{acks:?}: partition {p}");
        }
    }
}

/// The default producer is idempotent with acks=all: Kafka accepts its sequence
/// numbers (it rejects gaps and duplicates with OUT_OF_ORDER_SEQUENCE_NUMBER or
/// answers DUPLICATE_SEQUENCE_NUMBER), and every record is written once, in order.
///
/// Regression: when the first batch of a fresh topic's partition got
/// NOT_LEADER_OR_FOLLOWER while later batches were pipelined, Kafka (no producer
/// state yet, so any sequence is accepted) appended the later ones, and the first
/// was refused with OUT_OF_ORDER_SEQUENCE_NUMBER on every resend. The producer now
/// sends one batch at a time until the partition has acknowledged one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_producer_is_idempotent_and_kafka_accepts_its_sequences() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let client = client().await;
    let topic = create_topic(&client, "ak-idempotent", 3).await;
    // A small batch size makes many batches per partition in flight at once.
    let producer = Producer::builder(&client).batch_size(1024).build();
    produce_all(&producer, &topic, 3, 3000, "i").await;
    producer.close().await;
    let got = values_by_partition(&read(&client, &topic, &[0, 1, 2], 3000).await);
    for p in 0..3 {
        let want: Vec<String> = (0..3000)
            .filter(|i| i % 3 == p)
            .map(|i| format!("i-{i}"))
            .collect();
        assert_eq!(got[&p], want, "partition {p}");
    }
    // Idempotence is Kafka's to judge: an illegal config is refused up front.
    assert!(Producer::builder(&client)
        .acks(Acks::Leader)
        .idempotence(true)
        .try_build()
        .is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_codec_round_trips_keys_values_headers_and_timestamps() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let seed = seed();
    let mut rng = Rng::new(seed);
    let client = client().await;
    for codec in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let topic = create_topic(&client, "ak-codec", 1).await;
        let producer = Producer::builder(&client).compression(codec).build();
        let mut sent = Vec::new();
        for i in 0..300 {
            let mut r = ProducerRecord::new(topic.clone())
                .partition(0)
                .timestamp(1_700_000_000_000 + i)
                .value(Bytes::from(rng.bytes_up_to(2000)));
            if i % 3 != 0 {
                r = r.key(Bytes::from(rng.bytes_up_to(40)));
            }
            if i % 4 == 0 {
                r = r
                    .header("trace", Bytes::from(rng.bytes_up_to(16)))
                    .header("trace", "again")
                    .null_header("empty");
            }
            sent.push(r.clone());
            producer.send(r).await.unwrap();
        }
        producer.close().await;
        let got = read(&client, &topic, &[0], sent.len()).await;
        for (i, (r, s)) in got.iter().zip(&sent).enumerate() {
            let what = format!("seed {seed}, {codec:?}, record {i}");
            assert_eq!(r.offset, i as i64, "{what}");
            assert_eq!(r.key, s.key, "{what}");
            assert_eq!(r.value, s.value, "{what}");
            assert_eq!(r.timestamp, 1_700_000_000_000 + i as i64, "{what}");
            let headers: Vec<RecordHeader> = s.headers.clone();
            assert_eq!(r.headers, headers, "{what}");
        }
    }
}

/// Java's own producer (`kafka-console-producer`, default partitioner) and Baton's
/// put every key on the same partition, the one `partition_for_key` computes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_land_on_the_java_clients_murmur2_partitions() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let seed = seed();
    let mut rng = Rng::new(seed);
    let client = client().await;
    let topic = create_topic(&client, "ak-keys", 7).await;
    let keys: Vec<String> = (0..300)
        .map(|i| {
            let len = 1 + rng.below(30) as usize;
            let tail: String = (0..len)
                .map(|_| (b'!' + rng.below(90) as u8) as char)
                .filter(|&c| c != '|')
                .collect();
            format!("k{i}-{tail}")
        })
        .collect();
    let input: String = keys.iter().map(|k| format!("{k}|java\n")).collect();
    crate::apache_kafka_util::java_tool(
        "org.apache.kafka.tools.ConsoleProducer",
        &[
            "--bootstrap-server",
            &kafka.bootstrap().join(","),
            "--topic",
            &topic,
            "--property",
            "parse.key=true",
            "--property",
            "key.separator=|",
        ],
        &input,
    )
    .unwrap_or_else(|e| panic!("seed {seed}: {e}"));

    let producer = Producer::builder(&client).build();
    for key in &keys {
        let meta = producer
            .send(
                ProducerRecord::new(topic.clone())
                    .key(key.clone())
                    .value("baton"),
            )
            .await
            .unwrap()
            .await
            .unwrap();
        assert_eq!(
            meta.partition,
            partition_for_key(key.as_bytes(), 7),
            "seed {seed}: Kafka reports key {key:?} on another partition"
        );
    }
    producer.close().await;

    let records = read(&client, &topic, &(0..7).collect::<Vec<_>>(), 2 * keys.len()).await;
    let mut java: BTreeMap<String, i32> = BTreeMap::new();
    let mut baton: BTreeMap<String, i32> = BTreeMap::new();
    for r in &records {
        let key = String::from_utf8(r.key.as_deref().unwrap().to_vec()).unwrap();
        let by = if r.value.as_deref() == Some(b"java") {
            &mut java
        } else {
            &mut baton
        };
        by.insert(key, r.partition);
    }
    assert_eq!(java.len(), keys.len(), "seed {seed}");
    for key in &keys {
        assert_eq!(
            (java[key], baton[key]),
            (
                partition_for_key(key.as_bytes(), 7),
                partition_for_key(key.as_bytes(), 7)
            ),
            "seed {seed}: key {key:?}"
        );
    }
}

/// The three outcomes of cancelling a record, on the real broker: a lingering
/// record comes back untouched (NeverSent) and is never written; a record whose
/// request Kafka has not answered (the JVM is stopped with SIGSTOP) is InFlight and
/// still delivered exactly once; a delivered one says Delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_outcomes_never_sent_in_flight_delivered() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let client = client().await;
    let topic = create_topic(&client, "ak-cancel", 1).await;
    let end = |client: Client, topic: String| async move {
        Admin::new(&client)
            .list_offsets([(topic, 0, OffsetSpec::Latest)])
            .await
            .unwrap()[0]
            .offset
    };

    // NeverSent: a long linger keeps it in the accumulator.
    let lingering = Producer::builder(&client)
        .linger(Duration::from_secs(3600))
        .build();
    let value = Bytes::from(b"never on the wire".to_vec());
    let d = lingering
        .send(ProducerRecord::new(topic.clone()).partition(0).value(value))
        .await
        .unwrap();
    let record = match d.cancel() {
        CancelOutcome::NeverSent(r) => r,
        other => panic!("expected NeverSent, got {other:?}"),
    };
    record
        .value
        .unwrap()
        .try_into_mut()
        .expect("handed back with no other reference");
    lingering.close().await;

    // Delivered.
    let producer = Producer::builder(&client)
        .linger(Duration::ZERO)
        .request_timeout(Duration::from_secs(30))
        .build();
    let d = producer
        .send(
            ProducerRecord::new(topic.clone())
                .partition(0)
                .value("first"),
        )
        .await
        .unwrap();
    producer.flush().await;
    match d.cancel() {
        CancelOutcome::Delivered(meta) => assert_eq!(meta.offset, 0),
        other => panic!("expected Delivered, got {other:?}"),
    }

    // InFlight: Kafka holds the request unanswered while its JVM is stopped.
    struct Resume<'a>(&'a KafkaCluster);
    impl Drop for Resume<'_> {
        fn drop(&mut self) {
            self.0.resume(1);
        }
    }
    let value = Bytes::from(b"in flight".to_vec());
    let watch = value.clone();
    let resume = Resume(kafka);
    kafka.pause(1);
    let mut d = producer
        .send(ProducerRecord::new(topic.clone()).partition(0).value(value))
        .await
        .unwrap();
    if let Ok(outcome) = tokio::time::timeout(Duration::from_secs(1), &mut d).await {
        panic!("the send ended while Kafka was stopped: {outcome:?}");
    }
    let in_flight = match d.cancel() {
        CancelOutcome::InFlight(h) => h,
        other => panic!("expected InFlight, got {other:?}"),
    };
    let watch = watch
        .try_into_mut()
        .expect_err("the producer still holds an in-flight record");
    drop(resume);
    let meta = tokio::time::timeout(Duration::from_secs(60), in_flight)
        .await
        .expect("an outcome once Kafka runs again")
        .expect("delivered");
    assert_eq!(meta.offset, 1);
    drop(meta);
    watch
        .try_into_mut()
        .expect("released once the outcome is final");
    producer.close().await;
    assert_eq!(
        end(client.clone(), topic.clone()).await,
        2,
        "each written once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_reads_only_its_explicit_partitions_from_its_start_offsets() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let client = client().await;
    let topic = create_topic(&client, "ak-assign", 3).await;
    let producer = Producer::builder(&client).build();
    produce_all(&producer, &topic, 3, 90, "a").await;
    let mut consumer = Consumer::builder(&client)
        .assign(topic.clone(), 0, StartOffset::Earliest)
        .assign(topic.clone(), 2, StartOffset::Offset(20))
        .max_wait(Duration::from_millis(100))
        .build()
        .await
        .unwrap();
    // Records produced after the consumer started arrive too (live reading).
    produce_all(&producer, &topic, 3, 30, "b").await;
    producer.close().await;
    let mut got: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for _ in 0..(30 + 10 + 10 + 10) {
        let r = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
            .await
            .expect("stalled")
            .expect("consumer error");
        got.entry(r.partition).or_default().push(r.offset);
    }
    assert_eq!(got.keys().copied().collect::<Vec<_>>(), vec![0, 2]);
    assert_eq!(got[&0], (0..40).collect::<Vec<_>>());
    assert_eq!(got[&2], (20..40).collect::<Vec<_>>());
    assert!(
        tokio::time::timeout(Duration::from_millis(500), consumer.recv())
            .await
            .is_err(),
        "nothing more"
    );
}

/// Drives `members` round-robin until `total` distinct records are in and the
/// assignments cover `partitions` partitions, disjointly.
async fn drain_group(
    members: &mut [GroupConsumer],
    seen: &mut Vec<(i32, i64)>,
    total: usize,
    partitions: usize,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        for c in members.iter_mut() {
            if let Ok(r) = tokio::time::timeout(Duration::from_millis(20), c.recv()).await {
                let r = r.unwrap_or_else(|e| panic!("group consumer error: {e}"));
                seen.push((r.partition, r.offset));
            }
        }
        let distinct: BTreeSet<(i32, i64)> = seen.iter().copied().collect();
        let assigned: Vec<TopicPartition> = members.iter().flat_map(|m| m.assignment()).collect();
        let unique: BTreeSet<&TopicPartition> = assigned.iter().collect();
        let settled = members.iter().all(|m| !m.assignment().is_empty())
            && assigned.len() == partitions
            && unique.len() == partitions;
        if distinct.len() >= total && settled {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of {total} records; assignments {:?}",
            distinct.len(),
            members.iter().map(|m| m.assignment()).collect::<Vec<_>>()
        );
    }
}

/// Two members with each assignor share a 4-partition topic the way the assignor
/// says; their commits let a third member resume exactly after what they read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_consumers_share_partitions_with_each_assignor_and_resume_at_commits() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let client = client().await;
    for name in ["range", "roundrobin", "cooperative-sticky"] {
        let topic = create_topic(&client, "ak-group", 4).await;
        let group = topic_name(&format!("ak-{name}"));
        let producer = Producer::builder(&client).build();
        produce_all(&producer, &topic, 4, 160, "g").await;
        let build = || {
            let b = group_member(&client, &group, &topic);
            match name {
                "range" => b.assignor(RangeAssignor),
                "roundrobin" => b.assignor(RoundRobinAssignor),
                _ => b.assignor(CooperativeStickyAssignor),
            }
        };
        let mut members = vec![
            build().build().await.unwrap(),
            build().build().await.unwrap(),
        ];
        let mut seen = Vec::new();
        drain_group(&mut members, &mut seen, 160, 4).await;
        let mut shapes: Vec<Vec<i32>> = members
            .iter()
            .map(|m| {
                let mut ps: Vec<i32> = m.assignment().iter().map(|tp| tp.partition).collect();
                ps.sort();
                ps
            })
            .collect();
        shapes.sort();
        match name {
            "range" => assert_eq!(shapes, vec![vec![0, 1], vec![2, 3]], "{name}"),
            "roundrobin" => assert_eq!(shapes, vec![vec![0, 2], vec![1, 3]], "{name}"),
            _ => assert!(shapes.iter().all(|s| s.len() == 2), "{name}: {shapes:?}"),
        }
        for m in members.iter_mut() {
            m.commit()
                .await
                .unwrap_or_else(|e| panic!("{name}: commit: {e}"));
        }
        for m in members {
            m.close().await.unwrap();
        }
        // A new member starts at the commits: only the new records arrive.
        produce_all(&producer, &topic, 4, 8, "h").await;
        producer.close().await;
        let mut after = vec![build().build().await.unwrap()];
        let mut more = Vec::new();
        drain_group(&mut after, &mut more, 8, 4).await;
        more.sort();
        let want: Vec<(i32, i64)> = (0..4).flat_map(|p| [(p, 40), (p, 41)]).collect();
        assert_eq!(more, want, "{name}: resumed exactly at the commits");
        after.pop().unwrap().close().await.unwrap();
    }
}

/// A static member that closes (without leaving) and comes back under the same
/// `group.instance.id` gets its partitions back with no rebalance of the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_member_returns_without_a_rebalance() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let client = client().await;
    let topic = create_topic(&client, "ak-static", 4).await;
    let group = topic_name("ak-static");
    let producer = Producer::builder(&client).build();
    produce_all(&producer, &topic, 4, 40, "s").await;
    let build = |id: &str| group_member(&client, &group, &topic).group_instance_id(id);
    let mut members = vec![
        build("a").build().await.unwrap(),
        build("b").build().await.unwrap(),
    ];
    let mut seen = Vec::new();
    drain_group(&mut members, &mut seen, 40, 4).await;
    let b = members.pop().unwrap();
    let a = members.pop().unwrap();
    let (mine, generation) = (a.assignment(), b.generation());
    a.close().await.unwrap();
    let mut members = vec![build("a").build().await.unwrap(), b];
    produce_all(&producer, &topic, 4, 40, "t").await;
    producer.close().await;
    drain_group(&mut members, &mut seen, 80, 4).await;
    assert_eq!(
        members[0].assignment(),
        mine,
        "the same partitions came back"
    );
    assert_eq!(
        members[1].generation(),
        generation,
        "the other member saw no rebalance"
    );
    let distinct: BTreeSet<(i32, i64)> = seen.iter().copied().collect();
    assert_eq!(
        (distinct.len(), seen.len()),
        (80, 80),
        "nothing re-delivered"
    );
    for m in members {
        m.close().await.unwrap();
    }
}

/// A group shared by Baton's `GroupConsumer`s and a Java `KafkaConsumer` (classic
/// protocol), both with `cooperative-sticky`: once with a Baton member leading
/// (joined first; the Java member leaves later), once with the Java member
/// leading (a Baton member leaves later). Every partition goes to exactly one
/// member and every record is read exactly once; see `mixed_group::run`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_shared_with_java_consumers_cooperative_sticky() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let client = client().await;
    let bootstrap = kafka.bootstrap().join(",");
    for java_leads in [false, true] {
        let summary =
            mixed_group::run(&client, &bootstrap, Strategy::CooperativeSticky, java_leads).await;
        eprintln!(
            "Apache Kafka {}: {summary}",
            crate::apache_kafka_util::kafka_version()
        );
    }
}

/// As [`group_shared_with_java_consumers_cooperative_sticky`], with Java's default
/// assignor list (`range`, `cooperative-sticky`) and Baton's range assignor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_shared_with_java_consumers_range() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let client = client().await;
    let bootstrap = kafka.bootstrap().join(",");
    for java_leads in [false, true] {
        let summary = mixed_group::run(&client, &bootstrap, Strategy::Range, java_leads).await;
        eprintln!(
            "Apache Kafka {}: {summary}",
            crate::apache_kafka_util::kafka_version()
        );
    }
}

/// The Java harness's transactional modes (`tests/interop/java`) against Apache
/// Kafka, which proves them right before they judge baton-broker: one
/// transactional producer runs four transactions of 100 records (commit, abort,
/// commit, abort), each sending its group offset with `sendOffsetsToTransaction`;
/// a `read_committed` consumer then reads exactly the 200 committed records, a
/// `read_uncommitted` one all 400, and the group's stable offset is the last
/// committed transaction's (300), not the aborted one's (400).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_transactional_producer_and_read_committed_consumer() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let client = client().await;
    let bootstrap = kafka.bootstrap().join(",");
    let topic = create_topic(&client, "java-txn", 3).await;
    let group = topic_name("java-txn-group");
    let txn_id = topic_name("java-txn-id");
    let produced = {
        let (b, t, g) = (bootstrap.clone(), topic.clone(), group.clone());
        tokio::task::spawn_blocking(move || {
            harness(
                "txn-produce",
                &[&b, &t, &g, &txn_id, "100", "commit,abort,commit,abort"],
            )
        })
        .await
        .unwrap()
    };
    assert_eq!(int(&produced, "committed"), Some(200), "{produced}");
    assert_eq!(int(&produced, "aborted"), Some(200), "{produced}");
    let read = |isolation: &'static str| {
        let (b, t, g) = (bootstrap.clone(), topic.clone(), group.clone());
        tokio::task::spawn_blocking(move || harness("read-isolated", &[&b, &t, isolation, &g]))
    };
    let committed = read("read_committed").await.unwrap();
    assert_eq!(
        field(&committed, "reached_end"),
        Some("true"),
        "{committed}"
    );
    assert_eq!(int(&committed, "records"), Some(200), "{committed}");
    assert_eq!(
        int(&committed, "committed_records"),
        Some(200),
        "{committed}"
    );
    assert_eq!(int(&committed, "aborted_records"), Some(0), "{committed}");
    assert_eq!(int(&committed, "group_offset"), Some(300), "{committed}");
    let all = read("read_uncommitted").await.unwrap();
    assert_eq!(int(&all, "records"), Some(400), "{all}");
    assert_eq!(int(&all, "aborted_records"), Some(200), "{all}");
    assert_eq!(int(&all, "mismatched"), Some(0), "{all}");
}

/// Spawns a consumer on `partitions` of `topic`, from the start, forwarding every
/// record to `tx` (errors are printed and retried).
async fn live_reader(
    client: &Client,
    topic: &str,
    partitions: impl IntoIterator<Item = i32>,
    tx: tokio::sync::mpsc::UnboundedSender<ConsumerRecord>,
) -> tokio::task::JoinHandle<()> {
    let mut builder = Consumer::builder(client).max_wait(Duration::from_millis(200));
    for p in partitions {
        builder = builder.assign(topic.to_string(), p, StartOffset::Earliest);
    }
    let mut consumer = builder.build().await.expect("consumer");
    tokio::spawn(async move {
        loop {
            match consumer.recv().await {
                Ok(r) => {
                    if tx.send(r).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    eprintln!("consumer error (retrying): {e}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    })
}

/// Moves what the live readers got into `history` until it holds as many records
/// as were acknowledged and nothing more comes for 2 s (20 s while short; 90 s in
/// all).
async fn drain_live(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<ConsumerRecord>,
    history: &mut baton_broker::history::History,
) {
    let acked = history.check().acknowledged as usize;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let idle = if history.consumed_count() < acked {
            Duration::from_secs(20)
        } else {
            Duration::from_secs(2)
        };
        let wait = idle.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
        match tokio::time::timeout(wait, rx.recv()).await {
            Ok(Some(r)) => match r
                .value
                .as_deref()
                .and_then(baton_broker::history::parse_payload)
            {
                Some((id, sum)) => history.consumed(r.partition, r.offset, id, sum),
                None => history.consumed(r.partition, r.offset, u64::MAX, 0),
            },
            _ => return,
        }
    }
}

/// SIGTERM (controlled shutdown) and restart of every node in turn, each waiting
/// for the node to rejoin and no partition to be under-replicated.
async fn rolling_restart(kafka: &KafkaCluster, client: &Client, started: std::time::Instant) {
    for id in kafka.node_ids() {
        let took = kafka.stop(id);
        eprintln!("node {id}: controlled shutdown in {took:.1?}");
        kafka.restart(id);
        kafka.wait_brokers(3).await.unwrap();
        kafka.wait_fully_replicated(client).await.unwrap();
        eprintln!(
            "node {id}: back and fully replicated at {:.1?}",
            started.elapsed()
        );
    }
}

/// The leader epoch of each partition of `topic`.
async fn leader_epochs(client: &Client, topic: &str) -> BTreeMap<i32, i32> {
    let meta = client.refresh_metadata().await.expect("metadata");
    meta.topic(topic)
        .expect("topic")
        .partitions
        .iter()
        .map(|p| (p.partition, p.leader_epoch))
        .collect()
}

/// The promise on the real broker. A Baton producer (acks=all, idempotent) writes
/// self-checking records to a 3-node Apache Kafka cluster (RF 3,
/// `min.insync.replicas=2`) and a Baton consumer on explicit partitions reads them
/// live, while every node in turn is stopped with SIGTERM (controlled shutdown) and
/// restarted, each waiting for the node to rejoin and no partition to be
/// under-replicated, and then a partition leader is SIGKILLed and restarted.
/// `baton_broker::history` must find 0 lost, duplicated, reordered or corrupted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_restart_and_leader_kill_of_a_3_node_cluster_lose_nothing() {
    let started = std::time::Instant::now();
    let kafka = three_nodes().await;
    let _logs = kafka.logs_on_failure();
    eprintln!("3-node cluster up in {:.1?}", started.elapsed());
    let client = kafka.client().await;
    let topic = topic_name("ak-rolling");
    Admin::new(&client)
        .create_topics([
            NewTopic::new(topic.clone(), baton_testkit::chaos::PARTITIONS, 3)
                .config("min.insync.replicas", "2"),
        ])
        .await
        .expect("topic created");
    kafka.wait_fully_replicated(&client).await.unwrap();

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let reader = live_reader(&client, &topic, 0..baton_testkit::chaos::PARTITIONS, tx).await;
    let workload = baton_testkit::chaos::start_producing(&client, &topic, Duration::from_millis(2));
    tokio::time::sleep(Duration::from_secs(2)).await;
    rolling_restart(&kafka, &client, started).await;
    let meta = client.refresh_metadata().await.unwrap();
    let leader = meta.topic(&topic).unwrap().partitions[0]
        .leader
        .expect("a leader");
    kafka.kill(leader);
    eprintln!(
        "leader {leader} of partition 0 killed at {:.1?}",
        started.elapsed()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    kafka.restart(leader);
    kafka.wait_brokers(3).await.unwrap();
    kafka.wait_fully_replicated(&client).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;

    let worst = *workload.worst_delivery.lock().unwrap();
    let mut history = workload.finish().await;
    let acked = history.check().acknowledged as usize;
    drain_live(&mut rx, &mut history).await;
    reader.abort();
    let report = history.check();
    eprintln!(
        "Apache Kafka {} rolling restart + leader kill: {report}; worst produce stall {worst:.1?}; total {:.1?}",
        crate::apache_kafka_util::kafka_version(),
        started.elapsed()
    );
    if !report.passed() {
        let lost = history.lost_ids();
        eprintln!("lost ids (first 20): {:?}", &lost[..lost.len().min(20)]);
    }
    assert!(report.passed(), "{report}");
    assert!(acked > 1000, "the producer kept going: {report}");
}

/// The field report's setup on Apache Kafka: a topic with replication factor 2, a
/// Baton producer with `acks=1` (and otherwise its defaults, which makes it
/// non-idempotent: Kafka's idempotence needs `acks=all`, and Baton, like the Java
/// client, turns its default off rather than refuse), and one Baton consumer per
/// partition on that explicit partition, reading live, while every node of the
/// 3-node cluster is stopped with SIGTERM and restarted in turn.
///
/// What `acks=1` promises, and so what is asserted: the leader alone has written
/// a record when it is acknowledged. When leadership moves (as a controlled
/// shutdown makes it), the new leader may lack the tail the old one acknowledged,
/// and the old one truncates it on rejoining: Apache Kafka can lose acknowledged
/// records then, and that is reported (printed), not failed. Consumers read only
/// below the high watermark, so they never see a record that is later truncated.
/// Without idempotence a retried batch may also be written twice (its first
/// attempt was written but its response lost) or land behind later batches (up
/// to 5 batches per partition are in flight, as in the Java client's defaults):
/// duplicates and reordering are reported too, and allowed only on partitions
/// whose leader changed. What must hold regardless: no record is corrupted
/// (`baton_broker::history`); records are lost, duplicated or reordered only on
/// partitions whose leader changed during the run (a higher leader epoch at the
/// end); and a lost record is missing from Kafka's log as well (a fresh consumer
/// reading every partition from the start does not find it), so the live
/// consumers skipped nothing. The producer must also keep going (over 1000
/// records acknowledged).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn field_report_setup_rf2_acks1_partition_consumers_through_rolling_restart() {
    let started = std::time::Instant::now();
    let kafka = three_nodes().await;
    let _logs = kafka.logs_on_failure();
    let client = kafka.client().await;
    let topic = topic_name("ak-field-report");
    Admin::new(&client)
        .create_topics([NewTopic::new(
            topic.clone(),
            baton_testkit::chaos::PARTITIONS,
            2,
        )])
        .await
        .expect("topic created");
    kafka.wait_fully_replicated(&client).await.unwrap();
    let epochs_before = leader_epochs(&client, &topic).await;

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut readers = Vec::new();
    for p in 0..baton_testkit::chaos::PARTITIONS {
        readers.push(live_reader(&client, &topic, [p], tx.clone()).await);
    }
    drop(tx);
    let workload = baton_testkit::chaos::start_producing_with(
        &client,
        &topic,
        Duration::from_millis(2),
        Acks::Leader,
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    rolling_restart(&kafka, &client, started).await;
    tokio::time::sleep(Duration::from_secs(1)).await;

    let worst = *workload.worst_delivery.lock().unwrap();
    let mut history = workload.finish().await;
    let acked = history.check().acknowledged as usize;
    drain_live(&mut rx, &mut history).await;
    for r in readers {
        r.abort();
    }
    let epochs_after = leader_epochs(&client, &topic).await;
    let report = history.check();
    let lost = history.lost_ids();
    // A lost record must be missing from Kafka's log too, not only skipped by the
    // live consumers: a fresh consumer reads every partition from the start.
    let mut reread = history.clone();
    baton_testkit::chaos::consume_all(&client, &topic, &mut reread).await;
    assert_eq!(
        reread.lost_ids(),
        lost,
        "the live consumers missed records that are in the log: {report}"
    );
    let mut lost_per_partition: BTreeMap<i32, usize> = BTreeMap::new();
    for id in &lost {
        *lost_per_partition
            .entry((id % baton_testkit::chaos::PARTITIONS as u64) as i32)
            .or_default() += 1;
    }
    let disordered = history.disordered_partitions();
    let unexplained: Vec<i32> = lost_per_partition
        .keys()
        .chain(&disordered)
        .copied()
        .filter(|p| epochs_after.get(p) <= epochs_before.get(p))
        .collect();
    eprintln!(
        "Apache Kafka {} field report setup (RF 2, acks=1, rolling restart): {report} \
         (a FAIL there counts what acks=1 without idempotence allows; this test judges as documented); \
         lost acknowledged records per partition {lost_per_partition:?} (first ids {:?}); \
         partitions with duplicated or reordered records {disordered:?}; leader epochs {epochs_before:?} -> {epochs_after:?}; worst produce stall \
         {worst:.1?}; total {:.1?}",
        crate::apache_kafka_util::kafka_version(),
        &lost[..lost.len().min(10)],
        started.elapsed()
    );
    assert_eq!(report.corrupted, 0, "corrupted: {report}");
    assert!(
        unexplained.is_empty(),
        "records lost, duplicated or reordered on partitions {unexplained:?} whose leader never changed: {report}"
    );
    assert!(acked > 1000, "the producer kept going: {report}");
}

/// Records per login in the SASL_SSL test.
const SECURED_RECORDS: usize = 3_000;

/// Unsecured OAUTHBEARER tokens (`"alg":"none"`) for `admin`, which Apache
/// Kafka's default validator accepts.
struct UnsecuredTokens;

#[baton_kafka::async_trait]
impl OAuthTokenProvider for UnsecuredTokens {
    async fn token(&self) -> Result<OAuthToken, BoxError> {
        Ok(OAuthToken::unsecured("admin", Duration::from_secs(3600)))
    }
}

/// Issue 16: Baton over Apache Kafka's `SASL_SSL` listener (PEM keystore,
/// KIP-651), trusting the test CA with host name verification on, logged in
/// with SCRAM-SHA-512 (the user added at format time), with PLAIN (a JAAS user)
/// and with OAUTHBEARER (an unsecured token from a token provider, checked by
/// Kafka's default validator). Each login creates a topic, produces keyed
/// records idempotently to three partitions and reads them back: every
/// partition holds exactly the values sent to it, in send order (nothing lost,
/// duplicated or reordered). A wrong password is a typed authentication error
/// naming the mechanism.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baton_over_sasl_ssl_with_scram_sha512_plain_and_oauthbearer() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let (bootstrap, pki) = kafka
        .sasl_ssl()
        .expect("the single node has a SASL_SSL listener");
    let connect = |credentials: SaslCredentials| {
        Client::builder(bootstrap.clone())
            .client_id("baton-apache-kafka-sasl-ssl")
            .security_protocol(SecurityProtocol::SaslSsl)
            .tls(TlsConfig::with_ca_pem_file(&pki.ca).expect("the CA file loads"))
            .sasl(credentials)
            .build()
    };
    for credentials in [
        SCRAM_SHA512_LOGIN.credentials(),
        PLAIN_LOGIN.credentials(),
        SaslCredentials::oauthbearer(UnsecuredTokens),
    ] {
        let mechanism = credentials.mechanism().name();
        let client = connect(credentials)
            .await
            .unwrap_or_else(|e| panic!("{mechanism}: Baton connects over SASL_SSL: {e}"));
        let topic = create_topic(&client, "ak-sasl-ssl", 3).await;
        let producer = Producer::builder(&client).build();
        let mut deliveries = Vec::with_capacity(SECURED_RECORDS);
        let mut sent: BTreeMap<i32, Vec<String>> = BTreeMap::new();
        for i in 0..SECURED_RECORDS {
            let partition = (i % 3) as i32;
            let value = format!("{mechanism}-{i}");
            sent.entry(partition).or_default().push(value.clone());
            let record = ProducerRecord::new(topic.clone())
                .partition(partition)
                .key(format!("k{i}"))
                .value(value);
            deliveries.push(producer.send(record).await.expect("send accepted"));
        }
        producer.flush().await;
        for (i, d) in deliveries.into_iter().enumerate() {
            d.await
                .unwrap_or_else(|e| panic!("{mechanism}: record {i} not delivered: {e}"));
        }
        producer.close().await;

        let mut read_back: BTreeMap<i32, Vec<String>> = BTreeMap::new();
        for r in read(&client, &topic, &[0, 1, 2], SECURED_RECORDS).await {
            let value = r.value.as_deref().map(String::from_utf8_lossy);
            read_back
                .entry(r.partition)
                .or_default()
                .push(value.unwrap_or_default().into_owned());
        }
        assert_eq!(
            read_back, sent,
            "{mechanism}: every partition holds what was sent to it, in order"
        );
        println!(
            "Apache Kafka SASL_SSL {mechanism}: {SECURED_RECORDS} records acknowledged and read \
             back, 0 lost, 0 duplicated, 0 reordered"
        );
    }

    match connect(SCRAM_SHA512_LOGIN.with_password("not-it").credentials()).await {
        Err(ClientError::Connection(ConnectionError::Authentication {
            mechanism,
            message,
            ..
        })) => {
            assert_eq!(mechanism, "SCRAM-SHA-512");
            assert!(message.contains("Authentication failed"), "{message}");
        }
        Err(other) => panic!("expected an authentication error, got {other:?}"),
        Ok(_) => panic!("a wrong password was accepted"),
    }
}
