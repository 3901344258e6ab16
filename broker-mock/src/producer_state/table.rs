//! The per-partition producer state table: the checks a produce passes before its
//! offsets are assigned, and what is recorded after the append (see the
//! [module docs](crate::producer_state)).

use std::collections::{HashMap, VecDeque};

use baton_protocol::record::control::EndTxnMarker;
use baton_protocol::record::{RecordBatch, TimestampType};
use baton_protocol::ErrorCode;

use super::txn::{TxnIndex, MAX_ABORTED_TXNS_PER_PARTITION};

/// How many of a producer's most recent batches each partition remembers, as Kafka
/// does (`ProducerStateEntry.NUM_BATCHES_TO_RETAIN`); it is also the producer's
/// limit on in-flight requests per connection with idempotence.
pub const BATCHES_PER_PRODUCER: usize = 5;

/// The most producers one partition tracks unless configured otherwise
/// ([`BrokerLimits::max_producers_per_partition`]); past it, the producer whose last
/// batch is oldest in the log is forgotten.
///
/// [`BrokerLimits::max_producers_per_partition`]: crate::limits::BrokerLimits::max_producers_per_partition
pub const MAX_PRODUCERS_PER_PARTITION: usize = crate::limits::DEFAULT_MAX_PRODUCERS_PER_PARTITION;

/// The producer fields of one v2 batch header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerBatch {
    /// The producer id, or -1 for a producer without idempotence.
    pub producer_id: i64,
    /// The producer epoch.
    pub producer_epoch: i16,
    /// The first record's sequence number.
    pub base_sequence: i32,
    /// The last record's offset minus the first's.
    pub last_offset_delta: i32,
    /// Whether the batch is part of a transaction (attribute TRANSACTIONAL).
    pub transactional: bool,
    /// The batch's max timestamp as the producer wrote it.
    pub max_timestamp: i64,
}

impl ProducerBatch {
    /// The producer fields of `batch`.
    pub fn of(batch: &RecordBatch) -> Self {
        ProducerBatch {
            producer_id: batch.producer_id(),
            producer_epoch: batch.producer_epoch(),
            base_sequence: batch.base_sequence(),
            last_offset_delta: batch.last_offset_delta(),
            transactional: batch.is_transactional(),
            max_timestamp: batch.max_timestamp(),
        }
    }

    /// Whether the batch comes from an idempotent producer (its producer id is set).
    pub fn is_idempotent(&self) -> bool {
        self.producer_id >= 0
    }

    /// The last record's sequence number: the base sequence plus the offset delta,
    /// wrapping from `i32::MAX` to 0.
    pub fn last_sequence(&self) -> i32 {
        increment_sequence(self.base_sequence, self.last_offset_delta.max(0))
    }
}

/// `seq + n` in sequence space, where `i32::MAX` is followed by 0.
pub(super) fn increment_sequence(seq: i32, n: i32) -> i32 {
    let next = seq as i64 + n as i64;
    if next > i32::MAX as i64 {
        (next - i32::MAX as i64 - 1) as i32
    } else {
        next as i32
    }
}

/// Whether `next` is the sequence right after `last`.
fn in_sequence(last: i32, next: i32) -> bool {
    next as i64 == last as i64 + 1 || (next == 0 && last == i32::MAX)
}

/// What a partition remembers of one appended batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    /// The first record's sequence number.
    pub first_seq: i32,
    /// The last record's sequence number.
    pub last_seq: i32,
    /// The offset the first record was given.
    pub base_offset: i64,
    /// The last record's offset minus the first's.
    pub last_offset_delta: i32,
    /// The append time stamped on the batch (LogAppendTime topics), else -1.
    pub log_append_time_ms: i64,
}

impl BatchMetadata {
    /// The last record's offset.
    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }
}

/// One producer's state in one partition.
///
/// Invariant: `batches` holds at most [`BATCHES_PER_PRODUCER`] entries, all written
/// with `epoch`, in increasing offset order, none past `last_offset`. It is empty
/// when the producer's only trace since its last epoch change is a transaction
/// marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    epoch: i16,
    batches: VecDeque<BatchMetadata>,
    /// The offset of the producer's last batch or transaction marker.
    last_offset: i64,
    /// The max timestamp of that batch or marker.
    last_timestamp: i64,
    /// The coordinator epoch of the producer's last transaction marker, or -1.
    coordinator_epoch: i32,
    /// The first offset of the producer's open transaction.
    txn_first_offset: Option<i64>,
}

impl ProducerEntry {
    fn empty(epoch: i16) -> Self {
        ProducerEntry {
            epoch,
            batches: VecDeque::new(),
            last_offset: -1,
            last_timestamp: -1,
            coordinator_epoch: -1,
            txn_first_offset: None,
        }
    }

    /// The producer's current epoch in this partition.
    pub fn epoch(&self) -> i16 {
        self.epoch
    }

    /// The cached batches, oldest first.
    pub fn batches(&self) -> impl Iterator<Item = &BatchMetadata> {
        self.batches.iter()
    }

    /// The last sequence number the producer wrote in its current epoch, or -1
    /// (Kafka's `NO_SEQUENCE`) if it wrote none.
    pub fn last_seq(&self) -> i32 {
        self.batches.back().map_or(-1, |b| b.last_seq)
    }

    /// The offset of the producer's last record or transaction marker in the log.
    pub fn last_offset(&self) -> i64 {
        self.last_offset
    }

    /// The max timestamp of the producer's last batch or marker.
    pub fn last_timestamp(&self) -> i64 {
        self.last_timestamp
    }

    /// The coordinator epoch of the producer's last transaction marker, or -1.
    pub fn coordinator_epoch(&self) -> i32 {
        self.coordinator_epoch
    }

    /// The first offset of the producer's open transaction on this partition.
    pub fn txn_first_offset(&self) -> Option<i64> {
        self.txn_first_offset
    }

    /// The cached batch with exactly `batch`'s epoch and sequence range.
    fn find_duplicate(&self, batch: &ProducerBatch) -> Option<&BatchMetadata> {
        if batch.producer_epoch != self.epoch {
            return None;
        }
        let last = batch.last_sequence();
        self.batches
            .iter()
            .find(|m| m.first_seq == batch.base_sequence && m.last_seq == last)
    }

    /// Moves to `epoch`: a new epoch forgets the old epoch's batches.
    fn set_epoch(&mut self, epoch: i16) {
        if epoch != self.epoch {
            self.batches.clear();
            self.epoch = epoch;
        }
    }

    /// Files a batch: beyond [`BATCHES_PER_PRODUCER`] the oldest is dropped.
    fn push(&mut self, epoch: i16, meta: BatchMetadata) {
        self.set_epoch(epoch);
        if self.batches.len() == BATCHES_PER_PRODUCER {
            self.batches.pop_front();
        }
        self.last_offset = meta.last_offset();
        self.batches.push_back(meta);
    }
}

/// The offsets a retried request was given the first time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Duplicate {
    /// The original offset of the request's first record.
    pub base_offset: i64,
    /// The original offset of the request's last record.
    pub last_offset: i64,
    /// The append time stamped the first time (LogAppendTime topics), else -1.
    pub log_append_time_ms: i64,
}

/// What to do with a produce request's batches for one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Append every batch, then [`ProducerStateTable::record`] each one.
    Append,
    /// Every idempotent batch was appended before: append nothing and answer with
    /// the original offsets.
    Duplicate(Duplicate),
}

/// The ceilings of one partition's producer state, from
/// [`BrokerLimits`](crate::limits::BrokerLimits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerLimits {
    /// Most producers remembered (at least one); see
    /// `BrokerLimits::max_producers_per_partition`. Producers with an open
    /// transaction are never forgotten, and at most this many transactions may be
    /// open at once.
    pub max_producers: usize,
    /// Most aborted transactions kept in the index (at least one); see
    /// `BrokerLimits::max_aborted_txns_per_partition`.
    pub max_aborted_txns: usize,
}

impl Default for ProducerLimits {
    fn default() -> Self {
        ProducerLimits {
            max_producers: MAX_PRODUCERS_PER_PARTITION,
            max_aborted_txns: MAX_ABORTED_TXNS_PER_PARTITION,
        }
    }
}

/// A transaction that a marker ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndedTxn {
    /// The offset of the transaction's first batch on this partition.
    pub first_offset: i64,
    /// Whether it was committed.
    pub commit: bool,
}

/// Every producer's state in one partition, with its transactions. I/O-free: the
/// partition feeds it batch headers and markers and appends by itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerStateTable {
    producers: HashMap<i64, ProducerEntry>,
    /// The most producers kept. Invariant: `max_producers >= 1`, and
    /// `producers.len() <= max(max_producers, ongoing transactions + 1)` (producers
    /// with an open transaction are never evicted).
    max_producers: usize,
    /// Ongoing transactions and the aborted-transactions index. Invariant: a
    /// producer's `txn_first_offset` is `Some(o)` exactly when `txns` has `o` open
    /// for it.
    txns: TxnIndex,
}

impl Default for ProducerStateTable {
    fn default() -> Self {
        Self::with_limits(ProducerLimits::default())
    }
}

impl ProducerStateTable {
    /// An empty table (a partition with an empty log) with the default limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty table keeping at most `max_producers` producers (at least one).
    pub fn with_max_producers(max_producers: usize) -> Self {
        Self::with_limits(ProducerLimits {
            max_producers,
            ..ProducerLimits::default()
        })
    }

    /// An empty table with `limits`.
    pub fn with_limits(limits: ProducerLimits) -> Self {
        ProducerStateTable {
            producers: HashMap::new(),
            max_producers: limits.max_producers.max(1),
            txns: TxnIndex::new(limits.max_aborted_txns),
        }
    }

    /// The limits this table keeps (for a rebuild with the same ones).
    pub fn limits(&self) -> ProducerLimits {
        ProducerLimits {
            max_producers: self.max_producers,
            max_aborted_txns: self.txns.max_aborted(),
        }
    }

    /// The most producers this table keeps.
    pub fn max_producers(&self) -> usize {
        self.max_producers
    }

    /// The number of producers tracked.
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    /// Whether no producer is tracked.
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// The state of `producer_id`, if it wrote to the partition.
    pub fn get(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    /// Every tracked producer, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (i64, &ProducerEntry)> {
        self.producers.iter().map(|(pid, e)| (*pid, e))
    }

    /// The partition's transactions.
    pub fn txns(&self) -> &TxnIndex {
        &self.txns
    }

    /// The first offset of the oldest transaction that is ongoing, or completed
    /// with its marker not yet below the high watermark: the last stable offset
    /// cannot pass it.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.txns.first_unstable_offset()
    }

    /// The partition's high watermark moved to `high_watermark`: completed
    /// transactions whose marker is below it become stable.
    pub fn on_high_watermark(&mut self, high_watermark: i64) {
        self.txns.on_high_watermark(high_watermark);
    }

    /// The log start moved to `log_start` (retention, DeleteRecords): the aborted
    /// transactions wholly below it are dropped. Producers stay, as in Kafka, where
    /// they outlive their batches until they expire.
    pub fn on_log_start_offset(&mut self, log_start: i64) {
        self.txns.on_log_start(log_start);
    }

    /// Forgets every producer and transaction.
    pub fn clear(&mut self) {
        *self = Self::with_limits(self.limits());
    }

    /// Checks a produce request's batches (in order) without changing the state.
    /// Batches without a producer id pass unchecked.
    ///
    /// Errors: `INVALID_RECORD` for an idempotent batch with a negative sequence or
    /// a transactional batch without a producer id; `INVALID_PRODUCER_EPOCH` for a
    /// stale epoch; `OUT_OF_ORDER_SEQUENCE_NUMBER` for a gap, a new epoch not
    /// starting at 0, an unknown producer not starting at 0, or a request mixing
    /// retried and new batches; `INVALID_TXN_STATE` for a non-transactional batch
    /// from a producer with an open transaction; `POLICY_VIOLATION` for a batch that
    /// would open a transaction while `max_producers` are open.
    pub fn check(&self, batches: &[ProducerBatch]) -> Result<Verdict, ErrorCode> {
        // The entries as the earlier batches of this request leave them.
        let mut pending: HashMap<i64, ProducerEntry> = HashMap::new();
        let mut first_duplicate: Option<Duplicate> = None;
        let mut duplicates = 0usize;
        let mut fresh = 0usize;
        let mut opened = 0usize;
        for batch in batches {
            if !batch.is_idempotent() {
                if batch.transactional {
                    return Err(ErrorCode::InvalidRecord);
                }
                fresh += 1;
                continue;
            }
            if batch.base_sequence < 0 {
                return Err(ErrorCode::InvalidRecord);
            }
            let pid = batch.producer_id;
            let entry = pending.get(&pid).or_else(|| self.producers.get(&pid));
            if let Some(dup) = entry.and_then(|e| e.find_duplicate(batch)) {
                // A duplicate of a batch of this very request has no offset yet.
                if dup.base_offset < 0 {
                    return Err(ErrorCode::OutOfOrderSequenceNumber);
                }
                duplicates += 1;
                match &mut first_duplicate {
                    None => {
                        first_duplicate = Some(Duplicate {
                            base_offset: dup.base_offset,
                            last_offset: dup.last_offset(),
                            log_append_time_ms: dup.log_append_time_ms,
                        })
                    }
                    Some(d) => d.last_offset = d.last_offset.max(dup.last_offset()),
                }
                continue;
            }
            check_sequence(entry, batch)?;
            let open = entry.and_then(|e| e.txn_first_offset);
            if open.is_some() && !batch.transactional {
                return Err(ErrorCode::InvalidTxnState);
            }
            let mut next = entry
                .cloned()
                .unwrap_or_else(|| ProducerEntry::empty(batch.producer_epoch));
            if batch.transactional && open.is_none() {
                opened += 1;
                if self.txns.ongoing_len() + opened > self.max_producers {
                    return Err(ErrorCode::PolicyViolation);
                }
                next.txn_first_offset = Some(-1);
            }
            fresh += 1;
            next.push(batch.producer_epoch, metadata(batch, -1, -1));
            pending.insert(pid, next);
        }
        match first_duplicate {
            None => Ok(Verdict::Append),
            Some(d) if fresh == 0 && duplicates > 0 => Ok(Verdict::Duplicate(d)),
            Some(_) => Err(ErrorCode::OutOfOrderSequenceNumber),
        }
    }

    /// Files an appended batch under the offset it was given. Called for every
    /// batch after it is in the log, in offset order: by the produce path after its
    /// append, by a follower after appending replicated batches, and by [`rebuild`].
    /// Batches without a producer id are ignored. No check is made: the log is the
    /// truth. A transactional batch from a producer without an open transaction
    /// opens one at its base offset.
    pub fn record(&mut self, batch: &ProducerBatch, base_offset: i64, log_append_time_ms: i64) {
        if !batch.is_idempotent() {
            return;
        }
        let meta = metadata(batch, base_offset, log_append_time_ms);
        let entry = self.entry_mut(batch.producer_id, batch.producer_epoch);
        entry.push(batch.producer_epoch, meta);
        entry.last_timestamp = if log_append_time_ms >= 0 {
            log_append_time_ms
        } else {
            batch.max_timestamp
        };
        if batch.transactional && entry.txn_first_offset.is_none() {
            entry.txn_first_offset = Some(base_offset);
            self.txns.begin(batch.producer_id, base_offset);
        }
    }

    /// The entry of `producer_id`, created (at `epoch`, evicting the oldest idle
    /// producer when full) if the partition does not know it.
    fn entry_mut(&mut self, producer_id: i64, epoch: i16) -> &mut ProducerEntry {
        if !self.producers.contains_key(&producer_id) {
            while self.producers.len() >= self.max_producers && self.evict_oldest() {}
        }
        self.producers
            .entry(producer_id)
            .or_insert_with(|| ProducerEntry::empty(epoch))
    }

    /// Checks a transaction marker for (`producer_id`, `producer_epoch`) written by
    /// a coordinator at `coordinator_epoch`, without changing the state.
    ///
    /// Errors: `INVALID_PRODUCER_EPOCH` for an epoch older than the producer's
    /// current one (a newer one fences the producer and is accepted);
    /// `TRANSACTION_COORDINATOR_FENCED` for a coordinator epoch older than the last
    /// marker's for this producer.
    pub fn check_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
    ) -> Result<(), ErrorCode> {
        let Some(entry) = self.producers.get(&producer_id) else {
            return Ok(());
        };
        if producer_epoch < entry.epoch {
            return Err(ErrorCode::InvalidProducerEpoch);
        }
        if coordinator_epoch < entry.coordinator_epoch {
            return Err(ErrorCode::TransactionCoordinatorFenced);
        }
        Ok(())
    }

    /// Files a transaction marker appended at `offset`: the producer's open
    /// transaction, if any, ends (an abort enters the aborted index); the
    /// producer's epoch moves up to the marker's, forgetting its batches if it
    /// changed; the coordinator epoch is remembered. Called after the append, in
    /// offset order, like [`record`](Self::record). Returns the transaction ended.
    pub fn record_marker(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTxnMarker,
        offset: i64,
        timestamp: i64,
    ) -> Option<EndedTxn> {
        let entry = self.entry_mut(producer_id, producer_epoch);
        if producer_epoch > entry.epoch {
            entry.set_epoch(producer_epoch);
        }
        entry.coordinator_epoch = marker.coordinator_epoch;
        entry.last_offset = offset;
        entry.last_timestamp = timestamp;
        let first_offset = entry.txn_first_offset.take()?;
        self.txns
            .end(producer_id, first_offset, offset, marker.commit);
        Some(EndedTxn {
            first_offset,
            commit: marker.commit,
        })
    }

    /// Files a batch as stored in the log (offsets assigned): the follower's and
    /// the rebuild's way in. A control batch that is not a transaction marker is
    /// skipped.
    pub fn record_stored(&mut self, batch: &RecordBatch) {
        if batch.is_control() {
            match EndTxnMarker::from_batch(batch) {
                Ok(marker) => {
                    self.record_marker(
                        batch.producer_id(),
                        batch.producer_epoch(),
                        marker,
                        batch.base_offset(),
                        batch.max_timestamp(),
                    );
                }
                Err(e) => {
                    tracing::debug!(offset = batch.base_offset(), error = %e, "control batch skipped")
                }
            }
            return;
        }
        let append_time = match batch.timestamp_type() {
            TimestampType::LogAppendTime => batch.max_timestamp(),
            TimestampType::CreateTime => -1,
        };
        self.record(&ProducerBatch::of(batch), batch.base_offset(), append_time);
    }

    /// [`check`](Self::check) over parsed batches.
    pub fn check_batches(&self, batches: &[RecordBatch]) -> Result<Verdict, ErrorCode> {
        let headers: Vec<ProducerBatch> = batches.iter().map(ProducerBatch::of).collect();
        self.check(&headers)
    }

    /// Forgets the producer without an open transaction whose last batch is oldest
    /// (ties: the smaller id). Returns whether one was forgotten.
    fn evict_oldest(&mut self) -> bool {
        let oldest = self
            .producers
            .iter()
            .filter(|(_, e)| e.txn_first_offset.is_none())
            .min_by_key(|(pid, e)| (e.last_offset(), **pid))
            .map(|(pid, _)| *pid);
        match oldest {
            Some(pid) => self.producers.remove(&pid).is_some(),
            None => false,
        }
    }
}

fn metadata(batch: &ProducerBatch, base_offset: i64, log_append_time_ms: i64) -> BatchMetadata {
    BatchMetadata {
        first_seq: batch.base_sequence,
        last_seq: batch.last_sequence(),
        base_offset,
        last_offset_delta: batch.last_offset_delta,
        log_append_time_ms,
    }
}

/// The epoch and sequence rules for a batch that is not a retry.
fn check_sequence(entry: Option<&ProducerEntry>, batch: &ProducerBatch) -> Result<(), ErrorCode> {
    let Some(entry) = entry else {
        return if batch.base_sequence == 0 {
            Ok(())
        } else {
            Err(ErrorCode::OutOfOrderSequenceNumber)
        };
    };
    if batch.producer_epoch < entry.epoch {
        return Err(ErrorCode::InvalidProducerEpoch);
    }
    let ok = if batch.producer_epoch != entry.epoch || entry.batches.is_empty() {
        batch.base_sequence == 0
    } else {
        in_sequence(entry.last_seq(), batch.base_sequence)
    };
    if ok {
        Ok(())
    } else {
        Err(ErrorCode::OutOfOrderSequenceNumber)
    }
}
