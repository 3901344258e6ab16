//! Records waiting for their outcome, and the pool their vectors return to.
//!
//! Below both the accumulator (which fills batches with [`Pending`] records) and
//! the delivery handles (which hand them back when a batch is settled).

use super::record::ProducerRecord;

/// A record waiting for its outcome, with what is needed to report it.
///
/// Invariant: the record (and so its `Bytes`) is held here until its batch's
/// outcome is settled (or the record is handed back by a cancellation). The
/// record's buffer memory (`size` bytes) is held by its batch.
pub(crate) struct Pending {
    /// The record's index of arrival in its batch (its [`Completion`](super::delivery::Completion) slot).
    pub(crate) slot: u32,
    pub(crate) record: ProducerRecord,
    /// The timestamp written into the batch.
    pub(crate) timestamp: i64,
    /// Estimated encoded size, counted in the batch's size and buffer memory.
    pub(crate) size: usize,
    /// The record was handed out (or dropped) after the batch was settled.
    pub(crate) taken: bool,
}

/// Record vectors of finished batches, kept for new batches: a batch's vector is
/// large (thousands of records), and reusing it spares allocating and first
/// touching fresh memory for every batch.
#[derive(Default)]
pub(crate) struct RecordPool {
    spare: std::sync::Mutex<Vec<Vec<Pending>>>,
}

impl RecordPool {
    /// The most vectors kept.
    const MAX_SPARE: usize = 4;
    /// The largest vector kept, in records.
    const MAX_RECORDS: usize = 1 << 16;

    /// An empty vector: the largest spare one (grown to `capacity` if needed),
    /// else a new one with room for `capacity` records.
    pub(crate) fn take(&self, capacity: usize) -> Vec<Pending> {
        let mut spare = self.spare.lock().expect("record pool lock poisoned");
        let largest = (0..spare.len()).max_by_key(|&i| spare[i].capacity());
        match largest {
            Some(i) => {
                let mut v = spare.swap_remove(i);
                drop(spare);
                v.reserve(capacity);
                v
            }
            None => {
                drop(spare);
                Vec::with_capacity(capacity)
            }
        }
    }

    /// Keeps `records` (emptied here) for a later batch if there is room.
    pub(crate) fn give(&self, mut records: Vec<Pending>) {
        records.clear();
        if records.capacity() == 0 || records.capacity() > Self::MAX_RECORDS {
            return;
        }
        let mut spare = self.spare.lock().expect("record pool lock poisoned");
        if spare.len() < Self::MAX_SPARE {
            spare.push(records);
        } else if let Some(smallest) = spare.iter_mut().min_by_key(|v| v.capacity()) {
            if smallest.capacity() < records.capacity() {
                *smallest = records;
            }
        }
    }
}
