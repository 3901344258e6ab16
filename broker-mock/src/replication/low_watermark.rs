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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replication::{LeaderConfig, LeaderInit};

    fn leader() -> LeaderState {
        LeaderState::new(
            LeaderInit {
                local_id: 1,
                leader_epoch: 1,
                partition_epoch: 1,
                replicas: vec![1, 2, 3],
                isr: vec![1, 2, 3],
                log_end_offset: 100,
                high_watermark: 100,
                now_ms: 0,
            },
            LeaderConfig::default(),
        )
        .unwrap()
    }

    #[test]
    fn the_low_watermark_waits_for_every_live_follower() {
        let mut l = leader();
        // No follower has reported: unknown, as Kafka's -1.
        assert_eq!(l.low_watermark(40), -1);
        l.on_follower_log_start(2, 40);
        assert_eq!(l.low_watermark(40), -1, "follower 3 has not reported");
        l.on_follower_log_start(3, 10);
        assert_eq!(l.low_watermark(40), 10);
        l.on_follower_log_start(3, 40);
        assert_eq!(l.low_watermark(40), 40);
        // A follower ahead of the leader does not raise it past the leader's.
        l.on_follower_log_start(2, 60);
        assert_eq!(l.low_watermark(40), 40);
        // -1 (not told) and unknown replicas are ignored.
        l.on_follower_log_start(3, -1);
        l.on_follower_log_start(9, 0);
        assert_eq!(l.low_watermark(40), 40);
        // A fenced follower is not waited for.
        l.on_follower_log_start(3, 5);
        assert_eq!(l.low_watermark(40), 5);
        l.set_ineligible(vec![3]);
        assert_eq!(l.low_watermark(40), 40);
    }
}
