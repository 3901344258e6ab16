//! Interoperability tests: the Go Kafka clients against `baton-broker`.
//!
//! segmentio/kafka-go (the client of the field report), twmb/franz-go (kgo) and
//! IBM/sarama, at the versions pinned in `tests/interop/go/go.mod`, through one Go
//! program (`tests/interop/go/`) built once per test binary into
//! `target/interop-go/` with `go build` (which fetches the pinned modules on a
//! fresh machine; `.ci/run` fetches them up front). Each run prints one
//! `RESULT {json}` line.
//!
//! Records are seeded here (`baton_protocol::testing::Rng`, seed printed,
//! `BATON_SEED=N` replays): unique keys carrying the record's id, empty,
//! small and 100 KiB values, headers with repeated, empty and non-ASCII names. A
//! Go producer sends them to the partitions they name and reports each outcome; a
//! Go consumer writes back everything it received, and the history checker
//! (`baton_broker::history`) requires every acknowledged record consumed exactly
//! once with identical key, value and headers, in per-partition order.
//!
//! On one broker, each client produces and reads its records back on explicit
//! partitions and in a consumer group. On a 3-node cluster, each client produces
//! while the leader of partition 0 goes through a controlled stop and a restart,
//! and a consumer reads live throughout.
//!
//! kafka-go's `Writer.WriteMessages` runs there with a 500 ms context per call and
//! `-reuse-buffers`: after a failed call the program overwrites that call's value
//! bytes, as the field report's buffer pool did. The test records (prints, does
//! not hide) how many calls failed, how many of those records were written later
//! anyway, and how many were written with the overwritten bytes.

use std::time::{Duration, Instant};

use crate::interop_go_util::check::{check, Report};
use crate::interop_go_util::process::{arg, go_command, go_result, go_run, Running, RUN_TIMEOUT};
use crate::interop_go_util::records::{
    decode_consumed, decode_outcomes, encode_records, generate, Rec,
};
use crate::interop_go_util::{binary, scratch, seed};
use baton_broker::{Broker, BrokerConfig, Cluster};
use baton_kafka::{Admin, NewTopic};

/// Partitions of every test topic.
const PARTITIONS: u32 = 3;

/// Records of the single-broker round trips.
const ROUND_TRIP_COUNT: u64 = 2_000;

/// Records available to a failover producer (it stops when told to).
const FAILOVER_POOL: u64 = 60_000;

/// Records sent before, during and after each step of a failover.
const FAILOVER_STEP: u64 = 400;

/// How long a failover step may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

async fn create_topic(bootstrap: Vec<String>, topic: &str, replication: i16) {
    let client = baton_kafka::Client::builder(bootstrap)
        .build()
        .await
        .expect("client connects");
    Admin::new(&client)
        .create_topics([NewTopic::new(topic, PARTITIONS as i32, replication)])
        .await
        .expect("topic created");
}

fn write_records(dir: &tempfile::TempDir, records: &[Rec]) -> std::path::PathBuf {
    let path = dir.path().join("records.bin");
    std::fs::write(&path, encode_records(records)).expect("write records file");
    path
}

fn ends_arg(ends: &[i64]) -> String {
    ends.iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Reads and checks the files a producer and a consumer wrote.
fn check_files(records: &[Rec], outcomes: &std::path::Path, consumed: &std::path::Path) -> Report {
    let outcomes = decode_outcomes(&std::fs::read(outcomes).expect("outcomes file"));
    let consumed = decode_consumed(&std::fs::read(consumed).expect("consumed file"));
    check(records, &outcomes, &consumed)
}

// ---------------------------------------------------------------------------
// One broker: produce, then read back on explicit partitions and in a group.

fn single_broker_round_trip(lib: &str, consume_roles: &[&str]) {
    let seed = seed();
    binary();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let broker = runtime
        .block_on(Broker::start(BrokerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            ..Default::default()
        }))
        .expect("broker starts");
    let bootstrap = broker.bootstrap();
    let topic = format!("interop-go-{lib}-{seed}");
    runtime.block_on(create_topic(vec![bootstrap.clone()], &topic, 1));

    let dir = scratch();
    let records = generate(seed, ROUND_TRIP_COUNT, PARTITIONS, true);
    let records_path = write_records(&dir, &records);
    let outcomes = dir.path().join("outcomes.bin");
    let started = Instant::now();
    let produced = go_run(
        &[
            lib,
            "produce",
            "-bootstrap",
            &bootstrap,
            "-topic",
            &topic,
            "-records",
            arg(&records_path),
            "-out",
            arg(&outcomes),
            "-batch",
            "100",
        ],
        seed,
    );
    println!(
        "{lib} produce: {} in {:?}",
        produced.json,
        started.elapsed()
    );
    assert_eq!(
        produced.int("acked"),
        Some(ROUND_TRIP_COUNT as i64),
        "seed {seed}: {}",
        produced.json
    );

    let mut ends = vec![0i64; PARTITIONS as usize];
    for r in &records {
        ends[r.partition as usize] += 1;
    }
    for role in consume_roles {
        let consumed = dir.path().join(format!("{role}.bin"));
        let group = format!("interop-go-{lib}-{seed}-{role}");
        let started = Instant::now();
        let result = go_run(
            &[
                lib,
                role,
                "-bootstrap",
                &bootstrap,
                "-topic",
                &topic,
                "-group",
                &group,
                "-ends",
                &ends_arg(&ends),
                "-out",
                arg(&consumed),
            ],
            seed,
        );
        let report = check_files(&records, &outcomes, &consumed);
        println!(
            "{lib} {role}: {} in {:?}\n  {report}",
            result.json,
            started.elapsed()
        );
        assert!(report.passed(), "seed {seed}: {lib} {role}: {report}");
        assert_eq!(
            report.history.consumed, ROUND_TRIP_COUNT,
            "seed {seed}: {report}"
        );
    }
    runtime.block_on(broker.shutdown());
}

#[test]
fn kafka_go_writer_and_readers_on_one_broker() {
    single_broker_round_trip("kafkago", &["consume-partitions", "consume-group"]);
}

#[test]
fn franz_go_idempotent_producer_and_consumers_on_one_broker() {
    single_broker_round_trip("franz", &["consume-partitions", "consume-group"]);
}

#[test]
fn sarama_sync_producer_and_consumers_on_one_broker() {
    single_broker_round_trip("sarama", &["consume-partitions", "consume-group"]);
}

// ---------------------------------------------------------------------------
// A 3-node cluster: produce and consume through a controlled stop and a
// restart of a partition leader.

/// The last `PROGRESS sent acked unknown` line of a follow-mode producer.
fn progress(p: &Running) -> (u64, u64, u64) {
    let out = p.output();
    let Some(line) = out.lines().rev().find(|l| l.starts_with("PROGRESS ")) else {
        return (0, 0, 0);
    };
    let v: Vec<u64> = line[9..]
        .split(' ')
        .filter_map(|x| x.parse().ok())
        .collect();
    (v[0], v[1], v[2])
}

/// Waits until the producer has sent `n` more records than now.
async fn sent_more(p: &mut Running, n: u64, what: &str, seed: u64) {
    let target = progress(p).0 + n;
    let deadline = Instant::now() + STEP_TIMEOUT;
    while progress(p).0 < target {
        assert!(
            !p.exited(),
            "seed {seed}: producer exited {what}: {}",
            p.output()
        );
        assert!(
            Instant::now() < deadline,
            "seed {seed}: producer stalled {what}: {:?}",
            progress(p)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Log end offsets of every partition once the cluster is settled.
async fn settled_ends(cluster: &Cluster, topic: &str) -> Vec<i64> {
    cluster
        .wait_for(STEP_TIMEOUT, |c| {
            (0..PARTITIONS as i32).all(|p| {
                let v = c.partition_state(topic, p).unwrap();
                let leo = v.replica(v.leader).map(|r| r.log_end_offset);
                v.high_watermark().is_some() && v.high_watermark() == leo
            })
        })
        .await
        .expect("high watermarks reach the log ends");
    (0..PARTITIONS as i32)
        .map(|p| {
            cluster
                .partition_state(topic, p)
                .unwrap()
                .high_watermark()
                .unwrap()
        })
        .collect()
}

/// What a failover run saw.
struct Failover {
    report: Report,
    produced: String,
}

async fn failover(lib: &str, consume_role: &str, producer_args: &[&str]) -> Failover {
    let seed = seed();
    tokio::task::spawn_blocking(binary).await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::builder()
        .brokers(3)
        .data_dir(data.path())
        .start()
        .await
        .expect("cluster starts");
    let bootstrap = cluster.bootstrap_servers().join(",");
    let topic = format!("interop-go-{lib}-failover-{seed}");
    create_topic(cluster.bootstrap_servers(), &topic, 3).await;
    cluster
        .wait_fully_replicated(&topic, STEP_TIMEOUT)
        .await
        .expect("topic replicated");

    let dir = scratch();
    let records = generate(seed, FAILOVER_POOL, PARTITIONS, false);
    let records_path = write_records(&dir, &records);
    let outcomes = dir.path().join("outcomes.bin");
    let consumed = dir.path().join("consumed.bin");
    let group = format!("interop-go-{lib}-failover-{seed}");

    let mut consumer_cmd = go_command(&[
        lib,
        consume_role,
        "-bootstrap",
        &bootstrap,
        "-topic",
        &topic,
        "-group",
        &group,
        "-ends",
        "stdin",
        "-out",
        arg(&consumed),
        "-deadline",
        "100s",
    ]);
    let mut consumer = Running::start(&mut consumer_cmd, &format!("{lib} {consume_role}")).unwrap();
    let mut args = vec![
        lib,
        "produce",
        "-bootstrap",
        &bootstrap,
        "-topic",
        &topic,
        "-records",
        arg(&records_path),
        "-out",
        arg(&outcomes),
        "-follow",
        "-batch",
        "10",
        "-pause",
        "5ms",
        "-deadline",
        "100s",
    ];
    args.extend_from_slice(producer_args);
    let mut producer = Running::start(&mut go_command(&args), &format!("{lib} produce")).unwrap();

    sent_more(&mut producer, FAILOVER_STEP, "before the failover", seed).await;
    let leader = cluster.partition_state(&topic, 0).unwrap().leader;
    cluster.record(format!(
        "{lib}: stopping leader {leader} at {:?}",
        progress(&producer)
    ));
    cluster.node(leader).stop().await;
    sent_more(
        &mut producer,
        FAILOVER_STEP,
        "with the leader stopped",
        seed,
    )
    .await;
    cluster.record(format!(
        "{lib}: restarting {leader} at {:?}",
        progress(&producer)
    ));
    cluster.node(leader).restart().await.expect("restart");
    cluster
        .wait_fully_replicated(&topic, STEP_TIMEOUT)
        .await
        .expect("restarted node back in every ISR");
    sent_more(&mut producer, FAILOVER_STEP, "after the restart", seed).await;
    cluster.record(format!(
        "{lib}: stopping the producer at {:?}",
        progress(&producer)
    ));

    let produced = tokio::task::spawn_blocking(move || producer.wait(RUN_TIMEOUT))
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let produced_result = go_result(&produced, &format!("{lib} produce"));
    assert!(
        produced.status.success()
            && produced_result.bool("ok")
            && !produced_result.bool("exhausted"),
        "seed {seed}: {}",
        produced.describe("producer")
    );

    let ends = settled_ends(&cluster, &topic).await;
    consumer.send_line(&format!("ends {}", ends_arg(&ends)));
    let what = format!("{lib} {consume_role}");
    let finished = tokio::task::spawn_blocking(move || consumer.wait(RUN_TIMEOUT))
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let consumed_result = go_result(&finished, &what);
    assert!(
        finished.status.success() && consumed_result.bool("ok"),
        "seed {seed}: {}\ntimeline:\n{}",
        finished.describe(&what),
        cluster.timeline_text()
    );
    let report = check_files(&records, &outcomes, &consumed);
    println!(
        "{lib} through a leader failover: producer {}; consumer {}; log ends {ends:?}\n  {report}\ntimeline:\n{}",
        produced_result.json,
        consumed_result.json,
        cluster.timeline_text()
    );
    // A group member resumes from the group's last commit after a rebalance (the
    // stopped node may have been the coordinator), so it may read again what it
    // had not committed: at least once. Explicit partitions have no such excuse.
    let passed = if consume_role == "consume-group" {
        report.passed_allowing_replays()
    } else {
        report.passed()
    };
    assert!(
        passed,
        "seed {seed}: {lib}: {report}\n{}",
        cluster.timeline_text()
    );
    assert_eq!(
        report.history.consumed,
        ends.iter().sum::<i64>() as u64,
        "seed {seed}: consumed every record in the log"
    );
    cluster.shutdown().await;
    Failover {
        report,
        produced: produced_result.json,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_go_write_messages_with_timeouts_through_leader_failover() {
    let run = failover(
        "kafkago",
        "consume-partitions",
        &["-timeout", "500ms", "-reuse-buffers"],
    )
    .await;
    // The field report's question, answered by the run: what did WriteMessages
    // return while the leader moved, and were those records written anyway?
    println!(
        "kafka-go WriteMessages (500 ms contexts): {} records not acknowledged, {} of them \
         written later, {} of those with the bytes overwritten after the call returned \
         (producer said {})",
        run.report.unacked,
        run.report.unacked_written,
        run.report.unacked_written_reused,
        run.produced
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn franz_go_idempotent_producer_and_group_through_leader_failover() {
    let run = failover("franz", "consume-group", &[]).await;
    assert_eq!(run.report.unacked, 0, "{}", run.report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sarama_idempotent_sync_producer_and_group_through_leader_failover() {
    let run = failover("sarama", "consume-group", &[]).await;
    assert_eq!(run.report.unacked, 0, "{}", run.report);
}

/// The check these tests rest on fails for each kind of damage (so a Go consumer
/// that lost, repeated, reordered or altered a record could not pass).
#[test]
fn check_reports_lost_repeated_reordered_and_altered_records() {
    use crate::interop_go_util::records::Outcome;
    let records = generate(7, 40, 1, false);
    let outcomes: Vec<Outcome> = (0..40)
        .map(|i| Outcome {
            acked: true,
            partition: 0,
            offset: i,
            error: String::new(),
        })
        .collect();
    let consumed: Vec<Rec> = records
        .iter()
        .enumerate()
        .map(|(i, r)| Rec {
            offset: i as i64,
            ..r.clone()
        })
        .collect();
    assert!(check(&records, &outcomes, &consumed).passed());

    let mut lost = consumed.clone();
    lost.remove(5);
    assert_eq!(check(&records, &outcomes, &lost).history.lost, 1);

    let mut repeated = consumed.clone();
    repeated.push(consumed[3].clone());
    let report = check(&records, &outcomes, &repeated);
    assert_eq!((report.repeated_reads, report.out_of_order), (1, 1));
    assert!(!report.passed());
    // A replay (a group member resuming from its last commit) is allowed where
    // replays are: the first reads are still in order and nothing is lost.
    assert!(report.passed_allowing_replays());

    let mut swapped = consumed.clone();
    swapped.swap(10, 11);
    let report = check(&records, &outcomes, &swapped);
    assert!(!report.passed());
    assert_eq!(report.first_reads_out_of_order, 1);
    assert!(!report.passed_allowing_replays());

    let mut altered = consumed.clone();
    altered[20].headers.push(("extra".into(), Vec::new()));
    assert_eq!(check(&records, &outcomes, &altered).history.corrupted, 1);
}
