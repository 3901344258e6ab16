//! The real environment: tokio's TCP, the system clock, OS-seeded randomness and
//! tokio's blocking pool.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::net::{TcpListener, TcpStream};

use crate::{Blocking, Clock, Listener, Net, NetFuture, Random, Socket};

/// tokio's TCP.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealNet;

impl Net for RealNet {
    fn connect<'a>(&'a self, addr: &'a str) -> NetFuture<'a, Socket> {
        Box::pin(async move { TcpStream::connect(addr).await.map(Socket::Tcp) })
    }

    fn bind(&self, addr: SocketAddr) -> NetFuture<'_, Listener> {
        Box::pin(async move { TcpListener::bind(addr).await.map(Listener::Tcp) })
    }
}

/// `SystemTime::now()`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealClock;

impl Clock for RealClock {
    fn now_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    }
}

/// Values hashed from the OS-seeded `RandomState`, a counter and the time.
#[derive(Debug, Default)]
pub struct RealRandom {
    counter: AtomicU64,
}

impl Random for RealRandom {
    fn next_u64(&self) -> u64 {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(self.counter.fetch_add(1, Ordering::Relaxed));
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        h.write_u128(nanos);
        h.finish()
    }
}

/// `tokio::task::spawn_blocking` (must be called within a tokio runtime).
#[derive(Debug, Clone, Copy, Default)]
pub struct RealBlocking;

impl Blocking for RealBlocking {
    fn run(&self, work: Box<dyn FnOnce() + Send>) {
        drop(tokio::task::spawn_blocking(work));
    }
}
