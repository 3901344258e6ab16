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
//! - planned moves (controlled shutdown, preferred restore) go Requested ->
//!   Draining(target LEO) -> HandedOver: the old leader stops writes, the successor
//!   catches up to the frozen log end, then leadership changes, so even `acks=1`
//!   writes survive.

pub mod decisions;
pub mod records;
pub mod state;

pub use decisions::{
    AlterPartition, Controller, ControllerConfig, ControllerError, Heartbeat, HeartbeatReply,
};
pub use records::{
    decode_log, DecodedLog, LeaderMoveRecord, ListenerRecord, MetadataDecodeError,
    MetadataLogEntry, MetadataRecord, MoveState, PartitionChangeRecord, PartitionRecord,
    RegisterBrokerRecord, TopicRecord, MAX_EXTRA_LISTENERS, MAX_RACK_BYTES, NO_LEADER,
};
pub use state::{
    ApplyError, BrokerInfo, ControllerState, LeaderMove, PartitionInfo, TopicInfo,
    UNCLEAN_LEADER_ELECTION,
};

#[cfg(test)]
mod tests;
