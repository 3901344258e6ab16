//! Baton's `GroupConsumer` on the consumer rebalance protocol (KIP-848,
//! `GroupProtocol::Consumer`) against baton-broker: a broker without
//! ConsumerGroupHeartbeat.

use std::time::Duration;

use baton::connection::ConnectionError;
use baton::{ClientError, GroupConsumer, GroupError, GroupProtocol};
use baton_protocol::envelope;
use baton_protocol::messages::{ApiVersionsRequest, ConsumerGroupHeartbeatRequest};
use baton_protocol::Message;
use baton_testkit::client::create_topic;
use baton_testkit::proxy::{Proxied, ProxyState};
use baton_testkit::topic_name;
use bytes::Bytes;

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
                let (header, mut resp) = envelope::decode_response::<ApiVersionsRequest>(
                    Bytes::copy_from_slice(&frame),
                    ex.version,
                )
                .expect("ApiVersions response");
                resp.api_keys
                    .retain(|k| k.api_key != ConsumerGroupHeartbeatRequest::API_KEY);
                envelope::encode_response::<ApiVersionsRequest>(
                    header.correlation_id,
                    ex.version,
                    &resp,
                )
                .expect("encodes")[4..]
                    .to_vec()
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
