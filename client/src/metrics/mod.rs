//! Client metrics: counters, gauges and histograms through the `metrics` facade crate,
//! and the same numbers as plain snapshots ([`ProducerStats`], [`ConsumerStats`]).
//!
//! The application installs an exporter (any `metrics::Recorder`, for example
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
mod register;

pub(crate) use connection::ConnectionMeter;
pub use connection::ConnectionStats;
pub use consumer::{ConsumerLag, ConsumerStats};
pub(crate) use consumer::{ConsumerMeter, PartitionMeter};
pub(crate) use histogram::LatencyHistogram;
pub use histogram::LatencySummary;
pub(crate) use producer::ProducerMeter;
pub use producer::ProducerStats;
