//! JoinGroup: validation, first joins (MEMBER_ID_REQUIRED, KIP-394), known
//! members rejoining, and static members taking over their old member id.

use baton_protocol::messages::{JoinGroupResponse, JoinGroupResponseMember};
use baton_protocol::ErrorCode;
use bytes::Bytes;

use super::config::GroupConfig;
use super::delivery::{join_error, sync_error, Delivery, Waiter};
use super::group::{Group, GroupState, Member};
use super::registry::Groups;

/// A JoinGroup request in version-independent form.
#[derive(Debug, Clone, Default)]
pub struct JoinRequest {
    /// The group id.
    pub group_id: String,
    /// The member id, empty on a first join.
    pub member_id: String,
    /// The static instance id.
    pub group_instance_id: Option<String>,
    /// The protocol type (`consumer`).
    pub protocol_type: String,
    /// The supported protocols, in preference order, with their metadata.
    pub protocols: Vec<(String, Bytes)>,
    /// The session timeout.
    pub session_timeout_ms: i32,
    /// The rebalance timeout (v0 requests pass the session timeout).
    pub rebalance_timeout_ms: i32,
    /// The client id from the request header.
    pub client_id: String,
    /// The client's address, for DescribeGroups.
    pub client_host: String,
    /// The request version: v4+ get MEMBER_ID_REQUIRED on a first dynamic join, v9+
    /// may get `skip_assignment`.
    pub version: i16,
}

impl Group {
    /// The current generation's answer for `member_id` (leader gets the members).
    pub(super) fn join_response(&self, member_id: &str) -> JoinGroupResponse {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        let leader = self.leader.clone().unwrap_or_default();
        let members = if leader == member_id {
            self.member_list(&protocol)
        } else {
            Vec::new()
        };
        JoinGroupResponse {
            error_code: 0,
            generation_id: self.generation_id,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader,
            member_id: member_id.to_owned(),
            members,
            ..Default::default()
        }
    }

    fn member_list(&self, protocol: &str) -> Vec<JoinGroupResponseMember> {
        self.ordered_members()
            .into_iter()
            .map(|m| JoinGroupResponseMember {
                member_id: m.id.clone(),
                group_instance_id: m.instance_id.clone(),
                metadata: m.metadata_for(protocol),
            })
            .collect()
    }
}

impl Groups {
    fn new_member_id(&mut self, prefix: &str) -> String {
        self.next_member += 1;
        format!(
            "{prefix}-{:08x}-{:04x}-{:012x}",
            self.nonce >> 32,
            self.nonce & 0xffff,
            self.next_member
        )
    }

    /// Handles a JoinGroup; the answer (now or later) is a [`Delivery::Join`] for
    /// `waiter`. A join that would create a group past the group limit is
    /// POLICY_VIOLATION; a group it created but left unused is removed again.
    pub fn join(&mut self, req: JoinRequest, waiter: Waiter, now: i64) -> Vec<Delivery> {
        let group_id = req.group_id.clone();
        let out = self.join_inner(req, waiter, now);
        self.remove_if_unused(&group_id);
        out
    }

    fn join_inner(&mut self, req: JoinRequest, waiter: Waiter, now: i64) -> Vec<Delivery> {
        let cfg = self.config.clone();
        let mut out = Vec::new();
        if req.group_id.is_empty() {
            out.push(join_error(
                waiter,
                &req.member_id,
                ErrorCode::InvalidGroupId,
            ));
            return out;
        }
        if req.session_timeout_ms < cfg.min_session_timeout_ms
            || req.session_timeout_ms > cfg.max_session_timeout_ms
        {
            out.push(join_error(
                waiter,
                &req.member_id,
                ErrorCode::InvalidSessionTimeout,
            ));
            return out;
        }
        if !req.member_id.is_empty() && !self.groups.contains_key(&req.group_id) {
            out.push(join_error(
                waiter,
                &req.member_id,
                ErrorCode::UnknownMemberId,
            ));
            return out;
        }
        if let Err(code) = self.admit_group(&req.group_id) {
            out.push(join_error(waiter, &req.member_id, code));
            return out;
        }
        let new_id = if req.member_id.is_empty() {
            let prefix = req
                .group_instance_id
                .clone()
                .unwrap_or_else(|| req.client_id.clone());
            Some(self.new_member_id(&prefix))
        } else {
            None
        };
        let group = self
            .groups
            .entry(req.group_id.clone())
            .or_insert_with(|| Group::new(&req.group_id));
        if group.state == GroupState::Dead {
            out.push(join_error(
                waiter,
                &req.member_id,
                ErrorCode::CoordinatorNotAvailable,
            ));
            return out;
        }
        if !group.supports_protocols(&req.protocol_type, &req.protocols) {
            out.push(join_error(
                waiter,
                &req.member_id,
                ErrorCode::InconsistentGroupProtocol,
            ));
            return Groups::finish(group, out);
        }
        match new_id {
            Some(new_id) => join_unknown(group, &cfg, req, new_id, waiter, now, &mut out),
            None => join_known(group, &cfg, req, waiter, now, &mut out),
        }
        Groups::finish(group, out)
    }
}

fn new_member(req: &JoinRequest, id: String, waiter: Waiter, now: i64, seq: u64) -> Member {
    Member {
        id,
        instance_id: req.group_instance_id.clone(),
        client_id: req.client_id.clone(),
        client_host: req.client_host.clone(),
        session_timeout_ms: req.session_timeout_ms,
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        protocols: req.protocols.clone(),
        assignment: Bytes::new(),
        join_waiter: Some(waiter),
        sync_waiter: None,
        heartbeat_deadline: now + req.session_timeout_ms as i64,
        seq,
    }
}

fn next_seq(group: &Group) -> u64 {
    group.members.values().map(|m| m.seq + 1).max().unwrap_or(0)
}

fn add_member_and_rebalance(
    group: &mut Group,
    cfg: &GroupConfig,
    req: &JoinRequest,
    id: String,
    waiter: Waiter,
    now: i64,
    out: &mut Vec<Delivery>,
) {
    if group.size() >= cfg.max_group_size {
        out.push(join_error(waiter, &id, ErrorCode::GroupMaxSizeReached));
        return;
    }
    if group.members.is_empty() {
        group.protocol_type = Some(req.protocol_type.clone());
    }
    let seq = next_seq(group);
    let member = new_member(req, id.clone(), waiter, now, seq);
    if let Some(instance) = &member.instance_id {
        group.static_members.insert(instance.clone(), id.clone());
    }
    group.members.insert(id, member);
    if let Some(d) = group.initial_delay.as_mut() {
        d.new_member_added = true;
    }
    group.maybe_prepare_rebalance(cfg, now, out);
    group.maybe_complete_join(now, out);
}

fn update_member(group: &mut Group, req: &JoinRequest, waiter: Waiter, out: &mut Vec<Delivery>) {
    let Some(m) = group.members.get_mut(&req.member_id) else {
        return;
    };
    m.protocols = req.protocols.clone();
    m.session_timeout_ms = req.session_timeout_ms;
    m.rebalance_timeout_ms = req.rebalance_timeout_ms;
    m.client_id = req.client_id.clone();
    m.client_host = req.client_host.clone();
    if let Some(old) = m.join_waiter.replace(waiter) {
        out.push(join_error(
            old,
            &req.member_id,
            ErrorCode::RebalanceInProgress,
        ));
    }
}

fn join_unknown(
    group: &mut Group,
    cfg: &GroupConfig,
    req: JoinRequest,
    new_id: String,
    waiter: Waiter,
    now: i64,
    out: &mut Vec<Delivery>,
) {
    let Some(instance) = req.group_instance_id.clone() else {
        if req.version >= 4 {
            // Pending members count against `group.max.size` (unlike Kafka, which
            // counts only members), so a flood of first joins cannot grow the
            // group without bound until their session timeouts.
            if group.size() >= cfg.max_group_size {
                out.push(join_error(waiter, "", ErrorCode::GroupMaxSizeReached));
                return;
            }
            // KIP-394: hand out the id first; the member joins again with it.
            group
                .pending_members
                .insert(new_id.clone(), now + req.session_timeout_ms as i64);
            out.push(join_error(waiter, &new_id, ErrorCode::MemberIdRequired));
        } else {
            add_member_and_rebalance(group, cfg, &req, new_id, waiter, now, out);
        }
        return;
    };
    let Some(old_id) = group.static_members.get(&instance).cloned() else {
        add_member_and_rebalance(group, cfg, &req, new_id, waiter, now, out);
        return;
    };
    // A known static member restarted: it takes over the old member's place.
    let Some(mut member) = group.members.remove(&old_id) else {
        return;
    };
    if let Some(w) = member.join_waiter.take() {
        out.push(join_error(w, &old_id, ErrorCode::FencedInstanceId));
    }
    if let Some(w) = member.sync_waiter.take() {
        out.push(sync_error(w, ErrorCode::FencedInstanceId));
    }
    let protocol = group.protocol_name.clone().unwrap_or_default();
    let old_metadata = Some(member.metadata_for(&protocol));
    let old_leader = group.leader.clone();
    let was_leader = old_leader.as_deref() == Some(old_id.as_str());
    member.id = new_id.clone();
    member.protocols = req.protocols.clone();
    member.session_timeout_ms = req.session_timeout_ms;
    member.rebalance_timeout_ms = req.rebalance_timeout_ms;
    member.client_id = req.client_id.clone();
    member.client_host = req.client_host.clone();
    member.heartbeat_deadline = now + req.session_timeout_ms as i64;
    group.members.insert(new_id.clone(), member);
    group
        .static_members
        .insert(instance.clone(), new_id.clone());
    if was_leader {
        group.leader = Some(new_id.clone());
    }
    tracing::debug!(group = %group.id, %instance, old = %old_id, new = %new_id, "static member replaced");
    let unchanged = old_metadata
        == group
            .members
            .get(&new_id)
            .map(|m| m.metadata_for(&protocol));
    match group.state {
        GroupState::Stable if unchanged && group.select_protocol() == group.protocol_name => {
            // The group's record names the old member id: write it again.
            group.record_due = true;
            // No rebalance: the member keeps its assignment and gets the current
            // generation. A leader is not told it leads (before v9), so that it does
            // not compute an assignment a stable group would never hand out; v9+
            // tells it to skip the assignment (KIP-814).
            let skip = was_leader && req.version >= 9;
            out.push(Delivery::Join(
                waiter,
                JoinGroupResponse {
                    error_code: 0,
                    generation_id: group.generation_id,
                    protocol_type: group.protocol_type.clone(),
                    protocol_name: group.protocol_name.clone(),
                    leader: if skip {
                        new_id.clone()
                    } else {
                        old_leader.unwrap_or_default()
                    },
                    skip_assignment: skip,
                    member_id: new_id,
                    members: if skip {
                        group.member_list(&protocol)
                    } else {
                        Vec::new()
                    },
                    ..Default::default()
                },
            ));
        }
        GroupState::Stable | GroupState::CompletingRebalance => {
            if let Some(m) = group.members.get_mut(&new_id) {
                m.join_waiter = Some(waiter);
            }
            group.prepare_rebalance(cfg, now, out);
            group.maybe_complete_join(now, out);
        }
        GroupState::PreparingRebalance | GroupState::Empty | GroupState::Dead => {
            if let Some(m) = group.members.get_mut(&new_id) {
                m.join_waiter = Some(waiter);
            }
            group.maybe_prepare_rebalance(cfg, now, out);
            group.maybe_complete_join(now, out);
        }
    }
}

fn join_known(
    group: &mut Group,
    cfg: &GroupConfig,
    req: JoinRequest,
    waiter: Waiter,
    now: i64,
    out: &mut Vec<Delivery>,
) {
    if req.group_instance_id.is_none() && group.pending_members.remove(&req.member_id).is_some() {
        let id = req.member_id.clone();
        add_member_and_rebalance(group, cfg, &req, id, waiter, now, out);
        return;
    }
    if let Err(code) = group.validate_member(&req.member_id, req.group_instance_id.as_deref()) {
        out.push(join_error(waiter, &req.member_id, code));
        return;
    }
    group.touch(&req.member_id, now);
    let unchanged = group
        .members
        .get(&req.member_id)
        .is_some_and(|m| m.same_protocols(&req.protocols));
    let is_leader = group.leader.as_deref() == Some(req.member_id.as_str());
    match group.state {
        GroupState::PreparingRebalance => {
            update_member(group, &req, waiter, out);
            group.maybe_complete_join(now, out);
        }
        GroupState::CompletingRebalance if unchanged => {
            out.push(Delivery::Join(waiter, group.join_response(&req.member_id)));
        }
        GroupState::Stable if unchanged && !is_leader => {
            out.push(Delivery::Join(waiter, group.join_response(&req.member_id)));
        }
        GroupState::CompletingRebalance | GroupState::Stable => {
            update_member(group, &req, waiter, out);
            group.prepare_rebalance(cfg, now, out);
            group.maybe_complete_join(now, out);
        }
        GroupState::Empty | GroupState::Dead => {
            out.push(join_error(
                waiter,
                &req.member_id,
                ErrorCode::UnknownMemberId,
            ));
        }
    }
}
