//! Counts of connections a listener closed because they broke its rules: a
//! connection limit, a failed TLS handshake, a failed or out-of-order SASL
//! exchange, a request before authentication, or a request frame that could not
//! be handled. Each listener has its own [`RefusalCounters`], read through
//! [`BrokerHandle::refused_connections`](crate::BrokerHandle::refused_connections)
//! as a [`RefusedConnections`] snapshot.

use std::sync::atomic::{AtomicU64, Ordering};

/// Why a connection was closed by its listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RefusalReason {
    /// `max_connections` or `max_connections_per_ip` was reached.
    ConnectionLimit,
    /// The TLS handshake failed or timed out.
    TlsHandshake,
    /// The SASL handshake named a disabled mechanism, or authentication failed.
    SaslAuthentication,
    /// A SASL request arrived out of order (SaslAuthenticate before SaslHandshake,
    /// a second SaslHandshake during an exchange).
    SaslState,
    /// A request other than ApiVersions or SASL before authentication completed.
    UnauthenticatedRequest,
    /// A request frame was oversized, did not decode or could not be handled.
    BadRequest,
}

const REASONS: usize = 6;

impl RefusalReason {
    fn index(self) -> usize {
        match self {
            RefusalReason::ConnectionLimit => 0,
            RefusalReason::TlsHandshake => 1,
            RefusalReason::SaslAuthentication => 2,
            RefusalReason::SaslState => 3,
            RefusalReason::UnauthenticatedRequest => 4,
            RefusalReason::BadRequest => 5,
        }
    }

    /// A short name for logs.
    pub(crate) fn name(self) -> &'static str {
        match self {
            RefusalReason::ConnectionLimit => "connection limit",
            RefusalReason::TlsHandshake => "TLS handshake",
            RefusalReason::SaslAuthentication => "SASL authentication",
            RefusalReason::SaslState => "SASL state",
            RefusalReason::UnauthenticatedRequest => "unauthenticated request",
            RefusalReason::BadRequest => "bad request",
        }
    }
}

/// How many connections one listener has closed, by reason, since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RefusedConnections {
    /// Closed on accept: `max_connections` or `max_connections_per_ip` reached.
    pub connection_limit: u64,
    /// The TLS handshake failed (a plaintext client on a TLS port, an untrusted
    /// client certificate) or timed out.
    pub tls_handshake: u64,
    /// The SASL handshake named a disabled mechanism, or the credentials were
    /// refused (wrong password, unknown user, malformed SASL message).
    pub sasl_authentication: u64,
    /// A SASL request out of order: SaslAuthenticate before SaslHandshake, or a
    /// second SaslHandshake during an exchange.
    pub sasl_state: u64,
    /// A request other than ApiVersions or the SASL exchange before
    /// authentication completed on a SASL listener.
    pub unauthenticated_request: u64,
    /// A request frame that was oversized, did not decode or could not be handled
    /// (TLS bytes on a plaintext port land here).
    pub bad_request: u64,
}

impl RefusedConnections {
    /// All refusals together.
    pub fn total(&self) -> u64 {
        self.connection_limit
            + self.tls_handshake
            + self.sasl_authentication
            + self.sasl_state
            + self.unauthenticated_request
            + self.bad_request
    }
}

/// One listener's refusal counters.
#[derive(Debug, Default)]
pub(crate) struct RefusalCounters {
    counts: [AtomicU64; REASONS],
}

impl RefusalCounters {
    /// Counts one refusal.
    pub(crate) fn count(&self, reason: RefusalReason) {
        self.counts[reason.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// The counts so far.
    pub(crate) fn snapshot(&self) -> RefusedConnections {
        let get = |r: RefusalReason| self.counts[r.index()].load(Ordering::Relaxed);
        RefusedConnections {
            connection_limit: get(RefusalReason::ConnectionLimit),
            tls_handshake: get(RefusalReason::TlsHandshake),
            sasl_authentication: get(RefusalReason::SaslAuthentication),
            sasl_state: get(RefusalReason::SaslState),
            unauthenticated_request: get(RefusalReason::UnauthenticatedRequest),
            bad_request: get(RefusalReason::BadRequest),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_land_in_their_own_field() {
        let c = RefusalCounters::default();
        c.count(RefusalReason::TlsHandshake);
        c.count(RefusalReason::TlsHandshake);
        c.count(RefusalReason::UnauthenticatedRequest);
        let s = c.snapshot();
        assert_eq!(s.tls_handshake, 2);
        assert_eq!(s.unauthenticated_request, 1);
        assert_eq!(s.total(), 3);
    }
}
