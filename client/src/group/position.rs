//! `PositionCell`: one assigned partition's finished position and the leader
//! epoch of the record before it, written by the consumer as it hands out
//! records and read by commits (automatic ones run on another task).
//!
//! The consumer is the only writer. A write is a few plain stores under a
//! sequence counter (a seqlock), so the per-record hand-off takes no lock and
//! does no read-modify-write; a reader retries while a write is in progress, so
//! it never sees an offset with another offset's epoch.

use std::sync::atomic::{fence, AtomicI32, AtomicI64, AtomicU64, Ordering};

/// Reads retried this many times spin before yielding the thread (a writer
/// preempted in the middle of its few stores).
const SPINS_BEFORE_YIELD: u32 = 64;

/// A partition's finished position (`-1`: none yet) and the leader epoch of the
/// record before it (`-1`: unknown).
#[derive(Debug)]
pub(crate) struct PositionCell {
    /// Odd while a write is in progress.
    seq: AtomicU64,
    offset: AtomicI64,
    epoch: AtomicI32,
}

impl PositionCell {
    /// A cell without a position.
    pub(crate) fn new() -> Self {
        PositionCell {
            seq: AtomicU64::new(0),
            offset: AtomicI64::new(-1),
            epoch: AtomicI32::new(-1),
        }
    }

    /// Sets the position and the leader epoch of the record before it. Only the
    /// consumer (one task) writes.
    pub(crate) fn set(&self, offset: i64, epoch: i32) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        // Orders the odd counter before the data: a reader that sees new data
        // also sees the counter change.
        fence(Ordering::Release);
        self.offset.store(offset, Ordering::Relaxed);
        self.epoch.store(epoch, Ordering::Relaxed);
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }

    /// Sets the position to `offset` without a record behind it (a seek, a
    /// reset, a skip past transaction markers): the leader epoch is kept only if
    /// the offset stays the same.
    pub(crate) fn set_offset(&self, offset: i64) {
        // The writer's own values: no other task writes.
        let (old, epoch) = (
            self.offset.load(Ordering::Relaxed),
            self.epoch.load(Ordering::Relaxed),
        );
        self.set(offset, if old == offset { epoch } else { -1 });
    }

    /// The position and the leader epoch of the record before it, as one
    /// consistent pair.
    pub(crate) fn get(&self) -> (i64, i32) {
        let mut tries = 0u32;
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            let offset = self.offset.load(Ordering::Relaxed);
            let epoch = self.epoch.load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            let s2 = self.seq.load(Ordering::Relaxed);
            if s1 == s2 && s1.is_multiple_of(2) {
                return (offset, epoch);
            }
            tries = tries.saturating_add(1);
            if tries < SPINS_BEFORE_YIELD {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn set_and_get() {
        let c = PositionCell::new();
        assert_eq!(c.get(), (-1, -1));
        c.set(10, 3);
        assert_eq!(c.get(), (10, 3));
        c.set_offset(10);
        assert_eq!(c.get(), (10, 3), "same offset keeps the epoch");
        c.set_offset(12);
        assert_eq!(c.get(), (12, -1), "a new offset has no record behind it");
    }

    #[test]
    fn readers_never_see_a_torn_pair() {
        // The writer always stores epoch = offset % 1000 and keeps writing until
        // the reader has made all its reads (or failed); a torn read would show
        // an offset with another write's epoch.
        let c = Arc::new(PositionCell::new());
        c.set(0, 0);
        let reader = {
            let c = c.clone();
            std::thread::spawn(move || {
                for _ in 0..200_000 {
                    let (o, e) = c.get();
                    assert_eq!(o % 1000, i64::from(e), "torn read: offset {o}, epoch {e}");
                }
            })
        };
        let mut o = 0i64;
        while !reader.is_finished() {
            o += 1;
            c.set(o, (o % 1000) as i32);
        }
        reader.join().expect("no torn read");
    }
}
