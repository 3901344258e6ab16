//! Group administration (`Admin`: groups, their committed offsets, lag) against
//! the in-process broker: the shared scenario of `baton_testkit::admin_groups` on
//! a single node, and a coordinator failover on a 3-node cluster.

use std::time::Duration;

use baton_kafka::{
    Admin, AdminError, GroupOffsetsQuery, GroupState, OffsetAndMetadata, TopicPartition,
};
use baton_protocol::ErrorCode;
use baton_testkit::admin_groups::{eventually, group_admin_lifecycle};
use baton_testkit::client::{broker_and_client, create_topic};
use baton_testkit::consumer_group::find_coordinator;
use baton_testkit::topic_name;

use crate::group_failover::failover_cluster;

/// A classic and a consumer-protocol group listed, described, refused while live,
/// rewound, shifted, their offsets deleted, and deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_and_offsets_are_administered() {
    baton_testkit::init_tracing();
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "admin-groups", 3).await;
    group_admin_lifecycle(&client, &topic, 3).await;
    broker.shutdown().await;
}

/// A group's offsets, set and partly deleted through the admin API, are read back
/// after its coordinator node is killed: the calls find the new coordinator, and
/// the deletion (a tombstone in `__consumer_offsets`) survives the move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_offsets_survive_a_coordinator_kill() {
    baton_testkit::init_tracing();
    let (mut cluster, client, topic) =
        failover_cluster("baton-admin-groups", "admin-failover", 3).await;
    let admin = Admin::new(&client).with_operation_timeout(Duration::from_secs(60));
    let group = topic_name("admin-failover-group");
    let offsets = (0..3).map(|p| {
        (
            TopicPartition::new(topic.as_str(), p),
            OffsetAndMetadata::new(5 + p as i64).metadata("m"),
        )
    });
    admin
        .alter_consumer_group_offsets(group.as_str(), offsets)
        .await
        .expect("offsets set on an unknown (so empty) group");
    admin
        .delete_consumer_group_offsets(group.as_str(), [TopicPartition::new(topic.as_str(), 0)])
        .await
        .expect("offsets of partition 0 deleted");

    let coordinator = find_coordinator(&client, &group).await;
    println!("coordinator is node {coordinator}; killing it");
    cluster.node(coordinator).kill();

    // The first call after the kill meets a dead coordinator and must move on.
    let found = admin
        .list_consumer_group_offsets([GroupOffsetsQuery::all(group.as_str())])
        .await
        .expect("offsets read from the new coordinator");
    let got: Vec<(i32, i64, String)> = found[0]
        .offsets
        .iter()
        .map(|(tp, o)| (tp.partition, o.offset, o.metadata.clone()))
        .collect();
    assert_eq!(got, vec![(1, 6, "m".into()), (2, 7, "m".into())]);
    let moved = find_coordinator(&client, &group).await;
    assert_ne!(moved, coordinator, "the group moved to a live node");

    let d = admin
        .describe_groups([group.as_str()])
        .await
        .expect("describe");
    assert_eq!(d[0].state, GroupState::Empty, "{d:?}");
    assert_eq!(d[0].coordinator, moved, "{d:?}");
    admin
        .delete_groups([group.as_str()])
        .await
        .expect("deleted after the move");
    eventually("the deleted group's offsets gone", || async {
        match admin.group_offsets(group.as_str()).await {
            Ok(o) if o.is_empty() => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    match admin.delete_groups([group.as_str()]).await {
        Err(AdminError::Groups(f)) => assert_eq!(f[0].code, ErrorCode::GroupIdNotFound),
        other => panic!("expected GROUP_ID_NOT_FOUND, got {other:?}"),
    }
    cluster
        .node(coordinator)
        .restart()
        .await
        .expect("node restarts");
}

/// An OffsetDelete naming more partitions than `max_partitions_per_request` is
/// refused as a whole with POLICY_VIOLATION; within the limit it goes through.
#[tokio::test]
async fn offset_delete_is_bounded_per_request() {
    let mut config = baton_broker::BrokerConfig::in_memory();
    config.limits.max_partitions_per_request = 2;
    let broker = baton_broker::Broker::start(config)
        .await
        .expect("broker starts");
    let client = baton_kafka::Client::builder([broker.bootstrap()])
        .build()
        .await
        .expect("client connects");
    let admin = Admin::new(&client);
    let topic = create_topic(&client, "admin-bounded", 2).await;
    let group = topic_name("admin-bounded-group");
    let offsets = (0..2).map(|p| {
        (
            TopicPartition::new(topic.as_str(), p),
            OffsetAndMetadata::new(1),
        )
    });
    admin
        .alter_consumer_group_offsets(group.as_str(), offsets)
        .await
        .expect("offsets set");
    let three = (0..3).map(|p| TopicPartition::new(topic.as_str(), p));
    match admin
        .delete_consumer_group_offsets(group.as_str(), three)
        .await
    {
        Err(AdminError::Groups(f)) => assert_eq!(f[0].code, ErrorCode::PolicyViolation, "{f:?}"),
        other => panic!("expected POLICY_VIOLATION, got {other:?}"),
    }
    assert_eq!(
        admin
            .group_offsets(group.as_str())
            .await
            .expect("offsets")
            .len(),
        2
    );
    let two = (0..2).map(|p| TopicPartition::new(topic.as_str(), p));
    admin
        .delete_consumer_group_offsets(group.as_str(), two)
        .await
        .expect("within the limit");
    assert!(admin
        .group_offsets(group.as_str())
        .await
        .expect("offsets")
        .is_empty());
    broker.shutdown().await;
}
