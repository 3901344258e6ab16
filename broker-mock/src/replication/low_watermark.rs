//! The leader's view of its replicas' log start offsets: what DeleteRecords reports
//! as the partition's low watermark (Kafka's `Partition.lowWatermarkIfLeader`).

use super::leader::{LeaderState, ReplicaId};

impl LeaderState {
    /// A follower's fetch carried its log start offset (`-1`, sent by a follower
    /// that does not tell, is ignored).
    pub fn on_follower_log_start(&mut self, replica: ReplicaId, log_start_offset: i64) {
        if log_start_offset < 0 {
            return;
        }
        if let Some(p) = self.follower_progress_mut(replica) {
            p.log_start_offset = Some(log_start_offset);
        }
    }

    /// The smallest log start offset among this leader (`local_log_start`) and the
    /// followers that are not fenced or shutting down; `-1` while such a follower has
    /// not reported one under this leadership (as Kafka's unknown offset).
    pub fn low_watermark(&self, local_log_start: i64) -> i64 {
        let mut low = local_log_start;
        for (id, p) in self.followers_progress() {
            if self.is_ineligible(id) {
                continue;
            }
            low = low.min(p.log_start_offset.unwrap_or(-1));
        }
        low
    }
}
