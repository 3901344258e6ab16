//! Helpers shared by the `cluster_*` integration tests: a client on an in-process
//! cluster, self-checking record values and a history checker.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton::{Client, Consumer, StartOffset};
use baton_broker::Cluster;
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

/// FNV-1a, to make values self-checking.
fn fnv(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in data {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The value of record `id`: its id, some padding, and a checksum of both.
pub fn value(id: u64) -> Bytes {
    let body = format!("id={id:010};pad={}", "x".repeat((id % 50) as usize));
    Bytes::from(format!("{body};sum={:016x}", fnv(body.as_bytes())))
}

/// The id in a value, or `None` if the value is not one [`value`] made (corrupted).
pub fn parse(v: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(v).ok()?;
    let (body, sum) = s.rsplit_once(";sum=")?;
    if u64::from_str_radix(sum, 16).ok()? != fnv(body.as_bytes()) {
        return None;
    }
    body.strip_prefix("id=")?.split(';').next()?.parse().ok()
}

/// Counts from comparing acknowledged records with consumed ones.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct History {
    /// Records acknowledged to the producer.
    pub acked: usize,
    /// Records consumed (all copies).
    pub consumed: usize,
    /// Acknowledged but never consumed.
    pub lost: usize,
    /// Consumed more than once.
    pub duplicated: usize,
    /// Consumed values that fail their checksum.
    pub corrupted: usize,
    /// Consumed at an offset other than the acknowledged one.
    pub moved: usize,
}

impl History {
    /// Whether nothing acknowledged was lost, duplicated, corrupted or moved.
    pub fn is_clean(&self) -> bool {
        self.lost == 0 && self.duplicated == 0 && self.corrupted == 0 && self.moved == 0
    }
}

/// Consumes partitions `0..partitions` of `topic` from the start in the background,
/// while the test does other things (restarts), until [`LiveConsumer::finish`].
pub struct LiveConsumer {
    target: Arc<Mutex<Option<Acked>>>,
    task: tokio::task::JoinHandle<History>,
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
            let mut seen: BTreeMap<u64, Vec<(i32, i64)>> = BTreeMap::new();
            let (mut consumed, mut corrupted) = (0usize, 0usize);
            let mut idle_since: Option<tokio::time::Instant> = None;
            let deadline_after_target = Duration::from_secs(60);
            let mut target_at: Option<tokio::time::Instant> = None;
            loop {
                let acked = t.lock().unwrap().clone();
                if let Some(acked) = &acked {
                    let now = tokio::time::Instant::now();
                    let started = *target_at.get_or_insert(now);
                    let all = acked.keys().all(|id| seen.contains_key(id));
                    let idle = idle_since.is_some_and(|s| now - s > Duration::from_secs(2));
                    if (all && idle) || now - started > deadline_after_target {
                        return compare(acked, &seen, consumed, corrupted);
                    }
                }
                match tokio::time::timeout(Duration::from_millis(250), consumer.recv()).await {
                    Ok(Ok(r)) => {
                        idle_since = None;
                        consumed += 1;
                        match r.value.as_deref().and_then(parse) {
                            Some(id) => seen.entry(id).or_default().push((r.partition, r.offset)),
                            None => corrupted += 1,
                        }
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
    pub async fn finish(self, acked: &HashMap<u64, (i32, i64)>) -> History {
        *self.target.lock().unwrap() = Some(acked.clone());
        let h = self.task.await.expect("consumer task");
        eprintln!("live consumer history: {h:?}");
        h
    }
}

fn compare(
    acked: &HashMap<u64, (i32, i64)>,
    seen: &BTreeMap<u64, Vec<(i32, i64)>>,
    consumed: usize,
    corrupted: usize,
) -> History {
    let mut h = History {
        acked: acked.len(),
        consumed,
        corrupted,
        ..Default::default()
    };
    for (id, at) in acked {
        match seen.get(id) {
            None => h.lost += 1,
            Some(copies) => {
                if copies.len() > 1 {
                    h.duplicated += copies.len() - 1;
                }
                if at.1 >= 0 && !copies.contains(at) {
                    if h.moved < 5 {
                        eprintln!("record {id} acknowledged at {at:?}, consumed at {copies:?}");
                    }
                    h.moved += 1;
                }
            }
        }
    }
    h
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
) -> History {
    let mut builder = Consumer::builder(client);
    for p in 0..partitions {
        builder = builder.assign(topic.to_owned(), p, StartOffset::Earliest);
    }
    let mut consumer = builder.build().await.expect("consumer");
    let mut seen: BTreeMap<u64, Vec<(i32, i64)>> = BTreeMap::new();
    let mut h = History {
        acked: acked.len(),
        ..Default::default()
    };
    // Read everything: until `idle` passes without a record once every acknowledged id
    // was seen (so later duplicates are counted too).
    loop {
        let all = acked.keys().all(|id| seen.contains_key(id));
        let wait = if all {
            Duration::from_secs(2).min(idle)
        } else {
            idle
        };
        match tokio::time::timeout(wait, consumer.recv()).await {
            Ok(Ok(r)) => {
                h.consumed += 1;
                match r.value.as_deref().and_then(parse) {
                    Some(id) => seen.entry(id).or_default().push((r.partition, r.offset)),
                    None => h.corrupted += 1,
                }
            }
            Ok(Err(e)) => panic!("consumer failed: {e}"),
            Err(_) => break,
        }
    }
    let h = compare(acked, &seen, h.consumed, h.corrupted);
    eprintln!("history: {h:?}");
    h
}
