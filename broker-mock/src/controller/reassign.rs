//! Partition reassignment decisions (KIP-455), as KRaft makes them.
//!
//! Starting one writes the replicas as the target followed by the replicas being
//! removed, with the added ones listed as adding: Metadata shows the union, the
//! added replicas fetch from the leader, and its ISR proposals bring them in once
//! they caught up. After every ISR change the controller checks whether the whole
//! target is in sync; then the replicas become the target, the ISR keeps only
//! target members and, if the leader was removed, the first eligible in-sync
//! target replica leads. Cancelling puts the original replicas back. Each step is
//! one [`ReassignmentRecord`] in the metadata log, so a restarted controller
//! carries on where the old one stopped.

use std::collections::BTreeSet;

use baton_protocol::Uuid;

use super::decisions::{Controller, ControllerError};
use super::records::{MetadataRecord, ReassignmentRecord, NO_LEADER};

impl Controller {
    /// Starts (`Some(target)`), replaces or cancels (`None`) a partition's
    /// reassignment. Errors: UNKNOWN_TOPIC_OR_PARTITION; INVALID_REPLICA_ASSIGNMENT
    /// for an empty or repeating target or one naming an unregistered broker;
    /// NO_REASSIGNMENT_IN_PROGRESS for a cancellation with nothing to cancel. A
    /// target equal to the replicas in place changes nothing.
    pub fn alter_reassignment(
        &mut self,
        topic_id: Uuid,
        partition: i32,
        target: Option<Vec<i32>>,
    ) -> Result<(), ControllerError> {
        let key = (topic_id, partition);
        let p = self.partition_to_change(topic_id, partition)?;
        let original = p.original_replicas();
        let Some(target) = target else {
            if !p.is_reassigning() {
                return Err(ControllerError::NoReassignmentInProgress);
            }
            self.set_replicas(key, original, Vec::new(), Vec::new());
            return Ok(());
        };
        if target.is_empty() {
            return Err(ControllerError::InvalidReplicaAssignment(
                "the target replica list is empty".into(),
            ));
        }
        let mut seen = BTreeSet::new();
        if let Some(r) = target.iter().find(|r| !seen.insert(**r)) {
            return Err(ControllerError::InvalidReplicaAssignment(format!(
                "replica {r} appears more than once"
            )));
        }
        if let Some(r) = target.iter().find(|r| self.state().broker(**r).is_none()) {
            return Err(ControllerError::InvalidReplicaAssignment(format!(
                "broker {r} is not registered"
            )));
        }
        let adding: Vec<i32> = target
            .iter()
            .copied()
            .filter(|r| !original.contains(r))
            .collect();
        let removing: Vec<i32> = original
            .iter()
            .copied()
            .filter(|r| !target.contains(r))
            .collect();
        let replicas: Vec<i32> = target.iter().chain(&removing).copied().collect();
        if replicas == p.replicas && adding == p.adding_replicas && removing == p.removing_replicas
        {
            return Ok(());
        }
        self.set_replicas(key, replicas, adding, removing);
        self.complete_reassignment_if_caught_up(key);
        Ok(())
    }

    /// Ends the partition's reassignment when every target replica is in the ISR
    /// and one of them may lead.
    pub(super) fn complete_reassignment_if_caught_up(&mut self, key: (Uuid, i32)) {
        let p = self.partition_info(key);
        if !p.is_reassigning() {
            return;
        }
        let target = p.target_replicas();
        if !target.iter().all(|r| p.isr.contains(r)) {
            return;
        }
        let can_lead =
            target.contains(&p.leader) || target.iter().any(|r| self.state().is_eligible(*r));
        if can_lead {
            self.set_replicas(key, target, Vec::new(), Vec::new());
        }
    }

    /// Writes the partition's new replica set: the ISR keeps its members that stay,
    /// and a leader that leaves hands over to the first eligible in-sync replica
    /// (none: offline).
    fn set_replicas(
        &mut self,
        key: (Uuid, i32),
        replicas: Vec<i32>,
        adding: Vec<i32>,
        removing: Vec<i32>,
    ) {
        let p = self.partition_info(key);
        let isr: Vec<i32> = p
            .isr
            .iter()
            .copied()
            .filter(|r| replicas.contains(r))
            .collect();
        let leader = if replicas.contains(&p.leader) {
            p.leader
        } else {
            replicas
                .iter()
                .copied()
                .find(|r| isr.contains(r) && self.state().is_eligible(*r))
                .unwrap_or(NO_LEADER)
        };
        if self.state().leader_move(key.0, key.1).is_some() && leader != p.leader {
            self.abort_move(key);
        }
        self.append(MetadataRecord::Reassignment(ReassignmentRecord {
            topic_id: key.0,
            partition: key.1,
            replicas,
            isr,
            leader,
            adding,
            removing,
        }));
    }
}
