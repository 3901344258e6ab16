//! A client's connection metrics and their [`ConnectionStats`] snapshot.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use metrics::Counter;

use super::names::*;
use super::register::{client_label, counter};

/// Connection numbers of one [`Client`](crate::Client) since it was built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionStats {
    /// Connections opened (TCP, versions negotiated, authenticated).
    pub created: u64,
    /// Connections closed: broken (by the broker, a failed read or write, a bad
    /// frame) or dropped after use.
    pub closed: u64,
    /// Connection attempts that failed SASL authentication.
    pub authentication_failures: u64,
}

/// The connection counters of one client (its pool and its consumers' fetch
/// pools).
#[derive(Debug)]
pub(crate) struct ConnectionMeter {
    created: AtomicU64,
    created_counter: Counter,
    closed: AtomicU64,
    closed_counter: Counter,
    auth_failures: AtomicU64,
    auth_failures_counter: Counter,
}

impl ConnectionMeter {
    /// Registers the handles of client `client_id`.
    pub(crate) fn new(client_id: &str) -> Self {
        let l = || vec![client_label(client_id)];
        ConnectionMeter {
            created: AtomicU64::new(0),
            created_counter: counter(CLIENT_CONNECTION_CREATION_TOTAL, l()),
            closed: AtomicU64::new(0),
            closed_counter: counter(CLIENT_CONNECTION_CLOSE_TOTAL, l()),
            auth_failures: AtomicU64::new(0),
            auth_failures_counter: counter(CLIENT_AUTHENTICATION_FAILURE_TOTAL, l()),
        }
    }

    /// A connection was opened.
    pub(crate) fn created(&self) {
        self.created.fetch_add(1, Relaxed);
        self.created_counter.increment(1);
    }

    /// A connection closed (counted once per connection by its owner).
    pub(crate) fn closed(&self) {
        self.closed.fetch_add(1, Relaxed);
        self.closed_counter.increment(1);
    }

    /// A connection attempt failed authentication.
    pub(crate) fn authentication_failed(&self) {
        self.auth_failures.fetch_add(1, Relaxed);
        self.auth_failures_counter.increment(1);
    }

    /// The snapshot.
    pub(crate) fn stats(&self) -> ConnectionStats {
        ConnectionStats {
            created: self.created.load(Relaxed),
            closed: self.closed.load(Relaxed),
            authentication_failures: self.auth_failures.load(Relaxed),
        }
    }
}
