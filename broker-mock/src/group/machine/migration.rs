//! Moving a classic group's members to and from a consumer group (KIP-848's
//! online upgrade and downgrade, `group.consumer.migration.policy`).
//!
//! Upgrade: [`Groups::migration_snapshot`] shows the members (with their
//! protocols and assignments) to the consumer group machine, which adopts them;
//! then [`Groups::release_members`] empties the classic group (its committed
//! offsets stay: every group's offsets live here), answering parked JoinGroup and
//! SyncGroup requests with REBALANCE_IN_PROGRESS so that those members rejoin the
//! consumer group.
//!
//! Downgrade: [`Groups::adopt_members`] takes the classic members of a consumer
//! group whose last consumer-protocol member left into a group that prepares a
//! rebalance at once, at their member epoch as generation, so their next
//! heartbeat is REBALANCE_IN_PROGRESS and they rejoin as classic members (Kafka's `convertToClassicGroup` followed by
//! `prepareRebalance`).

use bytes::Bytes;

use super::delivery::{join_error, sync_error, Delivery};
use super::group::{GroupState, Member};
use super::registry::Groups;
use baton_protocol::ErrorCode;

/// A classic member crossing between the two kinds of group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MigratingMember {
    /// Its member id (kept across the conversion).
    pub id: String,
    /// Its static instance id.
    pub instance_id: Option<String>,
    /// The client id it joined with.
    pub client_id: String,
    /// The host it joined from.
    pub client_host: String,
    /// Its session timeout.
    pub session_timeout_ms: i32,
    /// Its rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// Its supported protocols with their metadata, in preference order.
    pub protocols: Vec<(String, Bytes)>,
    /// Its current assignment (a `ConsumerProtocolAssignment`; empty if none).
    pub assignment: Bytes,
}

/// The classic side of a group crossing between the two kinds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MigratingGroup {
    /// The classic generation (upgrade) or the consumer group epoch (downgrade).
    pub generation_id: i32,
    /// The protocol type (`consumer`).
    pub protocol_type: Option<String>,
    /// The selected protocol, if any.
    pub protocol_name: Option<String>,
    /// The members, in join order.
    pub members: Vec<MigratingMember>,
}

impl Groups {
    /// The members of a classic group that has some, for an upgrade. `None` for
    /// a group without members (no upgrade is needed: the consumer group simply
    /// takes the id).
    pub fn migration_snapshot(&self, group_id: &str) -> Option<MigratingGroup> {
        let g = self.groups.get(group_id)?;
        if g.members.is_empty() || g.state == GroupState::Dead {
            return None;
        }
        Some(MigratingGroup {
            generation_id: g.generation_id,
            protocol_type: g.protocol_type.clone(),
            protocol_name: g.protocol_name.clone(),
            members: g
                .ordered_members()
                .into_iter()
                .map(|m| MigratingMember {
                    id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    session_timeout_ms: m.session_timeout_ms,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    protocols: m.protocols.clone(),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        })
    }

    /// Empties a classic group whose members a consumer group adopted: parked
    /// JoinGroup and SyncGroup requests get REBALANCE_IN_PROGRESS, pending member
    /// ids lapse, and the group stays `Empty` with its generation and offsets (or
    /// is removed if it has none).
    pub fn release_members(&mut self, group_id: &str) -> Vec<Delivery> {
        let mut out = Vec::new();
        let Some(g) = self.groups.get_mut(group_id) else {
            return out;
        };
        for m in g.members.values() {
            if let Some(w) = m.join_waiter {
                out.push(join_error(w, &m.id, ErrorCode::RebalanceInProgress));
            }
            if let Some(w) = m.sync_waiter {
                out.push(sync_error(w, ErrorCode::RebalanceInProgress));
            }
        }
        g.members.clear();
        g.static_members.clear();
        g.pending_members.clear();
        g.leader = None;
        g.rebalance_deadline = None;
        g.initial_delay = None;
        g.state = GroupState::Empty;
        // Its record must not bring the members back on a replay.
        g.record_due = true;
        g.check();
        self.remove_if_unused(group_id);
        out
    }

    /// Takes the classic members of a downgraded consumer group into the classic
    /// group `group_id` at generation `group.generation_id`, preparing a
    /// rebalance at once: every member must rejoin (its heartbeat answers
    /// REBALANCE_IN_PROGRESS) within the rebalance timeout, as after any
    /// membership change. Members keep their ids, sessions start at `now`.
    pub fn adopt_members(&mut self, group_id: &str, group: MigratingGroup, now: i64) {
        let cfg = self.config.clone();
        let g = self.revived(group_id);
        g.members.clear();
        g.static_members.clear();
        g.pending_members.clear();
        g.generation_id = g.generation_id.max(group.generation_id);
        g.protocol_type = group.protocol_type.or(g.protocol_type.take());
        g.protocol_name = group.protocol_name;
        for (seq, m) in (0u64..).zip(group.members) {
            if let Some(instance) = &m.instance_id {
                g.static_members.insert(instance.clone(), m.id.clone());
            }
            g.members.insert(
                m.id.clone(),
                Member {
                    id: m.id.clone(),
                    instance_id: m.instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    session_timeout_ms: m.session_timeout_ms,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    protocols: m.protocols,
                    assignment: m.assignment,
                    join_waiter: None,
                    sync_waiter: None,
                    heartbeat_deadline: now + i64::from(m.session_timeout_ms),
                    seq,
                },
            );
        }
        let Some(g) = self.groups.get_mut(group_id) else {
            return;
        };
        g.leader = g.ordered_members().first().map(|m| m.id.clone());
        g.record_due = true;
        if g.members.is_empty() {
            g.state = GroupState::Empty;
        } else {
            // Straight to PreparingRebalance without the initial delay of an
            // empty group: these members are known.
            g.state = GroupState::Stable;
            let mut out = Vec::new();
            g.prepare_rebalance(&cfg, now, &mut out);
            debug_assert!(out.is_empty(), "no parked request to answer");
        }
        g.check();
    }
}
