//! Scenarios of Baton's transactional producer and read_committed consumers,
//! shared by the suites that run them against Apache Kafka
//! (`tests/interop_suite/apache_kafka/transactions.rs`) and against
//! `baton-broker` (`tests/client/transactions.rs`): commit and abort as
//! read_committed and read_uncommitted consumers see them, offsets committed in a
//! transaction, zombie fencing, the outcome of a dropped commit future, a
//! transaction past its timeout, and the exactly-once pipeline killed and
//! restarted. Each takes a client and the topics it needs, created by the caller.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::task::Poll;
use std::time::Duration;

use baton_broker::history::ExactlyOnce;
use baton_kafka::{
    Client, Consumer, ConsumerRecord, GroupConsumer, IsolationLevel, ProduceError, Producer,
    ProducerRecord, StartOffset, TopicPartition, TransactionError, TransactionOutcome,
};

use crate::exactly_once::{read_output, seed_input, Pipeline};
use crate::{seed, topic_name, Rng};

/// A transactional producer with a fresh id.
async fn txn_producer(client: &Client, id: &str) -> Producer {
    let producer = Producer::builder(client)
        .transactional_id(id.to_string())
        .linger(Duration::from_millis(2))
        .build();
    producer
        .init_transactions()
        .await
        .expect("init_transactions");
    producer
}

/// Values read from `partitions` of `topic` at `isolation` until nothing more
/// comes for 2 s (at least `min` first, within 60 s).
async fn read_all(
    client: &Client,
    topic: &str,
    partitions: i32,
    isolation: IsolationLevel,
    min: usize,
) -> Vec<ConsumerRecord> {
    let mut builder = Consumer::builder(client)
        .isolation_level(isolation)
        .max_wait(Duration::from_millis(100));
    for p in 0..partitions {
        builder = builder.assign(topic.to_string(), p, StartOffset::Earliest);
    }
    let mut consumer = builder.build().await.expect("consumer");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut out = Vec::new();
    loop {
        let wait = if out.len() >= min {
            Duration::from_secs(2)
        } else {
            deadline.saturating_duration_since(tokio::time::Instant::now())
        };
        match tokio::time::timeout(wait, consumer.recv()).await {
            Ok(r) => out.push(r.expect("consumer error")),
            Err(_) => return out,
        }
    }
}

fn values(records: &[ConsumerRecord]) -> Vec<String> {
    let mut v: Vec<String> = records
        .iter()
        .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned())
        .collect();
    v.sort();
    v
}

/// Sends `n` records tagged `tag` over `partitions` partitions; returns their
/// delivery futures.
async fn send_tagged(
    producer: &Producer,
    topic: &str,
    partitions: i32,
    n: usize,
    tag: &str,
) -> Vec<baton_kafka::DeliveryFuture> {
    let mut out = Vec::new();
    for i in 0..n {
        let r = ProducerRecord::new(topic.to_string())
            .partition(i as i32 % partitions)
            .value(format!("{tag}-{i:03}"));
        out.push(producer.send(r).await.expect("accepted in the transaction"));
    }
    out
}

/// Committed transactions are read at read_committed; aborted ones only at
/// read_uncommitted; unsent records of an aborted transaction come back with
/// `TransactionAborted`; records outside a transaction are refused.
///
/// Takes `topic` with 2 partitions, created by the caller.
pub async fn committed_records_are_read_and_aborted_ones_only_uncommitted(
    client: &Client,
    topic: &str,
) {
    let client = client.clone();
    let topic = topic.to_string();
    let producer = txn_producer(&client, &topic_name("txn-commit")).await;

    let refused = producer
        .send(ProducerRecord::new(topic.clone()).value("outside"))
        .await
        .expect_err("no transaction is open");
    assert!(
        matches!(
            &refused,
            ProduceError::Transaction {
                error: TransactionError::NoTransaction,
                ..
            }
        ),
        "{refused:?}"
    );
    assert_eq!(
        refused.into_record().unwrap().value.as_deref(),
        Some(&b"outside"[..])
    );

    producer.begin_transaction().await.unwrap();
    let first = send_tagged(&producer, &topic, 2, 10, "c1").await;
    producer.commit_transaction().await.expect("commit");
    for d in first {
        d.await.expect("committed records are delivered");
    }
    assert!(matches!(
        producer.last_transaction_outcome(),
        Some(TransactionOutcome::Committed)
    ));

    producer.begin_transaction().await.unwrap();
    // Sent and acknowledged before the abort: in the log, then aborted.
    let written = send_tagged(&producer, &topic, 2, 6, "a1").await;
    producer.flush().await;
    // Still in the accumulator when the abort comes (linger 2 ms: most of them).
    let unsent = send_tagged(&producer, &topic, 2, 6, "a2").await;
    producer.abort_transaction().await.expect("abort");
    assert!(matches!(
        producer.last_transaction_outcome(),
        Some(TransactionOutcome::Aborted)
    ));
    for d in written {
        d.await.expect("written before the abort");
    }
    for d in unsent {
        match d.await {
            Ok(_) => {}
            Err(ProduceError::TransactionAborted { record }) => {
                assert!(record.value.as_deref().unwrap().starts_with(b"a2-"));
            }
            Err(e) => panic!("unexpected outcome of an aborted record: {e}"),
        }
    }

    producer.begin_transaction().await.unwrap();
    let last = send_tagged(&producer, &topic, 2, 5, "c2").await;
    producer.commit_transaction().await.expect("commit");
    for d in last {
        d.await.unwrap();
    }

    let committed = read_all(&client, &topic, 2, IsolationLevel::ReadCommitted, 15).await;
    let mut want: Vec<String> = (0..10).map(|i| format!("c1-{i:03}")).collect();
    want.extend((0..5).map(|i| format!("c2-{i:03}")));
    want.sort();
    assert_eq!(values(&committed), want, "read_committed");
    let uncommitted = read_all(&client, &topic, 2, IsolationLevel::ReadUncommitted, 21).await;
    let seen = values(&uncommitted);
    assert!(
        seen.iter().filter(|v| v.starts_with("a1-")).count() == 6,
        "{seen:?}"
    );
    assert!(seen.len() >= 21, "{seen:?}");
    producer.close().await;
}

/// The next `n` records of `consumer`.
async fn take(consumer: &mut GroupConsumer, n: usize) -> Vec<ConsumerRecord> {
    let mut v = Vec::new();
    for _ in 0..n {
        v.push(
            tokio::time::timeout(Duration::from_secs(60), consumer.recv())
                .await
                .expect("input record")
                .unwrap(),
        );
    }
    v
}

/// Offsets sent with the transaction become the group's only when it commits: a
/// consumer of the group resumes after the committed transaction's offsets, not
/// after an aborted one's.
///
/// Takes `input` with 1 partition, `output` with 1 partition, created by the caller.
pub async fn offsets_sent_to_a_transaction_commit_with_it(
    client: &Client,
    input: &str,
    output: &str,
) {
    let client = client.clone();
    let input = input.to_string();
    let output = output.to_string();
    let mut history = ExactlyOnce::new();
    seed_input(&client, &input, 1, 30, &mut history).await;
    let group = topic_name("txn-group");
    let producer = txn_producer(&client, &topic_name("txn-offsets")).await;
    let mut consumer = GroupConsumer::builder(&client, group.clone())
        .subscribe([input.clone()])
        .manual_commit()
        .isolation_level(IsolationLevel::ReadCommitted)
        .max_wait(Duration::from_millis(100))
        .build()
        .await
        .unwrap();
    let tp = TopicPartition::new(input.clone(), 0);
    let batch = take(&mut consumer, 10).await;
    assert_eq!(batch[0].offset, 0);
    producer.begin_transaction().await.unwrap();
    for r in &batch {
        producer
            .send(ProducerRecord::new(output.clone()).value(r.value.clone().unwrap()))
            .await
            .unwrap();
    }
    let meta = consumer.group_metadata();
    assert_eq!(meta.group_id, group);
    assert!(meta.generation_id >= 1, "{meta:?}");
    producer
        .send_offsets_to_transaction([(tp.clone(), 10)], &meta)
        .await
        .expect("offsets in the transaction");
    producer.commit_transaction().await.expect("commit");

    let batch = take(&mut consumer, 10).await;
    assert_eq!(batch[0].offset, 10);
    producer.begin_transaction().await.unwrap();
    producer
        .send_offsets_to_transaction([(tp.clone(), 20)], &consumer.group_metadata())
        .await
        .unwrap();
    producer.abort_transaction().await.expect("abort");
    drop(consumer);

    // A new member of the group starts at 10: the aborted transaction's offset
    // 20 never counted.
    let mut next = GroupConsumer::builder(&client, group)
        .subscribe([input.clone()])
        .manual_commit()
        .isolation_level(IsolationLevel::ReadCommitted)
        .session_timeout(Duration::from_secs(10))
        .max_wait(Duration::from_millis(100))
        .build()
        .await
        .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(90), next.recv())
        .await
        .expect("the group resumes")
        .unwrap();
    assert_eq!(
        first.offset, 10,
        "resumed at the committed transaction's offset"
    );
    let out = read_all(&client, &output, 1, IsolationLevel::ReadCommitted, 10).await;
    assert_eq!(out.len(), 10);
    producer.close().await;
}

/// A second producer with the same transactional id fences the first: the
/// first's open transaction is aborted, and its next transactional call fails
/// with the fatal `ProducerFenced`.
///
/// Takes `topic` with 1 partition, created by the caller.
pub async fn a_newer_producer_fences_the_zombie_and_aborts_its_transaction(
    client: &Client,
    topic: &str,
) {
    let client = client.clone();
    let topic = topic.to_string();
    let id = topic_name("txn-zombie");
    let zombie = txn_producer(&client, &id).await;
    zombie.begin_transaction().await.unwrap();
    let sent = send_tagged(&zombie, &topic, 1, 5, "zombie").await;
    zombie.flush().await;
    for d in sent {
        d.await.expect("written, not yet committed");
    }

    let fresh = txn_producer(&client, &id).await;
    let err = zombie.commit_transaction().await.expect_err("fenced");
    assert!(matches!(err, TransactionError::ProducerFenced), "{err:?}");
    assert!(err.is_fatal());
    let again = zombie.begin_transaction().await.expect_err("still fenced");
    assert!(
        matches!(again, TransactionError::ProducerFenced),
        "{again:?}"
    );

    fresh.begin_transaction().await.unwrap();
    let ok = send_tagged(&fresh, &topic, 1, 3, "fresh").await;
    fresh
        .commit_transaction()
        .await
        .expect("the new producer commits");
    for d in ok {
        d.await.unwrap();
    }
    let read = read_all(&client, &topic, 1, IsolationLevel::ReadCommitted, 3).await;
    assert_eq!(values(&read), vec!["fresh-000", "fresh-001", "fresh-002"]);
    fresh.close().await;
}

/// A commit future dropped at various points (right after its first poll,
/// after timeouts, and in a `select!` against a sleep) has a defined outcome: either the commit was
/// handed to the producer's task and completes (then a following abort finds no
/// transaction), or the transaction is still open and the abort ends it. The
/// reported outcome matches what a read_committed consumer sees.
///
/// Takes `topic` with 2 partitions, created by the caller.
pub async fn dropped_commit_future_has_the_outcome_a_read_committed_consumer_sees(
    client: &Client,
    topic: &str,
) {
    let client = client.clone();
    let topic = topic.to_string();
    // A linger far longer than the test: records go out only when a flush or a
    // commit asks for them, so a commit dropped at its first poll always finds
    // them unacknowledged (with a short linger, a loaded machine could deliver
    // them before that poll, and the commit would be handed over at once).
    let producer = Producer::builder(&client)
        .transactional_id(topic_name("txn-drop"))
        .linger(Duration::from_secs(600))
        .build();
    producer
        .init_transactions()
        .await
        .expect("init_transactions");
    let mut rng = Rng::new(seed());
    let mut want_committed: Vec<String> = Vec::new();
    let mut outcomes = BTreeMap::new();
    for round in 0..12 {
        let tag = format!("r{round:02}");
        producer.begin_transaction().await.unwrap();
        let sent = send_tagged(&producer, &topic, 2, 8, &tag).await;
        let micros = match round {
            0 | 3 | 7 | 11 => 0,
            1..=2 => round * 200,
            _ => rng.below(30_000),
        };
        if round % 4 == 3 {
            // Everything acknowledged: the first poll of commit hands EndTxn to
            // the producer's task, and the zero timeout drops the future then.
            producer.flush().await;
        }
        let finished = if micros == 0 {
            // Dropped right after its first poll. (A zero timeout is not that: the
            // timer fires at its next tick, and a loaded machine can finish the
            // flush before then.)
            let mut commit = std::pin::pin!(producer.commit_transaction());
            match std::future::poll_fn(|cx| Poll::Ready(commit.as_mut().poll(cx))).await {
                Poll::Ready(r) => Some(r),
                Poll::Pending => None,
            }
        } else if round % 3 == 2 {
            tokio::select! {
                r = producer.commit_transaction() => Some(r),
                () = tokio::time::sleep(Duration::from_micros(micros)) => None,
            }
        } else {
            tokio::time::timeout(Duration::from_micros(micros), producer.commit_transaction())
                .await
                .ok()
        };
        let committed = match finished {
            Some(r) => {
                r.expect("commit");
                true
            }
            None => match producer.abort_transaction().await {
                // The commit had been handed over: it finished first.
                Err(TransactionError::InvalidState { .. }) => {
                    assert!(matches!(
                        producer.transaction_outcome().await,
                        Some(TransactionOutcome::Committed)
                    ));
                    true
                }
                Ok(()) => false,
                Err(e) => panic!("abort after a dropped commit: {e}"),
            },
        };
        let reported = producer.last_transaction_outcome();
        match (committed, &reported) {
            (true, Some(TransactionOutcome::Committed))
            | (false, Some(TransactionOutcome::Aborted)) => {}
            _ => panic!("round {round}: committed={committed} but reported {reported:?}"),
        }
        for d in sent {
            // Every record has a final outcome either way.
            let _ = d.await;
        }
        if committed {
            want_committed.extend((0..8).map(|i| format!("{tag}-{i:03}")));
        }
        outcomes.insert(round, (micros, committed));
    }
    // Both sides of the line were hit: dropped while flushing (aborted after),
    // and dropped after EndTxn was handed over (committed anyway).
    assert!(!outcomes[&0].1, "dropped at once: still open, then aborted");
    assert!(
        outcomes[&3].1 && outcomes[&7].1,
        "dropped after hand-over: committed"
    );
    want_committed.sort();
    let read = read_all(
        &client,
        &topic,
        2,
        IsolationLevel::ReadCommitted,
        want_committed.len(),
    )
    .await;
    assert_eq!(values(&read), want_committed, "outcomes {outcomes:?}");
    producer.close().await;
}

/// The exactly-once pipeline: a Baton consume-transform-produce loop, killed
/// mid-run (its task aborted, wherever it was) and restarted with the same
/// transactional id and static group member; its output, read at
/// read_committed, holds every input record exactly once, in input order per
/// partition.
///
/// Takes `input` with 3 partitions, `output` with 3 partitions, created by the caller.
pub async fn exactly_once_pipeline_survives_a_kill_and_restart(
    client: &Client,
    input: &str,
    output: &str,
) {
    let client = client.clone();
    let input = input.to_string();
    let output = output.to_string();
    let total = 600;
    let mut history = ExactlyOnce::new();
    seed_input(&client, &input, 3, total, &mut history).await;
    let pipeline = Pipeline::evenly_seeded(&input, &output, 3, total, 25);
    let committed = pipeline.committed.clone();
    let mut rng = Rng::new(seed());
    for kill in 0..2 {
        let run = {
            let (pipeline, client) = (pipeline.clone(), client.clone());
            tokio::spawn(async move { pipeline.run(&client).await })
        };
        let target = total * (kill + 1) / 3;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        while committed.load(Ordering::SeqCst) < target {
            assert!(tokio::time::Instant::now() < deadline, "pipeline stalled");
            assert!(!run.is_finished(), "pipeline ended early: {:?}", run.await);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_micros(rng.below(20_000))).await;
        run.abort();
        let _ = run.await;
    }
    let last = {
        let (pipeline, client) = (pipeline.clone(), client.clone());
        tokio::spawn(async move { pipeline.run(&client).await })
    };
    tokio::time::timeout(Duration::from_secs(180), last)
        .await
        .expect("the last run finishes")
        .unwrap()
        .expect("the last run succeeds");
    let read = read_output(&client, &output, 3, total, &mut history).await;
    let report = history.check();
    assert!(
        report.passed(),
        "{report}; read {read}; lost {:?}",
        &history.lost()[..history.lost().len().min(20)]
    );
    assert_eq!(report.outputs, total as u64, "{report}");
}

/// A transaction left open past the transaction timeout is aborted by the
/// coordinator (which checks every 10 s by default): its commit fails with the
/// abortable `AbortedOnTimeout`, the abort that follows gets the producer a new
/// epoch, and the next transaction commits.
///
/// Takes `topic` with 1 partition, created by the caller.
pub async fn a_transaction_past_its_timeout_is_aborted_and_the_producer_goes_on(
    client: &Client,
    topic: &str,
) {
    let client = client.clone();
    let topic = topic.to_string();
    let producer = Producer::builder(&client)
        .transactional_id(topic_name("txn-timeout"))
        .transaction_timeout(Duration::from_secs(1))
        .build();
    producer.init_transactions().await.unwrap();
    producer.begin_transaction().await.unwrap();
    let late = send_tagged(&producer, &topic, 1, 3, "late").await;
    producer.flush().await;
    for d in late {
        d.await.expect("written before the timeout");
    }
    tokio::time::sleep(Duration::from_secs(13)).await;
    let err = producer.commit_transaction().await.expect_err("timed out");
    assert!(
        matches!(err, TransactionError::AbortedOnTimeout { .. }),
        "{err:?}"
    );
    assert!(err.is_abortable() && !err.is_fatal());
    producer
        .abort_transaction()
        .await
        .expect("abort after the timeout");
    producer.begin_transaction().await.unwrap();
    let fresh = send_tagged(&producer, &topic, 1, 2, "fresh").await;
    producer
        .commit_transaction()
        .await
        .expect("the next transaction commits");
    for d in fresh {
        d.await.unwrap();
    }
    let read = read_all(&client, &topic, 1, IsolationLevel::ReadCommitted, 2).await;
    assert_eq!(values(&read), vec!["fresh-000", "fresh-001"]);
    producer.close().await;
}
