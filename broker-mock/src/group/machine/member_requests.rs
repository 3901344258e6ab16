//! The requests of a joined member: SyncGroup (the leader's assignments make the
//! group stable), Heartbeat and LeaveGroup.

use std::collections::HashMap;

use baton_protocol::messages::SyncGroupResponse;
use baton_protocol::ErrorCode;
use bytes::Bytes;

use super::delivery::{sync_error, Delivery, Waiter};
use super::group::GroupState;
use super::registry::Groups;

/// A SyncGroup request in version-independent form.
#[derive(Debug, Clone, Default)]
pub struct SyncRequest {
    /// The group id.
    pub group_id: String,
    /// The generation the member joined.
    pub generation_id: i32,
    /// The member id.
    pub member_id: String,
    /// The static instance id.
    pub group_instance_id: Option<String>,
    /// The protocol type, when sent (v5+).
    pub protocol_type: Option<String>,
    /// The protocol name, when sent (v5+).
    pub protocol_name: Option<String>,
    /// The leader's assignments by member id.
    pub assignments: Vec<(String, Bytes)>,
}

/// The identity of a member leaving.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeavingMember {
    /// The member id, or empty when leaving by instance id.
    pub member_id: String,
    /// The static instance id.
    pub group_instance_id: Option<String>,
}

impl Groups {
    /// Handles a SyncGroup; the answer (now or later) is a [`Delivery::Sync`] for
    /// `waiter`.
    pub fn sync(&mut self, req: SyncRequest, waiter: Waiter, now: i64) -> Vec<Delivery> {
        let mut out = Vec::new();
        let err = |code: ErrorCode| {
            Delivery::Sync(
                waiter,
                SyncGroupResponse {
                    error_code: code.code(),
                    ..Default::default()
                },
            )
        };
        let Some(group) = self.groups.get_mut(&req.group_id) else {
            out.push(err(ErrorCode::UnknownMemberId));
            return out;
        };
        if group.state == GroupState::Dead {
            out.push(err(ErrorCode::CoordinatorNotAvailable));
            return out;
        }
        if let Err(code) = group.validate_member(&req.member_id, req.group_instance_id.as_deref()) {
            out.push(err(code));
            return out;
        }
        if req.generation_id != group.generation_id {
            out.push(err(ErrorCode::IllegalGeneration));
            return out;
        }
        let type_ok = req
            .protocol_type
            .as_ref()
            .is_none_or(|t| group.protocol_type.as_ref() == Some(t));
        let name_ok = req
            .protocol_name
            .as_ref()
            .is_none_or(|n| group.protocol_name.as_ref() == Some(n));
        if !type_ok || !name_ok {
            out.push(err(ErrorCode::InconsistentGroupProtocol));
            return out;
        }
        group.touch(&req.member_id, now);
        match group.state {
            GroupState::Empty | GroupState::Dead => out.push(err(ErrorCode::UnknownMemberId)),
            GroupState::PreparingRebalance => out.push(err(ErrorCode::RebalanceInProgress)),
            GroupState::Stable => {
                let assignment = group
                    .members
                    .get(&req.member_id)
                    .map(|m| m.assignment.clone())
                    .unwrap_or_default();
                out.push(Delivery::Sync(
                    waiter,
                    SyncGroupResponse {
                        error_code: 0,
                        protocol_type: group.protocol_type.clone(),
                        protocol_name: group.protocol_name.clone(),
                        assignment,
                        ..Default::default()
                    },
                ));
            }
            GroupState::CompletingRebalance => {
                if let Some(m) = group.members.get_mut(&req.member_id) {
                    if let Some(old) = m.sync_waiter.replace(waiter) {
                        out.push(sync_error(old, ErrorCode::RebalanceInProgress));
                    }
                }
                if group.leader.as_deref() == Some(req.member_id.as_str()) {
                    let assigned: HashMap<String, Bytes> = req.assignments.into_iter().collect();
                    for m in group.members.values_mut() {
                        m.assignment = assigned.get(&m.id).cloned().unwrap_or_default();
                    }
                    group.state = GroupState::Stable;
                    group.record_due = true;
                    tracing::debug!(group = %group.id, generation = group.generation_id, "group stable");
                    let ids: Vec<String> = group
                        .ordered_members()
                        .iter()
                        .map(|m| m.id.clone())
                        .collect();
                    for id in ids {
                        let (pt, pn) = (group.protocol_type.clone(), group.protocol_name.clone());
                        if let Some(m) = group.members.get_mut(&id) {
                            if let Some(w) = m.sync_waiter.take() {
                                out.push(Delivery::Sync(
                                    w,
                                    SyncGroupResponse {
                                        error_code: 0,
                                        protocol_type: pt,
                                        protocol_name: pn,
                                        assignment: m.assignment.clone(),
                                        ..Default::default()
                                    },
                                ));
                            }
                        }
                    }
                }
            }
        }
        Groups::finish(group, out)
    }

    /// Handles a Heartbeat.
    pub fn heartbeat(
        &mut self,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        instance_id: Option<&str>,
        now: i64,
    ) -> ErrorCode {
        let Some(group) = self.groups.get_mut(group_id) else {
            return ErrorCode::UnknownMemberId;
        };
        if group.state == GroupState::Dead {
            return ErrorCode::CoordinatorNotAvailable;
        }
        if let Err(code) = group.validate_member(member_id, instance_id) {
            return code;
        }
        if generation_id != group.generation_id {
            return ErrorCode::IllegalGeneration;
        }
        group.touch(member_id, now);
        match group.state {
            GroupState::PreparingRebalance => ErrorCode::RebalanceInProgress,
            GroupState::CompletingRebalance | GroupState::Stable => ErrorCode::None,
            GroupState::Empty | GroupState::Dead => ErrorCode::UnknownMemberId,
        }
    }

    /// Handles a LeaveGroup: the per-member results, or a group-level error.
    /// Removing members may complete a rebalance, hence the deliveries.
    pub fn leave(
        &mut self,
        group_id: &str,
        leaving: &[LeavingMember],
        now: i64,
    ) -> (Result<Vec<ErrorCode>, ErrorCode>, Vec<Delivery>) {
        let cfg = self.config.clone();
        let mut out = Vec::new();
        let Some(group) = self.groups.get_mut(group_id) else {
            return (Ok(vec![ErrorCode::UnknownMemberId; leaving.len()]), out);
        };
        if group.state == GroupState::Dead {
            return (Err(ErrorCode::CoordinatorNotAvailable), out);
        }
        let mut results = Vec::with_capacity(leaving.len());
        for l in leaving {
            let member_id = match (&l.group_instance_id, l.member_id.is_empty()) {
                (Some(instance), true) => match group.static_members.get(instance) {
                    Some(id) => id.clone(),
                    None => {
                        results.push(ErrorCode::UnknownMemberId);
                        continue;
                    }
                },
                (Some(instance), false) => {
                    if let Err(code) = group.validate_member(&l.member_id, Some(instance)) {
                        results.push(code);
                        continue;
                    }
                    l.member_id.clone()
                }
                (None, _) => {
                    if group.pending_members.remove(&l.member_id).is_some() {
                        group.maybe_complete_join(now, &mut out);
                        results.push(ErrorCode::None);
                        continue;
                    }
                    if !group.members.contains_key(&l.member_id) {
                        results.push(ErrorCode::UnknownMemberId);
                        continue;
                    }
                    l.member_id.clone()
                }
            };
            tracing::debug!(group = %group.id, member = %member_id, "member left");
            group.remove_member_and_update(&cfg, &member_id, now, &mut out);
            results.push(ErrorCode::None);
        }
        group.check();
        self.remove_if_unused(group_id);
        (Ok(results), out)
    }
}
