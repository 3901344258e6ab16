//! Compares what a Go consumer received with what a Go producer sent, through
//! `baton_broker::history`, plus delivery-order and exactly-once checks.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use baton_broker::history::{History, HistoryReport, ProduceOutcome};

use super::records::{Outcome, Rec};

/// What [`check`] found.
#[derive(Debug, Default)]
pub struct Report {
    /// The history checker's counts (lost, duplicated, reordered, corrupted...).
    pub history: HistoryReport,
    /// Records the consumer delivered, all copies.
    pub delivered: usize,
    /// Deliveries of a (partition, offset) already delivered.
    pub repeated_reads: usize,
    /// Deliveries at an offset not above the previous one of the same partition.
    pub out_of_order: usize,
    /// First reads of a position below an earlier first read of the same
    /// partition: records reaching the application out of order, replays aside.
    pub first_reads_out_of_order: usize,
    /// Sends the client did not acknowledge (error or timeout).
    pub unacked: usize,
    /// Of those, records that are in the log anyway (written later).
    pub unacked_written: usize,
    /// Of those, records written with the value bytes the application had
    /// overwritten after the failed call (`-reuse-buffers`): the field report.
    pub unacked_written_reused: usize,
    /// The first few mismatches, for the failure message.
    pub mismatches: Vec<String>,
}

impl Report {
    /// Nothing lost, duplicated, reordered, corrupted, read twice or delivered out
    /// of order; acknowledged offsets right.
    pub fn passed(&self) -> bool {
        self.history.passed()
            && self.history.moved == 0
            && self.repeated_reads == 0
            && self.out_of_order == 0
    }

    /// What a group consumer guarantees across a rebalance (at least once): after
    /// a coordinator or partition move it resumes from the group's last commit, so
    /// it may read again what it had read but not yet committed. Nothing may be
    /// lost, duplicated in the log, reordered or corrupted, and every record's
    /// first read comes in offset order; repeated reads are allowed.
    pub fn passed_allowing_replays(&self) -> bool {
        self.history.passed() && self.history.moved == 0 && self.first_reads_out_of_order == 0
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} | delivered={} repeated-reads={} out-of-order={} first-reads-out-of-order={} | \
             unacked={} written-later={} written-from-reused-buffers={}",
            self.history,
            self.delivered,
            self.repeated_reads,
            self.out_of_order,
            self.first_reads_out_of_order,
            self.unacked,
            self.unacked_written,
            self.unacked_written_reused
        )?;
        for m in &self.mismatches {
            write!(f, "\n  {m}")?;
        }
        Ok(())
    }
}

/// Whether `got` is `want` with every value byte overwritten by 0xEE, as the
/// Go program does to the values of a failed call under `-reuse-buffers`.
fn is_reused(got: &Rec, want: &Rec) -> bool {
    !want.value.is_empty()
        && got.value.len() == want.value.len()
        && got.value.iter().all(|&b| b == 0xEE)
        && got.key == want.key
        && got.headers == want.headers
}

/// Checks `consumed` (in delivery order) against `records`, of which the first
/// `outcomes.len()` were sent with those outcomes.
pub fn check(records: &[Rec], outcomes: &[Outcome], consumed: &[Rec]) -> Report {
    let mut report = Report {
        delivered: consumed.len(),
        ..Default::default()
    };
    let mut history = History::new();
    for (id, (rec, outcome)) in records.iter().zip(outcomes).enumerate() {
        let result = if outcome.acked {
            assert_eq!(
                outcome.partition, rec.partition,
                "record {id} acknowledged on another partition"
            );
            ProduceOutcome::Acked {
                partition: outcome.partition,
                offset: outcome.offset,
            }
        } else {
            report.unacked += 1;
            ProduceOutcome::Unknown
        };
        history.produced(id as u64, rec.checksum(), result);
    }
    let mut positions = BTreeSet::new();
    let mut last_offset: BTreeMap<i32, i64> = BTreeMap::new();
    let mut last_first_read: BTreeMap<i32, i64> = BTreeMap::new();
    let mut unacked_seen = BTreeSet::new();
    for got in consumed {
        if positions.insert((got.partition, got.offset)) {
            let last = last_first_read.entry(got.partition).or_insert(-1);
            if got.offset < *last {
                report.first_reads_out_of_order += 1;
            }
            *last = (*last).max(got.offset);
        } else {
            report.repeated_reads += 1;
        }
        let last = last_offset.entry(got.partition).or_insert(-1);
        if got.offset <= *last {
            report.out_of_order += 1;
        }
        *last = (*last).max(got.offset);

        let id = got.id();
        let want = id.and_then(|id| records.get(id as usize).map(|r| (id, r)));
        let mut checksum = got.checksum();
        if let Some((id, want)) = want {
            let unacked = outcomes.get(id as usize).is_some_and(|o| !o.acked);
            if unacked && unacked_seen.insert(id) {
                report.unacked_written += 1;
                if is_reused(got, want) {
                    // Recorded, not hidden: counted apart from corruption because
                    // the client, not the broker, wrote bytes it no longer owned.
                    report.unacked_written_reused += 1;
                    checksum = want.checksum();
                }
            }
            if got.partition != want.partition && report.mismatches.len() < 5 {
                report.mismatches.push(format!(
                    "record {id} consumed from partition {}, produced to {}",
                    got.partition, want.partition
                ));
            }
            if checksum != want.checksum() && report.mismatches.len() < 5 {
                report.mismatches.push(format!(
                    "record {id} at {}/{}: same key {}, value {} bytes (want {}), same value {}, headers {:?} (want {:?})",
                    got.partition,
                    got.offset,
                    got.key == want.key,
                    got.value.len(),
                    want.value.len(),
                    got.value == want.value,
                    got.headers,
                    want.headers
                ));
            }
        }
        history.consumed(got.partition, got.offset, id.unwrap_or(u64::MAX), checksum);
    }
    report.history = history.check();
    report
}
