//! Open-connection accounting for one listener: Kafka's `max.connections` and
//! `max.connections.per.ip`.
//!
//! The accept loop asks [`ConnectionLimiter::try_acquire`] for a [`ConnectionSlot`]
//! before it serves a connection, and closes the connection at once when it gets
//! none. The slot travels with the connection's task and gives its place back when
//! it is dropped, so every way a connection ends (its peer closing, an error, a
//! panic, the task being aborted at shutdown) releases it. The per-IP table holds
//! only addresses with open connections: an entry is removed when its count drops
//! to zero, so a client cycling through addresses cannot grow it.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Refused connections are logged at most once per this interval.
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(1);

/// Which limit refused a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The listener already has `max_connections` open.
    Total {
        /// The limit.
        limit: usize,
    },
    /// The peer's address already has `max_connections_per_ip` open.
    PerIp {
        /// The limit.
        limit: usize,
    },
}

impl Refusal {
    /// The configuration name of the limit, for logs.
    pub(crate) fn limit_name(self) -> &'static str {
        match self {
            Refusal::Total { .. } => "max_connections",
            Refusal::PerIp { .. } => "max_connections_per_ip",
        }
    }

    /// The limit's value.
    pub(crate) fn limit(self) -> usize {
        match self {
            Refusal::Total { limit } | Refusal::PerIp { limit } => limit,
        }
    }
}

/// Logs refused connections at warn, at most once per [`REFUSAL_LOG_INTERVAL`], with
/// the number refused since the last line, so a flood of connections costs a
/// counter rather than a log line each.
#[derive(Debug, Default)]
pub(crate) struct RefusalLog {
    last: Option<tokio::time::Instant>,
    unlogged: u64,
}

impl RefusalLog {
    /// Counts one refused connection from `peer`, and logs if it is time to.
    pub(crate) fn note(&mut self, peer: SocketAddr, why: Refusal) {
        self.unlogged += 1;
        let now = tokio::time::Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < REFUSAL_LOG_INTERVAL)
        {
            return;
        }
        tracing::warn!(
            %peer,
            limit = why.limit_name(),
            value = why.limit(),
            refused = self.unlogged,
            "connection limit reached; closing new connections"
        );
        self.last = Some(now);
        self.unlogged = 0;
    }
}

#[derive(Debug, Default)]
struct Counts {
    /// Open connections. Invariant: the sum of `per_ip`'s values.
    total: usize,
    /// Open connections by peer address. Invariant: no value is 0.
    per_ip: HashMap<IpAddr, usize>,
}

/// Counts the open connections of one listener, in total and per peer address.
#[derive(Debug)]
pub(crate) struct ConnectionLimiter {
    max_total: usize,
    max_per_ip: usize,
    counts: Mutex<Counts>,
}

impl ConnectionLimiter {
    /// A limiter admitting at most `max_total` connections, `max_per_ip` of them from
    /// any one address.
    pub(crate) fn new(max_total: usize, max_per_ip: usize) -> Arc<Self> {
        Arc::new(ConnectionLimiter {
            max_total,
            max_per_ip,
            counts: Mutex::new(Counts::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place for one more connection from `ip`, or the limit it would pass.
    pub(crate) fn try_acquire(self: &Arc<Self>, ip: IpAddr) -> Result<ConnectionSlot, Refusal> {
        let mut c = self.lock();
        if c.total >= self.max_total {
            return Err(Refusal::Total {
                limit: self.max_total,
            });
        }
        let from_ip = c.per_ip.get(&ip).copied().unwrap_or(0);
        if from_ip >= self.max_per_ip {
            return Err(Refusal::PerIp {
                limit: self.max_per_ip,
            });
        }
        c.total += 1;
        c.per_ip.insert(ip, from_ip + 1);
        Ok(ConnectionSlot {
            limiter: self.clone(),
            ip,
        })
    }

    fn release(&self, ip: IpAddr) {
        let mut c = self.lock();
        c.total = c.total.saturating_sub(1);
        match c.per_ip.get_mut(&ip) {
            Some(n) if *n > 1 => *n -= 1,
            Some(_) => {
                c.per_ip.remove(&ip);
            }
            None => debug_assert!(false, "released a connection of {ip} never counted"),
        }
        debug_assert_eq!(c.total, c.per_ip.values().sum::<usize>());
    }

    /// Open connections in total and the number of addresses they come from.
    #[cfg(test)]
    fn open(&self) -> (usize, usize) {
        let c = self.lock();
        (c.total, c.per_ip.len())
    }
}

/// One open connection's place; dropping it gives the place back.
#[derive(Debug)]
pub(crate) struct ConnectionSlot {
    limiter: Arc<ConnectionLimiter>,
    ip: IpAddr,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.limiter.release(self.ip);
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
    }

    #[test]
    fn per_ip_and_total_limits_and_release() {
        let l = ConnectionLimiter::new(3, 2);
        let a1 = l.try_acquire(ip(1)).unwrap();
        let a2 = l.try_acquire(ip(1)).unwrap();
        assert_eq!(
            l.try_acquire(ip(1)).unwrap_err(),
            Refusal::PerIp { limit: 2 }
        );
        let b1 = l.try_acquire(ip(2)).unwrap();
        assert_eq!(
            l.try_acquire(ip(3)).unwrap_err(),
            Refusal::Total { limit: 3 }
        );
        assert_eq!(l.open(), (3, 2));
        drop(a1);
        let a3 = l.try_acquire(ip(1)).unwrap();
        drop((a2, a3, b1));
        assert_eq!(
            l.open(),
            (0, 0),
            "the per-IP table forgets closed addresses"
        );
    }

    #[test]
    fn many_addresses_leave_no_entries_behind() {
        let l = ConnectionLimiter::new(usize::MAX, 1);
        for last in 0..=255 {
            let slot = l.try_acquire(ip(last)).unwrap();
            drop(slot);
        }
        assert_eq!(l.open(), (0, 0));
    }

    #[test]
    fn a_slot_is_released_when_its_task_panics() {
        let l = ConnectionLimiter::new(1, 1);
        let slot = l.try_acquire(ip(1)).unwrap();
        let r = std::thread::spawn(move || {
            let _slot = slot;
            panic!("connection task failed");
        })
        .join();
        assert!(r.is_err());
        assert_eq!(l.open(), (0, 0));
        assert!(l.try_acquire(ip(1)).is_ok());
    }
}
