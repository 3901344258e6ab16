//! The controller as a state machine, without I/O.
//!
//! It holds partition state (replicas, ISR, leader, leader epoch, partition epoch),
//! broker registrations and planned leadership moves in a metadata log of typed
//! records shaped like KRaft's. [`ControllerState::apply`] replays records (a
//! restarted controller replays its log to the same state); [`Controller`]'s decision
//! functions turn requests (registration, heartbeat, AlterPartition, controlled
//! shutdown, corruption reports, topic creation) into new records, which the driver
//! persists in the binary form of [`records`].
//!
//! Election rules:
//! - clean: the first eligible (unfenced, not shutting down) ISR member in replica
//!   order; a fenced leader without one leaves the partition offline with the old
//!   leader kept in the ISR, so it leads again when it returns;
//! - unclean, only with the topic's `unclean.leader.election.enable=true`: the first
//!   eligible replica, with the ISR reset to it;
//! - preferred leader: the first replica, restored by a planned move once it is back
//!   in the ISR;
//! - ElectLeaders (`elect.rs`): preferred puts the first replica back in the lead
//!   when it is an eligible ISR member; unclean elects, for a partition without a
//!   leader, a clean ISR member or else the first eligible replica (ISR reset);
//! - reassignments (`reassign.rs`, KIP-455): the replicas become the target plus
//!   the replicas being removed, the added replicas catch up and join the ISR, and
//!   once the whole target is in the ISR the replicas become the target (a new
//!   leader from it if the leader was removed);
//! - planned moves (controlled shutdown, preferred restore) go Requested ->
//!   Draining(target LEO) -> HandedOver: the old leader stops writes, the successor
//!   catches up to the frozen log end, then leadership changes, so even `acks=1`
//!   writes survive.

pub mod decisions;
mod elect;
mod reassign;
pub mod records;
pub mod state;

pub use decisions::{
    AlterPartition, Controller, ControllerConfig, ControllerCounters, ControllerError, Heartbeat,
    HeartbeatReply,
};
pub use elect::ElectionType;
pub use records::{
    decode_log, DecodedLog, LeaderMoveRecord, ListenerRecord, MetadataDecodeError,
    MetadataLogEntry, MetadataRecord, MoveState, PartitionChangeRecord, PartitionRecord,
    ReassignmentRecord, RegisterBrokerRecord, TopicRecord, MAX_EXTRA_LISTENERS, MAX_RACK_BYTES,
    NO_LEADER,
};
pub use state::{
    ApplyError, BrokerInfo, ControllerState, LeaderMove, PartitionInfo, TopicInfo,
    UNCLEAN_LEADER_ELECTION,
};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_reassign;
