//! Consumer groups: the classic group protocol, committed offsets and
//! transactional offsets.
//!
//! [`machine`] is the protocol as a state machine without I/O (time is passed in);
//! [`records`] is the layout of offset records in the internal `__consumer_offsets`
//! topic; `coordinator` ties them to the broker: parked JoinGroup/SyncGroup replies,
//! the timer task, durable commits (transactional ones completed by their
//! transaction's marker) and their replay on start. The handlers
//! (`handlers::join_group` and friends) translate requests in every version to and
//! from these types.

pub mod consumer;
mod coordinator;
mod host;
pub(crate) mod internal_topic;
pub mod machine;
pub mod records;

#[cfg(test)]
mod tests;

pub(crate) use coordinator::{
    replicated, GroupCoordinator, OffsetToCommit, TopicOffsets, TxnCommitter,
};
pub(crate) use host::GroupHost;
pub(crate) use internal_topic::InternalTopic;
pub use machine::{CommittedOffset, GroupConfig, GroupState, MigrationPolicy};
pub use records::OFFSETS_TOPIC;
