//! A storage failure of this replica's log: a write or fsync failed, so the log went
//! offline (see `log/disk.rs`). The replica stops taking writes and serving reads
//! (KAFKA_STORAGE_ERROR), a leader resigns at once (its `acks=all` waits fail with
//! NOT_LEADER_OR_FOLLOWER, so nothing it did not persist is acknowledged), and the
//! node reports the replica to the controller, which takes it out of the ISR and
//! elects another leader. The replica never leads or fetches again in this run of
//! the node; a restart reopens the log, recovers it from what is on disk, and the
//! replica catches up from the leader like any returning follower.

use super::state::{LeaderReport, PartitionState, Role};
use crate::error::LogError;

impl PartitionState {
    /// Whether this replica's log is offline after a failed write or fsync.
    pub fn log_offline(&self) -> bool {
        self.log.offline_reason().is_some()
    }

    /// Reacts to `error` from a log operation: if it just took the log offline (an
    /// I/O failure; later calls fail with [`LogError::Offline`] and change nothing), a
    /// leader resigns and a cluster replica is reported to the controller.
    pub(crate) fn on_storage_failure(&mut self, error: &LogError) {
        if !self.log_offline() || !matches!(error, LogError::Io { .. }) {
            return;
        }
        let (topic, partition) = match &self.ident {
            Some((t, p)) => (t.to_string(), *p),
            None => (String::new(), -1),
        };
        tracing::error!(%topic, partition, %error, "replica log offline after a storage failure");
        if matches!(self.role, Role::Leader(_)) {
            let epoch = self.leader_epoch;
            self.become_follower(-1, epoch);
        }
        if let Some(link) = &self.corruption_link {
            let _ = link.reports.send(LeaderReport::OfflineReplica {
                topic,
                partition,
                log_end_offset: self.log.log_end_offset(),
            });
        }
    }

    /// Passes a log operation's result through [`PartitionState::on_storage_failure`].
    pub(crate) fn storage_result<T>(&mut self, r: Result<T, LogError>) -> Result<T, LogError> {
        if let Err(e) = &r {
            self.on_storage_failure(e);
        }
        r
    }
}
