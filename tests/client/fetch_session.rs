//! KIP-227 against baton-broker, counted on the wire: a consumer of 1,000
//! partitions opens a fetch session with one full Fetch, then sends only the
//! partitions whose fetch state changed.

use std::time::Duration;

use baton_broker::{Broker, BrokerConfig};
use baton_kafka::Client;
use baton_testkit::client::create_topic;
use baton_testkit::fetch_tap::{only_changed_partitions_are_sent, FetchTap};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_partitions_with_sessions_send_only_changed_partitions() {
    let broker = Broker::start(BrokerConfig::in_memory())
        .await
        .expect("broker starts");
    let tap = FetchTap::start(broker.local_addr()).await;
    let client = Client::builder(tap.bootstrap())
        .request_timeout(Duration::from_secs(10))
        .build()
        .await
        .expect("client through the tap");
    let topic = create_topic(&client, "sessions", 1_000).await;
    only_changed_partitions_are_sent(&tap, &client, &topic, 1_000, &[0, 7, 500, 999]).await;
    broker.shutdown().await;
}
