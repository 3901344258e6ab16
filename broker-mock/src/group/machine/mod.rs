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
//! - The group's record (members with their subscriptions and assignments) is
//!   handed out when a generation completes and when the leader's SyncGroup sets
//!   the assignments; a replayed record restores the group `Stable` at its
//!   generation, sessions starting at the replay (see `snapshot`).
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
//! The machine is split by responsibility: `group` holds one group's state
//! (members, generation, committed offsets), `registry` the set of groups
//! ([`Groups`], `max_groups`, removal and tombstones), `snapshot` the group
//! records (written per generation and on assignment, restored on replay), `join`
//! JoinGroup (MEMBER_ID_REQUIRED, static membership), `member_requests` SyncGroup,
//! Heartbeat and LeaveGroup, `rebalance` the rebalance and session timers, and
//! `offsets` commit validation and offset storage, `txn_offsets` transactional
//! offsets (pending until their transaction's marker), `migration` the members
//! moving to and from a consumer group (KIP-848); `delivery` and `config` are
//! the answers and the settings they share.
//!
//! Invariants (asserted in debug builds by `check`): a group in
//! `CompletingRebalance` or `Stable` has members, a protocol and a leader that is a
//! member; `static_members` maps exactly the members with an instance id; only
//! `PreparingRebalance` has a rebalance deadline.

mod config;
mod delivery;
mod group;
mod join;
mod member_requests;
mod migration;
mod offset_delete;
mod offsets;
mod rebalance;
mod registry;
mod snapshot;
mod txn_offsets;

pub use config::{GroupConfig, MigrationPolicy};
pub use delivery::{Delivery, Waiter};
pub use group::{CommittedOffset, GroupState};
pub use join::JoinRequest;
pub use member_requests::{LeavingMember, SyncRequest};
pub use migration::{MigratingGroup, MigratingMember};
pub use registry::Groups;
pub use snapshot::{GenerationInfo, GroupSnapshot, PersistedMember};
