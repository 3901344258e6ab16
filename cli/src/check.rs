//! `baton check`: reads a topic from its start to its current end and runs the
//! history checker (`baton_broker::history`) on the payloads it holds.
//!
//! A live topic has no record of what was acknowledged, so the ids in the
//! payloads stand in for it: a run of one producer writes ids without gaps, and
//! every id between the lowest and the highest one read (or below `--expect`)
//! counts as produced. Each payload's own CRC is the checksum it was produced
//! with; a copy that fails it is corrupted.

use std::collections::BTreeMap;
use std::time::Duration;

use baton_broker::history::{parse_payload, History, HistoryReport, ProduceOutcome};
use baton_kafka::{Client, Consumer, OffsetSpec, StartOffset, TopicPartition};

use crate::args::CheckArgs;
use crate::error::CliError;

/// How often the positions are compared with the end offsets.
const END_CHECK: Duration = Duration::from_millis(100);
/// How many lost ids the summary names.
const SHOWN_LOST: usize = 10;

/// What the topic held.
#[derive(Debug, Default)]
struct Findings {
    history: History,
    /// Ids whose payload passed its CRC, each with where it was read first.
    verified: BTreeMap<u64, (i32, i64)>,
    /// Records whose value is not a history payload at all.
    unreadable: u64,
}

impl Findings {
    /// Files the record at `partition`/`offset` with value `value`.
    fn add(&mut self, partition: i32, offset: i64, value: Option<&[u8]>, expect: Option<u64>) {
        let Some((id, checksum)) = value.and_then(parse_payload) else {
            self.unreadable += 1;
            return;
        };
        let stored = value
            .and_then(|v| v.get(8..12))
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(u32::from_be_bytes);
        let in_range = expect.is_none_or(|n| id < n);
        if stored == Some(checksum) && in_range && !self.verified.contains_key(&id) {
            self.verified.insert(id, (partition, offset));
            self.history
                .produced(id, checksum, ProduceOutcome::Acked { partition, offset });
        }
        self.history.consumed(partition, offset, id, checksum);
    }

    /// The first id at or after `from` and below `to` not verified.
    fn first_gap(&self, from: u64, to: u64) -> Option<u64> {
        let mut id = from;
        for s in self.verified.range(from..to).map(|(id, _)| *id) {
            if s != id {
                return Some(id);
            }
            id += 1;
        }
        (id < to).then_some(id)
    }

    /// The checker's counts, with the ids missing from the expected range added
    /// as lost, and the first few of them.
    fn report(&self, expect: Option<u64>) -> (HistoryReport, Vec<u64>) {
        let mut report = self.history.check();
        let range = match expect {
            Some(n) => Some((0, n)),
            None => match (
                self.verified.keys().next(),
                self.verified.keys().next_back(),
            ) {
                (Some(lo), Some(hi)) => Some((*lo, hi + 1)),
                _ => None,
            },
        };
        let mut shown = Vec::new();
        if let Some((lo, hi)) = range {
            let present = self.verified.range(lo..hi).count() as u64;
            let missing = (hi - lo) - present;
            report.lost += missing;
            report.acknowledged += missing;
            let mut from = lo;
            while shown.len() < SHOWN_LOST {
                let Some(gap) = self.first_gap(from, hi) else {
                    break;
                };
                shown.push(gap);
                from = gap + 1;
            }
        }
        (report, shown)
    }
}

/// Runs `baton check`.
pub async fn run(client: &Client, args: CheckArgs) -> Result<(), CliError> {
    let meta = client.refresh_metadata().await?;
    let Some(topic) = meta.topic(&args.topic) else {
        return Err(CliError::unknown_topic(&args.topic));
    };
    let partitions: Vec<i32> = topic.partitions.iter().map(|p| p.partition).collect();
    let ends: BTreeMap<i32, i64> = baton_kafka::Admin::new(client)
        .list_offsets(
            partitions
                .iter()
                .map(|p| (args.topic.as_str(), *p, OffsetSpec::Latest)),
        )
        .await?
        .into_iter()
        .map(|l| (l.partition, l.offset))
        .collect();
    let mut builder = Consumer::builder(client);
    for p in &partitions {
        builder = builder.assign(args.topic.clone(), *p, StartOffset::Earliest);
    }
    let mut consumer = builder.build().await?;
    let mut findings = Findings::default();
    let mut tick = tokio::time::interval(END_CHECK);
    loop {
        let done = partitions.iter().all(|p| {
            let tp = TopicPartition::new(args.topic.as_str(), *p);
            matches!((consumer.position(&tp), ends.get(p)), (Some(pos), Some(end)) if pos >= *end)
        });
        if done {
            break;
        }
        tokio::select! {
            r = consumer.recv() => {
                let r = r?;
                findings.add(r.partition, r.offset, r.value.as_deref(), args.expect);
            }
            _ = tick.tick() => {}
        }
    }
    let (report, lost) = findings.report(args.expect);
    println!("{}: {report}", args.topic);
    if findings.unreadable > 0 {
        println!(
            "{}: {} record(s) are not history payloads",
            args.topic, findings.unreadable
        );
    }
    if !lost.is_empty() {
        let lost: Vec<String> = lost.iter().map(u64::to_string).collect();
        println!("{}: first lost ids: {}", args.topic, lost.join(", "));
    }
    if report.passed() && findings.unreadable == 0 {
        Ok(())
    } else {
        Err(CliError::failure(format!(
            "the history of {:?} has violations",
            args.topic
        )))
    }
}

#[cfg(test)]
mod tests {
    use baton_broker::history::payload;

    use super::*;

    fn findings(records: &[(i32, i64, Vec<u8>)], expect: Option<u64>) -> Findings {
        let mut f = Findings::default();
        for (p, o, v) in records {
            f.add(*p, *o, Some(v), expect);
        }
        f
    }

    #[test]
    fn gaps_duplicates_and_bad_crcs_are_counted() {
        let mut bad = payload(3, 8);
        bad[14] ^= 1;
        let f = findings(
            &[
                (0, 0, payload(0, 8)),
                (0, 1, payload(2, 8)),
                (0, 2, payload(2, 8)),
                (1, 0, bad),
                (1, 1, payload(5, 8)),
                (1, 2, b"not a payload".to_vec()),
                (1, 3, b"short".to_vec()),
            ],
            None,
        );
        let (r, lost) = f.report(None);
        // 1, 3 (its only copy failed its CRC) and 4 are missing.
        assert_eq!(r.lost, 3, "{r}");
        assert_eq!(lost, vec![1, 3, 4]);
        assert_eq!(r.duplicated, 1, "{r}");
        // The flipped payload, and 13 bytes that read as a payload with a bad CRC.
        assert_eq!(r.corrupted, 2, "{r}");
        assert_eq!(f.unreadable, 1, "shorter than a payload");
        assert!(!r.passed());
    }

    #[test]
    fn a_complete_run_passes_and_expect_bounds_the_ids() {
        let records: Vec<_> = (0..20)
            .map(|i| (i as i32 % 2, i / 2, payload(i as u64, 4)))
            .collect();
        let (r, lost) = findings(&records, None).report(None);
        assert!(r.passed(), "{r}");
        assert!(lost.is_empty());
        let (r, lost) = findings(&records, Some(25)).report(Some(25));
        assert_eq!(r.lost, 5, "{r}");
        assert_eq!(lost, vec![20, 21, 22, 23, 24]);
        let (r, _) = findings(&records, Some(10)).report(Some(10));
        assert_eq!(r.corrupted, 10, "ids past --expect: {r}");
    }
}
