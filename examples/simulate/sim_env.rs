//! The simulated environment: turmoil's TCP, a wall clock of turmoil's time
//! plus injected steps, a seeded generator, blocking work run in place, and the
//! operating system's randomness replaced for the whole process.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use baton_kafka::env::{
    Clock, Env, InPlaceBlocking, Listener, ListenerImpl, Net, NetFuture, Random, Socket,
};

/// The simulated wall clock starts here (ms since the Unix epoch).
pub const EPOCH_MS: u64 = 1_700_000_000_000;

/// The simulated environment, installed once per process.
pub struct World {
    /// Each host's wall clock.
    pub clocks: Clocks,
}

impl World {
    /// Seeds the process's randomness and installs the simulated environment.
    /// Must run before anything reads the environment or builds a `HashMap`.
    pub fn install(seed: u64) -> World {
        OS_RANDOM.store(splitmix(seed ^ 0x05EE_D0F0_5000_0000), Ordering::Relaxed);
        let clock = Arc::new(SimClock::default());
        clock.last.store(EPOCH_MS as i64, Ordering::Relaxed);
        let random = Arc::new(SimRandom {
            state: AtomicU64::new(splitmix(seed)),
        });
        let env = Env {
            net: Arc::new(SimNet),
            clock: clock.clone(),
            random,
            blocking: IN_PLACE.get_or_init(Default::default).clone(),
        };
        if baton_kafka::env::install(env.clone()).is_err() {
            panic!("the process environment was read before the simulation installed its own");
        }
        World {
            clocks: Clocks {
                base: env,
                hosts: Arc::new(Mutex::new(BTreeMap::new())),
            },
        }
    }
}

/// One wall clock per host: the simulation's time plus the host's own steps.
#[derive(Clone)]
pub struct Clocks {
    base: Env,
    hosts: Arc<Mutex<BTreeMap<String, Arc<HostClock>>>>,
}

impl Clocks {
    /// The environment of `host`: the process's, with the host's own clock.
    pub fn env(&self, host: &str) -> Env {
        let clock = self.clock(host);
        Env {
            clock,
            ..self.base.clone()
        }
    }

    /// Steps `host`'s wall clock by `ms` (negative: back).
    pub fn step(&self, host: &str, ms: i64) {
        self.clock(host).skew.fetch_add(ms, Ordering::Relaxed);
    }

    fn clock(&self, host: &str) -> Arc<HostClock> {
        let mut hosts = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
        hosts
            .entry(host.to_owned())
            .or_insert_with(|| {
                Arc::new(HostClock {
                    base: self.base.clock.clone(),
                    skew: AtomicI64::new(0),
                })
            })
            .clone()
    }
}

/// A host's wall clock.
#[derive(Debug)]
struct HostClock {
    base: Arc<dyn Clock>,
    skew: AtomicI64,
}

impl Clock for HostClock {
    fn now_ms(&self) -> i64 {
        self.base.now_ms() + self.skew.load(Ordering::Relaxed)
    }
}

/// The state of the process's stand-in for the operating system's randomness.
static OS_RANDOM: AtomicU64 = AtomicU64::new(0x5EED);

/// The operating system's randomness, replaced: `std`'s `HashMap` keys, tokio's
/// `select!` generator and anything else that asks the kernel for random bytes
/// get a stream drawn from the seed, so two processes running the same seed
/// iterate every map and pick every ready branch alike. Nothing in the
/// simulation needs secret randomness (its connections are plaintext).
///
/// # Safety
///
/// The caller passes a buffer of at least `len` writable bytes, as for
/// `getrandom(2)`.
#[allow(unsafe_code)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getrandom(buf: *mut u8, len: usize, _flags: u32) -> isize {
    let mut i = 0;
    while i < len {
        let word = splitmix(OS_RANDOM.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed));
        for b in word.to_le_bytes() {
            if i == len {
                break;
            }
            // SAFETY: `i < len`, and the caller guarantees `len` writable bytes.
            unsafe { *buf.add(i) = b };
            i += 1;
        }
    }
    len as isize
}

/// turmoil's TCP.
#[derive(Debug)]
pub struct SimNet;

impl Net for SimNet {
    fn connect<'a>(&'a self, addr: &'a str) -> NetFuture<'a, Socket> {
        Box::pin(async move {
            let s = turmoil::net::TcpStream::connect(addr).await?;
            Ok(Socket::Other(Box::new(SimStream(s))))
        })
    }

    fn bind(&self, addr: SocketAddr) -> NetFuture<'_, Listener> {
        // turmoil binds the unspecified address only; the listener reports the
        // host's own address, which is what the broker advertises.
        Box::pin(async move {
            let any = SocketAddr::new(std::net::Ipv4Addr::UNSPECIFIED.into(), addr.port());
            let l = turmoil::net::TcpListener::bind(any).await?;
            let port = l.local_addr()?.port();
            Ok(Listener::Other(Box::new(SimListener(
                l,
                SocketAddr::new(addr.ip(), port),
            ))))
        })
    }
}

/// A turmoil stream (its type has no `Debug`).
struct SimStream(turmoil::net::TcpStream);

impl std::fmt::Debug for SimStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SimStream")
    }
}

impl tokio::io::AsyncRead for SimStream {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for SimStream {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// A turmoil listener and the address it reports.
struct SimListener(turmoil::net::TcpListener, SocketAddr);

impl std::fmt::Debug for SimListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SimListener")
    }
}

impl ListenerImpl for SimListener {
    fn accept(&self) -> NetFuture<'_, (Socket, SocketAddr)> {
        Box::pin(async move {
            let (s, peer) = self.0.accept().await?;
            Ok((Socket::Other(Box::new(SimStream(s))), peer))
        })
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.1)
    }
}

/// turmoil's time since its epoch.
#[derive(Debug, Default)]
pub struct SimClock {
    /// The last reading, for callers outside any host.
    last: AtomicI64,
}

impl Clock for SimClock {
    fn now_ms(&self) -> i64 {
        match turmoil::since_epoch() {
            Some(d) => {
                let now = d.as_millis() as i64;
                self.last.store(now, Ordering::Relaxed);
                now
            }
            None => self.last.load(Ordering::Relaxed),
        }
    }
}

/// SplitMix64 over a counter.
#[derive(Debug)]
struct SimRandom {
    state: AtomicU64,
}

impl Random for SimRandom {
    fn next_u64(&self) -> u64 {
        splitmix(
            self.state
                .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed),
        )
    }
}

/// The process's in-place blocking work (set by [`World::install`]).
static IN_PLACE: OnceLock<Arc<InPlaceBlocking>> = OnceLock::new();

/// How many stalls (slow fsyncs) blocking work has met so far.
pub fn stalls() -> u64 {
    IN_PLACE.get().map_or(0, |b| b.stalls())
}

/// SplitMix64's output function.
pub fn splitmix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seed's own generator for the fault schedule.
pub struct Rng(pub u64);

impl Rng {
    /// The next value.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        splitmix(self.0)
    }

    /// A value in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// A duration between `lo` and `hi` ms.
    pub fn ms(&mut self, lo: u64, hi: u64) -> std::time::Duration {
        std::time::Duration::from_millis(lo + self.below(hi - lo + 1))
    }
}
