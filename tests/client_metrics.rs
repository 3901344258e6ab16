//! Client metrics and stats snapshots against real brokers: a producer's retries
//! across a leader failover, a consumer's records and lag, a group member's
//! rebalances. A binary of its own, because the `metrics` recorder these tests
//! install is process-wide; each test's client has its own `client_id`, so the
//! tests read only their own series.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use baton_broker::Cluster;
use baton_kafka::metrics::names;
use baton_kafka::{
    Acks, Admin, Client, Consumer, GroupConsumer, NewTopic, Producer, ProducerRecord, StartOffset,
    TopicPartition,
};
use baton_testkit::cluster::{check_history, Load};
use baton_testkit::topic_name;
use metrics::{Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, SharedString, Unit};

const LONG: Duration = Duration::from_secs(90);

/// Histogram samples, kept.
#[derive(Debug, Default)]
struct Samples(Mutex<Vec<f64>>);

impl HistogramFn for Samples {
    fn record(&self, value: f64) {
        self.0.lock().unwrap().push(value);
    }
}

/// A recorder that keeps every series in memory, for the tests to read.
#[derive(Debug, Default)]
struct Store {
    counters: Mutex<HashMap<Key, Arc<AtomicU64>>>,
    gauges: Mutex<HashMap<Key, Arc<AtomicU64>>>,
    histograms: Mutex<HashMap<Key, Arc<Samples>>>,
}

#[derive(Debug, Clone)]
struct TestRecorder(Arc<Store>);

impl metrics::Recorder for TestRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let mut map = self.0.counters.lock().unwrap();
        Counter::from_arc(map.entry(key.clone()).or_default().clone())
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        let mut map = self.0.gauges.lock().unwrap();
        Gauge::from_arc(map.entry(key.clone()).or_default().clone())
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        let mut map = self.0.histograms.lock().unwrap();
        Histogram::from_arc(map.entry(key.clone()).or_default().clone())
    }
}

/// The process-wide recorder, installed by the first test that asks.
fn store() -> &'static Store {
    static STORE: OnceLock<Arc<Store>> = OnceLock::new();
    STORE.get_or_init(|| {
        let store = Arc::new(Store::default());
        metrics::set_global_recorder(TestRecorder(store.clone()))
            .expect("no other recorder in this binary");
        store
    })
}

/// Whether `key` is `name` with every label of `labels`.
fn matches(key: &Key, name: &str, labels: &[(&str, &str)]) -> bool {
    key.name() == name
        && labels
            .iter()
            .all(|(k, v)| key.labels().any(|l| l.key() == *k && l.value() == *v))
}

impl Store {
    /// The counters named `name` with `labels`, summed.
    fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        let map = self.counters.lock().unwrap();
        map.iter()
            .filter(|(k, _)| matches(k, name, labels))
            .map(|(_, v)| v.load(Ordering::Relaxed))
            .sum()
    }

    /// The counters named `name` with `labels`, by the value of label `by`.
    fn counter_by(&self, name: &str, labels: &[(&str, &str)], by: &str) -> BTreeMap<String, u64> {
        let map = self.counters.lock().unwrap();
        let mut out = BTreeMap::new();
        for (k, v) in map.iter().filter(|(k, _)| matches(k, name, labels)) {
            let label = k.labels().find(|l| l.key() == by).expect("labelled");
            *out.entry(label.value().to_string()).or_default() += v.load(Ordering::Relaxed);
        }
        out
    }

    /// The gauge named `name` with `labels` (exactly one).
    fn gauge(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let map = self.gauges.lock().unwrap();
        let found: Vec<f64> = map
            .iter()
            .filter(|(k, _)| matches(k, name, labels))
            .map(|(_, v)| f64::from_bits(v.load(Ordering::Relaxed)))
            .collect();
        assert!(found.len() <= 1, "{name} {labels:?}: {found:?}");
        found.first().copied()
    }

    /// The gauges named `name` with `labels`, summed.
    fn gauge_sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let map = self.gauges.lock().unwrap();
        map.iter()
            .filter(|(k, _)| matches(k, name, labels))
            .map(|(_, v)| f64::from_bits(v.load(Ordering::Relaxed)))
            .sum()
    }

    /// The samples of the histograms named `name` with `labels`.
    fn samples(&self, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
        let map = self.histograms.lock().unwrap();
        map.iter()
            .filter(|(k, _)| matches(k, name, labels))
            .flat_map(|(_, v)| v.0.lock().unwrap().clone())
            .collect()
    }
}

/// Polls `done` every 20 ms until it holds; panics naming `what` after [`LONG`].
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + LONG;
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn client_with_id(bootstrap: Vec<String>, client_id: &str) -> Client {
    Client::builder(bootstrap)
        .client_id(client_id)
        .request_timeout(Duration::from_secs(10))
        .build()
        .await
        .expect("client connects")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_counts_retries_across_a_leader_failover_and_reports_them() {
    let store = store();
    baton_testkit::init_tracing();
    let mut cluster = Cluster::builder()
        .brokers(3)
        .in_memory()
        .session_timeout(Duration::from_secs(4))
        .start()
        .await
        .expect("cluster starts");
    let id = "metrics-failover";
    let client = client_with_id(cluster.bootstrap_servers(), id).await;
    let topic = topic_name("metrics-failover");
    Admin::new(&client)
        .create_topics([NewTopic::new(topic.clone(), 1, 3).config("min.insync.replicas", "2")])
        .await
        .expect("topic created");
    let producer = Arc::new(Producer::builder(&client).acks(Acks::All).build());
    let handle = (*producer).clone();
    let load = Load::start(producer.clone(), topic.clone());
    load.wait_acked(1_000, LONG).await;

    let old = cluster.partition_state(&topic, 0).unwrap().leader;
    cluster.node(old).kill();
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state(&topic, 0).unwrap();
            v.leader >= 0 && v.leader != old
        })
        .await
        .expect("a new leader is elected");
    load.wait_acked(load.acked() + 1_000, LONG).await;
    let (acked, failed) = load.finish(producer).await;

    let stats = handle.stats();
    eprintln!("producer stats after the failover: {stats:#?}");
    assert_eq!(failed, 0, "no record failed");
    assert_eq!(stats.record_errors, 0);
    assert_eq!(stats.records_sent, acked.len() as u64, "every ack counted");
    assert!(
        stats.total_retries() > 0,
        "the failover cost retries: {:?}",
        stats.retries
    );
    assert!(
        stats.retries.keys().all(|e| [
            "NOT_LEADER_OR_FOLLOWER",
            "NETWORK_EXCEPTION",
            "LEADER_NOT_AVAILABLE",
            "REQUEST_TIMED_OUT",
            "NOT_ENOUGH_REPLICAS",
            "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        ]
        .contains(&e.as_str())),
        "retried for failover errors only: {:?}",
        stats.retries
    );
    assert!(
        stats.in_flight.values().all(|&n| n == 0),
        "nothing left in flight"
    );
    assert!(
        stats.in_flight.len() >= 2,
        "requests went to the old and the new leader: {:?}",
        stats.in_flight
    );
    assert!(stats.requests > 0 && stats.request_latency.count > 0);
    assert!(stats.request_latency.max >= stats.request_latency.quantile(0.99));
    assert!(stats.connections.created >= 2);
    assert!(
        stats.connections.closed >= 1,
        "the killed leader's connection closed"
    );

    // The recorder got the same numbers.
    let me = [("client_id", id)];
    assert_eq!(
        store.counter(names::PRODUCER_RECORD_SEND_TOTAL, &me),
        stats.records_sent
    );
    assert_eq!(store.counter(names::PRODUCER_RECORD_ERROR_TOTAL, &me), 0);
    assert_eq!(
        store.counter_by(names::PRODUCER_RECORD_RETRY_TOTAL, &me, "error"),
        stats.retries
    );
    assert_eq!(
        store.counter(names::PRODUCER_REQUEST_TOTAL, &me),
        stats.requests
    );
    assert_eq!(
        store.samples(names::PRODUCER_REQUEST_LATENCY_MS, &me).len() as u64,
        stats.request_latency.count
    );
    assert_eq!(
        store.gauge_sum(names::PRODUCER_REQUESTS_IN_FLIGHT, &me),
        0.0
    );
    assert!(!store
        .samples(names::PRODUCER_BATCH_SIZE_BYTES, &me)
        .is_empty());
    assert!(!store
        .samples(names::PRODUCER_RECORDS_PER_REQUEST, &me)
        .is_empty());
    assert_eq!(
        store.counter(names::CLIENT_CONNECTION_CREATION_TOTAL, &me),
        stats.connections.created
    );
    assert_eq!(
        store.counter(names::CLIENT_CONNECTION_CLOSE_TOTAL, &me),
        stats.connections.closed
    );

    // And no acknowledged record is lost.
    let checked = check_history(&client, &topic, 1, &acked, Duration::from_secs(20)).await;
    assert_eq!(checked.lost(), 0, "{:?}", checked.report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_counts_records_and_its_lag_reaches_zero() {
    let store = store();
    let broker = baton_broker::Broker::start(baton_broker::BrokerConfig::in_memory())
        .await
        .expect("broker starts");
    let id = "metrics-consumer";
    let client = client_with_id(vec![broker.bootstrap()], id).await;
    let topic = topic_name("metrics-consumer");
    Admin::new(&client)
        .create_topic(topic.clone(), 1, 1)
        .await
        .expect("topic created");
    let producer = Producer::builder(&client).build();
    const N: u64 = 500;
    for i in 0..N {
        let d = producer
            .send(ProducerRecord::new(topic.clone()).value(format!("v{i}")))
            .await
            .unwrap();
        drop(d);
    }
    producer.close().await;
    assert_eq!(producer.stats().records_sent, N);

    let mut consumer = Consumer::builder(&client)
        .assign(topic.clone(), 0, StartOffset::Earliest)
        .max_wait(Duration::from_millis(100))
        .build()
        .await
        .unwrap();
    for i in 0..N {
        let r = tokio::time::timeout(LONG, consumer.recv())
            .await
            .expect("records arrive")
            .unwrap();
        assert_eq!(r.offset, i as i64);
    }
    let tp = TopicPartition::new(topic.clone(), 0);
    eventually("the lag reaches 0", || {
        consumer
            .stats()
            .lag
            .get(&tp)
            .is_some_and(|l| l.lag == 0 && l.high_watermark == N as i64)
    })
    .await;
    let stats = consumer.stats();
    eprintln!("consumer stats: {stats:#?}");
    assert_eq!(stats.records_consumed, N);
    assert!(stats.fetch_latency.count > 0);
    assert_eq!(stats.rebalances, 0);

    let me = [("client_id", id)];
    assert_eq!(
        store.counter(names::CONSUMER_RECORDS_CONSUMED_TOTAL, &me),
        N
    );
    let lag = store.gauge(
        names::CONSUMER_RECORDS_LAG,
        &[("client_id", id), ("topic", &topic), ("partition", "0")],
    );
    assert_eq!(lag, Some(0.0));
    assert!(!store
        .samples(names::CONSUMER_FETCH_LATENCY_MS, &me)
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_member_counts_its_rebalances_and_commits() {
    let store = store();
    let broker = baton_broker::Broker::start(baton_broker::BrokerConfig::in_memory())
        .await
        .expect("broker starts");
    let (id_a, id_b) = ("metrics-group-a", "metrics-group-b");
    let client_a = client_with_id(vec![broker.bootstrap()], id_a).await;
    let client_b = client_with_id(vec![broker.bootstrap()], id_b).await;
    let topic = topic_name("metrics-group");
    Admin::new(&client_a)
        .create_topic(topic.clone(), 2, 1)
        .await
        .expect("topic created");
    let group = topic_name("metrics-group");
    let member = |client: &Client| {
        GroupConsumer::builder(client, group.clone())
            .subscribe([topic.clone()])
            .heartbeat_interval(Duration::from_millis(200))
            .session_timeout(Duration::from_secs(10))
            .max_wait(Duration::from_millis(50))
    };
    let mut a = member(&client_a).build().await.unwrap();
    // Drive `a` (its `recv` applies rebalances) until it holds both partitions.
    eventually_recv(&mut a, |a| a.assignment().len() == 2).await;
    assert_eq!(a.stats().rebalances, 1, "joined once");

    let mut b = member(&client_b).build().await.unwrap();
    let b_task = tokio::spawn(async move {
        eventually_recv(&mut b, |b| b.assignment().len() == 1).await;
        b
    });
    eventually_recv(&mut a, |a| {
        a.assignment().len() == 1 && a.stats().rebalances >= 2
    })
    .await;
    let b = b_task.await.unwrap();
    a.commit().await.expect("commit");

    let stats = a.stats();
    eprintln!("member a stats: {stats:#?}");
    assert!(stats.rebalances >= 2, "joined, then rebalanced for b");
    assert_eq!(stats.rebalance_latency.count, stats.rebalances);
    assert!(stats.commit_latency.count >= 1);
    assert!(b.stats().rebalances >= 1);

    let group_labels = [("client_id", id_a), ("group_id", group.as_str())];
    assert_eq!(
        store.counter(names::GROUP_REBALANCE_TOTAL, &group_labels),
        stats.rebalances
    );
    assert_eq!(
        store
            .samples(names::GROUP_REBALANCE_LATENCY_MS, &group_labels)
            .len() as u64,
        stats.rebalances
    );
    assert_eq!(
        store
            .samples(names::GROUP_COMMIT_LATENCY_MS, &group_labels)
            .len() as u64,
        stats.commit_latency.count
    );
}

/// Calls `recv` (with short timeouts; no record is needed) until `done` holds.
async fn eventually_recv(member: &mut GroupConsumer, done: impl Fn(&GroupConsumer) -> bool) {
    let deadline = tokio::time::Instant::now() + LONG;
    while !done(member) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out; assignment {:?}, stats {:?}",
            member.assignment(),
            member.stats()
        );
        if let Ok(Err(e)) = tokio::time::timeout(Duration::from_millis(100), member.recv()).await {
            panic!("member failed: {e}");
        }
    }
}
