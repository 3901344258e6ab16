//! The I/O-free half of the cleaner: what each stored batch of a compacted log
//! becomes.
//!
//! Cleaning a range takes three passes over the log, each fed by the caller:
//!
//! 1. [`TxnIndex::observe`] sees every batch of the log, in offset order, to the log
//!    end: which transactional batches were committed or aborted (a producer's
//!    transactional batches end with its next control batch) and which batch is each
//!    producer's last.
//! 2. [`KeyMap::observe`] sees the batches of the cleanable range and records, for
//!    every key, the offset of its latest record (skipping aborted and undecided
//!    transactional records and control batches). It is bounded by bytes
//!    (`log.cleaner.dedupe.buffer.size`); a batch that does not fit ends the
//!    cleanable range before it, as Kafka's cleaner ends its pass where its offset
//!    map filled up.
//! 3. [`clean_batch`] decides per record what stays, following Kafka's `LogCleaner`
//!    and `MemoryRecords.filterTo`:
//!    - a keyed record stays if it is the latest of its key in the map;
//!    - a record without key goes (Kafka counts it invalid and drops it);
//!    - a tombstone (null value) that is the latest of its key stays until the batch's
//!      delete horizon (KIP-534: the first cleaning that keeps it stamps the batch
//!      with `now + delete.retention.ms` in its base timestamp and sets attribute
//!      bit 6); a later cleaning past the horizon drops it;
//!    - records of aborted transactions go; records of a transaction whose marker
//!      is not in the log stay untouched;
//!    - control batches (transaction markers) stay. Kafka also drops a marker once
//!      its transaction's records are gone and its delete horizon passed; Baton keeps
//!      them (documented deviation: a marker is 70-odd bytes).
//!
//! A batch keeps its base offset, partition leader epoch, producer id, epoch, base
//! sequence, `lastOffsetDelta`, attributes (codec included: the records are
//! recompressed with it) and so its offset range. A batch whose records all went is
//! dropped, except the last batch of its producer, which stays as an empty batch
//! (record count 0) so that the producer's sequence state survives, as Kafka keeps
//! it.

use std::collections::HashMap;

use baton_protocol::primitives::{put_varint, put_varlong, varint_len};
use baton_protocol::record::attr::DELETE_HORIZON;
use baton_protocol::record::compression::compress;
use baton_protocol::record::control::EndTxnMarker;
use baton_protocol::record::{
    offsets, Compression, Record, RecordBatch, TimestampType, BATCH_HEADER_LEN, LOG_OVERHEAD,
    MAGIC_V2,
};
use bytes::{BufMut, Bytes, BytesMut};

/// What one key costs the [`KeyMap`] beyond its bytes (the map entry, the offset,
/// the allocation).
pub(crate) const KEY_OVERHEAD: usize = 48;

/// What one transactional batch costs the [`TxnIndex`].
pub(crate) const TXN_ENTRY: usize = 32;

/// Why cleaning a partition stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CleanError {
    /// A stored batch failed its framing, CRC or record checks.
    #[error("stored batch at offset {offset} is corrupt: {reason}")]
    Corrupt {
        /// Base offset of the bad batch.
        offset: i64,
        /// What failed.
        reason: String,
    },
    /// The log could not be read or written.
    #[error("log: {0}")]
    Log(String),
    /// The transaction index outgrew the dedupe buffer.
    #[error("transaction index over the dedupe buffer of {0} bytes")]
    TxnIndexFull(usize),
}

fn corrupt(b: &RecordBatch, reason: impl std::fmt::Display) -> CleanError {
    CleanError::Corrupt {
        offset: b.base_offset(),
        reason: reason.to_string(),
    }
}

/// Whether a transactional batch was committed, aborted, or is not decided in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Not transactional.
    NonTransactional,
    /// Its transaction committed.
    Committed,
    /// Its transaction aborted.
    Aborted,
    /// No marker follows it in the log (yet).
    Undecided,
}

/// Pass 1: transaction outcomes and each producer's last batch.
#[derive(Debug, Default)]
pub(crate) struct TxnIndex {
    outcome: HashMap<i64, bool>,
    open: HashMap<i64, Vec<i64>>,
    last_batch: HashMap<i64, i64>,
    used: usize,
    limit: usize,
}

impl TxnIndex {
    /// An empty index that may use about `limit` bytes.
    pub(crate) fn new(limit: usize) -> Self {
        TxnIndex {
            limit,
            ..Default::default()
        }
    }

    /// Notes one batch (every batch of the log, in offset order).
    pub(crate) fn observe(&mut self, b: &RecordBatch) -> Result<(), CleanError> {
        let pid = b.producer_id();
        if pid < 0 {
            return Ok(());
        }
        if b.is_control() {
            let marker = EndTxnMarker::from_batch(b).map_err(|e| corrupt(b, e))?;
            for base in self.open.remove(&pid).unwrap_or_default() {
                self.outcome.insert(base, marker.commit);
            }
            return Ok(());
        }
        if self.last_batch.insert(pid, b.base_offset()).is_none() {
            self.charge()?;
        }
        if b.is_transactional() {
            self.charge()?;
            self.open.entry(pid).or_default().push(b.base_offset());
        }
        Ok(())
    }

    fn charge(&mut self) -> Result<(), CleanError> {
        self.used += TXN_ENTRY;
        if self.used > self.limit {
            return Err(CleanError::TxnIndexFull(self.limit));
        }
        Ok(())
    }

    /// The outcome of the batch `b`.
    pub(crate) fn outcome(&self, b: &RecordBatch) -> Outcome {
        if !b.is_transactional() || b.is_control() {
            return Outcome::NonTransactional;
        }
        match self.outcome.get(&b.base_offset()) {
            Some(true) => Outcome::Committed,
            Some(false) => Outcome::Aborted,
            None => Outcome::Undecided,
        }
    }

    /// Whether `b` is the last data batch of its producer in the log.
    pub(crate) fn is_last_of_producer(&self, b: &RecordBatch) -> bool {
        b.producer_id() >= 0 && self.last_batch.get(&b.producer_id()) == Some(&b.base_offset())
    }
}

/// Pass 2: the latest offset of every key in the cleanable range, bounded in bytes.
#[derive(Debug, Default)]
pub(crate) struct KeyMap {
    map: HashMap<Bytes, i64>,
    used: usize,
    limit: usize,
}

impl KeyMap {
    /// An empty map that may use about `limit` bytes.
    pub(crate) fn new(limit: usize) -> Self {
        KeyMap {
            limit,
            ..Default::default()
        }
    }

    /// Adds the keys of a batch whose records count (see the module docs). Returns
    /// `Ok(false)` without adding anything if the batch's keys might not fit: the
    /// cleanable range must end before this batch.
    pub(crate) fn observe(&mut self, b: &RecordBatch, txn: &TxnIndex) -> Result<bool, CleanError> {
        if b.is_control()
            || matches!(txn.outcome(b), Outcome::Aborted | Outcome::Undecided)
            || b.record_count() == 0
        {
            return Ok(true);
        }
        let records = decode(b)?;
        let need: usize = records
            .iter()
            .filter_map(|r| r.key.as_ref())
            .map(|k| k.len() + KEY_OVERHEAD)
            .sum();
        if self.used + need > self.limit {
            return Ok(false);
        }
        for r in records {
            let Some(key) = r.key else { continue };
            match self.map.get_mut(&key[..]) {
                Some(at) => *at = (*at).max(r.offset),
                None => {
                    self.used += key.len() + KEY_OVERHEAD;
                    self.map.insert(Bytes::copy_from_slice(&key), r.offset);
                }
            }
        }
        Ok(true)
    }

    /// The latest offset of `key`, if the map holds it.
    pub(crate) fn latest(&self, key: &[u8]) -> Option<i64> {
        self.map.get(key).copied()
    }

    /// Number of keys.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

/// Decodes every record of a (CRC-checked) batch.
fn decode(b: &RecordBatch) -> Result<Vec<Record>, CleanError> {
    let records = b.records().map_err(|e| corrupt(b, e))?;
    let mut out = Vec::with_capacity(b.record_count().clamp(0, 1024) as usize);
    for r in records {
        out.push(r.map_err(|e| corrupt(b, e))?);
    }
    Ok(out)
}

/// What the cleaner does with one stored batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Stays as stored.
    Keep,
    /// Goes entirely.
    Drop,
    /// Is replaced by this batch (same offsets, fewer records or a delete horizon).
    Rewrite(Bytes),
}

/// What [`clean_batch`] decided, with counts for the cleaner's statistics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cleaned {
    /// The decision.
    pub decision: Decision,
    /// Records removed.
    pub removed: usize,
    /// Tombstones removed because their delete horizon passed.
    pub tombstones_removed: usize,
    /// The delete horizon of the result, if it holds a tombstone.
    pub horizon: Option<i64>,
}

/// Pass 3: what becomes of the stored batch `b` (inside the cleanable range) given
/// the key map, the transaction index, the time `now_ms` and the topic's
/// `delete.retention.ms`.
pub(crate) fn clean_batch(
    b: &RecordBatch,
    keys: &KeyMap,
    txn: &TxnIndex,
    now_ms: i64,
    delete_retention_ms: i64,
) -> Result<Cleaned, CleanError> {
    let keep_all = Cleaned {
        decision: Decision::Keep,
        removed: 0,
        tombstones_removed: 0,
        horizon: None,
    };
    let outcome = txn.outcome(b);
    if b.is_control() || outcome == Outcome::Undecided {
        return Ok(keep_all);
    }
    let records = decode(b)?;
    let horizon = b.has_delete_horizon().then(|| b.base_timestamp());
    let mut kept = Vec::with_capacity(records.len());
    let mut tombstones_removed = 0;
    let mut holds_tombstone = false;
    for r in &records {
        let keep = outcome != Outcome::Aborted
            && match &r.key {
                None => false,
                Some(k) => keys.latest(k).is_none_or(|latest| latest <= r.offset),
            };
        if !keep {
            continue;
        }
        if r.value.is_none() {
            if horizon.is_some_and(|h| now_ms >= h) {
                tombstones_removed += 1;
                continue;
            }
            holds_tombstone = true;
        }
        kept.push(r);
    }
    let removed = records.len() - kept.len();
    let new_horizon = if holds_tombstone {
        Some(horizon.unwrap_or_else(|| now_ms.saturating_add(delete_retention_ms)))
    } else {
        None
    };
    let decision = if removed == 0 && (!holds_tombstone || horizon.is_some()) {
        Decision::Keep
    } else if kept.is_empty() {
        if txn.is_last_of_producer(b) {
            Decision::Rewrite(empty_batch(b))
        } else {
            Decision::Drop
        }
    } else {
        Decision::Rewrite(encode(b, &kept, new_horizon))
    };
    Ok(Cleaned {
        decision,
        removed,
        tombstones_removed,
        horizon: new_horizon,
    })
}

/// Writes the 61-byte header of a batch over `buf[..61]` and its CRC.
#[allow(clippy::too_many_arguments)]
fn seal(
    buf: &mut [u8],
    orig: &RecordBatch,
    attributes: i16,
    base_timestamp: i64,
    max_timestamp: i64,
    count: i32,
) {
    let len = (buf.len() - LOG_OVERHEAD) as i32;
    buf[offsets::BASE_OFFSET..8].copy_from_slice(&orig.base_offset().to_be_bytes());
    buf[offsets::BATCH_LENGTH..12].copy_from_slice(&len.to_be_bytes());
    buf[offsets::PARTITION_LEADER_EPOCH..16]
        .copy_from_slice(&orig.partition_leader_epoch().to_be_bytes());
    buf[offsets::MAGIC] = MAGIC_V2 as u8;
    buf[offsets::ATTRIBUTES..23].copy_from_slice(&attributes.to_be_bytes());
    buf[offsets::LAST_OFFSET_DELTA..27].copy_from_slice(&orig.last_offset_delta().to_be_bytes());
    buf[offsets::BASE_TIMESTAMP..35].copy_from_slice(&base_timestamp.to_be_bytes());
    buf[offsets::MAX_TIMESTAMP..43].copy_from_slice(&max_timestamp.to_be_bytes());
    buf[offsets::PRODUCER_ID..51].copy_from_slice(&orig.producer_id().to_be_bytes());
    buf[offsets::PRODUCER_EPOCH..53].copy_from_slice(&orig.producer_epoch().to_be_bytes());
    buf[offsets::BASE_SEQUENCE..57].copy_from_slice(&orig.base_sequence().to_be_bytes());
    buf[offsets::RECORD_COUNT..61].copy_from_slice(&count.to_be_bytes());
    let crc = crc32c::crc32c(&buf[offsets::ATTRIBUTES..]);
    buf[offsets::CRC..21].copy_from_slice(&crc.to_be_bytes());
}

/// The batch `orig` without records: Kafka's empty header for a producer's last
/// batch (no compression, its max timestamp as base and max, same offset range and
/// producer fields).
fn empty_batch(orig: &RecordBatch) -> Bytes {
    let keep =
        orig.attributes() & !(baton_protocol::record::attr::COMPRESSION_MASK | DELETE_HORIZON);
    let mut buf = vec![0u8; BATCH_HEADER_LEN];
    let ts = orig.max_timestamp();
    seal(&mut buf, orig, keep, ts, ts, 0);
    Bytes::from(buf)
}

fn bytes_len(b: Option<&[u8]>) -> usize {
    match b {
        None => varint_len(-1),
        Some(b) => varint_len(b.len() as i64) + b.len(),
    }
}

fn put_bytes(buf: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => put_varint(buf, -1),
        Some(b) => {
            put_varint(buf, b.len() as i32);
            buf.extend_from_slice(b);
        }
    }
}

/// Encodes one record with its original offset delta and a timestamp delta from
/// `base_timestamp`.
fn put_record(buf: &mut Vec<u8>, r: &Record, offset_delta: i32, base_timestamp: i64) {
    let ts_delta = r.timestamp.wrapping_sub(base_timestamp);
    let mut size = 1 + varint_len(ts_delta) + varint_len(offset_delta as i64);
    size += bytes_len(r.key.as_deref()) + bytes_len(r.value.as_deref());
    size += varint_len(r.headers.len() as i64);
    for h in &r.headers {
        size += bytes_len(Some(h.key.as_bytes())) + bytes_len(h.value.as_deref());
    }
    put_varint(buf, size as i32);
    buf.put_i8(r.attributes);
    put_varlong(buf, ts_delta);
    put_varint(buf, offset_delta);
    put_bytes(buf, r.key.as_deref());
    put_bytes(buf, r.value.as_deref());
    put_varint(buf, r.headers.len() as i32);
    for h in &r.headers {
        put_bytes(buf, Some(h.key.as_bytes()));
        put_bytes(buf, h.value.as_deref());
    }
}

/// The batch `orig` holding only `kept` (a non-empty subset of its records, in
/// order), recompressed with its codec; with `horizon`, stamped with that delete
/// horizon (KIP-534).
fn encode(orig: &RecordBatch, kept: &[&Record], horizon: Option<i64>) -> Bytes {
    // Without a horizon the base timestamp is the first kept record's (a stale
    // horizon of the stored batch must not be read as one any more).
    let base_timestamp = match horizon {
        Some(h) => h,
        None if orig.has_delete_horizon() => kept.first().map_or(-1, |r| r.timestamp),
        None => orig.base_timestamp(),
    };
    let mut attributes = orig.attributes() & !DELETE_HORIZON;
    if horizon.is_some() {
        attributes |= DELETE_HORIZON;
    }
    let mut body = Vec::new();
    for r in kept {
        put_record(
            &mut body,
            r,
            (r.offset - orig.base_offset()) as i32,
            base_timestamp,
        );
    }
    let max_timestamp = match orig.timestamp_type() {
        TimestampType::LogAppendTime => orig.max_timestamp(),
        TimestampType::CreateTime => kept.iter().map(|r| r.timestamp).max().unwrap_or(-1),
    };
    let mut out = BytesMut::with_capacity(BATCH_HEADER_LEN + body.len());
    out.resize(BATCH_HEADER_LEN, 0);
    match orig.compression() {
        Compression::None => out.extend_from_slice(&body),
        codec => compress(codec, None, &body, &mut out),
    }
    seal(
        &mut out,
        orig,
        attributes,
        base_timestamp,
        max_timestamp,
        kept.len() as i32,
    );
    out.freeze()
}

#[cfg(test)]
mod tests;
