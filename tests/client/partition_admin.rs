//! `Admin::elect_leaders`, `alter_partition_reassignments` and
//! `list_partition_reassignments` against a single baton-broker node: what one
//! broker allows, answered as a one-node Apache Kafka answers (the same checks
//! run against it in `interop_suite::apache_kafka::partition_admin`). The
//! cluster behaviour is in `tests/cluster/reassign.rs`.

use baton_kafka::{Admin, AdminError, ElectionType, Reassignment};
use baton_protocol::ErrorCode;
use baton_testkit::client::broker_and_client;
use baton_testkit::topic_name;

fn partition_error(err: AdminError) -> ErrorCode {
    match err {
        AdminError::Partitions(p) if p.len() == 1 => p[0].code,
        other => panic!("expected one partition error, got {other:?}"),
    }
}

#[tokio::test]
async fn single_node_elections_and_reassignments_answer_as_kafka() {
    let (broker, client) = broker_and_client().await;
    let admin = Admin::new(&client);
    let topic = topic_name("elect");
    admin.create_topic(topic.clone(), 1, 1).await.unwrap();
    let me = 0;
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
    assert!(all.is_empty(), "nothing to elect on one node: {all:?}");

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
    for target in [vec![], vec![me, me], vec![me, 99]] {
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
        .alter_partition_reassignments([Reassignment::to(topic_name("none"), 0, vec![me])])
        .await
        .unwrap_err();
    assert_eq!(partition_error(err), ErrorCode::UnknownTopicOrPartition);
    admin
        .alter_partition_reassignments([Reassignment::to(topic.clone(), 0, vec![me])])
        .await
        .expect("the current assignment is accepted");
    broker.shutdown().await;
}
