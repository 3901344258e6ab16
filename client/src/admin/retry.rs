//! The one retry loop of every [`Admin`] call.
//!
//! An admin call is one or more *attempts* (a request to the controller, to a
//! chosen broker, or to each partition's leader). An attempt that fails with a
//! retriable error (a broken or refused connection, a request timeout, no
//! controller known, or a retriable error code in the answer such as
//! NOT_CONTROLLER, NOT_LEADER_OR_FOLLOWER, COORDINATOR_NOT_AVAILABLE,
//! REQUEST_TIMED_OUT) is repeated after the shared backoff
//! ([`crate::backoff`]) on fresh metadata, until the admin's operation timeout
//! runs out, as the Java admin client does. The last error is returned then.
//!
//! An attempt reports a retriable error code from a response with
//! [`retriable_code`]; any other error ends the call at once.

use std::future::Future;
use std::time::Duration;

use baton_protocol::messages::Request;
use baton_protocol::ErrorCode;
use tokio::time::Instant;

use super::{Admin, AdminError};
use crate::backoff::Backoff;
use crate::client::ClientError;
use crate::metadata::Scope;

/// The first wait of an admin retry loop.
pub(crate) const RETRY_BACKOFF_BASE: Duration = Duration::from_millis(10);
/// The longest wait of an admin retry loop.
pub(crate) const RETRY_BACKOFF_CAP: Duration = Duration::from_millis(500);

impl AdminError {
    /// Whether the failed attempt might succeed if repeated on fresh metadata.
    pub fn is_retriable(&self) -> bool {
        match self {
            AdminError::Client(e) => e.is_retriable(),
            _ => false,
        }
    }
}

/// `Err` for an error code that a retry may cure (the attempt is repeated), `Ok`
/// for success or a code that is final (the caller reports it as it sees fit).
///
/// UNKNOWN_TOPIC_OR_PARTITION, retriable for a producer that waits for metadata,
/// is final for an admin call: the topic the call names does not exist.
pub(crate) fn retriable_code(
    code: i16,
    context: impl FnOnce() -> String,
) -> Result<(), AdminError> {
    let code = ErrorCode::from_code(code);
    if code.is_retriable() && code != ErrorCode::UnknownTopicOrPartition {
        Err(AdminError::Client(ClientError::Broker {
            code,
            context: context(),
        }))
    } else {
        Ok(())
    }
}

impl Admin {
    /// Runs `attempt` until it succeeds, fails with an error that is not
    /// retriable, or the operation timeout runs out (then its last error is
    /// returned). Between attempts it waits the shared backoff and refreshes the
    /// cluster metadata (best effort), so that the next attempt finds a new
    /// controller or leader.
    ///
    /// A retry after an attempt whose answer was lost may find its effect done
    /// already; each call documents what it reports then.
    pub(crate) async fn with_retries<T, Fut>(
        &self,
        what: &'static str,
        mut attempt: impl FnMut() -> Fut,
    ) -> Result<T, AdminError>
    where
        Fut: Future<Output = Result<T, AdminError>>,
    {
        let deadline = Instant::now() + self.operation_timeout;
        let mut backoff = Backoff::new(RETRY_BACKOFF_BASE, RETRY_BACKOFF_CAP);
        loop {
            let err = match attempt().await {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            let wait = backoff.next_delay();
            if !err.is_retriable() || Instant::now() + wait >= deadline {
                return Err(err);
            }
            tracing::info!(what, error = %err, ?wait, "admin request failed; retrying");
            tokio::time::sleep(wait).await;
            // Best effort: the next attempt looks the controller and leaders up again.
            let _ = self.client.refresh(Scope::Topics(Vec::new()), None).await;
        }
    }

    /// How long one request may wait for its answer: the broker may hold it for
    /// the operation timeout, and the network adds the request timeout.
    pub(crate) fn attempt_timeout(&self) -> Duration {
        self.client.request_timeout() + self.operation_timeout
    }

    /// The operation timeout in milliseconds, as requests carry it.
    pub(crate) fn timeout_ms(&self) -> i32 {
        self.operation_timeout.as_millis().min(i32::MAX as u128) as i32
    }

    /// One attempt: sends `req` to the controller (a KRaft broker forwards what it
    /// cannot answer itself).
    pub(crate) async fn controller_attempt<R: Request + Sync + 'static>(
        &self,
        req: &R,
    ) -> Result<R::Response, AdminError> {
        let conn = self.client.controller_connection().await?;
        Ok(conn
            .send_with_timeout(req, self.attempt_timeout())
            .await
            .map_err(ClientError::from)?)
    }

    /// One attempt: sends `req` to broker `node_id`.
    pub(crate) async fn node_attempt<R: Request + Sync + 'static>(
        &self,
        node_id: i32,
        req: &R,
    ) -> Result<R::Response, AdminError> {
        let conn = self.client.node_connection(node_id).await?;
        Ok(conn
            .send_with_timeout(req, self.attempt_timeout())
            .await
            .map_err(ClientError::from)?)
    }

    /// Sends `req` to the controller, retrying as [`Admin::with_retries`] does.
    /// Retriable error codes inside the answer are the caller's to check.
    pub(crate) async fn to_controller<R: Request + Sync + 'static>(
        &self,
        req: &R,
    ) -> Result<R::Response, AdminError> {
        self.with_retries("controller request", || self.controller_attempt(req))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retriable_codes_become_retriable_errors() {
        for code in [
            ErrorCode::NotController,
            ErrorCode::NotLeaderOrFollower,
            ErrorCode::RequestTimedOut,
            ErrorCode::CoordinatorNotAvailable,
            ErrorCode::LeaderNotAvailable,
        ] {
            let err = retriable_code(code.code(), || "x".into()).unwrap_err();
            assert!(err.is_retriable(), "{code}");
        }
        assert!(retriable_code(0, || "x".into()).is_ok());
        assert!(retriable_code(ErrorCode::InvalidConfig.code(), || "x".into()).is_ok());
        assert!(retriable_code(ErrorCode::TopicAlreadyExists.code(), || "x".into()).is_ok());
        assert!(retriable_code(ErrorCode::UnknownTopicOrPartition.code(), || "x".into()).is_ok());
    }
}
