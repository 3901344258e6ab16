//! Baton's transactional producer and read_committed consumers against the
//! in-process broker (its transaction coordinator, partition side and group
//! coordinator): the scenarios of `baton_testkit::transactions`, which
//! `tests/interop_suite/apache_kafka/transactions.rs` runs against Apache Kafka.

use baton_testkit::client::{broker_and_client, create_topic};
use baton_testkit::transactions as scenario;

/// Committed transactions are read at read_committed; aborted ones only at
/// read_uncommitted; unsent records of an aborted transaction come back with
/// `TransactionAborted`; records outside a transaction are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_records_are_read_and_aborted_ones_only_uncommitted() {
    let (_broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "txn", 2).await;
    scenario::committed_records_are_read_and_aborted_ones_only_uncommitted(&client, &topic).await;
}

/// Offsets sent with the transaction become the group's only when it commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_sent_to_a_transaction_commit_with_it() {
    let (_broker, client) = broker_and_client().await;
    let input = create_topic(&client, "txn-in", 1).await;
    let output = create_topic(&client, "txn-out", 1).await;
    scenario::offsets_sent_to_a_transaction_commit_with_it(&client, &input, &output).await;
}

/// A second producer with the same transactional id fences the first and aborts
/// its open transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_producer_fences_the_zombie_and_aborts_its_transaction() {
    let (_broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "txn-zombie", 1).await;
    scenario::a_newer_producer_fences_the_zombie_and_aborts_its_transaction(&client, &topic).await;
}

/// A dropped commit future's outcome matches what read_committed sees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_commit_future_has_the_outcome_a_read_committed_consumer_sees() {
    let (_broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "txn-drop", 2).await;
    scenario::dropped_commit_future_has_the_outcome_a_read_committed_consumer_sees(&client, &topic)
        .await;
}

/// The exactly-once pipeline, killed twice and restarted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_pipeline_survives_a_kill_and_restart() {
    let (_broker, client) = broker_and_client().await;
    let input = create_topic(&client, "eos-in", 3).await;
    let output = create_topic(&client, "eos-out", 3).await;
    scenario::exactly_once_pipeline_survives_a_kill_and_restart(&client, &input, &output).await;
}

/// A transaction past its timeout is aborted by the coordinator; the producer
/// aborts, gets a new epoch (InitProducerId naming the previous one, KIP-360)
/// and goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_past_its_timeout_is_aborted_and_the_producer_goes_on() {
    let (_broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "txn-timeout", 1).await;
    scenario::a_transaction_past_its_timeout_is_aborted_and_the_producer_goes_on(&client, &topic)
        .await;
}

/// A consumer's position moves past the markers a log ends in (a committed and
/// an aborted transaction), at both isolation levels, so it reaches the log end
/// offset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_position_moves_past_trailing_transaction_markers() {
    use std::time::{Duration, Instant};

    use baton_kafka::{
        Admin, Consumer, IsolationLevel, OffsetSpec, Producer, ProducerRecord, StartOffset,
        TopicPartition,
    };

    let (_broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "txn-markers", 1).await;
    let producer = Producer::builder(&client)
        .transactional_id(format!("{topic}-producer"))
        .build();
    producer.init_transactions().await.expect("init");
    for commit in [true, false] {
        producer.begin_transaction().await.expect("begin");
        let sent = producer
            .send(ProducerRecord::new(topic.clone()).value("v"))
            .await
            .expect("accepted");
        if commit {
            producer.commit_transaction().await.expect("commit");
            sent.await.expect("delivered");
        } else {
            producer.flush().await;
            producer.abort_transaction().await.expect("abort");
        }
    }
    // Two records, two markers. The coordinator writes the markers after it
    // answered EndTxn (as Kafka's does), so the last one may still be on its way.
    let admin = Admin::new(&client);
    let markers_deadline = Instant::now() + Duration::from_secs(30);
    let end = loop {
        let end = admin
            .list_offsets([(topic.as_str(), 0, OffsetSpec::Latest)])
            .await
            .expect("end offset")[0]
            .offset;
        if end >= 4 || Instant::now() > markers_deadline {
            break end;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(end, 4);
    let tp = TopicPartition::new(topic.as_str(), 0);
    for (isolation, records) in [
        (IsolationLevel::ReadUncommitted, 2),
        (IsolationLevel::ReadCommitted, 1),
    ] {
        let mut consumer = Consumer::builder(&client)
            .assign(topic.clone(), 0, StartOffset::Earliest)
            .isolation_level(isolation)
            .build()
            .await
            .expect("consumer");
        let mut read = 0;
        let deadline = Instant::now() + Duration::from_secs(60);
        while consumer.position(&tp) != Some(end) {
            assert!(
                Instant::now() < deadline,
                "{isolation:?}: position {:?}, end {end}, {read} read",
                consumer.position(&tp)
            );
            if let Ok(r) = tokio::time::timeout(Duration::from_millis(200), consumer.recv()).await {
                r.expect("record");
                read += 1;
            }
        }
        assert_eq!(read, records, "{isolation:?}");
    }
}
