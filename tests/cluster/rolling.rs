//! Graceful rolling restarts of the in-process cluster lose nothing acknowledged.
//!
//! The configuration is the field report that motivated Baton: replication factor 2,
//! producers with `acks=1`, consumers on explicit partitions. Apache Kafka can lose
//! `acks=1` records when a planned leader move hands over before the successor has
//! the old leader's tail (KAFKA-20554); here the old leader stops taking writes,
//! the successor catches up to its frozen log end, and only then does leadership move.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use baton_broker::Cluster;
use baton_kafka::{Acks, Admin, DeliveryFuture, NewTopic, Producer, ProducerRecord};
use baton_testkit::cluster::{check_history, client, value, LiveConsumer};
use baton_testkit::topic_name;
use tokio::sync::mpsc;

const LONG: Duration = Duration::from_secs(90);
const PARTITIONS: i32 = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_rolling_restart_loses_no_acks_1_record_with_rf_2() {
    baton_testkit::init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::builder()
        .brokers(3)
        .data_dir(dir.path())
        .start()
        .await
        .expect("cluster starts");
    let client = client(&cluster).await;
    let topic = topic_name("rolling");
    Admin::new(&client)
        .create_topics([NewTopic::new(topic.clone(), PARTITIONS, 2)])
        .await
        .expect("topic created");

    let producer = Arc::new(
        Producer::builder(&client)
            .acks(Acks::Leader)
            .idempotence(false)
            .delivery_timeout(Duration::from_secs(120))
            .build(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicUsize::new(0));
    let (tx, mut rx) = mpsc::unbounded_channel::<(u64, DeliveryFuture)>();
    let sender = {
        let (producer, stop, topic) = (producer.clone(), stop.clone(), topic.clone());
        tokio::spawn(async move {
            let mut id = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let r = ProducerRecord::new(topic.clone())
                    .partition((id % PARTITIONS as u64) as i32)
                    .value(value(id));
                let _ = tx.send((id, producer.send(r).await.expect("accepted")));
                id += 1;
                if id.is_multiple_of(20) {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
        })
    };
    let collector = {
        let count = count.clone();
        tokio::spawn(async move {
            let mut acked = HashMap::new();
            let mut failed = 0usize;
            while let Some((id, d)) = rx.recv().await {
                match d.await {
                    Ok(m) => {
                        acked.insert(id, (m.partition, m.offset));
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        failed += 1;
                        eprintln!("record {id} failed: {e}");
                    }
                }
            }
            (acked, failed)
        })
    };
    let wait_more = |n: usize| {
        let count = count.clone();
        async move {
            let target = count.load(Ordering::Relaxed) + n;
            let deadline = tokio::time::Instant::now() + LONG;
            while count.load(Ordering::Relaxed) < target {
                assert!(tokio::time::Instant::now() < deadline, "producer stalled");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };

    // Consumers on explicit partitions read while the nodes restart.
    let live = LiveConsumer::start(&client, &topic, PARTITIONS).await;
    wait_more(2_000).await;
    for id in cluster.node_ids() {
        eprintln!("stopping node {id}");
        cluster.node(id).stop().await;
        for p in 0..PARTITIONS {
            let v = cluster.partition_state(&topic, p).unwrap();
            assert_ne!(
                v.leader, id,
                "partition {p} still led by stopped node {id}: {v:?}"
            );
        }
        wait_more(1_000).await;
        cluster.node(id).restart().await.expect("restart");
        cluster
            .wait_for(LONG, |c| {
                (0..PARTITIONS).all(|p| {
                    let v = c.partition_state(&topic, p).unwrap();
                    v.isr.len() == 2 && v.leader == v.replicas[0]
                })
            })
            .await
            .unwrap_or_else(|_| {
                panic!("node {id} back in the ISRs and preferred leaders restored")
            });
        wait_more(1_000).await;
    }

    stop.store(true, Ordering::Relaxed);
    sender.await.unwrap();
    producer.flush().await;
    drop(producer);
    let (acked, failed) = collector.await.unwrap();
    eprintln!("acknowledged {} records, {failed} failed", acked.len());
    let during = live.finish(&acked).await;
    assert_eq!(during.lost(), 0, "consumed during the restarts: {during:?}");
    assert_eq!(during.corrupted(), 0, "{during:?}");
    assert_eq!(during.moved(), 0, "{during:?}");
    let history = check_history(&client, &topic, PARTITIONS, &acked, Duration::from_secs(20)).await;
    assert_eq!(history.lost(), 0, "{history:?}");
    assert_eq!(history.corrupted(), 0, "{history:?}");
    assert_eq!(history.moved(), 0, "{history:?}");
    eprintln!("timeline:\n{}", cluster.timeline_text());
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_restart_under_librdkafka_acks_all_loses_nothing() {
    baton_testkit::init_tracing();
    let python = tokio::task::spawn_blocking(|| baton_testkit::tools::python().to_path_buf())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::builder()
        .brokers(3)
        .data_dir(dir.path())
        .start()
        .await
        .expect("cluster starts");
    let client = client(&cluster).await;
    let topic = topic_name("rolling-rdkafka");
    Admin::new(&client)
        .create_topics([NewTopic::new(topic.clone(), 3, 3).config("min.insync.replicas", "2")])
        .await
        .expect("topic created");

    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cluster_rdkafka_producer.py");
    let child = std::process::Command::new(&python)
        .arg(&script)
        .arg(cluster.bootstrap())
        .arg(&topic)
        .arg("20000")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python starts");
    let run = tokio::task::spawn_blocking(move || child.wait_with_output());
    let live = LiveConsumer::start(&client, &topic, 3).await;

    let committed = |c: &Cluster| -> i64 {
        (0..3)
            .map(|p| {
                c.partition_state(&topic, p)
                    .and_then(|v| v.high_watermark())
                    .unwrap_or(0)
            })
            .sum()
    };
    cluster
        .wait_for(LONG, |c| committed(c) >= 2_000)
        .await
        .expect("librdkafka produces");
    for id in cluster.node_ids() {
        eprintln!(
            "stopping node {id} at {} committed records",
            committed(&cluster)
        );
        cluster.node(id).stop().await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        cluster.node(id).restart().await.expect("restart");
        cluster
            .wait_for(LONG, |c| {
                (0..3).all(|p| c.partition_state(&topic, p).unwrap().isr.len() == 3)
            })
            .await
            .unwrap_or_else(|_| panic!("node {id} back in every ISR"));
    }
    let out = run.await.unwrap().expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "producer failed: {}\n{stderr}",
        out.status
    );
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .unwrap_or_else(|| panic!("no RESULT line\n{stdout}\n{stderr}"));
    // Minimal parse of {"acked": [[id, p, o], ...], "failed": n}.
    let (acked_part, failed_part) = line.split_once("], \"failed\": ").expect("RESULT shape");
    let failed: usize = failed_part
        .trim_end_matches('}')
        .trim()
        .parse()
        .expect("failed count");
    let mut acked = HashMap::new();
    for triple in acked_part.split("], [") {
        let nums: Vec<i64> = triple
            .trim_start_matches("{\"acked\": [[")
            .trim_end_matches(']')
            .split(", ")
            .filter_map(|n| n.trim().parse().ok())
            .collect();
        if let [id, p, o] = nums[..] {
            acked.insert(id as u64, (p as i32, o));
        }
    }
    eprintln!("librdkafka: {} acknowledged, {failed} failed", acked.len());
    assert!(!acked.is_empty(), "nothing acknowledged\n{stderr}");
    let during = live.finish(&acked).await;
    assert_eq!(during.lost(), 0, "consumed during the restarts: {during:?}");
    assert_eq!(during.corrupted(), 0, "{during:?}");
    let history = check_history(&client, &topic, 3, &acked, Duration::from_secs(20)).await;
    assert_eq!(history.lost(), 0, "{history:?}");
    assert_eq!(history.corrupted(), 0, "{history:?}");
    eprintln!("timeline:\n{}", cluster.timeline_text());
    cluster.shutdown().await;
}
