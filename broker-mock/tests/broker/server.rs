//! The broker over real TCP: happy paths of every API, ordering, long-polling, acks=0,
//! corrupt batches, restarts.

use baton_broker::{Broker, BrokerConfig};
use baton_protocol::messages::*;
use baton_protocol::record::{RecordBatch, TimestampType};
use baton_protocol::{ErrorCode, Message, RequestHeader, Uuid};
use baton_testkit::wire::*;
use bytes::BytesMut;

#[tokio::test]
async fn api_versions_and_kip511_fallback() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let resp = c.call(&ApiVersionsRequest::default(), 3).await;
    assert_eq!(resp.error_code, 0);
    let fetch = resp.api_keys.iter().find(|a| a.api_key == 1).unwrap();
    assert_eq!((fetch.min_version, fetch.max_version), (4, 13));
    // A too-new version still gets a v0 answer listing the APIs.
    let mut frame = BytesMut::new();
    let at = baton_protocol::frame::begin_frame(&mut frame);
    RequestHeader {
        api_key: ApiVersionsRequest::API_KEY,
        api_version: 99,
        correlation_id: 42,
        client_id: Some(String::new()),
    }
    .encode(&mut frame, 1);
    frame.extend_from_slice(&[0xde, 0xad]);
    baton_protocol::frame::finish_frame(&mut frame, at);
    c.send_raw(&frame).await.unwrap();
    let (corr, resp) = c.recv::<ApiVersionsRequest>(0).await;
    assert_eq!(corr, 42);
    assert_eq!(resp.error_code, ErrorCode::UnsupportedVersion.code());
    assert!(resp
        .api_keys
        .iter()
        .any(|a| a.api_key == 18 && a.max_version == 4));
    broker.shutdown().await;
}

#[tokio::test]
async fn create_produce_fetch_list_delete() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("happy");
    create_topic(&mut c, &topic, 2).await;

    let meta = c
        .call(
            &MetadataRequest {
                topics: Some(vec![MetadataRequestTopic {
                    name: Some(topic.clone()),
                    ..Default::default()
                }]),
                ..Default::default()
            },
            12,
        )
        .await;
    assert_eq!(meta.brokers.len(), 1);
    assert_eq!(meta.brokers[0].port as u16, broker.local_addr().port());
    assert_eq!(meta.controller_id, 0);
    let t = &meta.topics[0];
    assert_eq!(t.error_code, 0);
    assert_ne!(t.topic_id, Uuid::ZERO);
    assert_eq!(t.partitions.len(), 2);
    assert_eq!(t.partitions[1].leader_id, 0);
    assert_eq!(t.partitions[1].isr_nodes, vec![0]);

    for version in [3, 9, 10] {
        let resp = c
            .call(
                &produce_req(&topic, 1, -1, records(1_000, &["a", "b", "c"])),
                version,
            )
            .await;
        let p = &resp.responses[0].partition_responses[0];
        assert_eq!(p.error_code, 0);
        assert_eq!(p.log_append_time_ms, -1);
    }
    let resp = c
        .call(&produce_req(&topic, 1, 1, records(2_000, &["d"])), 10)
        .await;
    assert_eq!(resp.responses[0].partition_responses[0].base_offset, 9);

    for version in [4, 11, 12] {
        let resp = c.call(&fetch_req(&topic, 1, 4, 0, 0), version).await;
        let p = &resp.responses[0].partitions[0];
        assert_eq!(p.error_code, 0);
        assert_eq!(p.high_watermark, 10);
        assert_eq!(p.log_start_offset, if version >= 5 { 0 } else { -1 });
        // The batch holding offset 4 starts at 3.
        assert_eq!(values(&p.records), ["a", "b", "c", "a", "b", "c", "d"]);
    }
    // v13 addresses the topic by id.
    let mut req = fetch_req("", 1, 9, 0, 0);
    req.topics[0].topic_id = t.topic_id;
    let resp = c.call(&req, 13).await;
    assert_eq!(values(&resp.responses[0].partitions[0].records), ["d"]);
    let mut req = fetch_req("", 1, 9, 0, 0);
    req.topics[0].topic_id = Uuid::from_u64_pair(1, 2);
    let resp = c.call(&req, 13).await;
    assert_eq!(
        resp.responses[0].partitions[0].error_code,
        ErrorCode::UnknownTopicId.code()
    );
    // Out of range and fenced epochs.
    let resp = c.call(&fetch_req(&topic, 1, 11, 0, 0), 12).await;
    assert_eq!(
        resp.responses[0].partitions[0].error_code,
        ErrorCode::OffsetOutOfRange.code()
    );
    let mut req = fetch_req(&topic, 1, 0, 0, 0);
    req.topics[0].partitions[0].current_leader_epoch = 5;
    let resp = c.call(&req, 12).await;
    assert_eq!(
        resp.responses[0].partitions[0].error_code,
        ErrorCode::UnknownLeaderEpoch.code()
    );

    // ListOffsets: earliest, latest, max timestamp, by timestamp.
    let lo = |ts: i64| ListOffsetsRequest {
        replica_id: -1,
        isolation_level: 0,
        topics: vec![ListOffsetsTopic {
            name: topic.clone(),
            partitions: vec![ListOffsetsPartition {
                partition_index: 1,
                current_leader_epoch: -1,
                timestamp: ts,
            }],
        }],
    };
    let expect = [
        (-2, 0, -1),
        (-1, 10, -1),
        (-3, 9, 2_000),
        (1_001, 1, 1_001),
        (1_500, 9, 2_000),
        (9_999, -1, -1),
    ];
    for (ts, offset, timestamp) in expect {
        let resp = c.call(&lo(ts), 8).await;
        let p = &resp.topics[0].partitions[0];
        assert_eq!(p.error_code, 0);
        assert_eq!(
            (p.offset, p.timestamp),
            (offset, timestamp),
            "timestamp {ts}"
        );
    }

    // Delete, then the topic is gone.
    let resp = c
        .call(
            &DeleteTopicsRequest {
                topic_names: vec![topic.clone()],
                timeout_ms: 1000,
                ..Default::default()
            },
            5,
        )
        .await;
    assert_eq!(resp.responses[0].error_code, 0);
    let resp = c.call(&fetch_req(&topic, 1, 0, 0, 0), 12).await;
    assert_eq!(
        resp.responses[0].partitions[0].error_code,
        ErrorCode::UnknownTopicOrPartition.code()
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn create_topics_validates() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let code = |r: &CreateTopicsResponse| ErrorCode::from_code(r.topics[0].error_code);
    let name = topic_name("valid");
    let mut req = create_req(&name, 3, &[("retention.ms", "1000")]);
    req.validate_only = true;
    let r = c.call(&req, 7).await;
    assert_eq!(code(&r), ErrorCode::None);
    assert_eq!(r.topics[0].num_partitions, 3);
    let r = c
        .call(&create_req(&name, 3, &[("retention.ms", "1000")]), 7)
        .await;
    assert_eq!(code(&r), ErrorCode::None, "validate_only created nothing");
    let cfg = r.topics[0].configs.as_ref().unwrap();
    assert!(cfg
        .iter()
        .any(|c| c.name == "retention.ms" && c.value.as_deref() == Some("1000")));
    assert_eq!(
        code(&c.call(&create_req(&name, 1, &[]), 7).await),
        ErrorCode::TopicAlreadyExists
    );
    assert_eq!(
        code(&c.call(&create_req("bad/name", 1, &[]), 7).await),
        ErrorCode::InvalidTopicException
    );
    assert_eq!(
        code(&c.call(&create_req("..", 1, &[]), 7).await),
        ErrorCode::InvalidTopicException
    );
    assert_eq!(
        code(&c.call(&create_req(&"x".repeat(250), 1, &[]), 7).await),
        ErrorCode::InvalidTopicException
    );
    assert_eq!(
        code(&c.call(&create_req("zero", 0, &[]), 7).await),
        ErrorCode::InvalidPartitions
    );
    assert_eq!(
        code(&c.call(&create_req("cfg", 1, &[("no.such", "1")]), 7).await),
        ErrorCode::InvalidConfig
    );
    assert_eq!(
        code(
            &c.call(
                &create_req("cfg", 1, &[("message.timestamp.type", "Now")]),
                7
            )
            .await
        ),
        ErrorCode::InvalidConfig
    );
    let mut req = create_req("rf", 1, &[]);
    req.topics[0].replication_factor = 3;
    assert_eq!(
        code(&c.call(&req, 7).await),
        ErrorCode::InvalidReplicationFactor
    );
    let mut req = create_req("assigned", -1, &[]);
    req.topics[0].assignments = vec![
        CreatableReplicaAssignment {
            partition_index: 0,
            broker_ids: vec![0],
        },
        CreatableReplicaAssignment {
            partition_index: 1,
            broker_ids: vec![0],
        },
    ];
    let r = c.call(&req, 5).await;
    assert_eq!(code(&r), ErrorCode::None);
    assert_eq!(r.topics[0].num_partitions, 2);
    broker.shutdown().await;
}

#[tokio::test]
async fn metadata_topic_list_semantics_and_auto_create() {
    let broker = Broker::start(
        BrokerConfig::in_memory()
            .with_auto_create_topics(true)
            .with_default_num_partitions(3),
    )
    .await
    .unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let name = topic_name("meta");
    create_topic(&mut c, &name, 1).await;
    let all_v0 = c
        .call(
            &MetadataRequest {
                topics: Some(vec![]),
                ..Default::default()
            },
            0,
        )
        .await;
    assert_eq!(all_v0.topics.len(), 1);
    let none_v1 = c
        .call(
            &MetadataRequest {
                topics: Some(vec![]),
                ..Default::default()
            },
            1,
        )
        .await;
    assert!(none_v1.topics.is_empty());
    let all_v1 = c
        .call(
            &MetadataRequest {
                topics: None,
                ..Default::default()
            },
            1,
        )
        .await;
    assert_eq!(all_v1.topics.len(), 1);
    let ask = |name: &str, auto: bool| MetadataRequest {
        topics: Some(vec![MetadataRequestTopic {
            name: Some(name.into()),
            ..Default::default()
        }]),
        allow_auto_topic_creation: auto,
        ..Default::default()
    };
    let r = c.call(&ask("nope", false), 12).await;
    assert_eq!(
        r.topics[0].error_code,
        ErrorCode::UnknownTopicOrPartition.code()
    );
    let r = c.call(&ask("auto", true), 12).await;
    assert_eq!(r.topics[0].error_code, 0);
    assert_eq!(r.topics[0].partitions.len(), 3);
    broker.shutdown().await;
}

#[tokio::test]
async fn pipelined_requests_answer_in_order_and_long_poll_wakes() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("pipe");
    create_topic(&mut c, &topic, 1).await;
    // A long-polling fetch on an empty partition, then more requests behind it.
    let f = c.send(&fetch_req(&topic, 0, 0, 60_000, 1), 12).await;
    let m = c
        .send(
            &MetadataRequest {
                topics: None,
                ..Default::default()
            },
            12,
        )
        .await;
    let p = c
        .send(&produce_req(&topic, 0, 1, records(5, &["wake"])), 9)
        .await;
    let (got, fetch) = c.recv::<FetchRequest>(12).await;
    assert_eq!(got, f);
    // It can only hold the record because the produce behind it woke it.
    assert_eq!(values(&fetch.responses[0].partitions[0].records), ["wake"]);
    assert_eq!(c.recv::<MetadataRequest>(12).await.0, m);
    assert_eq!(c.recv::<ProduceRequest>(9).await.0, p);
    broker.shutdown().await;
}

#[tokio::test]
async fn acks_zero_gets_no_response() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("acks0");
    create_topic(&mut c, &topic, 1).await;
    for i in 0..5 {
        c.send(&produce_req(&topic, 0, 0, records(i, &["x"])), 9)
            .await;
    }
    let bad = c
        .send(&produce_req(&topic, 0, 7, records(0, &["y"])), 9)
        .await;
    let (got, resp) = c.recv::<ProduceRequest>(9).await;
    assert_eq!(got, bad, "acks=0 produces were not answered");
    assert_eq!(
        resp.responses[0].partition_responses[0].error_code,
        ErrorCode::InvalidRequiredAcks.code()
    );
    let resp = c.call(&fetch_req(&topic, 0, 0, 0, 0), 12).await;
    assert_eq!(values(&resp.responses[0].partitions[0].records).len(), 5);
    broker.shutdown().await;
}

#[tokio::test]
async fn corrupt_batches_are_rejected_and_log_append_time_is_stamped() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("crc");
    let r = c
        .call(
            &create_req(&topic, 1, &[("message.timestamp.type", "LogAppendTime")]),
            7,
        )
        .await;
    assert_eq!(r.topics[0].error_code, 0);
    let mut bad = BytesMut::from(&records(1, &["good", "bad"])[..]);
    let n = bad.len();
    bad[n - 2] ^= 0xFF;
    let resp = c.call(&produce_req(&topic, 0, 1, bad.freeze()), 9).await;
    assert_eq!(
        resp.responses[0].partition_responses[0].error_code,
        ErrorCode::CorruptMessage.code()
    );
    let resp = c
        .call(&produce_req(&topic, 0, 1, records(1, &["ok"])), 9)
        .await;
    let p = &resp.responses[0].partition_responses[0];
    assert_eq!(
        (p.error_code, p.base_offset),
        (0, 0),
        "nothing of the corrupt batch was appended"
    );
    assert!(p.log_append_time_ms > 0);
    let resp = c.call(&fetch_req(&topic, 0, 0, 0, 0), 12).await;
    let recs = resp.responses[0].partitions[0].records.clone().unwrap();
    let batch = RecordBatch::parse(recs).unwrap();
    batch.verify_crc().unwrap();
    assert_eq!(batch.timestamp_type(), TimestampType::LogAppendTime);
    assert_eq!(batch.max_timestamp(), p.log_append_time_ms);
    broker.shutdown().await;
}

#[tokio::test]
async fn restart_keeps_topics_and_data() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = BrokerConfig::on_disk(dir.path()).with_segment_bytes(300);
    let broker = Broker::start(cfg.clone()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    create_topic(&mut c, "kept", 2).await;
    let all = MetadataRequest {
        topics: None,
        ..Default::default()
    };
    let before = c.call(&all, 12).await;
    for i in 0..20 {
        c.call(&produce_req("kept", 1, -1, records(i, &["r"])), 9)
            .await;
    }
    broker.shutdown().await;

    let broker = Broker::start(cfg.clone()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let after = c.call(&all, 12).await;
    assert_eq!(before.cluster_id, after.cluster_id);
    assert_eq!(before.topics[0].topic_id, after.topics[0].topic_id);
    let resp = c.call(&fetch_req("kept", 1, 0, 0, 0), 12).await;
    assert_eq!(values(&resp.responses[0].partitions[0].records).len(), 20);
    c.call(&produce_req("kept", 1, -1, records(0, &["after-crash"])), 9)
        .await;
    drop(broker); // a crash: no shutdown, no flush

    let broker = Broker::start(cfg).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let resp = c.call(&fetch_req("kept", 1, 0, 0, 0), 12).await;
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.high_watermark, 21);
    assert_eq!(
        values(&p.records).last().map(String::as_str),
        Some("after-crash")
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn kip74_first_batch_is_whole_and_corrupt_stored_data_is_never_served() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(BrokerConfig::on_disk(dir.path()))
        .await
        .unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    create_topic(&mut c, "big", 2).await;
    let big = "x".repeat(5_000);
    for p in 0..2 {
        c.call(&produce_req("big", p, 1, records(1, &[&big])), 9)
            .await;
        c.call(&produce_req("big", p, 1, records(2, &["small"])), 9)
            .await;
    }
    let mut req = fetch_req("big", 0, 0, 0, 0);
    req.max_bytes = 100;
    req.topics[0].partitions[0].partition_max_bytes = 100;
    let mut second = req.topics[0].partitions[0].clone();
    second.partition = 1;
    req.topics[0].partitions.push(second);
    let resp = c.call(&req, 12).await;
    let parts = &resp.responses[0].partitions;
    assert_eq!(
        values(&parts[0].records),
        vec![big],
        "one whole batch over the limit"
    );
    assert!(
        values(&parts[1].records).is_empty(),
        "no budget left for the second partition"
    );

    // Damage a stored record byte of partition 1: the broker refuses to serve it.
    let seg = dir.path().join("big-1").join("00000000000000000000.log");
    let mut data = std::fs::read(&seg).unwrap();
    data[100] ^= 0x01;
    std::fs::write(&seg, &data).unwrap();
    let resp = c.call(&fetch_req("big", 1, 0, 0, 0), 12).await;
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, ErrorCode::KafkaStorageError.code());
    assert!(p.records.as_ref().is_none_or(|r| r.is_empty()));
    // The healthy partition is unaffected.
    let resp = c.call(&fetch_req("big", 0, 0, 0, 0), 12).await;
    assert_eq!(values(&resp.responses[0].partitions[0].records).len(), 2);
    broker.shutdown().await;
}

fn describe_configs_req(resources: &[(i8, &str)], keys: Option<&[&str]>) -> DescribeConfigsRequest {
    DescribeConfigsRequest {
        resources: resources
            .iter()
            .map(|(t, n)| DescribeConfigsResource {
                resource_type: *t,
                resource_name: n.to_string(),
                configuration_keys: keys.map(|k| k.iter().map(|s| s.to_string()).collect()),
            })
            .collect(),
        include_synonyms: true,
        include_documentation: false,
    }
}

fn config<'a>(r: &'a DescribeConfigsResult, name: &str) -> &'a DescribeConfigsResourceResult {
    r.configs
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("{name} missing from {r:?}"))
}

/// DescribeConfigs (what Java's `Admin.describeConfigs` sends): a topic's defaults and
/// overrides with their sources, this broker's real settings, per-resource errors.
#[tokio::test]
async fn describe_configs_topics_and_broker() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("configs");
    let r = c
        .call(&create_req(&topic, 1, &[("retention.ms", "3600000")]), 7)
        .await;
    assert_eq!(r.topics[0].error_code, 0);
    for version in 1..=4 {
        let req = describe_configs_req(
            &[
                (RESOURCE_TYPE_TOPIC, &topic),
                (RESOURCE_TYPE_BROKER, "0"),
                (RESOURCE_TYPE_TOPIC, "no-such-topic"),
                (RESOURCE_TYPE_BROKER, "7"),
                (8, "0"),
                (RESOURCE_TYPE_TOPIC, &topic),
            ],
            None,
        );
        let resp = c.call(&req, version).await;
        let [t, b, unknown, other_broker, logger, repeat] = &resp.results[..] else {
            panic!("v{version}: six results expected: {resp:?}");
        };
        assert_eq!(
            (t.error_code, t.resource_name.as_str()),
            (0, topic.as_str())
        );
        let retention = config(t, "retention.ms");
        assert_eq!(retention.value.as_deref(), Some("3600000"));
        assert_eq!(retention.config_source, CONFIG_SOURCE_TOPIC);
        assert_eq!(retention.synonyms.len(), 1);
        let cleanup = config(t, "cleanup.policy");
        assert_eq!(cleanup.value.as_deref(), Some("delete"));
        assert_eq!(cleanup.config_source, CONFIG_SOURCE_DEFAULT);
        // Kafka's retention defaults: 7 days, no size limit.
        let bytes = config(t, "retention.bytes");
        assert_eq!(bytes.value.as_deref(), Some("-1"));
        assert_eq!(bytes.config_source, CONFIG_SOURCE_DEFAULT);
        let segment = config(t, "segment.bytes");
        assert_eq!(
            segment.value.as_deref(),
            Some(BrokerConfig::in_memory().segment_bytes.to_string().as_str())
        );
        if version >= 3 {
            assert_eq!(segment.config_type, 3, "INT");
        }
        assert_eq!(b.error_code, 0);
        assert_eq!(config(b, "node.id").value.as_deref(), Some("0"));
        let advertised = format!("PLAINTEXT://{}", broker.local_addr());
        assert_eq!(
            config(b, "advertised.listeners").value.as_deref(),
            Some(advertised.as_str())
        );
        assert_eq!(
            config(b, "node.id").config_source,
            CONFIG_SOURCE_STATIC_BROKER
        );
        assert_eq!(code(unknown.error_code), ErrorCode::UnknownTopicOrPartition);
        assert_eq!(code(other_broker.error_code), ErrorCode::InvalidRequest);
        assert_eq!(code(logger.error_code), ErrorCode::InvalidRequest);
        assert_eq!(code(repeat.error_code), ErrorCode::InvalidRequest);
        assert!(repeat.configs.is_empty());
    }
    // Named keys only.
    let req = describe_configs_req(&[(RESOURCE_TYPE_TOPIC, &topic)], Some(&["retention.ms"]));
    let resp = c.call(&req, 4).await;
    let names: Vec<&str> = resp.results[0]
        .configs
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["retention.ms"]);
    // A topic that sets no retention.ms reports Kafka's default, 7 days.
    let plain = topic_name("configs-default");
    let r = c.call(&create_req(&plain, 1, &[]), 7).await;
    assert_eq!(r.topics[0].error_code, 0);
    let req = describe_configs_req(&[(RESOURCE_TYPE_TOPIC, &plain)], Some(&["retention.ms"]));
    let resp = c.call(&req, 4).await;
    let retention = config(&resp.results[0], "retention.ms");
    assert_eq!(retention.value.as_deref(), Some("604800000"));
    assert_eq!(retention.config_source, CONFIG_SOURCE_DEFAULT);
    broker.shutdown().await;
}

/// DescribeCluster (what Java's `Admin.describeCluster` sends): the cluster id, this
/// node as broker and controller; controller endpoints are refused.
#[tokio::test]
async fn describe_cluster_names_this_broker() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let meta = c.call(&MetadataRequest::default(), 12).await;
    for version in 0..=1 {
        let resp = c.call(&DescribeClusterRequest::default(), version).await;
        assert_eq!(resp.error_code, 0);
        assert_eq!(Some(resp.cluster_id.clone()), meta.cluster_id);
        assert_eq!(resp.controller_id, 0);
        assert_eq!(resp.brokers.len(), 1);
        assert_eq!(resp.brokers[0].port as u16, broker.local_addr().port());
        assert_eq!(resp.cluster_authorized_operations, i32::MIN);
    }
    let req = DescribeClusterRequest {
        endpoint_type: 2,
        ..Default::default()
    };
    let resp = c.call(&req, 1).await;
    assert_eq!(code(resp.error_code), ErrorCode::UnsupportedEndpointType);
    broker.shutdown().await;
}

fn code(c: i16) -> ErrorCode {
    ErrorCode::from_code(c)
}

/// On a cluster every node answers DescribeConfigs for every topic (from the
/// metadata image) and its own broker id, and DescribeCluster lists every broker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_configs_and_cluster_on_a_cluster_node() {
    let cluster = baton_broker::Cluster::builder()
        .brokers(3)
        .in_memory()
        .start()
        .await
        .unwrap();
    let addrs = cluster.bootstrap_servers();
    let mut first = Client::connect(addrs[0].parse().unwrap()).await;
    let topic = topic_name("cluster-configs");
    let r = first
        .call(&create_req(&topic, 1, &[("min.insync.replicas", "2")]), 7)
        .await;
    assert_eq!(r.topics[0].error_code, 0, "{:?}", r.topics[0].error_message);
    let mut last = Client::connect(addrs[2].parse().unwrap()).await;
    let last_id = cluster.node_ids()[2];
    let req = describe_configs_req(
        &[
            (RESOURCE_TYPE_TOPIC, &topic),
            (RESOURCE_TYPE_BROKER, &last_id.to_string()),
        ],
        None,
    );
    let mut resp = last.call(&req, 4).await;
    for _ in 0..100 {
        if resp.results[0].error_code == 0 {
            break;
        }
        // The node has not replayed the creation yet.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        resp = last.call(&req, 4).await;
    }
    let min_isr = config(&resp.results[0], "min.insync.replicas");
    assert_eq!(min_isr.value.as_deref(), Some("2"));
    assert_eq!(min_isr.config_source, CONFIG_SOURCE_TOPIC);
    let node_id = last_id.to_string();
    assert_eq!(
        config(&resp.results[1], "node.id").value.as_deref(),
        Some(node_id.as_str())
    );
    let described = last.call(&DescribeClusterRequest::default(), 1).await;
    assert_eq!(described.error_code, 0);
    let mut ids: Vec<i32> = described.brokers.iter().map(|b| b.broker_id).collect();
    ids.sort();
    assert_eq!(ids, cluster.node_ids());
    assert_eq!(described.controller_id, last_id);
    cluster.shutdown().await;
}
