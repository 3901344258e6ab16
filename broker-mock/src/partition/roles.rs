//! The roles a partition plays: becoming leader, follower or no replica, driving the
//! leader state machine (HW moves, completed `acks=all` waits, reports to the
//! controller) and a follower's appends of the leader's batches.

use baton_protocol::record::RecordBatch;
use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use super::state::{LeaderReport, PartitionState, Role};
use crate::error::LogError;
use crate::replication::{LeaderAction, LeaderState, ProduceOutcome};

impl PartitionState {
    /// What this node does for the partition.
    pub fn role(&self) -> &Role {
        &self.role
    }

    /// The leader state machine, when leading in a cluster.
    pub fn leader_state(&self) -> Option<&LeaderState> {
        match &self.role {
            Role::Leader(l) => Some(l),
            _ => None,
        }
    }

    /// Whether this node serves clients' produce and fetch for the partition.
    pub fn is_leader(&self) -> bool {
        matches!(self.role, Role::Standalone | Role::Leader(_))
    }

    /// Counts an ISR change this leader proposes.
    fn report_isr(&self, kind: crate::replication::IsrChangeKind) -> &Self {
        if let Some(m) = &self.metrics {
            crate::metrics::inc(match kind {
                crate::replication::IsrChangeKind::Shrink => &m.isr_shrinks,
                crate::replication::IsrChangeKind::Expand => &m.isr_expands,
            });
        }
        self
    }

    /// The HW moves with the log end on a standalone node; a cluster leader tells its
    /// state machine and applies what follows.
    pub(super) fn after_local_append(&mut self) {
        let leo = self.log_end_offset();
        match &mut self.role {
            Role::Leader(l) => {
                if let Err(e) = l.on_local_append(leo) {
                    tracing::error!(error = %e, "leader state refused an append");
                }
                self.drive_leader();
            }
            _ => self.set_high_watermark(leo),
        }
    }

    /// Applies the leader machine's pending actions: HW moves, completed waits and
    /// reports for the controller. Returns whether the HW moved.
    pub(crate) fn drive_leader(&mut self) -> bool {
        let actions = match &mut self.role {
            Role::Leader(l) => l.take_actions(),
            _ => return false,
        };
        self.apply_leader_actions(actions)
    }

    fn apply_leader_actions(&mut self, actions: Vec<LeaderAction>) -> bool {
        let mut moved = false;
        for a in actions {
            match a {
                LeaderAction::HighWatermarkAdvanced { to, .. } => {
                    let to = to.min(self.log_end_offset());
                    if to > self.high_watermark {
                        self.set_high_watermark(to);
                        moved = true;
                    }
                }
                LeaderAction::ProduceCompleted { wait_id, outcome } => {
                    if let Some(tx) = self.waiters.remove(&wait_id) {
                        let _ = tx.send(outcome);
                    }
                }
                LeaderAction::ProposeIsr {
                    isr,
                    broker_epochs,
                    leader_epoch,
                    partition_epoch,
                    kind,
                } => self
                    .report_isr(kind)
                    .report(|topic, partition| LeaderReport::AlterIsr {
                        topic,
                        partition,
                        leader_epoch,
                        partition_epoch,
                        isr,
                        broker_epochs,
                    }),
                LeaderAction::SuccessorCaughtUp {
                    successor,
                    log_end_offset,
                } => self.report(|topic, partition| LeaderReport::SuccessorCaughtUp {
                    topic,
                    partition,
                    successor,
                    log_end_offset,
                }),
            }
        }
        moved
    }

    fn report(&self, make: impl FnOnce(String, i32) -> LeaderReport) {
        if let (Some(tx), Some((topic, partition))) = (&self.reports, &self.ident) {
            let _ = tx.send(make(topic.to_string(), *partition));
        }
    }

    /// Tells the controller a planned move stopped writes at the current log end.
    pub(crate) fn report_drain_started(&self) {
        let leo = self.log_end_offset();
        self.report(|topic, partition| LeaderReport::DrainStarted {
            topic,
            partition,
            log_end_offset: leo,
        });
    }

    /// Takes the leadership under `leader_epoch`: assignment from the controller, the
    /// local log end starts the epoch. Any previous role ends first.
    pub(crate) fn become_leader(
        &mut self,
        init: crate::replication::LeaderInit,
        config: crate::replication::LeaderConfig,
        reports: mpsc::UnboundedSender<LeaderReport>,
    ) -> Result<(), crate::replication::LeaderError> {
        let epoch = init.leader_epoch;
        let leader = LeaderState::new(init, config)?;
        self.end_role();
        if epoch > self.leader_epoch {
            self.leader_epoch = epoch;
        }
        // The epoch starts at the log end now, before any record is written in it
        // (Kafka's makeLeader does the same): a follower holding a suffix of an
        // epoch this leader never saw is then told where it diverges. Without the
        // entry, a leader that could not write yet (too few in-sync replicas, which
        // that very follower is needed for) could not place the follower's epoch,
        // and its "undefined" answer reads as "no divergence" on the wire: the
        // follower would fetch past the leader's log end forever.
        let leo = self.log_end_offset();
        if let Err(e) = self.epoch_cache.assign(epoch, leo) {
            tracing::warn!(epoch, leo, error = %e, "leader epoch not recorded at the log end");
        }
        self.leader = leader.local_id();
        self.reports = Some(reports);
        self.role = Role::Leader(Box::new(leader));
        self.drive_leader();
        Ok(())
    }

    /// Follows `leader` (or waits for one when `-1`) at `leader_epoch`.
    pub(crate) fn become_follower(&mut self, leader: i32, leader_epoch: i32) {
        self.end_role();
        if leader_epoch > self.leader_epoch {
            self.leader_epoch = leader_epoch;
        }
        self.leader = leader;
        self.role = Role::Follower { leader };
    }

    /// Stops hosting the partition as a replica.
    pub(crate) fn become_not_replica(&mut self, leader: i32, leader_epoch: i32) {
        self.end_role();
        if leader_epoch > self.leader_epoch {
            self.leader_epoch = leader_epoch;
        }
        self.leader = leader;
        self.role = Role::NotReplica;
    }

    /// The node stops serving (killed or shut down): a leadership ends here, so
    /// every write waiting for replication (a produce, a coordinator's state change
    /// on a blocking thread) fails with NOT_LEADER_OR_FOLLOWER now instead of
    /// waiting for a deadline that only the stopped node's ticker enforced, and
    /// later writes are refused. The partition waits for a leader, as a follower.
    pub(crate) fn halt(&mut self) {
        if matches!(self.role, Role::Leader(_)) {
            let epoch = self.leader_epoch;
            self.become_follower(-1, epoch);
        }
    }

    /// Ends a leadership: waiting produces fail with NOT_LEADER_OR_FOLLOWER.
    pub(super) fn end_role(&mut self) {
        if let Role::Leader(l) = std::mem::replace(&mut self.role, Role::NotReplica) {
            let actions = l.resign();
            self.apply_leader_actions(actions);
        }
        self.reports = None;
        for (_, tx) in std::mem::take(&mut self.waiters) {
            let _ = tx.send(ProduceOutcome::NotLeader);
        }
    }

    /// Mutable access to the leader machine; call [`drive_leader`](Self::drive_leader)
    /// after using it.
    pub(crate) fn leader_state_mut(&mut self) -> Option<&mut LeaderState> {
        match &mut self.role {
            Role::Leader(l) => Some(l),
            _ => None,
        }
    }

    /// Registers an `acks=all` produce that needs the HW at `required_offset`.
    pub(crate) fn await_replication(
        &mut self,
        required_offset: i64,
        deadline_ms: u64,
    ) -> Option<oneshot::Receiver<ProduceOutcome>> {
        let Role::Leader(l) = &mut self.role else {
            return None;
        };
        let id = self.next_wait_id;
        self.next_wait_id += 1;
        let (tx, rx) = oneshot::channel();
        self.waiters.insert(id, tx);
        l.await_replication(id, required_offset, deadline_ms);
        self.drive_leader();
        Some(rx)
    }

    /// Appends a batch fetched from the leader as it is (offsets and epoch already
    /// assigned). The caller checked its CRC and contiguity.
    pub(crate) fn append_replica_batch(&mut self, batch: Bytes) -> Result<(), LogError> {
        let parsed = RecordBatch::parse(batch.clone()).ok();
        let r = self.log.append(batch);
        self.storage_result(r)?;
        if let Some(b) = parsed {
            self.producers.record_stored(&b);
        }
        Ok(())
    }

    /// Sets a follower's HW (bounded by the log end).
    pub(crate) fn set_follower_high_watermark(&mut self, hw: i64) {
        let hw = hw.min(self.log_end_offset());
        self.store_high_watermark(hw);
    }
}

#[cfg(test)]
mod tests {
    use tokio::sync::mpsc;

    use crate::log::Log;
    use crate::partition::Partition;
    use crate::producer_state::ProducerLimits;
    use crate::replication::{LeaderConfig, LeaderInit, ProduceOutcome};

    /// A new leader that has written nothing in its epoch yet still places a
    /// follower's suffix from an epoch it never saw: the fetch gets a diverging
    /// epoch that ends at the leader's log end, so the follower truncates there.
    #[test]
    fn a_new_leader_places_an_epoch_it_never_saw() {
        use baton_protocol::record::TimestampType;

        use crate::replication::EpochEndOffset;

        let p = Partition::new_replica("t", 0, Log::memory(), ProducerLimits::default());
        let mut st = p.lock();
        let (reports, _keep) = mpsc::unbounded_channel();
        let init = |epoch, leo| LeaderInit {
            local_id: 1,
            leader_epoch: epoch,
            partition_epoch: epoch,
            replicas: vec![1],
            isr: vec![1],
            log_end_offset: leo,
            high_watermark: leo,
            now_ms: 0,
        };
        st.become_leader(init(1, 0), LeaderConfig::default(), reports.clone())
            .expect("leads");
        let records = one_batch();
        st.append_records(&records, TimestampType::CreateTime, 0)
            .expect("appended");
        let leo = st.log_end_offset();
        assert!(leo > 0);
        // Epoch 2 went to another node (which wrote a suffix this node never got);
        // epoch 3 is this node's again, with nothing written in it yet.
        st.become_follower(2, 2);
        st.become_leader(init(3, leo), LeaderConfig::default(), reports)
            .expect("leads again");
        let div = st
            .epoch_cache()
            .diverging_epoch(leo + 5, 2, st.log_end_offset());
        assert_eq!(
            div,
            Some(EpochEndOffset {
                epoch: 1,
                end_offset: leo
            })
        );
    }

    /// One uncompressed batch of three records.
    fn one_batch() -> bytes::Bytes {
        let mut b = baton_protocol::record::RecordBatchBuilder::new(0);
        for i in 0..3u8 {
            b.push(0, None, Some(&[i][..]), &[]);
        }
        b.finish()
    }

    #[test]
    fn halting_a_leader_fails_its_waiting_writes_and_refuses_new_waits() {
        let p = Partition::new_replica("t", 0, Log::memory(), ProducerLimits::default());
        let mut st = p.lock();
        let (reports, _keep) = mpsc::unbounded_channel();
        let init = LeaderInit {
            local_id: 1,
            leader_epoch: 3,
            partition_epoch: 0,
            replicas: vec![1, 2],
            isr: vec![1, 2],
            log_end_offset: 0,
            high_watermark: 0,
            now_ms: 0,
        };
        st.become_leader(init, LeaderConfig::default(), reports)
            .expect("leads");
        let mut waiting = st
            .await_replication(1, u64::MAX)
            .expect("a leader registers the wait");
        assert!(waiting.try_recv().is_err(), "nothing answers it yet");
        st.halt();
        assert_eq!(waiting.try_recv(), Ok(ProduceOutcome::NotLeader));
        assert!(!st.is_leader());
        assert_eq!(st.leader_epoch(), 3, "the epoch is kept");
        assert!(st.await_replication(1, u64::MAX).is_none());
    }
}
