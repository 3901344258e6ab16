//! Helpers shared by the `client_*` integration tests: an in-process broker on
//! 127.0.0.1:0, a client on it, unique topic names, a seeded generator, reading
//! partitions from the start, and (in [`proxy`]) a broker behind a recording proxy.

#![allow(dead_code)]

pub mod proxy;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use baton::{Admin, Client, Consumer, ConsumerRecord, StartOffset};
use baton_broker::{Broker, BrokerConfig, BrokerHandle};

/// Starts an in-memory broker and a client bootstrapped from it.
pub async fn broker_and_client() -> (BrokerHandle, Client) {
    let broker = Broker::start(BrokerConfig::in_memory())
        .await
        .expect("broker starts");
    let client = Client::builder([broker.bootstrap()])
        .client_id("baton-tests")
        .build()
        .await
        .expect("client connects");
    (broker, client)
}

/// A topic name no other test uses.
pub fn topic_name(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "{prefix}-{}-{nanos}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Creates a topic with `partitions` partitions and returns its name.
pub async fn create_topic(client: &Client, prefix: &str, partitions: i32) -> String {
    let name = topic_name(prefix);
    Admin::new(client)
        .create_topic(name.clone(), partitions, 1)
        .await
        .expect("topic created");
    name
}

/// Consumes records of partitions `0..partitions` of `topic` from the start until
/// `count` arrived; a 30 s stall or a consumer error fails the test (naming `seed`).
pub async fn consume_from_start(
    client: &Client,
    topic: &str,
    partitions: i32,
    count: usize,
    seed: u64,
) -> Vec<ConsumerRecord> {
    let mut builder = Consumer::builder(client);
    for p in 0..partitions {
        builder = builder.assign(topic.to_string(), p, StartOffset::Earliest);
    }
    let mut consumer = builder.build().await.unwrap();
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let r = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
            .await
            .unwrap_or_else(|_| panic!("seed {seed}: stalled after {} records", out.len()))
            .unwrap_or_else(|e| panic!("seed {seed}: consumer error: {e}"));
        out.push(r);
    }
    out
}

/// The seed for this run: `BATON_SEED` if set, else the clock. Printed so a failing
/// run can be replayed (the test harness shows it on failure).
pub fn seed() -> u64 {
    let seed = std::env::var("BATON_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("seed = {seed} (replay with BATON_SEED={seed})");
    seed
}

/// SplitMix64.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    pub fn bytes(&mut self, max_len: u64) -> Vec<u8> {
        let len = self.below(max_len + 1) as usize;
        (0..len).map(|_| self.next_u64() as u8).collect()
    }
}
