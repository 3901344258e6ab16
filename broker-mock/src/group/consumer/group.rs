//! One consumer group's state (KIP-848): group epoch, target assignment and its
//! epoch, members, and which member owns each partition.

use std::collections::{BTreeMap, HashMap};

use baton_protocol::primitives::Uuid;

use super::member::{Assignment, Current, Member, MemberState};

/// Topics the coordinator knows, by name: id and partition count.
pub type Catalog = BTreeMap<String, (Uuid, i32)>;

/// The state of a consumer group, as ConsumerGroupDescribe and ListGroups name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerGroupState {
    /// No members.
    Empty,
    /// The group epoch is ahead of the target assignment.
    Assigning,
    /// Some member is not yet at the target assignment.
    Reconciling,
    /// Every member is at the target assignment.
    Stable,
}

impl ConsumerGroupState {
    /// Kafka's name of the state.
    pub fn name(self) -> &'static str {
        match self {
            ConsumerGroupState::Empty => "Empty",
            ConsumerGroupState::Assigning => "Assigning",
            ConsumerGroupState::Reconciling => "Reconciling",
            ConsumerGroupState::Stable => "Stable",
        }
    }
}

/// A consumer group.
///
/// Invariants (checked by `check` in debug builds): `assignment_epoch <= epoch`;
/// `static_members` maps exactly the members with an instance id; `owners` maps
/// exactly the partitions in members' assigned and pending-revocation sets, each
/// to the one member holding it.
#[derive(Debug, Clone)]
pub struct ConsumerGroup {
    /// The group id.
    pub id: String,
    /// The group epoch: bumped whenever membership, subscriptions or the
    /// subscribed topics' metadata change.
    pub epoch: i32,
    /// The epoch of the target assignment.
    pub assignment_epoch: i32,
    /// The hash of the subscribed topics' metadata at the last epoch bump (Kafka
    /// 4.1's `MetadataHash`, KIP-1101); a different hash bumps the epoch.
    pub metadata_hash: i64,
    /// Members by id.
    pub members: BTreeMap<String, Member>,
    /// Static members: instance id → member id.
    pub static_members: BTreeMap<String, String>,
    /// The target assignment of every member.
    pub target: BTreeMap<String, Assignment>,
    /// Which member owns each partition (assigned or pending revocation).
    pub owners: HashMap<(Uuid, i32), String>,
}

impl ConsumerGroup {
    /// An empty group at epoch 0.
    pub fn new(id: &str) -> Self {
        ConsumerGroup {
            id: id.to_owned(),
            epoch: 0,
            assignment_epoch: 0,
            metadata_hash: 0,
            members: BTreeMap::new(),
            static_members: BTreeMap::new(),
            target: BTreeMap::new(),
            owners: HashMap::new(),
        }
    }

    /// Its state.
    pub fn state(&self) -> ConsumerGroupState {
        if self.members.is_empty() {
            ConsumerGroupState::Empty
        } else if self.epoch > self.assignment_epoch {
            ConsumerGroupState::Assigning
        } else if self.members.values().all(|m| {
            m.current.epoch == self.assignment_epoch && m.current.state == MemberState::Stable
        }) {
            ConsumerGroupState::Stable
        } else {
            ConsumerGroupState::Reconciling
        }
    }

    /// The assignor the group uses: the one most members ask for (ties by
    /// name), else `uniform`.
    pub fn assignor_name(&self) -> String {
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = &m.sub.server_assignor {
                *votes.entry(a.as_str()).or_default() += 1;
            }
        }
        votes
            .iter()
            .max_by_key(|(n, c)| (**c, std::cmp::Reverse(**n)))
            .map(|(n, _)| (*n).to_owned())
            .unwrap_or_else(|| super::assignor::DEFAULT_ASSIGNOR.to_owned())
    }

    /// Replaces a member's current assignment, keeping `owners` in step.
    pub fn set_current(&mut self, member_id: &str, current: Current) {
        let Some(m) = self.members.get_mut(member_id) else {
            return;
        };
        release(&mut self.owners, member_id, &m.current);
        for (t, ps) in current.assigned.iter().chain(&current.pending_revocation) {
            for &p in ps {
                self.owners.insert((*t, p), member_id.to_owned());
            }
        }
        m.current = current;
    }

    /// Removes a member and everything it owned; returns it.
    pub fn remove_member(&mut self, member_id: &str) -> Option<Member> {
        let m = self.members.remove(member_id)?;
        release(&mut self.owners, member_id, &m.current);
        if let Some(instance) = &m.sub.instance_id {
            if self.static_members.get(instance).map(String::as_str) == Some(member_id) {
                self.static_members.remove(instance);
            }
        }
        self.target.remove(member_id);
        Some(m)
    }

    /// Adds (or replaces) a member, indexing its instance id.
    pub fn insert_member(&mut self, member: Member) {
        if let Some(instance) = &member.sub.instance_id {
            self.static_members
                .insert(instance.clone(), member.id.clone());
        }
        let id = member.id.clone();
        let current = member.current.clone();
        self.members.insert(id.clone(), member);
        // Index its partitions.
        if let Some(m) = self.members.get_mut(&id) {
            m.current = Current::default();
        }
        self.set_current(&id, current);
    }

    /// Whether a member other than `member_id` owns `(topic, partition)`.
    pub fn owned_by_other(&self, member_id: &str, topic: &Uuid, partition: i32) -> bool {
        self.owners
            .get(&(*topic, partition))
            .is_some_and(|o| o != member_id)
    }

    /// The topics the members subscribe to (names, plus what their regexes match
    /// among `catalog`), with their ids and partition counts, as far as they exist.
    pub fn subscribed_topics(
        &self,
        catalog: &Catalog,
        regex_match: &dyn Fn(&str, &str) -> bool,
    ) -> Catalog {
        let mut out = Catalog::new();
        for m in self.members.values() {
            for name in &m.sub.topic_names {
                if let Some(v) = catalog.get(name) {
                    out.insert(name.clone(), *v);
                }
            }
            if let Some(re) = &m.sub.topic_regex {
                for (name, v) in catalog {
                    if regex_match(re, name) {
                        out.insert(name.clone(), *v);
                    }
                }
            }
        }
        out
    }

    /// Asserts the invariants (debug builds).
    pub fn check(&self) {
        if !cfg!(debug_assertions) {
            return;
        }
        assert!(self.assignment_epoch <= self.epoch, "{}", self.id);
        for (instance, id) in &self.static_members {
            assert_eq!(
                self.members
                    .get(id)
                    .and_then(|m| m.sub.instance_id.as_ref()),
                Some(instance)
            );
        }
        let mut n = 0;
        for (id, m) in &self.members {
            for (t, ps) in m
                .current
                .assigned
                .iter()
                .chain(&m.current.pending_revocation)
            {
                for p in ps {
                    n += 1;
                    assert_eq!(self.owners.get(&(*t, *p)), Some(id), "owner of {p}");
                }
            }
        }
        assert_eq!(n, self.owners.len());
    }
}

fn release(owners: &mut HashMap<(Uuid, i32), String>, member_id: &str, c: &Current) {
    for (t, ps) in c.assigned.iter().chain(&c.pending_revocation) {
        for &p in ps {
            if owners.get(&(*t, p)).map(String::as_str) == Some(member_id) {
                owners.remove(&(*t, p));
            }
        }
    }
}

/// A stable hash (FNV-1a, 64 bits) of the subscribed topics' metadata: names, ids
/// and partition counts in name order. The same on every node, so a coordinator
/// that replays the group sees no change unless the topics changed.
pub fn metadata_hash(topics: &Catalog) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for (name, (id, partitions)) in topics {
        eat(&(name.len() as u32).to_be_bytes());
        eat(name.as_bytes());
        eat(&id.0);
        eat(&partitions.to_be_bytes());
    }
    h as i64
}
