//! Disk faults on a 3-node cluster with on-disk logs: ENOSPC or EIO on write, EIO on
//! fsync, a short write, and a torn tail left by a crash, each on the partition
//! leader's log and (separately) on a follower's, while Baton's producer writes with
//! `acks=all` and `min.insync.replicas=2`.
//!
//! Every scenario checks the same things: the faulty replica's log goes offline and
//! answers KAFKA_STORAGE_ERROR; it leaves the ISR and, if it led, the leadership moves
//! to a healthy replica; the node keeps serving its other partitions; nothing it did
//! not persist is acknowledged and no acknowledged record is lost (the history
//! checker over everything consumed); and after the fault is cleared and the node
//! restarted its log recovers and the replica rejoins the ISR. See
//! `docs/RELIABILITY.md`, "Disk faults".

use std::collections::HashMap;
use std::time::Duration;

use baton_broker::faults::DiskFault;
use baton_broker::Cluster;
use baton_kafka::{Acks, Admin, Client, NewTopic, Producer, ProducerRecord};
use baton_protocol::ErrorCode;
use baton_testkit::cluster::{check_history, client, value, Acked};
use baton_testkit::wire::{self, fetch_req, node_addr, produce_req, records};
use baton_testkit::{topic_name, Rng};

const LONG: Duration = Duration::from_secs(90);

/// Whose log of the faulty partition gets the fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Leader,
    Follower,
}

/// Sends `ids` to `topic` and waits for every outcome: the acknowledged ones are
/// added to `acked`; a failed one must fail with an error (printed), never vanish.
/// Returns how many failed.
async fn produce(
    producer: &Producer,
    topic: &str,
    ids: std::ops::Range<u64>,
    acked: &mut Acked,
) -> usize {
    let mut pending = Vec::new();
    for id in ids {
        let r = ProducerRecord::new(topic.to_owned()).value(value(id));
        pending.push((id, producer.send(r).await.expect("record accepted")));
    }
    let mut failed = 0;
    for (id, d) in pending {
        match d.await {
            Ok(m) => {
                acked.insert(id, (m.partition, m.offset));
            }
            Err(e) => {
                failed += 1;
                eprintln!("record {id} failed: {e}");
            }
        }
    }
    failed
}

/// The node's answers to a Produce and a Fetch of `topic`-0, sent to it directly.
async fn direct_errors(cluster: &Cluster, node: i32, topic: &str) -> (i16, i16) {
    let mut c = wire::Client::connect(node_addr(cluster, node)).await;
    let p = c
        .call(&produce_req(topic, 0, -1, records(1, &["direct"])), 9)
        .await;
    let f = c.call(&fetch_req(topic, 0, 0, 0, 0), 12).await;
    (
        p.responses[0].partition_responses[0].error_code,
        f.responses[0].partitions[0].error_code,
    )
}

/// Waits until every replica of `topic`-0 is in the ISR, online, and holds the
/// leader's whole log.
async fn wait_rejoined(cluster: &Cluster, topic: &str) {
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state(topic, 0).unwrap();
            let Some(leader) = v.replica(v.leader) else {
                return false;
            };
            v.isr.len() == 3
                && v.replica_states.iter().all(|r| {
                    r.running && !r.log_offline && r.log_end_offset == leader.log_end_offset
                })
        })
        .await
        .unwrap_or_else(|_| panic!("replicas rejoined: {:?}", cluster.partition_state(topic, 0)));
}

fn dump(cluster: &Cluster, topic: &str) -> String {
    format!(
        "{:?}\ntimeline:\n{}",
        cluster.partition_state(topic, 0),
        cluster.timeline_text()
    )
}

async fn create(client: &Client, topic: &str) {
    Admin::new(client)
        .create_topics([NewTopic::new(topic.to_owned(), 1, 3).config("min.insync.replicas", "2")])
        .await
        .expect("topic created");
}

async fn scenario(fault: DiskFault, target: Target) {
    baton_testkit::init_tracing();
    let seed = baton_testkit::seed();
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::builder()
        .brokers(3)
        .data_dir(dir.path())
        .session_timeout(Duration::from_secs(3))
        // Small segments: the appends roll (and fsync) while the fault is on.
        .segment_bytes(8 * 1024)
        .start()
        .await
        .expect("cluster starts");
    let client = client(&cluster).await;
    let topic = topic_name("disk");
    let other = topic_name("disk-other");
    create(&client, &topic).await;
    create(&client, &other).await;
    cluster.wait_fully_replicated(&topic, LONG).await.unwrap();
    cluster.wait_fully_replicated(&other, LONG).await.unwrap();
    let producer = Producer::builder(&client)
        .acks(Acks::All)
        .batch_size(2 * 1024)
        .delivery_timeout(Duration::from_secs(60))
        .build();
    let (mut acked, mut acked_other) = (Acked::new(), Acked::new());
    let wave = 200 + rng.below(200);
    let mut next = 0;
    let mut ids = || {
        next += wave;
        next - wave..next
    };
    assert_eq!(
        produce(&producer, &topic, ids(), &mut acked).await,
        0,
        "healthy cluster"
    );
    assert_eq!(
        produce(&producer, &other, ids(), &mut acked_other).await,
        0,
        "healthy cluster"
    );

    let v = cluster.partition_state(&topic, 0).unwrap();
    let followers: Vec<i32> = v
        .replicas
        .iter()
        .copied()
        .filter(|r| *r != v.leader)
        .collect();
    let node = match target {
        Target::Leader => v.leader,
        Target::Follower => followers[rng.below(2) as usize],
    };
    eprintln!("{fault:?} on node {node}'s log of {topic}-0 ({target:?})");
    cluster.partition_disk_fault(node, &topic, 0, fault);

    let crash = matches!(fault, DiskFault::TornTailOnCrash(_));
    let failed = produce(&producer, &topic, ids(), &mut acked).await;
    if crash {
        // Writes work until the crash; the crash tears what the node wrote last.
        assert_eq!(failed, 0);
        cluster.node(node).kill();
    }
    // The faulty replica is out: leadership moved off it, it left the ISR, and (while
    // it runs) its log is offline and says so.
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state(&topic, 0).unwrap();
            let off = v.replica(node).unwrap();
            v.leader > 0 && v.leader != node && !v.isr.contains(&node) && (crash || off.log_offline)
        })
        .await
        .unwrap_or_else(|_| panic!("faulty replica out: {}", dump(&cluster, &topic)));
    if !crash {
        let (p, f) = direct_errors(&cluster, node, &topic).await;
        assert_eq!(
            p,
            ErrorCode::KafkaStorageError.code(),
            "produce to the offline log"
        );
        assert_eq!(
            f,
            ErrorCode::KafkaStorageError.code(),
            "fetch from the offline log"
        );
        // The node keeps serving its other partition: it takes writes there and
        // stays in sync.
        assert_eq!(produce(&producer, &other, ids(), &mut acked_other).await, 0);
        let v = cluster.partition_state(&other, 0).unwrap();
        let r = v.replica(node).unwrap();
        assert!(!r.log_offline && v.isr.contains(&node), "{v:?}");
    }
    // The two healthy replicas carry on with acks=all.
    assert_eq!(
        produce(&producer, &topic, ids(), &mut acked).await,
        0,
        "{}",
        dump(&cluster, &topic)
    );
    assert!(
        failed < wave as usize,
        "some records of the faulty wave were acknowledged"
    );

    // Clear the fault and restart the node: the log recovers from what is on disk and
    // the replica catches up from the leader and rejoins the ISR.
    cluster.partition_disk_fault(node, &topic, 0, DiskFault::None);
    cluster.node(node).kill();
    cluster.node(node).restart().await.expect("restart");
    wait_rejoined(&cluster, &topic).await;
    if crash {
        let t = cluster.timeline_text();
        assert!(
            t.contains("crash tore") && !t.contains("crash tore 0 bytes"),
            "{t}"
        );
    }
    assert_eq!(produce(&producer, &topic, ids(), &mut acked).await, 0);
    wait_rejoined(&cluster, &topic).await;
    producer.close().await;

    for (t, acked) in [(&topic, &acked), (&other, &acked_other)] {
        let h = check_history(&client, t, 1, acked, Duration::from_secs(10)).await;
        assert!(
            h.report.passed(),
            "{t}: {} (seed {seed})\n{}",
            h.report,
            dump(&cluster, t)
        );
    }
    // Every replica of the faulty partition holds the same bytes below the HW.
    let hw = cluster
        .partition_state(&topic, 0)
        .unwrap()
        .high_watermark()
        .unwrap();
    let copies: HashMap<i32, _> = cluster
        .node_ids()
        .into_iter()
        .map(|n| (n, cluster.stored_batches(n, &topic, 0, hw)))
        .collect();
    assert!(
        copies.values().all(|c| *c == copies[&node]),
        "replicas differ below the HW"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enospc_on_the_leader() {
    scenario(DiskFault::NoSpace, Target::Leader).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enospc_on_a_follower() {
    scenario(DiskFault::NoSpace, Target::Follower).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eio_on_write_on_the_leader() {
    scenario(DiskFault::FailWrite, Target::Leader).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eio_on_write_on_a_follower() {
    scenario(DiskFault::FailWrite, Target::Follower).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eio_on_fsync_on_the_leader() {
    scenario(DiskFault::FailFsync, Target::Leader).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eio_on_fsync_on_a_follower() {
    scenario(DiskFault::FailFsync, Target::Follower).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_write_on_the_leader() {
    scenario(DiskFault::ShortWrite, Target::Leader).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_write_on_a_follower() {
    scenario(DiskFault::ShortWrite, Target::Follower).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn torn_tail_after_a_leader_crash() {
    scenario(DiskFault::TornTailOnCrash(3_000), Target::Leader).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn torn_tail_after_a_follower_crash() {
    scenario(DiskFault::TornTailOnCrash(3_000), Target::Follower).await;
}
