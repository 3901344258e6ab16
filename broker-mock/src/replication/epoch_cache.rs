//! The leader epoch cache of one partition log: which leader epoch wrote which offsets.
//!
//! Each entry is `(epoch, start_offset)`: the first offset written under that epoch.
//! The entry's range ends where the next entry starts, and the last entry's range ends
//! at the log end offset (LEO). This is what answers OffsetsForLeaderEpoch (API key 23,
//! KIP-101, KIP-279) and the diverging-epoch check of Fetch v12+ (KIP-595), and what a
//! follower uses to find where its log parted from the leader's.
//!
//! Persistence is a small text blob (see [`LeaderEpochCache::encode`]) with a CRC-32C
//! line, written by the driver next to the log and checked when read back.

use std::fmt::Write as _;

/// The epoch Kafka uses for "no epoch known".
pub const UNDEFINED_EPOCH: i32 = -1;
/// The offset Kafka uses for "no end offset known".
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

/// Upper bound on the entries a decoded blob may hold, so a corrupt count cannot make
/// the decoder allocate without limit. Far above anything a real partition reaches.
pub const MAX_EPOCH_ENTRIES: usize = 1 << 20;

/// Version of the text format written by [`LeaderEpochCache::encode`].
const FORMAT_VERSION: u32 = 0;

/// One entry of the cache: epoch `epoch` started writing at `start_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EpochEntry {
    /// The leader epoch. Never negative in a stored entry.
    pub epoch: i32,
    /// The first offset written under `epoch`. Never negative in a stored entry.
    pub start_offset: i64,
}

/// An `(epoch, end_offset)` answer, shaped like OffsetsForLeaderEpoch's response
/// partition and Fetch's `diverging_epoch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EpochEndOffset {
    /// The largest epoch known that is `<=` the requested one, or [`UNDEFINED_EPOCH`].
    pub epoch: i32,
    /// The end offset (exclusive) of that epoch, or [`UNDEFINED_EPOCH_OFFSET`].
    pub end_offset: i64,
}

impl EpochEndOffset {
    /// The "nothing known" answer: `(-1, -1)`.
    pub const UNDEFINED: EpochEndOffset = EpochEndOffset {
        epoch: UNDEFINED_EPOCH,
        end_offset: UNDEFINED_EPOCH_OFFSET,
    };

    /// Whether this is the "nothing known" answer (its end offset is undefined).
    pub fn is_undefined(&self) -> bool {
        self.end_offset == UNDEFINED_EPOCH_OFFSET
    }
}

/// Why an epoch cache operation or decode failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EpochCacheError {
    /// An entry would go backwards: a smaller epoch after a larger one, or a smaller
    /// start offset after a larger one, or a negative value.
    #[error("epoch entry ({epoch}, {start_offset}) is not monotonic after {previous:?}")]
    NotMonotonic {
        /// The rejected epoch.
        epoch: i32,
        /// The rejected start offset.
        start_offset: i64,
        /// The entry before it, if any.
        previous: Option<EpochEntry>,
    },
    /// The persisted blob is malformed.
    #[error("malformed epoch cache blob: {0}")]
    Malformed(String),
    /// The persisted blob's checksum does not match its contents.
    #[error("epoch cache checksum mismatch: stored {stored:08x}, computed {computed:08x}")]
    Checksum {
        /// The checksum written in the blob.
        stored: u32,
        /// The checksum of the bytes read.
        computed: u32,
    },
}

/// The `(epoch, start_offset)` list of one partition log.
///
/// Invariant: epochs are strictly increasing and start offsets are strictly increasing
/// along the list, and all values are non-negative. (Kafka replaces an entry whose
/// start offset would equal the next one's: an epoch that wrote nothing owns no range.)
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaderEpochCache {
    /// The entries, oldest first. Invariant: see the type docs.
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    /// An empty cache (a new, empty log).
    pub fn new() -> Self {
        LeaderEpochCache::default()
    }

    /// A cache from entries, which must already satisfy the invariant.
    pub fn from_entries(entries: Vec<EpochEntry>) -> Result<Self, EpochCacheError> {
        let mut previous: Option<EpochEntry> = None;
        for e in &entries {
            let ok = e.epoch >= 0
                && e.start_offset >= 0
                && previous.is_none_or(|p| e.epoch > p.epoch && e.start_offset > p.start_offset);
            if !ok {
                return Err(EpochCacheError::NotMonotonic {
                    epoch: e.epoch,
                    start_offset: e.start_offset,
                    previous,
                });
            }
            previous = Some(*e);
        }
        Ok(LeaderEpochCache { entries })
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// Whether no epoch is known.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The newest entry.
    pub fn latest(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    /// The newest epoch, if any.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    /// The oldest entry.
    pub fn earliest(&self) -> Option<EpochEntry> {
        self.entries.first().copied()
    }

    /// Records that `epoch` starts writing at `start_offset`.
    ///
    /// Called by a new leader with its LEO, and by a follower for each appended batch
    /// whose epoch is newer than the latest. Follows Kafka's rule: the same epoch at
    /// the same or a later offset is a no-op; entries whose epoch is `>= epoch` or whose
    /// start offset is `>= start_offset` are dropped first (they owned no surviving
    /// range), so the list stays monotonic. Returns whether the cache changed.
    ///
    /// Negative values, or an epoch older than the latest (the leader epoch never
    /// decreases), are rejected with [`EpochCacheError::NotMonotonic`] and leave the cache unchanged.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> Result<bool, EpochCacheError> {
        if epoch < 0 || start_offset < 0 {
            return Err(EpochCacheError::NotMonotonic {
                epoch,
                start_offset,
                previous: self.latest(),
            });
        }
        if let Some(latest) = self.latest() {
            if epoch < latest.epoch {
                // The leader epoch never decreases.
                return Err(EpochCacheError::NotMonotonic {
                    epoch,
                    start_offset,
                    previous: Some(latest),
                });
            }
            if latest.epoch == epoch && latest.start_offset <= start_offset {
                return Ok(false);
            }
        }
        // What survives: entries strictly older in both epoch and offset. Because the
        // list is monotonic in both, the dropped entries form a suffix.
        let keep = self
            .entries
            .iter()
            .take_while(|e| e.epoch < epoch && e.start_offset < start_offset)
            .count();
        self.entries.truncate(keep);
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        self.check_invariant();
        Ok(true)
    }

    /// Removes every entry starting at or after `end_offset`: the log was truncated to
    /// `end_offset` (its new LEO). Entries before it are kept; the last of them now ends
    /// at the new LEO.
    pub fn truncate_from_end(&mut self, end_offset: i64) {
        let keep = self
            .entries
            .iter()
            .take_while(|e| e.start_offset < end_offset)
            .count();
        self.entries.truncate(keep);
        self.check_invariant();
    }

    /// Drops history below `start_offset`: the log start moved to `start_offset`
    /// (retention or deletion). Entries wholly below it are removed and the entry
    /// covering it is moved to start there, as Kafka does.
    pub fn truncate_from_start(&mut self, start_offset: i64) {
        // Index of the last entry starting at or below `start_offset`.
        let covering = self
            .entries
            .iter()
            .rposition(|e| e.start_offset <= start_offset);
        if let Some(i) = covering {
            self.entries.drain(..i);
            self.entries[0].start_offset = start_offset;
        }
        self.check_invariant();
    }

    /// Answers OffsetsForLeaderEpoch for `requested_epoch` on a log whose end offset is
    /// `log_end_offset`, exactly as Kafka does:
    ///
    /// - undefined requested epoch, or an empty cache: `(-1, -1)`;
    /// - the latest epoch: `(latest, log_end_offset)`;
    /// - newer than every epoch known: `(-1, -1)`;
    /// - older than every epoch known: `(requested_epoch, first start offset)` (history
    ///   below the first entry was removed; replicate from where the leader's log begins);
    /// - otherwise: the largest epoch `<= requested_epoch`, ending where the next epoch
    ///   starts.
    pub fn end_offset_for(&self, requested_epoch: i32, log_end_offset: i64) -> EpochEndOffset {
        if requested_epoch == UNDEFINED_EPOCH {
            return EpochEndOffset::UNDEFINED;
        }
        if self.latest_epoch() == Some(requested_epoch) {
            return EpochEndOffset {
                epoch: requested_epoch,
                end_offset: log_end_offset,
            };
        }
        // First entry with a larger epoch.
        let higher = self.entries.iter().position(|e| e.epoch > requested_epoch);
        match higher {
            None => EpochEndOffset::UNDEFINED,
            Some(0) => EpochEndOffset {
                epoch: requested_epoch,
                end_offset: self.entries[0].start_offset,
            },
            Some(i) => EpochEndOffset {
                epoch: self.entries[i - 1].epoch,
                end_offset: self.entries[i].start_offset,
            },
        }
    }

    /// The leader's side of Fetch v12+ (KIP-595): a follower fetching from
    /// `fetch_offset` whose last fetched batch had epoch `last_fetched_epoch` has
    /// diverged when the leader's end offset for that epoch is below `fetch_offset`, or
    /// the leader knows only an older epoch. Returns the `diverging_epoch` to put in the
    /// Fetch response, or `None` when the fetch can be served. A negative
    /// `last_fetched_epoch` (the follower knows none) never diverges.
    pub fn diverging_epoch(
        &self,
        fetch_offset: i64,
        last_fetched_epoch: i32,
        log_end_offset: i64,
    ) -> Option<EpochEndOffset> {
        if last_fetched_epoch < 0 {
            return None;
        }
        let answer = self.end_offset_for(last_fetched_epoch, log_end_offset);
        if answer.is_undefined() {
            // Kafka treats a fetch whose epoch the leader cannot place as diverged at
            // the log start; an undefined answer tells the follower to fall back.
            return Some(answer);
        }
        if answer.end_offset < fetch_offset || answer.epoch < last_fetched_epoch {
            Some(answer)
        } else {
            None
        }
    }

    /// The persisted form: lines of UTF-8 text.
    ///
    /// ```text
    /// 0                  format version
    /// 2                  entry count
    /// 0 0                epoch start_offset
    /// 3 120
    /// crc32c 1a2b3c4d    CRC-32C (hex) of all bytes before this line
    /// ```
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{FORMAT_VERSION}");
        let _ = writeln!(out, "{}", self.entries.len());
        for e in &self.entries {
            let _ = writeln!(out, "{} {}", e.epoch, e.start_offset);
        }
        let crc = crc32c::crc32c(out.as_bytes());
        let _ = writeln!(out, "crc32c {crc:08x}");
        out
    }

    /// Reads the form written by [`encode`](Self::encode). Any deviation (bad
    /// checksum, wrong count, non-monotonic entries, bad numbers, trailing data) is an
    /// error; nothing panics and the allocation is bounded by the input length.
    pub fn decode(blob: &[u8]) -> Result<Self, EpochCacheError> {
        let malformed = |s: &str| EpochCacheError::Malformed(s.to_owned());
        let text = std::str::from_utf8(blob).map_err(|_| malformed("not UTF-8"))?;
        // The checksum line is the last line; everything before it is covered.
        let body_end = text
            .trim_end_matches('\n')
            .rfind('\n')
            .map(|i| i + 1)
            .ok_or_else(|| malformed("no checksum line"))?;
        let (body, trailer) = text.split_at(body_end);
        let trailer = trailer
            .strip_suffix('\n')
            .ok_or_else(|| malformed("checksum line not terminated"))?;
        let hex = trailer
            .strip_prefix("crc32c ")
            .ok_or_else(|| malformed("last line is not a checksum"))?;
        if hex.len() != 8 {
            return Err(malformed("checksum is not 8 hex digits"));
        }
        let stored = u32::from_str_radix(hex, 16).map_err(|_| malformed("bad checksum"))?;
        let computed = crc32c::crc32c(body.as_bytes());
        if stored != computed {
            return Err(EpochCacheError::Checksum { stored, computed });
        }

        let mut lines = body.lines();
        let version: u32 = parse_num(lines.next(), "version")?;
        if version != FORMAT_VERSION {
            return Err(EpochCacheError::Malformed(format!(
                "unsupported version {version}"
            )));
        }
        let count: usize = parse_num(lines.next(), "entry count")?;
        // Each entry line takes at least 4 bytes ("0 0\n"); bound by input and limit.
        if count > MAX_EPOCH_ENTRIES || count > body.len() / 4 {
            return Err(EpochCacheError::Malformed(format!(
                "entry count {count} exceeds what the blob can hold"
            )));
        }
        let mut entries = Vec::with_capacity(count);
        for _ in 0..count {
            let line = lines
                .next()
                .ok_or_else(|| malformed("missing entry line"))?;
            let mut parts = line.split(' ');
            let epoch: i32 = parse_num(parts.next(), "epoch")?;
            let start_offset: i64 = parse_num(parts.next(), "start offset")?;
            if parts.next().is_some() {
                return Err(malformed("extra field on entry line"));
            }
            entries.push(EpochEntry {
                epoch,
                start_offset,
            });
        }
        if lines.next().is_some() {
            return Err(malformed("extra lines after the entries"));
        }
        LeaderEpochCache::from_entries(entries)
    }

    /// Asserts the type invariant.
    fn check_invariant(&self) {
        for w in self.entries.windows(2) {
            assert!(
                w[0].epoch < w[1].epoch && w[0].start_offset < w[1].start_offset,
                "epoch cache not monotonic: {:?}",
                self.entries
            );
        }
        if let Some(first) = self.entries.first() {
            assert!(first.epoch >= 0 && first.start_offset >= 0);
        }
    }
}

/// Parses one decimal field of the text format.
fn parse_num<T: std::str::FromStr>(s: Option<&str>, what: &str) -> Result<T, EpochCacheError> {
    let s = s.ok_or_else(|| EpochCacheError::Malformed(format!("missing {what}")))?;
    // Reject signs, spaces and leading '+' that `FromStr` might accept loosely.
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
        return Err(EpochCacheError::Malformed(format!("bad {what}: {s:?}")));
    }
    s.parse()
        .map_err(|_| EpochCacheError::Malformed(format!("bad {what}: {s:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed};

    fn cache(entries: &[(i32, i64)]) -> LeaderEpochCache {
        LeaderEpochCache::from_entries(
            entries
                .iter()
                .map(|&(epoch, start_offset)| EpochEntry {
                    epoch,
                    start_offset,
                })
                .collect(),
        )
        .unwrap()
    }

    fn eo(epoch: i32, end_offset: i64) -> EpochEndOffset {
        EpochEndOffset { epoch, end_offset }
    }

    #[test]
    fn end_offset_for_matches_kafka() {
        let c = cache(&[(1, 0), (3, 10), (4, 25)]);
        let leo = 40;
        assert_eq!(
            c.end_offset_for(UNDEFINED_EPOCH, leo),
            EpochEndOffset::UNDEFINED
        );
        assert_eq!(
            c.end_offset_for(4, leo),
            eo(4, 40),
            "latest epoch ends at LEO"
        );
        assert_eq!(c.end_offset_for(3, leo), eo(3, 25));
        assert_eq!(
            c.end_offset_for(2, leo),
            eo(1, 10),
            "floor epoch, next start"
        );
        assert_eq!(c.end_offset_for(1, leo), eo(1, 10));
        assert_eq!(
            c.end_offset_for(0, leo),
            eo(0, 0),
            "below first: first start"
        );
        assert_eq!(c.end_offset_for(5, leo), EpochEndOffset::UNDEFINED);
        assert_eq!(
            LeaderEpochCache::new().end_offset_for(0, 0),
            EpochEndOffset::UNDEFINED
        );
    }

    #[test]
    fn assign_replaces_non_monotonic_tail() {
        let mut c = LeaderEpochCache::new();
        assert!(c.assign(0, 0).unwrap());
        assert!(!c.assign(0, 5).unwrap(), "same epoch later is a no-op");
        assert!(c.assign(2, 10).unwrap());
        // Epoch 3 elected with no appends, then epoch 4 at the same offset: 3 goes.
        assert!(c.assign(3, 20).unwrap());
        assert!(c.assign(4, 20).unwrap());
        assert_eq!(c, cache(&[(0, 0), (2, 10), (4, 20)]));
        // A newer epoch at a smaller offset (after truncation) drops the entries above.
        assert!(c.assign(5, 15).unwrap());
        assert_eq!(c, cache(&[(0, 0), (2, 10), (5, 15)]));
        // An older epoch at a larger offset is history going backwards.
        assert!(c.assign(1, 30).is_err());
        assert!(c.assign(-1, 30).is_err());
        assert_eq!(c, cache(&[(0, 0), (2, 10), (5, 15)]));
    }

    #[test]
    fn truncation_both_ends() {
        let mut c = cache(&[(1, 0), (3, 10), (4, 25)]);
        c.truncate_from_end(25);
        assert_eq!(c, cache(&[(1, 0), (3, 10)]));
        c.truncate_from_end(11);
        assert_eq!(c, cache(&[(1, 0), (3, 10)]));
        c.truncate_from_end(10);
        assert_eq!(c, cache(&[(1, 0)]));
        let mut c = cache(&[(1, 0), (3, 10), (4, 25)]);
        c.truncate_from_start(12);
        assert_eq!(c, cache(&[(3, 12), (4, 25)]));
        c.truncate_from_start(25);
        assert_eq!(c, cache(&[(4, 25)]));
        c.truncate_from_start(5);
        assert_eq!(
            c,
            cache(&[(4, 25)]),
            "moving start backwards changes nothing"
        );
    }

    #[test]
    fn diverging_epoch_check() {
        let c = cache(&[(1, 0), (3, 10)]);
        assert_eq!(c.diverging_epoch(10, 1, 20), None);
        assert_eq!(c.diverging_epoch(12, 1, 20), Some(eo(1, 10)));
        assert_eq!(c.diverging_epoch(12, 2, 20), Some(eo(1, 10)));
        assert_eq!(c.diverging_epoch(20, 3, 20), None);
        assert_eq!(c.diverging_epoch(5, -1, 20), None);
    }

    #[test]
    fn encode_decode_round_trip_and_rejects_damage() {
        let c = cache(&[(1, 0), (3, 10), (4, 25)]);
        let blob = c.encode();
        assert_eq!(LeaderEpochCache::decode(blob.as_bytes()).unwrap(), c);
        assert_eq!(
            LeaderEpochCache::decode(LeaderEpochCache::new().encode().as_bytes()).unwrap(),
            LeaderEpochCache::new()
        );
        // Flip each byte in turn: always an error, never a panic.
        for i in 0..blob.len() {
            let mut bad = blob.clone().into_bytes();
            bad[i] ^= 0x01;
            assert!(LeaderEpochCache::decode(&bad).is_err(), "flip at {i}");
        }
        // Every strict prefix is an error.
        for i in 0..blob.len() {
            assert!(LeaderEpochCache::decode(&blob.as_bytes()[..i]).is_err());
        }
        // A well-checksummed but non-monotonic body is rejected.
        let body = "0\n2\n3 10\n1 20\n";
        let forged = format!("{body}crc32c {:08x}\n", crc32c::crc32c(body.as_bytes()));
        assert!(matches!(
            LeaderEpochCache::decode(forged.as_bytes()),
            Err(EpochCacheError::NotMonotonic { .. })
        ));
        // A huge count with a valid checksum is rejected before allocating.
        let body = "0\n999999999999\n";
        let forged = format!("{body}crc32c {:08x}\n", crc32c::crc32c(body.as_bytes()));
        assert!(LeaderEpochCache::decode(forged.as_bytes()).is_err());
    }

    fn seeded(cases: u32, seed: u64) -> Config {
        Config {
            cases,
            rng_seed: RngSeed::Fixed(seed),
            ..Config::default()
        }
    }

    proptest! {
        #![proptest_config(seeded(256, 0x5eed_e90c))]

        /// Any sequence of assigns and truncations keeps the invariant, and the cache
        /// answers `end_offset_for` consistently with a brute-force model.
        #[test]
        fn random_operations_keep_invariant(ops in proptest::collection::vec((0u8..3, 0i32..20, 0i64..200), 0..60)) {
            let mut c = LeaderEpochCache::new();
            let mut leo = 0i64;
            for (kind, epoch, offset) in ops {
                match kind {
                    0 => {
                        let start = leo.max(c.latest().map_or(0, |e| e.start_offset));
                        let _ = c.assign(epoch, start);
                        leo = start + offset % 10;
                    }
                    1 => {
                        let to = offset.min(leo);
                        c.truncate_from_end(to);
                        leo = to;
                    }
                    _ => c.truncate_from_start(offset.min(leo)),
                }
                prop_assert!(LeaderEpochCache::from_entries(c.entries().to_vec()).is_ok());
                prop_assert_eq!(LeaderEpochCache::decode(c.encode().as_bytes()).unwrap(), c.clone());
                for q in 0..22 {
                    let got = c.end_offset_for(q, leo);
                    // Model: floor entry and the next start (or LEO).
                    let es = c.entries();
                    let want = if es.is_empty() || q > es.last().unwrap().epoch {
                        EpochEndOffset::UNDEFINED
                    } else if q == es.last().unwrap().epoch {
                        eo(q, leo)
                    } else if q < es[0].epoch {
                        eo(q, es[0].start_offset)
                    } else {
                        let i = es.iter().rposition(|e| e.epoch <= q).unwrap();
                        eo(es[i].epoch, es[i + 1].start_offset)
                    };
                    prop_assert_eq!(got, want);
                }
            }
        }

        /// Decoding arbitrary bytes never panics.
        #[test]
        fn decode_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = LeaderEpochCache::decode(&bytes);
        }
    }
}
