//! Corruption of this replica: marking it (the replica stops being eligible to
//! lead), reporting it to the controller, and the repair that cuts the log below it
//! and re-fetches.

use tokio::sync::mpsc;

use super::state::{CorruptMark, CorruptionLink, LeaderReport, PartitionState, Role};
use crate::corruption::{CorruptionKind, CorruptionLog, Where};
use crate::error::LogError;

impl PartitionState {
    /// The first offset of this replica known to be corrupt, while it is not repaired.
    pub fn corrupt_offset(&self) -> Option<i64> {
        self.corrupt.as_ref().map(|m| m.offset)
    }

    pub(crate) fn corrupt_mark(&self) -> Option<CorruptMark> {
        self.corrupt.as_deref().copied()
    }

    /// Start-up recovery cut valid data at `offset` (not a torn tail): the replica must
    /// not lead and must re-fetch from `offset`.
    pub(crate) fn mark_recovered_corruption(&mut self, offset: i64) {
        self.corrupt = Some(Box::new(CorruptMark {
            offset,
            detected: std::time::Instant::now(),
            from_recovery: true,
            repair_started: None,
        }));
    }

    /// Connects the replica to its node's corruption reporting; reports corruption
    /// found by recovery before the node existed.
    pub(crate) fn attach_corruption_link(
        &mut self,
        node: i32,
        events: std::sync::Arc<CorruptionLog>,
        reports: mpsc::UnboundedSender<LeaderReport>,
    ) {
        if self.corruption_link.is_some() {
            return;
        }
        self.corruption_link = Some(Box::new(CorruptionLink {
            node,
            events,
            reports,
        }));
        if let Some(m) = self.corrupt_mark().filter(|m| m.from_recovery) {
            self.corrupt = Some(Box::new(CorruptMark {
                from_recovery: false,
                ..m
            }));
            self.corruption_event(CorruptionKind::Detected {
                at: Where::Recovery,
                offset: m.offset,
                reason: "recovery cut valid data after a damaged batch".into(),
            });
            self.report_corrupt(m.offset);
        }
    }

    fn report_corrupt(&self, offset: i64) {
        if let (Some(l), Some((topic, partition))) = (&self.corruption_link, &self.ident) {
            let _ = l.reports.send(LeaderReport::CorruptReplica {
                topic: topic.to_string(),
                partition: *partition,
                offset,
            });
        }
    }

    /// Records a corruption event of this replica (cluster replicas only).
    pub(crate) fn corruption_event(&self, kind: CorruptionKind) {
        if let Some(m) = &self.metrics {
            match &kind {
                CorruptionKind::Detected { at, .. } => {
                    m.corruption(crate::metrics::CorruptionSite::Stored(*at))
                }
                CorruptionKind::RepairFinished { .. } => crate::metrics::inc(&m.repairs),
                _ => {}
            }
        }
        if let (Some(l), Some((topic, partition))) = (&self.corruption_link, &self.ident) {
            l.events.push(l.node, topic, *partition, kind);
        } else if let Some((topic, partition)) = &self.ident {
            tracing::error!(target: crate::corruption::TARGET, topic = &**topic, partition, ?kind, "corruption");
        }
    }

    /// A check found a corrupt stored batch at `offset`: remembers it (the replica
    /// stops being eligible to lead), reports the replica to the controller and, if it
    /// leads, resigns at once so nothing more is served from it. A standalone broker
    /// keeps refusing the bad range.
    pub(crate) fn on_corruption(&mut self, offset: i64, at: Where, reason: &str) {
        let known = self.corrupt.as_ref().is_some_and(|m| m.offset <= offset);
        if !known {
            self.corrupt = Some(Box::new(CorruptMark {
                offset,
                detected: std::time::Instant::now(),
                from_recovery: false,
                repair_started: None,
            }));
            self.corruption_event(CorruptionKind::Detected {
                at,
                offset,
                reason: reason.to_owned(),
            });
            self.report_corrupt(offset);
        }
        if let Role::Leader(l) = &self.role {
            let leader_epoch = l.leader_epoch();
            self.become_follower(-1, self.leader_epoch);
            self.corruption_event(CorruptionKind::LeaderResigned { leader_epoch });
        }
    }

    /// Starts repairing: cuts the log below the first corrupt batch (the batch holding
    /// the mark's offset and everything after it go) so that the replica fetcher
    /// re-fetches that range. Returns the new log end.
    pub(crate) fn begin_repair(&mut self) -> Result<i64, LogError> {
        let Some(m) = self.corrupt_mark() else {
            return Ok(self.log_end_offset());
        };
        self.truncate_to(m.offset)?;
        let leo = self.log_end_offset();
        self.corrupt = Some(Box::new(CorruptMark {
            repair_started: Some(std::time::Instant::now()),
            ..m
        }));
        self.corruption_event(CorruptionKind::RepairStarted { truncated_to: leo });
        Ok(leo)
    }

    /// The repair caught up with the leader: the replica is healthy again.
    pub(crate) fn clear_corruption(&mut self) -> Option<CorruptMark> {
        let m = *self.corrupt.take()?;
        let started = m.repair_started.unwrap_or(m.detected);
        self.corruption_event(CorruptionKind::RepairFinished {
            since_detected: m.detected.elapsed(),
            since_started: started.elapsed(),
        });
        Some(m)
    }
}
