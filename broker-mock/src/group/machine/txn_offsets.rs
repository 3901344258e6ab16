//! Transactional offsets (TxnOffsetCommit, KIP-98 / KIP-447): validation against
//! the group, and offsets kept pending per producer id, apart from the committed
//! ones, until the transaction's marker lands on the group's `__consumer_offsets`
//! partition.
//!
//! - A commit marker makes the producer's pending offsets committed, each one only
//!   if its record is later in the log than the record of the offset committed now
//!   (a plain OffsetCommit written after the transactional one wins, as in Kafka).
//! - An abort marker drops them.
//! - Until then OffsetFetch answers the committed offset, or UNSTABLE_OFFSET_COMMIT
//!   when the client asks for stable offsets (`require_stable`).
//!
//! Invariant: the number of pending offsets over all groups stays at most
//! `max_pending_offsets`, except after a replay of the log (which is never refused).

use baton_protocol::ErrorCode;

use super::group::{CommittedOffset, GroupState, PendingOffset};
use super::registry::Groups;

impl Groups {
    /// Checks that a TxnOffsetCommit may be stored, as Kafka 4.0's coordinator does
    /// for classic groups:
    ///
    /// - an unknown group accepts a commit with generation < 0 (it is created as an
    ///   empty group when the offsets are stored); with a generation it is
    ///   ILLEGAL_GENERATION;
    /// - a `Dead` group is COORDINATOR_NOT_AVAILABLE;
    /// - generation < 0 to an `Empty` group is accepted;
    /// - with a generation, a member id or an instance id (v3+), the member must be
    ///   current (FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID) and the generation the
    ///   group's (ILLEGAL_GENERATION);
    /// - without any of them (v0–2 clients) the commit is accepted whatever the
    ///   group's state. Unlike OffsetCommit, a group completing a rebalance does not
    ///   refuse it.
    pub fn validate_txn_commit(
        &self,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), ErrorCode> {
        if group_id.is_empty() {
            return Err(ErrorCode::InvalidGroupId);
        }
        let Some(group) = self.groups.get(group_id) else {
            return if generation_id < 0 {
                Ok(())
            } else {
                Err(ErrorCode::IllegalGeneration)
            };
        };
        if group.state == GroupState::Dead {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        if generation_id < 0 && group.state == GroupState::Empty {
            return Ok(());
        }
        if generation_id >= 0 || !member_id.is_empty() || instance_id.is_some() {
            group.validate_member(member_id, instance_id)?;
            if generation_id != group.generation_id {
                return Err(ErrorCode::IllegalGeneration);
            }
        }
        Ok(())
    }

    /// Ok if `more` pending offsets fit under `max_pending_offsets`, else
    /// POLICY_VIOLATION.
    pub fn admit_pending(&self, more: usize) -> Result<(), ErrorCode> {
        let held = self.pending_count();
        if held.saturating_add(more) <= self.max_pending_offsets {
            Ok(())
        } else {
            tracing::debug!(
                held,
                more,
                max = self.max_pending_offsets,
                "pending transactional offset limit reached"
            );
            Err(ErrorCode::PolicyViolation)
        }
    }

    /// The pending transactional offsets of every group together.
    pub fn pending_count(&self) -> usize {
        self.groups
            .values()
            .flat_map(|g| g.pending_txn.values())
            .map(|m| m.len())
            .sum()
    }

    /// Records a transactional offset of `producer_id`, pending until its marker
    /// (creating an empty group for a group seen for the first time). `position`
    /// is the log offset of its record in `__consumer_offsets`. A later offset of
    /// the same producer for the same partition replaces an earlier one.
    pub fn apply_txn_offset(
        &mut self,
        group_id: &str,
        producer_id: i64,
        topic: &str,
        partition: i32,
        offset: CommittedOffset,
        position: i64,
    ) {
        let group = self.revived(group_id);
        group.pending_txn.entry(producer_id).or_default().insert(
            (topic.to_owned(), partition),
            PendingOffset { offset, position },
        );
    }

    /// Applies a transaction marker of `producer_id` to the groups `in_partition`
    /// accepts (those of the `__consumer_offsets` partition the marker landed on):
    /// on commit their pending offsets become committed (each only if its record
    /// is later than the committed offset's), on abort they are dropped. Groups
    /// left with nothing are removed. Returns how many pending offsets were
    /// resolved.
    pub fn complete_transaction(
        &mut self,
        producer_id: i64,
        commit: bool,
        in_partition: impl Fn(&str) -> bool,
    ) -> usize {
        let mut resolved = 0;
        let mut emptied = Vec::new();
        for group in self.groups.values_mut() {
            if !in_partition(&group.id) {
                continue;
            }
            let Some(pending) = group.pending_txn.remove(&producer_id) else {
                continue;
            };
            resolved += pending.len();
            if commit {
                for (key, p) in pending {
                    let newer = group.positions.get(&key).is_none_or(|&at| at < p.position);
                    if newer {
                        group.positions.insert(key.clone(), p.position);
                        group.offsets.insert(key, p.offset);
                    }
                }
            }
            if group.is_unused() {
                emptied.push(group.id.clone());
            }
        }
        for id in emptied {
            self.remove_if_unused(&id);
        }
        resolved
    }

    /// Whether any producer has a pending transactional offset for the partition
    /// in the group.
    pub fn has_pending(&self, group_id: &str, topic: &str, partition: i32) -> bool {
        self.groups.get(group_id).is_some_and(|g| {
            g.pending_txn
                .values()
                .any(|m| m.contains_key(&(topic.to_owned(), partition)))
        })
    }

    /// The pending transactional offset of `producer_id` for one partition.
    pub fn pending_offset(
        &self,
        group_id: &str,
        producer_id: i64,
        topic: &str,
        partition: i32,
    ) -> Option<&CommittedOffset> {
        self.groups
            .get(group_id)?
            .pending_txn
            .get(&producer_id)?
            .get(&(topic.to_owned(), partition))
            .map(|p| &p.offset)
    }
}
