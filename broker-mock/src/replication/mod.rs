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
pub(crate) mod test_rng {
    /// Seeded pseudo-random numbers.
    #[derive(Debug, Clone)]
    pub(crate) struct Rng(u64);

    impl Rng {
        /// A generator for `seed`.
        pub(crate) fn new(seed: u64) -> Self {
            Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
        }

        /// The next 64 random bits.
        pub(crate) fn next_u64(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            self.0 = x;
            x.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }

        /// A value in `0..n` (`n > 0`).
        pub(crate) fn below(&mut self, n: u64) -> u64 {
            self.next_u64() % n
        }
    }
}
