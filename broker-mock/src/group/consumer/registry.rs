//! `ConsumerGroups`: every consumer group of a coordinator, and the
//! ConsumerGroupHeartbeat rules (validation, joining, fencing, leaving, the group
//! epoch, the target assignment, reconciliation, timers) as Kafka's group
//! coordinator applies them.

use std::collections::{BTreeMap, BTreeSet};

use baton_protocol::primitives::Uuid;
use baton_protocol::ErrorCode;

use super::assignor::{self, AssignorMember, ASSIGNORS};
use super::group::{metadata_hash, Catalog, ConsumerGroup};
use super::member::{
    Assignment, Current, Member, MemberState, Subscription, LEAVE_EPOCH, LEAVE_STATIC_EPOCH,
};
use super::reconcile::reconcile;
use super::regex::TopicRegex;
use crate::group::machine::GroupConfig;

/// INVALID_REGULAR_EXPRESSION (Kafka's error 130), which the protocol crate's
/// error enum does not name yet.
pub const INVALID_REGULAR_EXPRESSION: ErrorCode = ErrorCode::Unknown(130);

/// A ConsumerGroupHeartbeat, as the handler decodes it.
#[derive(Debug, Clone, Default)]
pub struct Heartbeat {
    /// The request version (v1 requires a client-chosen member id, KIP-1082).
    pub version: i16,
    /// The group.
    pub group_id: String,
    /// The member id (empty in a v0 join: the coordinator picks one).
    pub member_id: String,
    /// 0 to join, -1 to leave, -2 for a static member leaving to come back.
    pub member_epoch: i32,
    /// The static member's instance id.
    pub instance_id: Option<String>,
    /// The rack, if it changed.
    pub rack_id: Option<String>,
    /// The rebalance timeout, -1 if unchanged.
    pub rebalance_timeout_ms: i32,
    /// Subscribed names, if changed.
    pub topic_names: Option<Vec<String>>,
    /// Subscribed regex, if changed.
    pub topic_regex: Option<String>,
    /// The server assignor, if changed.
    pub server_assignor: Option<String>,
    /// Owned partitions, if changed.
    pub owned: Option<Vec<(Uuid, Vec<i32>)>>,
    /// The connection's client id.
    pub client_id: String,
    /// The connection's host.
    pub client_host: String,
}

/// The answer to a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatAnswer {
    /// The error, or `None`.
    pub error: ErrorCode,
    /// Why, for errors.
    pub message: Option<String>,
    /// The member id.
    pub member_id: Option<String>,
    /// The member epoch.
    pub member_epoch: i32,
    /// How often to heartbeat.
    pub heartbeat_interval_ms: i32,
    /// The partitions the member may own, when sent.
    pub assignment: Option<Assignment>,
}

impl HeartbeatAnswer {
    fn error(error: ErrorCode, message: impl Into<String>) -> Self {
        HeartbeatAnswer {
            error,
            message: Some(message.into()),
            member_id: None,
            member_epoch: 0,
            heartbeat_interval_ms: 0,
            assignment: None,
        }
    }
}

type Refusal = (ErrorCode, String);

fn refuse<T>(code: ErrorCode, msg: impl Into<String>) -> Result<T, Refusal> {
    Err((code, msg.into()))
}

/// A change to persist to `__consumer_offsets` (Kafka's consumer group records;
/// `None` values are tombstones), or one read back on replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerRecord {
    /// `ConsumerGroupMetadata`: the group epoch and metadata hash.
    Group {
        /// Group id.
        group: String,
        /// (epoch, metadata hash).
        value: Option<(i32, i64)>,
    },
    /// `ConsumerGroupMemberMetadata`: a member's subscription.
    Member {
        /// Group id.
        group: String,
        /// Member id.
        member: String,
        /// The subscription.
        value: Option<Subscription>,
    },
    /// `ConsumerGroupTargetAssignmentMetadata`: the assignment epoch.
    TargetEpoch {
        /// Group id.
        group: String,
        /// The epoch.
        value: Option<i32>,
    },
    /// `ConsumerGroupTargetAssignmentMember`: one member's target.
    TargetMember {
        /// Group id.
        group: String,
        /// Member id.
        member: String,
        /// The target partitions.
        value: Option<Assignment>,
    },
    /// `ConsumerGroupCurrentMemberAssignment`: a member's epochs and partitions.
    Current {
        /// Group id.
        group: String,
        /// Member id.
        member: String,
        /// The current assignment.
        value: Option<Current>,
    },
}

impl ConsumerRecord {
    /// The group the record belongs to.
    pub fn group(&self) -> &str {
        match self {
            ConsumerRecord::Group { group, .. }
            | ConsumerRecord::Member { group, .. }
            | ConsumerRecord::TargetEpoch { group, .. }
            | ConsumerRecord::TargetMember { group, .. }
            | ConsumerRecord::Current { group, .. } => group,
        }
    }
}

/// Every consumer group of a coordinator.
#[derive(Debug)]
pub struct ConsumerGroups {
    config: GroupConfig,
    groups: BTreeMap<String, ConsumerGroup>,
    /// Records waiting to be written, in order.
    records: Vec<ConsumerRecord>,
    /// Compiled regexes by pattern (bounded by the members using them).
    regexes: BTreeMap<String, TopicRegex>,
    nonce: u64,
    counter: u64,
}

impl ConsumerGroups {
    /// No groups; `nonce` makes coordinator-chosen member ids unique.
    pub fn new(config: GroupConfig, nonce: u64) -> Self {
        ConsumerGroups {
            config,
            groups: BTreeMap::new(),
            records: Vec::new(),
            regexes: BTreeMap::new(),
            nonce,
            counter: 0,
        }
    }

    /// The settings.
    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    /// A group.
    pub fn get(&self, group_id: &str) -> Option<&ConsumerGroup> {
        self.groups.get(group_id)
    }

    /// Every group, by id.
    pub fn iter(&self) -> impl Iterator<Item = &ConsumerGroup> {
        self.groups.values()
    }

    /// The number of groups.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// Whether there is no group.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The topics the members of `group_id` subscribe to among `catalog` (by name
    /// or regular expression), or `None` without such a group (OffsetDelete's
    /// GROUP_SUBSCRIBED_TO_TOPIC check).
    pub fn subscribed_topic_names(
        &self,
        group_id: &str,
        catalog: &Catalog,
    ) -> Option<BTreeSet<String>> {
        let g = self.groups.get(group_id)?;
        let regexes = &self.regexes;
        let matcher = |re: &str, name: &str| {
            !name.starts_with("__") && regexes.get(re).is_some_and(|r| r.is_match(name))
        };
        Some(g.subscribed_topics(catalog, &matcher).into_keys().collect())
    }

    /// Records produced since the last call, to append to the log in order.
    pub fn take_records(&mut self) -> Vec<ConsumerRecord> {
        std::mem::take(&mut self.records)
    }

    /// Forgets the groups `unowned` selects (their partition moved away).
    pub fn remove_where(&mut self, unowned: impl Fn(&str) -> bool) {
        self.groups.retain(|id, _| !unowned(id));
        self.gc_regexes();
    }

    /// Deletes an empty group (DeleteGroups): NON_EMPTY_GROUP while it has
    /// members. Returns whether it existed. Its tombstones are queued.
    pub fn delete(&mut self, group_id: &str) -> Result<bool, ErrorCode> {
        let Some(g) = self.groups.get(group_id) else {
            return Ok(false);
        };
        if !g.members.is_empty() {
            return Err(ErrorCode::NonEmptyGroup);
        }
        self.groups.remove(group_id);
        self.records.push(ConsumerRecord::TargetEpoch {
            group: group_id.to_owned(),
            value: None,
        });
        self.records.push(ConsumerRecord::Group {
            group: group_id.to_owned(),
            value: None,
        });
        Ok(true)
    }

    fn regex(&mut self, pattern: &str) -> Result<&TopicRegex, Refusal> {
        if !self.regexes.contains_key(pattern) {
            let r = TopicRegex::new(pattern).map_err(|e| {
                (
                    INVALID_REGULAR_EXPRESSION,
                    format!(
                        "SubscribedTopicRegex `{pattern}` is not a valid regular expression: {e}"
                    ),
                )
            })?;
            self.regexes.insert(pattern.to_owned(), r);
        }
        Ok(&self.regexes[pattern])
    }

    fn gc_regexes(&mut self) {
        let used: BTreeSet<&String> = self
            .groups
            .values()
            .flat_map(|g| g.members.values())
            .filter_map(|m| m.sub.topic_regex.as_ref())
            .collect();
        self.regexes.retain(|p, _| used.contains(p));
    }

    /// Kafka's request checks (`throwIfConsumerGroupHeartbeatRequestIsInvalid`).
    fn validate(&mut self, hb: &Heartbeat) -> Result<(), Refusal> {
        use ErrorCode::InvalidRequest as Bad;
        if hb.group_id.is_empty() {
            return refuse(Bad, "GroupId can't be empty.");
        }
        if hb.instance_id.as_deref() == Some("") {
            return refuse(Bad, "InstanceId can't be empty.");
        }
        if hb.rack_id.as_deref() == Some("") {
            return refuse(Bad, "RackId can't be empty.");
        }
        if (hb.version >= 1 || hb.member_epoch != 0) && hb.member_id.is_empty() {
            return refuse(Bad, "MemberId can't be empty.");
        }
        if hb.member_id.len() > MAX_ID_LEN {
            return refuse(Bad, "MemberId is too long.");
        }
        match hb.member_epoch {
            0 => {
                if hb.rebalance_timeout_ms == -1 {
                    return refuse(Bad, "RebalanceTimeoutMs must be provided in first request.");
                }
                if !hb.owned.as_ref().is_some_and(|o| o.is_empty()) {
                    return refuse(Bad, "TopicPartitions must be empty when (re-)joining.");
                }
                if hb.topic_names.is_none() && hb.topic_regex.is_none() {
                    return refuse(
                        Bad,
                        "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
                    );
                }
            }
            LEAVE_EPOCH => {}
            LEAVE_STATIC_EPOCH if hb.instance_id.is_none() => {
                return refuse(Bad, "InstanceId can't be null.");
            }
            LEAVE_STATIC_EPOCH => {}
            e if e < LEAVE_STATIC_EPOCH => return refuse(Bad, "MemberEpoch is invalid."),
            _ => {}
        }
        // An empty regex (what librdkafka sends without one) or name list
        // subscribes to nothing, as Kafka accepts it.
        if let Some(re) = hb.topic_regex.as_deref().filter(|r| !r.is_empty()) {
            self.regex(re)?;
        }
        if let Some(a) = &hb.server_assignor {
            if !ASSIGNORS.contains(&a.as_str()) {
                return refuse(
                    ErrorCode::UnsupportedAssignor,
                    format!(
                        "ServerAssignor {a} is not supported. Supported assignors: uniform, range."
                    ),
                );
            }
        }
        Ok(())
    }

    /// Handles a ConsumerGroupHeartbeat at `now`. `may_create` says whether the
    /// group may be created (the coordinator's group limit and the classic groups
    /// decide); `catalog` is the topics as the coordinator sees them now.
    pub fn heartbeat(
        &mut self,
        hb: &Heartbeat,
        catalog: &Catalog,
        may_create: Result<(), (ErrorCode, String)>,
        now: i64,
    ) -> HeartbeatAnswer {
        let answer = self.validate(hb).and_then(|()| match hb.member_epoch {
            LEAVE_EPOCH | LEAVE_STATIC_EPOCH => self.leave(hb, now),
            _ => self.join_or_heartbeat(hb, catalog, may_create, now),
        });
        let answer = answer.unwrap_or_else(|(code, msg)| HeartbeatAnswer::error(code, msg));
        if let Some(g) = self.groups.get(&hb.group_id) {
            g.check();
        }
        self.gc_regexes();
        answer
    }

    fn next_member_id(&mut self) -> String {
        self.counter += 1;
        let id = Uuid::from_u64_pair(self.nonce, self.counter);
        crate::topics::uuid_to_hex(&id)
    }

    fn leave(&mut self, hb: &Heartbeat, now: i64) -> Result<HeartbeatAnswer, Refusal> {
        let Some(g) = self.groups.get_mut(&hb.group_id) else {
            return refuse(
                ErrorCode::GroupIdNotFound,
                format!("Group {} not found.", hb.group_id),
            );
        };
        let member_id = match &hb.instance_id {
            None => {
                if !g.members.contains_key(&hb.member_id) {
                    return refuse(
                        ErrorCode::UnknownMemberId,
                        format!(
                            "Member {} is not a member of group {}.",
                            hb.member_id, hb.group_id
                        ),
                    );
                }
                hb.member_id.clone()
            }
            Some(instance) => {
                let Some(id) = g.static_members.get(instance).cloned() else {
                    return refuse(
                        ErrorCode::UnknownMemberId,
                        format!("Instance id {instance} is unknown."),
                    );
                };
                if id != hb.member_id {
                    return refuse(
                        ErrorCode::FencedInstanceId,
                        format!("Static member {} with instance id {instance} was fenced by member {id}.", hb.member_id),
                    );
                }
                id
            }
        };
        if hb.member_epoch == LEAVE_STATIC_EPOCH {
            // The static member keeps its assignment for when it returns within its
            // session timeout; nothing is rebalanced.
            let session = i64::from(self.config.consumer_session_timeout_ms);
            let g = self
                .groups
                .get_mut(&hb.group_id)
                .expect("group checked above");
            let mut current = g.members[&member_id].current.clone();
            current.epoch = LEAVE_STATIC_EPOCH;
            current.pending_revocation = Assignment::new();
            g.set_current(&member_id, current.clone());
            if let Some(m) = g.members.get_mut(&member_id) {
                m.rebalance_deadline = None;
                m.session_deadline = now + session;
            }
            self.records.push(ConsumerRecord::Current {
                group: hb.group_id.clone(),
                member: member_id.clone(),
                value: Some(current),
            });
        } else {
            self.fence(&hb.group_id, &member_id);
        }
        Ok(HeartbeatAnswer {
            error: ErrorCode::None,
            message: None,
            member_id: Some(member_id),
            member_epoch: hb.member_epoch,
            heartbeat_interval_ms: 0,
            assignment: None,
        })
    }

    /// Removes a member (it left, or was fenced by a timeout) and bumps the group
    /// epoch, with its tombstones.
    fn fence(&mut self, group_id: &str, member_id: &str) {
        let Some(g) = self.groups.get_mut(group_id) else {
            return;
        };
        if g.remove_member(member_id).is_none() {
            return;
        }
        g.epoch += 1;
        let (epoch, hash) = (g.epoch, g.metadata_hash);
        for r in [
            ConsumerRecord::Current {
                group: group_id.to_owned(),
                member: member_id.to_owned(),
                value: None,
            },
            ConsumerRecord::TargetMember {
                group: group_id.to_owned(),
                member: member_id.to_owned(),
                value: None,
            },
            ConsumerRecord::Member {
                group: group_id.to_owned(),
                member: member_id.to_owned(),
                value: None,
            },
            ConsumerRecord::Group {
                group: group_id.to_owned(),
                value: Some((epoch, hash)),
            },
        ] {
            self.records.push(r);
        }
    }

    fn join_or_heartbeat(
        &mut self,
        hb: &Heartbeat,
        catalog: &Catalog,
        may_create: Result<(), (ErrorCode, String)>,
        now: i64,
    ) -> Result<HeartbeatAnswer, Refusal> {
        let joining = hb.member_epoch == 0;
        if !self.groups.contains_key(&hb.group_id) {
            if !joining {
                return refuse(
                    ErrorCode::UnknownMemberId,
                    format!("Consumer group {} not found.", hb.group_id),
                );
            }
            may_create?;
            self.groups
                .insert(hb.group_id.clone(), ConsumerGroup::new(&hb.group_id));
        }
        let max_size = self.config.consumer_max_size;
        let session = i64::from(self.config.consumer_session_timeout_ms);
        let interval = self.config.consumer_heartbeat_interval_ms;
        let member_id = if hb.member_id.is_empty() {
            self.next_member_id()
        } else {
            hb.member_id.clone()
        };
        let g = self.groups.get_mut(&hb.group_id).expect("created above");
        let owned: Option<Assignment> = hb
            .owned
            .as_ref()
            .map(|o| super::member::from_pairs(o.iter().cloned()));

        // Find (or create) the member, as Kafka does for dynamic and static ones.
        let mut records = Vec::new();
        let existing: Option<Member> = match &hb.instance_id {
            None => match g.members.get(&member_id) {
                Some(m) => {
                    if !joining {
                        check_epoch(m, hb.member_epoch, owned.as_ref())?;
                    }
                    Some(m.clone())
                }
                None if joining => None,
                None => {
                    return refuse(
                        ErrorCode::UnknownMemberId,
                        format!(
                            "Member {member_id} is not a member of group {}.",
                            hb.group_id
                        ),
                    )
                }
            },
            Some(instance) => match g.static_members.get(instance).cloned() {
                None if joining => None,
                None => {
                    return refuse(
                        ErrorCode::UnknownMemberId,
                        format!("Instance id {instance} is unknown."),
                    )
                }
                Some(old_id) if joining => {
                    let old = g.members[&old_id].clone();
                    if old.current.epoch != LEAVE_STATIC_EPOCH {
                        return refuse(
                            ErrorCode::UnreleasedInstanceId,
                            format!("Static member {old_id} with instance id {instance} is not released yet."),
                        );
                    }
                    // The new member takes the old one's place and assignment.
                    let target = g.target.get(&old_id).cloned();
                    g.remove_member(&old_id);
                    records.push(ConsumerRecord::Current {
                        group: g.id.clone(),
                        member: old_id.clone(),
                        value: None,
                    });
                    records.push(ConsumerRecord::TargetMember {
                        group: g.id.clone(),
                        member: old_id.clone(),
                        value: None,
                    });
                    records.push(ConsumerRecord::Member {
                        group: g.id.clone(),
                        member: old_id.clone(),
                        value: None,
                    });
                    let mut m = old;
                    m.id = member_id.clone();
                    m.current.epoch = 0;
                    m.current.previous_epoch = 0;
                    m.current.state = MemberState::Stable;
                    g.insert_member(m.clone());
                    if let Some(t) = target {
                        g.target.insert(member_id.clone(), t.clone());
                        records.push(ConsumerRecord::TargetMember {
                            group: g.id.clone(),
                            member: member_id.clone(),
                            value: Some(t),
                        });
                    }
                    records.push(ConsumerRecord::Current {
                        group: g.id.clone(),
                        member: member_id.clone(),
                        value: Some(m.current.clone()),
                    });
                    Some(m)
                }
                Some(old_id) => {
                    if old_id != member_id {
                        return refuse(
                            ErrorCode::FencedInstanceId,
                            format!("Static member {member_id} with instance id {instance} was fenced by member {old_id}."),
                        );
                    }
                    let m = &g.members[&old_id];
                    check_epoch(m, hb.member_epoch, owned.as_ref())?;
                    Some(m.clone())
                }
            },
        };
        if existing.is_none() && g.members.len() >= max_size {
            return refuse(
                ErrorCode::GroupMaxSizeReached,
                format!(
                    "The consumer group has reached its maximum capacity of {max_size} members."
                ),
            );
        }
        let is_new = existing.is_none();
        let mut member = existing.unwrap_or_else(|| Member {
            id: member_id.clone(),
            sub: Subscription {
                rebalance_timeout_ms: hb.rebalance_timeout_ms,
                ..Default::default()
            },
            current: Current::default(),
            session_deadline: now + session,
            rebalance_deadline: None,
        });

        // Apply what the heartbeat changed.
        let old_sub = member.sub.clone();
        let sub = &mut member.sub;
        if hb.instance_id.is_some() {
            sub.instance_id = hb.instance_id.clone();
        }
        if hb.rack_id.is_some() {
            sub.rack_id = hb.rack_id.clone();
        }
        if hb.rebalance_timeout_ms != -1 {
            sub.rebalance_timeout_ms = hb.rebalance_timeout_ms;
        }
        if let Some(names) = &hb.topic_names {
            let mut names = names.clone();
            names.sort();
            names.dedup();
            sub.topic_names = names;
        }
        if let Some(re) = &hb.topic_regex {
            sub.topic_regex = (!re.is_empty()).then(|| re.clone());
        }
        if hb.server_assignor.is_some() {
            sub.server_assignor = hb.server_assignor.clone();
        }
        sub.client_id = hb.client_id.clone();
        sub.client_host = hb.client_host.clone();
        let sub_changed = is_new || *sub != old_sub;
        let bump = is_new
            || sub.topic_names != old_sub.topic_names
            || sub.topic_regex != old_sub.topic_regex
            || sub.server_assignor != old_sub.server_assignor
            || sub.rack_id != old_sub.rack_id;
        member.session_deadline = now + session;
        if is_new {
            g.insert_member(member.clone());
        } else if let Some(m) = g.members.get_mut(&member.id) {
            m.sub = member.sub.clone();
            m.session_deadline = member.session_deadline;
        }
        if sub_changed {
            records.push(ConsumerRecord::Member {
                group: g.id.clone(),
                member: member.id.clone(),
                value: Some(member.sub.clone()),
            });
        }
        self.records.extend(records);

        // The group epoch moves on membership, subscription and topic changes.
        let regexes = &self.regexes;
        let matcher = |re: &str, name: &str| {
            !name.starts_with("__") && regexes.get(re).is_some_and(|r| r.is_match(name))
        };
        let g = self.groups.get_mut(&hb.group_id).expect("created above");
        let topics = g.subscribed_topics(catalog, &matcher);
        let hash = metadata_hash(&topics);
        if bump || hash != g.metadata_hash {
            g.epoch += 1;
            g.metadata_hash = hash;
            self.records.push(ConsumerRecord::Group {
                group: g.id.clone(),
                value: Some((g.epoch, hash)),
            });
        }
        if g.epoch > g.assignment_epoch {
            let records = update_target(g, &topics, catalog, &matcher);
            self.records.extend(records);
        }

        // Reconcile the member towards its target.
        let g = self.groups.get_mut(&hb.group_id).expect("created above");
        let before = g.members[&member_id].current.clone();
        let empty = Assignment::new();
        let target = g.target.get(&member_id).unwrap_or(&empty);
        let after = reconcile(
            &before,
            target,
            g.assignment_epoch,
            owned.as_ref(),
            |t, p| g.owned_by_other(&member_id, t, p),
        );
        if after != before {
            g.set_current(&member_id, after.clone());
            self.records.push(ConsumerRecord::Current {
                group: g.id.clone(),
                member: member_id.clone(),
                value: Some(after.clone()),
            });
        }
        let m = g
            .members
            .get_mut(&member_id)
            .expect("member inserted above");
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
        let full = joining
            || (hb.rebalance_timeout_ms != -1
                && (hb.topic_names.is_some() || hb.topic_regex.is_some())
                && hb.owned.is_some());
        let assignment =
            (full || after.assigned != before.assigned).then(|| after.assigned.clone());
        Ok(HeartbeatAnswer {
            error: ErrorCode::None,
            message: None,
            member_id: Some(member_id),
            member_epoch: after.epoch,
            heartbeat_interval_ms: interval,
            assignment,
        })
    }

    /// Runs due timers at `now`: members past their session timeout, and members
    /// that did not revoke within their rebalance timeout, are fenced.
    pub fn tick(&mut self, now: i64) {
        let mut due = Vec::new();
        for g in self.groups.values() {
            for m in g.members.values() {
                let rebalance_due = m.rebalance_deadline.is_some_and(|(at, epoch)| {
                    at <= now
                        && m.current.epoch == epoch
                        && m.current.state == MemberState::UnrevokedPartitions
                });
                if m.session_deadline <= now || rebalance_due {
                    due.push((g.id.clone(), m.id.clone(), rebalance_due));
                }
            }
        }
        for (g, m, rebalance) in due {
            tracing::info!(group = %g, member = %m, rebalance_timeout = rebalance, "consumer group member fenced");
            self.fence(&g, &m);
        }
        self.gc_regexes();
    }

    /// The earliest timer.
    pub fn next_deadline(&self) -> Option<i64> {
        self.groups
            .values()
            .flat_map(|g| g.members.values())
            .flat_map(|m| [Some(m.session_deadline), m.rebalance_deadline.map(|d| d.0)])
            .flatten()
            .min()
    }

    /// Applies a record read back from the log (replay on gaining a partition).
    /// Members get a fresh session from `now`.
    pub fn replay(&mut self, rec: ConsumerRecord, now: i64) {
        let session = i64::from(self.config.consumer_session_timeout_ms);
        let group = rec.group().to_owned();
        if let ConsumerRecord::Group { value: None, .. } = rec {
            self.groups.remove(&group);
            return;
        }
        let g = self
            .groups
            .entry(group.clone())
            .or_insert_with(|| ConsumerGroup::new(&group));
        match rec {
            ConsumerRecord::Group { value, .. } => {
                if let Some((epoch, hash)) = value {
                    g.epoch = epoch;
                    g.metadata_hash = hash;
                }
            }
            ConsumerRecord::Member { member, value, .. } => match value {
                Some(sub) => match g.members.get_mut(&member) {
                    Some(m) => {
                        if m.sub.instance_id != sub.instance_id {
                            if let Some(old) = &m.sub.instance_id {
                                g.static_members.remove(old);
                            }
                            if let Some(new) = &sub.instance_id {
                                g.static_members.insert(new.clone(), member.clone());
                            }
                        }
                        if let Some(m) = g.members.get_mut(&member) {
                            m.sub = sub;
                        }
                    }
                    None => g.insert_member(Member {
                        id: member,
                        sub,
                        current: Current::default(),
                        session_deadline: now + session,
                        rebalance_deadline: None,
                    }),
                },
                None => {
                    g.remove_member(&member);
                }
            },
            ConsumerRecord::TargetEpoch { value, .. } => {
                if let Some(e) = value {
                    g.assignment_epoch = e;
                }
            }
            ConsumerRecord::TargetMember { member, value, .. } => match value {
                Some(a) => {
                    g.target.insert(member, a);
                }
                None => {
                    g.target.remove(&member);
                }
            },
            ConsumerRecord::Current { member, value, .. } => {
                if !g.members.contains_key(&member) {
                    if value.is_none() {
                        return;
                    }
                    g.insert_member(Member {
                        id: member.clone(),
                        sub: Subscription::default(),
                        current: Current::default(),
                        session_deadline: now + session,
                        rebalance_deadline: None,
                    });
                }
                g.set_current(&member, value.unwrap_or_default());
            }
        }
    }

    /// After a replay: members waiting to revoke get their rebalance timeout
    /// from `now`, and the regexes members use are compiled.
    pub fn finish_replay(&mut self, now: i64) {
        let mut patterns = Vec::new();
        for g in self.groups.values_mut() {
            g.assignment_epoch = g.assignment_epoch.min(g.epoch);
            for m in g.members.values_mut() {
                if m.current.state == MemberState::UnrevokedPartitions {
                    m.rebalance_deadline = Some((
                        now + i64::from(m.sub.rebalance_timeout_ms.max(0)),
                        m.current.epoch,
                    ));
                }
                if let Some(re) = &m.sub.topic_regex {
                    patterns.push(re.clone());
                }
            }
            g.check();
        }
        for p in patterns {
            let _ = self.regex(&p);
        }
    }
}

/// Longest member id accepted (Kafka's are 22 characters; clients choose their own
/// from v1, so this bounds what one member costs).
pub const MAX_ID_LEN: usize = 255;

/// Kafka's `throwIfMemberEpochIsInvalid`: a newer epoch than the coordinator's is
/// fenced; an older one only passes when it is the previous epoch and the member
/// owns no more than its current assignment (the answer with the bump was lost).
fn check_epoch(m: &Member, epoch: i32, owned: Option<&Assignment>) -> Result<(), Refusal> {
    let fenced = || {
        refuse(
            ErrorCode::FencedMemberEpoch,
            format!(
                "The consumer group member has a {} member epoch ({epoch}) than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin.",
                if epoch > m.current.epoch { "greater" } else { "smaller" },
                m.current.epoch
            ),
        )
    };
    if epoch > m.current.epoch {
        return fenced();
    }
    if epoch < m.current.epoch {
        let subset = owned.is_some_and(|o| {
            o.iter()
                .all(|(t, ps)| m.current.assigned.get(t).is_some_and(|a| ps.is_subset(a)))
        });
        if epoch != m.current.previous_epoch || !subset {
            return fenced();
        }
    }
    Ok(())
}

/// Computes a new target assignment at the group epoch with the group's assignor
/// (the one most members ask for, else `uniform`), returning the records of the
/// members whose target changed and of the new assignment epoch.
fn update_target(
    g: &mut ConsumerGroup,
    _topics: &Catalog,
    catalog: &Catalog,
    matcher: &dyn Fn(&str, &str) -> bool,
) -> Vec<ConsumerRecord> {
    let name = g.assignor_name();
    let mut partitions: BTreeMap<Uuid, i32> = BTreeMap::new();
    let mut input: BTreeMap<String, AssignorMember> = BTreeMap::new();
    for (id, m) in &g.members {
        let mut topics = BTreeSet::new();
        for n in &m.sub.topic_names {
            if let Some((tid, parts)) = catalog.get(n) {
                topics.insert(*tid);
                partitions.insert(*tid, *parts);
            }
        }
        if let Some(re) = &m.sub.topic_regex {
            for (n, (tid, parts)) in catalog {
                if matcher(re, n) {
                    topics.insert(*tid);
                    partitions.insert(*tid, *parts);
                }
            }
        }
        input.insert(
            id.clone(),
            AssignorMember {
                topics,
                previous: g.target.get(id).cloned().unwrap_or_default(),
            },
        );
    }
    let out = assignor::assign(&name, &input, &partitions);
    let mut records = Vec::new();
    for (id, a) in out {
        if g.target.get(&id) != Some(&a) {
            records.push(ConsumerRecord::TargetMember {
                group: g.id.clone(),
                member: id.clone(),
                value: Some(a.clone()),
            });
            g.target.insert(id, a);
        }
    }
    g.assignment_epoch = g.epoch;
    records.push(ConsumerRecord::TargetEpoch {
        group: g.id.clone(),
        value: Some(g.epoch),
    });
    records
}
