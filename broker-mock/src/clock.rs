//! The wall clock a broker node stamps records and measures group, transaction
//! and fetch-session deadlines with: its own environment's
//! (`BrokerConfig::env.clock`), so nodes of one process may each run on a clock
//! of their own (a simulation skews them per host). Monotonic waits (replication
//! deadlines, leases) are tokio's, not this clock.

use std::fmt;
use std::sync::Arc;

/// A node's wall clock. Cheap to clone (one `Arc`).
#[derive(Clone)]
pub(crate) struct WallClock(Arc<dyn baton_env::Clock>);

impl WallClock {
    /// The clock of `env`.
    pub fn of(env: &baton_env::Env) -> WallClock {
        WallClock(env.clock.clone())
    }

    /// Wall-clock milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> i64 {
        self.0.now_ms()
    }
}

impl fmt::Debug for WallClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("WallClock").field(&self.0).finish()
    }
}
