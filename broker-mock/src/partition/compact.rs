//! Compaction of one replica's log (see [`crate::log::compaction`]): every replica
//! cleans its own log below its last stable offset, as each Kafka broker does.

use super::state::{PartitionState, Role};
use crate::corruption::Where;
use crate::log::compaction::{clean_log, CleanError, CleanPoint, CleanStats, TopicCleaning};

impl PartitionState {
    /// Cleans this replica's log if it is worth it (see
    /// [`crate::log::compaction`]); `None` when nothing was done. Nothing is done for
    /// a deleted partition, a replica this node does not host, or one with known
    /// corruption. A corrupt batch found while cleaning is handled as anywhere else
    /// (the replica is marked, reported and repaired) and the cleaning stops.
    pub(crate) fn clean(
        &mut self,
        settings: &TopicCleaning,
        dedupe_bytes: usize,
        now_ms: i64,
        point: &mut CleanPoint,
    ) -> Result<Option<CleanStats>, CleanError> {
        if self.deleted
            || self.corrupt.is_some()
            || matches!(self.role, Role::NotReplica)
            || !settings.compact
        {
            return Ok(None);
        }
        let upto = self.last_stable_offset();
        let result = clean_log(&mut self.log, upto, settings, dedupe_bytes, now_ms, point);
        if let Err(CleanError::Corrupt { offset, reason }) = &result {
            self.on_corruption(*offset, Where::Cleaner, reason);
        }
        result
    }
}
