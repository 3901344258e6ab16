//! KIP-392 in the in-process cluster: nodes in racks with the rack-aware replica
//! selector; a consumer with `client_rack` fetches from the in-sync follower of
//! its rack, seen on the wire through a proxy per node.

use std::net::SocketAddr;
use std::time::Duration;

use baton_broker::{Cluster, ReplicaSelector};
use baton_kafka::{Admin, Client, NewTopic};
use baton_testkit::fetch_tap::{follower_in_rack_is_fetched_from, FetchTap};
use baton_testkit::topic_name;

const LONG: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_fetches_from_the_follower_in_its_rack() {
    baton_testkit::init_tracing();
    let mut cluster = Cluster::builder()
        .brokers(3)
        .in_memory()
        .rack(1, "rack-1")
        .rack(2, "rack-2")
        .rack(3, "rack-3")
        .replica_selector(ReplicaSelector::RackAware)
        .start()
        .await
        .expect("cluster starts");
    let nodes: Vec<(i32, SocketAddr)> = cluster
        .node_ids()
        .into_iter()
        .map(|id| (id, cluster.node(id).addr()))
        .collect();
    let tap = FetchTap::start_cluster(&nodes).await;
    let client = Client::builder(tap.bootstrap())
        .request_timeout(Duration::from_secs(10))
        .build()
        .await
        .expect("client through the taps");
    let topic = topic_name("rack");
    Admin::new(&client)
        .create_topics([NewTopic::new(topic.clone(), 1, 3)])
        .await
        .expect("topic created");
    cluster
        .wait_for(LONG, |c| {
            c.partition_state(&topic, 0)
                .is_some_and(|v| v.isr.len() == 3)
        })
        .await
        .expect("every replica in sync");
    let v = cluster.partition_state(&topic, 0).unwrap();
    let follower = *v.replicas.iter().find(|r| **r != v.leader).unwrap();
    let rack = format!("rack-{follower}");
    follower_in_rack_is_fetched_from(&tap, &client, &topic, v.leader, follower, &rack).await;
    cluster.shutdown().await;
}
