//! A partition's transactions (KIP-98): the ongoing ones and the completed ones
//! whose marker is not yet replicated, which both hold the last stable offset back,
//! and the index of aborted ones, which read_committed fetches return so that
//! consumers drop their records.
//!
//! I/O-free: the producer state table tells it when a transaction begins (the first
//! transactional batch of a producer with none open) and ends (the producer's commit
//! or abort marker), and the partition tells it where the high watermark is. As in
//! Kafka (`ProducerStateManager`'s unreplicated transactions), a completed
//! transaction stays unstable until the high watermark passes its marker, so the
//! last stable offset never passes a transaction whose outcome a new leader might
//! not have.

use std::collections::{BTreeMap, VecDeque};

/// Default of [`BrokerLimits::max_aborted_txns_per_partition`](crate::limits::BrokerLimits::max_aborted_txns_per_partition).
pub const MAX_ABORTED_TXNS_PER_PARTITION: usize =
    crate::limits::DEFAULT_MAX_ABORTED_TXNS_PER_PARTITION;

/// An aborted transaction as Fetch reports it, plus the offset of its abort marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    /// The producer whose transaction was aborted.
    pub producer_id: i64,
    /// The offset of the transaction's first batch on this partition.
    pub first_offset: i64,
    /// The offset of the abort marker.
    pub last_offset: i64,
}

/// The ongoing transactions, the completed ones whose marker is not yet replicated
/// and the aborted-transactions index of one partition.
///
/// Invariants: `ongoing` maps each open transaction's first offset to its producer,
/// one entry per producer; `unreplicated` maps the marker offset of each completed
/// transaction whose marker is at or past `high_watermark` to the transaction's
/// first offset, and `unreplicated_first` holds the same pairs the other way round;
/// `aborted` is in increasing `last_offset` order (markers are
/// appended in offset order) and holds at most `max_aborted` entries; no entry
/// spans more than `max_span` offsets (`last_offset - first_offset`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnIndex {
    ongoing: BTreeMap<i64, i64>,
    /// Completed, marker not yet below the high watermark: marker offset -> first
    /// offset (pruned from the front as the high watermark moves).
    unreplicated: BTreeMap<i64, i64>,
    /// The same transactions: first offset -> marker offset (its first key is the
    /// oldest one's first offset).
    unreplicated_first: BTreeMap<i64, i64>,
    /// The high watermark last reported ([`on_high_watermark`](Self::on_high_watermark)).
    high_watermark: i64,
    aborted: VecDeque<AbortedTxn>,
    max_aborted: usize,
    /// The longest span of an aborted transaction ever entered, so that a lookup
    /// can stop at markers too far past its range to overlap it.
    max_span: i64,
}

impl TxnIndex {
    /// No transactions; the aborted index keeps at most `max_aborted` entries (at
    /// least one).
    pub fn new(max_aborted: usize) -> Self {
        TxnIndex {
            ongoing: BTreeMap::new(),
            unreplicated: BTreeMap::new(),
            unreplicated_first: BTreeMap::new(),
            high_watermark: 0,
            aborted: VecDeque::new(),
            max_aborted: max_aborted.max(1),
            max_span: 0,
        }
    }

    /// The most aborted transactions kept.
    pub fn max_aborted(&self) -> usize {
        self.max_aborted
    }

    /// Records that `producer_id` began a transaction at `first_offset`.
    pub fn begin(&mut self, producer_id: i64, first_offset: i64) {
        let previous = self.ongoing.insert(first_offset, producer_id);
        debug_assert!(previous.is_none(), "two transactions begin at one offset");
    }

    /// Ends the transaction that began at `first_offset` with a marker at
    /// `marker_offset`: it stays unstable until the high watermark passes the
    /// marker, and an abort enters the aborted index, dropping its oldest entry
    /// when full.
    pub fn end(&mut self, producer_id: i64, first_offset: i64, marker_offset: i64, commit: bool) {
        let removed = self.ongoing.remove(&first_offset);
        debug_assert_eq!(removed, Some(producer_id));
        if marker_offset >= self.high_watermark {
            self.unreplicated.insert(marker_offset, first_offset);
            self.unreplicated_first.insert(first_offset, marker_offset);
        }
        if commit {
            return;
        }
        debug_assert!(self
            .aborted
            .back()
            .is_none_or(|a| a.last_offset < marker_offset));
        self.max_span = self.max_span.max(marker_offset - first_offset);
        if self.aborted.len() == self.max_aborted {
            self.aborted.pop_front();
        }
        self.aborted.push_back(AbortedTxn {
            producer_id,
            first_offset,
            last_offset: marker_offset,
        });
    }

    /// The high watermark moved to `high_watermark`: completed transactions whose
    /// marker is below it become stable. Costs a map removal per such transaction.
    /// A high watermark moving down (truncation, a new leader that lags) brings
    /// none back, as in Kafka; a truncation rebuilds the state anyway.
    pub fn on_high_watermark(&mut self, high_watermark: i64) {
        self.high_watermark = high_watermark;
        while let Some(entry) = self.unreplicated.first_entry() {
            if *entry.key() >= high_watermark {
                break;
            }
            let first = entry.remove();
            self.unreplicated_first.remove(&first);
        }
    }

    /// The first unstable offset: the first offset of the oldest transaction that
    /// is ongoing or completed with its marker at or past the high watermark. The
    /// last stable offset cannot pass it.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        let ongoing = self.ongoing.keys().next().copied();
        let unreplicated = self.unreplicated_first.keys().next().copied();
        match (ongoing, unreplicated) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The completed transactions whose marker is not yet below the high
    /// watermark, as (first offset, marker offset), oldest first.
    pub fn unreplicated(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.unreplicated_first.iter().map(|(f, m)| (*f, *m))
    }

    /// The number of ongoing transactions.
    pub fn ongoing_len(&self) -> usize {
        self.ongoing.len()
    }

    /// The ongoing transactions as (first offset, producer id), oldest first.
    pub fn ongoing(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.ongoing.iter().map(|(o, p)| (*o, *p))
    }

    /// The aborted transactions that overlap the offsets `from..=to`: those whose
    /// first offset is at most `to` and whose marker is at or after `from`, in
    /// marker order. Looks only at markers from `from` to `to` plus the longest
    /// span of an aborted transaction, not at the whole index.
    pub fn aborted_overlapping(&self, from: i64, to: i64) -> Vec<AbortedTxn> {
        let start = self.aborted.partition_point(|a| a.last_offset < from);
        let last_marker = to.saturating_add(self.max_span);
        self.aborted
            .range(start..)
            .take_while(|a| a.last_offset <= last_marker)
            .filter(|a| a.first_offset <= to)
            .copied()
            .collect()
    }

    /// The log start moved to `log_start`: aborted transactions whose marker is
    /// below it can overlap no read any more and leave the index (Kafka deletes
    /// them with the segment holding their marker).
    pub fn on_log_start(&mut self, log_start: i64) {
        while self
            .aborted
            .front()
            .is_some_and(|a| a.last_offset < log_start)
        {
            self.aborted.pop_front();
        }
    }

    /// Every entry of the aborted index, oldest first.
    pub fn aborted(&self) -> impl Iterator<Item = &AbortedTxn> {
        self.aborted.iter()
    }
}
