//! One member of a consumer group (KIP-848): what it subscribes to, its epochs,
//! and the partitions it owns or must give back.

use std::collections::{BTreeMap, BTreeSet};

use baton_protocol::primitives::Uuid;
use bytes::Bytes;

/// Partitions by topic id.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// The member epoch a static member leaves with (it will rejoin).
pub const LEAVE_STATIC_EPOCH: i32 = -2;
/// The member epoch of a member leaving for good.
pub const LEAVE_EPOCH: i32 = -1;

/// Where a member is in its reconciliation (Kafka's `MemberState`, with its
/// record codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// At the target assignment of its epoch.
    Stable,
    /// Must revoke partitions before it can move to the next epoch.
    UnrevokedPartitions,
    /// At the target epoch, waiting for partitions other members still own.
    UnreleasedPartitions,
}

impl MemberState {
    /// The code stored in `ConsumerGroupCurrentMemberAssignmentValue.State`.
    pub fn code(self) -> i8 {
        match self {
            MemberState::Stable => 0,
            MemberState::UnrevokedPartitions => 1,
            MemberState::UnreleasedPartitions => 2,
        }
    }

    /// The state of a stored code (unknown codes read as `Stable`, which the next
    /// heartbeat reconciles anyway).
    pub fn from_code(code: i8) -> MemberState {
        match code {
            1 => MemberState::UnrevokedPartitions,
            2 => MemberState::UnreleasedPartitions,
            _ => MemberState::Stable,
        }
    }

    /// The name ConsumerGroupDescribe does not show but logs do.
    pub fn name(self) -> &'static str {
        match self {
            MemberState::Stable => "stable",
            MemberState::UnrevokedPartitions => "unrevoked_partitions",
            MemberState::UnreleasedPartitions => "unreleased_partitions",
        }
    }
}

/// What a member asked for (persisted as `ConsumerGroupMemberMetadataValue`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Subscription {
    /// `group.instance.id` of a static member.
    pub instance_id: Option<String>,
    /// `client.rack`.
    pub rack_id: Option<String>,
    /// The client id of its connection.
    pub client_id: String,
    /// The host it connects from.
    pub client_host: String,
    /// Subscribed topic names, sorted.
    pub topic_names: Vec<String>,
    /// The subscribed regular expression (v1).
    pub topic_regex: Option<String>,
    /// How long it may take to revoke partitions.
    pub rebalance_timeout_ms: i32,
    /// The server-side assignor it asked for.
    pub server_assignor: Option<String>,
    /// Set for a member of the classic protocol (JoinGroup, SyncGroup,
    /// Heartbeat) in this consumer group: what it joined with.
    pub classic: Option<ClassicMetadata>,
}

/// What a classic-protocol member of a consumer group joined with (Kafka's
/// `ClassicMemberMetadata`, persisted with its subscription).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClassicMetadata {
    /// Its session timeout (classic members keep their own).
    pub session_timeout_ms: i32,
    /// Its supported protocols (assignor names) with their metadata, in
    /// preference order.
    pub protocols: Vec<(String, Bytes)>,
}

impl Subscription {
    /// Whether the member speaks the classic protocol.
    pub fn is_classic(&self) -> bool {
        self.classic.is_some()
    }
}

/// A member's current assignment and epochs (persisted as
/// `ConsumerGroupCurrentMemberAssignmentValue`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Current {
    /// The epoch the member must send.
    pub epoch: i32,
    /// The epoch before the last bump (a member whose answer was lost may still
    /// send it).
    pub previous_epoch: i32,
    /// Reconciliation state.
    pub state: MemberState,
    /// Partitions the member owns (may use).
    pub assigned: Assignment,
    /// Partitions it must revoke.
    pub pending_revocation: Assignment,
}

impl Default for Current {
    fn default() -> Self {
        Current {
            epoch: 0,
            previous_epoch: 0,
            state: MemberState::Stable,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
        }
    }
}

/// A member of a consumer group.
#[derive(Debug, Clone)]
pub struct Member {
    /// Its id (chosen by the client from v1, KIP-1082; by the coordinator in v0).
    pub id: String,
    /// What it subscribes to.
    pub sub: Subscription,
    /// Its epochs and partitions.
    pub current: Current,
    /// When its session ends unless it heartbeats (not persisted: a new
    /// coordinator starts a fresh session).
    pub session_deadline: i64,
    /// While it must revoke partitions: when it is fenced unless it has, and the
    /// epoch that deadline belongs to.
    pub rebalance_deadline: Option<(i64, i32)>,
}

/// The number of partitions in `a`.
pub fn count(a: &Assignment) -> usize {
    a.values().map(BTreeSet::len).sum()
}

/// Whether `a` holds `(topic, partition)`.
pub fn holds(a: &Assignment, topic: &Uuid, partition: i32) -> bool {
    a.get(topic).is_some_and(|s| s.contains(&partition))
}

/// An assignment from `(topic, partitions)` pairs, dropping empty entries.
pub fn from_pairs(pairs: impl IntoIterator<Item = (Uuid, Vec<i32>)>) -> Assignment {
    let mut a = Assignment::new();
    for (t, ps) in pairs {
        if !ps.is_empty() {
            a.entry(t).or_default().extend(ps);
        }
    }
    a
}
