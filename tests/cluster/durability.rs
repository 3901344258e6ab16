//! Durability in the in-process cluster: `min.insync.replicas` refuses `acks=all`
//! writes when too few replicas are alive, acknowledged data survives, and a node
//! whose log parted from the leader's truncates the divergent suffix when it returns.

use std::time::Duration;

use baton_broker::cluster::TruncationMode;
use baton_broker::Cluster;
use baton_kafka::{Acks, Admin, NewTopic, Producer, ProducerRecord};
use baton_testkit::cluster::{check_history, client, value};
use baton_testkit::topic_name;

use crate::unclean::{produce_all, unclean_pair, UncleanPair};

const LONG: Duration = Duration::from_secs(90);

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
    let mut acked = produce_all(&producer, &topic, 0..1_000).await;

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
    acked.extend(produce_all(&producer, &topic, 1_000..1_100).await);
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
    let builder = Cluster::builder().brokers(2).truncation_mode(mode);
    let UncleanPair {
        mut cluster,
        _dir,
        client: _client,
        topic,
        producer,
        leader: a,
        follower: b,
        mut acked,
    } = unclean_pair(builder, "diverge").await;

    // The follower leaves; the leader writes 50 records only it has (epoch 0).
    cluster.node(b).kill();
    cluster
        .wait_for(LONG, |c| {
            c.partition_state(&topic, 0).unwrap().isr == vec![a]
        })
        .await
        .expect("ISR shrinks to the leader");
    acked.extend(produce_all(&producer, &topic, 100..150).await);
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
    produce_all(&producer, &topic, 200..230).await;
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
