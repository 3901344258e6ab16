//! Corruption in the in-process cluster (issue 5): stored batches damaged on disk are
//! detected when served, by the scrubber and by start-up recovery; a corrupt leader
//! resigns, a healthy ISR member is elected, and the damaged replica cuts its log below
//! the bad batch and re-fetches until it is byte-identical to the leader again. No
//! consumer ever receives a damaged record.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use baton_broker::cluster::FramingDamage;
use baton_broker::corruption::{CorruptionEvent, CorruptionKind, Where};
use baton_broker::Cluster;
use baton_kafka::{Acks, Admin, Client, NewTopic, Producer, ProducerRecord};
use baton_testkit::cluster::{client, value, LiveConsumer};
use baton_testkit::topic_name;

const LONG: Duration = Duration::from_secs(120);

struct Setup {
    _dir: tempfile::TempDir,
    cluster: Cluster,
    client: Client,
    topic: String,
}

/// Three on-disk nodes, one partition replicated three times, `min.insync.replicas=2`.
async fn setup(prefix: &str, scrub_rate: u64) -> Setup {
    setup_with(prefix, scrub_rate, true).await
}

/// As [`setup`]; `auto_preferred_leader: false` keeps a promoted follower leading
/// after the repaired former leader rejoins the ISR (otherwise leadership may move
/// back to it before a test has looked).
async fn setup_with(prefix: &str, scrub_rate: u64, auto_preferred_leader: bool) -> Setup {
    baton_testkit::init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::builder()
        .brokers(3)
        .data_dir(dir.path())
        .session_timeout(Duration::from_secs(4))
        .auto_preferred_leader(auto_preferred_leader)
        .scrub_rate(scrub_rate)
        .segment_bytes(64 * 1024)
        .start()
        .await
        .expect("cluster starts");
    let client = client(&cluster).await;
    let topic = topic_name(prefix);
    Admin::new(&client)
        .create_topics([NewTopic::new(topic.clone(), 1, 3).config("min.insync.replicas", "2")])
        .await
        .expect("topic created");
    Setup {
        _dir: dir,
        cluster,
        client,
        topic,
    }
}

/// Sends `ids` with `acks=all` and waits for every acknowledgement.
async fn produce_all(
    client: &Client,
    topic: &str,
    ids: std::ops::Range<u64>,
    acked: &mut HashMap<u64, (i32, i64)>,
) {
    // Small batches, so that the damage is mid-log with many batches around it.
    let producer = Producer::builder(client)
        .acks(Acks::All)
        .batch_size(4 * 1024)
        .build();
    let mut pending = Vec::new();
    for id in ids {
        let r = ProducerRecord::new(topic.to_owned()).value(value(id));
        pending.push((id, producer.send(r).await.expect("accepted")));
    }
    for (id, d) in pending {
        let m = d
            .await
            .unwrap_or_else(|e| panic!("record {id} failed: {e}"));
        acked.insert(id, (m.partition, m.offset));
    }
    producer.close().await;
}

/// Waits until all three replicas are in the ISR and hold everything up to `end`.
async fn wait_in_sync(cluster: &Cluster, topic: &str, end: i64) {
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state(topic, 0).unwrap();
            v.isr.len() == 3
                && v.replica_states
                    .iter()
                    .all(|r| r.running && r.log_end_offset == end && r.high_watermark == end)
        })
        .await
        .unwrap_or_else(|_| {
            panic!(
                "replicas in sync at {end}: {:?}\n{}",
                cluster.partition_state(topic, 0),
                cluster.timeline_text()
            )
        });
}

fn find_event(
    cluster: &Cluster,
    node: i32,
    pred: impl Fn(&CorruptionKind) -> bool,
) -> Option<CorruptionEvent> {
    cluster
        .corruption_events()
        .into_iter()
        .find(|e| e.node == node && pred(&e.kind))
}

fn detected_at(w: Where) -> impl Fn(&CorruptionKind) -> bool {
    move |k| matches!(k, CorruptionKind::Detected { at, .. } if *at == w)
}

fn is_repaired(k: &CorruptionKind) -> bool {
    matches!(k, CorruptionKind::RepairFinished { .. })
}

/// Waits for `node`'s repair to finish and the ISR to hold all three replicas again.
async fn wait_repaired(cluster: &Cluster, topic: &str, node: i32) {
    cluster
        .wait_for(LONG, |c| {
            find_event(c, node, is_repaired).is_some()
                && c.partition_state(topic, 0).unwrap().isr.len() == 3
        })
        .await
        .unwrap_or_else(|_| {
            panic!(
                "node {node} repaired and back in the ISR: {:?}\nevents: {}\n{}",
                cluster.partition_state(topic, 0),
                events_text(cluster),
                cluster.timeline_text()
            )
        });
}

fn events_text(cluster: &Cluster) -> String {
    cluster
        .corruption_events()
        .iter()
        .map(|e| format!("\n  {e}"))
        .collect()
}

/// Asserts that `a`'s and `b`'s stored batches below the leader's HW are identical.
fn assert_identical(cluster: &Cluster, topic: &str, a: i32, b: i32) -> usize {
    let hw = cluster
        .partition_state(topic, 0)
        .unwrap()
        .high_watermark()
        .expect("leader running");
    let left = cluster.stored_batches(a, topic, 0, hw).expect("node a");
    let right = cluster.stored_batches(b, topic, 0, hw).expect("node b");
    assert_eq!(
        left.len(),
        right.len(),
        "batch counts of {a} and {b} below {hw}"
    );
    assert!(
        left == right,
        "stored batches of nodes {a} and {b} differ below the HW {hw}"
    );
    left.len()
}

/// Runs the kafka-python consumer until it has `count` offsets; returns its RESULT
/// line's `pairs` as offset -> ids received (id -1: failed its checksum).
fn kafka_python_consume(bootstrap: &str, topic: &str, count: usize) -> HashMap<i64, Vec<i64>> {
    let ws = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new(baton_testkit::tools::python())
        .arg(
            ws.join("tests")
                .join("interop")
                .join("corruption_consumer.py"),
        )
        .args(["consume", bootstrap, topic, "0", &count.to_string()])
        .output()
        .expect("kafka-python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("RESULT "))
        .unwrap_or_else(|| panic!("no RESULT line; stderr:\n{stderr}"));
    assert!(
        out.status.success(),
        "kafka-python failed: {line}\n{stderr}"
    );
    let pairs = line
        .split("\"pairs\": \"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("pairs field");
    let mut seen: HashMap<i64, Vec<i64>> = HashMap::new();
    for item in pairs.split(',').filter(|s| !s.is_empty()) {
        let (o, id) = item.split_once(':').expect("offset:id");
        seen.entry(o.parse().unwrap())
            .or_default()
            .push(id.parse().unwrap());
    }
    let received: usize = line
        .split("\"received\": ")
        .nth(1)
        .and_then(|s| s.split([',', '}']).next())
        .and_then(|s| s.trim().parse().ok())
        .expect("received field");
    assert_eq!(
        received, count,
        "kafka-python received every record once: {line}"
    );
    seen
}

/// The scenario: the leader's stored segment is corrupted mid-log; a Baton
/// consumer and a kafka-python consumer both get every record exactly once, intact;
/// a follower is promoted; the former leader re-fetches and ends byte-identical.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_leader_fails_over_and_repairs() {
    let Setup {
        _dir,
        mut cluster,
        client,
        topic,
    } = setup_with("corrupt-leader", 0, false).await;
    const N: u64 = 3_000;
    let mut acked = HashMap::new();
    produce_all(&client, &topic, 0..N, &mut acked).await;
    wait_in_sync(&cluster, &topic, N as i64).await;
    let before = cluster.partition_state(&topic, 0).unwrap();
    let old = before.leader;

    let injected = Instant::now();
    cluster
        .node(old)
        .corrupt(&topic, 0, N as i64 / 2)
        .expect("corrupt the leader's segment");
    let live = LiveConsumer::start(&client, &topic, 1).await;
    let bootstrap = cluster.bootstrap();
    let t = topic.clone();
    let py = tokio::task::spawn_blocking(move || kafka_python_consume(&bootstrap, &t, N as usize));

    // Detect -> resign -> elect.
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state(&topic, 0).unwrap();
            v.leader >= 0 && v.leader != old && v.leader_epoch > before.leader_epoch
        })
        .await
        .unwrap_or_else(|_| panic!("a follower is promoted; events: {}", events_text(&cluster)));
    let elected = injected.elapsed();
    let new = cluster.partition_state(&topic, 0).unwrap().leader;
    cluster.record(format!("test: node {new} leads after the corruption"));

    let history = live.finish(&acked).await;
    assert!(history.is_clean(), "baton consumer: {history:?}");
    assert_eq!(
        history.consumed, N as usize,
        "baton consumer got each record once"
    );
    let py_seen = py.await.expect("kafka-python task");
    assert_eq!(py_seen.len(), N as usize);
    for (id, (_, offset)) in &acked {
        assert_eq!(
            py_seen.get(offset).map(Vec::as_slice),
            Some(&[*id as i64][..]),
            "kafka-python: offset {offset} holds record {id} once, intact"
        );
    }

    // Repair: the former leader re-fetches and rejoins the ISR.
    wait_repaired(&cluster, &topic, old).await;
    let batches = assert_identical(&cluster, &topic, old, new);
    let detected = find_event(&cluster, old, |k| {
        matches!(k, CorruptionKind::Detected { .. })
    })
    .expect("detection event");
    assert!(find_event(&cluster, old, |k| matches!(
        k,
        CorruptionKind::LeaderResigned { .. }
    ))
    .is_some());
    let Some(CorruptionEvent {
        kind:
            CorruptionKind::RepairFinished {
                since_detected,
                since_started,
            },
        ..
    }) = find_event(&cluster, old, is_repaired)
    else {
        unreachable!()
    };
    eprintln!(
        "scenario: {N} records; baton consumer {} consumed, kafka-python {} offsets; \
         leader {old} -> {new}; detection {:.3}s after the damage ({}), new leader {:.3}s \
         after it; repair {:.3}s after detection ({:.3}s re-fetching); {batches} batches \
         byte-identical below the HW",
        history.consumed,
        py_seen.len(),
        detected.at.duration_since(injected).as_secs_f64(),
        detected,
        elected.as_secs_f64(),
        since_detected.as_secs_f64(),
        since_started.as_secs_f64(),
    );
    eprintln!(
        "events:{}\ntimeline:\n{}",
        events_text(&cluster),
        cluster.timeline_text()
    );
    cluster.shutdown().await;
}

/// The scrubber finds corruption on an idle follower (nobody reads it): the follower
/// leaves the ISR, cuts its log below the bad batch, re-fetches and rejoins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrubber_finds_corruption_on_an_idle_follower() {
    let Setup {
        _dir,
        mut cluster,
        client,
        topic,
    } = setup("corrupt-scrub", 256 * 1024).await;
    const N: u64 = 1_000;
    let mut acked = HashMap::new();
    produce_all(&client, &topic, 0..N, &mut acked).await;
    wait_in_sync(&cluster, &topic, N as i64).await;
    let v = cluster.partition_state(&topic, 0).unwrap();
    let leader = v.leader;
    let follower = *v.replicas.iter().find(|r| **r != leader).unwrap();
    cluster
        .node(follower)
        .corrupt(&topic, 0, N as i64 / 2)
        .expect("corrupt the follower");
    cluster
        .wait_for(LONG, |c| {
            find_event(c, follower, detected_at(Where::Scrubber)).is_some()
        })
        .await
        .unwrap_or_else(|_| panic!("scrubber detects it; events: {}", events_text(&cluster)));
    wait_repaired(&cluster, &topic, follower).await;
    assert_eq!(cluster.partition_state(&topic, 0).unwrap().leader, leader);
    assert_identical(&cluster, &topic, follower, leader);
    let history =
        baton_testkit::cluster::check_history(&client, &topic, 1, &acked, Duration::from_secs(5))
            .await;
    assert!(history.is_clean(), "{history:?}");
    eprintln!(
        "events:{}\ntimeline:\n{}",
        events_text(&cluster),
        cluster.timeline_text()
    );
    cluster.shutdown().await;
}

/// Corruption in a stopped follower's segment is found by start-up recovery: the
/// replica comes up, reports itself, re-fetches the cut range and rejoins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_finds_corruption_and_refetches() {
    let Setup {
        _dir,
        mut cluster,
        client,
        topic,
    } = setup("corrupt-recovery", 0).await;
    const N: u64 = 1_000;
    let mut acked = HashMap::new();
    produce_all(&client, &topic, 0..N, &mut acked).await;
    wait_in_sync(&cluster, &topic, N as i64).await;
    let v = cluster.partition_state(&topic, 0).unwrap();
    let leader = v.leader;
    let follower = *v.replicas.iter().find(|r| **r != leader).unwrap();
    cluster.node(follower).stop().await;
    cluster
        .node(follower)
        .corrupt(&topic, 0, 200)
        .expect("corrupt the stopped follower");
    cluster.node(follower).restart().await.expect("restart");
    cluster
        .wait_for(LONG, |c| {
            find_event(c, follower, detected_at(Where::Recovery)).is_some()
        })
        .await
        .unwrap_or_else(|_| panic!("recovery reports it; events: {}", events_text(&cluster)));
    wait_repaired(&cluster, &topic, follower).await;
    wait_in_sync(&cluster, &topic, N as i64).await;
    assert_identical(&cluster, &topic, follower, leader);
    let history =
        baton_testkit::cluster::check_history(&client, &topic, 1, &acked, Duration::from_secs(5))
            .await;
    assert!(history.is_clean(), "{history:?}");
    eprintln!(
        "events:{}\ntimeline:\n{}",
        events_text(&cluster),
        cluster.timeline_text()
    );
    cluster.shutdown().await;
}

/// A torn tail after a hard kill is cut by recovery as before (not reported as
/// corruption); the node catches up and nothing acknowledged is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn torn_tail_after_hard_kill_is_cut_and_refetched() {
    let Setup {
        _dir,
        mut cluster,
        client,
        topic,
    } = setup("corrupt-torn", 0).await;
    const N: u64 = 1_000;
    let mut acked = HashMap::new();
    produce_all(&client, &topic, 0..N, &mut acked).await;
    wait_in_sync(&cluster, &topic, N as i64).await;
    let v = cluster.partition_state(&topic, 0).unwrap();
    let leader = v.leader;
    let follower = *v.replicas.iter().find(|r| **r != leader).unwrap();
    cluster.node(follower).kill();
    // Tear the last batch: cut the newest segment file in the middle of it.
    let pdir = _dir
        .path()
        .join(format!("node-{follower}"))
        .join(format!("{topic}-0"));
    let mut segs: Vec<PathBuf> = std::fs::read_dir(&pdir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    segs.sort();
    let last = segs.last().unwrap();
    let len = std::fs::metadata(last).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(last).unwrap();
    f.set_len(len - 7).unwrap();
    drop(f);
    cluster.record(format!(
        "test: tore the last 7 bytes of node {follower}'s newest segment"
    ));
    cluster.node(follower).restart().await.expect("restart");
    wait_in_sync(&cluster, &topic, N as i64).await;
    assert!(
        find_event(&cluster, follower, |_| true).is_none(),
        "a torn tail is not corruption: {}",
        events_text(&cluster)
    );
    assert_identical(&cluster, &topic, follower, leader);
    let history =
        baton_testkit::cluster::check_history(&client, &topic, 1, &acked, Duration::from_secs(5))
            .await;
    assert!(history.is_clean(), "{history:?}");
    cluster.shutdown().await;
}

/// Damaged framing: a leader batch's length field while running (found when served,
/// the leader fails over) and a stopped follower's base offset (found by recovery;
/// the CRC does not cover it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupted_framing_is_detected() {
    let Setup {
        _dir,
        mut cluster,
        client,
        topic,
    } = setup("corrupt-framing", 0).await;
    const N: u64 = 1_500;
    let mut acked = HashMap::new();
    produce_all(&client, &topic, 0..N, &mut acked).await;
    wait_in_sync(&cluster, &topic, N as i64).await;
    let v = cluster.partition_state(&topic, 0).unwrap();
    let leader = v.leader;
    let follower = *v.replicas.iter().find(|r| **r != leader).unwrap();

    cluster.node(follower).stop().await;
    cluster
        .node(follower)
        .corrupt_framing(&topic, 0, 700, FramingDamage::BaseOffset)
        .expect("damage the follower's base offset");
    cluster.node(follower).restart().await.expect("restart");
    cluster
        .wait_for(LONG, |c| {
            find_event(c, follower, detected_at(Where::Recovery)).is_some()
        })
        .await
        .unwrap_or_else(|_| panic!("recovery finds it; events: {}", events_text(&cluster)));
    wait_repaired(&cluster, &topic, follower).await;
    wait_in_sync(&cluster, &topic, N as i64).await;

    cluster
        .node(leader)
        .corrupt_framing(&topic, 0, 900, FramingDamage::Length)
        .expect("damage the leader's batch length");
    let history =
        baton_testkit::cluster::check_history(&client, &topic, 1, &acked, Duration::from_secs(5))
            .await;
    assert!(history.is_clean(), "{history:?}");
    assert_eq!(history.consumed, N as usize);
    cluster
        .wait_for(LONG, |c| {
            find_event(c, leader, detected_at(Where::Serve)).is_some()
        })
        .await
        .unwrap_or_else(|_| panic!("serving finds it; events: {}", events_text(&cluster)));
    assert!(
        find_event(&cluster, leader, |k| matches!(
            k,
            CorruptionKind::LeaderResigned { .. }
        ))
        .is_some(),
        "the leader resigned: {}",
        events_text(&cluster)
    );
    wait_repaired(&cluster, &topic, leader).await;
    // (The repaired node may lead again: it is the preferred leader.)
    wait_in_sync(&cluster, &topic, N as i64).await;
    assert_identical(&cluster, &topic, leader, follower);
    eprintln!(
        "events:{}\ntimeline:\n{}",
        events_text(&cluster),
        cluster.timeline_text()
    );
    cluster.shutdown().await;
}

/// Every replica corrupt at the same offset: the partition goes offline (no leader,
/// empty ISR) and nothing at or past the damage is ever served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_replicas_corrupt_takes_the_partition_offline() {
    let Setup {
        _dir,
        mut cluster,
        client,
        topic,
    } = setup("corrupt-all", 0).await;
    const N: u64 = 1_000;
    let mut acked = HashMap::new();
    produce_all(&client, &topic, 0..N, &mut acked).await;
    wait_in_sync(&cluster, &topic, N as i64).await;
    const AT: i64 = 600;
    for n in 1..=3 {
        cluster.node(n).corrupt(&topic, 0, AT).expect("corrupt");
    }
    let mut consumer = baton_kafka::Consumer::builder(&client)
        .assign(topic.clone(), 0, baton_kafka::StartOffset::Earliest)
        .build()
        .await
        .expect("consumer");
    let mut got = Vec::new();
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state(&topic, 0).unwrap();
            v.leader == -1 && v.isr.is_empty()
        })
        .await
        .ok();
    // Drain what the consumer has (records below the damage only).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while let Ok(Ok(r)) = tokio::time::timeout_at(deadline, consumer.recv()).await {
        got.push(r);
    }
    let v = cluster.partition_state(&topic, 0).unwrap();
    assert_eq!(
        (v.leader, v.isr.clone()),
        (-1, vec![]),
        "offline; events: {}\n{}",
        events_text(&cluster),
        cluster.timeline_text()
    );
    // Clients are told clearly: Metadata names no leader, LEADER_NOT_AVAILABLE.
    let deadline = tokio::time::Instant::now() + LONG;
    loop {
        let md = client.refresh_metadata().await.expect("metadata");
        let p = md.topic(&topic).and_then(|t| t.partition(0)).cloned();
        let offline = p.as_ref().is_some_and(|p| {
            p.leader.is_none() && p.error == Some(baton_protocol::ErrorCode::LeaderNotAvailable)
        });
        if offline {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "metadata shows the partition offline: {p:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Everything below the damaged batch was served, in order, once; nothing after.
    assert!(
        !got.is_empty(),
        "the intact records below the damage are served"
    );
    for (i, r) in got.iter().enumerate() {
        assert_eq!(r.offset, i as i64, "records in order, once");
        assert!(
            r.offset < AT,
            "offset {} at or past the damage was served",
            r.offset
        );
        let id = r.value.as_deref().and_then(baton_testkit::cluster::parse);
        assert_eq!(id.map(|id| acked[&id].1), Some(r.offset), "record intact");
    }
    // With no healthy copy to re-fetch from, no replica cut its data past the damage.
    for r in &v.replica_states {
        assert_eq!(r.log_end_offset, N as i64, "node {} kept its log", r.node);
    }
    for n in 1..=3 {
        assert!(
            find_event(&cluster, n, |k| matches!(
                k,
                CorruptionKind::Detected { .. }
            ))
            .is_some(),
            "node {n} detected its corruption: {}",
            events_text(&cluster)
        );
    }
    eprintln!(
        "offline after {} records below offset {AT}; events:{}",
        got.len(),
        events_text(&cluster)
    );
    drop(consumer);
    cluster.shutdown().await;
}

/// A hard-killed leader whose segment is damaged while it is down: recovery cuts the
/// damage, the node reports itself instead of leading with a shortened log, and
/// re-fetches from the leader elected in its place. Nothing acknowledged is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_on_a_killed_leader_does_not_lose_acknowledged_data() {
    let Setup {
        _dir,
        mut cluster,
        client,
        topic,
    } = setup("corrupt-recovery-leader", 0).await;
    const N: u64 = 1_000;
    let mut acked = HashMap::new();
    produce_all(&client, &topic, 0..N, &mut acked).await;
    wait_in_sync(&cluster, &topic, N as i64).await;
    let old = cluster.partition_state(&topic, 0).unwrap().leader;
    cluster.node(old).kill();
    cluster
        .node(old)
        .corrupt(&topic, 0, 300)
        .expect("corrupt the stopped leader");
    cluster.node(old).restart().await.expect("restart");
    cluster
        .wait_for(LONG, |c| {
            find_event(c, old, detected_at(Where::Recovery)).is_some()
        })
        .await
        .unwrap_or_else(|_| panic!("recovery reports it; events: {}", events_text(&cluster)));
    wait_repaired(&cluster, &topic, old).await;
    wait_in_sync(&cluster, &topic, N as i64).await;
    let other = cluster
        .partition_state(&topic, 0)
        .unwrap()
        .replicas
        .into_iter()
        .find(|r| *r != old)
        .unwrap();
    assert_identical(&cluster, &topic, old, other);
    let history =
        baton_testkit::cluster::check_history(&client, &topic, 1, &acked, Duration::from_secs(5))
            .await;
    assert!(history.is_clean(), "{history:?}");
    eprintln!(
        "events:{}\ntimeline:\n{}",
        events_text(&cluster),
        cluster.timeline_text()
    );
    cluster.shutdown().await;
}
