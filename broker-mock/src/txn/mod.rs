//! Transactions: the transaction coordinator (KIP-98).
//!
//! [`machine`] is the state of one transactional id and its transitions, without
//! I/O; [`records`] is the layout of that state in the internal
//! `__transaction_state` topic; `coordinator` serves the transactional ids of the
//! state partitions this node leads, writing every transition durably; `driver` is
//! its task: markers to the partition leaders, timeouts, ownership; `verify` is
//! KIP-890's check of transactional batches at the partition leader.

mod coordinator;
pub(crate) mod driver;
pub mod machine;
mod peers;
pub mod records;
pub(crate) mod verify;

pub(crate) use coordinator::TxnCoordinator;
pub use machine::{TxnLimits, TxnMetadata, TxnState};
pub use records::TRANSACTION_STATE_TOPIC;
