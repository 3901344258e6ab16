//! A partition: its log plus the replication state around it.
//!
//! A partition plays one [`Role`]. A single-node broker is `Standalone`: it leads and
//! its high watermark follows the log end offset. In a cluster a partition is led
//! through a [`LeaderState`](crate::replication::LeaderState) machine (HW = min LEO over the ISR, `acks=all` waits), or
//! followed (the replica fetcher appends the leader's batches), or not hosted. The
//! leader epoch cache (which epoch wrote which offsets) is kept beside the log and
//! rebuilt from the stored batches when a replica opens, so it needs no file of its own.
//!
//! The partition is split by what each part does: `handle` is the shared, locked
//! [`Partition`], `state` holds [`PartitionState`] and its plain accessors, `roles`
//! the leader/follower transitions and the driving of the leader machine, `corruption` detection, reporting and repair, `storage` a log that went offline after a failed write or fsync, `read` the
//! CRC-checked reads served to fetch and replication, `produce` one partition's
//! produce, from checks to the `acks=all` wait, and `markers` the transaction
//! markers and the aborted transactions read_committed fetches report.

mod compact;
mod corruption;
mod handle;
mod log_start;
mod markers;
mod produce;
mod read;
mod roles;
mod state;
mod storage;

pub use handle::Partition;
pub use log_start::LogStartError;
pub(crate) use produce::{produce_batch, replication_result, ProduceRecords, ProduceSettings};
pub use read::{read_verified, ReadError};
pub(crate) use state::LeaderReport;
pub use state::{Isolation, PartitionState, Role};
