//! Client metrics: counters, gauges and histograms through the [`metrics`] facade,
//! and the same numbers as plain snapshots ([`ProducerStats`], [`ConsumerStats`]).
//!
//! The application installs an exporter (any [`::metrics::Recorder`], for example
//! `metrics-exporter-prometheus`) **before** it builds its [`Client`](crate::Client),
//! producers and consumers: each of them registers its metric handles once, when
//! it is built (per broker and per partition handles when they are first used),
//! and a handle keeps reporting to the recorder that was installed when it was
//! registered. With no recorder installed every handle is the facade's no-op
//! handle: recording costs a branch.
//!
//! Every metric is also kept in atomics that the snapshots read, so
//! [`Producer::stats`](crate::Producer::stats) and
//! [`Consumer::stats`](crate::Consumer::stats) work without an exporter. Nothing on
//! the per-record path takes a lock.
//!
//! # Names
//!
//! `kafka.<producer|consumer|client>.<name>`; counters end in `_total`, latencies
//! are histograms in milliseconds (`_ms`). Every metric has the label `client_id`;
//! the table in `docs/ARCHITECTURE.md` ("Client metrics") lists each with its
//! labels and the Java client's equivalent. The names are the constants of
//! [`names`].

mod connection;
mod consumer;
mod histogram;
pub mod names;
mod producer;

pub(crate) use connection::ConnectionMeter;
pub use connection::ConnectionStats;
pub use consumer::{ConsumerLag, ConsumerStats};
pub(crate) use consumer::{ConsumerMeter, PartitionMeter};
pub(crate) use histogram::LatencyHistogram;
pub use histogram::LatencySummary;
pub(crate) use producer::ProducerMeter;
pub use producer::ProducerStats;

use ::metrics::{Key, Label, Level, Metadata};

/// Where the metrics come from (the facade's metadata).
const TARGET: &str = "baton_kafka";

fn metadata() -> &'static Metadata<'static> {
    static META: Metadata<'static> = Metadata::new(TARGET, Level::INFO, Some(module_path!()));
    &META
}

/// The `client_id` label of a client's metrics.
pub(crate) fn client_label(client_id: &str) -> Label {
    Label::new("client_id", client_id.to_string())
}

/// Registers a counter under `name` with `labels` at the installed recorder.
pub(crate) fn counter(name: &'static str, labels: Vec<Label>) -> ::metrics::Counter {
    ::metrics::with_recorder(|r| r.register_counter(&Key::from_parts(name, labels), metadata()))
}

/// Registers a gauge under `name` with `labels` at the installed recorder.
pub(crate) fn gauge(name: &'static str, labels: Vec<Label>) -> ::metrics::Gauge {
    ::metrics::with_recorder(|r| r.register_gauge(&Key::from_parts(name, labels), metadata()))
}

/// Registers a histogram under `name` with `labels` at the installed recorder.
pub(crate) fn histogram(name: &'static str, labels: Vec<Label>) -> ::metrics::Histogram {
    ::metrics::with_recorder(|r| r.register_histogram(&Key::from_parts(name, labels), metadata()))
}
