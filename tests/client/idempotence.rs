//! The idempotent producer (the default) against the in-process broker: when the
//! broker writes a batch and the response is lost, the retry is deduplicated and
//! every record appears once, in order, with the offsets the producer reported.
//!
//! As in `compression.rs`, the client reaches the broker through
//! `baton_testkit::proxy`; it can forward a Produce request, read the broker's
//! response and then close the connection instead of answering (the batch is
//! written, the client never hears), or rewrite the answer.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_broker::{Broker, BrokerConfig};
use baton_kafka::{
    Acks, Client, Consumer, ProduceError, Producer, ProducerConfigError, ProducerRecord,
    StartOffset,
};
use baton_protocol::messages::{
    ApiVersionsRequest, InitProducerIdRequest, MetadataRequest, ProduceRequest,
    ProduceResponseNodeEndpoint,
};
use baton_protocol::record::RecordBatch;
use baton_protocol::{envelope, ErrorCode, Message};
use baton_testkit::client::{consume_from_start, create_topic};
use baton_testkit::proxy::{rewrite_response, Exchange, Proxied, ProxyState, SeenBatch};
use baton_testkit::{seed, Rng};
use bytes::Bytes;

/// An ApiVersions response frame (header, then the body) minus InitProducerId.
fn without_init_producer_id(frame: &[u8], version: i16) -> Vec<u8> {
    rewrite_response::<ApiVersionsRequest>(frame, version, |resp| {
        resp.api_keys
            .retain(|k| k.api_key != InitProducerIdRequest::API_KEY);
    })
}

/// A Produce response frame with every partition turned into
/// NOT_LEADER_OR_FOLLOWER plus a KIP-951 hint: leader `node` at a high epoch,
/// reachable at 127.0.0.1:`port`.
fn with_leader_hint(frame: &[u8], version: i16, node: i32, port: u16) -> Vec<u8> {
    let (header, mut resp) =
        envelope::decode_response::<ProduceRequest>(Bytes::copy_from_slice(frame), version)
            .expect("produce response");
    for t in &mut resp.responses {
        for p in &mut t.partition_responses {
            p.error_code = ErrorCode::NotLeaderOrFollower.code();
            p.base_offset = -1;
            p.current_leader.leader_id = node;
            p.current_leader.leader_epoch = 1_000;
        }
    }
    resp.node_endpoints = vec![ProduceResponseNodeEndpoint {
        node_id: node,
        host: "127.0.0.1".into(),
        port: i32::from(port),
        rack: None,
    }];
    unframed(envelope::encode_response::<ProduceRequest>(
        header.correlation_id,
        version,
        &resp,
    ))
}

/// An encoded response frame without its size prefix, as the proxy's rewrite
/// returns it.
fn unframed(frame: Result<Bytes, baton_protocol::EncodeError>) -> Vec<u8> {
    frame.expect("re-encode")[4..].to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_response_is_retried_and_deduplicated() {
    let setup = Proxied::start("baton-idempotence-tests", ProxyState::losing(vec![0])).await;
    let topic = create_topic(&setup.client, "idem-lost", 1).await;
    let producer = Producer::builder(&setup.client)
        .linger(Duration::from_millis(20))
        .retry_backoff(Duration::from_millis(20))
        .build();
    let mut deliveries = Vec::new();
    for i in 0..100 {
        let record = ProducerRecord::new(topic.clone())
            .partition(0)
            .value(format!("v{i}"));
        deliveries.push(producer.send(record).await.unwrap());
    }
    for (i, d) in deliveries.into_iter().enumerate() {
        let meta = d.await.unwrap_or_else(|e| panic!("record {i}: {e}"));
        assert_eq!(meta.offset, i as i64, "the original offset of record {i}");
    }
    producer.close().await;

    let batches = setup.batches();
    let (lost, retry) = (&batches[0], &batches[1]);
    assert_eq!(lost.request, 0);
    assert_eq!(lost.partition, retry.partition);
    // (producer id, base sequence, record count)
    let idempotence = |b: &SeenBatch| {
        let batch = RecordBatch::parse(b.bytes.clone()).expect("batch");
        (
            batch.producer_id(),
            batch.base_sequence(),
            batch.record_count(),
        )
    };
    assert!(
        idempotence(lost).0 >= 0,
        "the batch is idempotent: {lost:?}"
    );
    assert_eq!(
        idempotence(retry),
        idempotence(lost),
        "the retry is the same batch with the same sequence"
    );

    let got = consume_from_start(&setup.client, &topic, 1, 100, 0).await;
    for (i, r) in got.iter().enumerate() {
        assert_eq!(r.offset, i as i64);
        assert_eq!(r.value.as_deref(), Some(format!("v{i}").as_bytes()));
    }
    assert_eq!(
        baton_kafka::Admin::new(&setup.client)
            .list_offsets([(topic.clone(), 0, baton_kafka::OffsetSpec::Latest)])
            .await
            .unwrap()[0]
            .offset,
        100,
        "each record once"
    );
    setup.shutdown().await;
}

/// Several lost responses while up to 5 batches per partition are in flight: every
/// record is acknowledged, appears exactly once, and each partition keeps send
/// order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_lost_responses_with_five_in_flight_lose_and_duplicate_nothing() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    let mut lose: Vec<usize> = (0..6).map(|_| 1 + rng.below(30) as usize).collect();
    lose.sort_unstable();
    lose.dedup();
    eprintln!("losing responses to produce requests {lose:?}");
    let setup = Proxied::start("baton-idempotence-tests", ProxyState::losing(lose)).await;
    const PARTITIONS: i32 = 3;
    const RECORDS: usize = 3_000;
    let topic = create_topic(&setup.client, "idem-many", PARTITIONS).await;
    let producer = Producer::builder(&setup.client)
        .batch_size(2_000)
        .linger(Duration::from_millis(1))
        .max_in_flight(5)
        .retry_backoff(Duration::from_millis(10))
        .build();
    let mut deliveries = Vec::with_capacity(RECORDS);
    for i in 0..RECORDS {
        let p = rng.below(PARTITIONS as u64) as i32;
        let record = ProducerRecord::new(topic.clone())
            .partition(p)
            .value(format!("{i:06}-{}", rng.below(1_000_000)));
        deliveries.push(producer.send(record).await.unwrap());
    }
    let mut acked: BTreeMap<(i32, i64), Bytes> = BTreeMap::new();
    let mut sent_order: BTreeMap<i32, Vec<Bytes>> = BTreeMap::new();
    for (i, d) in deliveries.into_iter().enumerate() {
        let meta = d
            .await
            .unwrap_or_else(|e| panic!("seed {seed}: record {i}: {e}"));
        let value = meta.record().value.clone().unwrap();
        sent_order
            .entry(meta.partition)
            .or_default()
            .push(value.clone());
        assert!(
            acked.insert((meta.partition, meta.offset), value).is_none(),
            "seed {seed}: two records acknowledged at one offset"
        );
    }
    producer.close().await;
    let on_wire = setup.batches().len();
    eprintln!("{on_wire} batches on the wire");

    let got = consume_from_start(&setup.client, &topic, PARTITIONS, RECORDS, seed).await;
    let mut per_partition: BTreeMap<i32, Vec<Bytes>> = BTreeMap::new();
    for r in &got {
        let want = acked.get(&(r.partition, r.offset)).unwrap_or_else(|| {
            panic!(
                "seed {seed}: unacknowledged record at {}/{}",
                r.partition, r.offset
            )
        });
        assert_eq!(r.value.as_ref(), Some(want), "seed {seed}");
        per_partition
            .entry(r.partition)
            .or_default()
            .push(r.value.clone().unwrap());
    }
    assert_eq!(
        per_partition, sent_order,
        "seed {seed}: per-partition order"
    );
    for p in 0..PARTITIONS {
        let end = baton_kafka::Admin::new(&setup.client)
            .list_offsets([(topic.clone(), p, baton_kafka::OffsetSpec::Latest)])
            .await
            .unwrap()[0]
            .offset;
        assert_eq!(
            end as usize,
            sent_order.get(&p).map_or(0, |v| v.len()),
            "seed {seed}: partition {p} holds each record once"
        );
    }
    setup.shutdown().await;
}

#[tokio::test]
async fn idempotence_settings_are_checked() {
    let (broker, client) = baton_testkit::client::broker_and_client().await;
    let err = Producer::builder(&client)
        .idempotence(true)
        .acks(Acks::Leader)
        .try_build()
        .unwrap_err();
    assert_eq!(
        err,
        ProducerConfigError::IdempotenceNeedsAcksAll(Acks::Leader)
    );
    let err = Producer::builder(&client)
        .idempotence(true)
        .max_in_flight(6)
        .try_build()
        .unwrap_err();
    assert_eq!(err, ProducerConfigError::TooManyInFlight(6));
    // Without an explicit choice, conflicting settings turn the default off.
    assert!(Producer::builder(&client)
        .acks(Acks::Leader)
        .try_build()
        .is_ok());
    broker.shutdown().await;
}

/// The mission's scenario on the 3-node in-process cluster: an application gives
/// each delivery 200 ms, then acts on Baton's typed outcome (sends again only what
/// was never sent, otherwise awaits the final result) while the leader of the
/// topic's first partition is hard-killed and restarted again and again. The
/// history check over acknowledged and consumed records must count 0 lost, 0
/// duplicated, 0 reordered and 0 corrupted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_kills_with_short_timeouts_lose_duplicate_and_reorder_nothing() {
    use baton_broker::Cluster;
    use baton_kafka::{CancelOutcome, NewTopic};
    use baton_testkit::payload::{intact_id, payload};
    use std::collections::{HashMap, HashSet};

    const RECORDS: u64 = 6_000;
    const KILLS: u32 = 20;
    baton_testkit::init_tracing();
    let seed = seed();
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::builder()
        .brokers(3)
        .data_dir(dir.path())
        .session_timeout(Duration::from_secs(2))
        .start()
        .await
        .expect("cluster starts");
    let client = Client::builder(cluster.bootstrap_servers())
        .client_id("baton-failover-tests")
        .request_timeout(Duration::from_secs(3))
        .connect_timeout(Duration::from_secs(1))
        .build()
        .await
        .unwrap();
    let topic = baton_testkit::topic_name("failover");
    baton_kafka::Admin::new(&client)
        .create_topics([NewTopic::new(topic.clone(), 3, 3).config("min.insync.replicas", "2")])
        .await
        .unwrap();
    let producer = Producer::builder(&client)
        .request_timeout(Duration::from_secs(3))
        .build();

    // The self-checking payload of `baton_broker::history` (id, CRC-32C, filler).
    fn value(seq: u64) -> Bytes {
        Bytes::from(payload(seq, 20))
    }

    #[derive(Default)]
    struct History {
        acked: HashSet<u64>,
        resent: HashSet<u64>,
        failed: Vec<(u64, String)>,
        in_flight: u64,
    }
    let history = Arc::new(Mutex::new(History::default()));
    let producing = tokio::spawn({
        let producer = producer.clone();
        let topic = topic.clone();
        let history = history.clone();
        async move {
            let mut tasks = tokio::task::JoinSet::new();
            for seq in 0..RECORDS {
                let record = ProducerRecord::new(topic.clone())
                    .key(Bytes::from(format!("k{}", seq % 31)))
                    .value(value(seq));
                // Sends are accepted in sequence order, from this one task.
                let mut d = producer.send(record).await.expect("accepted");
                let producer = producer.clone();
                let history = history.clone();
                tasks.spawn(async move {
                    loop {
                        let result =
                            match tokio::time::timeout(Duration::from_millis(200), &mut d).await {
                                Ok(r) => r,
                                Err(_) => match d.cancel() {
                                    CancelOutcome::NeverSent(record) => {
                                        history.lock().unwrap().resent.insert(seq);
                                        d = producer.send(record).await.expect("accepted");
                                        continue;
                                    }
                                    CancelOutcome::InFlight(h) => {
                                        history.lock().unwrap().in_flight += 1;
                                        h.await
                                    }
                                    CancelOutcome::Delivered(m) => Ok(m),
                                    CancelOutcome::Failed(e) => Err(e),
                                },
                            };
                        let mut h = history.lock().unwrap();
                        match result {
                            Ok(_) => {
                                h.acked.insert(seq);
                            }
                            Err(e) => h.failed.push((seq, e.to_string())),
                        }
                        return;
                    }
                });
                // Spread the sends over the kills (about 30 s).
                if seq % 200 == 199 {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
            while tasks.join_next().await.is_some() {}
        }
    });
    for kill in 0..KILLS {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let leader = cluster
            .partition_state(&topic, 0)
            .map(|v| v.leader)
            .filter(|&l| l > 0)
            .unwrap_or(1);
        eprintln!("kill {kill}: node {leader}");
        cluster.node(leader).kill();
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        cluster.node(leader).restart().await.expect("restart");
    }
    // Every delivery ends within its timeout; one that takes long after the last
    // restart means a partition stayed unavailable: show the cluster's state.
    let mut producing = producing;
    let done = tokio::time::timeout(Duration::from_secs(30), &mut producing).await;
    if let Ok(joined) = done {
        joined.unwrap();
    } else {
        eprintln!(
            "seed {seed}: deliveries still pending 30 s after the last restart; unfenced \
             brokers {:?}",
            cluster.unfenced_brokers()
        );
        for p in 0..3 {
            eprintln!("partition {p}: {:?}", cluster.partition_state(&topic, p));
        }
        eprintln!("{}", cluster.timeline_text());
        producing.await.unwrap();
    }
    producer.close().await;

    let history = Arc::try_unwrap(history).ok().unwrap().into_inner().unwrap();
    // Deliveries that failed are reported after the read-back, with whether their
    // records are in the log anyway (an outcome reported wrongly) or not.
    let mut builder = Consumer::builder(&client);
    for p in 0..3 {
        builder = builder.assign(topic.clone(), p, StartOffset::Earliest);
    }
    let mut consumer = builder.build().await.unwrap();
    let mut seen: HashMap<u64, u32> = HashMap::new();
    let mut last_seq: HashMap<i32, u64> = HashMap::new();
    let (mut consumed, mut corrupted, mut reordered) = (0u64, 0u64, 0u64);
    loop {
        let wait = if (consumed as usize) < history.acked.len() {
            Duration::from_secs(30)
        } else {
            Duration::from_secs(2)
        };
        let Ok(r) = tokio::time::timeout(wait, consumer.recv()).await else {
            break;
        };
        let r = r.unwrap();
        consumed += 1;
        let Some(seq) = r.value.as_deref().and_then(intact_id) else {
            corrupted += 1;
            continue;
        };
        *seen.entry(seq).or_default() += 1;
        // Records sent once (not re-sent by the application) keep send order.
        if !history.resent.contains(&seq) {
            if let Some(prev) = last_seq.insert(r.partition, seq) {
                if seq < prev {
                    reordered += 1;
                }
            }
        }
    }
    let lost = history
        .acked
        .iter()
        .filter(|s| !seen.contains_key(s))
        .count();
    let duplicated: u64 = seen.values().map(|&n| u64::from(n) - 1).sum();
    eprintln!(
        "seed {seed}: {} acknowledged, {} re-sent after NeverSent, {} awaited after InFlight, \
         {consumed} consumed: {lost} lost, {duplicated} duplicated, {reordered} reordered, \
         {corrupted} corrupted",
        history.acked.len(),
        history.resent.len(),
        history.in_flight
    );
    let failed: Vec<String> = history
        .failed
        .iter()
        .take(5)
        .map(|(seq, e)| {
            let stored = seen.get(seq).copied().unwrap_or(0);
            format!("{seq} (stored {stored} times): {e}")
        })
        .collect();
    assert!(
        history.failed.is_empty(),
        "seed {seed}: {} deliveries failed, lost {lost}, duplicated {duplicated}: {failed:?}",
        history.failed.len()
    );
    assert_eq!(history.acked.len() as u64, RECORDS, "seed {seed}");
    assert_eq!(
        (lost, duplicated, reordered, corrupted),
        (0, 0, 0, 0),
        "seed {seed}: lost, duplicated, reordered, corrupted"
    );
    drop(consumer);
    cluster.shutdown().await;
}

/// A cluster without InitProducerId: the idempotent default fails every record with
/// a typed error naming the fix, never silently downgrading; `.idempotence(false)`
/// produces.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_without_init_producer_id_is_a_typed_error() {
    let setup = Proxied::start(
        "baton-idempotence-tests",
        ProxyState {
            rewrite: Some(Box::new(|ex: Exchange, response| {
                if ex.api_key == ApiVersionsRequest::API_KEY {
                    without_init_producer_id(&response, ex.version)
                } else {
                    response
                }
            })),
            ..ProxyState::default()
        },
    )
    .await;
    let topic = create_topic(&setup.client, "idem-unsupported", 1).await;
    let producer = Producer::builder(&setup.client).build();
    let err = producer
        .send(ProducerRecord::new(topic.clone()).value("first"))
        .await
        .expect("accepted before the producer id is asked for")
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProduceError::IdempotenceUnsupported { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains(".idempotence(false)"), "{err}");
    assert_eq!(
        err.into_record().unwrap().value.as_deref(),
        Some(&b"first"[..])
    );
    // Later sends fail at once, with the record handed back.
    let err = producer
        .send(ProducerRecord::new(topic.clone()).value("second"))
        .await
        .unwrap_err();
    assert!(matches!(err, ProduceError::IdempotenceUnsupported { .. }));
    assert!(setup.batches().is_empty(), "nothing was produced");
    producer.close().await;

    let plain = Producer::builder(&setup.client).idempotence(false).build();
    let meta = plain
        .send(ProducerRecord::new(topic.clone()).value("plain"))
        .await
        .unwrap()
        .await
        .unwrap();
    assert_eq!(meta.offset, 0);
    plain.close().await;
    setup.shutdown().await;
}

/// The broker loses the producer's state (an in-memory broker replaced on the same
/// address): the next batches break the sequence (OUT_OF_ORDER_SEQUENCE_NUMBER).
/// The broker refused them before appending, at their first attempt, so the
/// producer bumps its epoch and sends them again from sequence 0: every record is
/// delivered once, in send order, and none fails. No record is ever reported
/// delivered that the log does not hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_sequence_is_sent_again_under_a_new_epoch() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let addr = broker.local_addr();
    let client = Client::builder([broker.bootstrap()])
        .request_timeout(Duration::from_secs(5))
        .connect_timeout(Duration::from_secs(1))
        .build()
        .await
        .unwrap();
    let topic = create_topic(&client, "idem-reset", 1).await;
    let producer = Producer::builder(&client)
        .linger(Duration::ZERO)
        .batch_size(100)
        .retry_backoff(Duration::from_millis(20))
        .build();
    for i in 0..3 {
        producer
            .send(ProducerRecord::new(topic.clone()).value(format!("before-{i}")))
            .await
            .unwrap()
            .await
            .unwrap();
    }
    // A new broker without the producer's state, and the same (empty) topic.
    broker.shutdown().await;
    let broker = Broker::start(BrokerConfig::in_memory().with_listen(addr))
        .await
        .unwrap();
    baton_kafka::Admin::new(&client)
        .create_topic(topic.clone(), 1, 1)
        .await
        .unwrap();

    let mut deliveries = Vec::new();
    for i in 0..20 {
        deliveries.push(
            producer
                .send(ProducerRecord::new(topic.clone()).value(format!("after-{i:02}")))
                .await
                .unwrap(),
        );
    }
    let mut delivered = BTreeMap::new();
    let mut reset = 0;
    for d in deliveries {
        match d.await {
            Ok(meta) => {
                delivered.insert(meta.offset, meta.into_record().value.unwrap());
            }
            Err(ProduceError::IdempotenceReset { record, .. }) => {
                assert!(record.value.is_some());
                reset += 1;
            }
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
    eprintln!("{reset} records reset, {} delivered", delivered.len());
    assert_eq!(reset, 0, "refused batches are sent again, not failed");
    let values: Vec<_> = delivered.values().cloned().collect();
    let sent: Vec<Bytes> = (0..20)
        .map(|i| Bytes::from(format!("after-{i:02}")))
        .collect();
    assert_eq!(values, sent, "delivered once each, in send order");
    // After the epoch bump, new records go through.
    let meta = producer
        .send(ProducerRecord::new(topic.clone()).value("later"))
        .await
        .unwrap()
        .await
        .expect("delivered under the new epoch");
    delivered.insert(meta.offset, meta.into_record().value.unwrap());
    producer.close().await;

    let got = consume_from_start(&client, &topic, 1, delivered.len(), 0).await;
    for r in &got {
        assert_eq!(
            delivered.get(&r.offset),
            r.value.as_ref(),
            "offset {}: the log holds exactly what was reported delivered",
            r.offset
        );
    }
    let end = baton_kafka::Admin::new(&client)
        .list_offsets([(topic.clone(), 0, baton_kafka::OffsetSpec::Latest)])
        .await
        .unwrap()[0]
        .offset;
    assert_eq!(
        end as usize,
        delivered.len(),
        "nothing unreported in the log"
    );
    broker.shutdown().await;
}

/// A Produce answer NOT_LEADER_OR_FOLLOWER that names the new leader (KIP-951,
/// Produce v10) is followed at once, without a Metadata round trip; the retry is
/// deduplicated (the broker had written the batch).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kip951_leader_hint_is_used_without_a_metadata_refresh() {
    let setup = Proxied::start("baton-idempotence-tests", ProxyState::default()).await;
    let topic = create_topic(&setup.client, "idem-hint", 1).await;
    let meta = setup.client.metadata();
    let node = *meta.brokers.keys().next().expect("one broker");
    let port = setup.broker.local_addr().port();
    // The answer to the first Produce request (the broker wrote its batch).
    setup.state.lock().unwrap().rewrite = Some(Box::new(move |ex: Exchange, response| {
        if ex.produce == Some(0) {
            with_leader_hint(&response, ex.version, node, port)
        } else {
            response
        }
    }));
    let producer = Producer::builder(&setup.client)
        .linger(Duration::from_millis(20))
        .build();
    let mut deliveries = Vec::new();
    for i in 0..10 {
        let record = ProducerRecord::new(topic.clone())
            .partition(0)
            .value(format!("v{i}"));
        deliveries.push(producer.send(record).await.unwrap());
    }
    for (i, d) in deliveries.into_iter().enumerate() {
        let meta = d.await.unwrap();
        assert_eq!(meta.offset, i as i64);
    }
    producer.close().await;

    let keys = setup.state.lock().unwrap().api_keys.clone();
    let produces: Vec<usize> = keys
        .iter()
        .enumerate()
        .filter(|(_, k)| **k == ProduceRequest::API_KEY)
        .map(|(i, _)| i)
        .collect();
    assert!(produces.len() >= 2, "{keys:?}");
    assert!(
        !keys[produces[0]..produces[1]].contains(&MetadataRequest::API_KEY),
        "no Metadata request between the hinted answer and the retry: {keys:?}"
    );
    let got = consume_from_start(&setup.client, &topic, 1, 10, 0).await;
    for (i, r) in got.iter().enumerate() {
        assert_eq!(r.value.as_deref(), Some(format!("v{i}").as_bytes()));
    }
    setup.shutdown().await;
}
