//! A fixed-bucket latency histogram in atomics: cheap to record from any task,
//! read as a [`LatencySummary`].

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Upper bounds of the buckets, in milliseconds; a last bucket takes the rest.
const BOUNDS_MS: [u64; 13] = [
    1, 2, 5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000,
];

/// Latencies recorded lock-free: a count per bucket, the sum and the maximum.
#[derive(Debug, Default)]
pub(crate) struct LatencyHistogram {
    buckets: [AtomicU64; BOUNDS_MS.len() + 1],
    sum_us: AtomicU64,
    max_us: AtomicU64,
}

impl LatencyHistogram {
    /// Records one latency.
    pub(crate) fn record(&self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let ms = us / 1000;
        let i = BOUNDS_MS
            .iter()
            .position(|&b| ms < b)
            .unwrap_or(BOUNDS_MS.len());
        self.buckets[i].fetch_add(1, Relaxed);
        self.sum_us.fetch_add(us, Relaxed);
        self.max_us.fetch_max(us, Relaxed);
    }

    /// What was recorded so far.
    pub(crate) fn summary(&self) -> LatencySummary {
        let buckets: Vec<(Option<Duration>, u64)> = self
            .buckets
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let bound = BOUNDS_MS.get(i).map(|&ms| Duration::from_millis(ms));
                (bound, c.load(Relaxed))
            })
            .collect();
        LatencySummary {
            count: buckets.iter().map(|(_, c)| c).sum(),
            sum: Duration::from_micros(self.sum_us.load(Relaxed)),
            max: Duration::from_micros(self.max_us.load(Relaxed)),
            buckets,
        }
    }
}

/// A snapshot of latencies: count, sum, maximum and a coarse fixed-bucket
/// histogram (bounds 1, 2, 5, 10, 25, 50, 100, 250, 500 ms, 1, 2.5, 5, 10 s and
/// above).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LatencySummary {
    /// Latencies recorded.
    pub count: u64,
    /// Their sum (for the mean).
    pub sum: Duration,
    /// The largest one.
    pub max: Duration,
    /// `(upper bound, count)` per bucket, ascending; the last bucket (bound `None`)
    /// holds everything from 10 s up. A latency falls in the first bucket whose
    /// bound is above it.
    pub buckets: Vec<(Option<Duration>, u64)>,
}

impl LatencySummary {
    /// The mean latency; zero if none was recorded.
    pub fn mean(&self) -> Duration {
        match u32::try_from(self.count) {
            Ok(0) => Duration::ZERO,
            Ok(n) => self.sum / n,
            Err(_) => Duration::from_micros((self.sum.as_micros() / self.count as u128) as u64),
        }
    }

    /// An upper bound of the `q` quantile (0.0 to 1.0): the bound of the bucket
    /// that holds it, or [`max`](Self::max) if that is lower or the quantile lies in
    /// the last bucket. Zero if nothing was recorded.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.count == 0 {
            return Duration::ZERO;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (bound, c) in &self.buckets {
            seen += c;
            if seen >= rank {
                return bound.map_or(self.max, |b| b.min(self.max));
            }
        }
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_max_and_quantiles() {
        let h = LatencyHistogram::default();
        for ms in [0, 3, 3, 7, 40, 12_000] {
            h.record(Duration::from_millis(ms));
        }
        let s = h.summary();
        assert_eq!(s.count, 6);
        assert_eq!(s.max, Duration::from_millis(12_000));
        assert_eq!(s.buckets[0], (Some(Duration::from_millis(1)), 1));
        assert_eq!(s.buckets[2], (Some(Duration::from_millis(5)), 2));
        assert_eq!(s.buckets.last(), Some(&(None, 1)));
        assert_eq!(s.quantile(0.5), Duration::from_millis(5));
        assert_eq!(s.quantile(0.8), Duration::from_millis(50));
        assert_eq!(s.quantile(1.0), Duration::from_millis(12_000));
        assert_eq!(s.mean(), Duration::from_millis(12_053) / 6);
        assert_eq!(LatencySummary::default().quantile(0.99), Duration::ZERO);
    }
}
