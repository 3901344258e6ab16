//! Classic-protocol members inside a consumer group, as Kafka 4 lets them mix
//! (KIP-848, "upgrade/downgrade"): JoinGroup, SyncGroup, Heartbeat and
//! LeaveGroup from members that do not speak ConsumerGroupHeartbeat, driven by
//! the same epochs, target assignment and reconciliation as the others.
//!
//! - **JoinGroup** reads the member's subscription (topics, rack, owned
//!   partitions) from its `ConsumerProtocolSubscription`, bumps the group epoch
//!   when it is new or its subscription changed, and reconciles it at once: a
//!   classic member revokes before it rejoins (eager members own nothing then,
//!   cooperative ones report what they kept), so the owned partitions it
//!   reports are what it still holds. The answer comes at once, with the member
//!   epoch as the generation and no leader: the server-side assignor already
//!   assigned every member, so no client runs an assignor.
//! - **SyncGroup** returns the member's assigned partitions as a
//!   `ConsumerProtocolAssignment` (the leader's assignments, if any, are
//!   ignored).
//! - **Heartbeat** answers REBALANCE_IN_PROGRESS whenever the member's
//!   assignment must change (a new target epoch, partitions to give up, or
//!   partitions another member has since released), so that it rejoins.
//! - The generation a classic member sends (Heartbeat, SyncGroup, OffsetCommit)
//!   is checked against its member epoch: ILLEGAL_GENERATION when it differs.
//!
//! Conversions: [`ConsumerGroups::adopt_classic`] makes a consumer group of a
//! classic group's members (upgrade: member epochs and the target are the
//! classic generation and assignments); [`ConsumerGroups::take_downgrades`]
//! turns a consumer group whose last consumer-protocol member left back into
//! its classic members. Both follow `group.consumer.migration.policy`.
//!
//! Deviations from Kafka: a static classic member rejoining with a new member id
//! is refused (FENCED_INSTANCE_ID) rather than replacing the old one; no
//! separate join and sync timeouts (the session timeout covers a member that
//! stops talking, the rebalance timeout one that does not revoke).

use std::collections::BTreeMap;

use baton_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, ConsumerProtocolTopicPartition,
    DescribedGroup, DescribedGroupMember, JoinGroupResponse, SyncGroupResponse,
};
use baton_protocol::primitives::Uuid;
use baton_protocol::ErrorCode;
use bytes::Bytes;

use super::group::{metadata_hash, Catalog, ConsumerGroup};
use super::member::{Assignment, ClassicMetadata, Current, Member, MemberState, Subscription};
use super::reconcile::reconcile;
use super::registry::{ConsumerGroups, ConsumerRecord};
use crate::group::machine::{JoinRequest, LeavingMember, MigratingGroup, MigratingMember};

/// The protocol type of consumers (the only one a consumer group accepts).
pub const PROTOCOL_TYPE: &str = "consumer";

type Refusal = (ErrorCode, String);

fn refuse<T>(code: ErrorCode, msg: impl Into<String>) -> Result<T, Refusal> {
    Err((code, msg.into()))
}

/// The subscription in a classic member's metadata for `protocol` (else its
/// first protocol's).
pub fn subscription_of(
    protocols: &[(String, Bytes)],
    protocol: Option<&str>,
) -> Option<ConsumerProtocolSubscription> {
    let (_, metadata) = protocol
        .and_then(|p| protocols.iter().find(|(n, _)| n == p))
        .or_else(|| protocols.first())?;
    ConsumerProtocolSubscription::decode_versioned(metadata.clone())
        .ok()
        .map(|(_, s)| s)
}

/// Partitions by topic name as partitions by topic id (unknown topics dropped).
fn by_id(parts: &[ConsumerProtocolTopicPartition], catalog: &Catalog) -> Assignment {
    let mut a = Assignment::new();
    for tp in parts {
        if let Some((id, count)) = catalog.get(&tp.topic) {
            let ps: Vec<i32> = tp
                .partitions
                .iter()
                .copied()
                .filter(|p| (0..*count).contains(p))
                .collect();
            if !ps.is_empty() {
                a.entry(*id).or_default().extend(ps);
            }
        }
    }
    a
}

/// An assignment as the `ConsumerProtocolAssignment` a classic member reads
/// (topics by name, in name order; topics no longer known are left out).
pub fn encode_assignment(a: &Assignment, catalog: &Catalog) -> Bytes {
    let names: BTreeMap<Uuid, &str> = catalog
        .iter()
        .map(|(name, (id, _))| (*id, name.as_str()))
        .collect();
    let mut parts: Vec<ConsumerProtocolTopicPartition> = a
        .iter()
        .filter_map(|(id, ps)| {
            names.get(id).map(|n| ConsumerProtocolTopicPartition {
                topic: (*n).to_owned(),
                partitions: ps.iter().copied().collect(),
            })
        })
        .collect();
    parts.sort_by(|x, y| x.topic.cmp(&y.topic));
    ConsumerProtocolAssignment {
        assigned_partitions: parts,
        user_data: None,
    }
    .encode_versioned(0)
    .unwrap_or_default()
}

impl ConsumerGroup {
    /// The classic protocol (assignor name) for `member_id` joining with
    /// `protocols`: its most preferred one that every other classic member
    /// supports; `None` if there is none.
    pub fn classic_protocol(
        &self,
        member_id: &str,
        protocols: &[(String, Bytes)],
    ) -> Option<String> {
        protocols
            .iter()
            .map(|(n, _)| n)
            .find(|name| {
                self.members
                    .values()
                    .filter(|m| m.id != member_id)
                    .filter_map(|m| m.sub.classic.as_ref())
                    .all(|c| c.protocols.iter().any(|(n, _)| n == *name))
            })
            .cloned()
    }

    /// The protocol the classic members share (in the first one's preference
    /// order), as DescribeGroups and a downgrade name it.
    pub fn shared_classic_protocol(&self) -> Option<String> {
        let first = self.members.values().find_map(|m| {
            m.sub
                .classic
                .as_ref()
                .map(|c| (m.id.as_str(), c.protocols.as_slice()))
        })?;
        self.classic_protocol(first.0, first.1)
    }

    /// Whether a consumer-protocol member is in the group.
    pub fn has_consumer_members(&self) -> bool {
        self.members.values().any(|m| !m.sub.is_classic())
    }
}

impl ConsumerGroups {
    /// Handles a JoinGroup from a classic member of consumer group
    /// `req.group_id` (which the caller found with members). The answer is
    /// immediate; its records are queued.
    pub fn classic_join(
        &mut self,
        req: &JoinRequest,
        catalog: &Catalog,
        now: i64,
    ) -> JoinGroupResponse {
        let answer = self.classic_join_inner(req, catalog, now);
        if let Some(g) = self.groups.get(&req.group_id) {
            g.check();
        }
        answer.unwrap_or_else(|(code, message)| {
            tracing::debug!(group = %req.group_id, member = %req.member_id, ?code, %message, "classic join refused");
            JoinGroupResponse {
                error_code: code.code(),
                generation_id: -1,
                member_id: req.member_id.clone(),
                ..Default::default()
            }
        })
    }

    fn classic_join_inner(
        &mut self,
        req: &JoinRequest,
        catalog: &Catalog,
        now: i64,
    ) -> Result<JoinGroupResponse, Refusal> {
        let cfg = self.config.clone();
        if req.session_timeout_ms < cfg.min_session_timeout_ms
            || req.session_timeout_ms > cfg.max_session_timeout_ms
        {
            return refuse(ErrorCode::InvalidSessionTimeout, "invalid session timeout");
        }
        if req.protocol_type != PROTOCOL_TYPE || req.protocols.is_empty() {
            return refuse(
                ErrorCode::InconsistentGroupProtocol,
                "a consumer group accepts classic members of protocol type consumer only",
            );
        }
        let Some(g) = self.groups.get(&req.group_id) else {
            return refuse(ErrorCode::UnknownMemberId, "no such group");
        };
        let member_id = match &req.group_instance_id {
            Some(instance) => match g.static_members.get(instance) {
                Some(old) if req.member_id.is_empty() || *old == req.member_id => old.clone(),
                Some(old) => {
                    return refuse(
                        ErrorCode::FencedInstanceId,
                        format!("instance id {instance} belongs to member {old}"),
                    )
                }
                None if req.member_id.is_empty() => String::new(),
                None => return refuse(ErrorCode::UnknownMemberId, "unknown instance id"),
            },
            None => {
                if !req.member_id.is_empty() && !g.members.contains_key(&req.member_id) {
                    return refuse(ErrorCode::UnknownMemberId, "unknown member id");
                }
                req.member_id.clone()
            }
        };
        let existing = g.members.get(&member_id).cloned();
        if existing.as_ref().is_some_and(|m| !m.sub.is_classic()) {
            return refuse(
                ErrorCode::UnknownMemberId,
                format!("member {member_id} uses the consumer protocol"),
            );
        }
        if existing.is_none() && g.members.len() >= cfg.consumer_max_size {
            return refuse(ErrorCode::GroupMaxSizeReached, "the consumer group is full");
        }
        let Some(protocol) = g.classic_protocol(&member_id, &req.protocols) else {
            return refuse(
                ErrorCode::InconsistentGroupProtocol,
                "no protocol in common with the group's classic members",
            );
        };
        let Some(subscription) = subscription_of(&req.protocols, Some(&protocol)) else {
            return refuse(
                ErrorCode::InconsistentGroupProtocol,
                "the protocol metadata is not a ConsumerProtocolSubscription",
            );
        };
        let member_id = if member_id.is_empty() {
            self.next_member_id()
        } else {
            member_id
        };
        let mut topic_names = subscription.topics.clone();
        topic_names.sort();
        topic_names.dedup();
        let sub = Subscription {
            instance_id: req.group_instance_id.clone(),
            rack_id: subscription.rack_id.clone().filter(|r| !r.is_empty()),
            client_id: req.client_id.clone(),
            client_host: req.client_host.clone(),
            topic_names,
            topic_regex: None,
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            server_assignor: None,
            classic: Some(ClassicMetadata {
                session_timeout_ms: req.session_timeout_ms,
                protocols: req.protocols.clone(),
            }),
        };
        let session_deadline = now + i64::from(req.session_timeout_ms);
        let bump = match &existing {
            None => true,
            Some(m) => m.sub.topic_names != sub.topic_names || m.sub.rack_id != sub.rack_id,
        };
        let changed = existing.as_ref().is_none_or(|m| m.sub != sub);
        let g = self.groups.get_mut(&req.group_id).expect("checked above");
        match existing {
            None => g.insert_member(Member {
                id: member_id.clone(),
                sub: sub.clone(),
                current: Current::default(),
                session_deadline,
                rebalance_deadline: None,
            }),
            Some(_) => {
                if let Some(m) = g.members.get_mut(&member_id) {
                    m.sub = sub.clone();
                    m.session_deadline = session_deadline;
                }
            }
        }
        if changed {
            self.records.push(ConsumerRecord::Member {
                group: req.group_id.clone(),
                member: member_id.clone(),
                value: Some(sub),
            });
        }
        self.advance_epoch(&req.group_id, catalog, bump);

        // What it still owns: what its subscription reports (nothing for an
        // eager member, which gave everything up before rejoining).
        let owned = by_id(&subscription.owned_partitions, catalog);
        let after = self.reconcile_member(&req.group_id, &member_id, &owned, now);
        Ok(JoinGroupResponse {
            error_code: 0,
            generation_id: after.epoch,
            protocol_type: Some(PROTOCOL_TYPE.to_owned()),
            protocol_name: Some(protocol),
            leader: String::new(),
            member_id,
            members: Vec::new(),
            ..Default::default()
        })
    }

    /// Moves a member towards its target given what it reports `owned`, with
    /// its record and rebalance deadline; returns its new state.
    fn reconcile_member(
        &mut self,
        group_id: &str,
        member_id: &str,
        owned: &Assignment,
        now: i64,
    ) -> Current {
        let g = self.groups.get_mut(group_id).expect("group exists");
        let before = g.members[member_id].current.clone();
        let empty = Assignment::new();
        let target = g.target.get(member_id).unwrap_or(&empty);
        let after = reconcile(&before, target, g.assignment_epoch, Some(owned), |t, p| {
            g.owned_by_other(member_id, t, p)
        });
        if after != before {
            g.set_current(member_id, after.clone());
            self.records.push(ConsumerRecord::Current {
                group: group_id.to_owned(),
                member: member_id.to_owned(),
                value: Some(after.clone()),
            });
        }
        if let Some(m) = g.members.get_mut(member_id) {
            if after.state == MemberState::UnrevokedPartitions {
                if before.state != MemberState::UnrevokedPartitions || before.epoch != after.epoch {
                    m.rebalance_deadline = Some((
                        now + i64::from(m.sub.rebalance_timeout_ms.max(0)),
                        after.epoch,
                    ));
                }
            } else {
                m.rebalance_deadline = None;
            }
        }
        after
    }

    /// The classic member `member_id` of `group_id` sending `generation_id`:
    /// UNKNOWN_MEMBER_ID if it is not one (or `instance_id` names another),
    /// ILLEGAL_GENERATION unless the generation is its member epoch. Its session
    /// is renewed.
    fn classic_member(
        &mut self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
        now: i64,
    ) -> Result<&mut Member, ErrorCode> {
        let g = self
            .groups
            .get_mut(group_id)
            .ok_or(ErrorCode::UnknownMemberId)?;
        if let Some(instance) = instance_id {
            match g.static_members.get(instance) {
                Some(id) if id == member_id => {}
                Some(_) => return Err(ErrorCode::FencedInstanceId),
                None => return Err(ErrorCode::UnknownMemberId),
            }
        }
        let m = g
            .members
            .get_mut(member_id)
            .filter(|m| m.sub.is_classic())
            .ok_or(ErrorCode::UnknownMemberId)?;
        if generation_id != m.current.epoch {
            return Err(ErrorCode::IllegalGeneration);
        }
        let session = m.sub.classic.as_ref().map_or(0, |c| c.session_timeout_ms);
        m.session_deadline = now + i64::from(session);
        Ok(m)
    }

    /// Handles a SyncGroup from a classic member: its assigned partitions.
    #[allow(clippy::too_many_arguments)]
    pub fn classic_sync(
        &mut self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
        protocol_name: Option<&str>,
        catalog: &Catalog,
        now: i64,
    ) -> SyncGroupResponse {
        let error = |code: ErrorCode| SyncGroupResponse {
            error_code: code.code(),
            ..Default::default()
        };
        let m = match self.classic_member(group_id, member_id, instance_id, generation_id, now) {
            Ok(m) => m.clone(),
            Err(code) => return error(code),
        };
        let protocols = m.sub.classic.map(|c| c.protocols).unwrap_or_default();
        let g = &self.groups[group_id];
        let protocol = g.classic_protocol(member_id, &protocols);
        if protocol_name.is_some_and(|p| Some(p) != protocol.as_deref()) {
            return error(ErrorCode::InconsistentGroupProtocol);
        }
        SyncGroupResponse {
            error_code: 0,
            protocol_type: Some(PROTOCOL_TYPE.to_owned()),
            protocol_name: protocol,
            assignment: encode_assignment(&m.current.assigned, catalog),
            ..Default::default()
        }
    }

    /// Handles a Heartbeat from a classic member: REBALANCE_IN_PROGRESS when
    /// its assignment must change (it then rejoins).
    pub fn classic_heartbeat(
        &mut self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
        catalog: &Catalog,
        now: i64,
    ) -> ErrorCode {
        if let Err(code) = self.classic_member(group_id, member_id, instance_id, generation_id, now)
        {
            return code;
        }
        self.advance_epoch(group_id, catalog, false);
        let g = &self.groups[group_id];
        let m = &g.members[member_id];
        let empty = Assignment::new();
        let target = g.target.get(member_id).unwrap_or(&empty);
        let next = reconcile(
            &m.current,
            target,
            g.assignment_epoch,
            Some(&m.current.assigned),
            |t, p| g.owned_by_other(member_id, t, p),
        );
        if next != m.current {
            ErrorCode::RebalanceInProgress
        } else {
            ErrorCode::None
        }
    }

    /// Handles a LeaveGroup for classic members of a consumer group: each known
    /// one is removed (the group epoch moves); per-member results.
    pub fn classic_leave(&mut self, group_id: &str, leaving: &[LeavingMember]) -> Vec<ErrorCode> {
        let mut out = Vec::with_capacity(leaving.len());
        for l in leaving {
            let Some(g) = self.groups.get(group_id) else {
                out.push(ErrorCode::UnknownMemberId);
                continue;
            };
            let id = match &l.group_instance_id {
                Some(instance) => match g.static_members.get(instance) {
                    Some(id) if l.member_id.is_empty() || *id == l.member_id => id.clone(),
                    Some(_) => {
                        out.push(ErrorCode::FencedInstanceId);
                        continue;
                    }
                    None => {
                        out.push(ErrorCode::UnknownMemberId);
                        continue;
                    }
                },
                None => l.member_id.clone(),
            };
            if !g.members.get(&id).is_some_and(|m| m.sub.is_classic()) {
                out.push(ErrorCode::UnknownMemberId);
                continue;
            }
            tracing::debug!(group = group_id, member = %id, "classic member left a consumer group");
            self.fence(group_id, &id);
            out.push(ErrorCode::None);
        }
        out
    }

    /// Upgrade: makes consumer group `group_id` of a classic group's members
    /// (KIP-848's online migration). Member epochs, the group epoch and the
    /// target assignment epoch are the classic generation; each member's current
    /// and target assignment are its classic assignment. Refused (nothing
    /// changes) with GROUP_ID_NOT_FOUND when `group.consumer.migration.policy`
    /// does not upgrade, the protocol type is not `consumer` or a member's
    /// metadata is not a consumer subscription, and with GROUP_MAX_SIZE_REACHED
    /// when the group has no room for the joining member.
    pub fn adopt_classic(
        &mut self,
        group_id: &str,
        classic: &MigratingGroup,
        catalog: &Catalog,
        now: i64,
    ) -> Result<(), ErrorCode> {
        if !self.config.consumer_migration_policy.upgrades()
            || classic
                .protocol_type
                .as_deref()
                .is_some_and(|t| t != PROTOCOL_TYPE)
        {
            return Err(ErrorCode::GroupIdNotFound);
        }
        if classic.members.len() >= self.config.consumer_max_size {
            return Err(ErrorCode::GroupMaxSizeReached);
        }
        let mut members = Vec::with_capacity(classic.members.len());
        for m in &classic.members {
            let sub = subscription_of(&m.protocols, classic.protocol_name.as_deref())
                .ok_or(ErrorCode::GroupIdNotFound)?;
            let assigned = ConsumerProtocolAssignment::decode_versioned(m.assignment.clone())
                .map(|(_, a)| by_id(&a.assigned_partitions, catalog))
                .unwrap_or_default();
            members.push((m, sub, assigned));
        }
        let epoch = classic.generation_id.max(0);
        let mut g = ConsumerGroup::new(group_id);
        g.epoch = epoch;
        g.assignment_epoch = epoch;
        let mut records = Vec::new();
        for (m, sub, assigned) in members {
            let mut topic_names = sub.topics.clone();
            topic_names.sort();
            topic_names.dedup();
            let subscription = Subscription {
                instance_id: m.instance_id.clone(),
                rack_id: sub.rack_id.clone().filter(|r| !r.is_empty()),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                topic_names,
                topic_regex: None,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                server_assignor: None,
                classic: Some(ClassicMetadata {
                    session_timeout_ms: m.session_timeout_ms,
                    protocols: m.protocols.clone(),
                }),
            };
            // A partition two assignments claim goes to the first member only.
            let mut mine = Assignment::new();
            for (t, ps) in &assigned {
                for &p in ps {
                    if !g.owners.contains_key(&(*t, p)) && !super::member::holds(&mine, t, p) {
                        mine.entry(*t).or_default().insert(p);
                    }
                }
            }
            let current = Current {
                epoch,
                previous_epoch: epoch,
                state: MemberState::Stable,
                assigned: mine.clone(),
                pending_revocation: Assignment::new(),
            };
            records.push(ConsumerRecord::Member {
                group: group_id.to_owned(),
                member: m.id.clone(),
                value: Some(subscription.clone()),
            });
            records.push(ConsumerRecord::TargetMember {
                group: group_id.to_owned(),
                member: m.id.clone(),
                value: Some(mine.clone()),
            });
            records.push(ConsumerRecord::Current {
                group: group_id.to_owned(),
                member: m.id.clone(),
                value: Some(current.clone()),
            });
            g.target.insert(m.id.clone(), mine);
            g.insert_member(Member {
                id: m.id.clone(),
                sub: subscription,
                current,
                session_deadline: now + i64::from(m.session_timeout_ms),
                rebalance_deadline: None,
            });
        }
        let topics = g.subscribed_topics(catalog, &|_, _| false);
        g.metadata_hash = metadata_hash(&topics);
        self.records.push(ConsumerRecord::Group {
            group: group_id.to_owned(),
            value: Some((g.epoch, g.metadata_hash)),
        });
        self.records.extend(records);
        self.records.push(ConsumerRecord::TargetEpoch {
            group: group_id.to_owned(),
            value: Some(epoch),
        });
        g.check();
        tracing::info!(
            group = group_id,
            epoch,
            members = g.members.len(),
            "classic group upgraded to a consumer group"
        );
        self.groups.insert(group_id.to_owned(), g);
        Ok(())
    }

    /// Downgrades: every consumer group whose last consumer-protocol member was
    /// removed while classic members remain becomes their classic group again,
    /// when `group.consumer.migration.policy` allows it and the classic group
    /// size limit holds. The consumer group's records get tombstones; the
    /// classic members (with their current assignments) are returned for the
    /// classic machine, with their (highest) member epoch as generation.
    pub fn take_downgrades(&mut self, catalog: &Catalog) -> Vec<(String, MigratingGroup)> {
        let mut out = Vec::new();
        let candidates = std::mem::take(&mut self.downgrade_candidates);
        if !self.config.consumer_migration_policy.downgrades() {
            return out;
        }
        for group_id in candidates {
            let Some(g) = self.groups.get(&group_id) else {
                continue;
            };
            if g.members.is_empty()
                || g.has_consumer_members()
                || g.members.len() > self.config.max_group_size
            {
                continue;
            }
            // The members' epoch (the one they send as generation) rather than
            // the group epoch, which the leaving member just bumped: members at
            // it heartbeat straight into the rebalance instead of being told
            // ILLEGAL_GENERATION (and losing their partitions).
            let generation_id = g
                .members
                .values()
                .map(|m| m.current.epoch)
                .max()
                .unwrap_or(g.epoch);
            let classic = MigratingGroup {
                generation_id,
                protocol_type: Some(PROTOCOL_TYPE.to_owned()),
                protocol_name: g.shared_classic_protocol(),
                members: g
                    .members
                    .values()
                    .map(|m| {
                        let c = m.sub.classic.clone().unwrap_or_default();
                        MigratingMember {
                            id: m.id.clone(),
                            instance_id: m.sub.instance_id.clone(),
                            client_id: m.sub.client_id.clone(),
                            client_host: m.sub.client_host.clone(),
                            session_timeout_ms: c.session_timeout_ms,
                            rebalance_timeout_ms: m.sub.rebalance_timeout_ms,
                            protocols: c.protocols,
                            assignment: encode_assignment(&m.current.assigned, catalog),
                        }
                    })
                    .collect(),
            };
            let ids: Vec<String> = g.members.keys().cloned().collect();
            self.groups.remove(&group_id);
            for id in ids {
                for r in [
                    ConsumerRecord::Current {
                        group: group_id.clone(),
                        member: id.clone(),
                        value: None,
                    },
                    ConsumerRecord::TargetMember {
                        group: group_id.clone(),
                        member: id.clone(),
                        value: None,
                    },
                    ConsumerRecord::Member {
                        group: group_id.clone(),
                        member: id,
                        value: None,
                    },
                ] {
                    self.records.push(r);
                }
            }
            self.records.push(ConsumerRecord::TargetEpoch {
                group: group_id.clone(),
                value: None,
            });
            self.records.push(ConsumerRecord::Group {
                group: group_id.clone(),
                value: None,
            });
            tracing::info!(group = %group_id, generation = classic.generation_id, "consumer group downgraded to a classic group");
            out.push((group_id, classic));
        }
        out
    }

    /// Whether a downgrade may be due (see [`ConsumerGroups::take_downgrades`]).
    pub fn has_downgrade_candidates(&self) -> bool {
        !self.downgrade_candidates.is_empty()
    }
}

/// A consumer group as DescribeGroups shows it (Kafka's
/// `ConsumerGroup.asDescribedGroup`): its KIP-848 state, protocol type
/// `consumer`, the classic members' shared protocol (else the group's server
/// assignor) as protocol data, and every member: a classic one with the
/// metadata it joined with, a consumer-protocol one with a subscription built
/// from what it subscribes to; each with its assigned partitions.
pub fn describe(g: &ConsumerGroup, catalog: &Catalog) -> DescribedGroup {
    let protocol = g.shared_classic_protocol();
    let members =
        g.members
            .values()
            .map(|m| {
                let metadata = match &m.sub.classic {
                    Some(c) => protocol
                        .as_deref()
                        .and_then(|p| c.protocols.iter().find(|(n, _)| n == p))
                        .or_else(|| c.protocols.first())
                        .map(|(_, md)| md.clone())
                        .unwrap_or_default(),
                    None => {
                        let owned = ConsumerProtocolAssignment::decode_versioned(
                            encode_assignment(&m.current.assigned, catalog),
                        )
                        .map(|(_, a)| a.assigned_partitions)
                        .unwrap_or_default();
                        ConsumerProtocolSubscription {
                            topics: m.sub.topic_names.clone(),
                            user_data: None,
                            owned_partitions: owned,
                            generation_id: m.current.epoch,
                            rack_id: m.sub.rack_id.clone(),
                        }
                        .encode_versioned(3)
                        .unwrap_or_default()
                    }
                };
                DescribedGroupMember {
                    member_id: m.id.clone(),
                    group_instance_id: m.sub.instance_id.clone(),
                    client_id: m.sub.client_id.clone(),
                    client_host: m.sub.client_host.clone(),
                    member_metadata: metadata,
                    member_assignment: encode_assignment(&m.current.assigned, catalog),
                }
            })
            .collect();
    DescribedGroup {
        error_code: 0,
        group_id: g.id.clone(),
        group_state: g.state().name().to_owned(),
        protocol_type: PROTOCOL_TYPE.to_owned(),
        protocol_data: protocol.unwrap_or_else(|| g.assignor_name()),
        members,
        ..Default::default()
    }
}
