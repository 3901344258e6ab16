//! The one seed variable and the draws tests make on top of the one generator.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use baton_protocol::testing::Rng;

/// The environment variable that replays a randomised run.
pub const SEED_VAR: &str = "BATON_SEED";

/// The seed of a randomised run: [`SEED_VAR`] (`BATON_SEED`) if set, else the
/// clock. Printed to stderr as `seed N (replay with BATON_SEED=N)`, which the test
/// harness shows when the test fails.
///
/// # Panics
///
/// If `BATON_SEED` is set but is not a `u64` (a typo must not replay another run).
pub fn seed() -> u64 {
    let seed = match std::env::var(SEED_VAR) {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{SEED_VAR}={s:?} is not a u64")),
        Err(_) => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
    };
    eprintln!("seed {seed} (replay with {SEED_VAR}={seed})");
    seed
}

/// Draws on top of [`Rng`] that several tests make.
pub trait RngExt {
    /// Between 0 and `max_len` random bytes (the length drawn first).
    fn bytes_up_to(&mut self, max_len: u64) -> Vec<u8>;
    /// A duration between `lo` and `hi` milliseconds, both included.
    fn millis(&mut self, lo: u64, hi: u64) -> Duration;
}

impl RngExt for Rng {
    fn bytes_up_to(&mut self, max_len: u64) -> Vec<u8> {
        let len = self.below(max_len + 1) as usize;
        self.bytes(len)
    }

    fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi.saturating_sub(lo) + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_stay_in_bounds_and_replay() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for _ in 0..1000 {
            let v = a.bytes_up_to(5);
            assert!(v.len() <= 5);
            assert_eq!(v, b.bytes_up_to(5));
            let d = a.millis(10, 20);
            assert!((10..=20).contains(&d.as_millis()), "{d:?}");
            assert_eq!(d, b.millis(10, 20));
        }
    }
}
