//! Choosing a partition for records without an explicit one: the [`Partitioner`]
//! trait, the Java-compatible [`DefaultPartitioner`] and the
//! [`RoundRobinPartitioner`].

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::Mutex;

use super::accumulator::FastMap;

/// Picks the partition of a record that names none.
///
/// [`Partitioner::partition`] is called once per record, in `send`, with the
/// topic's current partition count. When the chosen partition has no batch that
/// can take the record (its last batch was sent or is full), the producer calls
/// [`Partitioner::on_new_batch`] before opening a new batch, which lets a sticky
/// partitioner move on; the partition that returns is final.
///
/// Every result must be in `0..partition_count`; anything else fails the record
/// with [`ProduceError::InvalidPartition`](super::ProduceError::InvalidPartition).
/// Both methods run inside `send`, on the caller's task: keep them quick and never
/// block.
pub trait Partitioner: fmt::Debug + Send + Sync + 'static {
    /// The partition for a record of `topic` with `key` (`None` is a null key).
    fn partition(&self, topic: &str, key: Option<&[u8]>, partition_count: i32) -> i32;

    /// Called when the record that [`Partitioner::partition`] placed on `previous`
    /// would open a new batch there; returns the record's final partition.
    ///
    /// The default keeps `previous`. A sticky partitioner switches here (this is
    /// KIP-480's `onNewBatch`, except that the result applies to the record
    /// directly and [`Partitioner::partition`] is not asked again, so counters are
    /// never advanced twice for one record).
    fn on_new_batch(
        &self,
        topic: &str,
        key: Option<&[u8]>,
        partition_count: i32,
        previous: i32,
    ) -> i32 {
        let _ = (topic, key, partition_count);
        previous
    }
}

/// Kafka's murmur2 hash of `data`, exactly as the Java client's `Utils.murmur2`
/// computes it (a signed 32-bit result; librdkafka's `rd_murmur2` returns the same
/// bits unsigned).
///
/// MurmurHash2 by Austin Appleby with Kafka's seed `0x9747b28c`: 4-byte
/// little-endian words mixed with `m = 0x5bd1e995`, `r = 24`, then the 1-3 trailing
/// bytes, then the final avalanche (`h ^= h >> 13; h *= m; h ^= h >> 15`).
///
/// ```
/// // Vectors from Apache Kafka's UtilsTest and librdkafka's unit test.
/// assert_eq!(baton_kafka::producer::murmur2(b"21"), -973932308);
/// assert_eq!(baton_kafka::producer::murmur2(b"kafka") as u32, 0xd067cf64);
/// ```
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;

    let mut h = SEED ^ data.len() as u32;
    let mut words = data.chunks_exact(4);
    for word in &mut words {
        let mut k = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        // Trailing bytes, lowest first, as the little-endian low bytes of a word.
        let mut t = 0u32;
        for (i, &b) in tail.iter().enumerate() {
            t |= (b as u32) << (8 * i);
        }
        h ^= t;
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition of a record with `key` among `partition_count` partitions under
/// the Java client's default partitioning: `(murmur2(key) & 0x7fffffff) %
/// partition_count`. A `partition_count` below 1 is taken as 1.
pub fn partition_for_key(key: &[u8], partition_count: i32) -> i32 {
    (murmur2(key) & 0x7fff_ffff) % partition_count.max(1)
}

/// A small non-cryptographic generator (SplitMix64) for picking sticky partitions.
#[derive(Debug)]
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n >= 1`).
    fn below(&mut self, n: u32) -> u32 {
        (self.next() % n as u64) as u32
    }
}

/// The sticky state: the current partition of each topic.
#[derive(Debug)]
struct Sticky {
    rng: SplitMix,
    current: FastMap<String, i32>,
}

impl Sticky {
    fn new(seed: u64) -> Self {
        Sticky {
            rng: SplitMix(seed),
            current: FastMap::default(),
        }
    }

    /// The topic's sticky partition, picking one if it has none or if it is out of
    /// range (the partition count shrank from the producer's point of view).
    fn get(&mut self, topic: &str, count: i32) -> i32 {
        let count = count.max(1);
        match self.current.get(topic) {
            Some(&p) if p < count => p,
            _ => {
                let p = self.rng.below(count as u32) as i32;
                self.current.insert(topic.to_string(), p);
                p
            }
        }
    }

    /// Moves the topic's sticky partition away from `previous` (to another
    /// partition, at random) if it is still there; returns the current one.
    fn next(&mut self, topic: &str, count: i32, previous: i32) -> i32 {
        let count = count.max(1);
        let current = self.get(topic, count);
        if current != previous || count == 1 {
            return current;
        }
        // Uniform over the other count - 1 partitions.
        let mut p = self.rng.below(count as u32 - 1) as i32;
        if p >= previous {
            p += 1;
        }
        self.current.insert(topic.to_string(), p);
        p
    }
}

/// A seed from the standard library's randomly keyed hasher (its keys come from the
/// operating system's randomness and differ for every `RandomState`).
fn random_seed() -> u64 {
    RandomState::new().build_hasher().finish()
}

/// The default partitioner: records land where the Java client (Kafka 3.3+,
/// KIP-794) puts them, and keyed records where librdkafka's `murmur2_random` (and
/// `murmur2`) partitioner puts them.
///
/// - A keyed record goes to `(murmur2(key) & 0x7fffffff) % partition_count`
///   ([`partition_for_key`]), the formula of the Java client's
///   `BuiltInPartitioner.partitionForKey` (`Utils.toPositive(Utils.murmur2(key)) %
///   numPartitions`) and of librdkafka's `rd_kafka_msg_partitioner_murmur2`. The
///   same key and partition count give the same partition in Baton, the Java
///   client, librdkafka and every client that follows them, so keyed data written
///   by a mix of these clients stays together. An empty key is a key and hashes
///   like any other (as in Java and librdkafka); only a null key (`None`) is
///   unkeyed.
/// - Unkeyed records are *sticky* (KIP-480): they all go to one partition of the
///   topic until the batch there is sent or full, then to another partition chosen
///   at random (never the same one twice in a row). Sticky partitioning fills
///   batches instead of spreading a few records over every partition, which is
///   what makes batching and compression effective for unkeyed data. Unlike the
///   Java client since KIP-794, the choice is not weighted by broker load (no
///   adaptive partitioning), and unlike librdkafka's `murmur2_random` (random per
///   record, or sticky for `sticky.partitioning.linger.ms`) the switch follows
///   batches.
#[derive(Debug)]
pub struct DefaultPartitioner {
    sticky: Mutex<Sticky>,
}

impl Default for DefaultPartitioner {
    fn default() -> Self {
        DefaultPartitioner::with_seed(random_seed())
    }
}

impl DefaultPartitioner {
    /// A new default partitioner; its sticky choices are seeded at random.
    pub fn new() -> Self {
        Self::default()
    }

    /// A default partitioner whose sticky choices for unkeyed records follow
    /// `seed` (for reproducible tests). Keyed records do not depend on the seed.
    pub fn with_seed(seed: u64) -> Self {
        DefaultPartitioner {
            sticky: Mutex::new(Sticky::new(seed)),
        }
    }

    fn sticky(&self) -> std::sync::MutexGuard<'_, Sticky> {
        self.sticky.lock().expect("partitioner lock poisoned")
    }
}

impl Partitioner for DefaultPartitioner {
    fn partition(&self, topic: &str, key: Option<&[u8]>, partition_count: i32) -> i32 {
        match key {
            Some(key) => partition_for_key(key, partition_count),
            None => self.sticky().get(topic, partition_count),
        }
    }

    fn on_new_batch(
        &self,
        topic: &str,
        key: Option<&[u8]>,
        partition_count: i32,
        previous: i32,
    ) -> i32 {
        match key {
            // A key decides its partition; a new batch changes nothing.
            Some(_) => previous,
            None => self.sticky().next(topic, partition_count, previous),
        }
    }
}

/// Spreads records evenly: each record of a topic goes to the next partition in
/// turn, starting at 0, whatever its key (like the Java client's
/// `RoundRobinPartitioner`). Equal keys do **not** share a partition.
#[derive(Debug, Default)]
pub struct RoundRobinPartitioner {
    next: Mutex<FastMap<String, u32>>,
}

impl RoundRobinPartitioner {
    /// A new round-robin partitioner.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Partitioner for RoundRobinPartitioner {
    fn partition(&self, topic: &str, _key: Option<&[u8]>, partition_count: i32) -> i32 {
        let count = partition_count.max(1) as u32;
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

#[cfg(test)]
mod tests {
    use super::*;

    // murmur2 against Kafka's and librdkafka's published vectors:
    // tests/client/partitioner.rs (murmur2_matches_published_vectors).

    #[test]
    fn keyed_records_follow_the_java_formula() {
        let p = DefaultPartitioner::with_seed(1);
        // 0xd067cf64 & 0x7fffffff = 0x5067cf64 = 1348980580.
        for count in 1..40 {
            assert_eq!(
                p.partition("t", Some(b"kafka"), count),
                1_348_980_580 % count
            );
            assert_eq!(p.on_new_batch("t", Some(b"kafka"), count, 3), 3);
        }
        assert_eq!(p.partition("t", Some(b""), 7), 0x106e_08d9 % 7);
    }

    #[test]
    fn unkeyed_records_stick_until_a_new_batch() {
        let p = DefaultPartitioner::with_seed(42);
        let first = p.partition("t", None, 5);
        assert!((0..5).contains(&first));
        for _ in 0..100 {
            assert_eq!(p.partition("t", None, 5), first);
        }
        let mut prev = first;
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let next = p.on_new_batch("t", None, 5, prev);
            assert_ne!(next, prev, "a new batch moves the sticky partition");
            assert_eq!(p.partition("t", None, 5), next);
            // A stale notification (another record already moved it) is a no-op.
            assert_eq!(p.on_new_batch("t", None, 5, prev), next);
            seen.insert(next);
            prev = next;
        }
        assert_eq!(seen.len(), 5, "every partition gets a turn");
        // Topics stick independently; one partition always sticks.
        assert_eq!(p.on_new_batch("u", None, 1, 0), 0);
        // A shrunken partition count re-picks.
        assert!((0..2).contains(&p.partition("t", None, 2)));
    }

    #[test]
    fn round_robin_ignores_keys() {
        let p = RoundRobinPartitioner::new();
        let seen: Vec<i32> = (0..7)
            .map(|i| p.partition("t", (i % 2 == 0).then_some(&b"k"[..]), 3))
            .collect();
        assert_eq!(seen, vec![0, 1, 2, 0, 1, 2, 0]);
        assert_eq!(p.partition("other", None, 3), 0);
        assert_eq!(p.on_new_batch("t", None, 3, 2), 2);
    }
}
