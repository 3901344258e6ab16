//! The consumers' metrics (plain and group) and their [`ConsumerStats`] snapshot.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics::{Counter, Gauge, Histogram, Label};

use super::names::*;
use super::register::{client_label, counter, gauge, histogram, ms};
use super::LatencySummary;
use super::{ConnectionStats, LatencyHistogram};
use crate::group::TopicPartition;

/// A snapshot of one consumer's numbers since it was built; see
/// [`Consumer::stats`](crate::Consumer::stats) and
/// [`GroupConsumer::stats`](crate::GroupConsumer::stats).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumerStats {
    /// Records returned to the application.
    pub records_consumed: u64,
    /// Fetch requests answered or failed, with their latencies (the broker's
    /// long-poll wait included).
    pub fetch_latency: LatencySummary,
    /// Each partition fetched so far, with its lag at the last fetch response.
    pub lag: BTreeMap<TopicPartition, ConsumerLag>,
    /// Rebalances this group member completed (zero for a plain consumer).
    pub rebalances: u64,
    /// How long those rebalances took.
    pub rebalance_latency: LatencySummary,
    /// Offset commits (retries included) and their latencies.
    pub commit_latency: LatencySummary,
    /// The connections of the consumer's [`Client`](crate::Client) (shared with
    /// everything else built on it).
    pub connections: ConnectionStats,
}

impl ConsumerStats {
    /// The largest lag of any partition (0 if none is known).
    pub fn max_lag(&self) -> i64 {
        self.lag.values().map(|l| l.lag).max().unwrap_or(0)
    }
}

/// One partition's position against its high watermark.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumerLag {
    /// The high watermark in the last fetch response.
    pub high_watermark: i64,
    /// The next offset the consumer fetches after that response.
    pub position: i64,
    /// `high_watermark - position`, at least 0.
    pub lag: i64,
}

/// One partition's lag, kept by the fetch task.
#[derive(Debug)]
pub(crate) struct PartitionMeter {
    high_watermark: AtomicI64,
    position: AtomicI64,
    lag_gauge: Gauge,
}

impl PartitionMeter {
    /// A fetch response gave `high_watermark`; the fetch position is `position`.
    pub(crate) fn update(&self, high_watermark: i64, position: i64) {
        self.high_watermark.store(high_watermark, Relaxed);
        self.position.store(position, Relaxed);
        self.lag_gauge
            .set((high_watermark - position).max(0) as f64);
    }
}

/// A consumer's metric handles and the atomics behind [`ConsumerStats`].
#[derive(Debug)]
pub(crate) struct ConsumerMeter {
    client_id: String,
    records: AtomicU64,
    records_counter: Counter,
    fetch_latency: LatencyHistogram,
    /// Fetch latency histograms by node id; looked up once per fetch response.
    fetch_nodes: Mutex<HashMap<i32, Histogram>>,
    partitions: Mutex<BTreeMap<TopicPartition, Arc<PartitionMeter>>>,
    rebalances: AtomicU64,
    rebalances_counter: Counter,
    rebalance_latency: LatencyHistogram,
    rebalance_histogram: Histogram,
    commit_latency: LatencyHistogram,
    commit_histogram: Histogram,
}

impl ConsumerMeter {
    /// Registers the handles of client `client_id` (and group `group_id`, for a
    /// group member).
    pub(crate) fn new(client_id: &str, group_id: Option<&str>) -> Self {
        let l = || vec![client_label(client_id)];
        let g = || {
            let mut l = l();
            l.push(Label::new("group_id", group_id.unwrap_or("").to_string()));
            l
        };
        ConsumerMeter {
            client_id: client_id.to_string(),
            records: AtomicU64::new(0),
            records_counter: counter(CONSUMER_RECORDS_CONSUMED_TOTAL, l()),
            fetch_latency: LatencyHistogram::default(),
            fetch_nodes: Mutex::new(HashMap::new()),
            partitions: Mutex::new(BTreeMap::new()),
            rebalances: AtomicU64::new(0),
            rebalances_counter: counter(GROUP_REBALANCE_TOTAL, g()),
            rebalance_latency: LatencyHistogram::default(),
            rebalance_histogram: histogram(GROUP_REBALANCE_LATENCY_MS, g()),
            commit_latency: LatencyHistogram::default(),
            commit_histogram: histogram(GROUP_COMMIT_LATENCY_MS, g()),
        }
    }

    /// Handles that report to no recorder (a configuration not built yet).
    pub(crate) fn detached() -> Self {
        metrics::with_local_recorder(&metrics::NoopRecorder, || ConsumerMeter::new("", None))
    }

    /// A record was returned to the application.
    #[inline]
    pub(crate) fn consumed(&self) {
        self.records.fetch_add(1, Relaxed);
        self.records_counter.increment(1);
    }

    /// A fetch from `node_id` took `elapsed`.
    pub(crate) fn fetched(&self, node_id: i32, elapsed: Duration) {
        self.fetch_latency.record(elapsed);
        let mut nodes = self
            .fetch_nodes
            .lock()
            .expect("consumer metrics lock poisoned");
        nodes
            .entry(node_id)
            .or_insert_with(|| {
                let labels = vec![
                    client_label(&self.client_id),
                    Label::new("node_id", node_id.to_string()),
                ];
                histogram(CONSUMER_FETCH_LATENCY_MS, labels)
            })
            .record(ms(elapsed));
    }

    /// The lag meter of `topic`/`partition` (created at its first use).
    pub(crate) fn partition(&self, topic: &Arc<str>, partition: i32) -> Arc<PartitionMeter> {
        let tp = TopicPartition {
            topic: topic.clone(),
            partition,
        };
        let mut parts = self
            .partitions
            .lock()
            .expect("consumer metrics lock poisoned");
        parts
            .entry(tp)
            .or_insert_with(|| {
                let labels = vec![
                    client_label(&self.client_id),
                    Label::new("topic", topic.to_string()),
                    Label::new("partition", partition.to_string()),
                ];
                Arc::new(PartitionMeter {
                    high_watermark: AtomicI64::new(-1),
                    position: AtomicI64::new(-1),
                    lag_gauge: gauge(CONSUMER_RECORDS_LAG, labels),
                })
            })
            .clone()
    }

    /// A rebalance completed after `elapsed`.
    pub(crate) fn rebalanced(&self, elapsed: Duration) {
        self.rebalances.fetch_add(1, Relaxed);
        self.rebalances_counter.increment(1);
        self.rebalance_latency.record(elapsed);
        self.rebalance_histogram.record(ms(elapsed));
    }

    /// A commit took `elapsed`.
    pub(crate) fn committed(&self, elapsed: Duration) {
        self.commit_latency.record(elapsed);
        self.commit_histogram.record(ms(elapsed));
    }

    /// The snapshot, with the client's connection numbers.
    pub(crate) fn stats(&self, connections: ConnectionStats) -> ConsumerStats {
        let lag = self
            .partitions
            .lock()
            .expect("consumer metrics lock poisoned")
            .iter()
            .filter(|(_, p)| p.high_watermark.load(Relaxed) >= 0)
            .map(|(tp, p)| {
                let high_watermark = p.high_watermark.load(Relaxed);
                let position = p.position.load(Relaxed);
                let lag = ConsumerLag {
                    high_watermark,
                    position,
                    lag: (high_watermark - position).max(0),
                };
                (tp.clone(), lag)
            })
            .collect();
        ConsumerStats {
            records_consumed: self.records.load(Relaxed),
            fetch_latency: self.fetch_latency.summary(),
            lag,
            rebalances: self.rebalances.load(Relaxed),
            rebalance_latency: self.rebalance_latency.summary(),
            commit_latency: self.commit_latency.summary(),
            connections,
        }
    }
}
