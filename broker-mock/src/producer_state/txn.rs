//! A partition's transactions (KIP-98): the ongoing ones, which hold the last stable
//! offset back, and the index of aborted ones, which read_committed fetches return so
//! that consumers drop their records.
//!
//! I/O-free: the producer state table tells it when a transaction begins (the first
//! transactional batch of a producer with none open) and ends (the producer's commit
//! or abort marker).

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

/// The ongoing transactions and the aborted-transactions index of one partition.
///
/// Invariants: `ongoing` maps each open transaction's first offset to its producer,
/// one entry per producer; `aborted` is in increasing `last_offset` order (markers are
/// appended in offset order) and holds at most `max_aborted` entries; no entry
/// spans more than `max_span` offsets (`last_offset - first_offset`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnIndex {
    ongoing: BTreeMap<i64, i64>,
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

    /// Ends the transaction that began at `first_offset`; an abort (marker at
    /// `marker_offset`) enters the aborted index, dropping its oldest entry when
    /// full.
    pub fn end(&mut self, producer_id: i64, first_offset: i64, marker_offset: i64, commit: bool) {
        let removed = self.ongoing.remove(&first_offset);
        debug_assert_eq!(removed, Some(producer_id));
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

    /// The first offset of the oldest ongoing transaction.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.ongoing.keys().next().copied()
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

    /// Every entry of the aborted index, oldest first.
    pub fn aborted(&self) -> impl Iterator<Item = &AbortedTxn> {
        self.aborted.iter()
    }
}
