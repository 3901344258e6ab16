//! Baton's `Admin::elect_leaders`, `alter_partition_reassignments` and
//! `list_partition_reassignments` against Apache Kafka: on the single node what
//! one broker allows (no election needed, nothing to list, Kafka's refusals of
//! bad reassignments), and on the 3-node cluster a reassignment that moves a
//! replica to another broker, then a preferred election that makes the new
//! first replica lead; an unclean election of an out-of-sync replica once the
//! only in-sync one died; a reassignment onto a stopped broker, listed while it
//! cannot complete, then cancelled.

use std::time::Duration;

use baton_kafka::metadata::PartitionMetadata;
use baton_kafka::{
    Admin, AdminError, Client, ElectionType, NewTopic, Producer, ProducerRecord, Reassignment,
};
use baton_protocol::ErrorCode;
use baton_testkit::client::{consume_from_start, produce_values};
use baton_testkit::topic_name;

use super::{client, create_topic};
use crate::apache_kafka_util::{single_node, three_nodes};

fn partition_error(err: AdminError) -> ErrorCode {
    match err {
        AdminError::Partitions(p) if p.len() == 1 => p[0].code,
        other => panic!("expected one partition error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_node_elections_and_reassignments_answer_as_kafka() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let client = client().await;
    let admin = Admin::new(&client);
    let topic = create_topic(&client, "ak-elect", 1).await;
    let me = kafka.node_ids()[0];
    let tp = vec![(topic.clone(), 0)];

    for election in [ElectionType::Preferred, ElectionType::Unclean] {
        let r = admin
            .elect_leaders(election, Some(tp.clone()))
            .await
            .unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].code, ErrorCode::ElectionNotNeeded, "{election:?}");
    }
    let r = admin
        .elect_leaders(ElectionType::Preferred, Some(vec![(topic.clone(), 9)]))
        .await
        .unwrap();
    assert_eq!(r[0].code, ErrorCode::UnknownTopicOrPartition);
    let all = admin
        .elect_leaders(ElectionType::Preferred, None)
        .await
        .unwrap();
    assert!(
        all.iter().all(|r| r.code != ErrorCode::None),
        "nothing to elect on one node: {all:?}"
    );

    assert!(admin
        .list_partition_reassignments(None)
        .await
        .unwrap()
        .is_empty());
    assert!(admin
        .list_partition_reassignments(Some(tp.clone()))
        .await
        .unwrap()
        .is_empty());
    let refused = [vec![], vec![me, me], vec![me, 99]];
    for target in refused {
        let err = admin
            .alter_partition_reassignments([Reassignment::to(topic.clone(), 0, target.clone())])
            .await
            .unwrap_err();
        assert_eq!(
            partition_error(err),
            ErrorCode::InvalidReplicaAssignment,
            "{target:?}"
        );
    }
    let err = admin
        .alter_partition_reassignments([Reassignment::cancel(topic.clone(), 0)])
        .await
        .unwrap_err();
    assert_eq!(partition_error(err), ErrorCode::NoReassignmentInProgress);
    let err = admin
        .alter_partition_reassignments([Reassignment::to(topic_name("ak-none"), 0, vec![me])])
        .await
        .unwrap_err();
    assert_eq!(partition_error(err), ErrorCode::UnknownTopicOrPartition);
    // The replicas in place: accepted, nothing moves.
    admin
        .alter_partition_reassignments([Reassignment::to(topic.clone(), 0, vec![me])])
        .await
        .expect("the current assignment is accepted");
}

/// Polls metadata until partition 0 of `topic` has `replicas` (as a set) and
/// `leader` (if given).
async fn wait_partition(client: &Client, topic: &str, replicas: &[i32], leader: Option<i32>) {
    let mut want = replicas.to_vec();
    want.sort_unstable();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let meta = client.refresh_metadata().await.expect("metadata");
        let p = meta.topic(topic).and_then(|t| t.partition(0)).cloned();
        if let Some(p) = &p {
            let mut got = p.replicas.clone();
            got.sort_unstable();
            let isr_full = p.isr.len() == want.len();
            if got == want && isr_full && leader.is_none_or(|l| p.leader == Some(l)) {
                return;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{topic}/0 never reached replicas {want:?} leader {leader:?}: {p:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_reassignment_moves_a_replica_then_preferred_election_moves_the_leader() {
    let kafka = three_nodes().await;
    let _logs = kafka.logs_on_failure();
    let client = kafka.client().await;
    let admin = Admin::new(&client).with_operation_timeout(Duration::from_secs(60));
    let topic = topic_name("ak-reassign");
    admin
        .create_topics([NewTopic::new(topic.clone(), 1, 2)])
        .await
        .expect("topic created");
    kafka.wait_fully_replicated(&client).await.unwrap();
    produce_values(&client, &topic, 0, 50).await;
    let meta = client.refresh_metadata().await.unwrap();
    let p = meta.topic(&topic).unwrap().partitions[0].clone();
    let leader = p.leader.expect("a leader");
    let third = *kafka
        .node_ids()
        .iter()
        .find(|n| !p.replicas.contains(n))
        .unwrap();

    // {leader, other} -> [third, leader]: the other replica leaves, `third`
    // copies the log.
    admin
        .alter_partition_reassignments([Reassignment::to(topic.clone(), 0, vec![third, leader])])
        .await
        .expect("reassignment accepted");
    wait_partition(&client, &topic, &[third, leader], None).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !admin
        .list_partition_reassignments(None)
        .await
        .unwrap()
        .is_empty()
    {
        assert!(tokio::time::Instant::now() < deadline, "still reassigning");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // `third` is first now: a preferred election makes it lead.
    let r = admin
        .elect_leaders(ElectionType::Preferred, Some(vec![(topic.clone(), 0)]))
        .await
        .unwrap();
    assert!(
        matches!(r[0].code, ErrorCode::None | ErrorCode::ElectionNotNeeded),
        "{r:?}"
    );
    wait_partition(&client, &topic, &[third, leader], Some(third)).await;
    let r = admin
        .elect_leaders(ElectionType::Preferred, Some(vec![(topic.clone(), 0)]))
        .await
        .unwrap();
    assert_eq!(r[0].code, ErrorCode::ElectionNotNeeded);
    Admin::new(&client)
        .delete_topics([topic.clone()])
        .await
        .expect("topic deleted");
}

/// Polls metadata until partition `partition` of `topic` satisfies `ok`; returns it.
async fn wait_until(
    client: &Client,
    topic: &str,
    partition: i32,
    what: &str,
    ok: impl Fn(&PartitionMetadata, &[i32]) -> bool,
) -> PartitionMetadata {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    loop {
        let (p, brokers) = match client.refresh_metadata().await {
            Ok(meta) => (
                meta.topic(topic)
                    .and_then(|t| t.partition(partition))
                    .cloned(),
                meta.brokers.keys().copied().collect::<Vec<_>>(),
            ),
            Err(_) => (None, Vec::new()),
        };
        if let Some(p) = &p {
            if ok(p, &brokers) {
                return p.clone();
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{topic}/{partition}: never {what}: {p:?}, brokers {brokers:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Produces values `{prefix}0`, `{prefix}1`, ... to partition 0 of `topic`
/// (idempotent, acks=all) and waits until each is delivered.
async fn produce_prefixed(client: &Client, topic: &str, prefix: &str, n: usize) {
    let producer = Producer::builder(client).build();
    for i in 0..n {
        let record = ProducerRecord::new(topic.to_owned())
            .partition(0)
            .value(format!("{prefix}{i}"));
        let delivery = producer.send(record).await.expect("accepted");
        delivery.await.expect("delivered");
    }
    producer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_unclean_election_elects_an_out_of_sync_replica_after_the_in_sync_one_died() {
    let kafka = three_nodes().await;
    let _logs = kafka.logs_on_failure();
    let client = kafka.client().await;
    let admin = Admin::new(&client).with_operation_timeout(Duration::from_secs(60));
    let topic = topic_name("ak-unclean");
    // One replica per node: the one on the dying node has nobody to take over.
    let orphans = topic_name("ak-orphans");
    admin
        .create_topics([
            NewTopic::new(topic.clone(), 1, 2),
            NewTopic::new(orphans.clone(), 3, 1),
        ])
        .await
        .expect("topics created");
    kafka.wait_fully_replicated(&client).await.unwrap();
    let tp = vec![(topic.clone(), 0)];
    let meta = client.refresh_metadata().await.unwrap();
    let p = meta.topic(&topic).unwrap().partitions[0].clone();
    let leader = p.leader.expect("a leader");
    assert_eq!(p.replicas[0], leader, "the preferred replica leads: {p:?}");
    let follower = *p.replicas.iter().find(|r| **r != leader).unwrap();
    let orphan = meta
        .topic(&orphans)
        .unwrap()
        .partitions
        .iter()
        .find(|p| p.replicas == [leader])
        .unwrap_or_else(|| panic!("no partition of {orphans} on {leader}: {meta:?}"))
        .partition;
    produce_prefixed(&client, &topic, "both-", 10).await;
    let r = admin
        .elect_leaders(ElectionType::Unclean, Some(tp.clone()))
        .await
        .unwrap();
    assert_eq!(r[0].code, ErrorCode::ElectionNotNeeded, "it has a leader");

    // The follower leaves; the leader alone takes more, then dies. (With the
    // follower down too, the controllers have no quorum until it returns.)
    kafka.stop(follower);
    wait_until(&client, &topic, 0, "shrank to the leader", |p, _| {
        p.isr == [leader]
    })
    .await;
    produce_prefixed(&client, &topic, "leader-only-", 10).await;
    kafka.kill(leader);
    kafka.restart(follower);
    let p = wait_until(
        &client,
        &topic,
        0,
        "offline with the follower up",
        |p, b| p.leader.is_none() && b.contains(&follower) && !b.contains(&leader),
    )
    .await;
    // KIP-966 (eligible leader replicas, on for new clusters since 4.1): the dead leader left
    // the ISR for the ELR, which Metadata does not show.
    assert!(p.isr.is_empty(), "{p:?}");

    let r = admin
        .elect_leaders(ElectionType::Preferred, Some(tp.clone()))
        .await
        .unwrap();
    assert_eq!(r[0].code, ErrorCode::PreferredLeaderNotAvailable, "{r:?}");
    let r = admin
        .elect_leaders(ElectionType::Unclean, Some(vec![(orphans.clone(), orphan)]))
        .await
        .unwrap();
    assert_eq!(r[0].code, ErrorCode::EligibleLeadersNotAvailable, "{r:?}");
    let r = admin
        .elect_leaders(ElectionType::Unclean, Some(tp.clone()))
        .await
        .unwrap();
    assert_eq!(r[0].code, ErrorCode::None, "{r:?}");
    let p = wait_until(&client, &topic, 0, "led by the follower", |p, _| {
        p.leader == Some(follower)
    })
    .await;
    assert_eq!(p.isr, [follower]);
    let r = admin
        .elect_leaders(ElectionType::Unclean, Some(tp.clone()))
        .await
        .unwrap();
    assert_eq!(r[0].code, ErrorCode::ElectionNotNeeded, "{r:?}");

    // It serves again, with what the follower had: the leader-only records are lost.
    produce_prefixed(&client, &topic, "after-", 5).await;
    let records = consume_from_start(&client, &topic, 1, 15, 0).await;
    let got: Vec<(i64, String)> = records
        .iter()
        .map(|r| {
            let value = r.value.as_deref().unwrap_or_default();
            (r.offset, String::from_utf8_lossy(value).into_owned())
        })
        .collect();
    let want: Vec<(i64, String)> = (0..10)
        .map(|i| format!("both-{i}"))
        .chain((0..5).map(|i| format!("after-{i}")))
        .enumerate()
        .map(|(o, v)| (o as i64, v))
        .collect();
    assert_eq!(got, want);

    // The old leader returns, truncates and follows.
    kafka.restart(leader);
    kafka.wait_brokers(3).await.unwrap();
    kafka.wait_fully_replicated(&client).await.unwrap();
    Admin::new(&client)
        .delete_topics([topic.clone(), orphans.clone()])
        .await
        .expect("topics deleted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_reassignment_onto_a_stopped_broker_is_listed_then_cancelled() {
    let kafka = three_nodes().await;
    let _logs = kafka.logs_on_failure();
    let client = kafka.client().await;
    let admin = Admin::new(&client).with_operation_timeout(Duration::from_secs(60));
    let topic = topic_name("ak-cancel");
    admin
        .create_topics([NewTopic::new(topic.clone(), 1, 2)])
        .await
        .expect("topic created");
    kafka.wait_fully_replicated(&client).await.unwrap();
    produce_values(&client, &topic, 0, 20).await;
    let meta = client.refresh_metadata().await.unwrap();
    let before = meta.topic(&topic).unwrap().partitions[0].clone();
    let leader = before.leader.expect("a leader");
    let other = *before.replicas.iter().find(|r| **r != leader).unwrap();
    let third = *kafka
        .node_ids()
        .iter()
        .find(|n| !before.replicas.contains(n))
        .unwrap();

    // {leader, other} -> [third, leader] while `third` is down: it never
    // catches up, so the reassignment stays in progress.
    kafka.stop(third);
    wait_until(
        &client,
        &topic,
        0,
        "seen without the stopped node",
        |_, b| !b.contains(&third),
    )
    .await;
    admin
        .alter_partition_reassignments([Reassignment::to(topic.clone(), 0, vec![third, leader])])
        .await
        .expect("reassignment onto a registered, stopped broker accepted");
    let listed = admin.list_partition_reassignments(None).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    let ongoing = &listed[0];
    assert_eq!(
        (ongoing.topic.as_str(), ongoing.partition),
        (topic.as_str(), 0)
    );
    let mut replicas = ongoing.replicas.clone();
    replicas.sort_unstable();
    let mut all = vec![leader, other, third];
    all.sort_unstable();
    assert_eq!(replicas, all, "the union while adding: {ongoing:?}");
    assert_eq!(ongoing.adding_replicas, [third], "{ongoing:?}");
    assert_eq!(ongoing.removing_replicas, [other], "{ongoing:?}");
    wait_until(&client, &topic, 0, "listing the union", |p, _| {
        p.replicas.len() == 3 && p.leader == Some(leader)
    })
    .await;
    let by_partition = admin
        .list_partition_reassignments(Some(vec![(topic.clone(), 0)]))
        .await
        .unwrap();
    assert_eq!(by_partition, listed);

    admin
        .alter_partition_reassignments([Reassignment::cancel(topic.clone(), 0)])
        .await
        .expect("reassignment cancelled");
    assert!(admin
        .list_partition_reassignments(None)
        .await
        .unwrap()
        .is_empty());
    wait_partition(&client, &topic, &before.replicas, Some(leader)).await;
    let err = admin
        .alter_partition_reassignments([Reassignment::cancel(topic.clone(), 0)])
        .await
        .unwrap_err();
    assert_eq!(partition_error(err), ErrorCode::NoReassignmentInProgress);

    kafka.restart(third);
    kafka.wait_brokers(3).await.unwrap();
    kafka.wait_fully_replicated(&client).await.unwrap();
    Admin::new(&client)
        .delete_topics([topic.clone()])
        .await
        .expect("topic deleted");
}
