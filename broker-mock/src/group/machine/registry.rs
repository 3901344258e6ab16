//! The set of groups one coordinator owns: the `max_groups` bound, removal of
//! unused groups and the tombstones they need, DescribeGroups, ListGroups,
//! DeleteGroups, and dropping groups whose partition moved away (the group
//! records themselves are `snapshot`'s).

use std::collections::HashMap;

use baton_protocol::messages::{DescribedGroup, DescribedGroupMember, ListedGroup};
use baton_protocol::ErrorCode;
use bytes::Bytes;

use super::config::GroupConfig;
use super::delivery::{join_error, sync_error, Delivery};
use super::group::{Group, GroupState};

/// Every group of one coordinator.
#[derive(Debug)]
pub struct Groups {
    pub(super) config: GroupConfig,
    pub(super) groups: HashMap<String, Group>,
    /// Most groups held (`BrokerLimits::max_groups`). Invariant: only replaying
    /// `__consumer_offsets` may take `groups` past it.
    pub(super) max_groups: usize,
    /// Most pending transactional offsets held over all groups
    /// (`BrokerLimits::max_pending_txn_offsets`). Invariant: only replaying
    /// `__consumer_offsets` may take the count past it.
    pub(super) max_pending_offsets: usize,
    /// Groups removed because nothing was left in them, whose generation record
    /// needs a tombstone (see [`Groups::take_removed`]).
    pub(super) removed: Vec<String>,
    pub(super) next_member: u64,
    pub(super) nonce: u64,
}

impl Groups {
    /// No groups yet, at most `DEFAULT_MAX_GROUPS` of them (the default of
    /// [`BrokerLimits::max_groups`](crate::BrokerLimits::max_groups)). `nonce` makes
    /// member ids unique across coordinator restarts.
    pub fn new(config: GroupConfig, nonce: u64) -> Self {
        Groups {
            config,
            groups: HashMap::new(),
            max_groups: crate::limits::DEFAULT_MAX_GROUPS,
            max_pending_offsets: crate::limits::DEFAULT_MAX_PENDING_TXN_OFFSETS,
            removed: Vec::new(),
            next_member: 0,
            nonce,
        }
    }

    /// Holds at most `max_groups` groups: a JoinGroup or OffsetCommit that would
    /// create one more fails with POLICY_VIOLATION.
    pub fn with_max_groups(mut self, max_groups: usize) -> Self {
        self.max_groups = max_groups;
        self
    }

    /// Holds at most `max` pending transactional offsets: a TxnOffsetCommit that
    /// would pass it fails with POLICY_VIOLATION.
    pub fn with_max_pending_offsets(mut self, max: usize) -> Self {
        self.max_pending_offsets = max;
        self
    }

    /// Ok if `group_id` exists or there is room for one more group; otherwise
    /// POLICY_VIOLATION (`BrokerLimits::max_groups`). OffsetCommit asks before a
    /// commit creates a group.
    pub fn admit_group(&self, group_id: &str) -> Result<(), ErrorCode> {
        if self.groups.contains_key(group_id) || self.groups.len() < self.max_groups {
            Ok(())
        } else {
            tracing::debug!(
                group = group_id,
                max_groups = self.max_groups,
                "group limit reached"
            );
            Err(ErrorCode::PolicyViolation)
        }
    }

    /// The most groups this registry admits (`BrokerLimits::max_groups`).
    pub fn max_groups(&self) -> usize {
        self.max_groups
    }

    /// The number of groups held.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// Whether no group is held.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Removes `group_id` if nothing is left in it (as Kafka's periodic cleanup
    /// does, here at once), remembering it for a tombstone if it ever had a
    /// generation.
    pub(super) fn remove_if_unused(&mut self, group_id: &str) {
        if !self.groups.get(group_id).is_some_and(Group::is_unused) {
            return;
        }
        if let Some(g) = self.groups.remove(group_id) {
            tracing::debug!(group = group_id, "empty group removed");
            if g.generation_id > 0 || g.persisted_generation > 0 {
                self.removed.push(g.id);
            }
        }
    }

    /// Removes every group with no members, pending members or offsets,
    /// remembering those that had a generation for [`Groups::take_removed`]; the
    /// coordinator calls it after replaying.
    pub fn remove_unused(&mut self) {
        let unused: Vec<String> = self
            .groups
            .values()
            .filter(|g| g.is_unused())
            .map(|g| g.id.clone())
            .collect();
        for id in unused {
            self.remove_if_unused(&id);
        }
    }

    /// Groups removed since the last call that had a generation: their generation
    /// record in `__consumer_offsets` gets a tombstone, so a replay does not bring
    /// them back.
    pub fn take_removed(&mut self) -> Vec<String> {
        let mut out = std::mem::take(&mut self.removed);
        out.retain(|id| !self.groups.contains_key(id));
        out.sort();
        out.dedup();
        out
    }

    /// The settings in use.
    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    pub(super) fn finish(group: &Group, out: Vec<Delivery>) -> Vec<Delivery> {
        group.check();
        out
    }

    /// The DescribeGroups entry of one group (unknown groups are `Dead` with no
    /// error, as Kafka answers versions 0–5).
    pub fn describe(&self, group_id: &str) -> DescribedGroup {
        let Some(group) = self.groups.get(group_id) else {
            return DescribedGroup {
                group_id: group_id.to_owned(),
                group_state: GroupState::Dead.name().to_owned(),
                ..Default::default()
            };
        };
        let stable = group.state == GroupState::Stable;
        let protocol = if stable {
            group.protocol_name.clone().unwrap_or_default()
        } else {
            String::new()
        };
        let members = group
            .ordered_members()
            .into_iter()
            .map(|m| DescribedGroupMember {
                member_id: m.id.clone(),
                group_instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                member_metadata: if stable {
                    m.metadata_for(&protocol)
                } else {
                    Bytes::new()
                },
                member_assignment: if stable {
                    m.assignment.clone()
                } else {
                    Bytes::new()
                },
            })
            .collect();
        DescribedGroup {
            error_code: 0,
            group_id: group.id.clone(),
            group_state: group.state.name().to_owned(),
            protocol_type: group.protocol_type.clone().unwrap_or_default(),
            protocol_data: protocol,
            members,
            ..Default::default()
        }
    }

    /// Every group, ordered by id, filtered by state names (case-insensitive) and
    /// types (`classic`, the only type here) when the filters are not empty.
    pub fn list(&self, states: &[String], types: &[String]) -> Vec<ListedGroup> {
        if !types.is_empty() && !types.iter().any(|t| t.eq_ignore_ascii_case("classic")) {
            return Vec::new();
        }
        let mut v: Vec<ListedGroup> = self
            .groups
            .values()
            .filter(|g| g.state != GroupState::Dead)
            .filter(|g| {
                states.is_empty()
                    || states
                        .iter()
                        .any(|s| s.eq_ignore_ascii_case(g.state.name()))
            })
            .map(|g| ListedGroup {
                group_id: g.id.clone(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                group_state: g.state.name().to_owned(),
                group_type: "classic".to_owned(),
            })
            .collect();
        v.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        v
    }

    /// Whether DeleteGroups may delete the group: GROUP_ID_NOT_FOUND or
    /// NON_EMPTY_GROUP otherwise. Returns the partitions with committed offsets.
    pub fn check_delete(&self, group_id: &str) -> Result<Vec<(String, i32)>, ErrorCode> {
        let group = self
            .groups
            .get(group_id)
            .filter(|g| g.state != GroupState::Dead)
            .ok_or(ErrorCode::GroupIdNotFound)?;
        if group.state != GroupState::Empty || !group.pending_members.is_empty() {
            return Err(ErrorCode::NonEmptyGroup);
        }
        Ok(group.offsets.keys().cloned().collect())
    }

    /// Removes a group (after [`Groups::check_delete`] and the tombstones are
    /// written).
    pub fn delete(&mut self, group_id: &str) {
        self.groups.remove(group_id);
    }

    /// Forgets the groups whose id matches `unowned` (the coordinator lost their
    /// `__consumer_offsets` partition); their parked requests are answered with
    /// NOT_COORDINATOR.
    pub fn remove_where(&mut self, unowned: impl Fn(&str) -> bool) -> Vec<Delivery> {
        let mut out = Vec::new();
        let gone: Vec<String> = self.groups.keys().filter(|g| unowned(g)).cloned().collect();
        for id in gone {
            let Some(group) = self.groups.remove(&id) else {
                continue;
            };
            for m in group.members.values() {
                if let Some(w) = m.join_waiter {
                    out.push(join_error(w, &m.id, ErrorCode::NotCoordinator));
                }
                if let Some(w) = m.sync_waiter {
                    out.push(sync_error(w, ErrorCode::NotCoordinator));
                }
            }
        }
        out
    }
}

impl Groups {
    /// `group_id` for a record applied to it (a committed or pending offset, a
    /// replayed group record): created empty if missing, brought back to Empty if
    /// Dead.
    pub(super) fn revived(&mut self, group_id: &str) -> &mut Group {
        let group = self
            .groups
            .entry(group_id.to_owned())
            .or_insert_with(|| Group::new(group_id));
        if group.state == GroupState::Dead {
            group.state = GroupState::Empty;
        }
        group
    }

    /// The state and generation of a group, if it exists.
    pub fn state_of(&self, group_id: &str) -> Option<(GroupState, i32)> {
        self.groups
            .get(group_id)
            .map(|g| (g.state, g.generation_id))
    }
}
