//! The byte budget of records waiting between the fetch task and the application
//! (`max_buffered_bytes`), beside the channel's bound on their number.
//!
//! What is charged, and for how long:
//! - every record, [`record_cost`] bytes: its struct plus its key, value and header
//!   bytes, from when its chunk is sent until `recv` has handed out the chunk's
//!   last record (or dropped it as stale, or the consumer is dropped);
//! - every compressed batch, the size of its decompressed records section (which
//!   its records' keys and values are slices of, so it lives as long as any of
//!   them), from just after decompression until the chunk holding the batch's last
//!   record is released. Chunks are released in the order they were sent, so that
//!   covers every chunk holding one of its records.
//!
//! A chunk is sent only once its charge is acquired; charges travel with the chunk
//! as one [`OwnedSemaphorePermit`], returned when it is dropped. The fetch task never
//! holds more than `total - 1` permits itself, and clamps what it asks for to what
//! it does not hold, so a chunk or batch larger than the whole budget waits until
//! everything else has been handed out and then goes through alone: nothing can
//! deadlock. So the pipeline holds at most about the budget plus one chunk, and the
//! fetch task one decompressed section it has not yet been able to charge.
//!
//! Not charged: the Fetch response buffer that uncompressed records are slices of
//! (at most `max_bytes` per broker), and records once handed to the application.

use std::mem::size_of;
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::ConsumerRecord;
use crate::RecordHeader;

/// The byte budget one consumer's fetch task and receiver share.
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    sem: Arc<Semaphore>,
    /// The budget in bytes (permits); at least 1, at most `u32::MAX`.
    total: usize,
}

impl Budget {
    /// A budget of `bytes`, clamped to `1..=u32::MAX`.
    pub(crate) fn new(bytes: usize) -> Self {
        let total = bytes.clamp(1, u32::MAX as usize);
        Budget {
            sem: Arc::new(Semaphore::new(total)),
            total,
        }
    }

    /// The budget in bytes.
    pub(crate) fn total(&self) -> usize {
        self.total
    }

    /// Acquires `bytes` of the budget for the fetch task, which already holds
    /// `held` (kept below `total` by the caller), clamped to what it does not
    /// hold so that the wait always ends once the receiver has released the rest.
    pub(crate) async fn acquire(&self, bytes: usize, held: usize) -> OwnedSemaphorePermit {
        let n = bytes.min(self.total.saturating_sub(held));
        // `n <= total <= u32::MAX`; the semaphore is never closed.
        self.sem
            .clone()
            .acquire_many_owned(n as u32)
            .await
            .expect("the consumer's byte budget is never closed")
    }
}

/// What one record is charged: its struct, key, value, header structs and header
/// keys and values.
pub(crate) fn record_cost(r: &ConsumerRecord) -> usize {
    let headers: usize = r
        .headers
        .iter()
        .map(|h| h.key.len() + h.value.as_ref().map_or(0, |v| v.len()))
        .sum();
    size_of::<ConsumerRecord>()
        + r.key.as_ref().map_or(0, |k| k.len())
        + r.value.as_ref().map_or(0, |v| v.len())
        + r.headers.capacity() * size_of::<RecordHeader>()
        + headers
}
