//! A classic group as its `__consumer_offsets` record keeps it (Kafka's
//! `GroupMetadataValue`): taken when a generation completes and when the
//! leader's SyncGroup sets the assignments, and restored when a coordinator
//! replays the log.
//!
//! A restored group with members is `Stable` at its generation, with its
//! protocol, leader, members and assignments, and every member's session starts
//! from the loading node's clock, as Kafka's coordinator loads a group. Members
//! then heartbeat the new coordinator at the same generation and carry on; one
//! that is gone expires after its session timeout and the group rebalances.
//!
//! Deviation: Kafka writes the record of a group with members only once the
//! leader's assignments are in (its join completion writes only an empty
//! group), so a failover between JoinGroup and SyncGroup reloads the previous
//! generation there. Here the join completion is written too, so that the
//! generation never goes back; a group whose last record has no assignment at
//! all (the failover came before the leader's SyncGroup) is restored preparing a
//! rebalance, and its members rejoin into the next generation.
//!
//! A record that cannot describe a group (more members than `group.max.size`,
//! a member id or instance id twice, members without a protocol or with a
//! leader that is not one of them) restores the generation without members,
//! with a log line.

use std::collections::HashSet;

use bytes::Bytes;

use super::group::{Group, GroupState, Member};
use super::registry::Groups;

/// A member as a group record keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PersistedMember {
    /// The member id.
    pub member_id: String,
    /// The static instance id.
    pub group_instance_id: Option<String>,
    /// The client id it joined with.
    pub client_id: String,
    /// The host it joined from.
    pub client_host: String,
    /// Its rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// Its session timeout.
    pub session_timeout_ms: i32,
    /// Its metadata for the group's selected protocol (its subscription).
    pub subscription: Bytes,
    /// Its assignment (empty until the leader's SyncGroup).
    pub assignment: Bytes,
}

/// What a group record keeps of a classic group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupSnapshot {
    /// The protocol type (`consumer`), or empty.
    pub protocol_type: String,
    /// The generation id.
    pub generation_id: i32,
    /// The selected protocol (none for an empty group).
    pub protocol_name: Option<String>,
    /// The leader's member id (none for an empty group).
    pub leader: Option<String>,
    /// The members, in join order.
    pub members: Vec<PersistedMember>,
}

/// A group record to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenerationInfo {
    /// The group id.
    pub group_id: String,
    /// The group as it is now.
    pub snapshot: GroupSnapshot,
    /// Whether its generation is new (a rebalance), rather than an update of
    /// the current one (assignments, a static member's new id).
    pub new_generation: bool,
}

impl Group {
    fn snapshot(&self) -> GroupSnapshot {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        GroupSnapshot {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation_id: self.generation_id,
            protocol_name: self.protocol_name.clone(),
            leader: self.leader.clone(),
            members: self
                .ordered_members()
                .into_iter()
                .map(|m| PersistedMember {
                    member_id: m.id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: m.metadata_for(&protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    /// Replaces the membership with `snap`'s (already validated), members'
    /// sessions starting at `now`.
    fn restore_members(&mut self, snap: GroupSnapshot, now: i64) {
        self.members.clear();
        self.static_members.clear();
        self.pending_members.clear();
        self.rebalance_deadline = None;
        self.initial_delay = None;
        self.protocol_name = snap.protocol_name;
        self.leader = snap.leader;
        let protocol = self.protocol_name.clone().unwrap_or_default();
        for (seq, m) in (0u64..).zip(snap.members) {
            if let Some(instance) = &m.group_instance_id {
                self.static_members
                    .insert(instance.clone(), m.member_id.clone());
            }
            let member = Member {
                id: m.member_id.clone(),
                instance_id: m.group_instance_id,
                client_id: m.client_id,
                client_host: m.client_host,
                session_timeout_ms: m.session_timeout_ms,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                protocols: vec![(protocol.clone(), m.subscription)],
                assignment: m.assignment,
                join_waiter: None,
                sync_waiter: None,
                heartbeat_deadline: now + i64::from(m.session_timeout_ms.max(0)),
                seq,
            };
            self.members.insert(m.member_id, member);
        }
        self.state = if self.members.is_empty() {
            self.protocol_name = None;
            self.leader = None;
            GroupState::Empty
        } else {
            GroupState::Stable
        };
    }
}

/// Why `snap` cannot describe a group with members, if it cannot.
fn invalid(snap: &GroupSnapshot, max_members: usize) -> Option<&'static str> {
    if snap.members.is_empty() {
        return None;
    }
    if snap.members.len() > max_members {
        return Some("more members than group.max.size");
    }
    if snap.protocol_name.is_none() {
        return Some("members without a protocol");
    }
    let mut ids = HashSet::new();
    let mut instances = HashSet::new();
    for m in &snap.members {
        if !ids.insert(m.member_id.as_str()) {
            return Some("a member id twice");
        }
        if let Some(i) = &m.group_instance_id {
            if !instances.insert(i.as_str()) {
                return Some("an instance id twice");
            }
        }
    }
    match &snap.leader {
        Some(l) if ids.contains(l.as_str()) => None,
        _ => Some("a leader that is not a member"),
    }
}

impl Groups {
    /// Groups whose record must be written since the last call (a new
    /// generation, or new assignments or member ids in the current one), so that
    /// generation ids never go back and members keep their place when the
    /// coordinator moves.
    pub fn take_group_records(&mut self) -> Vec<GenerationInfo> {
        let mut out = Vec::new();
        for g in self.groups.values_mut() {
            if g.state == GroupState::Dead {
                continue;
            }
            let new_generation = g.generation_id != g.persisted_generation;
            if new_generation || g.record_due {
                g.persisted_generation = g.generation_id;
                g.record_due = false;
                out.push(GenerationInfo {
                    group_id: g.id.clone(),
                    snapshot: g.snapshot(),
                    new_generation,
                });
            }
        }
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        out
    }

    /// Replays a group record: the group exists (empty, if it was not in memory)
    /// and, unless the record's generation is below the one already replayed,
    /// takes the record's generation, protocol, leader and members (sessions
    /// starting at `now`). `None` (a tombstone) clears the membership and
    /// removes the group unless it has committed offsets (pending transactional
    /// offsets are dropped with it).
    pub fn restore(&mut self, group_id: &str, record: Option<GroupSnapshot>, now: i64) {
        let max_members = self.config.max_group_size;
        let Some(mut snap) = record else {
            // Pending transactional offsets go with the group, as they do when
            // DeleteGroups (the writer of this tombstone) removes it in memory.
            if let Some(g) = self.groups.get_mut(group_id) {
                g.restore_members(GroupSnapshot::default(), now);
                if g.offsets.is_empty() {
                    self.groups.remove(group_id);
                }
            }
            return;
        };
        if let Some(why) = invalid(&snap, max_members) {
            tracing::warn!(
                group = group_id,
                generation = snap.generation_id,
                members = snap.members.len(),
                why,
                "group record restored without its members"
            );
            snap.members.clear();
        }
        let group = self.revived(group_id);
        if snap.generation_id < group.generation_id {
            tracing::warn!(
                group = group_id,
                generation = snap.generation_id,
                replayed = group.generation_id,
                "skipping a group record of an older generation"
            );
            return;
        }
        group.generation_id = snap.generation_id;
        group.persisted_generation = snap.generation_id;
        group.record_due = false;
        if !snap.protocol_type.is_empty() {
            group.protocol_type = Some(std::mem::take(&mut snap.protocol_type));
        }
        group.restore_members(snap, now);
        group.check();
    }

    /// The ids of the groups that have members.
    pub fn ids_with_members(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .groups
            .values()
            .filter(|g| !g.members.is_empty())
            .map(|g| g.id.clone())
            .collect();
        v.sort();
        v
    }

    /// Ends the replay of the groups `in_partition` accepts: a restored group
    /// whose members have no assignment at all (its record is the join
    /// completion; the leader's SyncGroup never made it to the log) prepares a
    /// rebalance at `now`, so its members rejoin into the next generation.
    pub fn finish_restore(&mut self, now: i64, in_partition: impl Fn(&str) -> bool) {
        let cfg = self.config.clone();
        for g in self.groups.values_mut() {
            if g.state != GroupState::Stable || !in_partition(&g.id) {
                continue;
            }
            if g.members.values().all(|m| m.assignment.is_empty()) {
                tracing::info!(
                    group = %g.id,
                    generation = g.generation_id,
                    "restored group has no assignments: rebalancing"
                );
                let mut out = Vec::new();
                g.prepare_rebalance(&cfg, now, &mut out);
                debug_assert!(out.is_empty(), "no parked request to answer");
            }
            g.check();
        }
    }
}
