//! Admin operations against the in-process broker.

use baton_kafka::{Admin, AdminError, NewTopic, OffsetSpec, Producer, ProducerRecord};
use baton_protocol::ErrorCode;
use baton_testkit::client::broker_and_client;
use baton_testkit::topic_name;

#[tokio::test]
async fn create_describe_list_offsets_delete() {
    let (broker, client) = broker_and_client().await;
    let admin = Admin::new(&client);
    let topic = topic_name("admin");
    admin
        .create_topics([NewTopic::new(topic.clone(), 3, 1)])
        .await
        .unwrap();

    let cluster = admin.describe_cluster().await.unwrap();
    assert_eq!(cluster.brokers.len(), 1);
    assert!(cluster.controller_id.is_some());
    let t = cluster.topic(&topic).expect("created topic is described");
    assert_eq!(t.partitions.len(), 3);
    for p in &t.partitions {
        let leader = p.leader.expect("every partition has a leader");
        assert!(cluster.broker(leader).is_some());
        assert_eq!(p.replicas, vec![leader]);
        assert_eq!(p.isr, vec![leader]);
    }

    // Creating it again reports TOPIC_ALREADY_EXISTS for that topic.
    match admin.create_topic(topic.clone(), 3, 1).await {
        Err(AdminError::Topics(errors)) => {
            assert_eq!(errors.len(), 1);
            assert_eq!(errors[0].code, ErrorCode::TopicAlreadyExists);
        }
        other => panic!("expected TOPIC_ALREADY_EXISTS, got {other:?}"),
    }

    // Five records into partition 1, with known timestamps.
    let producer = Producer::builder(&client).build();
    let mut deliveries = Vec::new();
    for i in 0..5i64 {
        let record = ProducerRecord::new(topic.clone())
            .partition(1)
            .value(format!("v{i}"))
            .timestamp(1_000 + i * 10);
        deliveries.push(producer.send(record).await.unwrap());
    }
    for d in deliveries {
        d.await.unwrap();
    }

    let offsets = admin
        .list_offsets([
            (topic.clone(), 0, OffsetSpec::Earliest),
            (topic.clone(), 0, OffsetSpec::Latest),
            (topic.clone(), 1, OffsetSpec::Earliest),
            (topic.clone(), 1, OffsetSpec::Latest),
            (topic.clone(), 1, OffsetSpec::Timestamp(1_025)),
        ])
        .await
        .unwrap();
    let got: Vec<i64> = offsets.iter().map(|o| o.offset).collect();
    assert_eq!(got, vec![0, 0, 0, 5, 3]);
    assert_eq!(offsets[4].timestamp, 1_030);

    admin.delete_topics([topic.clone()]).await.unwrap();
    let cluster = admin.describe_cluster().await.unwrap();
    assert!(cluster.topic(&topic).is_none(), "deleted topic is gone");
    match admin.delete_topics([topic.clone()]).await {
        Err(AdminError::Topics(errors)) => {
            assert_eq!(errors[0].code, ErrorCode::UnknownTopicOrPartition)
        }
        other => panic!("expected UNKNOWN_TOPIC_OR_PARTITION, got {other:?}"),
    }

    producer.close().await;
    broker.shutdown().await;
}

/// The controller's connection breaks (its broker restarts on the same address)
/// while an admin call is made: the call retries on a new connection within the
/// operation timeout instead of failing with the connection error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_topic_rides_a_controller_restart() {
    use baton_broker::{Broker, BrokerConfig};
    use std::time::Duration;

    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let addr = broker.local_addr();
    let client = baton_kafka::Client::builder([broker.bootstrap()])
        .connect_timeout(Duration::from_secs(1))
        .build()
        .await
        .unwrap();
    let admin = Admin::new(&client).with_operation_timeout(Duration::from_secs(10));
    admin
        .create_topic(topic_name("before"), 1, 1)
        .await
        .unwrap();
    broker.shutdown().await;
    // The broker is down when the call starts and comes back 300 ms later.
    let restart = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        Broker::start(BrokerConfig::in_memory().with_listen(addr))
            .await
            .unwrap()
    });
    let topic = topic_name("after-restart");
    admin
        .create_topic(topic.clone(), 2, 1)
        .await
        .expect("retried until the controller is back");
    let broker = restart.await.unwrap();
    let cluster = admin.describe_cluster().await.unwrap();
    assert_eq!(cluster.topic(&topic).map(|t| t.partitions.len()), Some(2));
    broker.shutdown().await;
}
