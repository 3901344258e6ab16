//! Baton's `GroupConsumer` on the consumer rebalance protocol (KIP-848,
//! `GroupProtocol::Consumer`) against Apache Kafka: the scenarios of
//! `baton_testkit::consumer_group` on the shared single node (members joining
//! and leaving with each server assignor, commits) and on the 3-node cluster (the
//! coordinator node killed).

use baton_testkit::consumer_group as scenario;

use super::{client, create_topic};
use crate::apache_kafka_util::{single_node, three_nodes};
use baton::{Admin, NewTopic};

/// Members join one by one and one leaves, with the `uniform` and the `range`
/// assignor: no partition owned twice or lost, no record lost or read twice, and a
/// later member resumes at the commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_protocol_members_join_and_leave_without_loss_or_double_ownership() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let client = client().await;
    for assignor in ["uniform", "range"] {
        let topic = create_topic(&client, "ak-k848", 6).await;
        let report = scenario::members_join_and_leave(&client, &topic, 6, Some(assignor)).await;
        eprintln!("Apache Kafka, KIP-848 group, {assignor} assignor: {report}");
        assert_eq!(
            (
                report.lost,
                report.duplicated,
                report.unexpected,
                report.partitions_lost
            ),
            (0, 0, 0, 0),
            "{assignor}: {report}"
        );
        assert!(report.owned_twice.is_empty(), "{assignor}: {report:?}");
        assert!(
            report.revoked > 0,
            "{assignor}: rebalances happened: {report}"
        );
    }
}

/// The group coordinator's node of the 3-node cluster is SIGKILLed while two
/// members consume: they find the new coordinator and keep their membership and
/// partitions (no rebalance, nothing lost), and every record is read once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_protocol_members_keep_membership_when_the_coordinator_node_is_killed() {
    let kafka = three_nodes().await;
    let _logs = kafka.logs_on_failure();
    let client = kafka.client().await;
    let topic = baton_testkit::topic_name("ak-k848-failover");
    Admin::new(&client)
        .create_topics([NewTopic::new(topic.clone(), 4, 3).config("min.insync.replicas", "2")])
        .await
        .expect("topic created");
    kafka.wait_fully_replicated(&client).await.unwrap();
    let (report, killed) = scenario::coordinator_failover(&client, &topic, 4, |node| {
        kafka.kill(node);
        eprintln!("coordinator node {node} killed");
        std::future::ready(())
    })
    .await;
    kafka.restart(killed);
    kafka.wait_brokers(3).await.unwrap();
    kafka.wait_fully_replicated(&client).await.unwrap();
    eprintln!("Apache Kafka, KIP-848 group, coordinator {killed} killed: {report}");
    assert_eq!(
        (
            report.lost,
            report.duplicated,
            report.unexpected,
            report.partitions_lost
        ),
        (0, 0, 0, 0),
        "{report}"
    );
    assert!(report.owned_twice.is_empty(), "{report:?}");
}
