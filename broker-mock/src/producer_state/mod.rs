//! Idempotent producers (KIP-98): per-partition producer state and producer ids.
//!
//! Each partition remembers, for every producer id that wrote to it, the producer's
//! epoch and the metadata of its last [`BATCHES_PER_PRODUCER`](table::BATCHES_PER_PRODUCER) batches (first and
//! last sequence, base offset, last offset delta). A produce request's batches are
//! checked against that state before any offset is assigned ([`ProducerStateTable::check`]):
//!
//! - a batch whose epoch is below the producer's current epoch is
//!   `INVALID_PRODUCER_EPOCH`;
//! - a batch with a newer epoch must start at sequence 0 (the producer bumped its
//!   epoch and reset its sequences, KIP-360), else `OUT_OF_ORDER_SEQUENCE_NUMBER`;
//! - a batch with the current epoch whose sequence range equals one of the cached
//!   batches is a retry: it is not appended again, and the response carries the
//!   original base offset;
//! - otherwise its first sequence must follow the last one (`i32::MAX` wraps to 0),
//!   else `OUT_OF_ORDER_SEQUENCE_NUMBER`.
//!
//! After the append, [`ProducerStateTable::record`] files each batch under the offset
//! it was given. The state is a pure function of the log: [`rebuild`](rebuild::rebuild) scans the
//! stored batch headers in offset order and applies the same rule, so it is rebuilt
//! when a partition opens, after a truncation and when a follower becomes leader.
//!
//! Deviations from Apache Kafka:
//! - a producer the partition does not know must start at sequence 0. Kafka accepts
//!   any sequence from an unknown producer, because its state may have been removed
//!   with the data (retention, DeleteRecords); this broker removes data only by
//!   truncation, after which the rebuilt state is exact, so a gap is reported as
//!   `OUT_OF_ORDER_SEQUENCE_NUMBER` rather than silently accepted;
//! - a produce request may carry several batches for one partition (Kafka requires
//!   exactly one). They are checked in order, each against the state the earlier
//!   ones leave; either every idempotent batch is a retry (the answer is the first
//!   one's original offsets) or none is, and a request mixing retries with new
//!   batches is `OUT_OF_ORDER_SEQUENCE_NUMBER`;
//! - producers never expire by time (Kafka's `producer.id.expiration.ms`); instead at
//!   most `BrokerLimits::max_producers_per_partition` are kept (default
//!   [`MAX_PRODUCERS_PER_PARTITION`](table::MAX_PRODUCERS_PER_PARTITION)), and the one whose last batch is oldest in the
//!   log is forgotten first;
//!
//! Transactions (KIP-98): a transactional batch (attribute TRANSACTIONAL) from a
//! producer with no open transaction on the partition opens one at its base offset;
//! the producer's next transaction marker (a control batch written by
//! WriteTxnMarkers) closes it, and an abort enters the aborted-transactions index
//! ([`TxnIndex`](txn::TxnIndex)). The last stable offset is the high watermark or
//! the first offset of the oldest unstable transaction, whichever is lower; as in
//! Kafka, a transaction is unstable while open and, once its marker is written,
//! until the high watermark passes the marker. Sequence
//! numbers and epochs work for transactional batches as for idempotent ones; a
//! marker with an older producer epoch is `INVALID_PRODUCER_EPOCH`, a newer one
//! fences the producer (its epoch moves up), and a marker from a coordinator epoch
//! older than the producer's last marker's is `TRANSACTION_COORDINATOR_FENCED`. A
//! non-transactional batch from a producer with an open transaction is
//! `INVALID_TXN_STATE`, as in Kafka. Open transactions, the aborted index and
//! coordinator epochs are rebuilt from the log with the rest. Further deviations:
//! - the aborted-transactions index keeps at most
//!   `BrokerLimits::max_aborted_txns_per_partition` entries, oldest dropped first
//!   (Kafka keeps one index per log segment, as long as the segment);
//! - at most `max_producers_per_partition` transactions may be open on one
//!   partition (a batch opening one more is `POLICY_VIOLATION`); a producer with an
//!   open transaction is never forgotten.

mod allocator;
mod rebuild;
mod table;
mod txn;

pub(crate) use allocator::{AllocatorError, ProducerIdAllocator};
pub(crate) use rebuild::rebuild_or_empty;
pub use table::ProducerLimits;
pub(crate) use table::{EndedTxn, ProducerBatch, ProducerStateTable, Verdict};
pub(crate) use txn::AbortedTxn;

#[cfg(test)]
mod tests;
