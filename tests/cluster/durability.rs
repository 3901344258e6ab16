//! Durability in the in-process cluster: `min.insync.replicas` refuses `acks=all`
//! writes when too few replicas are alive, acknowledged data survives, and a node
//! whose log parted from the leader's truncates the divergent suffix when it returns.

use std::collections::HashMap;
use std::time::Duration;

use baton_broker::cluster::TruncationMode;
use baton_broker::Cluster;
use baton_kafka::{Acks, Admin, NewTopic, Producer, ProducerRecord};
use baton_testkit::cluster::{check_history, client, value};
use baton_testkit::topic_name;

const LONG: Duration = Duration::from_secs(90);

/// Sends `ids` with `producer` and waits for every acknowledgement.
async fn produce_all(
    producer: &Producer,
    topic: &str,
    ids: std::ops::Range<u64>,
    acked: &mut HashMap<u64, (i32, i64)>,
) {
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_of_three_down_refuses_acks_all_and_keeps_acknowledged_data() {
    baton_testkit::init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::builder()
        .brokers(3)
        .data_dir(dir.path())
        .session_timeout(Duration::from_secs(3))
        .start()
        .await
        .expect("cluster starts");
    let client = client(&cluster).await;
    let topic = topic_name("min-isr");
    Admin::new(&client)
        .create_topics([NewTopic::new(topic.clone(), 1, 3).config("min.insync.replicas", "2")])
        .await
        .expect("topic created");
    let producer = Producer::builder(&client).acks(Acks::All).build();
    let mut acked = HashMap::new();
    produce_all(&producer, &topic, 0..1_000, &mut acked).await;

    // Down: the leader and one follower.
    let v = cluster.partition_state(&topic, 0).unwrap();
    let leader = v.leader;
    let follower = *v.replicas.iter().find(|r| **r != leader).unwrap();
    let survivor = *v
        .replicas
        .iter()
        .find(|r| **r != leader && **r != follower)
        .unwrap();
    cluster.node(leader).kill();
    cluster.node(follower).kill();
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state(&topic, 0).unwrap();
            v.leader == survivor && v.isr == vec![survivor]
        })
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{survivor} leads alone: {:?}",
                cluster.partition_state(&topic, 0)
            )
        });

    let strict = Producer::builder(&client)
        .acks(Acks::All)
        .delivery_timeout(Duration::from_secs(3))
        .request_timeout(Duration::from_secs(2))
        .build();
    let d = strict
        .send(ProducerRecord::new(topic.clone()).value(value(1_000_000)))
        .await
        .expect("accepted");
    let err = d
        .await
        .expect_err("acks=all must fail with one replica in sync");
    assert!(
        err.to_string().contains("NotEnoughReplicas"),
        "NOT_ENOUGH_REPLICAS expected, got: {err}"
    );
    strict.close().await;

    cluster.node(leader).restart().await.expect("restart");
    cluster.node(follower).restart().await.expect("restart");
    cluster
        .wait_for(LONG, |c| {
            c.partition_state(&topic, 0).unwrap().isr.len() == 3
        })
        .await
        .unwrap_or_else(|_| panic!("ISR recovers: {:?}", cluster.partition_state(&topic, 0)));
    // Writes work again.
    produce_all(&producer, &topic, 1_000..1_100, &mut acked).await;
    producer.close().await;

    let history = check_history(&client, &topic, 1, &acked, Duration::from_secs(20)).await;
    assert_eq!(history.lost(), 0, "{history:?}");
    assert_eq!(history.corrupted(), 0, "{history:?}");
    assert_eq!(history.duplicated(), 0, "{history:?}");
    eprintln!("timeline:\n{}", cluster.timeline_text());
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn returning_node_truncates_its_divergent_suffix_by_diverging_epoch() {
    divergent_suffix(TruncationMode::FetchDivergingEpoch).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn returning_node_truncates_its_divergent_suffix_by_offsets_for_leader_epoch() {
    divergent_suffix(TruncationMode::OffsetsForLeaderEpoch).await;
}

async fn divergent_suffix(mode: TruncationMode) {
    baton_testkit::init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::builder()
        .brokers(2)
        .data_dir(dir.path())
        .session_timeout(Duration::from_secs(3))
        .truncation_mode(mode)
        .auto_preferred_leader(false)
        .start()
        .await
        .expect("cluster starts");
    let client = client(&cluster).await;
    let topic = topic_name("diverge");
    Admin::new(&client)
        .create_topics([
            NewTopic::new(topic.clone(), 1, 2).config("unclean.leader.election.enable", "true")
        ])
        .await
        .expect("topic created");
    let producer = Producer::builder(&client)
        .acks(Acks::Leader)
        .idempotence(false)
        .build();
    let mut acked = HashMap::new();
    produce_all(&producer, &topic, 0..100, &mut acked).await;
    let v = cluster.partition_state(&topic, 0).unwrap();
    let (a, b) = (
        v.leader,
        *v.replicas.iter().find(|r| **r != v.leader).unwrap(),
    );
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state(&topic, 0).unwrap();
            v.replica(b).unwrap().log_end_offset == 100
        })
        .await
        .expect("follower catches up");

    // The follower leaves; the leader writes 50 records only it has (epoch 0).
    cluster.node(b).kill();
    cluster
        .wait_for(LONG, |c| {
            c.partition_state(&topic, 0).unwrap().isr == vec![a]
        })
        .await
        .expect("ISR shrinks to the leader");
    produce_all(&producer, &topic, 100..150, &mut acked).await;
    let before = cluster.partition_state(&topic, 0).unwrap();
    assert_eq!(before.replica(a).unwrap().log_end_offset, 150);

    // The leader dies; the other node returns and is elected uncleanly (epoch 1), then
    // takes 30 records of its own.
    cluster.node(a).kill();
    cluster.node(b).restart().await.expect("restart");
    cluster
        .wait_for(LONG, |c| c.partition_state(&topic, 0).unwrap().leader == b)
        .await
        .unwrap_or_else(|_| panic!("{b} elected: {:?}", cluster.partition_state(&topic, 0)));
    let mut later = HashMap::new();
    produce_all(&producer, &topic, 200..230, &mut later).await;
    producer.close().await;

    // The old leader returns: its epoch-0 records 100..150 diverge from the new
    // leader's epoch-1 records at 100.., so it truncates to 100 and re-fetches.
    cluster.node(a).restart().await.expect("restart");
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state(&topic, 0).unwrap();
            v.isr.len() == 2
                && v.replica(a).unwrap().log_end_offset == 130
                && v.replica(b).unwrap().log_end_offset == 130
        })
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{a} truncates and rejoins: {:?}",
                cluster.partition_state(&topic, 0)
            )
        });
    let reference = cluster.stored_batches(b, &topic, 0, 130).unwrap();
    assert!(cluster.stored_batches(a, &topic, 0, 130).unwrap() == reference);
    eprintln!("timeline:\n{}", cluster.timeline_text());
    cluster.shutdown().await;
}
