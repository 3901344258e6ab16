//! Test support shared by Baton's integration tests, the broker's tests and the
//! examples, so each helper exists once:
//!
//! - [`seed()`]: the one seed of a randomised run (`BATON_SEED`), printed for replay;
//! - [`Rng`]: the one seeded generator (`baton_protocol::testing::Rng`), with
//!   [`RngExt`] for the draws tests make often;
//! - [`init_tracing`]: the one log subscriber;
//! - [`topic_name`]: a topic name no other test uses;
//! - [`payload`]: the one self-checking payload format (`baton_broker::history`'s),
//!   written into a reusable buffer too;
//! - [`args`]: the examples' command-line flags;
//! - [`chaos`]: the chaos workload (a 3-node cluster, an idempotent producer of
//!   payloads under faults, a history check at the end);
//! - [`client`]: a broker and a client on it, topics, reading from the start;
//! - [`exactly_once`]: a consume-transform-produce pipeline with transactions,
//!   killed and restarted by tests, and the read of its output for the
//!   exactly-once history check;
//! - [`transactions`]: the transaction scenarios run against Apache Kafka and
//!   baton-broker alike;
//! - [`consumer_group`]: the consumer rebalance protocol (KIP-848) scenarios run
//!   against Apache Kafka and baton-broker alike, with their history check;
//! - [`cluster`]: a client on a `Cluster`, and the check of what a consumer read
//!   against the acknowledged records;
//! - [`fetch_tap`]: a proxy in front of one broker that logs every Fetch
//!   request's session, partitions and rack id;
//! - [`proxy`]: a broker behind a recording (and response-losing, rewriting,
//!   holding) proxy, with a client connected through it;
//! - [`security`]: a test PKI as PEM files, the SASL users of the security
//!   tests, and how the interop client scripts are told to use them;
//! - [`wire`]: raw request frames to a broker, for the broker's own tests;
//! - [`tools`]: the interop tools' setup (Python venv, kcat) and subprocesses
//!   with a deadline.

#![deny(unsafe_code, rust_2018_idioms)]

pub mod admin_groups;
pub mod args;
pub mod chaos;
pub mod client;
pub mod cluster;
pub mod consumer_group;
pub mod exactly_once;
pub mod fetch_tap;
pub mod payload;
pub mod proxy;
pub mod security;
mod seed;
pub mod tools;
pub mod transactions;
pub mod wire;

pub use baton_protocol::testing::Rng;
pub use seed::{seed, RngExt, SEED_VAR};

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Installs a log subscriber once per process that writes to the test output:
/// filter from `RUST_LOG`, default `warn`. Later calls do nothing.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .try_init();
}

/// A topic name no other test uses (`{prefix}-{pid}-{nanos}-{n}`).
pub fn topic_name(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{prefix}-{}-{nanos}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}
