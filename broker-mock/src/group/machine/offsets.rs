//! Committed offsets: OffsetCommit validation against the group's membership and
//! generation, and the offsets stored per group.

use baton_protocol::ErrorCode;

use super::group::{CommittedOffset, GroupState};
use super::registry::Groups;

impl Groups {
    /// Checks that an OffsetCommit may be applied, and counts it as a heartbeat.
    ///
    /// A commit with generation < 0 and an empty member id to a group without
    /// members (or no group) is a "simple" commit from a consumer that manages its
    /// own partitions; anything else must come from a current member of the current
    /// generation. Commits while the group prepares a rebalance are allowed (members
    /// commit before they rejoin); while it completes one they are
    /// REBALANCE_IN_PROGRESS.
    pub fn validate_commit(
        &mut self,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        instance_id: Option<&str>,
        now: i64,
    ) -> Result<(), ErrorCode> {
        if group_id.is_empty() {
            return Err(ErrorCode::InvalidGroupId);
        }
        let Some(group) = self.groups.get_mut(group_id) else {
            return if generation_id < 0 {
                Ok(())
            } else {
                Err(ErrorCode::IllegalGeneration)
            };
        };
        if group.state == GroupState::Dead {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        if let Some(instance) = instance_id {
            if let Some(id) = group.static_members.get(instance) {
                if id != member_id {
                    return Err(ErrorCode::FencedInstanceId);
                }
            }
        }
        if generation_id < 0 && group.state == GroupState::Empty {
            return Ok(());
        }
        if group.state == GroupState::CompletingRebalance {
            return Err(ErrorCode::RebalanceInProgress);
        }
        if !group.members.contains_key(member_id) {
            return Err(ErrorCode::UnknownMemberId);
        }
        if generation_id != group.generation_id {
            return Err(ErrorCode::IllegalGeneration);
        }
        group.touch(member_id, now);
        Ok(())
    }

    /// Records a committed offset (`None` removes it), creating an empty group for
    /// a group seen for the first time. Used after a commit is durable and when
    /// replaying `__consumer_offsets`; `position` is the log offset of its record
    /// there (-1 if unknown).
    pub fn apply_offset(
        &mut self,
        group_id: &str,
        topic: &str,
        partition: i32,
        offset: Option<CommittedOffset>,
        position: i64,
    ) {
        match offset {
            Some(o) => {
                let group = self.revived(group_id);
                group.offsets.insert((topic.to_owned(), partition), o);
                group
                    .positions
                    .insert((topic.to_owned(), partition), position);
            }
            None => {
                if let Some(group) = self.groups.get_mut(group_id) {
                    group.offsets.remove(&(topic.to_owned(), partition));
                    group.positions.remove(&(topic.to_owned(), partition));
                    if group.is_unused() {
                        self.groups.remove(group_id);
                    }
                }
            }
        }
    }

    /// The committed offset of one partition.
    pub fn offset(&self, group_id: &str, topic: &str, partition: i32) -> Option<&CommittedOffset> {
        self.groups
            .get(group_id)?
            .offsets
            .get(&(topic.to_owned(), partition))
    }

    /// Every committed offset of a group, ordered by topic and partition.
    pub fn offsets(&self, group_id: &str) -> Vec<(String, i32, CommittedOffset)> {
        self.groups
            .get(group_id)
            .map(|g| {
                g.offsets
                    .iter()
                    .map(|((t, p), o)| (t.clone(), *p, o.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }
}
