//! The one retry backoff of the client: exponential, capped and jittered.
//!
//! The wait after the n-th failure in a row is `base · 2^(n−1)`, at most `cap`
//! (its *ceiling*), less a random cut of up to [`JITTER_PERCENT`] percent. The
//! jitter only ever shortens a wait, so a caller keeps the bounds it had without
//! jitter, while clients that failed together do not retry in lockstep.
//!
//! Jitter comes from a xorshift generator, seeded from the clock and a process-wide
//! counter ([`Backoff::new`]) or from a given seed ([`Backoff::with_seed`]) so that
//! tests are deterministic. It is not for anything but spreading retries.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The largest share of a ceiling that jitter takes off, in percent.
pub(crate) const JITTER_PERCENT: u32 = 20;

/// An exponential, capped, jittered retry backoff.
///
/// Callers that count failures themselves (per partition, per batch) ask
/// [`delay`](Self::delay) for a given count; a retry loop can let the backoff
/// count with [`next_delay`](Self::next_delay).
#[derive(Debug)]
pub(crate) struct Backoff {
    /// The wait after the first failure (before jitter).
    base: Duration,
    /// No wait is longer than this. Invariant: the ceiling never exceeds it.
    cap: Duration,
    /// Failures counted by [`next_delay`](Self::next_delay).
    failures: u32,
    /// Xorshift64 state; never zero. Atomic so that [`delay`](Self::delay) takes
    /// `&self` in shared state; concurrent draws may repeat a value, which is
    /// harmless for jitter.
    rng: AtomicU64,
}

impl Backoff {
    /// A backoff from `base` doubling up to `cap`, seeded from the clock.
    pub(crate) fn new(base: Duration, cap: Duration) -> Self {
        Self::with_seed(base, cap, fresh_seed())
    }

    /// A backoff that waits `wait` (less jitter) after every failure.
    pub(crate) fn fixed(wait: Duration) -> Self {
        Self::new(wait, wait)
    }

    /// A backoff from `base` doubling up to `cap`, with jitter drawn from `seed`.
    pub(crate) fn with_seed(base: Duration, cap: Duration, seed: u64) -> Self {
        Backoff {
            base,
            cap,
            failures: 0,
            rng: AtomicU64::new(splitmix(seed).max(1)),
        }
    }

    /// The wait after `failures` failures in a row before jitter: `base · 2^(failures−1)`
    /// at most `cap` (`base` for 0 or 1).
    pub(crate) fn ceiling(&self, failures: u32) -> Duration {
        let shift = failures.saturating_sub(1).min(31);
        self.base.saturating_mul(1u32 << shift).min(self.cap)
    }

    /// The wait after `failures` failures in a row: the [`ceiling`](Self::ceiling)
    /// less a random cut of up to [`JITTER_PERCENT`] percent.
    pub(crate) fn delay(&self, failures: u32) -> Duration {
        let ceiling = self.ceiling(failures);
        // cut = ceiling · JITTER_PERCENT/100 · u, with u uniform in [0, 1) from 32 bits.
        let nanos = ceiling.as_nanos();
        let u = u128::from(self.next_random() >> 32);
        let cut = (nanos / 100 * u128::from(JITTER_PERCENT) * u) >> 32;
        let left = nanos - cut;
        let secs = u64::try_from(left / 1_000_000_000).unwrap_or(u64::MAX);
        Duration::new(secs, (left % 1_000_000_000) as u32)
    }

    /// Counts one more failure and returns the wait before the next attempt.
    pub(crate) fn next_delay(&mut self) -> Duration {
        self.failures = self.failures.saturating_add(1);
        self.delay(self.failures)
    }

    fn next_random(&self) -> u64 {
        let mut x = self.rng.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.store(x, Ordering::Relaxed);
        x
    }
}

/// A seed that differs between backoffs created at the same instant.
/// A number in `[0, 1)` drawn from the clock and a process-wide counter, for
/// spreading timers (re-authentication) apart; not for anything secret.
pub(crate) fn unit_jitter() -> f64 {
    (splitmix(fresh_seed()) >> 11) as f64 / (1u64 << 53) as f64
}

fn fresh_seed() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    baton_env::random_u64() ^ splitmix(COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// SplitMix64's finaliser: spreads nearby seeds over the whole state space.
fn splitmix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn ceiling_doubles_from_base_up_to_cap() {
        let b = Backoff::with_seed(10 * MS, 500 * MS, 1);
        let got: Vec<Duration> = (0..9).map(|n| b.ceiling(n)).collect();
        let want = [10, 10, 20, 40, 80, 160, 320, 500, 500].map(|ms| ms * MS);
        assert_eq!(got, want);
        // No overflow however long the run of failures.
        assert_eq!(b.ceiling(u32::MAX), 500 * MS);
        let huge = Backoff::with_seed(Duration::MAX / 2, Duration::MAX, 1);
        assert_eq!(huge.ceiling(40), Duration::MAX);
        assert!(huge.delay(40) >= Duration::MAX / 100 * (100 - JITTER_PERCENT));
    }

    #[test]
    fn jitter_stays_within_its_share_of_the_ceiling() {
        for seed in 0..50u64 {
            let mut b = Backoff::with_seed(100 * MS, 1000 * MS, seed);
            for n in 1..=8 {
                let ceiling = b.ceiling(n);
                let d = b.next_delay();
                let floor = ceiling * (100 - JITTER_PERCENT) / 100;
                assert!(
                    d <= ceiling && d >= floor,
                    "seed {seed}, failure {n}: {d:?} not in [{floor:?}, {ceiling:?}]"
                );
            }
        }
    }

    #[test]
    fn jitter_varies_and_a_seed_repeats_it() {
        let draws = |seed| {
            let b = Backoff::with_seed(100 * MS, 100 * MS, seed);
            (0..20).map(|_| b.delay(1)).collect::<Vec<_>>()
        };
        let a = draws(7);
        assert_eq!(a, draws(7), "same seed, same waits");
        assert_ne!(a, draws(8), "another seed, other waits");
        let distinct: std::collections::BTreeSet<_> = a.iter().collect();
        assert!(distinct.len() > 10, "waits barely vary: {a:?}");
    }

    #[test]
    fn fixed_backoff_does_not_grow() {
        let mut b = Backoff::fixed(50 * MS);
        for _ in 0..10 {
            let d = b.next_delay();
            assert!(d <= 50 * MS && d >= 40 * MS, "{d:?}");
        }
    }
}
