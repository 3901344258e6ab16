//! The compaction-aware judgement: on a compacted topic a record may be missing
//! because a later record of its key exists, and that is compaction, not loss.

use std::collections::HashMap;

use super::{History, HistoryReport, ProduceOutcome};

impl History {
    /// [`History::produced`] for a record of a compacted topic, with its key.
    pub fn produced_keyed(&mut self, id: u64, checksum: u32, key: &[u8], outcome: ProduceOutcome) {
        self.produced(id, checksum, outcome);
        self.keys.insert(id, key.to_vec());
    }

    /// Records an acknowledged tombstone (null value) of `key` at `offset`: it
    /// supersedes the key's earlier records.
    pub fn tombstone(&mut self, partition: i32, offset: i64, key: &[u8]) {
        self.tombstones.push((partition, offset, key.to_vec()));
    }

    /// [`History::check`] for compacted topics: an acknowledged record that was never
    /// consumed counts as `compacted`, not `lost`, when a later acknowledged record
    /// or tombstone of the same key (given with [`History::produced_keyed`] and
    /// [`History::tombstone`]) sits at a higher offset of the same partition.
    /// The latest record of every key must still be consumed.
    ///
    /// ```
    /// use baton_broker::history::{payload, parse_payload, History, ProduceOutcome};
    /// let mut h = History::new();
    /// let (a, sa) = parse_payload(&payload(1, 4)).unwrap();
    /// let (b, sb) = parse_payload(&payload(2, 4)).unwrap();
    /// h.produced_keyed(a, sa, b"k", ProduceOutcome::Acked { partition: 0, offset: 0 });
    /// h.produced_keyed(b, sb, b"k", ProduceOutcome::Acked { partition: 0, offset: 1 });
    /// h.consumed(0, 1, b, sb);
    /// assert!(!h.check().passed());
    /// let r = h.check_compacted();
    /// assert!(r.passed());
    /// assert_eq!(r.compacted, 1);
    /// ```
    pub fn check_compacted(&self) -> HistoryReport {
        let mut r = self.check();
        let mut latest: HashMap<(i32, &[u8]), i64> = HashMap::new();
        for (id, p) in &self.produced {
            if let (ProduceOutcome::Acked { partition, offset }, Some(key)) =
                (p.outcome, self.keys.get(id))
            {
                let e = latest.entry((partition, key.as_slice())).or_insert(offset);
                *e = (*e).max(offset);
            }
        }
        for (partition, offset, key) in &self.tombstones {
            let e = latest
                .entry((*partition, key.as_slice()))
                .or_insert(*offset);
            *e = (*e).max(*offset);
        }
        for id in self.lost_ids() {
            let (Some(p), Some(key)) = (self.produced.get(&id), self.keys.get(&id)) else {
                continue;
            };
            if let ProduceOutcome::Acked { partition, offset } = p.outcome {
                if latest
                    .get(&(partition, key.as_slice()))
                    .is_some_and(|l| *l > offset)
                {
                    r.lost -= 1;
                    r.compacted += 1;
                }
            }
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::super::{parse_payload, payload};
    use super::*;

    #[test]
    fn only_superseded_records_count_as_compacted() {
        let mut h = History::new();
        let rec = |id| parse_payload(&payload(id, 8)).unwrap();
        let acked = |offset| ProduceOutcome::Acked {
            partition: 0,
            offset,
        };
        for (id, key, offset) in [(1, "a", 0), (2, "b", 1), (3, "a", 2), (4, "c", 3)] {
            let (id, sum) = rec(id);
            h.produced_keyed(id, sum, key.as_bytes(), acked(offset));
        }
        h.tombstone(0, 4, b"c");
        // Only a's latest (3) and b (2) are read back: 1 was superseded by 3, and
        // 4 by the tombstone of c.
        let (id, sum) = rec(2);
        h.consumed(0, 1, id, sum);
        let (id, sum) = rec(3);
        h.consumed(0, 2, id, sum);
        let r = h.check_compacted();
        assert_eq!((r.lost, r.compacted), (0, 2), "{r}");
        assert!(r.passed());

        // The latest record of a key missing is a loss.
        let mut h2 = History::new();
        let (id, sum) = rec(9);
        h2.produced_keyed(id, sum, b"z", acked(0));
        let r = h2.check_compacted();
        assert_eq!((r.lost, r.compacted), (1, 0));
        assert!(!r.passed());
    }
}
