//! Consumer: start positions, cancel-safe `recv`, `Stream`, out-of-range reset,
//! seek / pause / resume and assignment changes.

use std::time::Duration;

use baton_kafka::{
    Consumer, ConsumerError, ConsumerRecord, OffsetReset, Producer, ProducerRecord, StartOffset,
};
use baton_testkit::client::{broker_and_client, create_topic};
use futures_core::Stream;

/// Produces `n` records `v0..v{n-1}` to partition 0 with timestamps 10_000 + 100*i.
async fn fill(client: &baton_kafka::Client, topic: &str, from: usize, n: usize) {
    let producer = Producer::builder(client).build();
    let mut ds = Vec::new();
    for i in from..from + n {
        let r = ProducerRecord::new(topic)
            .partition(0)
            .value(format!("v{i}"))
            .timestamp(10_000 + 100 * i as i64);
        ds.push(producer.send(r).await.unwrap());
    }
    for d in ds {
        d.await.unwrap();
    }
    producer.close().await;
}

async fn next(consumer: &mut Consumer) -> ConsumerRecord {
    tokio::time::timeout(Duration::from_secs(30), consumer.recv())
        .await
        .expect("a record arrives")
        .expect("no error")
}

async fn consumer_at(client: &baton_kafka::Client, topic: &str, start: StartOffset) -> Consumer {
    Consumer::builder(client)
        .assign(topic, 0, start)
        .max_wait(Duration::from_millis(50))
        .build()
        .await
        .unwrap()
}

/// A consumer assigned a topic that metadata does not name (not created yet; the
/// same answer comes from a broker that restarted and has not replayed the topic
/// yet) is told once, with a typed error, and keeps trying: once the topic
/// exists, its records arrive. (It used to stop fetching the partition for good.)
#[tokio::test]
async fn a_topic_missing_from_metadata_is_fetched_once_it_appears() {
    let (_broker, client) = broker_and_client().await;
    let topic = baton_testkit::topic_name("appears-later");
    let mut consumer = consumer_at(&client, &topic, StartOffset::Offset(0)).await;
    let first = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
        .await
        .expect("an answer");
    assert!(
        matches!(
            first,
            Err(ConsumerError::Client(
                baton_kafka::ClientError::UnknownTopic { .. }
            ))
        ),
        "{first:?}"
    );
    baton_kafka::Admin::new(&client)
        .create_topic(topic.clone(), 1, 1)
        .await
        .expect("topic created");
    fill(&client, &topic, 0, 3).await;
    for i in 0..3 {
        let r = next(&mut consumer).await;
        assert_eq!(r.value.as_deref(), Some(format!("v{i}").as_bytes()));
    }
}

#[tokio::test]
async fn start_offsets_resolve() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "start", 1).await;
    fill(&client, &topic, 0, 10).await;

    let mut c = consumer_at(&client, &topic, StartOffset::Earliest).await;
    assert_eq!(next(&mut c).await.offset, 0);

    let mut c = consumer_at(&client, &topic, StartOffset::Offset(7)).await;
    let r = next(&mut c).await;
    assert_eq!((r.offset, r.value.as_deref()), (7, Some(&b"v7"[..])));

    // First record at or after t = 10_450 is v5 (10_500).
    let mut c = consumer_at(&client, &topic, StartOffset::Timestamp(10_450)).await;
    let r = next(&mut c).await;
    assert_eq!((r.offset, r.timestamp), (5, 10_500));

    // A timestamp after every record starts at the end: only new records.
    let mut after = consumer_at(&client, &topic, StartOffset::Timestamp(99_999_999)).await;
    let mut latest = consumer_at(&client, &topic, StartOffset::Latest).await;
    fill(&client, &topic, 10, 2).await;
    assert_eq!(next(&mut latest).await.offset, 10);
    assert_eq!(next(&mut latest).await.offset, 11);
    assert_eq!(next(&mut after).await.offset, 10);
    broker.shutdown().await;
}

#[tokio::test]
async fn dropped_recv_futures_lose_no_record() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "cancel", 1).await;
    let mut c = Consumer::builder(&client)
        .assign(topic.clone(), 0, StartOffset::Earliest)
        .channel_capacity(4)
        .max_wait(Duration::from_millis(20))
        .build()
        .await
        .unwrap();
    // Nothing to read yet: each recv is cancelled by the select.
    for _ in 0..20 {
        tokio::select! {
            biased;
            r = c.recv() => panic!("unexpected record {r:?}"),
            _ = tokio::task::yield_now() => {}
        }
    }
    fill(&client, &topic, 0, 100).await;
    let mut expected = 0;
    while expected < 100 {
        // Race every recv against an immediately ready branch; whatever is dropped
        // must come back on a later call.
        tokio::select! {
            biased;
            _ = tokio::task::yield_now() => {}
            r = c.recv() => {
                let r = r.unwrap();
                assert_eq!(r.offset, expected);
                expected += 1;
            }
        }
        if expected < 100 {
            let r = next(&mut c).await;
            assert_eq!(r.offset, expected);
            expected += 1;
        }
    }
    broker.shutdown().await;
}

#[tokio::test]
async fn consumer_is_a_stream() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "stream", 1).await;
    fill(&client, &topic, 0, 3).await;
    let mut c = consumer_at(&client, &topic, StartOffset::Earliest).await;
    let mut got = Vec::new();
    while got.len() < 3 {
        let item = std::future::poll_fn(|cx| std::pin::Pin::new(&mut c).poll_next(cx))
            .await
            .expect("stream continues")
            .unwrap();
        got.push(item.offset);
    }
    assert_eq!(got, vec![0, 1, 2]);
    broker.shutdown().await;
}

#[tokio::test]
async fn out_of_range_offsets_follow_the_reset_policy() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "reset", 1).await;
    fill(&client, &topic, 0, 3).await;

    let mut c = Consumer::builder(&client)
        .assign(topic.clone(), 0, StartOffset::Offset(1_000))
        .offset_reset(OffsetReset::Earliest)
        .build()
        .await
        .unwrap();
    assert_eq!(next(&mut c).await.offset, 0);

    let mut c = Consumer::builder(&client)
        .assign(topic.clone(), 0, StartOffset::Offset(1_000))
        .offset_reset(OffsetReset::Fail)
        .build()
        .await
        .unwrap();
    match tokio::time::timeout(Duration::from_secs(30), c.recv())
        .await
        .unwrap()
    {
        Err(ConsumerError::OffsetOutOfRange {
            offset, partition, ..
        }) => {
            assert_eq!((offset, partition), (1_000, 0))
        }
        other => panic!("expected OffsetOutOfRange, got {other:?}"),
    }
    broker.shutdown().await;
}

/// A consumer's Fetch long poll (the broker holds it up to `max_wait` when there
/// is nothing to read) does not hold back a producer on the same `Client`: the
/// broker answers one connection's requests in order, so fetches use their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_long_poll_does_not_delay_a_producer_on_the_same_client() {
    let (broker, client) = broker_and_client().await;
    let quiet = create_topic(&client, "quiet", 1).await;
    let busy = create_topic(&client, "busy", 1).await;
    let long_poll = Duration::from_secs(20);
    let consumer = Consumer::builder(&client)
        .assign(&quiet, 0, StartOffset::Latest)
        .max_wait(long_poll)
        .build()
        .await
        .unwrap();
    let producer = Producer::builder(&client).build();
    // Let the consumer's first Fetch reach the broker and start waiting.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let delivered = tokio::time::timeout(long_poll / 2, async {
        producer
            .send(ProducerRecord::new(busy.as_str()).partition(0).value("x"))
            .await
            .unwrap()
            .await
    })
    .await
    .expect("the produce is answered while the fetch is still parked")
    .expect("delivered");
    assert_eq!(delivered.offset, 0);
    producer.close().await;
    drop(consumer);
    broker.shutdown().await;
}

/// Produces `n` records `p{partition}-{i}` to `partition`.
async fn fill_partition(
    client: &baton_kafka::Client,
    topic: &str,
    partition: i32,
    from: usize,
    n: usize,
) {
    let producer = Producer::builder(client).build();
    let mut ds = Vec::new();
    for i in from..from + n {
        let r = ProducerRecord::new(topic)
            .partition(partition)
            .value(format!("p{partition}-{i}"));
        ds.push(producer.send(r).await.unwrap());
    }
    for d in ds {
        d.await.unwrap();
    }
    producer.close().await;
}

/// Nothing arrives for a while (a paused or removed partition stays quiet).
async fn quiet(consumer: &mut Consumer) {
    if let Ok(got) = tokio::time::timeout(Duration::from_millis(500), consumer.recv()).await {
        panic!("expected nothing, got {got:?}");
    }
}

#[tokio::test]
async fn seek_pause_and_resume_reposition_a_partition() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "seek", 1).await;
    fill(&client, &topic, 0, 10).await;
    let tp = baton_kafka::TopicPartition::new(topic.as_str(), 0);
    let mut c = consumer_at(&client, &topic, StartOffset::Earliest).await;
    for i in 0..3 {
        assert_eq!(next(&mut c).await.offset, i);
    }
    assert_eq!(c.position(&tp), Some(3));
    // Forward: records 3..6, already fetched, are never returned.
    c.seek(&tp, 7).unwrap();
    assert_eq!(c.position(&tp), Some(7));
    let r = next(&mut c).await;
    assert_eq!((r.offset, r.value.as_deref()), (7, Some(&b"v7"[..])));
    // Back.
    c.seek(&tp, 1).unwrap();
    assert_eq!(next(&mut c).await.offset, 1);
    assert_eq!(c.position(&tp), Some(2));

    c.pause(std::slice::from_ref(&tp));
    assert_eq!(c.paused(), vec![tp.clone()]);
    quiet(&mut c).await;
    c.resume(std::slice::from_ref(&tp));
    assert!(c.paused().is_empty());
    let mut epoch = -1;
    for i in 2..10 {
        let r = next(&mut c).await;
        assert_eq!(r.offset, i, "resumed at the position");
        epoch = r.leader_epoch;
    }
    assert!(epoch >= 0, "records carry their leader epoch");
    // A position with its leader epoch, on a log that was not truncated: validated
    // (KIP-320) and read on without an error.
    c.seek_validated(&tp, 5, epoch).unwrap();
    assert_eq!(next(&mut c).await.offset, 5);

    let other = baton_kafka::TopicPartition::new(topic.as_str(), 5);
    assert!(matches!(
        c.seek(&other, 0),
        Err(ConsumerError::NotAssigned { partition: 5, .. })
    ));
    broker.shutdown().await;
}

#[tokio::test]
async fn partitions_are_added_removed_and_reassigned_while_consuming() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "reassign", 2).await;
    fill_partition(&client, &topic, 0, 0, 4).await;
    fill_partition(&client, &topic, 1, 0, 3).await;
    let p0 = baton_kafka::TopicPartition::new(topic.as_str(), 0);
    let p1 = baton_kafka::TopicPartition::new(topic.as_str(), 1);
    let mut c = consumer_at(&client, &topic, StartOffset::Earliest).await;
    assert_eq!(c.assignment(), vec![p0.clone()]);
    for i in 0..4 {
        let r = next(&mut c).await;
        assert_eq!((r.partition, r.offset), (0, i));
    }

    c.add_partitions([(p1.clone(), StartOffset::Offset(1))])
        .await
        .unwrap();
    assert_eq!(c.assignment(), vec![p0.clone(), p1.clone()]);
    for i in 1..3 {
        let r = next(&mut c).await;
        assert_eq!((r.partition, r.offset), (1, i));
    }

    c.remove_partitions(std::slice::from_ref(&p0));
    assert_eq!(c.assignment(), vec![p1.clone()]);
    assert_eq!(c.position(&p0), None);
    fill_partition(&client, &topic, 0, 4, 2).await;
    fill_partition(&client, &topic, 1, 3, 2).await;
    for i in 3..5 {
        let r = next(&mut c).await;
        assert_eq!(
            (r.partition, r.offset),
            (1, i),
            "only the assigned partition"
        );
    }
    quiet(&mut c).await;

    // p1 keeps its position; p0 comes back from offset 3.
    c.assign([
        (p1.clone(), StartOffset::Earliest),
        (p0.clone(), StartOffset::Offset(3)),
    ])
    .await
    .unwrap();
    assert_eq!(c.assignment(), vec![p0.clone(), p1.clone()]);
    assert_eq!(c.position(&p1), Some(5));
    let mut got: Vec<(i32, i64)> = Vec::new();
    for _ in 0..3 {
        let r = next(&mut c).await;
        got.push((r.partition, r.offset));
    }
    got.sort();
    assert_eq!(got, vec![(0, 3), (0, 4), (0, 5)]);
    quiet(&mut c).await;

    // Nothing assigned: the consumer is closed.
    c.assign(Vec::new()).await.unwrap();
    assert!(matches!(
        tokio::time::timeout(Duration::from_secs(30), c.recv())
            .await
            .unwrap(),
        Err(ConsumerError::Closed)
    ));
    broker.shutdown().await;
}
