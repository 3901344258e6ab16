//! Failover in the in-process cluster: a hard-killed leader is replaced from the ISR
//! while Baton's producer keeps going, and the killed node comes back, truncates
//! whatever it alone had, and rejoins the ISR.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use baton_broker::Cluster;
use baton_kafka::{Acks, Admin, DeliveryFuture, NewTopic, Producer, ProducerRecord};
use baton_testkit::cluster::{check_history, client, value};

use tokio::sync::mpsc;

use baton_testkit::topic_name;

const LONG: Duration = Duration::from_secs(90);

struct Load {
    stop: Arc<AtomicBool>,
    acked: Arc<AtomicUsize>,
    sender: tokio::task::JoinHandle<()>,
    collector: tokio::task::JoinHandle<(baton_testkit::cluster::Acked, usize)>,
}

/// Sends self-checking records to `topic` until stopped, counting acknowledgements.
fn start_load(producer: Arc<Producer>, topic: String) -> Load {
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicUsize::new(0));
    let (tx, mut rx) = mpsc::unbounded_channel::<(u64, DeliveryFuture)>();
    let s = stop.clone();
    let sender = tokio::spawn(async move {
        let mut id = 0u64;
        while !s.load(Ordering::Relaxed) {
            let record = ProducerRecord::new(topic.clone()).value(value(id));
            let d = producer.send(record).await.expect("record accepted");
            let _ = tx.send((id, d));
            id += 1;
            if id.is_multiple_of(20) {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    });
    let a = acked.clone();
    let collector = tokio::spawn(async move {
        let mut ok = HashMap::new();
        let mut failed = 0;
        while let Some((id, d)) = rx.recv().await {
            match d.await {
                Ok(m) => {
                    ok.insert(id, (m.partition, m.offset));
                    a.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    failed += 1;
                    eprintln!("record {id} failed: {e}");
                }
            }
        }
        (ok, failed)
    });
    Load {
        stop,
        acked,
        sender,
        collector,
    }
}

async fn wait_acked(load: &Load, at_least: usize) {
    let deadline = tokio::time::Instant::now() + LONG;
    while load.acked.load(Ordering::Relaxed) < at_least {
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {} of {at_least} records acknowledged in time",
            load.acked.load(Ordering::Relaxed)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hard_killed_leader_is_replaced_from_the_isr_and_rejoins() {
    baton_testkit::init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::builder()
        .brokers(3)
        .data_dir(dir.path())
        .session_timeout(Duration::from_secs(4))
        .start()
        .await
        .expect("cluster starts");
    let client = client(&cluster).await;
    let topic = topic_name("failover");
    Admin::new(&client)
        .create_topics([NewTopic::new(topic.clone(), 1, 3).config("min.insync.replicas", "2")])
        .await
        .expect("topic created");
    let producer = Arc::new(Producer::builder(&client).acks(Acks::All).build());
    let load = start_load(producer.clone(), topic.clone());
    wait_acked(&load, 2_000).await;

    // Hold the followers back so that the leader dies with records only it has
    // (appended, not yet acknowledged): a divergent suffix it must drop later.
    let old = cluster.partition_state(&topic, 0).unwrap().leader;
    let followers: Vec<i32> = cluster
        .node_ids()
        .into_iter()
        .filter(|id| *id != old)
        .collect();
    for f in &followers {
        cluster.node(*f).pause_replication(true);
    }
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state(&topic, 0).unwrap();
            let leo = |n: i32| v.replica(n).unwrap().log_end_offset;
            followers.iter().all(|f| leo(old) > leo(*f) + 100)
        })
        .await
        .expect("the leader runs ahead of its paused followers");
    let before = cluster.partition_state(&topic, 0).unwrap();
    eprintln!("killing leader {old}: {before:?}");
    cluster.node(old).kill();
    for f in &followers {
        cluster.node(*f).pause_replication(false);
    }
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state(&topic, 0).unwrap();
            v.leader >= 0 && v.leader != old
        })
        .await
        .expect("a new leader is elected");
    let after = cluster.partition_state(&topic, 0).unwrap();
    assert!(
        before.isr.contains(&after.leader),
        "new leader {} comes from the ISR {:?}",
        after.leader,
        before.isr
    );
    assert!(
        after.leader_epoch > before.leader_epoch,
        "the leader epoch is bumped"
    );
    cluster.record(format!(
        "node {} elected at epoch {}",
        after.leader, after.leader_epoch
    ));
    let acked_at_election = load.acked.load(Ordering::Relaxed);
    wait_acked(&load, acked_at_election + 2_000).await;

    cluster.node(old).restart().await.expect("restart");
    cluster
        .wait_for(LONG, |c| {
            c.partition_state(&topic, 0).unwrap().isr.contains(&old)
        })
        .await
        .unwrap_or_else(|_| {
            panic!(
                "node {old} rejoins the ISR: {:?}",
                cluster.partition_state(&topic, 0)
            )
        });
    wait_acked(&load, load.acked.load(Ordering::Relaxed) + 1_000).await;

    load.stop.store(true, Ordering::Relaxed);
    load.sender.await.unwrap();
    producer.flush().await;
    drop(producer);
    let (acked, failed) = load.collector.await.unwrap();
    eprintln!("acknowledged {} records, {failed} failed", acked.len());

    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state(&topic, 0).unwrap();
            let leo = v.replica(v.leader).map(|r| r.log_end_offset);
            v.isr.len() == 3
                && v.replica_states
                    .iter()
                    .all(|r| Some(r.log_end_offset) == leo && Some(r.high_watermark) == leo)
        })
        .await
        .unwrap_or_else(|_| {
            panic!(
                "replicas converge: {:?}",
                cluster.partition_state(&topic, 0)
            )
        });
    let v = cluster.partition_state(&topic, 0).unwrap();
    let hw = v.high_watermark().unwrap();
    // The killed leader's epoch-0 suffix past its followers' log ends was
    // overwritten by epoch-1 batches on the new leader (different bytes: at least the
    // leader epoch differs), so identical logs below the HW mean it truncated.
    let reference = cluster.stored_batches(v.leader, &topic, 0, hw).unwrap();
    for r in &v.replicas {
        let log = cluster.stored_batches(*r, &topic, 0, hw).unwrap();
        assert!(
            log == reference,
            "node {r}'s log differs from the leader's below the HW"
        );
    }

    let history = check_history(&client, &topic, 1, &acked, Duration::from_secs(20)).await;
    assert!(history.is_clean(), "{history:?}");
    eprintln!("timeline:\n{}", cluster.timeline_text());
    cluster.shutdown().await;
}
