//! Transactions: the transaction coordinator (KIP-98).
//!
//! [`machine`] is the state of one transactional id and its transitions, without
//! I/O; [`records`] is the layout of that state in the internal
//! `__transaction_state` topic.

pub mod machine;
pub mod records;

pub use machine::{TxnLimits, TxnMetadata, TxnState};
pub use records::TRANSACTION_STATE_TOPIC;
