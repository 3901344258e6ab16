//! The producer's metrics and its [`ProducerStats`] snapshot.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use metrics::{Counter, Gauge, Histogram, Label};
use tokio::time::Instant;

use super::names::*;
use super::register::{client_label, counter, gauge, histogram, ms};
use super::LatencySummary;
use super::{ConnectionStats, LatencyHistogram};

/// A snapshot of one producer's numbers since it was built; see
/// [`Producer::stats`](crate::Producer::stats).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProducerStats {
    /// Records delivered.
    pub records_sent: u64,
    /// Records whose delivery failed for good.
    pub record_errors: u64,
    /// Records of batches sent again, by the error of the failed attempt (a Kafka
    /// error name such as `NOT_LEADER_OR_FOLLOWER`, `NETWORK_EXCEPTION` for a
    /// broken connection, `REQUEST_TIMED_OUT` for a request that timed out).
    pub retries: BTreeMap<String, u64>,
    /// Produce requests sent.
    pub requests: u64,
    /// Produce request latencies (all brokers).
    pub request_latency: LatencySummary,
    /// Produce requests awaiting a response now, by broker (brokers with none
    /// included once they had one).
    pub in_flight: BTreeMap<i32, u64>,
    /// Buffer memory not held by undelivered records, as of the sender's last pass.
    pub buffer_available_bytes: u64,
    /// `send` calls waiting for buffer memory now.
    pub waiting_sends: u64,
    /// The connections of the producer's [`Client`](crate::Client) (shared with
    /// everything else built on it).
    pub connections: ConnectionStats,
}

impl ProducerStats {
    /// Retried records, all errors together.
    pub fn total_retries(&self) -> u64 {
        self.retries.values().sum()
    }
}

/// One broker's request metrics.
#[derive(Debug)]
pub(crate) struct NodeMeter {
    in_flight: AtomicU64,
    in_flight_gauge: Gauge,
    requests: Counter,
    latency: Histogram,
}

/// The producer's metric handles and the atomics behind [`ProducerStats`].
#[derive(Debug)]
pub(crate) struct ProducerMeter {
    client_id: String,
    records_sent: AtomicU64,
    records_sent_counter: Counter,
    record_errors: AtomicU64,
    record_errors_counter: Counter,
    /// By error name; touched only when a batch is retried.
    retries: Mutex<BTreeMap<String, (u64, Counter)>>,
    requests: AtomicU64,
    latency: LatencyHistogram,
    /// By node id; looked up once per request.
    nodes: Mutex<BTreeMap<i32, Arc<NodeMeter>>>,
    batch_size: Histogram,
    records_per_request: Histogram,
    compression_ratio: Histogram,
    buffer_available: AtomicU64,
    buffer_available_gauge: Gauge,
    waiting_sends: AtomicU64,
    waiting_sends_gauge: Gauge,
}

impl ProducerMeter {
    /// Registers the producer-wide handles of client `client_id`.
    pub(crate) fn new(client_id: &str) -> Self {
        let l = || vec![client_label(client_id)];
        ProducerMeter {
            client_id: client_id.to_string(),
            records_sent: AtomicU64::new(0),
            records_sent_counter: counter(PRODUCER_RECORD_SEND_TOTAL, l()),
            record_errors: AtomicU64::new(0),
            record_errors_counter: counter(PRODUCER_RECORD_ERROR_TOTAL, l()),
            retries: Mutex::new(BTreeMap::new()),
            requests: AtomicU64::new(0),
            latency: LatencyHistogram::default(),
            nodes: Mutex::new(BTreeMap::new()),
            batch_size: histogram(PRODUCER_BATCH_SIZE_BYTES, l()),
            records_per_request: histogram(PRODUCER_RECORDS_PER_REQUEST, l()),
            compression_ratio: histogram(PRODUCER_COMPRESSION_RATIO, l()),
            buffer_available: AtomicU64::new(0),
            buffer_available_gauge: gauge(PRODUCER_BUFFER_AVAILABLE_BYTES, l()),
            waiting_sends: AtomicU64::new(0),
            waiting_sends_gauge: gauge(PRODUCER_WAITING_SENDS, l()),
        }
    }

    fn node(&self, node_id: i32) -> Arc<NodeMeter> {
        let mut nodes = self.nodes.lock().expect("producer metrics lock poisoned");
        nodes
            .entry(node_id)
            .or_insert_with(|| {
                let l = || {
                    vec![
                        client_label(&self.client_id),
                        Label::new("node_id", node_id.to_string()),
                    ]
                };
                Arc::new(NodeMeter {
                    in_flight: AtomicU64::new(0),
                    in_flight_gauge: gauge(PRODUCER_REQUESTS_IN_FLIGHT, l()),
                    requests: counter(PRODUCER_REQUEST_TOTAL, l()),
                    latency: histogram(PRODUCER_REQUEST_LATENCY_MS, l()),
                })
            })
            .clone()
    }

    /// A Produce request of `records` records to `node_id` is being sent; the
    /// returned guard counts it in flight until it is finished or dropped.
    pub(crate) fn request_started(
        self: &Arc<Self>,
        node_id: i32,
        records: usize,
    ) -> InFlightRequest {
        let node = self.node(node_id);
        node.in_flight.fetch_add(1, Relaxed);
        node.in_flight_gauge.increment(1.0);
        node.requests.increment(1);
        self.requests.fetch_add(1, Relaxed);
        self.records_per_request.record(records as f64);
        InFlightRequest {
            meter: self.clone(),
            node,
            started: Instant::now(),
        }
    }

    /// A batch goes out for the first time: its encoded size and its estimated
    /// size before compression.
    pub(crate) fn batch_sent(&self, encoded: usize, uncompressed: usize) {
        self.batch_size.record(encoded as f64);
        if uncompressed > 0 {
            self.compression_ratio
                .record(encoded as f64 / uncompressed as f64);
        }
    }

    /// `n` records were delivered.
    pub(crate) fn delivered(&self, n: usize) {
        self.records_sent.fetch_add(n as u64, Relaxed);
        self.records_sent_counter.increment(n as u64);
    }

    /// `n` records failed for good.
    pub(crate) fn failed(&self, n: usize) {
        self.record_errors.fetch_add(n as u64, Relaxed);
        self.record_errors_counter.increment(n as u64);
    }

    /// A batch of `n` records will be sent again after an error named `name`
    /// (see `AttemptError::metric_name`).
    pub(crate) fn retried(&self, name: String, n: usize) {
        let mut retries = self.retries.lock().expect("producer metrics lock poisoned");
        let entry = retries.entry(name).or_insert_with_key(|name| {
            let labels = vec![
                client_label(&self.client_id),
                Label::new("error", name.clone()),
            ];
            (0, counter(PRODUCER_RECORD_RETRY_TOTAL, labels))
        });
        entry.0 += n as u64;
        entry.1.increment(n as u64);
    }

    /// The buffer memory not held by undelivered records.
    pub(crate) fn buffer_available(&self, bytes: usize) {
        self.buffer_available.store(bytes as u64, Relaxed);
        self.buffer_available_gauge.set(bytes as f64);
    }

    /// Awaits `wait` (a `send` waiting for buffer memory), counted as a waiting
    /// send from its first poll until it completes or is dropped.
    pub(crate) async fn waiting<F: std::future::Future>(self: &Arc<Self>, wait: F) -> F::Output {
        self.waiting_sends.fetch_add(1, Relaxed);
        self.waiting_sends_gauge.increment(1.0);
        let _waiting = WaitingSend(self.clone());
        wait.await
    }

    /// The snapshot, with the client's connection numbers.
    pub(crate) fn stats(&self, connections: ConnectionStats) -> ProducerStats {
        let retries = self
            .retries
            .lock()
            .expect("producer metrics lock poisoned")
            .iter()
            .map(|(k, (n, _))| (k.clone(), *n))
            .collect();
        let in_flight = self
            .nodes
            .lock()
            .expect("producer metrics lock poisoned")
            .iter()
            .map(|(id, n)| (*id, n.in_flight.load(Relaxed)))
            .collect();
        ProducerStats {
            records_sent: self.records_sent.load(Relaxed),
            record_errors: self.record_errors.load(Relaxed),
            retries,
            requests: self.requests.load(Relaxed),
            request_latency: self.latency.summary(),
            in_flight,
            buffer_available_bytes: self.buffer_available.load(Relaxed),
            waiting_sends: self.waiting_sends.load(Relaxed),
            connections,
        }
    }
}

/// A Produce request in flight: counted until [`finish`](Self::finish)ed (which
/// records its latency) or dropped (cancelled).
#[derive(Debug)]
pub(crate) struct InFlightRequest {
    meter: Arc<ProducerMeter>,
    node: Arc<NodeMeter>,
    started: Instant,
}

impl InFlightRequest {
    /// The response (or failure) arrived.
    pub(crate) fn finish(self) {
        let elapsed = self.started.elapsed();
        self.meter.latency.record(elapsed);
        self.node.latency.record(ms(elapsed));
    }
}

impl Drop for InFlightRequest {
    fn drop(&mut self) {
        self.node.in_flight.fetch_sub(1, Relaxed);
        self.node.in_flight_gauge.decrement(1.0);
    }
}

/// A `send` waiting for buffer memory.
#[derive(Debug)]
pub(crate) struct WaitingSend(Arc<ProducerMeter>);

impl Drop for WaitingSend {
    fn drop(&mut self) {
        self.0.waiting_sends.fetch_sub(1, Relaxed);
        self.0.waiting_sends_gauge.decrement(1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_flight_counts_until_finished_or_dropped() {
        let meter = Arc::new(ProducerMeter::new("c"));
        let a = meter.request_started(1, 10);
        let b = meter.request_started(1, 5);
        assert_eq!(meter.stats(ConnectionStats::default()).in_flight[&1], 2);
        a.finish();
        drop(b);
        let stats = meter.stats(ConnectionStats::default());
        assert_eq!(stats.in_flight[&1], 0);
        assert_eq!(stats.requests, 2);
        assert_eq!(stats.request_latency.count, 1);
    }
}
