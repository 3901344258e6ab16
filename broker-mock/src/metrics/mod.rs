//! Broker metrics: per-node counters (never a process-wide recorder: an
//! in-process cluster runs several nodes in one process), typed snapshots
//! ([`BrokerMetrics`], [`ControllerMetrics`]) and their Prometheus text
//! exposition, served over HTTP by `BrokerConfig::metrics_listen` (and the
//! controller's `ControllerOptions::metrics_listen`).
//!
//! The per-request path adds to atomics in fixed arrays indexed by API key and
//! version (no lock, no map); partition gauges are read from the node's state
//! when a snapshot is taken, so their number is bounded by the broker's
//! partition limits. The metric names, types and labels are listed in
//! `docs/ARCHITECTURE.md` (Broker metrics).
//!
//! ```no_run
//! # async fn demo() -> Result<(), baton_broker::BrokerError> {
//! use baton_broker::{Broker, BrokerConfig};
//! let mut config = BrokerConfig::in_memory();
//! config.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
//! let broker = Broker::start(config).await?;
//! println!("scrape http://{}/metrics", broker.metrics_addr().unwrap());
//! let produced = broker.metrics().requests_of(0);
//! # let _ = produced;
//! # Ok(()) }
//! ```

mod api_names;
pub(crate) mod errors;
pub(crate) mod http;
pub mod prometheus;
mod registry;
mod snapshot;

pub(crate) use registry::{inc, NodeMetrics};
pub use registry::{CorruptionSite, LATENCY_BUCKETS};
pub(crate) use snapshot::broker as snapshot;
pub use snapshot::{
    ApiRequests, BrokerMetrics, ControllerMetrics, LatencyHistogram, PartitionMetrics,
};
