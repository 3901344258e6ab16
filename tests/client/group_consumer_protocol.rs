//! Baton's `GroupConsumer` on the consumer rebalance protocol (KIP-848,
//! `GroupProtocol::Consumer`) against baton-broker: the scenarios of
//! `baton_testkit::consumer_group` (the same ones run against Apache Kafka in
//! `tests/interop_suite/apache_kafka/consumer_group.rs`) on one broker, and the
//! coordinator node killed in a 3-node `Cluster`; a mixed group of classic and
//! consumer-protocol members through a coordinator failover; a broker without
//! ConsumerGroupHeartbeat.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use baton_broker::{Broker, BrokerConfig, BrokerHandle};
use baton_kafka::connection::ConnectionError;
use baton_kafka::{Admin, Client, ClientError, GroupConsumer, GroupError, GroupProtocol, Producer};
use baton_protocol::messages::{
    ApiVersionsRequest, ConsumerGroupHeartbeatRequest, FindCoordinatorRequest,
};
use baton_protocol::ErrorCode;
use baton_protocol::Message;
use baton_testkit::client::create_topic;
use baton_testkit::consumer_group as scenario;
use baton_testkit::proxy::{rewrite_response, Proxied, ProxyState};
use baton_testkit::topic_name;

use super::group_failover::failover_cluster;

/// An in-memory broker whose consumer groups heartbeat every 500 ms (Kafka's
/// default, 5 s, would only slow the scenarios down), and a client on it.
async fn broker_and_client() -> (BrokerHandle, Client) {
    let mut config = BrokerConfig::in_memory();
    config.groups.consumer_heartbeat_interval_ms = 500;
    config.groups.consumer_session_timeout_ms = 10_000;
    let broker = Broker::start(config).await.expect("broker starts");
    let client = Client::builder([broker.bootstrap()])
        .client_id("baton-k848-tests")
        .build()
        .await
        .expect("client connects");
    (broker, client)
}

/// Members join one by one and one leaves, with the `uniform` and the `range`
/// assignor: no partition owned twice or lost, no record lost or read twice, and a
/// later member resumes at the commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_protocol_members_join_and_leave_without_loss_or_double_ownership() {
    baton_testkit::init_tracing();
    let (_broker, client) = broker_and_client().await;
    for assignor in ["uniform", "range"] {
        let topic = create_topic(&client, "k848", 6).await;
        let report = scenario::members_join_and_leave(&client, &topic, 6, Some(assignor)).await;
        eprintln!("baton-broker, KIP-848 group, {assignor} assignor: {report}");
        report.assert_clean(assignor);
        assert!(
            report.revoked > 0,
            "{assignor}: rebalances happened: {report}"
        );
    }
}

/// A member that stops calling `recv` during a rebalance is fenced after its
/// rebalance timeout, sees its partitions lost before returning any further
/// record of them, rejoins at epoch 0 and gets a share again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_protocol_fenced_member_loses_its_partitions_and_rejoins() {
    baton_testkit::init_tracing();
    let (_broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "k848-fenced", 4).await;
    let report = scenario::fenced_member_loses_its_partitions_and_rejoins(&client, &topic, 4).await;
    eprintln!("baton-broker, KIP-848 group, fenced member: {report}");
    assert_eq!((report.lost, report.unexpected), (0, 0), "{report}");
    assert_eq!(
        report.partitions_lost, 4,
        "member 0 lost all it owned: {report}"
    );
    assert!(report.duplicated <= 60, "{report}");
}

/// Two members subscribed by a regular expression share exactly the matching
/// topics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_protocol_regex_subscription_gets_the_matching_topics() {
    baton_testkit::init_tracing();
    let (_broker, client) = broker_and_client().await;
    let base = topic_name("k848-re");
    let topics = [format!("{base}-x"), format!("{base}-y")];
    let admin = Admin::new(&client);
    for t in &topics {
        admin.create_topic(t.clone(), 2, 1).await.expect("topic");
    }
    create_topic(&client, "k848-other", 2).await;
    let report = scenario::regex_subscription(&client, &format!("{base}-.*"), &topics, 2).await;
    eprintln!("baton-broker, KIP-848 group, regex subscription: {report}");
    report.assert_clean("regex");
}

/// A static member closes (epoch -2) and comes back under its instance id: the
/// same partitions, no rebalance of the other member.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_protocol_static_member_returns_to_its_partitions() {
    baton_testkit::init_tracing();
    let (_broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "k848-static", 4).await;
    let report = scenario::static_member_returns(&client, &topic, 4).await;
    eprintln!("baton-broker, KIP-848 group, static member: {report}");
    report.assert_clean("static");
}

/// The coordinator node of a 3-node cluster is hard-killed while two members
/// consume: they find the new coordinator and keep membership and partitions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_protocol_members_keep_membership_when_the_coordinator_node_is_killed() {
    baton_testkit::init_tracing();
    let (mut cluster, client, topic) =
        failover_cluster("baton-k848-failover", "k848-failover", 4).await;
    let (report, killed) = scenario::coordinator_failover(&client, &topic, 4, |node| {
        cluster.node(node).kill();
        std::future::ready(())
    })
    .await;
    eprintln!("baton-broker cluster, KIP-848 group, coordinator {killed} killed: {report}");
    report.assert_clean("failover");
}

/// KIP-848's mixed groups: Baton members of both protocols (classic and
/// `GroupProtocol::Consumer`) in one group on a 3-node cluster, while members
/// join and leave (the classic group upgrades to a consumer group and later
/// downgrades back) and the coordinator's node is hard-killed. After every
/// step each partition has exactly one owner among the expected members, both
/// protocols own partitions; no partition is owned twice or lost, no record lost
/// or read twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_rebalance_with_members_of_both_protocols_through_a_coordinator_failover() {
    baton_testkit::init_tracing();
    let groups = baton_broker::group::GroupConfig {
        consumer_heartbeat_interval_ms: 500,
        consumer_session_timeout_ms: 10_000,
        ..Default::default()
    };
    let mut cluster = baton_broker::Cluster::builder()
        .brokers(3)
        .in_memory()
        .session_timeout(Duration::from_secs(2))
        .groups(groups)
        .start()
        .await
        .expect("cluster starts");
    let client = Client::builder(cluster.bootstrap_servers())
        .client_id("baton-k848-mixed")
        .request_timeout(Duration::from_secs(10))
        .build()
        .await
        .expect("client connects");
    let topic = topic_name("k848-mixed");
    Admin::new(&client)
        .create_topics([
            baton_kafka::NewTopic::new(topic.clone(), 6, 3).config("min.insync.replicas", "2")
        ])
        .await
        .expect("topic created");
    let (report, killed) = scenario::mixed_protocols_through_failover(&client, &topic, 6, |node| {
        cluster.node(node).kill();
        std::future::ready(())
    })
    .await;
    eprintln!("baton-broker cluster, mixed classic and KIP-848 group, coordinator {killed} killed: {report}");
    report.assert_clean("mixed group");
    assert!(report.revoked > 0, "rebalances happened: {report}");
}

/// A broker that does not offer ConsumerGroupHeartbeat (the proxy removes it
/// from ApiVersions, as a Kafka 3.x broker without the new protocol enabled
/// would): the membership ends at once with a typed error naming the API, rather
/// than retrying forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_without_consumer_group_heartbeat_ends_the_membership_with_a_typed_error() {
    let setup = Proxied::start(
        "baton-k848-unsupported",
        ProxyState {
            rewrite: Some(Box::new(|ex, frame| {
                if ex.api_key != ApiVersionsRequest::API_KEY {
                    return frame;
                }
                rewrite_response::<ApiVersionsRequest>(&frame, ex.version, |resp| {
                    resp.api_keys
                        .retain(|k| k.api_key != ConsumerGroupHeartbeatRequest::API_KEY);
                })
            })),
            ..ProxyState::default()
        },
    )
    .await;
    let topic = create_topic(&setup.client, "k848-unsupported", 1).await;
    let mut consumer = GroupConsumer::builder(&setup.client, topic_name("k848-unsupported"))
        .group_protocol(GroupProtocol::Consumer)
        .subscribe([topic])
        .build()
        .await
        .expect("builds");
    let err = tokio::time::timeout(Duration::from_secs(20), consumer.recv())
        .await
        .expect("the error comes at once")
        .expect_err("no membership without ConsumerGroupHeartbeat");
    assert!(
        matches!(
            err,
            GroupError::Client(ClientError::Connection(ConnectionError::UnsupportedApi {
                api_key: 68,
                ..
            }))
        ),
        "{err:?}"
    );
    drop(consumer);
    setup.shutdown().await;
}

/// A broker behind the proxy whose next `n` heartbeat responses (`n` stored in
/// the returned counter) become NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE,
/// alternately, after the broker processed the heartbeat.
async fn proxied_with_heartbeat_errors(client_id: &str) -> (Proxied, Arc<AtomicUsize>) {
    let inject = Arc::new(AtomicUsize::new(0));
    let injecting = inject.clone();
    let config = ProxyState {
        rewrite: Some(Box::new(move |ex, frame| {
            if ex.api_key != ConsumerGroupHeartbeatRequest::API_KEY {
                return frame;
            }
            let Ok(left) =
                injecting.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            else {
                return frame;
            };
            let code = if left.is_multiple_of(2) {
                ErrorCode::NotCoordinator
            } else {
                ErrorCode::CoordinatorNotAvailable
            };
            rewrite_response::<ConsumerGroupHeartbeatRequest>(&frame, ex.version, |resp| {
                resp.error_code = code.code();
                resp.assignment = None;
            })
        })),
        ..ProxyState::default()
    };
    (Proxied::start(client_id, config).await, inject)
}

/// The coordinator answers NOT_COORDINATOR, then COORDINATOR_NOT_AVAILABLE, to
/// heartbeats of a settled group (the proxy rewrites the responses): the members
/// look the coordinator up again and keep their membership, epoch and partitions
/// (no rebalance, nothing lost), as Kafka's consumer does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coordinator_errors_on_heartbeats_keep_the_membership() {
    let (setup, inject) = proxied_with_heartbeat_errors("baton-k848-coordinator-errors").await;
    let client = setup.client.clone();
    let topic = create_topic(&client, "k848-coord-errors", 4).await;
    let group = topic_name("k848-coord-errors");
    let history = Arc::new(scenario::History::default());
    let m0 = scenario::Member::start(
        scenario::member_builder(&client, &group, &topic),
        0,
        &history,
    )
    .await;
    let m1 = scenario::Member::start(
        scenario::member_builder(&client, &group, &topic),
        1,
        &history,
    )
    .await;
    let producer = Producer::builder(&client).build();
    let mut expected = BTreeMap::new();
    scenario::produce(&producer, &topic, 4, 40, &mut expected).await;
    let within = Duration::from_secs(60);
    scenario::wait_until(&history, within, "two members settled, 40 read", |h| {
        let owners = h.owners();
        h.distinct() >= 40 && owners.len() == 2 && owners.values().all(|o| o.len() == 2)
    })
    .await;
    let owners = history.owners();
    let revoked = history.revoked();
    let lookups = |setup: &Proxied| {
        setup
            .state
            .lock()
            .unwrap()
            .api_keys
            .iter()
            .filter(|&&k| k == FindCoordinatorRequest::API_KEY)
            .count()
    };
    let lookups_before = lookups(&setup);
    inject.store(6, Ordering::SeqCst);
    scenario::wait_until(&history, within, "the injected errors answered", |_| {
        inject.load(Ordering::SeqCst) == 0
    })
    .await;
    scenario::produce(&producer, &topic, 4, 40, &mut expected).await;
    producer.close().await;
    scenario::wait_until(&history, within, "80 read", |h| h.distinct() >= 80).await;
    // A few more heartbeats on the coordinator found again.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        lookups(&setup) > lookups_before,
        "the members looked the coordinator up again"
    );
    assert_eq!(history.owners(), owners, "the same partitions throughout");
    assert_eq!(history.revoked(), revoked, "no rebalance");
    m0.stop().await;
    m1.stop().await;
    let report = history.check(&expected);
    report.assert_clean("coordinator errors");
    setup.shutdown().await;
}

/// A member joins while the coordinator's answers to heartbeats are lost (turned
/// into coordinator errors after the broker processed them), among them those
/// that carried new epochs and assignments: the members resend their full state
/// with the epoch they know, and the group still settles with every partition
/// owned once, nothing lost and nothing read twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebalance_whose_heartbeat_answers_are_lost_still_settles() {
    let (setup, inject) = proxied_with_heartbeat_errors("baton-k848-lost-answers").await;
    let client = setup.client.clone();
    let topic = create_topic(&client, "k848-lost-answers", 4).await;
    let group = topic_name("k848-lost-answers");
    let history = Arc::new(scenario::History::default());
    let producer = Producer::builder(&client).build();
    let mut expected = BTreeMap::new();
    let within = Duration::from_secs(60);
    let m0 = scenario::Member::start(
        scenario::member_builder(&client, &group, &topic),
        0,
        &history,
    )
    .await;
    scenario::produce(&producer, &topic, 4, 40, &mut expected).await;
    scenario::wait_until(&history, within, "member 0 alone, 40 read", |h| {
        h.distinct() >= 40 && h.owners().get(&0).map(|o| o.len()) == Some(4)
    })
    .await;
    inject.store(8, Ordering::SeqCst);
    let m1 = scenario::Member::start(
        scenario::member_builder(&client, &group, &topic),
        1,
        &history,
    )
    .await;
    scenario::produce(&producer, &topic, 4, 40, &mut expected).await;
    producer.close().await;
    scenario::wait_until(&history, within, "two members settled, 80 read", |h| {
        let owners = h.owners();
        h.distinct() >= 80 && owners.len() == 2 && owners.values().all(|o| o.len() == 2)
    })
    .await;
    assert_eq!(
        inject.load(Ordering::SeqCst),
        0,
        "every injected error was answered"
    );
    m0.stop().await;
    m1.stop().await;
    let report = history.check(&expected);
    eprintln!("baton-broker, KIP-848 group, lost heartbeat answers: {report}");
    report.assert_clean("lost heartbeat answers");
    setup.shutdown().await;
}
