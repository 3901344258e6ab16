//! A small process-wide pool of large batch buffers.
//!
//! Most of a fresh multi-megabyte allocation has never been touched: the first write
//! to each page faults and the kernel zeroes the page, which for 1 MiB values cost
//! more than copying the value itself. The builder takes buffers of at least
//! [`MIN_POOLED`] bytes from here, and a finished batch built in one hands it back
//! when the last reference to its [`Bytes`] is dropped, still mapped.
//!
//! The pool holds at most [`MAX_BUFFERS`] buffers and [`MAX_BYTES`] bytes of capacity;
//! buffers beyond that are freed as usual.

use std::sync::Mutex;

use bytes::Bytes;

/// Buffers with at least this capacity are pooled; smaller ones are not worth it.
pub(crate) const MIN_POOLED: usize = 64 * 1024;
/// Capacities of pooled allocations are rounded up to a multiple of this, so that
/// batches of nearly equal sizes can reuse each other's buffers.
const GRANULE: usize = 64 * 1024;
/// Most buffers kept.
const MAX_BUFFERS: usize = 16;
/// Most capacity kept, in bytes.
const MAX_BYTES: usize = 64 * 1024 * 1024;

struct Pool {
    buffers: Vec<Vec<u8>>,
    /// Sum of the capacities in `buffers`.
    bytes: usize,
}

impl Pool {
    const fn new() -> Self {
        Pool {
            buffers: Vec::new(),
            bytes: 0,
        }
    }
}

/// The process-wide pool.
static POOL: Mutex<Pool> = Mutex::new(Pool::new());

/// An empty buffer with room for at least `capacity` bytes: the smallest pooled
/// buffer that fits, or a new one (rounded up to the pool's granule).
pub(crate) fn take(capacity: usize) -> Vec<u8> {
    take_from(&POOL, capacity)
}

fn take_from(home: &Mutex<Pool>, capacity: usize) -> Vec<u8> {
    if let Ok(mut pool) = home.lock() {
        let best = pool
            .buffers
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= capacity)
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i);
        if let Some(i) = best {
            let buf = pool.buffers.swap_remove(i);
            pool.bytes -= buf.capacity();
            return buf;
        }
    }
    Vec::with_capacity(capacity.div_ceil(GRANULE).saturating_mul(GRANULE))
}

/// Keeps `buf` for reuse if it is large enough and the pool has room; frees it
/// otherwise.
pub(crate) fn give(buf: Vec<u8>) {
    give_to(&POOL, buf)
}

fn give_to(home: &Mutex<Pool>, mut buf: Vec<u8>) {
    let cap = buf.capacity();
    if !(MIN_POOLED..=MAX_BYTES).contains(&cap) {
        return;
    }
    buf.clear();
    if let Ok(mut pool) = home.lock() {
        if pool.buffers.len() < MAX_BUFFERS && pool.bytes + cap <= MAX_BYTES {
            pool.bytes += cap;
            pool.buffers.push(buf);
        }
    }
}

/// A finished batch's buffer; goes back to its pool when its `Bytes` is dropped.
struct Pooled {
    buf: Vec<u8>,
    home: &'static Mutex<Pool>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        give_to(self.home, std::mem::take(&mut self.buf));
    }
}

/// Freezes `buf` without copying; a poolable buffer returns to the pool once the
/// last clone or slice of the result is dropped.
pub(crate) fn freeze(buf: Vec<u8>) -> Bytes {
    freeze_from(&POOL, buf)
}

fn freeze_from(home: &'static Mutex<Pool>, buf: Vec<u8>) -> Bytes {
    if buf.capacity() >= MIN_POOLED {
        Bytes::from_owner(Pooled { buf, home })
    } else {
        Bytes::from(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_when_the_last_reference_drops() {
        static HOME: Mutex<Pool> = Mutex::new(Pool::new());
        let mut buf = take_from(&HOME, 3 * MIN_POOLED + 1);
        assert_eq!(buf.capacity(), 4 * MIN_POOLED);
        buf.extend_from_slice(&[1, 2, 3]);
        let addr = buf.as_ptr();
        let bytes = freeze_from(&HOME, buf);
        let slice = bytes.slice(1..);
        drop(bytes);
        assert_eq!(&slice[..], &[2, 3]);
        assert!(HOME.lock().unwrap().buffers.is_empty());
        drop(slice);
        assert_eq!(HOME.lock().unwrap().bytes, 4 * MIN_POOLED);
        // The smallest buffer that fits is reused, empty.
        give_to(&HOME, Vec::with_capacity(8 * MIN_POOLED));
        let again = take_from(&HOME, 2 * MIN_POOLED);
        assert_eq!((again.as_ptr(), again.len()), (addr, 0));
        let big = take_from(&HOME, 5 * MIN_POOLED);
        assert_eq!(big.capacity(), 8 * MIN_POOLED);
        assert_eq!(HOME.lock().unwrap().bytes, 0);
    }

    #[test]
    fn the_pool_is_bounded() {
        static HOME: Mutex<Pool> = Mutex::new(Pool::new());
        // Too small and too large buffers are not kept.
        drop(freeze_from(&HOME, vec![7u8; 100]));
        give_to(&HOME, Vec::with_capacity(MAX_BYTES + 1));
        assert!(HOME.lock().unwrap().buffers.is_empty());
        for _ in 0..2 * MAX_BUFFERS {
            give_to(&HOME, Vec::with_capacity(MIN_POOLED));
        }
        assert_eq!(HOME.lock().unwrap().buffers.len(), MAX_BUFFERS);
        for _ in 0..MAX_BUFFERS {
            let _ = take_from(&HOME, MIN_POOLED);
        }
        give_to(&HOME, Vec::with_capacity(MAX_BYTES / 2 + 1));
        give_to(&HOME, Vec::with_capacity(MAX_BYTES / 2 + 1));
        let pool = HOME.lock().unwrap();
        assert_eq!(pool.buffers.len(), 1);
        assert!(pool.bytes <= MAX_BYTES);
    }
}
