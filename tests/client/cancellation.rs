//! Typed cancellation against the in-process broker: every way of giving up on a
//! record (cancel, `tokio::time::timeout`, `select!`, a `CancellationToken`, a
//! dropped future, flush and close deadlines) has the outcome the types promise,
//! and the producer lets go of a record's buffers exactly when its outcome is final.
//!
//! "Never sent" is made certain, not timed: a producer whose linger is far away, or
//! whose broker is down before it got its producer id, cannot have sent the record.
//! "In flight" is made certain the same way: the record's broker is down after the
//! producer got its id, so the batch leaves the accumulator and keeps failing.
//!
//! The last tests drive futures poll by poll (`tokio_test::task`) and drop them
//! between polls, each after a different number of polls, so that every point a
//! future can be abandoned at is exercised, not just the first.

use std::task::Poll;
use std::time::Duration;

use baton_broker::{Broker, BrokerConfig, BrokerHandle};
use baton_kafka::{
    Admin, CancelOutcome, CancellationToken, Client, GroupConsumer, OffsetSpec, ProduceError,
    Producer, ProducerRecord, TopicPartition,
};
use baton_testkit::client::{create_topic, produce_values};
use baton_testkit::topic_name;
use bytes::{Bytes, BytesMut};
use tokio::time::Instant;
use tokio_test::{assert_pending, assert_ready, task};

/// A value in its own buffer, so `try_into_mut` tells whether anyone else holds it.
fn pooled(text: &str) -> Bytes {
    BytesMut::from(text.as_bytes()).freeze()
}

async fn end_offset(client: &Client, topic: &str, partition: i32) -> i64 {
    Admin::new(client)
        .list_offsets([(topic.to_string(), partition, OffsetSpec::Latest)])
        .await
        .expect("list offsets")[0]
        .offset
}

/// A broker on disk (so it can restart on the same address) and a client whose
/// timeouts suit a broker that goes away.
async fn restartable() -> (tempfile::TempDir, BrokerHandle, Client) {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(BrokerConfig::on_disk(dir.path()))
        .await
        .unwrap();
    let client = Client::builder([broker.bootstrap()])
        .request_timeout(Duration::from_secs(5))
        .connect_timeout(Duration::from_secs(1))
        .build()
        .await
        .unwrap();
    (dir, broker, client)
}

#[tokio::test]
async fn cancelling_a_queued_record_hands_it_back_and_it_is_never_written() {
    let (broker, client) = baton_testkit::client::broker_and_client().await;
    let topic = create_topic(&client, "cancel-queued", 1).await;
    let producer = Producer::builder(&client)
        .linger(Duration::from_secs(3600))
        .build();
    let value = pooled("never on the wire");
    let kept = producer
        .send(ProducerRecord::new(topic.clone()).partition(0).value(value))
        .await
        .unwrap();
    let other = producer
        .send(
            ProducerRecord::new(topic.clone())
                .partition(0)
                .value("stays"),
        )
        .await
        .unwrap();
    assert_eq!(producer.outstanding(), 2);
    let record = match kept.cancel() {
        CancelOutcome::NeverSent(record) => record,
        other => panic!("expected NeverSent, got {other:?}"),
    };
    assert_eq!(producer.outstanding(), 1);
    // The producer kept no reference: the buffer can go back to a pool.
    let buf = record
        .value
        .unwrap()
        .try_into_mut()
        .expect("the producer released the buffer");
    assert_eq!(&buf[..], b"never on the wire");

    // The other record of the same batch is unaffected.
    producer.flush().await;
    let meta = other.await.unwrap();
    assert_eq!(meta.offset, 0);
    assert_eq!(
        end_offset(&client, &topic, 0).await,
        1,
        "only one record written"
    );
    producer.close().await;
    broker.shutdown().await;
}

#[tokio::test]
async fn cancelling_after_delivery_reports_delivered() {
    let (broker, client) = baton_testkit::client::broker_and_client().await;
    let topic = create_topic(&client, "cancel-late", 1).await;
    let producer = Producer::builder(&client).build();
    let delivery = producer
        .send(ProducerRecord::new(topic.clone()).value("v"))
        .await
        .unwrap();
    producer.flush().await;
    match delivery.cancel() {
        CancelOutcome::Delivered(meta) => assert_eq!(meta.offset, 0),
        other => panic!("expected Delivered, got {other:?}"),
    }
    producer.close().await;
    broker.shutdown().await;
}

/// Before the producer has its id, nothing can be on the wire: every way of giving
/// up ends in NeverSent.
#[tokio::test]
async fn timeout_select_and_token_on_a_record_that_cannot_leave() {
    let (broker, client) = baton_testkit::client::broker_and_client().await;
    let topic = create_topic(&client, "cancel-ways", 1).await;
    // The broker goes away before the producer ever asked for its producer id.
    broker.shutdown().await;
    let producer = Producer::builder(&client)
        .retry_backoff(Duration::from_millis(10))
        .build();

    // tokio::time::timeout around `&mut delivery`, then cancel.
    let mut d = producer
        .send(ProducerRecord::new(topic.clone()).value(pooled("a")))
        .await
        .unwrap();
    assert!(tokio::time::timeout(Duration::from_millis(50), &mut d)
        .await
        .is_err());
    let CancelOutcome::NeverSent(r) = d.cancel() else {
        panic!("expected NeverSent")
    };
    assert!(r.value.unwrap().try_into_mut().is_ok());

    // select! with another branch winning, then cancel.
    let mut d = producer
        .send(ProducerRecord::new(topic.clone()).value(pooled("b")))
        .await
        .unwrap();
    tokio::select! {
        r = &mut d => panic!("cannot be delivered without a broker: {r:?}"),
        () = tokio::time::sleep(Duration::from_millis(20)) => {}
    }
    assert!(matches!(d.cancel(), CancelOutcome::NeverSent(_)));

    // A CancellationToken.
    let token = CancellationToken::new();
    let d = producer
        .send(ProducerRecord::new(topic.clone()).value(pooled("c")))
        .await
        .unwrap();
    let waiter = tokio::spawn({
        let token = token.clone();
        async move { d.until_cancelled(&token).await }
    });
    token.cancel();
    match waiter.await.unwrap() {
        CancelOutcome::NeverSent(r) => assert_eq!(r.value.as_deref(), Some(&b"c"[..])),
        other => panic!("expected NeverSent, got {other:?}"),
    }

    // A token that fired before the record was accepted.
    let err = producer
        .send_with_cancel(ProducerRecord::new(topic.clone()).value("d"), &token)
        .await
        .unwrap_err();
    assert!(matches!(err, ProduceError::Cancelled { .. }), "{err:?}");
    assert_eq!(err.into_record().unwrap().value.as_deref(), Some(&b"d"[..]));
    assert_eq!(producer.outstanding(), 0);
    assert_eq!(producer.close_timeout(Duration::from_secs(5)).await, Ok(()));
}

#[tokio::test]
async fn send_with_cancel_gives_up_while_waiting_for_buffer_memory() {
    let (broker, client) = baton_testkit::client::broker_and_client().await;
    let topic = create_topic(&client, "cancel-memory", 1).await;
    let producer = Producer::builder(&client)
        .buffer_memory(300)
        .linger(Duration::from_secs(3600))
        .build();
    let first = producer
        .send(ProducerRecord::new(topic.clone()).value(vec![0u8; 150]))
        .await
        .unwrap();
    let token = CancellationToken::new();
    let waiting = {
        let producer = producer.clone();
        let token = token.clone();
        let topic = topic.clone();
        tokio::spawn(async move {
            producer
                .send_with_cancel(ProducerRecord::new(topic).value(vec![1u8; 150]), &token)
                .await
        })
    };
    tokio::task::yield_now().await;
    token.cancel();
    let err = waiting.await.unwrap().unwrap_err();
    assert!(matches!(err, ProduceError::Cancelled { .. }), "{err:?}");
    producer.flush().await;
    first.await.unwrap();
    assert_eq!(end_offset(&client, &topic, 0).await, 1);
    producer.close().await;
    broker.shutdown().await;
}

/// The broker goes down after the producer got its id: the record's batch leaves the
/// accumulator and keeps failing. Cancelling it then says InFlight, the producer
/// keeps the buffer, and once the broker is back the record is delivered exactly
/// once and the buffer comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_mid_retry_is_in_flight_and_still_delivered_once() {
    let (dir, broker, client) = restartable().await;
    let addr = broker.local_addr();
    let topic = create_topic(&client, "cancel-retry", 1).await;
    let producer = Producer::builder(&client)
        .linger(Duration::ZERO)
        .retry_backoff(Duration::from_millis(20))
        .request_timeout(Duration::from_secs(5))
        .build();
    producer
        .send(ProducerRecord::new(topic.clone()).value("first"))
        .await
        .unwrap()
        .await
        .unwrap();
    broker.shutdown().await;

    let value = pooled("mid-retry");
    let watch = value.clone();
    let mut d = producer
        .send(ProducerRecord::new(topic.clone()).value(value))
        .await
        .unwrap();
    // Let the sender take the batch and fail at least once (there is no broker;
    // the sender takes a batch as soon as it is woken, linger being zero).
    assert!(tokio::time::timeout(Duration::from_secs(1), &mut d)
        .await
        .is_err());
    let in_flight = match d.cancel() {
        CancelOutcome::InFlight(h) => h,
        other => panic!("expected InFlight, got {other:?}"),
    };
    // Still held by the producer: a pool must not reuse it.
    let watch = watch
        .try_into_mut()
        .expect_err("the producer still holds it");

    let broker = Broker::start(BrokerConfig::on_disk(dir.path()).with_listen(addr))
        .await
        .unwrap();
    let meta = tokio::time::timeout(Duration::from_secs(60), in_flight)
        .await
        .expect("delivered after the restart")
        .expect("delivered");
    assert_eq!(meta.offset, 1);
    let record = meta.into_record();
    drop(record);
    watch
        .try_into_mut()
        .expect("released once the outcome is final");
    assert_eq!(end_offset(&client, &topic, 0).await, 2, "written once");
    producer.close().await;
    broker.shutdown().await;
}

/// A dropped DeliveryFuture does not cancel: the record is delivered, and the
/// producer drops its reference when the outcome is final.
#[tokio::test]
async fn a_dropped_delivery_future_still_delivers_then_releases() {
    let (broker, client) = baton_testkit::client::broker_and_client().await;
    let topic = create_topic(&client, "cancel-drop", 1).await;
    let producer = Producer::builder(&client)
        .linger(Duration::from_secs(3600))
        .build();
    let value = pooled("dropped handle");
    let watch = value.clone();
    drop(
        producer
            .send(ProducerRecord::new(topic.clone()).value(value))
            .await
            .unwrap(),
    );
    let watch = watch
        .try_into_mut()
        .expect_err("queued: the producer holds it");
    producer.flush().await;
    assert_eq!(end_offset(&client, &topic, 0).await, 1);
    watch.try_into_mut().expect("released after delivery");
    producer.close().await;
    broker.shutdown().await;
}

#[tokio::test]
async fn flush_and_close_deadlines_report_what_is_pending() {
    let (broker, client) = baton_testkit::client::broker_and_client().await;
    let topic = create_topic(&client, "cancel-flush", 1).await;
    broker.shutdown().await;
    let producer = Producer::builder(&client)
        .retry_backoff(Duration::from_millis(10))
        .build();
    let mut deliveries = Vec::new();
    for i in 0..3 {
        deliveries.push(
            producer
                .send(ProducerRecord::new(topic.clone()).value(format!("v{i}")))
                .await
                .unwrap(),
        );
    }
    let err = producer
        .flush_timeout(Duration::from_millis(100))
        .await
        .unwrap_err();
    assert_eq!(err.pending, 3);
    let err = producer
        .close_timeout(Duration::from_millis(100))
        .await
        .unwrap_err();
    assert_eq!(err.pending, 3);
    assert!(matches!(
        producer.send(ProducerRecord::new(topic.clone())).await,
        Err(ProduceError::Closed { .. })
    ));
    // Never sent (no producer id without a broker): all three come back.
    for d in deliveries {
        assert!(matches!(d.cancel(), CancelOutcome::NeverSent(_)));
    }
    assert_eq!(producer.outstanding(), 0);
    assert_eq!(producer.close_timeout(Duration::from_secs(5)).await, Ok(()));
}

/// Waits (polling, with a generous deadline) until `cond` holds.
async fn eventually(what: &str, mut cond: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cond().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `send` waiting for buffer memory, dropped after its first, second and third
/// poll: the record was never accepted (nothing outstanding, its buffer free for
/// a pool); the same wait cancelled by a token wakes the task and hands the
/// record back; and the producer still delivers afterwards.
#[tokio::test]
async fn send_dropped_after_each_poll_while_waiting_for_memory_never_accepts_the_record() {
    let (broker, client) = baton_testkit::client::broker_and_client().await;
    let topic = create_topic(&client, "poll-send", 1).await;
    let producer = Producer::builder(&client)
        .buffer_memory(300)
        .linger(Duration::from_secs(3600))
        .build();
    let first = producer
        .send(ProducerRecord::new(topic.clone()).value(vec![0u8; 150]))
        .await
        .unwrap();
    for polls in 1..=3 {
        let value = BytesMut::from(&[1u8; 150][..]).freeze();
        let watch = value.clone();
        let mut send = task::spawn(producer.send(ProducerRecord::new(topic.clone()).value(value)));
        for _ in 0..polls {
            assert_pending!(send.poll(), "no memory until the first record is delivered");
            tokio::task::yield_now().await;
        }
        drop(send);
        assert_eq!(producer.outstanding(), 1, "dropped after {polls} poll(s)");
        watch
            .try_into_mut()
            .expect("the dropped send left no reference to the record");
    }

    let token = CancellationToken::new();
    let mut send = task::spawn(producer.send_with_cancel(
        ProducerRecord::new(topic.clone()).value(vec![2u8; 150]),
        &token,
    ));
    assert_pending!(send.poll());
    token.cancel();
    assert!(
        send.is_woken(),
        "cancelling the token wakes the waiting send"
    );
    match assert_ready!(send.poll()) {
        Err(ProduceError::Cancelled { record }) => {
            assert_eq!(record.value.as_deref(), Some(&[2u8; 150][..]))
        }
        other => panic!("expected Cancelled, got {other:?}"),
    }
    drop(send);

    // The wait itself still completes once memory is free.
    let mut send =
        task::spawn(producer.send(ProducerRecord::new(topic.clone()).value(vec![3u8; 150])));
    assert_pending!(send.poll());
    producer.flush().await;
    first.await.expect("the first record is delivered");
    eventually("the waiting send is woken", async || send.is_woken()).await;
    let last = assert_ready!(send.poll()).expect("accepted once memory is free");
    drop(send);
    producer.flush().await;
    assert_eq!(last.await.expect("delivered").offset, 1);
    assert_eq!(
        end_offset(&client, &topic, 0).await,
        2,
        "nothing else written"
    );
    producer.close().await;
    broker.shutdown().await;
}

/// `flush` dropped after its first poll, before the sender ran, and again after
/// the batch reached the broker: the records are delivered anyway, and a later
/// flush still works.
#[tokio::test]
async fn a_dropped_flush_stops_the_waiting_only() {
    let (broker, client) = baton_testkit::client::broker_and_client().await;
    let topic = create_topic(&client, "poll-flush", 1).await;
    let producer = Producer::builder(&client)
        .linger(Duration::from_secs(3600))
        .build();
    let a = producer
        .send(ProducerRecord::new(topic.clone()).value("a"))
        .await
        .unwrap();
    let mut flush = task::spawn(producer.flush());
    assert_pending!(flush.poll(), "no delivery within one poll");
    eventually("the flushed record is on the broker", async || {
        end_offset(&client, &topic, 0).await == 1
    })
    .await;
    drop(flush);
    assert_eq!(a.await.expect("delivered").offset, 0);

    let b = producer
        .send(ProducerRecord::new(topic.clone()).value("b"))
        .await
        .unwrap();
    let mut flush = task::spawn(producer.flush());
    assert_pending!(flush.poll());
    drop(flush);
    producer.flush().await;
    assert_eq!(b.await.expect("delivered").offset, 1);
    assert_eq!(producer.outstanding(), 0);
    producer.close().await;
    broker.shutdown().await;
}

/// A group consumer whose `recv` is dropped after one, two or three polls in
/// turn (and whose records arrive only through the calls that did complete)
/// returns every record exactly once and in order; a `commit` dropped after its
/// first poll leaves the consumer usable, and the next commit stores the
/// position.
#[tokio::test]
async fn group_recv_and_commit_dropped_between_polls_lose_nothing() {
    let (broker, client) = baton_testkit::client::broker_and_client().await;
    let topic = create_topic(&client, "poll-group", 1).await;
    const N: usize = 30;
    produce_values(&client, &topic, 0, N).await;
    let mut consumer = GroupConsumer::builder(&client, topic_name("poll-group"))
        .subscribe([topic.clone()])
        .manual_commit()
        .heartbeat_interval(Duration::from_millis(100))
        .session_timeout(Duration::from_secs(10))
        .max_wait(Duration::from_millis(50))
        .build()
        .await
        .unwrap();

    let mut seen = Vec::new();
    let mut dropped = 0;
    let mut polls = 1;
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < N {
        assert!(
            Instant::now() < deadline,
            "only {} of {N} records",
            seen.len()
        );
        let mut recv = task::spawn(consumer.recv());
        let mut got = None;
        for _ in 0..polls {
            if let Poll::Ready(r) = recv.poll() {
                got = Some(r.expect("recv"));
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(recv);
        match got {
            Some(r) => seen.push((r.offset, r.value.expect("a value"))),
            None => dropped += 1,
        }
        polls = polls % 3 + 1;
    }
    assert!(dropped > 0, "some recv was dropped while pending");
    for (i, (offset, value)) in seen.iter().enumerate() {
        assert_eq!(*offset, i as i64, "each record once, in order");
        assert_eq!(value.as_ref(), format!("v{i}").as_bytes());
    }

    let tp = TopicPartition::new(topic.clone(), 0);
    let mut commit = task::spawn(consumer.commit());
    assert_pending!(commit.poll(), "a commit needs the coordinator's answer");
    drop(commit);
    consumer.commit().await.expect("commit after a dropped one");
    assert_eq!(consumer.committed(&tp), Some(N as i64));

    produce_values(&client, &topic, 0, 1).await;
    let next = tokio::time::timeout(Duration::from_secs(60), consumer.recv())
        .await
        .expect("a record produced later")
        .expect("recv");
    assert_eq!(next.offset, N as i64);
    consumer.close().await.unwrap();
    broker.shutdown().await;
}
