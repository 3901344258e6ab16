//! Helpers shared by the cluster integration tests: a client on an in-process
//! cluster, self-checking record values (the payload of `baton_broker::history`)
//! and the check of what a consumer read, by that history checker.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::payload::{intact_id, parse_payload, payload, History, HistoryReport, ProduceOutcome};
use baton_broker::Cluster;
use baton_kafka::{
    Client, Consumer, ConsumerRecord, DeliveryFuture, Producer, ProducerRecord, StartOffset,
};
use bytes::Bytes;

/// Acknowledged records: id -> (partition, offset).
pub type Acked = HashMap<u64, (i32, i64)>;

/// A client bootstrapped from every node of `cluster`.
pub async fn client(cluster: &Cluster) -> Client {
    Client::builder(cluster.bootstrap_servers())
        .client_id("baton-cluster-tests")
        .request_timeout(Duration::from_secs(10))
        .build()
        .await
        .expect("client connects")
}

/// The value of record `id`: the self-checking payload of `baton_broker::history`
/// with `id % 50` filler bytes.
pub fn value(id: u64) -> Bytes {
    Bytes::from(payload(id, (id % 50) as usize))
}

/// The id in a value, or `None` if the value is not an intact [`value`] (corrupted).
pub fn parse(v: &[u8]) -> Option<u64> {
    intact_id(v)
}

/// Self-checking records ([`value`]) sent to a topic until stopped, their
/// acknowledgements counted.
#[derive(Debug)]
pub struct Load {
    stop: Arc<AtomicBool>,
    acked: Arc<AtomicUsize>,
    sender: tokio::task::JoinHandle<()>,
    collector: tokio::task::JoinHandle<(Acked, usize)>,
}

impl Load {
    /// Starts sending to `topic` through `producer`.
    pub fn start(producer: Arc<Producer>, topic: String) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(AtomicUsize::new(0));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(u64, DeliveryFuture)>();
        let s = stop.clone();
        let sender = tokio::spawn(async move {
            let mut id = 0u64;
            while !s.load(Ordering::Relaxed) {
                let record = ProducerRecord::new(topic.clone()).value(value(id));
                let d = producer.send(record).await.expect("record accepted");
                let _ = tx.send((id, d));
                id += 1;
                if id.is_multiple_of(20) {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
        });
        let a = acked.clone();
        let collector = tokio::spawn(async move {
            let mut ok = Acked::new();
            let mut failed = 0;
            while let Some((id, d)) = rx.recv().await {
                match d.await {
                    Ok(m) => {
                        ok.insert(id, (m.partition, m.offset));
                        a.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        failed += 1;
                        eprintln!("record {id} failed: {e}");
                    }
                }
            }
            (ok, failed)
        });
        Load {
            stop,
            acked,
            sender,
            collector,
        }
    }

    /// How many records are acknowledged so far.
    pub fn acked(&self) -> usize {
        self.acked.load(Ordering::Relaxed)
    }

    /// Waits until at least `at_least` records are acknowledged; panics if that
    /// takes longer than `within`.
    pub async fn wait_acked(&self, at_least: usize, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        while self.acked() < at_least {
            assert!(
                tokio::time::Instant::now() < deadline,
                "only {} of {at_least} records acknowledged in time",
                self.acked()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops sending, flushes and drops `producer` (the one the load sends
    /// through), and returns the acknowledged records and how many failed.
    pub async fn finish(self, producer: Arc<Producer>) -> (Acked, usize) {
        self.stop.store(true, Ordering::Relaxed);
        self.sender.await.unwrap();
        producer.flush().await;
        drop(producer);
        self.collector.await.unwrap()
    }
}

/// What a consumer read, checked by `baton_broker::history` against what was
/// acknowledged.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The history checker's counts.
    pub report: HistoryReport,
    /// Records consumed (every read, a re-read of an offset included).
    pub consumed: usize,
    /// Reads of a (partition, offset) already read (a consumer that delivers a
    /// record twice; counted as duplicates).
    pub repeated_reads: u64,
}

impl Checked {
    /// Acknowledged but never consumed.
    pub fn lost(&self) -> u64 {
        self.report.lost
    }

    /// Extra copies of acknowledged records: at other offsets, or the same offset
    /// delivered again.
    pub fn duplicated(&self) -> u64 {
        self.report.duplicated + self.repeated_reads
    }

    /// Consumed values that fail their checksum.
    pub fn corrupted(&self) -> u64 {
        self.report.corrupted
    }

    /// Acknowledged records consumed at an offset other than the acknowledged one.
    pub fn moved(&self) -> u64 {
        self.report.moved
    }

    /// Whether nothing acknowledged was lost, duplicated, corrupted or moved.
    pub fn is_clean(&self) -> bool {
        self.lost() == 0 && self.duplicated() == 0 && self.corrupted() == 0 && self.moved() == 0
    }
}

/// One consumed record: partition, offset and its parsed payload.
type Read = (i32, i64, Option<(u64, u32)>);

/// Records `r` in `reads`, and its id in `seen` if its value is intact.
fn record(r: &ConsumerRecord, reads: &mut Vec<Read>, seen: &mut HashSet<u64>) {
    let value = r.value.as_deref();
    if let Some(id) = value.and_then(parse) {
        seen.insert(id);
    }
    reads.push((r.partition, r.offset, value.and_then(parse_payload)));
}

/// The checksum a [`value`] of `id` carries.
fn checksum(id: u64) -> u32 {
    parse_payload(&value(id)).expect("a payload parses").1
}

/// Checks `reads` against `acked` with `baton_broker::history`. Intact values of
/// ids never acknowledged (failed or unknown sends that were written anyway) are
/// allowed once, as the history's unacknowledged-present; their further copies
/// are not counted as duplicates. A value that is not a payload counts as corrupted.
fn compare(acked: &Acked, reads: &[Read]) -> Checked {
    let mut h = History::new();
    for (&id, &(partition, offset)) in acked {
        h.produced(
            id,
            checksum(id),
            ProduceOutcome::Acked { partition, offset },
        );
    }
    let mut positions = HashSet::new();
    let mut unacked_at: HashMap<u64, (i32, i64)> = HashMap::new();
    let mut repeated_reads = 0;
    for &(partition, offset, parsed) in reads {
        if !positions.insert((partition, offset)) {
            repeated_reads += 1;
        }
        match parsed {
            Some((id, sum)) if !acked.contains_key(&id) && sum == checksum(id) => {
                let first = *unacked_at.entry(id).or_insert((partition, offset));
                if first == (partition, offset) {
                    h.produced(id, sum, ProduceOutcome::Unknown);
                    h.consumed(partition, offset, id, sum);
                }
            }
            Some((id, sum)) => h.consumed(partition, offset, id, sum),
            // Not a payload at all: an id never produced, so corrupted.
            None => h.consumed(partition, offset, u64::MAX, 0),
        }
    }
    let checked = Checked {
        report: h.check(),
        consumed: reads.len(),
        repeated_reads,
    };
    if checked.lost() > 0 {
        let lost = h.lost_ids();
        eprintln!("lost ids (first 5): {:?}", &lost[..lost.len().min(5)]);
    }
    checked
}

/// Consumes partitions `0..partitions` of `topic` from the start in the background,
/// while the test does other things (restarts), until [`LiveConsumer::finish`].
#[derive(Debug)]
pub struct LiveConsumer {
    target: Arc<Mutex<Option<Acked>>>,
    task: tokio::task::JoinHandle<Checked>,
}

impl LiveConsumer {
    /// Starts consuming.
    pub async fn start(client: &Client, topic: &str, partitions: i32) -> LiveConsumer {
        let mut builder = Consumer::builder(client);
        for p in 0..partitions {
            builder = builder.assign(topic.to_owned(), p, StartOffset::Earliest);
        }
        let mut consumer = builder.build().await.expect("consumer");
        let target: Arc<Mutex<Option<Acked>>> = Arc::new(Mutex::new(None));
        let t = target.clone();
        let task = tokio::spawn(async move {
            let (mut reads, mut seen) = (Vec::new(), HashSet::new());
            let mut idle_since: Option<tokio::time::Instant> = None;
            let deadline_after_target = Duration::from_secs(60);
            let mut target_at: Option<tokio::time::Instant> = None;
            loop {
                let acked = t.lock().unwrap().clone();
                if let Some(acked) = &acked {
                    let now = tokio::time::Instant::now();
                    let started = *target_at.get_or_insert(now);
                    let all = acked.keys().all(|id| seen.contains(id));
                    let idle = idle_since.is_some_and(|s| now - s > Duration::from_secs(2));
                    if (all && idle) || now - started > deadline_after_target {
                        return compare(acked, &reads);
                    }
                }
                match tokio::time::timeout(Duration::from_millis(250), consumer.recv()).await {
                    Ok(Ok(r)) => {
                        idle_since = None;
                        record(&r, &mut reads, &mut seen);
                    }
                    Ok(Err(e)) => panic!("consumer failed: {e}"),
                    Err(_) => {
                        idle_since.get_or_insert_with(tokio::time::Instant::now);
                    }
                }
            }
        });
        LiveConsumer { target, task }
    }

    /// Tells the consumer what was acknowledged; it returns once it has seen all of it
    /// (and nothing more arrives for 2 s) or 60 s passed.
    pub async fn finish(self, acked: &HashMap<u64, (i32, i64)>) -> Checked {
        *self.target.lock().unwrap() = Some(acked.clone());
        let h = self.task.await.expect("consumer task");
        eprintln!("live consumer history: {} ({h:?})", h.report);
        h
    }
}

/// Reads partitions `0..partitions` from the start until every acknowledged id was
/// seen (or `idle` passes without a new record), and compares. `acked` maps id ->
/// (partition, offset); an offset of -1 is not checked.
pub async fn check_history(
    client: &Client,
    topic: &str,
    partitions: i32,
    acked: &HashMap<u64, (i32, i64)>,
    idle: Duration,
) -> Checked {
    let mut builder = Consumer::builder(client);
    for p in 0..partitions {
        builder = builder.assign(topic.to_owned(), p, StartOffset::Earliest);
    }
    let mut consumer = builder.build().await.expect("consumer");
    let (mut reads, mut seen) = (Vec::new(), HashSet::new());
    // Read everything: until `idle` passes without a record once every acknowledged id
    // was seen (so later duplicates are counted too).
    loop {
        let all = acked.keys().all(|id| seen.contains(id));
        let wait = if all {
            Duration::from_secs(2).min(idle)
        } else {
            idle
        };
        match tokio::time::timeout(wait, consumer.recv()).await {
            Ok(Ok(r)) => record(&r, &mut reads, &mut seen),
            Ok(Err(e)) => panic!("consumer failed: {e}"),
            Err(_) => break,
        }
    }
    let h = compare(acked, &reads);
    eprintln!("history: {} ({h:?})", h.report);
    h
}
