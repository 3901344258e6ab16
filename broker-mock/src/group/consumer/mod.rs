//! The consumer group protocol of KIP-848 (ConsumerGroupHeartbeat), as a state
//! machine without I/O: time and the topics are passed in, and every change comes
//! out as Kafka's `__consumer_offsets` records for the coordinator to write.
//!
//! The rules follow Apache Kafka's group coordinator (`GroupMetadataManager`,
//! `CurrentAssignmentBuilder`):
//!
//! - Members join with member epoch 0 (v1: with an id they chose, KIP-1082; v0:
//!   the coordinator picks it) and then heartbeat with the epoch they were given.
//!   A heartbeat newer than the member's epoch, or older than it unless it is the
//!   previous epoch with owned partitions inside the current assignment, is
//!   FENCED_MEMBER_EPOCH.
//! - The group epoch moves when a member joins or leaves, when a subscription
//!   (names, regex, assignor, rack) changes, and when the subscribed topics'
//!   metadata changes (topics created or deleted, partitions added). A group
//!   epoch ahead of the target assignment epoch computes a new target with the
//!   server-side assignor (`uniform` by default, or `range`).
//! - Each member reconciles towards its target ([`reconcile`]): partitions it
//!   must give up are revoked first (its epoch stays until its heartbeat no longer
//!   reports them); partitions another member still owns are given only once
//!   released.
//! - A member that does not heartbeat for `consumer_session_timeout_ms`, or does
//!   not revoke within its rebalance timeout, is fenced (removed, group epoch
//!   bumped). Leaving with epoch -1 does the same; a static member leaving with
//!   -2 keeps its assignment for a new member id with the same instance id
//!   (UNRELEASED_INSTANCE_ID until it left).
//!
//! - Classic members (JoinGroup/SyncGroup/Heartbeat) may be members too
//!   ([`classic`]): a classic group with members becomes a consumer group when a
//!   consumer-protocol member joins, and a consumer group whose last
//!   consumer-protocol member leaves becomes a classic group again, as
//!   `group.consumer.migration.policy` allows.
//!
//! Bounds: `consumer_max_size` members per group (GROUP_MAX_SIZE_REACHED), member
//! ids of at most [`registry::MAX_ID_LEN`] bytes, regexes bounded by
//! [`regex::MAX_PATTERN_LEN`] and [`regex::MAX_PROGRAM`]; the number of groups is
//! bounded by the coordinator (`max_groups`, shared with classic groups).

pub mod assignor;
pub mod classic;
pub mod group;
pub mod member;
pub mod reconcile;
pub mod records;
pub mod regex;
pub mod registry;

#[cfg(test)]
mod classic_tests;
#[cfg(test)]
mod tests;

pub use group::{Catalog, ConsumerGroup, ConsumerGroupState};
pub use member::{Assignment, ClassicMetadata, Current, Member, MemberState, Subscription};
pub use registry::{ConsumerGroups, ConsumerRecord, Heartbeat, HeartbeatAnswer};
