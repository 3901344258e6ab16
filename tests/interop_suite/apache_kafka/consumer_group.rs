//! Baton's `GroupConsumer` on the consumer rebalance protocol (KIP-848,
//! `GroupProtocol::Consumer`) against Apache Kafka: the scenarios of
//! `baton_testkit::consumer_group` on the shared single node (members joining
//! and leaving with each server assignor, commits, a fenced member, a regular
//! expression subscription, a static member coming back) and on the 3-node
//! cluster (the coordinator node killed).

use baton_testkit::consumer_group as scenario;

use super::{client, create_topic};
use crate::apache_kafka_util::{single_node, three_nodes};
use crate::interop_java_util::mixed_group::{self, Strategy};
use baton_kafka::{Admin, NewTopic};

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
        report.assert_clean(assignor);
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
    report.assert_clean("coordinator killed");
}

/// A member that stops calling `recv` during a rebalance is fenced after its
/// rebalance timeout: its partitions move on, it sees them lost (`on_lost`) when
/// it resumes (before any record of them is returned), rejoins at epoch 0 and
/// gets a share again; no record is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_protocol_fenced_member_loses_its_partitions_and_rejoins() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let client = client().await;
    let topic = create_topic(&client, "ak-k848-fenced", 4).await;
    let report = scenario::fenced_member_loses_its_partitions_and_rejoins(&client, &topic, 4).await;
    eprintln!("Apache Kafka, KIP-848 group, fenced member: {report}");
    assert_eq!((report.lost, report.unexpected), (0, 0), "{report}");
    assert_eq!(
        report.partitions_lost, 4,
        "member 0 lost what it owned: {report}"
    );
}

/// Two members subscribed by a regular expression that Apache Kafka's
/// coordinator evaluates share exactly the two matching topics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_protocol_regex_subscription_gets_the_matching_topics() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let client = client().await;
    let base = baton_testkit::topic_name("ak-k848-re");
    let topics = [format!("{base}-x"), format!("{base}-y")];
    let admin = Admin::new(&client);
    for t in &topics {
        admin.create_topic(t.clone(), 2, 1).await.expect("topic");
    }
    // Not matching: the subscription must not take it.
    create_topic(&client, "ak-k848-other", 2).await;
    let report = scenario::regex_subscription(&client, &format!("{base}-.*"), &topics, 2).await;
    eprintln!("Apache Kafka, KIP-848 group, regex subscription: {report}");
    report.assert_clean("regex");
}

/// A static member closes (epoch -2) and comes back under its instance id: the
/// same partitions, no rebalance of the other member, nothing lost or read twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_protocol_static_member_returns_to_its_partitions() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let client = client().await;
    let topic = create_topic(&client, "ak-k848-static", 4).await;
    let report = scenario::static_member_returns(&client, &topic, 4).await;
    eprintln!("Apache Kafka, KIP-848 group, static member: {report}");
    report.assert_clean("static");
}

/// A KIP-848 group shared by Baton's `GroupConsumer`s and a Java `KafkaConsumer`
/// (`group.protocol=consumer`), each side joining first once: every partition to
/// one member, every record read exactly once, a member's leave taken over at its
/// commits (see `mixed_group::run`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_protocol_group_shared_with_java_consumers() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let client = client().await;
    let bootstrap = kafka.bootstrap().join(",");
    for java_first in [false, true] {
        let summary = mixed_group::run(&client, &bootstrap, Strategy::Consumer, java_first).await;
        eprintln!("Apache Kafka: {summary}");
    }
}
