//! Baton's `Admin::delete_records` against Apache Kafka: the log start moves
//! (ListOffsets EARLIEST, a consumer from the earliest offset), -1 means the high
//! watermark, and Kafka's refusals come back typed per partition.

use std::time::Duration;

use baton_kafka::{
    Admin, AdminError, Consumer, NewTopic, OffsetSpec, RecordsToDelete, StartOffset,
};
use baton_protocol::ErrorCode;
use baton_testkit::client::produce_values;
use baton_testkit::topic_name;

use super::{client, create_topic};
use crate::apache_kafka_util::single_node;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_moves_the_log_start() {
    let kafka = single_node();
    let _logs = kafka.logs_on_failure();
    let client = client().await;
    let admin = Admin::new(&client);
    let topic = create_topic(&client, "ak-delrec", 2).await;
    for p in 0..2 {
        produce_values(&client, &topic, p, 10).await;
    }

    let deleted = admin
        .delete_records([
            RecordsToDelete::new(topic.clone(), 0, 4),
            RecordsToDelete::new(topic.clone(), 1, RecordsToDelete::HIGH_WATERMARK),
        ])
        .await
        .unwrap();
    let lows: Vec<i64> = deleted.iter().map(|d| d.low_watermark).collect();
    assert_eq!(lows, [4, 10]);
    let starts: Vec<i64> = admin
        .list_offsets([
            (topic.clone(), 0, OffsetSpec::Earliest),
            (topic.clone(), 1, OffsetSpec::Earliest),
        ])
        .await
        .unwrap()
        .iter()
        .map(|o| o.offset)
        .collect();
    assert_eq!(starts, [4, 10]);
    let mut consumer = Consumer::builder(&client)
        .assign(topic.clone(), 0, StartOffset::Earliest)
        .build()
        .await
        .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
        .await
        .expect("a record")
        .unwrap();
    assert_eq!(first.offset, 4);

    // Past the high watermark, and a compacted topic: typed per partition.
    let compacted = topic_name("ak-delrec-compacted");
    admin
        .create_topics([NewTopic::new(compacted.clone(), 1, 1).config("cleanup.policy", "compact")])
        .await
        .unwrap();
    match admin
        .delete_records([
            RecordsToDelete::new(topic.clone(), 0, 11),
            RecordsToDelete::new(compacted.clone(), 0, 0),
        ])
        .await
    {
        Err(AdminError::Records(errors)) => {
            let codes: Vec<ErrorCode> = errors.iter().map(|e| e.code).collect();
            assert_eq!(
                codes,
                [ErrorCode::OffsetOutOfRange, ErrorCode::PolicyViolation],
                "{errors:?}"
            );
        }
        other => panic!("expected per-partition errors, got {other:?}"),
    }
}
