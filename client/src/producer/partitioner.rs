//! Choosing a partition for records without an explicit one.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;

/// Picks the partition of a record that names none.
///
/// Called once per record, in `send`, with the topic's current partition count. The
/// result must be in `0..partition_count`; anything else fails the record with
/// [`ProduceError::InvalidPartition`](super::ProduceError::InvalidPartition).
pub trait Partitioner: fmt::Debug + Send + Sync + 'static {
    /// The partition for a record of `topic` with `key`.
    fn partition(&self, topic: &str, key: Option<&[u8]>, partition_count: i32) -> i32;
}

/// The default partitioner.
///
/// - Keyed records: a stable hash of the key (32-bit FNV-1a) modulo the partition
///   count, so equal keys share a partition while the count stays the same. This is
///   **not** Java-client compatible yet; Kafka's murmur2 will replace it, so do not
///   depend on the exact mapping.
/// - Unkeyed records: round robin over the partitions, per topic.
#[derive(Debug, Default)]
pub struct DefaultPartitioner {
    next: Mutex<HashMap<String, u32>>,
}

impl DefaultPartitioner {
    /// A new default partitioner.
    pub fn new() -> Self {
        Self::default()
    }
}

/// 32-bit FNV-1a.
fn fnv1a(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in bytes {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

impl Partitioner for DefaultPartitioner {
    fn partition(&self, topic: &str, key: Option<&[u8]>, partition_count: i32) -> i32 {
        let count = partition_count.max(1) as u32;
        match key {
            Some(key) => ((fnv1a(key) & 0x7fff_ffff) % count) as i32,
            None => {
                let mut next = self.next.lock().expect("partitioner lock poisoned");
                let n = match next.get_mut(topic) {
                    Some(n) => n,
                    None => next.entry(topic.to_string()).or_insert(0),
                };
                let p = *n % count;
                *n = n.wrapping_add(1);
                p as i32
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_records_are_stable_and_unkeyed_rotate() {
        let p = DefaultPartitioner::new();
        let a = p.partition("t", Some(b"key-1"), 7);
        for _ in 0..10 {
            assert_eq!(p.partition("t", Some(b"key-1"), 7), a);
        }
        let seen: Vec<i32> = (0..6).map(|_| p.partition("t", None, 3)).collect();
        assert_eq!(seen, vec![0, 1, 2, 0, 1, 2]);
        assert_eq!(fnv1a(b""), 0x811c_9dc5);
        assert_eq!(fnv1a(b"a"), 0xe40c_292c);
    }
}
