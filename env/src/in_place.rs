//! Blocking work run in place, for a single-threaded simulation.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::Blocking;

/// Runs blocking work where it is handed over, on the calling thread, so a
/// single-threaded simulation orders its completion by its own schedule (a
/// blocking pool would finish it on another thread at a moment no seed
/// controls). A stall ([`Blocking::stall`], a slow fsync) is noted, not slept:
/// [`Env::spawn_blocking`](crate::Env::spawn_blocking) waits it out in the
/// runtime's (simulated) time.
#[derive(Debug, Default)]
pub struct InPlaceBlocking {
    stalled: Mutex<Duration>,
    stalls: AtomicU64,
}

impl InPlaceBlocking {
    /// How many stalls blocking work has met so far.
    pub fn stalls(&self) -> u64 {
        self.stalls.load(Ordering::Relaxed)
    }

    fn stalled(&self) -> std::sync::MutexGuard<'_, Duration> {
        self.stalled.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Blocking for InPlaceBlocking {
    fn run(&self, work: Box<dyn FnOnce() + Send>) {
        *self.stalled() = Duration::ZERO;
        work()
    }

    fn stall(&self, d: Duration) {
        *self.stalled() += d;
        self.stalls.fetch_add(1, Ordering::Relaxed);
    }

    fn take_stalled(&self) -> Duration {
        std::mem::take(&mut *self.stalled())
    }
}
