//! The per-partition producer state table: the checks a produce passes before its
//! offsets are assigned, and what is recorded after the append (see the
//! [module docs](crate::producer_state)).

use std::collections::{HashMap, VecDeque};

use baton_protocol::record::{RecordBatch, TimestampType};
use baton_protocol::ErrorCode;

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
}

impl ProducerBatch {
    /// The producer fields of `batch`.
    pub fn of(batch: &RecordBatch) -> Self {
        ProducerBatch {
            producer_id: batch.producer_id(),
            producer_epoch: batch.producer_epoch(),
            base_sequence: batch.base_sequence(),
            last_offset_delta: batch.last_offset_delta(),
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
/// Invariant: `batches` holds 1 to [`BATCHES_PER_PRODUCER`] entries, all written
/// with `epoch`, in increasing offset order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    epoch: i16,
    batches: VecDeque<BatchMetadata>,
}

impl ProducerEntry {
    /// The producer's current epoch in this partition.
    pub fn epoch(&self) -> i16 {
        self.epoch
    }

    /// The cached batches, oldest first.
    pub fn batches(&self) -> impl Iterator<Item = &BatchMetadata> {
        self.batches.iter()
    }

    /// The most recent batch.
    fn last(&self) -> &BatchMetadata {
        self.batches
            .back()
            .expect("a producer entry holds at least one batch")
    }

    /// The last sequence number the producer wrote.
    pub fn last_seq(&self) -> i32 {
        self.last().last_seq
    }

    /// The offset of the producer's last record in the log.
    pub fn last_offset(&self) -> i64 {
        self.last().last_offset()
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

    /// Files a batch: a new epoch forgets the old epoch's batches; beyond
    /// [`BATCHES_PER_PRODUCER`] the oldest is dropped.
    fn push(&mut self, epoch: i16, meta: BatchMetadata) {
        if epoch != self.epoch {
            self.batches.clear();
            self.epoch = epoch;
        }
        if self.batches.len() == BATCHES_PER_PRODUCER {
            self.batches.pop_front();
        }
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

/// Every producer's state in one partition. I/O-free: the partition feeds it batch
/// headers and appends by itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerStateTable {
    producers: HashMap<i64, ProducerEntry>,
    /// The most producers kept. Invariant: `producers.len() <= max_producers`, and
    /// `max_producers >= 1`.
    max_producers: usize,
}

impl Default for ProducerStateTable {
    fn default() -> Self {
        Self::with_max_producers(MAX_PRODUCERS_PER_PARTITION)
    }
}

impl ProducerStateTable {
    /// An empty table (a partition with an empty log) keeping at most
    /// [`MAX_PRODUCERS_PER_PARTITION`] producers.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty table keeping at most `max_producers` producers (at least one).
    pub fn with_max_producers(max_producers: usize) -> Self {
        ProducerStateTable {
            producers: HashMap::new(),
            max_producers: max_producers.max(1),
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

    /// Forgets every producer.
    pub fn clear(&mut self) {
        self.producers.clear();
    }

    /// Checks a produce request's batches (in order) without changing the state.
    /// Batches without a producer id pass unchecked.
    ///
    /// Errors: `INVALID_RECORD` for an idempotent batch with a negative sequence;
    /// `INVALID_PRODUCER_EPOCH` for a stale epoch; `OUT_OF_ORDER_SEQUENCE_NUMBER` for
    /// a gap, a new epoch not starting at 0, an unknown producer not starting at 0,
    /// or a request mixing retried and new batches.
    pub fn check(&self, batches: &[ProducerBatch]) -> Result<Verdict, ErrorCode> {
        // The entries as the earlier batches of this request leave them.
        let mut pending: HashMap<i64, ProducerEntry> = HashMap::new();
        let mut first_duplicate: Option<Duplicate> = None;
        let mut duplicates = 0usize;
        let mut fresh = 0usize;
        for batch in batches {
            if !batch.is_idempotent() {
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
            fresh += 1;
            let mut next = entry.cloned().unwrap_or_else(|| ProducerEntry {
                epoch: batch.producer_epoch,
                batches: VecDeque::new(),
            });
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
    /// truth.
    pub fn record(&mut self, batch: &ProducerBatch, base_offset: i64, log_append_time_ms: i64) {
        if !batch.is_idempotent() {
            return;
        }
        let meta = metadata(batch, base_offset, log_append_time_ms);
        if let Some(entry) = self.producers.get_mut(&batch.producer_id) {
            entry.push(batch.producer_epoch, meta);
            return;
        }
        while self.producers.len() >= self.max_producers {
            self.evict_oldest();
        }
        let mut batches = VecDeque::with_capacity(BATCHES_PER_PRODUCER);
        batches.push_back(meta);
        self.producers.insert(
            batch.producer_id,
            ProducerEntry {
                epoch: batch.producer_epoch,
                batches,
            },
        );
        debug_assert!(self.producers.len() <= self.max_producers);
    }

    /// Files a batch as stored in the log (offsets assigned): the follower's and
    /// the rebuild's way in. Control batches carry no producer data and are skipped.
    pub fn record_stored(&mut self, batch: &RecordBatch) {
        if batch.is_control() {
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

    /// Forgets the producer whose last batch is oldest (ties: the smaller id).
    fn evict_oldest(&mut self) {
        let oldest = self
            .producers
            .iter()
            .min_by_key(|(pid, e)| (e.last_offset(), **pid))
            .map(|(pid, _)| *pid);
        if let Some(pid) = oldest {
            self.producers.remove(&pid);
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
    let ok = if batch.producer_epoch != entry.epoch {
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
