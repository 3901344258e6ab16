//! The chaos workload shared by `tests/cluster/chaos*.rs`,
//! `tests/interop_suite/apache_kafka.rs` and `examples/chaos.rs`: an in-process
//! cluster, Baton's idempotent `acks=all` producer writing self-checking payloads
//! while faults are applied, then a consumer reading everything back into a
//! [`History`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_broker::history::{parse_payload, payload, History, HistoryReport, ProduceOutcome};
use baton_broker::Cluster;
use baton_kafka::{Acks, Admin, Client, Consumer, NewTopic, Producer, ProducerRecord, StartOffset};

/// Partitions of the chaos topic.
pub const PARTITIONS: i32 = 3;

/// A cluster of 3 on disk with a replicated topic (`min.insync.replicas=2`).
#[derive(Debug)]
pub struct Setup {
    /// The 3 nodes and their controller.
    pub cluster: Cluster,
    /// A client bootstrapped from every node.
    pub client: Client,
    /// The replicated topic.
    pub topic: String,
    _dir: tempfile::TempDir,
}

/// Starts the cluster and creates the topic.
pub async fn setup(name: &str, seed: u64) -> Setup {
    let dir = tempfile::tempdir().expect("temp dir");
    let cluster = Cluster::builder()
        .brokers(3)
        .data_dir(dir.path())
        .session_timeout(Duration::from_secs(3))
        .replica_lag_time_max(Duration::from_secs(3))
        .start()
        .await
        .expect("cluster starts");
    let client = Client::builder(cluster.bootstrap_servers())
        .client_id("baton-chaos")
        .request_timeout(Duration::from_secs(5))
        .connect_timeout(Duration::from_secs(2))
        .build()
        .await
        .expect("client connects");
    let topic = format!("chaos-{name}-{}", seed % 1_000_000);
    Admin::new(&client)
        .create_topics([
            NewTopic::new(topic.clone(), PARTITIONS, 3).config("min.insync.replicas", "2")
        ])
        .await
        .expect("topic created");
    let s = Setup {
        cluster,
        client,
        topic,
        _dir: dir,
    };
    let topic = s.topic.clone();
    s.cluster
        .wait_for(Duration::from_secs(30), |c| {
            (0..PARTITIONS).all(|p| {
                c.partition_state(&topic, p)
                    .is_some_and(|v| v.leader > 0 && v.isr.len() == 3)
            })
        })
        .await
        .expect("topic ready");
    s
}

/// A running producer workload.
#[derive(Debug)]
pub struct Workload {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
    /// Every produce outcome so far.
    pub history: Arc<Mutex<History>>,
    /// The longest time from `send` to acknowledgement so far (the worst stall).
    pub worst_delivery: Arc<Mutex<Duration>>,
}

/// Starts producing ids `0, 1, 2, ...` round-robin over the partitions (id `i` to
/// partition `i % PARTITIONS`), one send every `pace`, each delivery awaited in
/// the background, with Baton's idempotent `acks=all` producer.
pub fn start_producing(client: &Client, topic: &str, pace: Duration) -> Workload {
    start_producing_with(client, topic, pace, Acks::All)
}

/// [`start_producing`] with `acks`: idempotent with [`Acks::All`]; otherwise
/// Baton's default for those acks, which (as in the Java client, since Kafka's
/// idempotence needs `acks=all`) is not idempotent.
pub fn start_producing_with(client: &Client, topic: &str, pace: Duration, acks: Acks) -> Workload {
    let mut builder = Producer::builder(client).acks(acks);
    if acks == Acks::All {
        builder = builder.idempotence(true);
    }
    let producer = builder
        .request_timeout(Duration::from_secs(5))
        .delivery_timeout(Duration::from_secs(120))
        .linger(Duration::from_millis(2))
        .build();
    let stop = Arc::new(AtomicBool::new(false));
    let history = Arc::new(Mutex::new(History::new()));
    let worst_delivery = Arc::new(Mutex::new(Duration::ZERO));
    let task = tokio::spawn({
        let stop = stop.clone();
        let history = history.clone();
        let worst_delivery = worst_delivery.clone();
        let topic = topic.to_owned();
        async move {
            let mut deliveries = tokio::task::JoinSet::new();
            let mut id = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let bytes = payload(id, 24 + (id % 40) as usize);
                let (_, sum) = parse_payload(&bytes).expect("own payload");
                let record = ProducerRecord::new(topic.clone())
                    .partition((id % PARTITIONS as u64) as i32)
                    .value(bytes);
                history
                    .lock()
                    .unwrap()
                    .produced(id, sum, ProduceOutcome::Unknown);
                let sent_at = tokio::time::Instant::now();
                match producer.send(record).await {
                    Ok(d) => {
                        let history = history.clone();
                        let worst_delivery = worst_delivery.clone();
                        deliveries.spawn(async move {
                            let outcome =
                                match tokio::time::timeout(Duration::from_secs(150), d).await {
                                    Ok(Ok(m)) => {
                                        let took = sent_at.elapsed();
                                        let mut worst = worst_delivery.lock().unwrap();
                                        *worst = (*worst).max(took);
                                        ProduceOutcome::Acked {
                                            partition: m.partition,
                                            offset: m.offset,
                                        }
                                    }
                                    Ok(Err(_)) => ProduceOutcome::Failed,
                                    Err(_) => ProduceOutcome::Unknown,
                                };
                            history.lock().unwrap().produced(id, sum, outcome);
                        });
                    }
                    Err(_) => history
                        .lock()
                        .unwrap()
                        .produced(id, sum, ProduceOutcome::Failed),
                }
                id += 1;
                while deliveries.try_join_next().is_some() {}
                // Bound the records waiting for an answer (acks=all stalls).
                while deliveries.len() > 2_000 {
                    deliveries.join_next().await;
                }
                tokio::time::sleep(pace).await;
            }
            while deliveries.join_next().await.is_some() {}
            producer.close().await;
        }
    });
    Workload {
        stop,
        task,
        history,
        worst_delivery,
    }
}

impl Workload {
    /// Stops sending and waits for every outstanding delivery.
    pub async fn finish(self) -> History {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.expect("producer task");
        Arc::try_unwrap(self.history)
            .map(|m| m.into_inner().unwrap())
            .unwrap_or_else(|a| a.lock().unwrap().clone())
    }
}

/// Reads every partition from the start into `history` until it has at least one
/// record per acknowledged one and nothing more arrives for a while.
pub async fn consume_all(client: &Client, topic: &str, history: &mut History) {
    let acked = history.check().acknowledged as usize;
    let mut builder = Consumer::builder(client).max_wait(Duration::from_millis(200));
    for p in 0..PARTITIONS {
        builder = builder.assign(topic.to_owned(), p, StartOffset::Earliest);
    }
    let mut consumer = builder.build().await.expect("consumer");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let idle = if history.consumed_count() < acked {
            Duration::from_secs(20)
        } else {
            Duration::from_secs(2)
        };
        let wait = idle.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
        match tokio::time::timeout(wait, consumer.recv()).await {
            Ok(Ok(r)) => match r.value.as_deref().and_then(parse_payload) {
                Some((id, sum)) => history.consumed(r.partition, r.offset, id, sum),
                None => history.consumed(r.partition, r.offset, u64::MAX, 0),
            },
            Ok(Err(e)) => {
                eprintln!("consumer error (retrying): {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(_) => break,
        }
    }
}

/// Waits until every partition has a leader and a full ISR again.
pub async fn wait_healthy(cluster: &Cluster, topic: &str) {
    let topic = topic.to_owned();
    let ok = cluster
        .wait_for(Duration::from_secs(60), |c| {
            (0..PARTITIONS).all(|p| {
                c.partition_state(&topic, p)
                    .is_some_and(|v| v.leader > 0 && v.isr.len() == 3)
            })
        })
        .await;
    if ok.is_err() {
        eprintln!("cluster not fully healthy after 60 s (continuing)");
    }
}

/// Stops the workload, heals, reads everything back, prints the counts and the
/// timeline, and returns the report and the number of corruption events (detections,
/// resignations, repairs).
pub async fn finish(scenario: &str, seed: u64, s: Setup, w: Workload) -> (HistoryReport, usize) {
    let mut s = s;
    s.cluster.heal();
    let mut history = w.finish().await;
    wait_healthy(&s.cluster, &s.topic).await;
    consume_all(&s.client, &s.topic, &mut history).await;
    let report = history.check();
    let corruption_events = s.cluster.corruption_events().len();
    eprintln!(
        "[{scenario}] seed {seed}: faults {}, corruption events {corruption_events}: {report}",
        s.cluster.faults_applied()
    );
    if !report.passed() {
        let lost = history.lost_ids();
        eprintln!("lost ids (first 20): {:?}", &lost[..lost.len().min(20)]);
        eprintln!("timeline:\n{}", s.cluster.timeline_text());
    }
    s.cluster.shutdown().await;
    (report, corruption_events)
}

/// The leader of `partition` (or node 1).
pub fn leader(cluster: &Cluster, topic: &str, partition: i32) -> i32 {
    cluster
        .partition_state(topic, partition)
        .map(|v| v.leader)
        .filter(|&l| l > 0)
        .unwrap_or(1)
}
