//! Baton's configs, partitions, cluster and log-dir admin against Apache Kafka:
//! Kafka honours the topic configs Baton alters (retention deletes old segments,
//! `max.message.bytes` refuses a larger batch), takes a cluster-wide broker
//! default, grows a topic that Baton's producer then writes to, and describes its
//! cluster and log directories.

use std::time::Duration;

use baton_kafka::{
    Admin, AdminError, AlterConfigOp, ConfigResource, ConfigSource, DescribeConfigsOptions,
    NewPartitions, NewTopic, OffsetSpec, Producer, ProducerRecord,
};
use baton_protocol::ErrorCode;
use baton_testkit::topic_name;

use super::client;
use crate::apache_kafka_util::single_node;

const DEADLINE: Duration = Duration::from_secs(90);

async fn produce(producer: &Producer, topic: &str, partition: i32, n: usize, size: usize) {
    let mut handles = Vec::new();
    for i in 0..n {
        let record = ProducerRecord::new(topic.to_owned())
            .partition(partition)
            .value(vec![b'a' + (i % 26) as u8; size]);
        handles.push(producer.send(record).await.expect("accepted"));
    }
    for h in handles {
        h.await.expect("delivered");
    }
}

async fn topic_config(admin: &Admin, topic: &str) -> baton_kafka::ResourceConfig {
    admin
        .describe_configs(
            [ConfigResource::topic(topic)],
            DescribeConfigsOptions::default().synonyms().documentation(),
        )
        .await
        .expect("described")
        .remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn altered_topic_configs_are_honoured() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let client = client().await;
    let admin = Admin::new(&client);
    let topic = topic_name("ak-configs");
    // segment.ms rolls a segment per round of records below.
    admin
        .create_topics([NewTopic::new(topic.clone(), 1, 1).config("segment.ms", "100")])
        .await
        .unwrap();
    let before = topic_config(&admin, &topic).await;
    let retention = before.get("retention.ms").expect("retention.ms described");
    assert_ne!(retention.source, ConfigSource::DynamicTopic);
    assert!(retention.documentation.is_some(), "documentation asked for");
    let segment_ms = before.get("segment.ms").expect("segment.ms described");
    assert_eq!(segment_ms.source, ConfigSource::DynamicTopic);
    // Synonyms were asked for: the override names itself first.
    assert_eq!(
        segment_ms
            .synonyms
            .first()
            .map(|s| (s.name.as_str(), s.source)),
        Some(("segment.ms", ConfigSource::DynamicTopic))
    );

    let producer = Producer::builder(&client).build();
    for _ in 0..3 {
        produce(&producer, &topic, 0, 5, 100).await;
        // Let the segment age past segment.ms so the next append rolls it.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    admin
        .incremental_alter_configs(
            [(
                ConfigResource::topic(&topic),
                vec![
                    AlterConfigOp::set("retention.ms", "1"),
                    AlterConfigOp::set("max.message.bytes", "2000"),
                ],
            )],
            false,
        )
        .await
        .expect("configs altered");
    // Kafka's controller commits the change and each broker applies it from the
    // metadata log a moment later: DescribeConfigs, answered by a broker, may
    // show the old value until then.
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let after = topic_config(&admin, &topic).await;
        let r = after.get("retention.ms").unwrap();
        if r.value.as_deref() == Some("1") {
            assert_eq!(r.source, ConfigSource::DynamicTopic);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "retention.ms still {:?} after {DEADLINE:?}",
            r.value
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Retention deletes the rolled segments (Kafka's check interval is 500 ms here).
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let start = admin
            .list_offsets([(topic.clone(), 0, OffsetSpec::Earliest)])
            .await
            .unwrap()[0]
            .offset;
        if start > 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "retention.ms=1 deleted nothing within {DEADLINE:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // max.message.bytes=2000 refuses a 4000-byte record.
    let big = producer
        .send(
            ProducerRecord::new(topic.clone())
                .partition(0)
                .value(vec![b'x'; 4000]),
        )
        .await
        .expect("accepted by the client");
    let err = big
        .await
        .expect_err("Kafka refuses a batch over max.message.bytes");
    assert!(
        matches!(
            err,
            baton_kafka::ProduceError::Rejected {
                code: ErrorCode::MessageTooLarge,
                ..
            }
        ),
        "unexpected error {err}"
    );
    producer.close().await;

    // Refusals come back per resource, naming the key.
    for (op, key) in [
        (AlterConfigOp::set("retention.ms", "soon"), "retention.ms"),
        (AlterConfigOp::set("no.such.config", "1"), "no.such.config"),
    ] {
        match admin
            .incremental_alter_configs([(ConfigResource::topic(&topic), vec![op])], false)
            .await
        {
            Err(AdminError::Configs(errors)) => {
                assert_eq!(errors[0].code, ErrorCode::InvalidConfig, "{errors:?}");
                let msg = errors[0].message.clone().unwrap_or_default();
                assert!(msg.contains(key), "{msg}");
            }
            other => panic!("expected INVALID_CONFIG for {key}, got {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_wide_broker_default_is_set_and_removed() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let client = client().await;
    let admin = Admin::new(&client);
    let node = kafka.node_ids()[0];
    // A hundred years: the default applies to every topic of the shared node, and
    // other tests write records with old timestamps.
    admin
        .incremental_alter_configs(
            [(
                ConfigResource::BrokerDefault,
                vec![AlterConfigOp::set("log.retention.ms", "3153600000000")],
            )],
            false,
        )
        .await
        .expect("broker default set");
    let source = |cfg: &baton_kafka::ResourceConfig| cfg.get("log.retention.ms").map(|e| e.source);
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let cfg = admin
            .describe_configs([ConfigResource::Broker(node)], Default::default())
            .await
            .unwrap()
            .remove(0);
        // Kafka records the default in its dynamic config before the broker's
        // reconfiguration applies it: the source can show it while the value is
        // still absent, so wait for both.
        if source(&cfg) == Some(ConfigSource::DynamicDefaultBroker)
            && cfg.value("log.retention.ms") == Some("3153600000000")
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            cfg.get("log.retention.ms")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    admin
        .incremental_alter_configs(
            [(
                ConfigResource::BrokerDefault,
                vec![AlterConfigOp::delete("log.retention.ms")],
            )],
            false,
        )
        .await
        .expect("broker default removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn created_partitions_take_records_and_cluster_and_log_dirs_are_described() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let client = client().await;
    let admin = Admin::new(&client);
    let topic = topic_name("ak-grow");
    admin.create_topic(topic.clone(), 1, 1).await.unwrap();
    let producer = Producer::builder(&client).build();
    produce(&producer, &topic, 0, 2, 10).await;

    admin
        .create_partitions([NewPartitions::increase_to(&topic, 3)], true)
        .await
        .expect("validated");
    match admin
        .create_partitions([NewPartitions::increase_to(&topic, 1)], false)
        .await
    {
        Err(AdminError::Topics(e)) => assert_eq!(e[0].code, ErrorCode::InvalidPartitions),
        other => panic!("expected INVALID_PARTITIONS, got {other:?}"),
    }
    admin
        .create_partitions([NewPartitions::increase_to(&topic, 3)], false)
        .await
        .expect("partitions created");
    for p in [1, 2] {
        produce(&producer, &topic, p, 4, 10).await;
    }
    let ends = admin
        .list_offsets([
            (topic.clone(), 1, OffsetSpec::Latest),
            (topic.clone(), 2, OffsetSpec::Latest),
        ])
        .await
        .unwrap();
    assert_eq!(
        ends.iter().map(|o| o.offset).collect::<Vec<_>>(),
        vec![4, 4]
    );
    producer.close().await;

    let info = admin.describe_cluster_info(true).await.unwrap();
    assert!(!info.cluster_id.is_empty());
    assert_eq!(
        info.brokers.iter().map(|b| b.node_id).collect::<Vec<_>>(),
        kafka.node_ids()
    );
    assert!(info.brokers[0].rack.is_some(), "racks are configured");
    assert!(info.controller_id.is_some());
    assert!(info.authorized_operations.is_some());

    let node = kafka.node_ids()[0];
    let dirs = admin.describe_log_dirs([node]).await.unwrap();
    let dirs = &dirs[&node];
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    assert!(dirs[0].error.is_none());
    assert!(dirs[0].total_bytes.is_some() && dirs[0].usable_bytes.is_some());
    let mine: Vec<_> = dirs[0]
        .replicas
        .iter()
        .filter(|r| r.topic == topic)
        .collect();
    assert_eq!(mine.len(), 3, "{mine:?}");
    assert!(
        mine.iter().all(|r| r.size > 0 && r.offset_lag == 0),
        "{mine:?}"
    );
}
