//! The classic group protocol as a state machine without I/O.
//!
//! [`Groups`] holds every group this coordinator owns. Each call takes the current
//! time (`now_ms`) and returns what must be sent: immediate answers and the completion
//! of parked JoinGroup / SyncGroup requests, as [`Delivery`] values naming the
//! [`Waiter`] they answer. Timers are deadlines in the state; the driver calls
//! [`Groups::tick`] at [`Groups::next_deadline`].
//!
//! The rules follow Apache Kafka's classic group coordinator:
//!
//! - A group moves `Empty → PreparingRebalance → CompletingRebalance → Stable`, and
//!   back to `PreparingRebalance` whenever membership or a member's protocols change.
//!   `Dead` is a deleted group.
//! - JoinGroup responses are held until every known member has rejoined (and no
//!   member id handed out by MEMBER_ID_REQUIRED is still outstanding) or the largest
//!   rebalance timeout of the members runs out; dynamic members that did not rejoin
//!   by then are removed. The first rebalance of an empty group waits
//!   `initial_rebalance_delay_ms` more, extended while new members keep arriving, up
//!   to the rebalance timeout (Kafka's `group.initial.rebalance.delay.ms`).
//! - Completing the join bumps the generation, selects the protocol most members
//!   prefer among those all support, keeps the leader if it rejoined (else the first
//!   member to join), and sends the leader every member's metadata.
//! - SyncGroup from followers waits for the leader's; the leader's assignments make
//!   the group `Stable` and answer everyone.
//! - Members without a parked request expire `session_timeout_ms` after their last
//!   heartbeat (or join, sync, commit).
//! - Static members (`group.instance.id`): joining again with an empty member id
//!   replaces the old member id; the old one is fenced (FENCED_INSTANCE_ID). In a
//!   `Stable` group whose selected protocol would not change, this needs no rebalance.
//!   Unlike Kafka, which looks only at the selected protocol, a change of the
//!   member's metadata for that protocol (its subscription) also rebalances.
//!
//! Bounds: [`Groups::with_max_groups`] caps the number of groups (a JoinGroup or a
//! commit that would create one more is POLICY_VIOLATION; replaying the log is not
//! capped); `group.max.size` bounds members and pending member ids together (Kafka
//! counts only members); a group left with no members, pending members or offsets
//! is removed at once (Kafka removes it at its next periodic cleanup), and
//! [`Groups::take_removed`] names those whose generation record needs a tombstone.
//!
//! Invariants (asserted in debug builds by `check`): a group in
//! `CompletingRebalance` or `Stable` has members, a protocol and a leader that is a
//! member; `static_members` maps exactly the members with an instance id; only
//! `PreparingRebalance` has a rebalance deadline.

use std::collections::{BTreeMap, HashMap};

use baton_protocol::messages::{
    DescribedGroup, DescribedGroupMember, JoinGroupResponse, JoinGroupResponseMember, ListedGroup,
    SyncGroupResponse,
};
use baton_protocol::ErrorCode;
use bytes::Bytes;

/// Identifies one parked request; chosen by the caller, echoed in [`Delivery`].
pub type Waiter = u64;

/// A response for a parked (or just received) JoinGroup or SyncGroup request.
#[derive(Debug, Clone, PartialEq)]
pub enum Delivery {
    /// The answer to a JoinGroup request.
    Join(Waiter, JoinGroupResponse),
    /// The answer to a SyncGroup request.
    Sync(Waiter, SyncGroupResponse),
}

/// Group coordinator settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfig {
    /// Extra wait before the first rebalance of an empty group completes, so that
    /// members starting together land in one generation. Kafka's
    /// `group.initial.rebalance.delay.ms` defaults to 3000; this broker defaults to
    /// 100 to keep tests quick. 0 disables the delay.
    pub initial_rebalance_delay_ms: i64,
    /// Smallest session timeout a member may ask for (Kafka's
    /// `group.min.session.timeout.ms`, default 6000 there; 100 here so tests can
    /// expire members quickly).
    pub min_session_timeout_ms: i32,
    /// Largest session timeout a member may ask for (`group.max.session.timeout.ms`).
    pub max_session_timeout_ms: i32,
    /// Most members per group (`group.max.size`); joins beyond it fail with
    /// GROUP_MAX_SIZE_REACHED.
    pub max_group_size: usize,
    /// Longest committed metadata string accepted (`offset.metadata.max.bytes`).
    pub offset_metadata_max_bytes: usize,
    /// Partitions of the internal `__consumer_offsets` topic when it is created
    /// (`offsets.topic.num.partitions`, 50 in Kafka).
    pub offsets_topic_partitions: i32,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            initial_rebalance_delay_ms: 100,
            min_session_timeout_ms: 100,
            max_session_timeout_ms: 1_800_000,
            max_group_size: 1000,
            offset_metadata_max_bytes: 4096,
            offsets_topic_partitions: 4,
        }
    }
}

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

/// A group's new generation, to be persisted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenerationInfo {
    /// The group id.
    pub group_id: String,
    /// The generation.
    pub generation_id: i32,
    /// The protocol type.
    pub protocol_type: Option<String>,
    /// The selected protocol (none for an empty group).
    pub protocol_name: Option<String>,
    /// The leader (none for an empty group).
    pub leader: Option<String>,
}

/// The identity of a member leaving.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeavingMember {
    /// The member id, or empty when leaving by instance id.
    pub member_id: String,
    /// The static instance id.
    pub group_instance_id: Option<String>,
}

#[derive(Debug, Clone)]
struct Member {
    id: String,
    instance_id: Option<String>,
    client_id: String,
    client_host: String,
    session_timeout_ms: i32,
    rebalance_timeout_ms: i32,
    protocols: Vec<(String, Bytes)>,
    assignment: Bytes,
    /// The parked JoinGroup, while the group prepares a rebalance.
    join_waiter: Option<Waiter>,
    /// The parked SyncGroup, while the group completes a rebalance.
    sync_waiter: Option<Waiter>,
    /// When the member expires unless it is heard from or has a parked request.
    heartbeat_deadline: i64,
    /// Join order, for choosing a leader and ordering member lists.
    seq: u64,
}

impl Member {
    fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    fn same_protocols(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols == protocols
    }
}

#[derive(Debug, Clone, Copy)]
struct InitialDelay {
    /// Time still allowed for extensions.
    remaining_ms: i64,
    /// Whether a member joined during the current delay.
    new_member_added: bool,
}

#[derive(Debug)]
struct Group {
    id: String,
    state: GroupState,
    generation_id: i32,
    protocol_type: Option<String>,
    protocol_name: Option<String>,
    leader: Option<String>,
    members: HashMap<String, Member>,
    /// Instance id → member id of static members.
    static_members: HashMap<String, String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED → when they lapse.
    pending_members: HashMap<String, i64>,
    /// When the join phase completes anyway (PreparingRebalance only).
    rebalance_deadline: Option<i64>,
    initial_delay: Option<InitialDelay>,
    offsets: BTreeMap<(String, i32), CommittedOffset>,
    /// The last generation handed out by [`Groups::take_new_generations`] (or
    /// replayed), so each generation is persisted once.
    persisted_generation: i32,
}

impl Group {
    fn new(id: &str) -> Self {
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
            persisted_generation: 0,
        }
    }

    fn check(&self) {
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
    /// members, no committed offsets. Such a group is removed.
    fn is_unused(&self) -> bool {
        self.state == GroupState::Empty
            && self.members.is_empty()
            && self.pending_members.is_empty()
            && self.offsets.is_empty()
    }

    /// Members and pending members: what `group.max.size` bounds.
    fn size(&self) -> usize {
        self.members.len() + self.pending_members.len()
    }

    /// Members in join order.
    fn ordered_members(&self) -> Vec<&Member> {
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

    fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
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
    fn select_protocol(&self) -> Option<String> {
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

    fn max_rebalance_timeout(&self) -> i64 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms.max(0) as i64)
            .max()
            .unwrap_or(0)
    }

    fn all_members_joined(&self) -> bool {
        self.pending_members.is_empty() && self.members.values().all(|m| m.join_waiter.is_some())
    }

    fn join_error(waiter: Waiter, member_id: &str, code: ErrorCode) -> Delivery {
        Delivery::Join(
            waiter,
            JoinGroupResponse {
                error_code: code.code(),
                generation_id: -1,
                member_id: member_id.to_owned(),
                ..Default::default()
            },
        )
    }

    /// The current generation's answer for `member_id` (leader gets the members).
    fn join_response(&self, member_id: &str) -> JoinGroupResponse {
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

    fn can_rebalance(&self) -> bool {
        matches!(
            self.state,
            GroupState::Empty | GroupState::CompletingRebalance | GroupState::Stable
        )
    }

    fn maybe_prepare_rebalance(&mut self, cfg: &GroupConfig, now: i64, out: &mut Vec<Delivery>) {
        if self.can_rebalance() {
            self.prepare_rebalance(cfg, now, out);
        }
    }

    fn prepare_rebalance(&mut self, cfg: &GroupConfig, now: i64, out: &mut Vec<Delivery>) {
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
                out.push(err_for(w, ErrorCode::RebalanceInProgress));
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

    fn maybe_complete_join(&mut self, now: i64, out: &mut Vec<Delivery>) {
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
            out.push(Group::join_error(w, member_id, ErrorCode::UnknownMemberId));
        }
        if let Some(w) = m.sync_waiter {
            out.push(err_for(w, ErrorCode::UnknownMemberId));
        }
        if self.leader.as_deref() == Some(member_id) {
            self.leader = self.ordered_members().first().map(|m| m.id.clone());
        }
    }

    /// Removes a member and moves the group on (a leave or an expiry).
    fn remove_member_and_update(
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

    /// Checks a member's identity: instance-id fencing first, then membership.
    fn validate_member(&self, member_id: &str, instance_id: Option<&str>) -> Result<(), ErrorCode> {
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

    fn touch(&mut self, member_id: &str, now: i64) {
        if let Some(m) = self.members.get_mut(member_id) {
            m.heartbeat_deadline = now + m.session_timeout_ms as i64;
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

/// Every group of one coordinator.
#[derive(Debug)]
pub struct Groups {
    config: GroupConfig,
    groups: HashMap<String, Group>,
    /// Most groups held (`BrokerLimits::max_groups`). Invariant: only replaying
    /// `__consumer_offsets` may take `groups` past it.
    max_groups: usize,
    /// Groups removed because nothing was left in them, whose generation record
    /// needs a tombstone (see [`Groups::take_removed`]).
    removed: Vec<String>,
    next_member: u64,
    nonce: u64,
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
    fn remove_if_unused(&mut self, group_id: &str) {
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

    fn new_member_id(&mut self, prefix: &str) -> String {
        self.next_member += 1;
        format!(
            "{prefix}-{:08x}-{:04x}-{:012x}",
            self.nonce >> 32,
            self.nonce & 0xffff,
            self.next_member
        )
    }

    fn finish(group: &Group, out: Vec<Delivery>) -> Vec<Delivery> {
        group.check();
        out
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
            out.push(Group::join_error(
                waiter,
                &req.member_id,
                ErrorCode::InvalidGroupId,
            ));
            return out;
        }
        if req.session_timeout_ms < cfg.min_session_timeout_ms
            || req.session_timeout_ms > cfg.max_session_timeout_ms
        {
            out.push(Group::join_error(
                waiter,
                &req.member_id,
                ErrorCode::InvalidSessionTimeout,
            ));
            return out;
        }
        if !req.member_id.is_empty() && !self.groups.contains_key(&req.group_id) {
            out.push(Group::join_error(
                waiter,
                &req.member_id,
                ErrorCode::UnknownMemberId,
            ));
            return out;
        }
        if let Err(code) = self.admit_group(&req.group_id) {
            out.push(Group::join_error(waiter, &req.member_id, code));
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
            out.push(Group::join_error(
                waiter,
                &req.member_id,
                ErrorCode::CoordinatorNotAvailable,
            ));
            return out;
        }
        if !group.supports_protocols(&req.protocol_type, &req.protocols) {
            out.push(Group::join_error(
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
                        out.push(err_for(old, ErrorCode::RebalanceInProgress));
                    }
                }
                if group.leader.as_deref() == Some(req.member_id.as_str()) {
                    let assigned: HashMap<String, Bytes> = req.assignments.into_iter().collect();
                    for m in group.members.values_mut() {
                        m.assignment = assigned.get(&m.id).cloned().unwrap_or_default();
                    }
                    group.state = GroupState::Stable;
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

    /// Groups whose generation changed since the last call, to be persisted so that
    /// generation ids never go back when the coordinator moves.
    pub fn take_new_generations(&mut self) -> Vec<GenerationInfo> {
        let mut out = Vec::new();
        for g in self.groups.values_mut() {
            if g.generation_id != g.persisted_generation && g.state != GroupState::Dead {
                g.persisted_generation = g.generation_id;
                out.push(GenerationInfo {
                    group_id: g.id.clone(),
                    generation_id: g.generation_id,
                    protocol_type: g.protocol_type.clone(),
                    protocol_name: g.protocol_name.clone(),
                    leader: g.leader.clone(),
                });
            }
        }
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        out
    }

    /// Replays a persisted generation: the group exists (empty, if it was not in
    /// memory) and its next generation is above `generation_id`. `None` (a
    /// tombstone) removes the group unless it has members or offsets.
    pub fn apply_generation(&mut self, group_id: &str, generation: Option<(i32, String)>) {
        match generation {
            Some((generation_id, protocol_type)) => {
                let group = self
                    .groups
                    .entry(group_id.to_owned())
                    .or_insert_with(|| Group::new(group_id));
                if group.state == GroupState::Dead {
                    group.state = GroupState::Empty;
                }
                if generation_id > group.generation_id {
                    group.generation_id = generation_id;
                    group.persisted_generation = generation_id;
                }
                if group.protocol_type.is_none() && !protocol_type.is_empty() {
                    group.protocol_type = Some(protocol_type);
                }
            }
            None => {
                let removable = self.groups.get(group_id).is_some_and(|g| {
                    g.members.is_empty() && g.pending_members.is_empty() && g.offsets.is_empty()
                });
                if removable {
                    self.groups.remove(group_id);
                }
            }
        }
    }

    /// The earliest time [`Groups::tick`] has work to do.
    pub fn next_deadline(&self) -> Option<i64> {
        self.groups.values().filter_map(Group::next_deadline).min()
    }

    /// The state and generation of a group, if it exists.
    pub fn state_of(&self, group_id: &str) -> Option<(GroupState, i32)> {
        self.groups
            .get(group_id)
            .map(|g| (g.state, g.generation_id))
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
    /// replaying `__consumer_offsets`.
    pub fn apply_offset(
        &mut self,
        group_id: &str,
        topic: &str,
        partition: i32,
        offset: Option<CommittedOffset>,
    ) {
        match offset {
            Some(o) => {
                let group = self
                    .groups
                    .entry(group_id.to_owned())
                    .or_insert_with(|| Group::new(group_id));
                if group.state == GroupState::Dead {
                    group.state = GroupState::Empty;
                }
                group.offsets.insert((topic.to_owned(), partition), o);
            }
            None => {
                if let Some(group) = self.groups.get_mut(group_id) {
                    group.offsets.remove(&(topic.to_owned(), partition));
                    if group.offsets.is_empty()
                        && group.state == GroupState::Empty
                        && group.members.is_empty()
                        && group.pending_members.is_empty()
                    {
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
                    out.push(Group::join_error(w, &m.id, ErrorCode::NotCoordinator));
                }
                if let Some(w) = m.sync_waiter {
                    out.push(err_for(w, ErrorCode::NotCoordinator));
                }
            }
        }
        out
    }
}

fn err_for(waiter: Waiter, code: ErrorCode) -> Delivery {
    Delivery::Sync(
        waiter,
        SyncGroupResponse {
            error_code: code.code(),
            ..Default::default()
        },
    )
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
        out.push(Group::join_error(
            waiter,
            &id,
            ErrorCode::GroupMaxSizeReached,
        ));
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
        out.push(Group::join_error(
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
                out.push(Group::join_error(
                    waiter,
                    "",
                    ErrorCode::GroupMaxSizeReached,
                ));
                return;
            }
            // KIP-394: hand out the id first; the member joins again with it.
            group
                .pending_members
                .insert(new_id.clone(), now + req.session_timeout_ms as i64);
            out.push(Group::join_error(
                waiter,
                &new_id,
                ErrorCode::MemberIdRequired,
            ));
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
        out.push(Group::join_error(w, &old_id, ErrorCode::FencedInstanceId));
    }
    if let Some(w) = member.sync_waiter.take() {
        out.push(err_for(w, ErrorCode::FencedInstanceId));
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
        out.push(Group::join_error(waiter, &req.member_id, code));
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
            out.push(Group::join_error(
                waiter,
                &req.member_id,
                ErrorCode::UnknownMemberId,
            ));
        }
    }
}
