//! `Admin::delete_records` against baton-broker: on a single node and on a 3-node
//! cluster (each partition's leader deletes; every replica follows), with the
//! typed per-partition errors.

use std::time::Duration;

use baton_broker::Cluster;
use baton_kafka::{Admin, AdminError, NewTopic, OffsetSpec, RecordsToDelete};
use baton_protocol::ErrorCode;
use baton_testkit::client::{broker_and_client, produce_values as produce};
use baton_testkit::topic_name;

async fn earliest(admin: &Admin, topic: &str, partitions: i32) -> Vec<i64> {
    let queries = (0..partitions).map(|p| (topic.to_owned(), p, OffsetSpec::Earliest));
    let got = admin.list_offsets(queries).await.unwrap();
    got.iter().map(|o| o.offset).collect()
}

#[tokio::test]
async fn delete_records_moves_the_log_start_and_reports_typed_errors() {
    let (broker, client) = broker_and_client().await;
    let admin = Admin::new(&client);
    let topic = topic_name("delrec");
    admin.create_topic(topic.clone(), 2, 1).await.unwrap();
    produce(&client, &topic, 0, 10).await;
    produce(&client, &topic, 1, 4).await;

    let deleted = admin
        .delete_records([
            RecordsToDelete::new(topic.clone(), 0, 6),
            RecordsToDelete::new(topic.clone(), 1, RecordsToDelete::HIGH_WATERMARK),
        ])
        .await
        .unwrap();
    let lows: Vec<(i32, i64)> = deleted
        .iter()
        .map(|d| (d.partition, d.low_watermark))
        .collect();
    assert_eq!(lows, [(0, 6), (1, 4)]);
    assert_eq!(earliest(&admin, &topic, 2).await, [6, 4]);

    // Past the high watermark: OFFSET_OUT_OF_RANGE for that partition only.
    let compacted = topic_name("delrec-compacted");
    admin
        .create_topics([NewTopic::new(compacted.clone(), 1, 1).config("cleanup.policy", "compact")])
        .await
        .unwrap();
    match admin
        .delete_records([
            RecordsToDelete::new(topic.clone(), 0, 11),
            RecordsToDelete::new(topic.clone(), 1, 4),
            RecordsToDelete::new(compacted.clone(), 0, 0),
        ])
        .await
    {
        Err(AdminError::Records(errors)) => {
            let got: Vec<(&str, i32, ErrorCode)> = errors
                .iter()
                .map(|e| (e.topic.as_str(), e.partition, e.code))
                .collect();
            assert_eq!(
                got,
                [
                    (topic.as_str(), 0, ErrorCode::OffsetOutOfRange),
                    (compacted.as_str(), 0, ErrorCode::PolicyViolation),
                ]
            );
        }
        other => panic!("expected per-partition errors, got {other:?}"),
    }
    assert_eq!(
        earliest(&admin, &topic, 2).await,
        [6, 4],
        "nothing moved back"
    );
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_reaches_every_leader_of_a_cluster() {
    let cluster = Cluster::builder().brokers(3).start().await.unwrap();
    let client = baton_testkit::cluster::client(&cluster).await;
    let admin = Admin::new(&client).with_operation_timeout(Duration::from_secs(30));
    let topic = topic_name("delrec-cluster");
    admin.create_topic(topic.clone(), 3, 3).await.unwrap();
    for p in 0..3 {
        produce(&client, &topic, p, 8).await;
    }
    let deleted = admin
        .delete_records((0..3).map(|p| RecordsToDelete::new(topic.clone(), p, 2 + p as i64)))
        .await
        .unwrap();
    let lows: Vec<i64> = deleted.iter().map(|d| d.low_watermark).collect();
    assert_eq!(lows, [2, 3, 4]);
    assert_eq!(earliest(&admin, &topic, 3).await, [2, 3, 4]);
    // The answer came once every replica had moved its start.
    for p in 0..3 {
        let view = cluster.partition_state(&topic, p).unwrap();
        for r in &view.replica_states {
            assert_eq!(r.log_start_offset, 2 + p as i64, "{view:?}");
        }
    }
    cluster.shutdown().await;
}
