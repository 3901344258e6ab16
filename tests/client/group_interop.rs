//! A Baton group consumer shares a group with a librdkafka (confluent-kafka) or
//! kafka-python member on `baton-broker`: whichever leads, the other reads its
//! subscription and assignment bytes; together they consume every record, a clean
//! handover re-delivers nothing, and after the third-party member leaves, Baton
//! takes its partitions from its commits.
//!
//! The third-party clients come from the virtualenv the interop tests use
//! (`target/interop-venv`, pinned by `tests/interop/requirements.txt`), created
//! here if missing.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_kafka::group::{CooperativeStickyAssignor, RangeAssignor, RoundRobinAssignor};
use baton_kafka::{Client, GroupConsumer, Producer, ProducerRecord};
use baton_testkit::client::{broker_and_client, create_topic};
use baton_testkit::topic_name;

const PARTITIONS: i32 = 6;
const PER_PARTITION: i64 = 100;

/// A group member in Python: prints one JSON object per line: `{"p":..,"o":..}`
/// per record, `{"assigned":[..]}` / `{"revoked":[..]}` on rebalances, and
/// `{"closed":true}` after leaving. Stops when its stdin closes.
const MEMBER: &str = r#"
import json, sys, threading, time
client, bootstrap, group, topic, strategy = sys.argv[1:6]
stop = threading.Event()
def watch():
    sys.stdin.read()
    stop.set()
threading.Thread(target=watch, daemon=True).start()
def out(obj):
    print(json.dumps(obj), flush=True)
if client == "confluent":
    from confluent_kafka import Consumer
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group,
        "partition.assignment.strategy": strategy,
        "auto.offset.reset": "earliest", "enable.auto.commit": True,
        "auto.commit.interval.ms": 200, "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 200, "fetch.wait.max.ms": 50,
    })
    c.subscribe([topic],
        on_assign=lambda _c, ps: out({"assigned": [p.partition for p in ps]}),
        on_revoke=lambda _c, ps: out({"revoked": [p.partition for p in ps]}))
    while not stop.is_set():
        m = c.poll(0.05)
        if m is None:
            continue
        if m.error():
            out({"error": str(m.error())})
            continue
        out({"p": m.partition(), "o": m.offset()})
    c.close()
else:
    from kafka import KafkaConsumer, ConsumerRebalanceListener
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[strategy]
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
        partition_assignment_strategy=[assignor], auto_offset_reset="earliest",
        enable_auto_commit=True, auto_commit_interval_ms=200,
        session_timeout_ms=6000, heartbeat_interval_ms=200, fetch_max_wait_ms=50)
    class L(ConsumerRebalanceListener):
        def on_partitions_assigned(self, ps):
            out({"assigned": [p.partition for p in ps]})
        def on_partitions_revoked(self, ps):
            out({"revoked": [p.partition for p in ps]})
    c.subscribe([topic], listener=L())
    while not stop.is_set():
        for _tp, msgs in c.poll(timeout_ms=50).items():
            for m in msgs:
                out({"p": m.partition, "o": m.offset})
    c.close()
out({"closed": True})
"#;

#[derive(Debug, Default)]
struct PyLog {
    records: Vec<(i32, i64)>,
    assigned: BTreeSet<i32>,
    revoked: Vec<Vec<i32>>,
    errors: Vec<String>,
    /// Rebalance lines as printed, for failure messages.
    events: Vec<String>,
    closed: bool,
}

struct PyMember {
    child: Child,
    stdin: Option<ChildStdin>,
    log: Arc<Mutex<PyLog>>,
}

impl PyMember {
    fn start(client: &str, bootstrap: &str, group: &str, topic: &str, strategy: &str) -> Self {
        let py = baton_testkit::tools::python();
        let mut child = Command::new(py)
            .arg("-c")
            .arg(MEMBER)
            .args([client, bootstrap, group, topic, strategy])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python starts");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let log: Arc<Mutex<PyLog>> = Arc::default();
        let l = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let mut l = l.lock().unwrap();
                // Tiny parser for the fixed shapes printed above.
                let nums = |s: &str| -> Vec<i64> {
                    s.split(|c: char| !c.is_ascii_digit() && c != '-')
                        .filter_map(|t| t.parse().ok())
                        .collect()
                };
                if line.starts_with("{\"p\"") {
                    let n = nums(&line);
                    l.records.push((n[0] as i32, n[1]));
                } else if line.starts_with("{\"assigned\"") {
                    // Incremental under cooperative rebalancing, whole otherwise
                    // (after a revocation of everything).
                    let a: Vec<i32> = nums(&line).into_iter().map(|p| p as i32).collect();
                    l.assigned.extend(a);
                    l.events.push(line);
                } else if line.starts_with("{\"revoked\"") {
                    let r: Vec<i32> = nums(&line).into_iter().map(|p| p as i32).collect();
                    for p in &r {
                        l.assigned.remove(p);
                    }
                    l.revoked.push(r);
                    l.events.push(line);
                } else if line.starts_with("{\"closed\"") {
                    l.closed = true;
                } else {
                    l.errors.push(line);
                }
            }
        });
        PyMember { child, stdin, log }
    }

    /// Closes stdin and waits for the member to leave the group.
    async fn stop(mut self) -> PyLog {
        if let Some(mut s) = self.stdin.take() {
            let _ = s.flush();
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while !self.log.lock().unwrap().closed {
            assert!(
                tokio::time::Instant::now() < deadline,
                "python member closes"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = self.child.wait();
        std::mem::take(&mut *self.log.lock().unwrap())
    }
}

impl Drop for PyMember {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn produce(client: &Client, topic: &str) {
    let producer = Producer::builder(client).build();
    let mut ds = Vec::new();
    for i in 0..PER_PARTITION {
        for p in 0..PARTITIONS {
            let r = ProducerRecord::new(topic)
                .partition(p)
                .value(format!("{p}-{i}"));
            ds.push(producer.send(r).await.expect("send"));
        }
    }
    for d in ds {
        d.await.expect("delivered");
    }
    producer.close().await;
}

/// Runs one mixed group: `py_first` decides who joins (and so leads) first.
async fn mixed_group(py_client: &str, strategy: &str, py_first: bool) {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "group-interop", PARTITIONS).await;
    let group = topic_name("interop-group");
    produce(&client, &topic).await;
    let bootstrap = broker.bootstrap();

    let mut py = None;
    if py_first {
        py = Some(PyMember::start(
            py_client, &bootstrap, &group, &topic, strategy,
        ));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while py.as_ref().unwrap().log.lock().unwrap().assigned.is_empty() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "python member joins"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let builder = GroupConsumer::builder(&client, group.clone())
        .subscribe([topic.clone()])
        .heartbeat_interval(Duration::from_millis(200))
        .session_timeout(Duration::from_secs(6))
        .rebalance_timeout(Duration::from_secs(20))
        .auto_commit_interval(Duration::from_millis(200))
        .max_wait(Duration::from_millis(50));
    let builder = match strategy {
        "cooperative-sticky" => builder.assignor(CooperativeStickyAssignor),
        "range" => builder.assignor(RangeAssignor),
        _ => builder.assignor(RoundRobinAssignor),
    };
    let mut baton = builder.build().await.unwrap();
    let mut mine: Vec<(i32, i64)> = Vec::new();
    if !py_first {
        // Let Baton lead: wait for its first assignment before the other joins.
        while baton.assignment().is_empty() {
            if let Ok(r) = tokio::time::timeout(Duration::from_millis(50), baton.recv()).await {
                let r = r.expect("baton member");
                mine.push((r.partition, r.offset));
            }
        }
        py = Some(PyMember::start(
            py_client, &bootstrap, &group, &topic, strategy,
        ));
    }
    let py = py.unwrap();

    // Consume together until every record is in; both must hold partitions.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        if let Ok(r) = tokio::time::timeout(Duration::from_millis(50), baton.recv()).await {
            let r = r.expect("baton member");
            mine.push((r.partition, r.offset));
        }
        let (theirs, their_parts) = {
            let l = py.log.lock().unwrap();
            (l.records.clone(), l.assigned.clone())
        };
        let all: BTreeSet<(i32, i64)> = mine.iter().chain(theirs.iter()).copied().collect();
        let shared = !baton.assignment().is_empty() && !their_parts.is_empty();
        if all.len() == (PARTITIONS as i64 * PER_PARTITION) as usize && shared {
            let ours: BTreeSet<i32> = baton.assignment().iter().map(|tp| tp.partition).collect();
            assert!(
                ours.is_disjoint(&their_parts),
                "{ours:?} vs {their_parts:?}"
            );
            assert_eq!(ours.len() + their_parts.len(), PARTITIONS as usize);
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            let missing: Vec<(i32, i64)> = (0..PARTITIONS)
                .flat_map(|p| (0..PER_PARTITION).map(move |o| (p, o)))
                .filter(|k| !all.contains(k))
                .take(10)
                .collect();
            let l = py.log.lock().unwrap();
            panic!(
                "{py_client}/{strategy}: {} of {} consumed, missing {missing:?}; baton holds {:?}, python {:?}; python events {:?} errors {:?}",
                all.len(),
                PARTITIONS as i64 * PER_PARTITION,
                baton.assignment().iter().map(|tp| tp.partition).collect::<Vec<_>>(),
                their_parts,
                l.events,
                l.errors
            );
        }
    }

    // The python member leaves; Baton takes over from its commits.
    let log = py.stop().await;
    produce(&client, &topic).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let all: BTreeSet<(i32, i64)> = mine.iter().chain(log.records.iter()).copied().collect();
        if all.len() == (PARTITIONS as i64 * PER_PARTITION * 2) as usize {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{py_client}/{strategy}: {} of {} consumed after the python member left",
            all.len(),
            PARTITIONS as i64 * PER_PARTITION * 2
        );
        if let Ok(r) = tokio::time::timeout(Duration::from_millis(100), baton.recv()).await {
            let r = r.expect("baton member");
            mine.push((r.partition, r.offset));
        }
    }
    assert_eq!(baton.assignment().len(), PARTITIONS as usize);
    // History: per partition no gaps; count re-deliveries.
    let mut per: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for &(p, o) in mine.iter().chain(log.records.iter()) {
        per.entry(p).or_default().push(o);
    }
    let mut duplicates = 0;
    for (p, offsets) in &per {
        let distinct: BTreeSet<i64> = offsets.iter().copied().collect();
        assert_eq!(distinct.len() as i64, 2 * PER_PARTITION, "partition {p}");
        duplicates += offsets.len() - distinct.len();
    }
    println!(
        "{py_client}/{strategy} ({} led): baton {} records, python {} records, 0 lost, {duplicates} duplicates; python revocations {:?}",
        if py_first { "python" } else { "baton" },
        mine.len(),
        log.records.len(),
        log.revoked
    );
    for tp in baton.assignment() {
        assert_eq!(baton.position(&tp), Some(2 * PER_PARTITION), "{tp}");
    }
    baton.close().await.unwrap();
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn librdkafka_cooperative_sticky_member_led_by_baton() {
    mixed_group("confluent", "cooperative-sticky", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn librdkafka_cooperative_sticky_leader_with_baton_member() {
    mixed_group("confluent", "cooperative-sticky", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn librdkafka_range_leader_with_baton_member() {
    mixed_group("confluent", "range", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_roundrobin_member_led_by_baton() {
    mixed_group("kafka-python", "roundrobin", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_range_leader_with_baton_member() {
    mixed_group("kafka-python", "range", true).await;
}
