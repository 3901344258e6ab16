//! Replication state machines for one partition, without I/O.
//!
//! - [`LeaderEpochCache`]: which leader epoch wrote which offsets; answers
//!   OffsetsForLeaderEpoch and Fetch's diverging-epoch check.
//! - [`LeaderState`]: the leader's follower progress, ISR proposals, high watermark,
//!   `acks=all` waits and planned-move drain.
//! - [`FollowerState`]: the follower's truncation after a leader change, then fetching.
//!
//! Each machine takes events as method calls and leaves what the driver must do in an
//! outbox (`take_actions`). Time is passed in as milliseconds; nothing here reads a
//! clock, touches a socket or a file.

pub mod epoch_cache;
pub mod follower;
pub mod leader;
mod low_watermark;

pub use epoch_cache::{
    EpochCacheError, EpochEndOffset, EpochEntry, LeaderEpochCache, UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
};
pub use follower::{
    AppendedBatch, FollowerAction, FollowerError, FollowerPhase, FollowerState, TruncationMode,
};
pub use leader::{
    FollowerProgress, IsrChangeKind, LeaderAction, LeaderConfig, LeaderError, LeaderInit,
    LeaderState, ProduceOutcome, ProduceRejection, ReplicaId,
};

/// A small seeded generator for randomized tests (xorshift64*), so failures name
/// their seed and replay exactly.
#[cfg(test)]
pub(crate) mod test_rng;
