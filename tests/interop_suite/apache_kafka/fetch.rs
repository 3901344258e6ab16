//! Baton's consumer fetch path against Apache Kafka: fetch sessions (KIP-227)
//! and fetching from the replica in the consumer's rack (KIP-392), seen on the
//! wire through recording proxies.

use std::net::SocketAddr;
use std::time::Duration;

use baton_kafka::{Admin, Client};
use baton_testkit::fetch_tap::{
    follower_in_rack_is_fetched_from, only_changed_partitions_are_sent, FetchTap,
};
use baton_testkit::topic_name;

use super::create_topic;
use crate::apache_kafka_util::{single_node, three_nodes};

/// A consumer of 100 partitions opens a fetch session with one full Fetch; its
/// incremental Fetches then carry only the partitions that were written to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_sessions_send_only_changed_partitions() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let upstream = kafka.bootstrap()[0].parse().expect("an address");
    let tap = FetchTap::start(upstream).await;
    let client = Client::builder(tap.bootstrap())
        .request_timeout(Duration::from_secs(10))
        .build()
        .await
        .expect("client through the tap");
    let topic = create_topic(&client, "ak-sessions", 100).await;
    only_changed_partitions_are_sent(&tap, &client, &topic, 100, &[3, 50, 97]).await;
}

/// KIP-392 on the 3-node cluster, whose nodes are in racks `rack-1`..`rack-3` with
/// Kafka's `RackAwareReplicaSelector`: a consumer in a follower's rack is told by
/// the leader to fetch from that follower, and does, for every record after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_fetches_from_the_follower_in_its_rack() {
    let kafka = three_nodes().await;
    let _logs = kafka.logs_on_failure();
    let nodes: Vec<(i32, SocketAddr)> = kafka
        .node_ids()
        .into_iter()
        .map(|id| {
            (
                id,
                SocketAddr::from(([127, 0, 0, 1], kafka.broker_port(id))),
            )
        })
        .collect();
    let tap = FetchTap::start_cluster(&nodes).await;
    let client = Client::builder(tap.bootstrap())
        .request_timeout(Duration::from_secs(10))
        .build()
        .await
        .expect("client through the taps");
    let topic = topic_name("ak-rack");
    Admin::new(&client)
        .create_topic(topic.clone(), 1, 3)
        .await
        .expect("topic created");
    kafka.wait_fully_replicated(&client).await.unwrap();
    let meta = client.refresh_metadata().await.unwrap();
    let leader = meta.topic(&topic).unwrap().partitions[0]
        .leader
        .expect("a leader");
    let follower = *nodes
        .iter()
        .map(|(id, _)| id)
        .find(|id| **id != leader)
        .unwrap();
    let rack = format!("rack-{follower}");
    follower_in_rack_is_fetched_from(&tap, &client, &topic, leader, follower, &rack).await;
}
