//! Which fetched batches a read_committed consumer skips: those of aborted
//! transactions (I/O-free).
//!
//! A Fetch answer at read_committed lists the aborted transactions that overlap
//! the returned range: each a producer id and the transaction's first offset. A
//! transactional batch of producer P is aborted when an aborted transaction of P
//! started at or before the batch and P's abort marker (a control batch) has not
//! come yet. This is the rule of Kafka's consumer (`CompletedFetch`): aborted
//! transactions become active in first-offset order as batches pass them, and an
//! abort marker of P ends P's active one.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use baton_protocol::messages::AbortedTransaction;

/// What the filter needs of a batch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchInfo {
    /// The producer id, -1 if none.
    pub(crate) producer_id: i64,
    /// The batch's last offset.
    pub(crate) last_offset: i64,
    /// Written inside a transaction.
    pub(crate) transactional: bool,
    /// A control batch: `Some(true)` if it holds an abort marker.
    pub(crate) abort_marker: Option<bool>,
}

/// The aborted transactions of one partition's Fetch answer, consumed batch by
/// batch in offset order.
///
/// Invariant: a producer is in `active` from the first batch at or after the
/// first offset of one of its aborted transactions until its abort marker.
#[derive(Debug, Default)]
pub(crate) struct AbortedFilter {
    /// Aborted transactions not yet reached, smallest first offset first.
    upcoming: BinaryHeap<Reverse<(i64, i64)>>,
    /// Producers whose aborted transaction the batches are in now.
    active: BTreeSet<i64>,
}

impl AbortedFilter {
    /// The filter of one Fetch answer's partition; `aborted` is its list (absent
    /// or empty: nothing is skipped). The list is bounded by the answer's size.
    pub(crate) fn new(aborted: Option<Vec<AbortedTransaction>>) -> Self {
        AbortedFilter {
            upcoming: aborted
                .unwrap_or_default()
                .into_iter()
                .map(|a| Reverse((a.first_offset, a.producer_id)))
                .collect(),
            active: BTreeSet::new(),
        }
    }

    /// Whether the data records of `batch` are skipped (it belongs to an aborted
    /// transaction). Control batches are never delivered anyway; passing them
    /// here keeps the state right. Call for every batch, in offset order.
    pub(crate) fn skip(&mut self, batch: BatchInfo) -> bool {
        if batch.producer_id < 0 {
            return false;
        }
        while let Some(Reverse((first, pid))) = self.upcoming.peek().copied() {
            if first > batch.last_offset {
                break;
            }
            self.upcoming.pop();
            self.active.insert(pid);
        }
        match batch.abort_marker {
            Some(true) => {
                self.active.remove(&batch.producer_id);
                false
            }
            Some(false) => false,
            None => batch.transactional && self.active.contains(&batch.producer_id),
        }
    }
}

/// Whether a control record's key is an abort marker: key version (int16), then
/// type (int16): 0 abort, 1 commit. `None` for a key too short to say.
pub(crate) fn is_abort_marker(key: &[u8]) -> Option<bool> {
    let kind = key.get(2..4)?;
    Some(i16::from_be_bytes([kind[0], kind[1]]) == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pid: i64, last: i64, transactional: bool) -> BatchInfo {
        BatchInfo {
            producer_id: pid,
            last_offset: last,
            transactional,
            abort_marker: None,
        }
    }

    fn marker(pid: i64, at: i64, abort: bool) -> BatchInfo {
        BatchInfo {
            producer_id: pid,
            last_offset: at,
            transactional: true,
            abort_marker: Some(abort),
        }
    }

    fn aborted(list: &[(i64, i64)]) -> AbortedFilter {
        AbortedFilter::new(Some(
            list.iter()
                .map(|&(producer_id, first_offset)| AbortedTransaction {
                    producer_id,
                    first_offset,
                })
                .collect(),
        ))
    }

    #[test]
    fn skips_only_the_aborted_transaction_of_its_producer() {
        // P1 aborts 0..=1 (marker at 2); P2 commits 3 (marker 4); P1 again at 5, committed.
        let mut f = aborted(&[(1, 0)]);
        assert!(f.skip(data(1, 0, true)));
        assert!(f.skip(data(1, 1, true)));
        assert!(!f.skip(marker(1, 2, true)));
        assert!(!f.skip(data(2, 3, true)));
        assert!(!f.skip(marker(2, 4, false)));
        assert!(!f.skip(data(1, 5, true)));
    }

    #[test]
    fn interleaved_transactions_and_plain_records() {
        // P1 (aborted, from 0) and P2 (committed) interleave; non-transactional
        // records of P1's id are never skipped; no producer id: never skipped.
        let mut f = aborted(&[(1, 0), (1, 10)]);
        assert!(f.skip(data(1, 0, true)));
        assert!(!f.skip(data(2, 1, true)));
        assert!(!f.skip(data(-1, 2, false)));
        assert!(f.skip(data(1, 3, true)));
        assert!(!f.skip(marker(2, 4, false)));
        assert!(!f.skip(marker(1, 5, true)));
        assert!(!f.skip(data(1, 6, true)));
        assert!(!f.skip(marker(1, 7, false)));
        // The second aborted transaction of P1 starts at 10.
        assert!(f.skip(data(1, 10, true)));
        assert!(!f.skip(marker(1, 11, true)));
    }

    #[test]
    fn no_list_skips_nothing() {
        let mut f = AbortedFilter::new(None);
        assert!(!f.skip(data(1, 0, true)));
        assert_eq!(is_abort_marker(&[0, 0, 0, 0]), Some(true));
        assert_eq!(is_abort_marker(&[0, 0, 0, 1]), Some(false));
        assert_eq!(is_abort_marker(&[0]), None);
    }
}
