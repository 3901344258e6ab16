//! Configs, partitions, cluster and log dirs through `Admin`, against a 3-node
//! in-process cluster (the controller replicates changes to every node) and a
//! standalone broker: changes take effect on live topics, survive restarts, and
//! bad changes are refused naming the key.

use std::time::Duration;

use baton_broker::{Cluster, LogRetention};
use baton_kafka::{
    Admin, AdminError, AlterConfigOp, ConfigResource, ConfigSource, DescribeConfigsOptions,
    NewPartitions, NewTopic, OffsetSpec, Producer, ProducerRecord,
};
use baton_protocol::ErrorCode;
use baton_testkit::client::broker_and_client;
use baton_testkit::cluster::client;
use baton_testkit::topic_name;

const DEADLINE: Duration = Duration::from_secs(60);

async fn cluster(dir: &std::path::Path) -> Cluster {
    Cluster::builder()
        .brokers(3)
        .data_dir(dir)
        .segment_bytes(1024)
        .retention(LogRetention {
            check_interval: Duration::from_millis(100),
            ..LogRetention::default()
        })
        .start()
        .await
        .expect("cluster starts")
}

async fn produce(producer: &Producer, topic: &str, partition: i32, n: usize, size: usize) {
    let mut handles = Vec::new();
    for i in 0..n {
        let record = ProducerRecord::new(topic.to_owned())
            .partition(partition)
            .key(format!("k{i}"))
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
            DescribeConfigsOptions::default().synonyms(),
        )
        .await
        .expect("described")
        .remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn altered_topic_configs_take_effect_on_every_node_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(dir.path()).await;
    let client = client(&cluster).await;
    let admin = Admin::new(&client);
    let topic = topic_name("configs");
    admin
        .create_topics([NewTopic::new(topic.clone(), 1, 3)])
        .await
        .unwrap();

    let before = topic_config(&admin, &topic).await;
    let retention = before.get("retention.ms").expect("retention.ms described");
    assert_eq!(retention.source, ConfigSource::Default);
    assert!(!retention.read_only);

    // Several segments of 1 KiB, then retention.ms=1: old segments go.
    let producer = Producer::builder(&client).build();
    produce(&producer, &topic, 0, 40, 200).await;
    admin
        .incremental_alter_configs(
            [(
                ConfigResource::topic(&topic),
                vec![
                    AlterConfigOp::set("retention.ms", "1"),
                    AlterConfigOp::set("max.message.bytes", "2000"),
                    AlterConfigOp::append("cleanup.policy", "compact"),
                ],
            )],
            false,
        )
        .await
        .expect("configs altered");
    // Described from the replicated metadata log.
    let described = topic_config(&admin, &topic).await;
    let r = described.get("retention.ms").unwrap();
    assert_eq!(r.value.as_deref(), Some("1"));
    assert_eq!(r.source, ConfigSource::DynamicTopic);
    assert_eq!(described.value("cleanup.policy"), Some("delete,compact"));
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
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // max.message.bytes=2000: a 4000-byte record is refused, a small one is not.
    let big = producer
        .send(
            ProducerRecord::new(topic.clone())
                .partition(0)
                .key("big")
                .value(vec![b'x'; 4000]),
        )
        .await
        .expect("accepted by the client");
    let err = big
        .await
        .expect_err("the broker refuses a batch over max.message.bytes");
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
    produce(&producer, &topic, 0, 1, 100).await;

    // The cluster-wide default log.retention.ms applies to a topic without its own.
    let plain = topic_name("configs-default");
    admin
        .create_topics([NewTopic::new(plain.clone(), 1, 3)])
        .await
        .unwrap();
    produce(&producer, &plain, 0, 40, 200).await;
    admin
        .incremental_alter_configs(
            [(
                ConfigResource::BrokerDefault,
                vec![AlterConfigOp::set("log.retention.ms", "1")],
            )],
            false,
        )
        .await
        .expect("broker default set");
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while admin
        .list_offsets([(plain.clone(), 0, OffsetSpec::Earliest)])
        .await
        .unwrap()[0]
        .offset
        == 0
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "log.retention.ms=1 deleted nothing within {DEADLINE:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // DELETE reverts to the default.
    admin
        .incremental_alter_configs(
            [(
                ConfigResource::topic(&topic),
                vec![AlterConfigOp::delete("max.message.bytes")],
            )],
            false,
        )
        .await
        .unwrap();
    produce(&producer, &topic, 0, 1, 4000).await;
    producer.close().await;

    // The overrides survive a restart of the whole cluster.
    drop(client);
    cluster.shutdown().await;
    let cluster = self::cluster(dir.path()).await;
    let client = self::client(&cluster).await;
    let admin = Admin::new(&client);
    let after = topic_config(&admin, &topic).await;
    assert_eq!(after.value("retention.ms"), Some("1"));
    assert_eq!(after.value("cleanup.policy"), Some("delete,compact"));
    let defaults = admin
        .describe_configs([ConfigResource::BrokerDefault], Default::default())
        .await
        .unwrap()
        .remove(0);
    assert_eq!(defaults.value("log.retention.ms"), Some("1"));
    assert!(after
        .get("max.message.bytes")
        .is_none_or(|e| e.source != ConfigSource::DynamicTopic));
    cluster.shutdown().await;
}

#[tokio::test]
async fn bad_config_changes_are_refused_naming_the_key() {
    let (broker, client) = broker_and_client().await;
    let admin = Admin::new(&client);
    let topic = topic_name("bad-configs");
    admin.create_topic(topic.clone(), 1, 1).await.unwrap();
    let refused = |ops: Vec<AlterConfigOp>, resource: ConfigResource| {
        let admin = admin.clone();
        async move {
            match admin
                .incremental_alter_configs([(resource, ops)], false)
                .await
            {
                Err(AdminError::Configs(errors)) => {
                    assert_eq!(errors.len(), 1);
                    (
                        errors[0].code,
                        errors[0].message.clone().unwrap_or_default(),
                    )
                }
                other => panic!("expected a refusal, got {other:?}"),
            }
        }
    };
    let t = || ConfigResource::topic(&topic);
    let (code, msg) = refused(vec![AlterConfigOp::set("retention.ms", "soon")], t()).await;
    assert_eq!(code, ErrorCode::InvalidConfig);
    assert!(msg.contains("retention.ms"), "{msg}");
    let (code, msg) = refused(vec![AlterConfigOp::set("no.such.config", "1")], t()).await;
    assert_eq!(code, ErrorCode::InvalidConfig);
    assert!(msg.contains("no.such.config"), "{msg}");
    let (code, msg) = refused(vec![AlterConfigOp::set("segment.bytes", "100000")], t()).await;
    assert_eq!(code, ErrorCode::InvalidConfig);
    assert!(msg.contains("segment.bytes"), "{msg}");
    let (code, msg) = refused(
        vec![AlterConfigOp::set("num.io.threads", "8")],
        ConfigResource::BrokerDefault,
    )
    .await;
    assert_eq!(code, ErrorCode::InvalidConfig);
    assert!(msg.contains("num.io.threads"), "{msg}");
    let node = client.metadata().brokers.keys().next().copied().unwrap();
    let (code, msg) = refused(
        vec![AlterConfigOp::set("log.retention.ms", "1000")],
        ConfigResource::Broker(node),
    )
    .await;
    assert_eq!(code, ErrorCode::InvalidConfig);
    assert!(msg.contains("log.retention.ms"), "{msg}");
    let (code, _) = refused(
        vec![AlterConfigOp::set("retention.ms", "1")],
        ConfigResource::topic("no-such-topic"),
    )
    .await;
    assert_eq!(code, ErrorCode::UnknownTopicOrPartition);

    // validate_only checks and changes nothing.
    admin
        .incremental_alter_configs(
            [(t(), vec![AlterConfigOp::set("retention.ms", "1234")])],
            true,
        )
        .await
        .unwrap();
    let described = topic_config(&admin, &topic).await;
    assert_eq!(
        described.get("retention.ms").unwrap().source,
        ConfigSource::Default
    );
    // A standalone broker applies it for real.
    admin
        .incremental_alter_configs(
            [(t(), vec![AlterConfigOp::set("retention.ms", "1234")])],
            false,
        )
        .await
        .unwrap();
    assert_eq!(
        topic_config(&admin, &topic).await.value("retention.ms"),
        Some("1234")
    );

    // The cluster-wide default log.retention.ms is dynamic; topics without their
    // own retention.ms describe it as their default.
    admin
        .incremental_alter_configs(
            [(
                ConfigResource::BrokerDefault,
                vec![AlterConfigOp::set("log.retention.ms", "86400000")],
            )],
            false,
        )
        .await
        .unwrap();
    let defaults = admin
        .describe_configs([ConfigResource::BrokerDefault], Default::default())
        .await
        .unwrap()
        .remove(0);
    let e = defaults.get("log.retention.ms").unwrap();
    assert_eq!(e.value.as_deref(), Some("86400000"));
    assert_eq!(e.source, ConfigSource::DynamicDefaultBroker);
    let other = topic_name("bad-configs-default");
    admin.create_topic(other.clone(), 1, 1).await.unwrap();
    assert_eq!(
        topic_config(&admin, &other).await.value("retention.ms"),
        Some("86400000")
    );

    // Partitions on a standalone broker: assignments must name it.
    admin
        .create_partitions([NewPartitions::increase_to(&topic, 2)], false)
        .await
        .unwrap();
    match admin
        .create_partitions(
            [NewPartitions::increase_to(&topic, 3).assignments(vec![vec![node + 1]])],
            false,
        )
        .await
    {
        Err(AdminError::Topics(e)) => {
            assert_eq!(e[0].code, ErrorCode::InvalidReplicaAssignment)
        }
        other => panic!("expected INVALID_REPLICA_ASSIGNMENT, got {other:?}"),
    }
    admin
        .create_partitions(
            [NewPartitions::increase_to(&topic, 3).assignments(vec![vec![node]])],
            false,
        )
        .await
        .unwrap();
    let producer = Producer::builder(&client).build();
    produce(&producer, &topic, 2, 3, 10).await;
    producer.close().await;
    let info = admin.describe_cluster_info(false).await.unwrap();
    assert_eq!(info.brokers.len(), 1);
    assert_eq!(info.authorized_operations, None);
    let dirs = admin.describe_log_dirs([node]).await.unwrap();
    let dir = &dirs[&node][0];
    assert_eq!(dir.path, format!("memory:/node-{node}"));
    assert_eq!((dir.total_bytes, dir.usable_bytes), (None, None));
    let p2 = dir
        .replicas
        .iter()
        .find(|r| r.topic == topic && r.partition == 2)
        .expect("partition 2 listed");
    assert!(p2.size > 0);

    // Other broker configs: static, read-only.
    let broker_cfg = admin
        .describe_configs([ConfigResource::Broker(node)], Default::default())
        .await
        .unwrap()
        .remove(0);
    let e = broker_cfg
        .get("num.partitions")
        .expect("num.partitions described");
    assert!(e.read_only);
    assert_eq!(e.source, ConfigSource::StaticBroker);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn created_partitions_get_leaders_and_the_producer_uses_them() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(dir.path()).await;
    let client = client(&cluster).await;
    let admin = Admin::new(&client);
    let topic = topic_name("grow");
    admin
        .create_topics([NewTopic::new(topic.clone(), 1, 2)])
        .await
        .unwrap();
    let producer = Producer::builder(&client).build();
    produce(&producer, &topic, 0, 3, 10).await;

    // validate_only creates nothing; a decrease is INVALID_PARTITIONS.
    admin
        .create_partitions([NewPartitions::increase_to(&topic, 3)], true)
        .await
        .unwrap();
    let meta = client.refresh_metadata().await.unwrap();
    assert_eq!(meta.topic(&topic).unwrap().partitions.len(), 1);
    match admin
        .create_partitions([NewPartitions::increase_to(&topic, 1)], false)
        .await
    {
        Err(AdminError::Topics(e)) => assert_eq!(e[0].code, ErrorCode::InvalidPartitions),
        other => panic!("expected INVALID_PARTITIONS, got {other:?}"),
    }
    // Partition 1 placed by the controller, partition 2 on brokers [3, 1] as asked.
    let ids = cluster.node_ids();
    admin
        .create_partitions([NewPartitions::increase_to(&topic, 2)], false)
        .await
        .unwrap();
    admin
        .create_partitions(
            [NewPartitions::increase_to(&topic, 3).assignments(vec![vec![ids[2], ids[0]]])],
            false,
        )
        .await
        .unwrap();
    let meta = client.refresh_metadata().await.unwrap();
    let t = meta.topic(&topic).unwrap();
    assert_eq!(t.partitions.len(), 3);
    let p2 = t.partitions.iter().find(|p| p.partition == 2).unwrap();
    assert_eq!(p2.replicas, vec![ids[2], ids[0]]);
    assert_eq!(p2.leader, Some(ids[2]));

    // The producer (whose metadata knew one partition) delivers to the new ones.
    for p in [1, 2] {
        produce(&producer, &topic, p, 5, 10).await;
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
        vec![5, 5]
    );
    producer.close().await;

    // Describe cluster and log dirs.
    let info = admin.describe_cluster_info(true).await.unwrap();
    assert_eq!(
        info.brokers.iter().map(|b| b.node_id).collect::<Vec<_>>(),
        ids
    );
    assert!(!info.cluster_id.is_empty());
    assert!(info.controller_id.is_some());
    let dirs = admin.describe_log_dirs(ids.clone()).await.unwrap();
    for (node, node_dirs) in &dirs {
        assert_eq!(node_dirs.len(), 1, "node {node}");
        let d = &node_dirs[0];
        assert!(d.error.is_none());
        assert!(
            d.path.starts_with('/'),
            "an absolute data directory: {}",
            d.path
        );
        let (total, usable) = (d.total_bytes.unwrap(), d.usable_bytes.unwrap());
        assert!(total > 0 && usable <= total, "{total} {usable}");
        let mine: Vec<_> = d.replicas.iter().filter(|r| r.topic == topic).collect();
        let expected = meta
            .topic(&topic)
            .unwrap()
            .partitions
            .iter()
            .filter(|p| p.replicas.contains(node))
            .count();
        assert_eq!(mine.len(), expected, "node {node}: {d:?}");
    }
    let leader0 = meta.topic(&topic).unwrap().partitions[0].leader.unwrap();
    let p0 = dirs[&leader0]
        .iter()
        .flat_map(|d| &d.replicas)
        .find(|r| r.topic == topic && r.partition == 0)
        .unwrap();
    assert!(p0.size > 0, "partition 0 holds three records: {p0:?}");
    assert_eq!(p0.offset_lag, 0);
    cluster.shutdown().await;
}

/// Answers lost on the way back (the connection closes after the request was
/// applied): `describe_configs` and `incremental_alter_configs` retry on a new
/// connection with backoff and succeed, and `create_partitions` reports the
/// documented outcome of a retry after a lost answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_calls_retry_lost_answers() {
    use baton_broker::faults::RequestFault;
    let mut cluster = Cluster::builder()
        .brokers(3)
        .in_memory()
        .start()
        .await
        .unwrap();
    let client = client(&cluster).await;
    let admin = Admin::new(&client).with_operation_timeout(Duration::from_secs(30));
    let topic = topic_name("retry");
    admin
        .create_topics([NewTopic::new(topic.clone(), 1, 3)])
        .await
        .unwrap();
    for api_key in [32, 44, 37] {
        cluster.inject(None, RequestFault::drop_response(api_key));
    }
    admin
        .incremental_alter_configs(
            [(
                ConfigResource::topic(&topic),
                vec![AlterConfigOp::set("retention.ms", "60000")],
            )],
            false,
        )
        .await
        .expect("retried after the lost answer");
    assert_eq!(
        topic_config(&admin, &topic).await.value("retention.ms"),
        Some("60000")
    );
    match admin
        .create_partitions([NewPartitions::increase_to(&topic, 2)], false)
        .await
    {
        Ok(()) => {}
        Err(AdminError::Topics(e)) => assert_eq!(e[0].code, ErrorCode::InvalidPartitions),
        Err(e) => panic!("unexpected {e}"),
    }
    let meta = client.refresh_metadata().await.unwrap();
    assert_eq!(meta.topic(&topic).unwrap().partitions.len(), 2);
    cluster.shutdown().await;
}
