//! Rebalances and timers: preparing and completing a rebalance (generation bump,
//! protocol and leader choice, members that did not rejoin), removing members,
//! session and pending-member expiry, and the initial rebalance delay.

use baton_protocol::ErrorCode;
use bytes::Bytes;

use super::config::GroupConfig;
use super::delivery::{join_error, sync_error, Delivery};
use super::group::{Group, GroupState, InitialDelay};
use super::registry::Groups;

impl Group {
    fn all_members_joined(&self) -> bool {
        self.pending_members.is_empty() && self.members.values().all(|m| m.join_waiter.is_some())
    }

    fn can_rebalance(&self) -> bool {
        matches!(
            self.state,
            GroupState::Empty | GroupState::CompletingRebalance | GroupState::Stable
        )
    }

    pub(super) fn maybe_prepare_rebalance(
        &mut self,
        cfg: &GroupConfig,
        now: i64,
        out: &mut Vec<Delivery>,
    ) {
        if self.can_rebalance() {
            self.prepare_rebalance(cfg, now, out);
        }
    }

    pub(super) fn prepare_rebalance(
        &mut self,
        cfg: &GroupConfig,
        now: i64,
        out: &mut Vec<Delivery>,
    ) {
        if self.state == GroupState::CompletingRebalance {
            // Assignments of the aborted generation are void; parked syncs must rejoin.
            let mut waiters = Vec::new();
            for m in self.members.values_mut() {
                m.assignment = Bytes::new();
                if let Some(w) = m.sync_waiter.take() {
                    waiters.push(w);
                }
            }
            for w in waiters {
                out.push(sync_error(w, ErrorCode::RebalanceInProgress));
            }
        }
        let timeout = self.max_rebalance_timeout();
        if self.state == GroupState::Empty && cfg.initial_rebalance_delay_ms > 0 {
            let delay = cfg.initial_rebalance_delay_ms.min(timeout.max(1));
            self.initial_delay = Some(InitialDelay {
                remaining_ms: (timeout - delay).max(0),
                new_member_added: false,
            });
            self.rebalance_deadline = Some(now + delay);
        } else {
            self.initial_delay = None;
            self.rebalance_deadline = Some(now + timeout);
        }
        tracing::debug!(group = %self.id, generation = self.generation_id, "preparing rebalance");
        self.state = GroupState::PreparingRebalance;
    }

    pub(super) fn maybe_complete_join(&mut self, now: i64, out: &mut Vec<Delivery>) {
        if self.state == GroupState::PreparingRebalance
            && self.initial_delay.is_none()
            && self.all_members_joined()
        {
            self.complete_join(now, out);
        }
    }

    fn complete_join(&mut self, now: i64, out: &mut Vec<Delivery>) {
        if self.state != GroupState::PreparingRebalance {
            return;
        }
        self.rebalance_deadline = None;
        self.initial_delay = None;
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| m.join_waiter.is_none() && m.instance_id.is_none())
            .map(|m| m.id.clone())
            .collect();
        for id in gone {
            tracing::debug!(group = %self.id, member = %id, "member did not rejoin in time");
            self.drop_member(&id, out);
        }
        self.generation_id = self.generation_id.wrapping_add(1);
        // The previous generation's assignments are void: the leader's SyncGroup
        // sets this one's. Left in place, they would go into this generation's
        // group record, and a coordinator that replayed it after a failover would
        // restore the group Stable with the old assignment.
        for m in self.members.values_mut() {
            m.assignment = Bytes::new();
        }
        if self.members.is_empty() {
            self.protocol_name = None;
            self.leader = None;
            self.state = GroupState::Empty;
            tracing::debug!(group = %self.id, generation = self.generation_id, "group is empty");
            return;
        }
        self.protocol_name = self.select_protocol();
        if self.protocol_name.is_none() {
            // Cannot happen: every member was admitted sharing a protocol. Fall back
            // to the first member's first protocol rather than stalling.
            self.protocol_name = self
                .ordered_members()
                .first()
                .and_then(|m| m.protocols.first())
                .map(|(n, _)| n.clone());
        }
        let leader_ok = self
            .leader
            .as_ref()
            .is_some_and(|l| self.members.get(l).is_some_and(|m| m.join_waiter.is_some()));
        if !leader_ok {
            let ordered = self.ordered_members();
            let pick = ordered
                .iter()
                .find(|m| m.join_waiter.is_some())
                .or(ordered.first())
                .map(|m| m.id.clone());
            self.leader = pick;
        }
        self.state = GroupState::CompletingRebalance;
        tracing::debug!(
            group = %self.id,
            generation = self.generation_id,
            protocol = ?self.protocol_name,
            leader = ?self.leader,
            members = self.members.len(),
            "join complete"
        );
        let ids: Vec<String> = self
            .ordered_members()
            .iter()
            .map(|m| m.id.clone())
            .collect();
        for id in ids {
            let response = self.join_response(&id);
            let Some(m) = self.members.get_mut(&id) else {
                continue;
            };
            m.heartbeat_deadline = now + m.session_timeout_ms as i64;
            if let Some(w) = m.join_waiter.take() {
                out.push(Delivery::Join(w, response));
            }
        }
    }

    /// Removes a member, answering its parked requests with UNKNOWN_MEMBER_ID.
    fn drop_member(&mut self, member_id: &str, out: &mut Vec<Delivery>) {
        let Some(m) = self.members.remove(member_id) else {
            return;
        };
        if let Some(instance) = &m.instance_id {
            self.static_members.remove(instance);
        }
        if let Some(w) = m.join_waiter {
            out.push(join_error(w, member_id, ErrorCode::UnknownMemberId));
        }
        if let Some(w) = m.sync_waiter {
            out.push(sync_error(w, ErrorCode::UnknownMemberId));
        }
        if self.leader.as_deref() == Some(member_id) {
            self.leader = self.ordered_members().first().map(|m| m.id.clone());
        }
    }

    /// Removes a member and moves the group on (a leave or an expiry).
    pub(super) fn remove_member_and_update(
        &mut self,
        cfg: &GroupConfig,
        member_id: &str,
        now: i64,
        out: &mut Vec<Delivery>,
    ) {
        self.drop_member(member_id, out);
        match self.state {
            GroupState::Dead | GroupState::Empty => {}
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(cfg, now, out);
                self.maybe_complete_join(now, out);
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(now, out),
        }
    }

    fn next_deadline(&self) -> Option<i64> {
        let members = self
            .members
            .values()
            .filter(|m| m.join_waiter.is_none() && m.sync_waiter.is_none())
            .map(|m| m.heartbeat_deadline);
        let pending = self.pending_members.values().copied();
        members.chain(pending).chain(self.rebalance_deadline).min()
    }

    fn tick(&mut self, cfg: &GroupConfig, now: i64, out: &mut Vec<Delivery>) {
        let lapsed: Vec<String> = self
            .pending_members
            .iter()
            .filter(|(_, &d)| d <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in lapsed {
            self.pending_members.remove(&id);
            self.maybe_complete_join(now, out);
        }
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                m.join_waiter.is_none() && m.sync_waiter.is_none() && m.heartbeat_deadline <= now
            })
            .map(|m| m.id.clone())
            .collect();
        for id in expired {
            tracing::info!(group = %self.id, member = %id, "session timeout expired");
            self.remove_member_and_update(cfg, &id, now, out);
        }
        if let Some(deadline) = self.rebalance_deadline {
            if deadline <= now {
                match self.initial_delay {
                    Some(d) if d.new_member_added && d.remaining_ms > 0 => {
                        let step = cfg.initial_rebalance_delay_ms.min(d.remaining_ms);
                        self.initial_delay = Some(InitialDelay {
                            remaining_ms: d.remaining_ms - step,
                            new_member_added: false,
                        });
                        self.rebalance_deadline = Some(now + step);
                    }
                    _ => self.complete_join(now, out),
                }
            }
        }
    }
}

impl Groups {
    /// Expires sessions and completes rebalances whose time is up.
    pub fn tick(&mut self, now: i64) -> Vec<Delivery> {
        let cfg = self.config.clone();
        let mut out = Vec::new();
        let mut ticked = Vec::new();
        for group in self.groups.values_mut() {
            if group.next_deadline().is_some_and(|d| d <= now) {
                group.tick(&cfg, now, &mut out);
                group.check();
                ticked.push(group.id.clone());
            }
        }
        for id in ticked {
            self.remove_if_unused(&id);
        }
        out
    }

    /// The earliest time [`Groups::tick`] has work to do.
    pub fn next_deadline(&self) -> Option<i64> {
        self.groups.values().filter_map(Group::next_deadline).min()
    }
}
