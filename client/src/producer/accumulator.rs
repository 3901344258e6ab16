//! Per-partition queues of batches waiting to be sent, the batches in flight, and
//! the idempotent producer's per-partition sequence state.
//!
//! Invariants:
//! - At most `max_in_flight` batches per partition are on the wire at once.
//! - With idempotence, at most `max_in_flight` batches of a partition carry
//!   sequences past its oldest unacknowledged batch (sent, outcome not known yet).
//!   Brokers remember a producer's last 5 batches per partition; a resent batch
//!   that was written after all (say by a leader that died before answering, and
//!   replicated to the next one) is then still among them and is answered as a
//!   duplicate. Without the bound, batches sent to a new leader while the old
//!   one still held a request could push it out, and its resend would be
//!   rejected as out of order although its records are in the log.
//! - A batch that comes back for a retry is put back into its queue in creation
//!   order (batch ids grow with creation, and so do sequence numbers within one
//!   producer identity), ahead of every batch that was never sent.
//! - A retried batch is sent again only when nothing else of its partition is in
//!   flight, so retries reach the broker one at a time and in sequence order (the
//!   Java client's "in-flight batches in sequence order" rule).
//! - A batch gets its producer id, epoch and base sequence when it first leaves the
//!   queue, and keeps them across retries; a never-sent batch has none, so
//!   removing it (cancellation) leaves no gap in the sequence.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use baton_protocol::record::{BatchSegments, Compression, RecordBatchBuilder};
use tokio::sync::{watch, Semaphore};
use tokio::time::Instant;

use super::delivery::Completion;
use super::pending::{Pending, RecordPool};
use super::record::{ProducerRecord, RecordMetadata};
use super::transaction::TransactionError;
use super::{ProduceError, Shared};

/// Fixed cost of a batch on the wire (its header), counted against `batch_size`.
pub(crate) const BATCH_OVERHEAD: usize = baton_protocol::record::BATCH_HEADER_LEN;

/// A fast, non-cryptographic hasher for the producer's topic and partition maps
/// (whose keys come from the application, not from the wire).
#[derive(Default, Clone, Copy)]
pub(crate) struct FastHasher(u64);

impl FastHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.add(u64::from_le_bytes(w.try_into().expect("8 bytes")));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut buf = [0u8; 8];
            buf[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(buf));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }

    #[inline]
    fn write_i32(&mut self, i: i32) {
        self.add(i as u32 as u64);
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map with [`FastHasher`].
pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// What a batch holds of the producer's limits: buffer memory (bytes) and
/// outstanding records, released when the batch is dropped (its outcome final) or,
/// per record, when a record is taken out of it.
struct Held {
    memory: Arc<Semaphore>,
    outstanding: Arc<AtomicUsize>,
    bytes: usize,
    records: usize,
}

impl Held {
    /// Releases one record of `bytes`.
    fn release(&mut self, bytes: usize) {
        let bytes = bytes.min(self.bytes);
        self.bytes -= bytes;
        self.memory.add_permits(bytes);
        if self.records > 0 {
            self.records -= 1;
            self.outstanding.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.memory.add_permits(self.bytes);
        }
        if self.records > 0 {
            self.outstanding.fetch_sub(self.records, Ordering::AcqRel);
        }
    }
}

/// A batch's [`Completion`]; if the batch is dropped without being settled, its
/// records' futures resolve to [`ProduceError::Closed`].
pub(crate) struct CompletionGuard(pub(crate) Arc<Completion>);

impl Drop for CompletionGuard {
    fn drop(&mut self) {
        if !self.0.is_settled() {
            self.0.settle_each(Vec::new());
        }
    }
}

/// A producer id and epoch (KIP-98).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProducerIdentity {
    pub(crate) id: i64,
    pub(crate) epoch: i16,
}

/// The idempotence fields of a batch: who wrote it and its first sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub(crate) identity: ProducerIdentity,
    pub(crate) base_sequence: i32,
}

/// `seq + n` with Kafka's wrap-around from `i32::MAX` to 0.
pub(crate) fn add_sequence(seq: i32, n: i32) -> i32 {
    if seq > i32::MAX - n {
        n - (i32::MAX - seq) - 1
    } else {
        seq + n
    }
}

/// Whether sequence `a` comes after `b`, allowing for the wrap-around (sequences
/// in use at once are far less than 2^30 apart).
pub(crate) fn sequence_after(a: i32, b: i32) -> bool {
    let d = a.wrapping_sub(b) & i32::MAX;
    d > 0 && d < 1 << 30
}

/// Records of one partition sent together.
pub(crate) struct Batch {
    /// Grows with creation (over the whole producer).
    pub(crate) id: u64,
    pub(crate) topic: Arc<str>,
    pub(crate) partition: i32,
    pub(crate) records: Vec<Pending>,
    /// Estimated encoded size, header included.
    pub(crate) size: usize,
    pub(crate) created: Instant,
    /// When the batch fails with DeliveryTimeout if not delivered.
    pub(crate) deadline: Instant,
    /// How many times the batch was put on the wire.
    pub(crate) attempts: u32,
    /// Producer id, epoch and base sequence, set when the batch first leaves its
    /// queue with idempotence on; kept across retries.
    pub(crate) stamp: Option<Stamp>,
    /// Written inside a transaction (the batch's TRANSACTIONAL attribute); set
    /// with `stamp`.
    pub(crate) transactional: bool,
    /// The encoded batch, built at the first attempt and reused by retries so every
    /// attempt sends identical bytes. Values of at least
    /// [`SHARED_VALUE_MIN`](baton_protocol::record::SHARED_VALUE_MIN) bytes are
    /// segments of their own: the caller's [`Bytes`](bytes::Bytes), not a copy.
    pub(crate) encoded: Option<BatchSegments>,
    /// Not before this instant (retry backoff).
    pub(crate) retry_at: Option<Instant>,
    /// The leader epoch of the partition leader its last attempt was routed to
    /// (-1 if unknown); a newer epoch ends a backoff that an unreachable leader
    /// started.
    pub(crate) leader_epoch: i32,
    /// The error of the last failed attempt, reported if the deadline passes.
    pub(crate) last_error: Option<super::AttemptError>,
    /// Dropped when the batch's outcome is final; `flush` waits on receivers.
    pub(crate) done: watch::Sender<()>,
    /// Where the records' futures find their outcomes.
    pub(crate) completion: CompletionGuard,
    /// The next record's slot in `completion`.
    next_slot: u32,
    /// Buffer memory and outstanding records, released when the batch is dropped.
    held: Held,
}

impl Batch {
    #[allow(clippy::too_many_arguments)]
    fn new(
        id: u64,
        topic: Arc<str>,
        partition: i32,
        now: Instant,
        delivery_timeout: Duration,
        capacity: usize,
        limits: &Limits,
    ) -> Self {
        Batch {
            completion: CompletionGuard(Arc::new(Completion::new(
                limits.owner.clone(),
                limits.pool.clone(),
                topic.clone(),
                partition,
                id,
            ))),
            next_slot: 0,
            held: Held {
                memory: limits.memory.clone(),
                outstanding: limits.outstanding.clone(),
                bytes: 0,
                records: 0,
            },
            id,
            topic,
            partition,
            records: limits.pool.take(capacity),
            size: BATCH_OVERHEAD,
            created: now,
            deadline: now + delivery_timeout,
            attempts: 0,
            stamp: None,
            transactional: false,
            encoded: None,
            retry_at: None,
            leader_epoch: -1,
            last_error: None,
            done: watch::channel(()).0,
        }
    }

    /// Settles the batch as delivered from `base_offset` (-1: unknown) on, with the
    /// broker's `log_append_time` (-1: create time); then releases the batch's
    /// buffer memory and outstanding count, then signals `done`.
    pub(crate) fn deliver(self, base_offset: i64, log_append_time: i64) {
        let Batch {
            records,
            done,
            completion,
            held,
            ..
        } = self;
        completion.0.deliver(records, base_offset, log_append_time);
        drop(held);
        drop(done);
    }

    /// Settles the batch with each record's outcome from `outcome`, then releases
    /// the batch's buffer memory and outstanding count, then signals `done`.
    pub(crate) fn settle(
        self,
        mut outcome: impl FnMut(Pending) -> Result<RecordMetadata, ProduceError>,
    ) {
        let Batch {
            records,
            done,
            completion,
            next_slot,
            held,
            ..
        } = self;
        let mut outcomes: Vec<Option<Result<RecordMetadata, ProduceError>>> =
            Vec::with_capacity(next_slot as usize);
        for p in records {
            let slot = p.slot as usize;
            while outcomes.len() < slot {
                outcomes.push(None);
            }
            outcomes.push(Some(outcome(p)));
        }
        completion.0.settle_each(outcomes);
        drop(held);
        drop(done);
    }

    /// The number of records, as a sequence increment.
    pub(crate) fn count(&self) -> i32 {
        self.records.len().min(i32::MAX as usize) as i32
    }

    /// The encoded batch, built (and compressed with `codec` at `level`) on first
    /// use; every later call, retries included, returns the same bytes.
    ///
    /// Invariant: once encoded, a batch never changes (`append` never adds to it and
    /// its stamp is set before the first encoding), so a retry resends exactly what
    /// the first attempt sent.
    pub(crate) fn encoded(&mut self, codec: Compression, level: Option<i32>) -> BatchSegments {
        if let Some(b) = &self.encoded {
            return b.clone();
        }
        let base = self.records.first().map_or(0, |p| p.timestamp);
        let mut builder = RecordBatchBuilder::new(base).compression(codec);
        if let Some(level) = level {
            builder = builder.compression_level(level);
        }
        if let Some(s) = self.stamp {
            builder = builder
                .producer(s.identity.id, s.identity.epoch, s.base_sequence)
                .transactional(self.transactional);
        }
        for p in &self.records {
            builder.push_shared(
                p.timestamp,
                p.record.key.as_deref(),
                p.record.value.as_ref(),
                &p.record.headers,
            );
        }
        let bytes = builder.finish_segments();
        self.encoded = Some(bytes.clone());
        bytes
    }
}

/// One partition's view of the idempotent producer's sequence numbers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SeqState {
    /// The identity this partition's sequences belong to (`None`: never used).
    pub(crate) identity: Option<ProducerIdentity>,
    /// The base sequence of the next fresh batch.
    pub(crate) next: i32,
    /// The last sequence the broker acknowledged, -1 if none.
    pub(crate) last_acked: i32,
    /// The sequences of `identity` are broken here (a batch was rejected or given up
    /// with an unknown outcome); fresh batches wait for a new identity.
    pub(crate) fenced: bool,
}

impl Default for SeqState {
    fn default() -> Self {
        SeqState {
            identity: None,
            next: 0,
            last_acked: -1,
            fenced: false,
        }
    }
}

/// A batch on the wire.
struct InFlight {
    id: u64,
    done: watch::Receiver<()>,
}

/// The queue of one partition.
#[derive(Default)]
pub(crate) struct PartitionQueue {
    batches: VecDeque<Batch>,
    /// Batches of this partition on the wire, oldest first.
    in_flight: Vec<InFlight>,
    pub(crate) seq: SeqState,
    /// The batches stamped with `seq.identity` from the oldest one not yet
    /// acknowledged on, in sequence order, with whether each is acknowledged: the
    /// batches a leader must still remember to recognise a resend.
    window: VecDeque<(u64, bool)>,
    /// The most records a batch of this partition held (sizes new batches).
    last_len: usize,
}

impl PartitionQueue {
    /// Whether a record of estimated size `size` can join the last batch (which
    /// must exist, never have been sent, and have room for it).
    fn last_fits(&self, size: usize, batch_size: usize) -> bool {
        self.batches.back().is_some_and(|last| {
            last.attempts == 0
                && last.encoded.is_none()
                && last.stamp.is_none()
                && (last.records.is_empty() || last.size + size <= batch_size)
        })
    }

    /// Marks the sequences of `identity` broken here and takes out the queued
    /// batches that carry them (they were sent before and cannot be resent safely
    /// behind a broken sequence).
    fn fence(&mut self, identity: ProducerIdentity) -> Vec<Batch> {
        if self.seq.identity == Some(identity) {
            self.seq.fenced = true;
        }
        let mut out = Vec::new();
        let mut keep = VecDeque::with_capacity(self.batches.len());
        for b in self.batches.drain(..) {
            if b.stamp.is_some_and(|s| s.identity == identity) {
                out.push(b);
            } else {
                keep.push_back(b);
            }
        }
        self.batches = keep;
        out
    }

    /// Batch `batch_id` has its final outcome (`acked`: the broker has it) or left
    /// its sequence behind (failed): the window then starts at the oldest batch
    /// still unacknowledged.
    fn settle_window(&mut self, batch_id: u64, acked: bool) {
        if let Some(i) = self.window.iter().position(|&(id, _)| id == batch_id) {
            if acked {
                self.window[i].1 = true;
            } else {
                self.window.remove(i);
            }
        }
        while self.window.front().is_some_and(|&(_, done)| done) {
            self.window.pop_front();
        }
    }
}

/// What `append` did, so the caller knows whether to wake the sender.
pub(crate) struct Appended {
    /// The sender must drain now or earlier than it planned: a batch became
    /// full, or a new batch's linger ends before the sender's next drain (see
    /// [`Accumulator::sender_due`]).
    pub(crate) wake: bool,
    /// When the batch the record went into was started, if this append started it.
    opened: Option<Instant>,
    /// The record's batch's completion.
    pub(crate) completion: Arc<Completion>,
    /// The record's slot in it.
    pub(crate) slot: u32,
}

/// The queues of one topic's partitions, and its cached partition count.
struct TopicQueues {
    /// The interned topic name.
    name: Arc<str>,
    /// The partition count and the metadata generation it came from.
    partition_count: Option<(i32, u64)>,
    partitions: FastMap<i32, PartitionQueue>,
}

/// Every topic's queues: a list indexed by name, never shrinking, with the last
/// topic looked up by name checked first (repeated sends to one topic then skip
/// hashing its name).
#[derive(Default)]
struct Topics {
    list: Vec<TopicQueues>,
    index: FastMap<Arc<str>, usize>,
    /// The position in `list` of the topic last looked up mutably.
    last: usize,
}

impl Topics {
    /// The position of `topic` in `list`, if it has an entry.
    fn position(&self, topic: &str) -> Option<usize> {
        match self.list.get(self.last) {
            Some(t) if *t.name == *topic => Some(self.last),
            _ => self.index.get(topic).copied(),
        }
    }

    /// The entry of `topic`, if it has one.
    fn get(&self, topic: &str) -> Option<&TopicQueues> {
        self.position(topic).map(|i| &self.list[i])
    }

    /// The entry of `topic`, if it has one, remembered as the last used.
    fn get_mut(&mut self, topic: &str) -> Option<&mut TopicQueues> {
        let i = self.position(topic)?;
        self.last = i;
        Some(&mut self.list[i])
    }

    /// The entry of `topic`, created if needed, remembered as the last used.
    fn entry(&mut self, topic: &str) -> &mut TopicQueues {
        let i = match self.position(topic) {
            Some(i) => i,
            None => {
                let name: Arc<str> = Arc::from(topic);
                self.index.insert(name.clone(), self.list.len());
                self.list.push(TopicQueues {
                    name,
                    partition_count: None,
                    partitions: FastMap::default(),
                });
                self.list.len() - 1
            }
        };
        self.last = i;
        &mut self.list[i]
    }
}

/// Why an idempotent producer can never get a producer id.
#[derive(Debug, Clone)]
pub(crate) enum InitBlocked {
    /// The cluster does not support idempotent producers.
    Unsupported(crate::connection::ConnectionError),
    /// The broker refused InitProducerId to this principal (an authorization
    /// error code).
    Unauthorized(baton_protocol::ErrorCode),
}

impl InitBlocked {
    /// The error that hands `record` back.
    pub(crate) fn error(&self, record: Box<ProducerRecord>) -> ProduceError {
        match self {
            InitBlocked::Unsupported(source) => ProduceError::IdempotenceUnsupported {
                source: source.clone(),
                record,
            },
            InitBlocked::Unauthorized(code) => ProduceError::IdempotenceUnauthorized {
                code: *code,
                record,
            },
        }
    }
}

/// Why the producer takes no records.
pub(crate) enum Refusal {
    /// It is closed.
    Closed,
    /// It can never get a producer id.
    Blocked(InitBlocked),
    /// It is transactional and no transaction takes records now.
    Transaction(TransactionError),
}

impl Refusal {
    /// The error that hands `record` back.
    pub(crate) fn error(self, record: ProducerRecord) -> ProduceError {
        match self {
            Refusal::Closed => ProduceError::Closed {
                record: Some(Box::new(record)),
            },
            Refusal::Blocked(why) => why.error(Box::new(record)),
            Refusal::Transaction(error) => ProduceError::Transaction {
                error,
                record: Box::new(record),
            },
        }
    }
}

/// What [`Accumulator::try_append`] did.
pub(crate) enum TryAppend {
    /// The record was appended.
    Appended(Appended),
    /// The record was not appended (it is still the caller's); the topic's cached
    /// partition count, if there is one.
    Missed(Option<i32>),
}

/// Where and how a record is appended.
struct Target {
    partition: i32,
    timestamp: i64,
    size: usize,
    batch_size: usize,
    delivery_timeout: Duration,
}

/// Appends the record taken out of `record` to `entry`'s partition
/// `to.partition` (see [`Accumulator::append`]).
fn append_to(
    entry: &mut TopicQueues,
    limits: &Limits,
    next_batch: &mut u64,
    record: &mut Option<ProducerRecord>,
    to: Target,
) -> Appended {
    let Target {
        partition,
        timestamp,
        size,
        batch_size,
        delivery_timeout,
    } = to;
    let queue = match entry.partitions.get_mut(&partition) {
        Some(q) => q,
        None => entry.partitions.entry(partition).or_default(),
    };
    let mut opened = None;
    if !queue.last_fits(size, batch_size) {
        // Room for as many records as the previous batch held, up to a limit.
        let capacity = queue.last_len.clamp(8, 16384);
        let now = Instant::now();
        queue.batches.push_back(Batch::new(
            *next_batch,
            entry.name.clone(),
            partition,
            now,
            delivery_timeout,
            capacity,
            limits,
        ));
        *next_batch += 1;
        opened = Some(now);
    }
    let batch = queue.batches.back_mut().expect("just ensured");
    let slot = batch.next_slot;
    batch.next_slot += 1;
    batch.records.push(Pending {
        slot,
        record: record.take().expect("a record to append"),
        timestamp,
        size,
        taken: false,
    });
    batch.size += size;
    batch.held.bytes += size;
    batch.held.records += 1;
    limits.outstanding.fetch_add(1, Ordering::AcqRel);
    if batch.records.len() > queue.last_len {
        queue.last_len = batch.records.len();
    }
    Appended {
        wake: batch.size >= batch_size,
        opened,
        completion: batch.completion.0.clone(),
        slot,
    }
}

/// What batches are created with: the producer's limits, released by each batch.
struct Limits {
    memory: Arc<Semaphore>,
    outstanding: Arc<AtomicUsize>,
    /// The producer, for the cancellation of records.
    owner: Weak<Shared>,
    /// Spare record vectors for new batches.
    pool: Arc<RecordPool>,
}

/// The idempotent producer's identity, shared by all partitions.
#[derive(Debug, Default)]
pub(crate) struct Idempotence {
    /// Whether the producer is idempotent.
    pub(crate) enabled: bool,
    /// The identity fresh batches are stamped with; `None` until InitProducerId
    /// answered.
    pub(crate) current: Option<ProducerIdentity>,
    /// A partition's sequence broke under `current`: get a new epoch (KIP-360).
    pub(crate) bump_requested: bool,
    /// Not before this instant (InitProducerId retry backoff).
    pub(crate) retry_at: Option<Instant>,
    /// Failed InitProducerId attempts in a row (for the backoff).
    pub(crate) failures: u32,
    /// The cluster does not offer InitProducerId, or refuses it to this
    /// principal; set once, never cleared.
    pub(crate) unsupported: Option<InitBlocked>,
}

impl Idempotence {
    /// Whether the sender should ask for a producer id or a new epoch now.
    pub(crate) fn needs_init(&self, now: Instant) -> bool {
        self.enabled
            && self.unsupported.is_none()
            && (self.current.is_none() || self.bump_requested)
            && self.retry_at.is_none_or(|at| at <= now)
    }
}

/// What the sender must do after a drain.
#[derive(Default)]
pub(crate) struct Drained {
    /// Batches to send now (their partitions count them in flight).
    pub(crate) ready: Vec<Batch>,
    /// Batches whose delivery deadline passed while queued.
    pub(crate) expired: Vec<Batch>,
    /// Sent-before batches taken out because their partition's sequence broke.
    pub(crate) reset: Vec<Batch>,
    /// Partitions whose batches wait until AddPartitionsToTxn has added them to
    /// the current transaction.
    pub(crate) to_add: Vec<(Arc<str>, i32)>,
    /// Never-sent batches of a transaction that failed, with its error (as Kafka's
    /// client, they fail at once rather than wait for the abort).
    pub(crate) txn_failed: Vec<(Batch, TransactionError)>,
    /// Never-sent batches that cannot be sent because the producer can never get a
    /// producer id (see [`InitBlocked`]).
    pub(crate) unsupported: Vec<Batch>,
    /// When something next becomes ready or expires.
    pub(crate) next: Option<Instant>,
}

/// All partition queues.
pub(crate) struct Accumulator {
    topics: Topics,
    limits: Limits,
    /// No new records once set.
    pub(crate) closed: bool,
    /// While non-zero, every batch is ready at once (flush in progress).
    pub(crate) flushes: usize,
    /// The next batch id.
    next_batch: u64,
    /// The idempotent producer's identity.
    pub(crate) idem: Idempotence,
    /// The transactional producer's current transaction, as batches see it.
    pub(crate) txn: TxnGate,
    /// When the sender drains again without being woken, as its last
    /// [`Accumulator::drain`] planned (`None`: only when woken). A new batch
    /// whose linger ends at or after it needs no wake-up: that drain sees it. So
    /// with many partitions the sender is not woken (and all queues scanned)
    /// once per new batch.
    sender_due: Option<Instant>,
    /// The linger of the last drain.
    linger: Duration,
    /// Partitions whose leader could not be reached, watched for a new one.
    pub(crate) leaders: super::leader_watch::LeaderWatch,
}

/// What the accumulator and the sender know of the current transaction.
///
/// Invariant: a fresh batch leaves its queue only while the transaction is
/// error-free and its partition is in `added`; so every batch of a transaction
/// is in a partition the coordinator knows to be in it.
#[derive(Debug, Default)]
pub(crate) struct TxnGate {
    /// The producer is transactional.
    pub(crate) enabled: bool,
    /// A transaction is open and takes records (from `begin_transaction` until
    /// commit or abort starts).
    pub(crate) open: bool,
    /// Partitions AddPartitionsToTxn added to the current transaction.
    pub(crate) added: std::collections::HashSet<(Arc<str>, i32)>,
    /// The first error of the current transaction (its batches then wait, and
    /// new records are refused, until it is aborted).
    pub(crate) error: Option<TransactionError>,
    /// When the current transaction began (for the coordinator's timeout).
    pub(crate) begun: Option<Instant>,
}

impl Accumulator {
    /// An empty accumulator; `idempotent` turns sequence stamping on. Its batches
    /// hold no buffer memory of a producer (tests).
    #[cfg(test)]
    pub(crate) fn new(idempotent: bool) -> Self {
        Accumulator::for_producer(
            idempotent,
            Arc::new(Semaphore::new(0)),
            Arc::new(AtomicUsize::new(0)),
            Weak::new(),
        )
    }

    /// An empty accumulator of the producer `owner`: `idempotent` turns sequence
    /// stamping on; batches release `memory` permits (bytes reserved by `send`)
    /// and decrement `outstanding` as their records' outcomes become final.
    pub(crate) fn for_producer(
        idempotent: bool,
        memory: Arc<Semaphore>,
        outstanding: Arc<AtomicUsize>,
        owner: Weak<Shared>,
    ) -> Self {
        Accumulator {
            topics: Topics::default(),
            limits: Limits {
                memory,
                outstanding,
                owner,
                pool: Arc::new(RecordPool::default()),
            },
            closed: false,
            flushes: 0,
            next_batch: 0,
            txn: TxnGate::default(),
            sender_due: None,
            linger: Duration::ZERO,
            idem: Idempotence {
                enabled: idempotent,
                ..Idempotence::default()
            },
            leaders: Default::default(),
        }
    }

    /// Why the producer takes no records now, if it does not.
    pub(crate) fn refusal(&self) -> Option<Refusal> {
        if self.closed {
            return Some(Refusal::Closed);
        }
        if let Some(blocked) = self.idem.unsupported.clone() {
            return Some(Refusal::Blocked(blocked));
        }
        if self.txn.enabled {
            if let Some(e) = &self.txn.error {
                return Some(Refusal::Transaction(e.clone()));
            }
            if !self.txn.open {
                return Some(Refusal::Transaction(TransactionError::NoTransaction));
            }
        }
        None
    }

    /// The queue of `topic`/`partition`, if it exists.
    fn queue(&self, topic: &str, partition: i32) -> Option<&PartitionQueue> {
        self.topics.get(topic)?.partitions.get(&partition)
    }

    /// The queue of `topic`/`partition`, if it exists.
    fn queue_mut(&mut self, topic: &str, partition: i32) -> Option<&mut PartitionQueue> {
        self.topics.get_mut(topic)?.partitions.get_mut(&partition)
    }

    /// The queue of `topic`/`partition`, created if needed.
    fn queue_entry(&mut self, topic: &str, partition: i32) -> &mut PartitionQueue {
        self.topics
            .entry(topic)
            .partitions
            .entry(partition)
            .or_default()
    }

    /// The cached partition count of `topic`, if it came from metadata generation
    /// `fresh` (the current one, not stale).
    pub(crate) fn partition_count(&self, topic: &str, fresh: Option<u64>) -> Option<i32> {
        let fresh = fresh?;
        match self.topics.get(topic)?.partition_count {
            Some((count, generation)) if generation == fresh => Some(count),
            _ => None,
        }
    }

    /// Caches `count` as `topic`'s partition count from metadata generation
    /// `generation`.
    pub(crate) fn set_partition_count(&mut self, topic: &str, count: i32, generation: u64) {
        self.topics.entry(topic).partition_count = Some((count, generation));
    }

    /// Every partition queue.
    fn queues(&self) -> impl Iterator<Item = &PartitionQueue> {
        self.topics.list.iter().flat_map(|t| t.partitions.values())
    }

    /// Appends a record to its topic's `partition`'s last batch, or to a new batch if it
    /// would overflow `batch_size`. The record's `size` bytes of buffer memory,
    /// reserved by the caller, pass to the batch, which releases them when the
    /// record's outcome is final; the record counts as outstanding until then.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn append(
        &mut self,
        partition: i32,
        record: ProducerRecord,
        timestamp: i64,
        size: usize,
        batch_size: usize,
        delivery_timeout: Duration,
    ) -> Appended {
        let entry = self.topics.entry(&record.topic);
        let to = Target {
            partition,
            timestamp,
            size,
            batch_size,
            delivery_timeout,
        };
        let appended = append_to(
            entry,
            &self.limits,
            &mut self.next_batch,
            &mut Some(record),
            to,
        );
        self.with_wake(appended)
    }

    /// Sets `wake` if `appended` started a batch the sender's next planned drain
    /// would see too late (or a flush or close wants every batch sent at once).
    fn with_wake(&self, mut appended: Appended) -> Appended {
        if let Some(created) = appended.opened {
            let hurry = self.closed || self.flushes > 0;
            appended.wake |= hurry
                || self
                    .sender_due
                    .is_none_or(|due| created + self.linger < due);
        }
        appended
    }

    /// [`Accumulator::append`] of a record with an explicit partition, taken out
    /// of `record`, if the topic's partition count is cached for metadata
    /// generation `fresh` and the partition is in range; else the record stays in
    /// `record` and the cached count, if there is one, is returned (one map lookup:
    /// the fast path of `send`).
    pub(crate) fn try_append(
        &mut self,
        record: &mut Option<ProducerRecord>,
        fresh: Option<u64>,
        timestamp: i64,
        size: usize,
        batch_size: usize,
        delivery_timeout: Duration,
    ) -> TryAppend {
        let Some(r) = record.as_ref() else {
            return TryAppend::Missed(None);
        };
        let Some(entry) = self.topics.get_mut(r.topic.as_str()) else {
            return TryAppend::Missed(None);
        };
        let count = match (entry.partition_count, fresh) {
            (Some((count, generation)), Some(fresh)) if generation == fresh => count,
            _ => return TryAppend::Missed(None),
        };
        let partition = match r.partition {
            Some(p) if (0..count).contains(&p) => p,
            _ => return TryAppend::Missed(Some(count)),
        };
        let to = Target {
            partition,
            timestamp,
            size,
            batch_size,
            delivery_timeout,
        };
        let appended = append_to(entry, &self.limits, &mut self.next_batch, record, to);
        TryAppend::Appended(self.with_wake(appended))
    }

    /// Takes the record in `slot` of batch `batch_id` of `topic`/`partition` out of
    /// the accumulator if its batch never left the queue (so it is guaranteed never
    /// on the wire), releasing its buffer memory.
    pub(crate) fn remove_unsent(
        &mut self,
        topic: &str,
        partition: i32,
        batch_id: u64,
        slot: u32,
    ) -> Option<ProducerRecord> {
        let q = self.queue_mut(topic, partition)?;
        let bi = q.batches.iter().position(|b| b.id == batch_id)?;
        let batch = &mut q.batches[bi];
        if batch.attempts > 0 || batch.encoded.is_some() || batch.stamp.is_some() {
            return None;
        }
        let ri = batch.records.iter().position(|p| p.slot == slot)?;
        let pending = batch.records.remove(ri);
        batch.size -= pending.size;
        batch.held.release(pending.size);
        if batch.records.is_empty() {
            q.batches.remove(bi);
        }
        Some(pending.record)
    }

    /// Whether appending a record of estimated size `size` to `topic`/`partition`
    /// would open a new batch (the last one was sent or is full, or there is none).
    pub(crate) fn needs_new_batch(
        &self,
        topic: &str,
        partition: i32,
        size: usize,
        batch_size: usize,
    ) -> bool {
        self.queue(topic, partition)
            .is_none_or(|q| !q.last_fits(size, batch_size))
    }

    /// Whether nothing is queued or in flight.
    pub(crate) fn is_idle(&self) -> bool {
        self.queues()
            .all(|q| q.batches.is_empty() && q.in_flight.is_empty())
    }

    /// Whether any batch is queued (not in flight).
    pub(crate) fn has_queued(&self) -> bool {
        self.queues().any(|q| !q.batches.is_empty())
    }

    /// Receivers that close when every batch queued or in flight now is done.
    pub(crate) fn completions(&self) -> Vec<watch::Receiver<()>> {
        let mut out = Vec::new();
        for q in self.queues() {
            out.extend(q.in_flight.iter().map(|f| f.done.clone()));
            out.extend(q.batches.iter().map(|b| b.done.subscribe()));
        }
        out
    }

    /// The sequence state of `topic`/`partition`.
    pub(crate) fn seq(&self, topic: &Arc<str>, partition: i32) -> SeqState {
        self.queue(topic, partition)
            .map(|q| q.seq)
            .unwrap_or_default()
    }

    /// Breaks the sequences of `identity` on `topic`/`partition`: fresh batches of
    /// the partition wait for a new epoch, which is requested; returns the queued
    /// batches that carried those sequences (their outcome is unknown; the caller
    /// fails them).
    pub(crate) fn fence(
        &mut self,
        topic: &Arc<str>,
        partition: i32,
        identity: ProducerIdentity,
    ) -> Vec<Batch> {
        if self.idem.current == Some(identity) {
            self.idem.bump_requested = true;
        }
        self.queue_mut(topic, partition)
            .map(|q| q.fence(identity))
            .unwrap_or_default()
    }

    /// Takes out every batch that is ready to send (counting it in flight), every
    /// batch whose delivery deadline passed, and the batches that cannot be sent.
    /// The caller is the sender, which drains again by `Drained::next` (or at once
    /// after dispatching what was taken out); appends rely on that to skip waking
    /// it for batches that drain will see in time.
    pub(crate) fn drain(
        &mut self,
        now: Instant,
        linger: Duration,
        batch_size: usize,
        max_in_flight: usize,
    ) -> Drained {
        let mut out = Drained::default();
        let mut next: Option<Instant> = None;
        let mut wake_at = |t: Instant| next = Some(next.map_or(t, |n: Instant| n.min(t)));
        let hurry = self.closed || self.flushes > 0;
        let idem = &mut self.idem;
        let txn = &self.txn;
        for q in self
            .topics
            .list
            .iter_mut()
            .flat_map(|t| t.partitions.values_mut())
        {
            while q.batches.front().is_some_and(|b| b.deadline <= now) {
                let b = q.batches.pop_front().expect("checked");
                if let Some(s) = b.stamp {
                    // Sent before, outcome unknown: the sequence cannot go on.
                    if idem.current == Some(s.identity) {
                        idem.bump_requested = true;
                    }
                    out.reset.extend(q.fence(s.identity));
                }
                out.expired.push(b);
            }
            if idem.unsupported.is_some() {
                out.unsupported.extend(q.batches.drain(..));
                continue;
            }
            if let Some(error) = txn.error.as_ref().filter(|_| txn.enabled) {
                let mut keep = VecDeque::new();
                for b in q.batches.drain(..) {
                    if b.stamp.is_none() && b.attempts == 0 {
                        out.txn_failed.push((b, error.clone()));
                    } else {
                        keep.push_back(b);
                    }
                }
                q.batches = keep;
            }
            if let (Some(head), Some(last)) = (q.batches.front(), q.batches.back()) {
                wake_at(head.deadline.min(last.deadline));
            }
            loop {
                let queued = q.batches.len();
                let Some(head) = q.batches.front_mut() else {
                    break;
                };
                if q.in_flight.len() >= max_in_flight.max(1) {
                    break;
                }
                if let Some(at) = head.retry_at {
                    if at > now {
                        wake_at(at);
                        break;
                    }
                }
                let retry = head.attempts > 0 || head.stamp.is_some();
                if retry {
                    if !q.in_flight.is_empty() {
                        break;
                    }
                } else {
                    let full = queued > 1 || head.size >= batch_size;
                    let lingered = head.created + linger <= now;
                    if !(full || lingered || hurry) {
                        wake_at(head.created + linger);
                        break;
                    }
                    if txn.enabled {
                        if txn.error.is_some() {
                            // The transaction will be aborted; its batches wait
                            // for that.
                            break;
                        }
                        if !txn.added.contains(&(head.topic.clone(), head.partition)) {
                            out.to_add.push((head.topic.clone(), head.partition));
                            break;
                        }
                    }
                }
                // A fresh batch, or one given back unstamped because the leader
                // refused its only attempt (sent again under a new epoch).
                if idem.enabled && head.stamp.is_none() {
                    let Some(identity) = idem.current else {
                        break;
                    };
                    if q.seq.identity != Some(identity) {
                        if !q.in_flight.is_empty() {
                            // Batches of the previous identity are still out.
                            break;
                        }
                        q.seq = SeqState {
                            identity: Some(identity),
                            ..SeqState::default()
                        };
                        q.window.clear();
                    } else if q.seq.fenced {
                        break;
                    }
                    if q.window.len() >= max_in_flight.max(1) {
                        // The oldest unacknowledged batch must stay among the
                        // last batches the leader remembers (module docs).
                        break;
                    }
                    if q.seq.last_acked < 0 && !q.in_flight.is_empty() {
                        // No batch of this identity is acknowledged yet, so the
                        // leader may hold no state for the producer, and Apache
                        // Kafka then accepts any sequence: a later batch could be
                        // written ahead of a first one that failed (say with
                        // NOT_LEADER_OR_FOLLOWER on a fresh topic), leaving a
                        // hole no resend can fill. One batch at a time until the
                        // first is acknowledged.
                        break;
                    }
                    let count = head.count();
                    head.stamp = Some(Stamp {
                        identity,
                        base_sequence: q.seq.next,
                    });
                    head.transactional = txn.enabled;
                    q.seq.next = add_sequence(q.seq.next, count);
                    q.window.push_back((head.id, false));
                }
                let batch = q.batches.pop_front().expect("checked");
                q.in_flight.push(InFlight {
                    id: batch.id,
                    done: batch.done.subscribe(),
                });
                out.ready.push(batch);
                if retry {
                    break;
                }
            }
        }
        out.next = next;
        // A batch taken out means the sender dispatches and drains again at once.
        self.sender_due = if out.ready.is_empty() {
            next
        } else {
            Some(now)
        };
        self.linger = linger;
        out
    }

    /// Ends the retry backoff of every queued batch of `topic`/`partition` (its
    /// leader changed). The batches keep their order in the queue, so they go out
    /// in sequence order as before. Returns whether any batch was waiting.
    pub(crate) fn hasten(&mut self, topic: &str, partition: i32) -> bool {
        let Some(q) = self.queue_mut(topic, partition) else {
            return false;
        };
        let mut any = false;
        for b in q.batches.iter_mut() {
            any |= b.retry_at.take().is_some();
        }
        any
    }

    /// Whether a queued batch of `topic`/`partition` waits out a retry backoff
    /// that ends after `now`.
    pub(crate) fn backing_off(&self, topic: &str, partition: i32, now: Instant) -> bool {
        self.queue(topic, partition).is_some_and(|q| {
            q.batches
                .iter()
                .any(|b| b.retry_at.is_some_and(|at| at > now))
        })
    }

    /// Takes every queued batch out (the transaction is being aborted): never-sent
    /// ones and those waiting for a retry. Returns them and whether any had been
    /// sent (its sequence numbers are then used up: the next transaction needs a
    /// new epoch). Batches in flight stay; their outcome comes from the broker.
    pub(crate) fn take_queued(&mut self) -> (Vec<Batch>, bool) {
        let mut out = Vec::new();
        let mut sent = false;
        for q in self
            .topics
            .list
            .iter_mut()
            .flat_map(|t| t.partitions.values_mut())
        {
            for b in q.batches.drain(..) {
                sent |= b.stamp.is_some();
                out.push(b);
            }
        }
        (out, sent)
    }

    /// Ends one attempt of batch `batch_id`: its partition no longer counts it in
    /// flight. `acked` records the sequences the broker acknowledged; `retry` puts
    /// the batch back into its queue, in creation order.
    pub(crate) fn finish_attempt(
        &mut self,
        topic: &Arc<str>,
        partition: i32,
        batch_id: u64,
        acked: Option<(Stamp, i32)>,
        retry: Option<Batch>,
    ) {
        let queue = self.queue_entry(topic, partition);
        queue.in_flight.retain(|f| f.id != batch_id);
        if retry.is_none() {
            queue.settle_window(batch_id, acked.is_some());
        }
        if let Some((stamp, count)) = acked {
            let last = add_sequence(stamp.base_sequence, count - 1);
            // Responses of one partition can be settled out of order (by different
            // tasks); `last_acked` only moves forward.
            if queue.seq.identity == Some(stamp.identity)
                && (queue.seq.last_acked < 0 || sequence_after(last, queue.seq.last_acked))
            {
                queue.seq.last_acked = last;
            }
        }
        if let Some(batch) = retry {
            let at = queue
                .batches
                .iter()
                .position(|b| b.id > batch.id)
                .unwrap_or(queue.batches.len());
            queue.batches.insert(at, batch);
        }
    }
}

#[cfg(test)]
mod tests {

    use baton_protocol::record::RecordBatch;
    use bytes::Bytes;

    use super::*;

    fn append(acc: &mut Accumulator, value: &'static str, batch_size: usize, timeout: Duration) {
        let record = ProducerRecord::new("t").key("k").value(value);
        acc.append(0, record, 1_700_000_000_000, 40, batch_size, timeout);
    }

    /// A new batch wakes the sender only when the sender's planned drain would
    /// see it after its linger ends: before any drain, when the last drain planned
    /// none or only a delivery deadline, during a flush, and when the batch is
    /// full at once; not when a drain is due by the batch's linger end.
    #[tokio::test(start_paused = true)]
    async fn new_batches_wake_the_sender_only_when_its_planned_drain_is_late() {
        let linger = Duration::from_millis(5);
        let big = 1 << 20;
        let send = |acc: &mut Accumulator, partition: i32, batch_size: usize| {
            let record = ProducerRecord::new("t").value("v");
            let timeout = Duration::from_secs(120);
            acc.append(
                partition,
                record,
                1_700_000_000_000,
                40,
                batch_size,
                timeout,
            )
            .wake
        };
        let mut acc = Accumulator::new(false);
        assert!(send(&mut acc, 0, big), "no drain planned yet");
        assert!(acc.drain(Instant::now(), linger, big, 5).ready.is_empty());
        // The sender drains when partition 0's batch has lingered, which is when
        // partition 1's new batch has too.
        assert!(!send(&mut acc, 1, big), "a drain is due by its linger end");
        assert!(send(&mut acc, 2, 1), "a full batch wakes at once");
        tokio::time::advance(Duration::from_millis(3)).await;
        // With a 1-byte batch size every batch is full.
        assert_eq!(acc.drain(Instant::now(), linger, 1, 5).ready.len(), 3);
        // Batches went out: the sender drains again at once.
        assert!(
            !send(&mut acc, 3, big),
            "the sender drains again after a dispatch"
        );
        assert!(acc.drain(Instant::now(), linger, big, 5).ready.is_empty());
        assert!(
            !send(&mut acc, 4, big),
            "the drain due first plans the next one"
        );
        acc.flushes += 1;
        assert!(send(&mut acc, 5, big), "a flush sends every batch at once");
        acc.flushes -= 1;

        // Only a delivery deadline planned: a batch blocked by the in-flight limit.
        let mut acc = Accumulator::new(false);
        assert!(send(&mut acc, 0, big));
        assert_eq!(
            acc.drain(Instant::now(), Duration::ZERO, big, 1)
                .ready
                .len(),
            1
        );
        assert!(
            !send(&mut acc, 0, big),
            "the sender drains again after a dispatch"
        );
        assert!(acc
            .drain(Instant::now(), Duration::ZERO, big, 1)
            .ready
            .is_empty());
        assert!(
            send(&mut acc, 1, big),
            "its linger ends long before the deadline"
        );

        // A drain that planned nothing.
        let mut acc = Accumulator::new(false);
        assert!(acc.drain(Instant::now(), linger, big, 5).ready.is_empty());
        assert!(send(&mut acc, 0, big), "no drain planned");
    }

    /// Lookups alternate between topics: the last-used shortcut and the name index
    /// agree, every topic keeps its own entry, and entries are never duplicated.
    #[test]
    fn topics_last_used_and_index_agree() {
        let mut topics = Topics::default();
        assert!(topics.get("a").is_none());
        assert!(topics.get_mut("a").is_none());
        topics.entry("a").partition_count = Some((1, 1));
        topics.entry("b").partition_count = Some((2, 1));
        topics.entry("ab").partition_count = Some((3, 1));
        for name in ["a", "b", "a", "a", "ab", "b", "b", "ab", "a"] {
            let want = match name {
                "a" => 1,
                "b" => 2,
                _ => 3,
            };
            assert_eq!(topics.get(name).unwrap().partition_count, Some((want, 1)));
            let t = topics.get_mut(name).unwrap();
            assert_eq!(&*t.name, name);
            assert_eq!(t.partition_count, Some((want, 1)));
            assert_eq!(topics.entry(name).partition_count, Some((want, 1)));
            assert!(topics.get("c").is_none(), "after {name}");
        }
        assert_eq!(topics.list.len(), 3);
        assert_eq!(topics.index.len(), 3);
    }

    /// Without compression a value of at least `SHARED_VALUE_MIN` bytes reaches the
    /// encoded batch as the caller's own buffer (a segment with the value's pointer),
    /// and a retry resends the same segments.
    #[tokio::test]
    async fn large_values_are_segments_of_the_batch_not_copies() {
        use baton_protocol::record::SHARED_VALUE_MIN;
        let timeout = Duration::from_secs(120);
        let large = Bytes::from(vec![0x5a; SHARED_VALUE_MIN]);
        let small = Bytes::from(vec![0x11; SHARED_VALUE_MIN - 1]);
        let mut acc = Accumulator::new(false);
        for v in [&large, &small, &large] {
            let record = ProducerRecord::new("t").key("k").value(v.clone());
            acc.append(
                0,
                record,
                1_700_000_000_000,
                v.len() + 40,
                16 << 20,
                timeout,
            );
        }
        let mut ready = acc.drain(Instant::now(), Duration::ZERO, 16 << 20, 1).ready;
        let mut batch = ready.pop().expect("one batch ready");
        assert_eq!(batch.records.len(), 3);
        let first = batch.encoded(Compression::None, None);
        let shared: Vec<&Bytes> = first
            .segments()
            .iter()
            .filter(|s| s.as_ptr() == large.as_ptr())
            .collect();
        assert_eq!(shared.len(), 2, "both large values shared, not copied");
        assert!(shared.iter().all(|s| s.len() == large.len()));
        assert!(
            first
                .segments()
                .iter()
                .all(|s| s.as_ptr() != small.as_ptr()),
            "a value under the threshold is copied"
        );
        let parsed = RecordBatch::parse(first.to_bytes()).unwrap();
        parsed.verify_crc().unwrap();
        let values: Vec<Option<Bytes>> = parsed
            .records()
            .unwrap()
            .map(|r| r.unwrap().value)
            .collect();
        assert_eq!(
            values,
            [Some(large.clone()), Some(small), Some(large.clone())]
        );

        batch.attempts = 1;
        let topic = batch.topic.clone();
        let id = batch.id;
        acc.finish_attempt(&topic, 0, id, None, Some(batch));
        let mut ready = acc.drain(Instant::now(), Duration::ZERO, 16 << 20, 5).ready;
        let mut retried = ready.pop().expect("the retry");
        let again = retried.encoded(Compression::None, None);
        assert_eq!(again, first);
        let ptrs = |s: &BatchSegments| s.segments().iter().map(|b| b.as_ptr()).collect::<Vec<_>>();
        assert_eq!(
            ptrs(&again),
            ptrs(&first),
            "the same segments, not a rebuild"
        );
    }

    /// A batch is compressed once; after a failed attempt it goes back to the front
    /// of its queue unchanged, new records go to a new batch, and the retry sends
    /// the very same bytes.
    #[tokio::test]
    async fn retries_resend_the_bytes_of_the_first_attempt() {
        let timeout = Duration::from_secs(60);
        for codec in Compression::ALL {
            let mut acc = Accumulator::new(false);
            for i in 0..50 {
                let v = if i % 2 == 0 {
                    "even value"
                } else {
                    "odd value"
                };
                append(&mut acc, v, 1 << 20, timeout);
            }
            let mut ready = acc.drain(Instant::now(), Duration::ZERO, 1 << 20, 1).ready;
            let mut batch = ready.pop().expect("one batch ready");
            let first = batch.encoded(codec, Some(3));
            let parsed = RecordBatch::parse(first.to_bytes()).unwrap();
            assert_eq!(parsed.compression(), codec);
            assert_eq!(parsed.record_count(), 50);
            parsed.verify_crc().unwrap();

            batch.attempts = 1;
            let topic = batch.topic.clone();
            let id = batch.id;
            acc.finish_attempt(&topic, 0, id, None, Some(batch));
            assert!(acc.needs_new_batch("t", 0, 40, 1 << 20));
            append(&mut acc, "later", 1 << 20, timeout);
            let mut ready = acc.drain(Instant::now(), Duration::ZERO, 1 << 20, 5).ready;
            assert_eq!(ready.len(), 1, "a retry goes out alone");
            let mut retried = ready.pop().unwrap();
            assert_eq!(retried.records.len(), 50, "the retried batch is unchanged");
            // Even a different codec setting cannot change an encoded batch.
            let again = retried.encoded(Compression::None, None);
            assert_eq!(again, first);
            assert_eq!(
                again.segments()[0].as_ptr(),
                first.segments()[0].as_ptr(),
                "the same buffer, not a rebuild"
            );
        }
    }

    /// Batches that failed and wait out a backoff are released by `hasten` (their
    /// leader changed) and go out again in their order, with their sequences.
    #[tokio::test]
    async fn hasten_releases_backed_off_batches_in_order() {
        let timeout = Duration::from_secs(60);
        let mut acc = Accumulator::new(true);
        for _ in 0..6 {
            append(&mut acc, "v", 150, timeout);
        }
        acc.idem.current = Some(ProducerIdentity { id: 7, epoch: 0 });
        let now = Instant::now();
        let b0 = acc.drain(now, Duration::ZERO, 150, 5).ready.pop().unwrap();
        let topic = b0.topic.clone();
        acc.finish_attempt(&topic, 0, b0.id, Some((b0.stamp.unwrap(), 2)), None);
        let ready = acc.drain(now, Duration::ZERO, 150, 5).ready;
        assert_eq!(ready.len(), 2);
        assert!(!acc.backing_off(&topic, 0, now), "nothing waits yet");
        // Both fail (the leader died) and wait out a long backoff.
        let ids: Vec<u64> = ready.iter().map(|b| b.id).collect();
        for mut b in ready.into_iter().rev() {
            b.attempts = 1;
            b.retry_at = Some(now + Duration::from_secs(3600));
            acc.finish_attempt(&topic, 0, b.id, None, Some(b));
        }
        assert!(acc.backing_off(&topic, 0, now));
        assert!(acc.drain(now, Duration::ZERO, 150, 5).ready.is_empty());
        assert!(!acc.hasten("other", 0), "no queue there");
        assert!(acc.hasten(&topic, 0));
        assert!(!acc.backing_off(&topic, 0, now));
        // One retry at a time, the oldest first, sequences kept.
        let first = acc.drain(now, Duration::ZERO, 150, 5).ready;
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].id, ids[0]);
        assert_eq!(first[0].stamp.unwrap().base_sequence, 2);
        let first = first.into_iter().next().unwrap();
        acc.finish_attempt(&topic, 0, first.id, Some((first.stamp.unwrap(), 2)), None);
        let second = acc.drain(now, Duration::ZERO, 150, 5).ready;
        assert_eq!(second[0].id, ids[1]);
        assert_eq!(second[0].stamp.unwrap().base_sequence, 4);
    }

    /// A batch the leader refused before appending (its only attempt) goes back
    /// without its sequence; once the partition's sequence is broken and a new
    /// epoch is there, it is sent again first, from sequence 0 of the new epoch,
    /// ahead of the batches behind it.
    #[tokio::test]
    async fn a_refused_batch_is_sent_again_under_the_next_epoch() {
        let timeout = Duration::from_secs(60);
        let mut acc = Accumulator::new(true);
        for _ in 0..6 {
            append(&mut acc, "v", 150, timeout);
        }
        let old = ProducerIdentity { id: 7, epoch: 0 };
        acc.idem.current = Some(old);
        let now = Instant::now();
        let first = acc.drain(now, Duration::ZERO, 150, 5).ready.pop().unwrap();
        let topic = first.topic.clone();
        acc.finish_attempt(&topic, 0, first.id, Some((first.stamp.unwrap(), 2)), None);
        let mut refused = acc.drain(now, Duration::ZERO, 150, 5).ready;
        assert_eq!(refused.len(), 2);
        let mut head = refused.remove(0);
        let behind = refused.remove(0);
        assert_eq!(head.stamp.unwrap().base_sequence, 2);
        // The sender's answer to the refusal.
        assert!(
            acc.fence(&topic, 0, old).is_empty(),
            "nothing queued was sent"
        );
        head.attempts = 1;
        head.stamp = None;
        head.encoded = None;
        acc.finish_attempt(&topic, 0, head.id, None, Some(head));
        assert!(
            acc.drain(now, Duration::ZERO, 150, 5).ready.is_empty(),
            "the old epoch's batch is still out, and no new epoch yet"
        );
        acc.finish_attempt(&topic, 0, behind.id, None, None);
        assert!(acc.drain(now, Duration::ZERO, 150, 5).ready.is_empty());
        let new = ProducerIdentity { id: 7, epoch: 1 };
        acc.idem.current = Some(new);
        let again = acc.drain(now, Duration::ZERO, 150, 5).ready;
        assert_eq!(again.len(), 1, "a resend goes alone");
        let stamp = again[0].stamp.unwrap();
        assert_eq!((stamp.identity, stamp.base_sequence), (new, 0));
        assert_eq!(again[0].count(), 2);
    }

    /// A batch whose outcome is unknown holds back fresh batches once
    /// `max_in_flight` batches carry sequences from it on, even while the later
    /// ones are acknowledged (by a new leader, say): a leader remembers a
    /// producer's last 5 batches, and the resend must still be among them.
    #[tokio::test]
    async fn an_unacknowledged_batch_bounds_the_sequences_past_it() {
        let timeout = Duration::from_secs(60);
        let mut acc = Accumulator::new(true);
        // 10 batches of 2 records each.
        for _ in 0..20 {
            append(&mut acc, "v", 150, timeout);
        }
        acc.idem.current = Some(ProducerIdentity { id: 7, epoch: 0 });
        let now = Instant::now();
        let first = acc.drain(now, Duration::ZERO, 150, 5).ready.pop().unwrap();
        let topic = first.topic.clone();
        acc.finish_attempt(&topic, 0, first.id, Some((first.stamp.unwrap(), 2)), None);
        // The stuck batch (its old leader never answers) and four after it.
        let mut out = acc.drain(now, Duration::ZERO, 150, 5).ready;
        assert_eq!(out.len(), 5);
        let stuck = out.remove(0);
        for b in out {
            acc.finish_attempt(&topic, 0, b.id, Some((b.stamp.unwrap(), 2)), None);
        }
        assert_eq!(acc.seq(&topic, 0).last_acked, 11);
        assert!(
            acc.drain(now, Duration::ZERO, 150, 5).ready.is_empty(),
            "four slots are free, but a fifth batch past the stuck one would push it out \
             of what the leader remembers"
        );
        acc.finish_attempt(&topic, 0, stuck.id, Some((stuck.stamp.unwrap(), 2)), None);
        let next = acc.drain(now, Duration::ZERO, 150, 5).ready;
        assert_eq!(next.len(), 4, "the rest goes once it is acknowledged");
        assert_eq!(next[0].stamp.unwrap().base_sequence, 12);
    }

    /// With idempotence, up to `max_in_flight` batches of a partition go out with
    /// consecutive sequences; a failed one comes back in order and is resent alone,
    /// with its sequence, once the others are back.
    #[tokio::test]
    async fn sequences_are_stamped_once_and_kept_across_retries() {
        let timeout = Duration::from_secs(60);
        let mut acc = Accumulator::new(true);
        // 7 batches of 2 records each (batch_size fits two records).
        for _ in 0..14 {
            append(&mut acc, "v", 150, timeout);
        }
        let now = Instant::now();
        assert!(
            acc.drain(now, Duration::ZERO, 150, 5).ready.is_empty(),
            "no producer id yet"
        );
        let identity = ProducerIdentity { id: 7, epoch: 0 };
        acc.idem.current = Some(identity);
        // Until a batch of the identity is acknowledged, one at a time.
        let first = acc.drain(now, Duration::ZERO, 150, 5).ready;
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].stamp.unwrap().base_sequence, 0);
        assert!(acc.drain(now, Duration::ZERO, 150, 5).ready.is_empty());
        let topic = first[0].topic.clone();
        let b0 = first.into_iter().next().unwrap();
        acc.finish_attempt(&topic, 0, b0.id, Some((b0.stamp.unwrap(), 2)), None);
        assert_eq!(acc.seq(&topic, 0).last_acked, 1);
        let ready = acc.drain(now, Duration::ZERO, 150, 5).ready;
        let seqs: Vec<i32> = ready
            .iter()
            .map(|b| b.stamp.unwrap().base_sequence)
            .collect();
        assert_eq!(seqs, vec![2, 4, 6, 8, 10]);
        let mut ready = ready.into_iter();
        let (b1, b2) = (ready.next().unwrap(), ready.next().unwrap());
        // b1 fails, b2 succeeds: b1 must be resent alone once nothing is in flight.
        acc.finish_attempt(&topic, 0, b2.id, Some((b2.stamp.unwrap(), 2)), None);
        assert_eq!(acc.seq(&topic, 0).last_acked, 5);
        let mut b1 = b1;
        b1.attempts = 1;
        let b1_id = b1.id;
        acc.finish_attempt(&topic, 0, b1_id, None, Some(b1));
        assert!(acc.drain(now, Duration::ZERO, 150, 5).ready.is_empty());
        for b in ready {
            acc.finish_attempt(&topic, 0, b.id, None, Some(b));
        }
        let again = acc.drain(now, Duration::ZERO, 150, 5).ready;
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].id, b1_id);
        assert_eq!(again[0].stamp.unwrap().base_sequence, 2);
    }

    #[test]
    fn sequences_wrap_like_kafka() {
        assert_eq!(add_sequence(5, 3), 8);
        assert_eq!(add_sequence(i32::MAX, 1), 0);
        assert_eq!(add_sequence(i32::MAX - 1, 3), 1);
        assert!(sequence_after(8, 5));
        assert!(!sequence_after(5, 8));
        assert!(!sequence_after(5, 5));
        assert!(sequence_after(1, i32::MAX - 1), "across the wrap");
        assert!(!sequence_after(i32::MAX - 1, 1));
    }

    /// Acknowledgements settled out of order never move `last_acked` back.
    #[tokio::test]
    async fn last_acked_only_moves_forward() {
        let mut acc = Accumulator::new(true);
        acc.idem.current = Some(ProducerIdentity { id: 1, epoch: 0 });
        for _ in 0..6 {
            append(&mut acc, "v", 150, Duration::from_secs(60));
        }
        let first = acc.drain(Instant::now(), Duration::ZERO, 150, 5).ready;
        let topic = first[0].topic.clone();
        acc.finish_attempt(
            &topic,
            0,
            first[0].id,
            Some((first[0].stamp.unwrap(), 2)),
            None,
        );
        let ready = acc.drain(Instant::now(), Duration::ZERO, 150, 5).ready;
        assert_eq!(ready.len(), 2);
        let (a, b) = (&ready[0], &ready[1]);
        acc.finish_attempt(&topic, 0, b.id, Some((b.stamp.unwrap(), 2)), None);
        acc.finish_attempt(&topic, 0, a.id, Some((a.stamp.unwrap(), 2)), None);
        assert_eq!(acc.seq(&topic, 0).last_acked, 5);
    }

    /// A failed first batch of an identity can never be overtaken: nothing else of
    /// the partition is sent until it is acknowledged, even when it fails and is
    /// resent (a broker without state for the producer may accept any sequence).
    #[tokio::test]
    async fn the_first_batch_of_an_identity_goes_alone() {
        let now = Instant::now();
        let mut acc = Accumulator::new(true);
        acc.idem.current = Some(ProducerIdentity { id: 3, epoch: 0 });
        for _ in 0..8 {
            append(&mut acc, "v", 150, Duration::from_secs(60));
        }
        let first = acc.drain(now, Duration::ZERO, 150, 5).ready;
        assert_eq!(first.len(), 1, "one batch while the broker may not know us");
        let topic = first[0].topic.clone();
        let mut b0 = first.into_iter().next().unwrap();
        b0.attempts = 1;
        let b0_id = b0.id;
        // It fails (NOT_LEADER_OR_FOLLOWER on a fresh topic, say) and is queued again.
        acc.finish_attempt(&topic, 0, b0_id, None, Some(b0));
        let retry = acc.drain(now, Duration::ZERO, 150, 5).ready;
        assert_eq!(retry.len(), 1);
        assert_eq!(retry[0].id, b0_id);
        assert_eq!(retry[0].stamp.unwrap().base_sequence, 0);
        assert!(acc.drain(now, Duration::ZERO, 150, 5).ready.is_empty());
        acc.finish_attempt(&topic, 0, b0_id, Some((retry[0].stamp.unwrap(), 2)), None);
        // Acknowledged: the full batches behind it go out together, in sequence (the
        // last batch is still open).
        let rest: Vec<i32> = acc
            .drain(now, Duration::ZERO, 150, 5)
            .ready
            .iter()
            .map(|b| b.stamp.unwrap().base_sequence)
            .collect();
        assert_eq!(rest, vec![2, 4]);
    }
}
