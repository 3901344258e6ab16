//! Failover in the in-process cluster: a hard-killed leader is replaced from the ISR
//! while Baton's producer keeps going, and the killed node comes back, truncates
//! whatever it alone had, and rejoins the ISR.

use std::sync::Arc;
use std::time::Duration;

use baton_broker::Cluster;
use baton_kafka::{Acks, Admin, NewTopic, Producer};
use baton_testkit::cluster::{check_history, client, Load};

use baton_testkit::topic_name;

const LONG: Duration = Duration::from_secs(90);

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
    let load = Load::start(producer.clone(), topic.clone());
    load.wait_acked(2_000, LONG).await;

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
    let acked_at_election = load.acked();
    load.wait_acked(acked_at_election + 2_000, LONG).await;

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
    load.wait_acked(load.acked() + 1_000, LONG).await;

    let (acked, failed) = load.finish(producer).await;
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

/// A hard-killed leader's batches go to the new leader as soon as it is elected,
/// not after their retry backoff: the producer polls metadata while the leader
/// is unreachable and retries once a newer leader epoch shows up. The backoff is
/// set far longer (at least 48 s with jitter) than the test lets the records take
/// after the election, so a producer that waited it out fails here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_is_used_without_waiting_out_the_retry_backoff() {
    baton_testkit::init_tracing();
    let mut cluster = Cluster::builder()
        .brokers(3)
        .session_timeout(Duration::from_secs(2))
        .start()
        .await
        .expect("cluster starts");
    let client = client(&cluster).await;
    let topic = topic_name("hard-kill-backoff");
    Admin::new(&client)
        .create_topics([NewTopic::new(topic.clone(), 1, 3).config("min.insync.replicas", "2")])
        .await
        .expect("topic created");
    let producer = Arc::new(
        Producer::builder(&client)
            .acks(Acks::All)
            .retry_backoff(Duration::from_secs(60))
            .retry_backoff_max(Duration::from_secs(120))
            .delivery_timeout(Duration::from_secs(600))
            .build(),
    );
    let load = Load::start(producer.clone(), topic.clone());
    load.wait_acked(1_000, LONG).await;

    let old = cluster.partition_state(&topic, 0).unwrap();
    eprintln!("killing leader {}: {old:?}", old.leader);
    cluster.node(old.leader).kill();
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state(&topic, 0).unwrap();
            v.leader >= 0 && v.leader != old.leader
        })
        .await
        .expect("a new leader is elected");
    let new = cluster.partition_state(&topic, 0).unwrap();
    assert!(
        new.leader_epoch > old.leader_epoch,
        "the leader epoch is bumped"
    );
    cluster.record(format!(
        "node {} elected at epoch {}",
        new.leader, new.leader_epoch
    ));
    // Every batch that was out when the leader died failed and waits out a backoff
    // of 48 s or more; the records still arrive well before that.
    let at_election = load.acked();
    load.wait_acked(at_election + 1_000, Duration::from_secs(20))
        .await;

    let (acked, failed) = load.finish(producer).await;
    assert_eq!(failed, 0, "no record fails");
    let mut by_offset: Vec<(i64, u64)> = acked.iter().map(|(id, (_, o))| (*o, *id)).collect();
    by_offset.sort_unstable();
    assert!(
        by_offset.windows(2).all(|w| w[0].1 < w[1].1),
        "records are stored in send order"
    );
    let history = check_history(&client, &topic, 1, &acked, Duration::from_secs(20)).await;
    assert!(history.is_clean(), "{history:?}");
    eprintln!("timeline:\n{}", cluster.timeline_text());
    cluster.shutdown().await;
}
