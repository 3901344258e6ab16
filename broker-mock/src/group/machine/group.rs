//! One group's state: its members, protocol, leader, generation, committed
//! offsets and pending transactional offsets, and the invariants `check` asserts.

use std::collections::{BTreeMap, HashMap};

use baton_protocol::ErrorCode;
use bytes::Bytes;

use super::delivery::Waiter;

/// The state of a classic group, named as Kafka names them in DescribeGroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    /// No members (the group may still have committed offsets).
    Empty,
    /// Waiting for members to (re)join.
    PreparingRebalance,
    /// Joined; waiting for the leader's assignments.
    CompletingRebalance,
    /// Every member has its assignment.
    Stable,
    /// Deleted.
    Dead,
}

impl GroupState {
    /// The name used in DescribeGroups and ListGroups.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// A committed offset of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// The next offset to consume.
    pub offset: i64,
    /// The leader epoch of the last consumed record, or -1.
    pub leader_epoch: i32,
    /// Client metadata (a null from the client is stored as empty, as Kafka does).
    pub metadata: String,
    /// When the commit was accepted, in ms since the epoch.
    pub commit_timestamp: i64,
}

/// A transactional offset waiting for its transaction's marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PendingOffset {
    pub(super) offset: CommittedOffset,
    /// The log offset of its record in `__consumer_offsets`.
    pub(super) position: i64,
}

#[derive(Debug, Clone)]
pub(super) struct Member {
    pub(super) id: String,
    pub(super) instance_id: Option<String>,
    pub(super) client_id: String,
    pub(super) client_host: String,
    pub(super) session_timeout_ms: i32,
    pub(super) rebalance_timeout_ms: i32,
    pub(super) protocols: Vec<(String, Bytes)>,
    pub(super) assignment: Bytes,
    /// The parked JoinGroup, while the group prepares a rebalance.
    pub(super) join_waiter: Option<Waiter>,
    /// The parked SyncGroup, while the group completes a rebalance.
    pub(super) sync_waiter: Option<Waiter>,
    /// When the member expires unless it is heard from or has a parked request.
    pub(super) heartbeat_deadline: i64,
    /// Join order, for choosing a leader and ordering member lists.
    pub(super) seq: u64,
}

impl Member {
    pub(super) fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    pub(super) fn same_protocols(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols == protocols
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct InitialDelay {
    /// Time still allowed for extensions.
    pub(super) remaining_ms: i64,
    /// Whether a member joined during the current delay.
    pub(super) new_member_added: bool,
}

#[derive(Debug)]
pub(super) struct Group {
    pub(super) id: String,
    pub(super) state: GroupState,
    pub(super) generation_id: i32,
    pub(super) protocol_type: Option<String>,
    pub(super) protocol_name: Option<String>,
    pub(super) leader: Option<String>,
    pub(super) members: HashMap<String, Member>,
    /// Instance id → member id of static members.
    pub(super) static_members: HashMap<String, String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED → when they lapse.
    pub(super) pending_members: HashMap<String, i64>,
    /// When the join phase completes anyway (PreparingRebalance only).
    pub(super) rebalance_deadline: Option<i64>,
    pub(super) initial_delay: Option<InitialDelay>,
    pub(super) offsets: BTreeMap<(String, i32), CommittedOffset>,
    /// The `__consumer_offsets` log offset of the record of each committed offset
    /// (-1 when it was not read from or written to the log), so that a transaction
    /// committing later replaces only offsets written before its own records.
    pub(super) positions: HashMap<(String, i32), i64>,
    /// Transactional offsets not yet committed or aborted, by producer id (see
    /// `txn_offsets`).
    pub(super) pending_txn: BTreeMap<i64, BTreeMap<(String, i32), PendingOffset>>,
    /// The last generation handed out by [`Groups::take_group_records`](super::registry::Groups::take_group_records) (or
    /// replayed), so each generation is persisted once.
    pub(super) persisted_generation: i32,
    /// Whether the group's record must be written again although its generation
    /// did not change: the leader's SyncGroup set the assignments, a static
    /// member took over a new member id, members moved to or from a consumer
    /// group.
    pub(super) record_due: bool,
}

impl Group {
    pub(super) fn new(id: &str) -> Self {
        Group {
            id: id.to_owned(),
            state: GroupState::Empty,
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: HashMap::new(),
            static_members: HashMap::new(),
            pending_members: HashMap::new(),
            rebalance_deadline: None,
            initial_delay: None,
            offsets: BTreeMap::new(),
            positions: HashMap::new(),
            pending_txn: BTreeMap::new(),
            persisted_generation: 0,
            record_due: false,
        }
    }

    pub(super) fn check(&self) {
        if matches!(
            self.state,
            GroupState::CompletingRebalance | GroupState::Stable
        ) {
            debug_assert!(
                !self.members.is_empty(),
                "group {} without members",
                self.id
            );
            debug_assert!(self.protocol_name.is_some());
            debug_assert!(self
                .leader
                .as_ref()
                .is_some_and(|l| self.members.contains_key(l)));
        }
        debug_assert_eq!(
            self.static_members.len(),
            self.members
                .values()
                .filter(|m| m.instance_id.is_some())
                .count()
        );
        for (instance, id) in &self.static_members {
            debug_assert_eq!(
                self.members.get(id).and_then(|m| m.instance_id.as_ref()),
                Some(instance)
            );
        }
        debug_assert_eq!(
            self.rebalance_deadline.is_some(),
            self.state == GroupState::PreparingRebalance
        );
    }

    /// Whether the group holds nothing worth keeping: no members, no pending
    /// members, no committed or pending transactional offsets. Such a group is
    /// removed.
    pub(super) fn is_unused(&self) -> bool {
        self.state == GroupState::Empty
            && self.members.is_empty()
            && self.pending_members.is_empty()
            && self.offsets.is_empty()
            && self.pending_txn.is_empty()
    }

    /// Members and pending members: what `group.max.size` bounds.
    pub(super) fn size(&self) -> usize {
        self.members.len() + self.pending_members.len()
    }

    /// Members in join order.
    pub(super) fn ordered_members(&self) -> Vec<&Member> {
        let mut v: Vec<&Member> = self.members.values().collect();
        v.sort_by_key(|m| m.seq);
        v
    }

    /// Protocols every member supports, in the first member's preference order.
    fn candidate_protocols(&self) -> Vec<String> {
        let members = self.ordered_members();
        let Some(first) = members.first() else {
            return Vec::new();
        };
        first
            .protocols
            .iter()
            .map(|(n, _)| n.clone())
            .filter(|n| {
                members
                    .iter()
                    .all(|m| m.protocols.iter().any(|(p, _)| p == n))
            })
            .collect()
    }

    pub(super) fn supports_protocols(
        &self,
        protocol_type: &str,
        protocols: &[(String, Bytes)],
    ) -> bool {
        if self.members.is_empty() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        let candidates = self.candidate_protocols();
        protocols.iter().any(|(n, _)| candidates.contains(n))
    }

    /// The protocol most members prefer among the candidates (ties: the first
    /// member's preference).
    pub(super) fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let mut votes = vec![0usize; candidates.len()];
        for m in self.members.values() {
            if let Some(i) = m
                .protocols
                .iter()
                .find_map(|(n, _)| candidates.iter().position(|c| c == n))
            {
                votes[i] += 1;
            }
        }
        let best = votes.iter().copied().max()?;
        let i = votes.iter().position(|&v| v == best)?;
        candidates.get(i).cloned()
    }

    pub(super) fn max_rebalance_timeout(&self) -> i64 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms.max(0) as i64)
            .max()
            .unwrap_or(0)
    }

    /// Checks a member's identity: instance-id fencing first, then membership.
    pub(super) fn validate_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), ErrorCode> {
        if let Some(instance) = instance_id {
            match self.static_members.get(instance) {
                None => return Err(ErrorCode::UnknownMemberId),
                Some(id) if id != member_id => return Err(ErrorCode::FencedInstanceId),
                Some(_) => {}
            }
        }
        if self.members.contains_key(member_id) {
            Ok(())
        } else {
            Err(ErrorCode::UnknownMemberId)
        }
    }

    pub(super) fn touch(&mut self, member_id: &str, now: i64) {
        if let Some(m) = self.members.get_mut(member_id) {
            m.heartbeat_deadline = now + m.session_timeout_ms as i64;
        }
    }
}
