//! A history checker for produce/consume runs under faults.
//!
//! Record every produce outcome with [`History::produced`] and every consumed record
//! with [`History::consumed`], then [`History::check`]. Payloads made by [`payload`]
//! carry their id and a CRC-32C of themselves, so a consumer can recover both with
//! [`parse_payload`] without other bookkeeping. The checker counts:
//!
//! - **lost**: acknowledged but never consumed;
//! - **duplicated**: consumed at more than one (partition, offset) (extra copies
//!   counted; reading the same offset twice is not a duplicate);
//! - **reordered**: within a partition, a record at a higher offset whose id is lower
//!   than an earlier record's (ids must grow in the order they were sent to a
//!   partition);
//! - **corrupted**: consumed with a checksum other than the produced one, or an id
//!   never produced;
//! - **unacknowledged but present**: failed or unknown produce outcomes that were
//!   consumed anyway (allowed: the write may have happened).
//!
//! A run passes when the first four are zero.
//!
//! ```
//! use baton_broker::history::{parse_payload, payload, History, ProduceOutcome};
//! let mut h = History::new();
//! let p = payload(7, 16);
//! let (id, sum) = parse_payload(&p).unwrap();
//! h.produced(id, sum, ProduceOutcome::Acked { partition: 0, offset: 0 });
//! h.consumed(0, 0, id, sum);
//! assert!(h.check().passed());
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

mod compacted;

/// How a produce attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProduceOutcome {
    /// Acknowledged at this partition and offset.
    Acked {
        /// The partition.
        partition: i32,
        /// The record's offset.
        offset: i64,
    },
    /// Definitely failed (the broker refused it).
    Failed,
    /// Unknown: cancelled, timed out, or the connection died before the answer.
    Unknown,
}

#[derive(Debug, Clone, Copy)]
struct Produced {
    checksum: u32,
    outcome: ProduceOutcome,
}

/// Produce outcomes and consumed records of one run.
#[derive(Debug, Default, Clone)]
pub struct History {
    produced: HashMap<u64, Produced>,
    /// (partition, offset) -> (id, checksum), first read wins.
    consumed: BTreeMap<(i32, i64), (u64, u32)>,
    /// Reads of an offset already read with a different record.
    conflicting_reads: u64,
    /// Keys of records produced to compacted topics, by id (see
    /// [`History::check_compacted`]).
    keys: HashMap<u64, Vec<u8>>,
    /// Acknowledged tombstones of compacted topics: (partition, offset, key).
    tombstones: Vec<(i32, i64, Vec<u8>)>,
}

/// The result of [`History::check`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HistoryReport {
    /// Produce attempts acknowledged.
    pub acknowledged: u64,
    /// Produce attempts that failed.
    pub failed: u64,
    /// Produce attempts with an unknown outcome.
    pub unknown: u64,
    /// Distinct (partition, offset) positions consumed.
    pub consumed: u64,
    /// Acknowledged but never consumed.
    pub lost: u64,
    /// Extra copies of a record at other positions.
    pub duplicated: u64,
    /// Records out of id order within a partition.
    pub reordered: u64,
    /// Records whose checksum or id does not match what was produced.
    pub corrupted: u64,
    /// Failed or unknown produce attempts that were consumed.
    pub unacknowledged_present: u64,
    /// Acknowledged at a (partition, offset) that holds another record or none when
    /// read, though the record was consumed elsewhere (informational: not part of
    /// [`HistoryReport::passed`]; a non-zero count means the acknowledged offsets were
    /// wrong).
    pub moved: u64,
    /// Acknowledged, never consumed, and superseded by a later acknowledged record
    /// (or tombstone) of the same key in the same partition: removed by compaction,
    /// not lost (only [`History::check_compacted`] counts these).
    pub compacted: u64,
}

impl HistoryReport {
    /// Zero lost, duplicated, reordered and corrupted records.
    pub fn passed(&self) -> bool {
        self.lost == 0 && self.duplicated == 0 && self.reordered == 0 && self.corrupted == 0
    }
}

impl fmt::Display for HistoryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "acked={} failed={} unknown={} consumed={} | lost={} duplicated={} reordered={} corrupted={} | unacked-present={} moved={} compacted={} => {}",
            self.acknowledged,
            self.failed,
            self.unknown,
            self.consumed,
            self.lost,
            self.duplicated,
            self.reordered,
            self.corrupted,
            self.unacknowledged_present,
            self.moved,
            self.compacted,
            if self.passed() { "PASS" } else { "FAIL" }
        )
    }
}

impl History {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the outcome of producing record `id` with payload `checksum`. A later
    /// call for the same id replaces the outcome (e.g. unknown, then acknowledged).
    pub fn produced(&mut self, id: u64, checksum: u32, outcome: ProduceOutcome) {
        self.produced.insert(id, Produced { checksum, outcome });
    }

    /// Records a consumed record.
    pub fn consumed(&mut self, partition: i32, offset: i64, id: u64, checksum: u32) {
        match self.consumed.get(&(partition, offset)) {
            Some(&prev) if prev != (id, checksum) => self.conflicting_reads += 1,
            Some(_) => {}
            None => {
                self.consumed.insert((partition, offset), (id, checksum));
            }
        }
    }

    /// Number of produce outcomes recorded.
    pub fn produced_count(&self) -> usize {
        self.produced.len()
    }

    /// Number of distinct positions consumed.
    pub fn consumed_count(&self) -> usize {
        self.consumed.len()
    }

    /// Counts what went wrong.
    pub fn check(&self) -> HistoryReport {
        let mut r = HistoryReport {
            consumed: self.consumed.len() as u64,
            corrupted: self.conflicting_reads,
            ..Default::default()
        };
        let mut copies: HashMap<u64, u64> = HashMap::new();
        let mut max_id: HashMap<i32, u64> = HashMap::new();
        for (&(partition, _), &(id, checksum)) in &self.consumed {
            *copies.entry(id).or_default() += 1;
            match self.produced.get(&id) {
                Some(p) if p.checksum == checksum => {}
                _ => r.corrupted += 1,
            }
            let m = max_id.entry(partition).or_insert(id);
            if id < *m {
                r.reordered += 1;
            } else {
                *m = id;
            }
        }
        for (id, p) in &self.produced {
            let seen = copies.get(id).copied().unwrap_or(0);
            r.duplicated += seen.saturating_sub(1);
            match p.outcome {
                ProduceOutcome::Acked { partition, offset } => {
                    r.acknowledged += 1;
                    if seen == 0 {
                        r.lost += 1;
                    } else if offset >= 0
                        && self.consumed.get(&(partition, offset)).map(|c| c.0) != Some(*id)
                    {
                        r.moved += 1;
                    }
                }
                ProduceOutcome::Failed => r.failed += 1,
                ProduceOutcome::Unknown => r.unknown += 1,
            }
            if seen > 0 && !matches!(p.outcome, ProduceOutcome::Acked { .. }) {
                r.unacknowledged_present += 1;
            }
        }
        r
    }

    /// Acknowledged ids never consumed, ascending (for failure messages).
    pub fn lost_ids(&self) -> Vec<u64> {
        let seen: std::collections::HashSet<u64> = self.consumed.values().map(|v| v.0).collect();
        let mut v: Vec<u64> = self
            .produced
            .iter()
            .filter(|(id, p)| {
                matches!(p.outcome, ProduceOutcome::Acked { .. }) && !seen.contains(id)
            })
            .map(|(id, _)| *id)
            .collect();
        v.sort_unstable();
        v
    }

    /// Partitions holding a duplicated or reordered record (the partitions of
    /// every copy of a duplicated id; the partition where an id was read below an
    /// earlier, higher one), for runs whose semantics allow those only where
    /// something happened, such as a leader change under a non-idempotent producer.
    pub fn disordered_partitions(&self) -> BTreeSet<i32> {
        let mut out = BTreeSet::new();
        let mut places: HashMap<u64, Vec<i32>> = HashMap::new();
        let mut max_id: HashMap<i32, u64> = HashMap::new();
        for (&(partition, _), &(id, _)) in &self.consumed {
            places.entry(id).or_default().push(partition);
            let m = max_id.entry(partition).or_insert(id);
            if id < *m {
                out.insert(partition);
            } else {
                *m = id;
            }
        }
        out.extend(
            places
                .into_values()
                .filter(|partitions| partitions.len() > 1)
                .flatten(),
        );
        out
    }
}

/// A payload of `8 + 4 + filler` bytes: the id, a CRC-32C of the id and filler, and
/// deterministic filler.
pub fn payload(id: u64, filler: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + filler);
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend((0..filler).map(|i| (id as usize).wrapping_add(i * 31) as u8));
    let sum = checksum(&out[..8], &out[12..]);
    out[8..12].copy_from_slice(&sum.to_be_bytes());
    out
}

fn checksum(id: &[u8], filler: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(id), filler)
}

/// The id of a [`payload`] and the checksum of what was received: the stored CRC if
/// the bytes match it, else the CRC actually computed (so a corrupted payload
/// reports a checksum the producer never recorded). `None` if shorter than 12 bytes.
pub fn parse_payload(p: &[u8]) -> Option<(u64, u32)> {
    if p.len() < 12 {
        return None;
    }
    let id = u64::from_be_bytes(p[..8].try_into().ok()?);
    let stored = u32::from_be_bytes(p[8..12].try_into().ok()?);
    let actual = checksum(&p[..8], &p[12..]);
    Some((
        id,
        if actual == stored {
            stored
        } else {
            actual ^ 0x8000_0001
        },
    ))
}

/// The input and output of a consume-transform-produce pipeline, for the
/// exactly-once check.
///
/// Record every input record with [`ExactlyOnce::input`] (its partition and
/// offset in the input topic) and every output record read at read_committed
/// with [`ExactlyOnce::output`] (the input position it was made from, and where it
/// sits in the output topic), then [`ExactlyOnce::check`]. The checker counts:
///
/// - **lost**: input records with no output record;
/// - **duplicated**: extra output records for one input record;
/// - **reordered**: output records of one input partition whose input offsets do
///   not grow with their output position (compared within each output
///   partition, in offset order);
/// - **unknown**: output records made from no recorded input record.
///
/// A pipeline is exactly-once when all four are zero.
///
/// ```
/// use baton_broker::history::ExactlyOnce;
/// let mut h = ExactlyOnce::new();
/// h.input(0, 0);
/// h.input(0, 1);
/// h.output((0, 0), (0, 10));
/// h.output((0, 1), (0, 12));
/// assert!(h.check().passed());
/// ```
#[derive(Debug, Default, Clone)]
pub struct ExactlyOnce {
    inputs: BTreeSet<(i32, i64)>,
    /// (output partition, output offset) -> input (partition, offset); first read
    /// wins (reading one output position twice is not a duplicate).
    outputs: BTreeMap<(i32, i64), (i32, i64)>,
}

/// The result of [`ExactlyOnce::check`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExactlyOnceReport {
    /// Input records.
    pub inputs: u64,
    /// Distinct output records read.
    pub outputs: u64,
    /// Input records without output.
    pub lost: u64,
    /// Output records beyond the first for one input record.
    pub duplicated: u64,
    /// Output records out of their input partition's order.
    pub reordered: u64,
    /// Output records of no recorded input.
    pub unknown: u64,
}

impl ExactlyOnceReport {
    /// Zero lost, duplicated, reordered and unknown records.
    pub fn passed(&self) -> bool {
        self.lost == 0 && self.duplicated == 0 && self.reordered == 0 && self.unknown == 0
    }
}

impl fmt::Display for ExactlyOnceReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "inputs={} outputs={} | lost={} duplicated={} reordered={} unknown={} => {}",
            self.inputs,
            self.outputs,
            self.lost,
            self.duplicated,
            self.reordered,
            self.unknown,
            if self.passed() { "PASS" } else { "FAIL" }
        )
    }
}

impl ExactlyOnce {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    /// An input record at `partition`/`offset` of the input topic.
    pub fn input(&mut self, partition: i32, offset: i64) {
        self.inputs.insert((partition, offset));
    }

    /// An output record read (at read_committed) at `at` (partition, offset) of the
    /// output topic, made from the input record at `from` (partition, offset).
    pub fn output(&mut self, from: (i32, i64), at: (i32, i64)) {
        self.outputs.entry(at).or_insert(from);
    }

    /// Counts the anomalies.
    pub fn check(&self) -> ExactlyOnceReport {
        let mut seen: HashMap<(i32, i64), u64> = HashMap::new();
        let mut report = ExactlyOnceReport {
            inputs: self.inputs.len() as u64,
            outputs: self.outputs.len() as u64,
            ..ExactlyOnceReport::default()
        };
        // (output partition, input partition) -> last input offset seen.
        let mut last: HashMap<(i32, i32), i64> = HashMap::new();
        for (&(out_partition, _), &from) in &self.outputs {
            if !self.inputs.contains(&from) {
                report.unknown += 1;
                continue;
            }
            let n = seen.entry(from).or_insert(0);
            *n += 1;
            if *n > 1 {
                report.duplicated += 1;
                continue;
            }
            let prev = last.entry((out_partition, from.0)).or_insert(from.1);
            if from.1 < *prev {
                report.reordered += 1;
            } else {
                *prev = from.1;
            }
        }
        report.lost = self.inputs.iter().filter(|i| !seen.contains_key(i)).count() as u64;
        report
    }

    /// The input positions without output, in order (for failure messages).
    pub fn lost(&self) -> Vec<(i32, i64)> {
        let made: BTreeSet<(i32, i64)> = self.outputs.values().copied().collect();
        self.inputs.difference(&made).copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acked(h: &mut History, id: u64, p: i32, o: i64) {
        let (_, s) = parse_payload(&payload(id, 4)).unwrap();
        h.produced(
            id,
            s,
            ProduceOutcome::Acked {
                partition: p,
                offset: o,
            },
        );
    }

    fn read(h: &mut History, id: u64, p: i32, o: i64) {
        let (_, s) = parse_payload(&payload(id, 4)).unwrap();
        h.consumed(p, o, id, s);
    }

    #[test]
    fn counts_each_anomaly() {
        let mut h = History::new();
        for id in 0..6 {
            acked(&mut h, id, 0, id as i64);
        }
        read(&mut h, 0, 0, 0);
        read(&mut h, 0, 0, 0); // re-read: not a duplicate
        read(&mut h, 2, 0, 1); // reordered below
        read(&mut h, 1, 0, 2);
        read(&mut h, 3, 0, 3);
        read(&mut h, 3, 0, 4); // duplicate
        let mut bad = payload(4, 4);
        bad[13] ^= 1;
        let (id, s) = parse_payload(&bad).unwrap();
        h.consumed(0, 5, id, s); // corrupted
        let (_, s) = parse_payload(&payload(9, 4)).unwrap();
        h.produced(9, s, ProduceOutcome::Unknown);
        h.consumed(1, 0, 9, s);
        let r = h.check();
        assert_eq!(r.lost, 1, "{r}"); // id 5
        assert_eq!(r.duplicated, 1, "{r}");
        assert_eq!(r.reordered, 1, "{r}");
        assert_eq!(r.corrupted, 1, "{r}");
        assert_eq!(r.unacknowledged_present, 1, "{r}");
        assert_eq!(r.moved, 3, "{r}"); // ids 1, 2, and 4 (its offset holds the copy of 3)
        assert!(!r.passed());
        assert_eq!(h.lost_ids(), vec![5]);
    }

    #[test]
    fn names_the_partitions_of_duplicates_and_reorders() {
        let mut h = History::new();
        for id in 0..8 {
            acked(&mut h, id, (id / 2) as i32, (id % 2) as i64);
        }
        read(&mut h, 1, 0, 0); // partition 0: 1 then 0, reordered
        read(&mut h, 0, 0, 1);
        read(&mut h, 2, 1, 0); // id 2 in partitions 1 and 2: duplicated
        read(&mut h, 2, 2, 5);
        read(&mut h, 6, 3, 0); // partition 3 in order
        read(&mut h, 7, 3, 1);
        assert_eq!(h.disordered_partitions(), BTreeSet::from([0, 1, 2]));
        let mut clean = History::new();
        acked(&mut clean, 0, 0, 0);
        read(&mut clean, 0, 0, 0);
        assert!(clean.disordered_partitions().is_empty());
    }

    #[test]
    fn clean_run_passes() {
        let mut h = History::new();
        for id in 0..100 {
            acked(&mut h, id, (id % 3) as i32, (id / 3) as i64);
            read(&mut h, id, (id % 3) as i32, (id / 3) as i64);
        }
        let r = h.check();
        assert!(r.passed(), "{r}");
        assert!(r.to_string().contains("PASS"));
    }

    #[test]
    fn exactly_once_counts_lost_duplicated_reordered_unknown() {
        let mut h = ExactlyOnce::new();
        for o in 0..5 {
            h.input(0, o);
        }
        h.input(1, 0);
        h.output((0, 0), (0, 0));
        h.output((0, 2), (0, 1)); // 2 before 1: reordered
        h.output((0, 1), (0, 2));
        h.output((0, 1), (0, 2)); // the same output read twice: not a duplicate
        h.output((0, 3), (0, 3));
        h.output((0, 3), (1, 0)); // a second copy: duplicated
        h.output((7, 7), (1, 1)); // no such input
        let r = h.check();
        assert_eq!(r.lost, 2, "{r}"); // (0, 4) and (1, 0)
        assert_eq!(r.duplicated, 1, "{r}");
        assert_eq!(r.reordered, 1, "{r}");
        assert_eq!(r.unknown, 1, "{r}");
        assert!(!r.passed());
        assert_eq!(h.lost(), vec![(0, 4), (1, 0)]);
        let mut clean = ExactlyOnce::new();
        for o in 0..10 {
            clean.input((o % 2) as i32, o / 2);
            clean.output(((o % 2) as i32, o / 2), (0, o));
        }
        assert!(clean.check().passed(), "{}", clean.check());
    }

    #[test]
    fn short_payload_is_rejected() {
        assert_eq!(parse_payload(&[1, 2, 3]), None);
    }
}
