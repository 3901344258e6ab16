//! A node's counters: plain atomics in fixed arrays, so that the per-request path
//! takes no lock and touches no map. Gauges of partitions are not kept here; a
//! snapshot computes them from the node's state (see `snapshot.rs`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::corruption::Where;

/// API keys counted one by one (`0..API_KEYS`); requests with another key are
/// counted in [`NodeMetrics::other_requests`].
pub(crate) const API_KEYS: usize = 96;
/// Versions counted one by one per API key (`0..VERSIONS`); a higher version is
/// counted with the highest.
pub(crate) const VERSIONS: usize = 24;

/// Upper bounds (seconds) of the request latency histogram's buckets; a last
/// `+Inf` bucket holds the rest.
pub const LATENCY_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Where corruption is counted: the checks of `corruption::Where`, and a
/// produced batch refused with CORRUPT_MESSAGE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CorruptionSite {
    /// A batch a client produced failed its CRC or framing check (CORRUPT_MESSAGE).
    Produce,
    /// A stored batch failed a check (`corruption::Where`).
    Stored(Where),
}

impl CorruptionSite {
    /// Every site, in the order of their counters.
    pub const ALL: [CorruptionSite; 7] = [
        CorruptionSite::Produce,
        CorruptionSite::Stored(Where::Serve),
        CorruptionSite::Stored(Where::FollowerFetch),
        CorruptionSite::Stored(Where::FollowerAppend),
        CorruptionSite::Stored(Where::Recovery),
        CorruptionSite::Stored(Where::Scrubber),
        CorruptionSite::Stored(Where::Cleaner),
    ];

    fn index(self) -> usize {
        match self {
            CorruptionSite::Produce => 0,
            CorruptionSite::Stored(Where::Serve) => 1,
            CorruptionSite::Stored(Where::FollowerFetch) => 2,
            CorruptionSite::Stored(Where::FollowerAppend) => 3,
            CorruptionSite::Stored(Where::Recovery) => 4,
            CorruptionSite::Stored(Where::Scrubber) => 5,
            CorruptionSite::Stored(Where::Cleaner) => 6,
        }
    }

    /// The `where` label: `produce`, or the `Where`'s name (`serve`, `scrubber`, ...).
    pub fn label(self) -> String {
        match self {
            CorruptionSite::Produce => "produce".to_owned(),
            CorruptionSite::Stored(w) => w.to_string(),
        }
    }
}

/// A fixed-bucket histogram of durations: one counter per bucket (not
/// cumulative; the exposition sums them), the sum in microseconds and the count.
#[derive(Debug, Default)]
pub(crate) struct Histogram {
    /// `LATENCY_BUCKETS.len() + 1` counters, the last for `+Inf`.
    buckets: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    sum_micros: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    pub(crate) fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let i = LATENCY_BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(LATENCY_BUCKETS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Cumulative bucket counts (the last is `+Inf`), the sum in seconds, the count.
    pub(crate) fn read(&self) -> (Vec<u64>, f64, u64) {
        let mut total = 0;
        let cumulative = self
            .buckets
            .iter()
            .map(|b| {
                total += b.load(Ordering::Relaxed);
                total
            })
            .collect();
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        (cumulative, sum, self.count.load(Ordering::Relaxed))
    }
}

/// The counters of one broker node (one per node, never process-wide: an
/// in-process cluster runs several nodes in one process).
#[derive(Debug)]
pub(crate) struct NodeMetrics {
    /// Requests answered (or closed on), by `api_key * VERSIONS + version`.
    requests: Box<[AtomicU64]>,
    /// Responses carrying a non-zero error code (see `errors.rs`), indexed as
    /// `requests`.
    errors: Box<[AtomicU64]>,
    /// Time from a request's frame being read to its response being written, by
    /// API key.
    latency: Box<[Histogram]>,
    /// Requests whose API key is outside `0..API_KEYS`.
    pub(crate) other_requests: AtomicU64,
    pub(crate) bytes_in: AtomicU64,
    pub(crate) bytes_out: AtomicU64,
    pub(crate) connections_accepted: AtomicU64,
    pub(crate) connections_closed: AtomicU64,
    /// ISR changes this node proposed as leader.
    pub(crate) isr_shrinks: AtomicU64,
    pub(crate) isr_expands: AtomicU64,
    /// Corruption detected, by `CorruptionSite::index`.
    corruption: [AtomicU64; CorruptionSite::ALL.len()],
    /// Repairs of a corrupt replica that caught up with the leader.
    pub(crate) repairs: AtomicU64,
    /// Requests refused because the producer's epoch is fenced.
    pub(crate) fenced_producers: AtomicU64,
}

impl Default for NodeMetrics {
    fn default() -> Self {
        let zeros = |n| (0..n).map(|_| AtomicU64::new(0)).collect();
        NodeMetrics {
            requests: zeros(API_KEYS * VERSIONS),
            errors: zeros(API_KEYS * VERSIONS),
            latency: (0..API_KEYS).map(|_| Histogram::default()).collect(),
            other_requests: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            connections_accepted: AtomicU64::new(0),
            connections_closed: AtomicU64::new(0),
            isr_shrinks: AtomicU64::new(0),
            isr_expands: AtomicU64::new(0),
            corruption: Default::default(),
            repairs: AtomicU64::new(0),
            fenced_producers: AtomicU64::new(0),
        }
    }
}

/// The counter slot of `api_key` and `version`, if the key is counted one by one.
fn slot(api_key: i16, version: i16) -> Option<usize> {
    let key = usize::try_from(api_key).ok().filter(|k| *k < API_KEYS)?;
    let version = usize::try_from(version).unwrap_or(0).min(VERSIONS - 1);
    Some(key * VERSIONS + version)
}

/// Adds one to a counter.
pub(crate) fn inc(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl NodeMetrics {
    /// A request of `api_key`/`version` was answered (or closed its connection)
    /// `elapsed` after its frame was read.
    pub(crate) fn request(&self, api_key: i16, version: i16, elapsed: Duration) {
        match slot(api_key, version) {
            Some(i) => {
                inc(&self.requests[i]);
                self.latency[i / VERSIONS].observe(elapsed);
            }
            None => inc(&self.other_requests),
        }
    }

    /// A response of `api_key`/`version` carried an error code.
    pub(crate) fn error(&self, api_key: i16, version: i16) {
        if let Some(i) = slot(api_key, version) {
            inc(&self.errors[i]);
        }
    }

    /// Corruption was detected at `site`.
    pub(crate) fn corruption(&self, site: CorruptionSite) {
        inc(&self.corruption[site.index()]);
    }

    pub(crate) fn corruption_count(&self, site: CorruptionSite) -> u64 {
        self.corruption[site.index()].load(Ordering::Relaxed)
    }

    /// Every `(api_key, version, requests, errors)` with a request counted.
    pub(crate) fn request_counts(&self) -> Vec<(i16, i16, u64, u64)> {
        let mut out = Vec::new();
        for (i, r) in self.requests.iter().enumerate() {
            let n = r.load(Ordering::Relaxed);
            if n > 0 {
                let e = self.errors[i].load(Ordering::Relaxed);
                out.push(((i / VERSIONS) as i16, (i % VERSIONS) as i16, n, e));
            }
        }
        out
    }

    /// The latency histogram of `api_key` (`None` if it is not counted one by one).
    pub(crate) fn latency(&self, api_key: i16) -> Option<&Histogram> {
        self.latency.get(usize::try_from(api_key).ok()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_and_bounded() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(100));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(60));
        let (buckets, sum, count) = h.read();
        assert_eq!(buckets.len(), LATENCY_BUCKETS.len() + 1);
        assert_eq!(
            (buckets[0], buckets[3], *buckets.last().unwrap()),
            (1, 2, 3)
        );
        assert!(buckets.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(count, 3);
        assert!((sum - 60.0031).abs() < 1e-9, "{sum}");
    }

    #[test]
    fn out_of_range_keys_and_versions_are_counted_safely() {
        let m = NodeMetrics::default();
        m.request(-1, 0, Duration::ZERO);
        m.request(i16::MAX, 3, Duration::ZERO);
        m.request(0, 99, Duration::ZERO);
        m.request(0, -5, Duration::ZERO);
        m.error(i16::MIN, 0);
        assert_eq!(m.other_requests.load(Ordering::Relaxed), 2);
        assert_eq!(
            m.request_counts(),
            vec![(0, 0, 1, 0), (0, VERSIONS as i16 - 1, 1, 0)]
        );
    }
}
