//! The environment seam: how the Baton broker, its controller and the SDK reach
//! the network, the wall clock, randomness and blocking work.
//!
//! An [`Env`] is a value, not a cargo feature: [`Env::real`] (the default) is
//! tokio's TCP, the system clock, operating-system randomness and tokio's
//! blocking pool, so production behaviour is that of calling them directly. A
//! simulation (`examples/simulate/`, on turmoil) supplies its own [`Net`],
//! [`Clock`], [`Random`] and [`Blocking`] and runs a whole cluster and its clients
//! in one thread, deterministically from a seed. The types users see never
//! change.
//!
//! Sockets and the wall clock are chosen per component (`BrokerConfig::env`,
//! `ControllerOptions::env`, the SDK's `ClientBuilder::env`): a broker node
//! stamps records and times group, transaction and fetch-session deadlines on
//! its own clock, the producer stamps create times on its client's, so each host
//! of a simulation may have a clock of its own (per-host skew). Code without a
//! component at hand (topic ids, backoff jitter, blocking work, inter-node
//! connections) reads the process-wide environment, [`process`], which a
//! simulation sets once with [`install`].
//!
//! ```
//! let env = baton_env::Env::real();
//! assert!(env.clock.now_ms() > 0);
//! let _ = env.random.next_u64();
//! ```

mod in_place;
mod net;
mod real;

use std::fmt;
use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub use in_place::InPlaceBlocking;
pub use net::{Listener, ListenerImpl, Net, NetFuture, Socket, SocketRead, SocketWrite, Stream};
pub use real::{RealBlocking, RealClock, RealNet, RealRandom};

/// The wall clock: milliseconds since the Unix epoch, as Kafka stamps records
/// and measures group and transaction deadlines. Monotonic time and sleeps are
/// tokio's (`tokio::time`), which a simulation's runtime virtualises itself.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
}

/// A source of randomness for ids and jitter (never for secrets: SASL nonces and
/// salts come from the operating system).
pub trait Random: Send + Sync + fmt::Debug {
    /// A fresh 64-bit value.
    fn next_u64(&self) -> u64;
}

/// Where blocking work (disk appends, log reads under a lock) runs.
pub trait Blocking: Send + Sync + fmt::Debug {
    /// Runs `work` to completion somewhere it may block: the real environment
    /// hands it to tokio's blocking pool; a simulation runs it in place, so its
    /// completion is ordered deterministically.
    fn run(&self, work: Box<dyn FnOnce() + Send>);

    /// The blocking work running now takes `d` longer, as on a slow device (a
    /// slow fsync). The default sleeps the calling thread, which is what a slow
    /// device does to the real blocking pool. A simulation, whose blocking work
    /// runs in place on its one thread, notes the time instead; [`Env::spawn_blocking`]
    /// then waits it out in simulated time before it hands back the result
    /// (see [`Blocking::take_stalled`]).
    fn stall(&self, d: Duration) {
        std::thread::sleep(d);
    }

    /// How long the work [`Blocking::run`] just ran in place was stalled
    /// ([`Blocking::stall`]), reset to zero. The default is zero: work run
    /// elsewhere sleeps through its own stalls.
    fn take_stalled(&self) -> Duration {
        Duration::ZERO
    }
}

/// The environment a component runs in: network, wall clock, randomness and
/// blocking work. Cheap to clone (four `Arc`s).
#[derive(Clone, Debug)]
pub struct Env {
    /// Connects and listens.
    pub net: Arc<dyn Net>,
    /// The wall clock.
    pub clock: Arc<dyn Clock>,
    /// Ids and jitter.
    pub random: Arc<dyn Random>,
    /// Blocking work.
    pub blocking: Arc<dyn Blocking>,
}

impl Default for Env {
    fn default() -> Self {
        process().clone()
    }
}

impl Env {
    /// tokio's TCP, the system clock, OS randomness and tokio's blocking pool.
    pub fn real() -> Env {
        Env {
            net: Arc::new(RealNet),
            clock: Arc::new(RealClock),
            random: Arc::new(RealRandom::default()),
            blocking: Arc::new(RealBlocking),
        }
    }

    /// Runs `work` through [`Blocking`] and waits for its result; `Err` if it
    /// panicked. Where the work ran in place and was stalled ([`Blocking::stall`]),
    /// the result comes that much later in the runtime's time; locks the work
    /// held are already released then, so a stall delays its caller, not others.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future does not stop `work` once handed over (as with
    /// `tokio::task::spawn_blocking`); its result is dropped.
    pub fn spawn_blocking<R, F>(&self, work: F) -> impl Future<Output = Result<R, BlockingFailed>>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.blocking.run(Box::new(move || {
            let _ = tx.send(work());
        }));
        let stalled = self.blocking.take_stalled();
        async move {
            let out = rx.await.map_err(|_| BlockingFailed);
            if !stalled.is_zero() {
                tokio::time::sleep(stalled).await;
            }
            out
        }
    }
}

/// Blocking work ended without a result (it panicked, or its runtime shut down).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockingFailed;

impl fmt::Display for BlockingFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("blocking work ended without a result")
    }
}

impl std::error::Error for BlockingFailed {}

static PROCESS: OnceLock<Env> = OnceLock::new();

/// The process-wide environment: the one [`install`]ed, else [`Env::real`].
pub fn process() -> &'static Env {
    PROCESS.get_or_init(Env::real)
}

/// Sets the process-wide environment once, before any component reads it (a
/// simulation does this first thing). `Err` gives `env` back if it was already
/// set or read.
pub fn install(env: Env) -> Result<(), Env> {
    PROCESS.set(env)
}

/// [`process`]'s wall clock, in ms since the Unix epoch. A broker node, the
/// controller and the SDK read their own [`Env`]'s clock instead.
pub fn now_ms() -> i64 {
    process().clock.now_ms()
}

/// [`process`]'s randomness.
pub fn random_u64() -> u64 {
    process().random.next_u64()
}

/// [`Blocking::stall`] on [`process`]: the blocking work running now takes `d`
/// longer (the disk-fault hooks call this for a slow fsync).
pub fn stall(d: Duration) {
    process().blocking.stall(d)
}

/// [`Env::spawn_blocking`] on [`process`].
pub fn spawn_blocking<R, F>(work: F) -> impl Future<Output = Result<R, BlockingFailed>>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    process().spawn_blocking(work)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_stall_of_work_run_in_place_delays_its_result_in_runtime_time() {
        let in_place = Arc::new(InPlaceBlocking::default());
        let env = Env {
            blocking: in_place.clone(),
            ..Env::real()
        };
        let b = env.blocking.clone();
        let t = tokio::time::Instant::now();
        let out = env.spawn_blocking(move || {
            b.stall(Duration::from_millis(200));
            b.stall(Duration::from_millis(100));
            7
        });
        assert_eq!(out.await, Ok(7));
        let waited = t.elapsed();
        assert!(
            waited >= Duration::from_millis(300) && waited < Duration::from_millis(310),
            "{waited:?}"
        );
        assert_eq!(in_place.stalls(), 2);
        // Work that was not stalled answers at once.
        let t = tokio::time::Instant::now();
        assert_eq!(env.spawn_blocking(|| 8).await, Ok(8));
        assert_eq!(t.elapsed(), Duration::ZERO);
    }

    #[tokio::test]
    async fn the_real_blocking_pool_sleeps_through_a_stall() {
        let env = Env::real();
        let b = env.blocking.clone();
        let t = std::time::Instant::now();
        let out = env.spawn_blocking(move || b.stall(Duration::from_millis(50)));
        assert_eq!(out.await, Ok(()));
        assert!(t.elapsed() >= Duration::from_millis(50));
    }
}
