//! Baton's `Admin::elect_leaders`, `alter_partition_reassignments` and
//! `list_partition_reassignments` against Apache Kafka: on the single node what
//! one broker allows (no election needed, nothing to list, Kafka's refusals of
//! bad reassignments), and on the 3-node cluster a reassignment that moves a
//! replica to another broker, then a preferred election that makes the new
//! first replica lead.

use std::time::Duration;

use baton_kafka::{Admin, AdminError, Client, ElectionType, NewTopic, Reassignment};
use baton_protocol::ErrorCode;
use baton_testkit::client::produce_values;
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
