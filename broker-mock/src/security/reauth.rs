//! Session lifetimes and re-authentication (KIP-368), free of I/O: how long an
//! authenticated SASL session lasts, when it may re-authenticate, and the
//! counters that show it happening.
//!
//! As Kafka's `SaslServerAuthenticator`: the lifetime is the credential's
//! remaining life (an OAUTHBEARER token's expiry) bounded by
//! `connections.max.reauth.ms` when that is positive; a password has no expiry,
//! so with `connections.max.reauth.ms` 0 (the default) PLAIN and SCRAM sessions
//! never expire, while an OAUTHBEARER session ends with its token. After the
//! session expires, every request but ApiVersions and a new SASL exchange closes
//! the connection. A session may start re-authenticating at most once a second
//! (Kafka's `MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS`), with the mechanism it used
//! first, and must end as the same principal.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use baton_protocol::sasl::Mechanism;
use tokio::time::Instant;

/// Least time between the starts of two re-authentications of one connection.
pub(crate) const MIN_REAUTH_INTERVAL: Duration = Duration::from_secs(1);

/// The session lifetime in milliseconds for a login completed at `now_ms` with a
/// credential expiring at `credential_expiry_ms` under `max_reauth`
/// (`connections.max.reauth.ms`, zero for none); `None` when the session never
/// expires. Never negative.
pub(crate) fn session_lifetime_ms(
    now_ms: i64,
    credential_expiry_ms: Option<i64>,
    max_reauth: Duration,
) -> Option<i64> {
    let max = i64::try_from(max_reauth.as_millis()).unwrap_or(i64::MAX);
    let remaining = credential_expiry_ms.map(|exp| exp.saturating_sub(now_ms).max(0));
    match (remaining, max > 0) {
        (None, false) => None,
        (None, true) => Some(max),
        (Some(left), false) => Some(left),
        (Some(left), true) => Some(left.min(max)),
    }
}

/// An authenticated SASL session on one connection.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// Who authenticated; a re-authentication must end as the same principal.
    pub principal: String,
    /// The mechanism used; a re-authentication must use it again.
    pub mechanism: Mechanism,
    /// When the session expires; `None` never.
    pub expires: Option<Instant>,
    /// When the last re-authentication of this connection started.
    pub reauth_started: Option<Instant>,
}

impl Session {
    /// Whether the session has expired at `now`.
    pub(crate) fn expired(&self, now: Instant) -> bool {
        self.expires.is_some_and(|at| now >= at)
    }

    /// Whether a SaslHandshake at `now` starts a re-authentication: only
    /// sessions with a lifetime re-authenticate, at most once a second.
    pub(crate) fn may_reauthenticate(&self, now: Instant) -> bool {
        self.expires.is_some()
            && self
                .reauth_started
                .is_none_or(|at| now.duration_since(at) >= MIN_REAUTH_INTERVAL)
    }
}

/// Counters of a listener's SASL sessions, shared by every clone of its
/// [`SaslSettings`](super::SaslSettings): tests and operators read them to see
/// logins, re-authentications and expired sessions.
#[derive(Debug, Default)]
pub struct SaslStats {
    authentications: AtomicU64,
    reauthentications: AtomicU64,
    failures: AtomicU64,
    expired_sessions_closed: AtomicU64,
}

impl SaslStats {
    /// Completed first logins.
    pub fn authentications(&self) -> u64 {
        self.authentications.load(Ordering::Relaxed)
    }

    /// Completed re-authentications (KIP-368).
    pub fn reauthentications(&self) -> u64 {
        self.reauthentications.load(Ordering::Relaxed)
    }

    /// Failed logins and re-authentications (each closes its connection).
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// Connections closed because a request came after their session expired.
    pub fn expired_sessions_closed(&self) -> u64 {
        self.expired_sessions_closed.load(Ordering::Relaxed)
    }

    pub(crate) fn note_authenticated(&self, reauth: bool) {
        let counter = if reauth {
            &self.reauthentications
        } else {
            &self.authentications
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn note_failure(&self) {
        self.failures.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn note_expired(&self) {
        self.expired_sessions_closed.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetimes_follow_kafka() {
        let off = Duration::ZERO;
        let max = Duration::from_millis(1_500);
        assert_eq!(session_lifetime_ms(1_000, None, off), None);
        assert_eq!(session_lifetime_ms(1_000, None, max), Some(1_500));
        assert_eq!(session_lifetime_ms(1_000, Some(61_000), off), Some(60_000));
        assert_eq!(session_lifetime_ms(1_000, Some(61_000), max), Some(1_500));
        assert_eq!(session_lifetime_ms(1_000, Some(2_000), max), Some(1_000));
        assert_eq!(session_lifetime_ms(1_000, Some(500), max), Some(0));
    }

    #[test]
    fn expiry_and_the_reauthentication_interval() {
        let now = Instant::now();
        let mut session = Session {
            principal: "alice".into(),
            mechanism: Mechanism::Plain,
            expires: None,
            reauth_started: None,
        };
        assert!(!session.expired(now + Duration::from_secs(3600)));
        assert!(
            !session.may_reauthenticate(now),
            "no lifetime, no re-authentication"
        );
        session.expires = Some(now + Duration::from_secs(2));
        assert!(session.may_reauthenticate(now));
        assert!(!session.expired(now + Duration::from_millis(1_999)));
        assert!(session.expired(now + Duration::from_secs(2)));
        session.reauth_started = Some(now);
        assert!(!session.may_reauthenticate(now + Duration::from_millis(999)));
        assert!(session.may_reauthenticate(now + MIN_REAUTH_INTERVAL));
    }
}
