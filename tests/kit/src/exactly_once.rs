//! An exactly-once consume-transform-produce pipeline for scenario tests, against
//! any cluster (Apache Kafka or `baton-broker`).
//!
//! [`seed_input`] writes numbered records to the input topic and records their
//! positions; [`Pipeline::run`] reads the input at read_committed with a
//! [`GroupConsumer`] (a static member, manual commits) and, per batch, opens a
//! transaction, writes each record to the output topic's same partition with a
//! header naming its input position, puts the consumed offsets into the
//! transaction and commits. A run can be killed at any point (its task aborted);
//! a new run with the same transactional id fences the old producer, which
//! aborts its open transaction, and resumes from the offsets committed with the
//! last committed transaction. [`read_output`] reads the output at
//! read_committed into an [`ExactlyOnce`] history.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use baton_broker::history::ExactlyOnce;
use baton_kafka::{
    Client, Consumer, ConsumerGroupMetadata, GroupConsumer, IsolationLevel, Producer,
    ProducerRecord, StartOffset, TopicPartition, TransactionError,
};

use crate::topic_name;

/// The header naming an output record's input position, `partition:offset`.
pub const INPUT_HEADER: &str = "input";

/// Writes `count` records to `topic` (round robin over `partitions`) with a plain
/// producer and records each one's position as an input of `history`.
pub async fn seed_input(
    client: &Client,
    topic: &str,
    partitions: i32,
    count: usize,
    history: &mut ExactlyOnce,
) {
    let producer = Producer::builder(client).build();
    let mut deliveries = Vec::with_capacity(count);
    for i in 0..count {
        let record = ProducerRecord::new(topic.to_string())
            .partition(i as i32 % partitions)
            .key(format!("k{i}"))
            .value(format!("v{i}"));
        deliveries.push(producer.send(record).await.expect("input accepted"));
    }
    for d in deliveries {
        let meta = d.await.expect("input delivered");
        history.input(meta.partition, meta.offset);
    }
    producer.close().await;
}

/// One pipeline run's settings; runs with the same `transactional_id`,
/// `group` and `instance_id` continue each other's work.
#[derive(Debug, Clone)]
pub struct Pipeline {
    /// The input topic.
    pub input: String,
    /// The output topic (at least as many partitions as the input).
    pub output: String,
    /// The consumer group.
    pub group: String,
    /// The producer's transactional id.
    pub transactional_id: String,
    /// The static member's instance id (a new run takes over at once).
    pub instance_id: String,
    /// Most input records per transaction.
    pub batch: usize,
    /// The input topic's end offset per partition: a run stops once its
    /// positions reach them all.
    pub ends: BTreeMap<i32, i64>,
    /// Input records whose transaction committed, over all runs sharing this
    /// counter.
    pub committed: Arc<AtomicUsize>,
}

impl Pipeline {
    /// A pipeline from `input` (`partitions` partitions holding `total` records
    /// spread evenly, as [`seed_input`] writes them) to `output`, `batch` input
    /// records per transaction, with a fresh group, transactional id and
    /// committed counter, and one static member id for all its runs.
    pub fn evenly_seeded(
        input: &str,
        output: &str,
        partitions: i32,
        total: usize,
        batch: usize,
    ) -> Self {
        Pipeline {
            input: input.to_string(),
            output: output.to_string(),
            group: topic_name("eos-group"),
            transactional_id: topic_name("eos-txn"),
            instance_id: "eos-member".into(),
            batch,
            ends: (0..partitions)
                .map(|p| (p, (total / partitions as usize) as i64))
                .collect(),
            committed: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Runs until every input partition is consumed to its end and committed, or
    /// the task is aborted (a crash). Abortable transaction errors abort the
    /// transaction and rewind the consumer to the batch's start; other errors end
    /// the run with the error.
    pub async fn run(&self, client: &Client) -> Result<(), String> {
        let producer = Producer::builder(client)
            .transactional_id(self.transactional_id.clone())
            .transaction_timeout(Duration::from_secs(30))
            .linger(Duration::from_millis(2))
            .build();
        retry_fatal_free(|| producer.init_transactions(), "init_transactions").await?;
        let mut consumer = GroupConsumer::builder(client, self.group.clone())
            .subscribe([self.input.clone()])
            .group_instance_id(self.instance_id.clone())
            .session_timeout(Duration::from_secs(10))
            .heartbeat_interval(Duration::from_secs(1))
            .manual_commit()
            .isolation_level(IsolationLevel::ReadCommitted)
            .max_wait(Duration::from_millis(100))
            .build()
            .await
            .map_err(|e| format!("group consumer: {e}"))?;
        loop {
            let mut batch = Vec::new();
            match tokio::time::timeout(Duration::from_millis(300), consumer.recv()).await {
                Ok(r) => batch.push(r.map_err(|e| format!("recv: {e}"))?),
                Err(_) => {
                    if self.done(&consumer) {
                        return Ok(());
                    }
                    continue;
                }
            }
            while batch.len() < self.batch {
                match tokio::time::timeout(Duration::from_millis(20), consumer.recv()).await {
                    Ok(r) => batch.push(r.map_err(|e| format!("recv: {e}"))?),
                    Err(_) => break,
                }
            }
            let mut starts: HashMap<TopicPartition, i64> = HashMap::new();
            let mut nexts: HashMap<TopicPartition, i64> = HashMap::new();
            for r in &batch {
                let tp = TopicPartition::new(r.topic.clone(), r.partition);
                starts.entry(tp.clone()).or_insert(r.offset);
                nexts.insert(tp, r.offset + 1);
            }
            let group = consumer.group_metadata();
            match self.transact(&producer, &group, &batch, nexts).await {
                Ok(()) => {
                    self.committed.fetch_add(batch.len(), Ordering::SeqCst);
                }
                Err(e) if e.is_abortable() => {
                    producer
                        .abort_transaction()
                        .await
                        .map_err(|e| format!("abort_transaction: {e}"))?;
                    for (tp, offset) in starts {
                        consumer
                            .seek(&tp, offset)
                            .map_err(|e| format!("seek: {e}"))?;
                    }
                }
                Err(e) => return Err(format!("transaction: {e}")),
            }
        }
    }

    /// One transaction: the batch's output records and the consumed offsets.
    async fn transact(
        &self,
        producer: &Producer,
        group: &ConsumerGroupMetadata,
        batch: &[baton_kafka::ConsumerRecord],
        nexts: HashMap<TopicPartition, i64>,
    ) -> Result<(), TransactionError> {
        producer.begin_transaction().await?;
        for r in batch {
            let mut out = ProducerRecord::new(self.output.clone())
                .partition(r.partition)
                .header(INPUT_HEADER, format!("{}:{}", r.partition, r.offset));
            if let Some(k) = &r.key {
                out = out.key(k.clone());
            }
            if let Some(v) = &r.value {
                out = out.value(v.clone());
            }
            // A refused record reports the transaction's error at commit.
            let _ = producer.send(out).await;
        }
        producer.send_offsets_to_transaction(nexts, group).await?;
        producer.commit_transaction().await
    }

    /// Whether every input partition is assigned here and consumed to its end.
    fn done(&self, consumer: &GroupConsumer) -> bool {
        self.ends.iter().all(|(&p, &end)| {
            let tp = TopicPartition::new(self.input.clone(), p);
            end == 0 || consumer.position(&tp).is_some_and(|pos| pos >= end)
        })
    }
}

/// Retries `op` while its error is not fatal (a coordinator still loading, a
/// fenced predecessor's transaction still being aborted), for up to 60 s.
async fn retry_fatal_free<F, Fut>(mut op: F, what: &str) -> Result<(), String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), TransactionError>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        match op().await {
            Ok(()) => return Ok(()),
            Err(e) if !e.is_fatal() && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(format!("{what}: {e}")),
        }
    }
}

/// Reads `partitions` of the output `topic` at read_committed from the start
/// until `expected` records came and nothing more comes for 2 s (or 120 s
/// pass), recording each in `history` by its [`INPUT_HEADER`].
pub async fn read_output(
    client: &Client,
    topic: &str,
    partitions: i32,
    expected: usize,
    history: &mut ExactlyOnce,
) -> usize {
    let mut builder = Consumer::builder(client)
        .isolation_level(IsolationLevel::ReadCommitted)
        .max_wait(Duration::from_millis(100));
    for p in 0..partitions {
        builder = builder.assign(topic.to_string(), p, StartOffset::Earliest);
    }
    let mut consumer = builder.build().await.expect("output consumer");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let mut read = 0;
    loop {
        let wait = if read >= expected {
            Duration::from_secs(2)
        } else {
            deadline.saturating_duration_since(tokio::time::Instant::now())
        };
        let Ok(r) = tokio::time::timeout(wait, consumer.recv()).await else {
            return read;
        };
        let r = r.expect("output consumer error");
        let from = r
            .headers
            .iter()
            .find(|h| h.key == INPUT_HEADER)
            .and_then(|h| h.value.as_ref())
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|s| s.split_once(':'))
            .and_then(|(p, o)| Some((p.parse().ok()?, o.parse().ok()?)))
            .unwrap_or((-1, -1));
        history.output(from, (r.partition, r.offset));
        read += 1;
    }
}
