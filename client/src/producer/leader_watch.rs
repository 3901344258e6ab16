//! Fast leader discovery: while a partition's leader cannot be reached, its
//! batches wait out a retry backoff; metadata is polled on a short interval
//! meanwhile, and as soon as metadata or a KIP-951 hint names a leader with a
//! newer epoch than the one that failed, those batches go out at once.
//!
//! Without this, a batch that failed against a crashed leader waits out its
//! backoff (doubling up to `retry_backoff_max`) even after the controller elected
//! a new leader. The poll is one task per producer, started when a partition's
//! leader first fails and ended when no batch waits for a leader; its refreshes go
//! through the client's single-flight refresh, so at most one metadata request of
//! a client is in flight.

use std::collections::HashMap;
use std::sync::Arc;

use baton_protocol::ErrorCode;
use tokio::time::Instant;

use super::{AttemptError, Shared};
use crate::client::{Client, ClientError};
use crate::metadata::Scope;

/// Partitions whose leader failed, by the leader epoch that failed.
#[derive(Debug, Default)]
pub(crate) struct LeaderWatch {
    /// The newest leader epoch each partition's batches failed against.
    waiting: HashMap<(Arc<str>, i32), i32>,
    /// A poll task runs (it alone clears this, when nothing waits).
    polling: bool,
}

impl LeaderWatch {
    /// Watches `topic`/`partition`, whose leader of epoch `failed` could not be
    /// reached. Returns true if a poll task must be started.
    pub(crate) fn watch(&mut self, topic: Arc<str>, partition: i32, failed: i32) -> bool {
        let e = self.waiting.entry((topic, partition)).or_insert(failed);
        *e = (*e).max(failed);
        !std::mem::replace(&mut self.polling, true)
    }
}

/// Whether `error` says the partition's leader is gone or unreachable (as
/// opposed to a leader that answered but could not take the batch yet).
pub(crate) fn leader_unreachable(error: &AttemptError) -> bool {
    match error {
        AttemptError::Client(
            ClientError::Connection(_)
            | ClientError::NoBrokerAvailable { .. }
            | ClientError::LeaderNotAvailable { .. }
            | ClientError::UnknownBroker { .. },
        ) => true,
        AttemptError::Client(_) => false,
        AttemptError::Broker { code, .. } => matches!(
            code,
            ErrorCode::NotLeaderOrFollower
                | ErrorCode::LeaderNotAvailable
                | ErrorCode::FencedLeaderEpoch
                | ErrorCode::UnknownLeaderEpoch
                | ErrorCode::KafkaStorageError
                | ErrorCode::NetworkException
                | ErrorCode::RequestTimedOut
        ),
    }
}

/// The newest leader epoch known for `topic`/`partition`: metadata's or a
/// KIP-951 hint's, whichever is greater (-1 if neither knows it).
pub(crate) fn known_epoch(client: &Client, topic: &Arc<str>, partition: i32) -> i32 {
    let meta = client
        .metadata_snapshot()
        .0
        .topic(topic)
        .and_then(|t| t.partition(partition))
        .map_or(-1, |p| p.leader_epoch);
    let hint = client
        .leader_hint(topic, partition)
        .map_or(-1, |h| h.leader_epoch);
    meta.max(hint)
}

/// Polls metadata every `metadata_fast_refresh_interval` while a watched
/// partition waits for a new leader.
pub(crate) async fn poll(shared: Arc<Shared>) {
    let interval = shared.client.fast_refresh_interval();
    let mut seen = shared.client.metadata_snapshot().1;
    loop {
        tokio::time::sleep(interval).await;
        // Skips the round trip if someone else refreshed since `seen`.
        match shared
            .client
            .refresh(Scope::Topics(Vec::new()), Some(seen))
            .await
        {
            Ok((_, generation)) => seen = generation,
            Err(e) => tracing::debug!(error = %e, "leader poll: metadata refresh failed"),
        }
        if !hasten_moved(&shared, true) {
            return;
        }
    }
}

/// Ends the backoff of watched partitions whose leader epoch moved past the one
/// that failed, and stops watching partitions with no batch in backoff. With
/// `poller`, ends the poll task's turn when nothing is left to watch. Returns
/// whether any partition is still watched.
pub(crate) fn hasten_moved(shared: &Shared, poller: bool) -> bool {
    let now = Instant::now();
    let mut woke = false;
    let mut acc = shared.lock();
    let waiting = std::mem::take(&mut acc.leaders.waiting);
    for ((topic, partition), failed) in waiting {
        if !acc.backing_off(&topic, partition, now) {
            continue;
        }
        let known = known_epoch(&shared.client, &topic, partition);
        if known > failed {
            tracing::info!(%topic, partition, failed_epoch = failed, leader_epoch = known, "partition has a new leader; retrying without backoff");
            woke |= acc.hasten(&topic, partition);
        } else {
            acc.leaders.waiting.insert((topic, partition), failed);
        }
    }
    let still = !acc.leaders.waiting.is_empty();
    if poller && !still {
        acc.leaders.polling = false;
    }
    drop(acc);
    if woke {
        shared.wake.notify_one();
    }
    still
}
