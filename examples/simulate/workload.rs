//! What the clients do: produce with the idempotent producer, read back with a
//! consumer, recording every outcome in the history.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_broker::history::{parse_payload, payload, History, ProduceOutcome};
use baton_kafka::{Acks, Client, Consumer, Producer, ProducerRecord, StartOffset};

use crate::scenario::{PARTITIONS, TOPIC};

/// Records produced per seed.
pub const RECORDS: u64 = 200;

/// Produces [`RECORDS`] records round-robin over the partitions with the
/// idempotent `acks=all` producer, recording every outcome.
pub async fn produce(client: &Client, history: &Arc<Mutex<History>>) {
    let producer = Producer::builder(client)
        .acks(Acks::All)
        .idempotence(true)
        .request_timeout(Duration::from_secs(5))
        .delivery_timeout(Duration::from_secs(60))
        .linger(Duration::from_millis(2))
        .build();
    let mut deliveries = tokio::task::JoinSet::new();
    for id in 0..RECORDS {
        let bytes = payload(id, 16 + (id % 32) as usize);
        let (_, sum) = parse_payload(&bytes).expect("own payload");
        let record = ProducerRecord::new(TOPIC)
            .partition((id % PARTITIONS as u64) as i32)
            .value(bytes);
        history
            .lock()
            .expect("history")
            .produced(id, sum, ProduceOutcome::Unknown);
        match producer.send(record).await {
            Ok(d) => {
                let history = history.clone();
                deliveries.spawn(async move {
                    let outcome = match d.await {
                        Ok(m) => ProduceOutcome::Acked {
                            partition: m.partition,
                            offset: m.offset,
                        },
                        Err(_) => ProduceOutcome::Failed,
                    };
                    history.lock().expect("history").produced(id, sum, outcome);
                });
            }
            Err(_) => history
                .lock()
                .expect("history")
                .produced(id, sum, ProduceOutcome::Failed),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    while deliveries.join_next().await.is_some() {}
    producer.close().await;
}

/// Reads every partition from the start until it holds at least as many records
/// as were acknowledged and nothing more arrives for a while.
pub async fn consume(client: &Client, history: &mut History) {
    let acked = history.check().acknowledged as usize;
    let mut builder = Consumer::builder(client).max_wait(Duration::from_millis(100));
    for p in 0..PARTITIONS {
        builder = builder.assign(TOPIC.to_owned(), p, StartOffset::Earliest);
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    // Building resolves the start offsets; while a partition has no leader it
    // fails after the request timeout, and an application tries again.
    let mut consumer = loop {
        match builder.clone().build().await {
            Ok(c) => break c,
            Err(e) if tokio::time::Instant::now() < deadline => {
                eprintln!("consumer: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => {
                eprintln!("consumer: {e}");
                return;
            }
        }
    };
    loop {
        let idle = if history.consumed_count() < acked {
            Duration::from_secs(20)
        } else {
            Duration::from_secs(1)
        };
        let wait = idle.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
        match tokio::time::timeout(wait, consumer.recv()).await {
            Ok(Ok(r)) => match r.value.as_deref().and_then(parse_payload) {
                Some((id, sum)) => history.consumed(r.partition, r.offset, id, sum),
                None => history.consumed(r.partition, r.offset, u64::MAX, 0),
            },
            Ok(Err(e)) => {
                eprintln!("consumer: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(_) => break,
        }
    }
}
