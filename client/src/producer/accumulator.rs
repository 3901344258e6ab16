//! Per-partition queues of batches waiting to be sent, the batches in flight, and
//! the idempotent producer's per-partition sequence state.
//!
//! Invariants:
//! - At most `max_in_flight` batches per partition are on the wire at once.
//! - A batch that comes back for a retry is put back into its queue in creation
//!   order (batch ids grow with creation, and so do sequence numbers within one
//!   producer identity), ahead of every batch that was never sent.
//! - A retried batch is sent again only when nothing else of its partition is in
//!   flight, so retries reach the broker one at a time and in sequence order (the
//!   Java client's "in-flight batches in sequence order" rule).
//! - A batch gets its producer id, epoch and base sequence when it first leaves the
//!   queue, and keeps them across retries; a never-sent batch has none, so
//!   removing it (cancellation) leaves no gap in the sequence.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use baton_protocol::record::{Compression, RecordBatchBuilder};
use bytes::Bytes;
use tokio::sync::{oneshot, watch, OwnedSemaphorePermit};
use tokio::time::Instant;

use super::record::{ProducerRecord, RecordMetadata};

use super::ProduceError;

/// Fixed cost of a batch on the wire (its header), counted against `batch_size`.
pub(crate) const BATCH_OVERHEAD: usize = baton_protocol::record::BATCH_HEADER_LEN;

/// Counts records whose outcome is not final yet; decremented on drop.
pub(crate) struct Outstanding(pub(crate) Arc<AtomicUsize>);

impl Outstanding {
    pub(crate) fn new(counter: &Arc<AtomicUsize>) -> Self {
        counter.fetch_add(1, Ordering::AcqRel);
        Outstanding(counter.clone())
    }
}

impl Drop for Outstanding {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A record waiting for its outcome, with what is needed to report it.
///
/// Invariant: the record (and so its `Bytes`) is held here until the outcome is
/// sent on `tx` (or the record is handed back by a cancellation).
pub(crate) struct Pending {
    /// Identifies the record for [`Accumulator::remove_unsent`].
    pub(crate) id: u64,
    pub(crate) record: ProducerRecord,
    /// The timestamp written into the batch.
    pub(crate) timestamp: i64,
    /// Estimated encoded size, counted in the batch's size.
    pub(crate) size: usize,
    pub(crate) tx: oneshot::Sender<Result<RecordMetadata, ProduceError>>,
    /// Buffer memory held by this record; released when the outcome is final.
    pub(crate) _permit: OwnedSemaphorePermit,
    /// Counts the record as outstanding until its outcome is final.
    pub(crate) _outstanding: Outstanding,
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
    /// The encoded batch, built at the first attempt and reused by retries so every
    /// attempt sends identical bytes.
    pub(crate) encoded: Option<Bytes>,
    /// Not before this instant (retry backoff).
    pub(crate) retry_at: Option<Instant>,
    /// The error of the last failed attempt, reported if the deadline passes.
    pub(crate) last_error: Option<super::AttemptError>,
    /// Dropped when the batch's outcome is final; `flush` waits on receivers.
    pub(crate) done: watch::Sender<()>,
}

impl Batch {
    fn new(
        id: u64,
        topic: Arc<str>,
        partition: i32,
        now: Instant,
        delivery_timeout: Duration,
    ) -> Self {
        Batch {
            id,
            topic,
            partition,
            records: Vec::new(),
            size: BATCH_OVERHEAD,
            created: now,
            deadline: now + delivery_timeout,
            attempts: 0,
            stamp: None,
            encoded: None,
            retry_at: None,
            last_error: None,
            done: watch::channel(()).0,
        }
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
    pub(crate) fn encoded(&mut self, codec: Compression, level: Option<i32>) -> Bytes {
        if let Some(b) = &self.encoded {
            return b.clone();
        }
        let base = self.records.first().map_or(0, |p| p.timestamp);
        let mut builder = RecordBatchBuilder::new(base).compression(codec);
        if let Some(level) = level {
            builder = builder.compression_level(level);
        }
        if let Some(s) = self.stamp {
            builder = builder.producer(s.identity.id, s.identity.epoch, s.base_sequence);
        }
        for p in &self.records {
            builder.push(
                p.timestamp,
                p.record.key.as_deref(),
                p.record.value.as_deref(),
                &p.record.headers,
            );
        }
        let bytes = builder.finish();
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
}

/// What `append` did, so the caller knows whether to wake the sender.
pub(crate) struct Appended {
    /// A new batch was started (the sender must learn its linger deadline) or a
    /// batch became full.
    pub(crate) wake: bool,
    /// The interned topic name.
    pub(crate) topic: Arc<str>,
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
    /// The cluster does not offer InitProducerId; set once, never cleared.
    pub(crate) unsupported: Option<crate::connection::ConnectionError>,
}

impl Idempotence {
    /// Whether the sender should ask for a producer id or a new epoch now.
    pub(crate) fn needs_init(&self, now: Instant) -> bool {
        self.enabled
            && self.unsupported.is_none()
            && (self.current.is_none() || self.bump_requested)
            && self.retry_at.map_or(true, |at| at <= now)
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
    /// Never-sent batches that cannot be sent because the cluster does not support
    /// idempotence.
    pub(crate) unsupported: Vec<Batch>,
    /// When something next becomes ready or expires.
    pub(crate) next: Option<Instant>,
}

/// All partition queues.
#[derive(Default)]
pub(crate) struct Accumulator {
    queues: HashMap<(Arc<str>, i32), PartitionQueue>,
    /// Interned topic names.
    names: HashSet<Arc<str>>,
    /// No new records once set.
    pub(crate) closed: bool,
    /// While non-zero, every batch is ready at once (flush in progress).
    pub(crate) flushes: usize,
    /// The next batch id.
    next_batch: u64,
    /// The idempotent producer's identity.
    pub(crate) idem: Idempotence,
}

impl Accumulator {
    /// An empty accumulator; `idempotent` turns sequence stamping on.
    pub(crate) fn new(idempotent: bool) -> Self {
        Accumulator {
            idem: Idempotence {
                enabled: idempotent,
                ..Idempotence::default()
            },
            ..Accumulator::default()
        }
    }

    fn intern(&mut self, topic: &str) -> Arc<str> {
        match self.names.get(topic) {
            Some(t) => t.clone(),
            None => {
                let t: Arc<str> = Arc::from(topic);
                self.names.insert(t.clone());
                t
            }
        }
    }

    /// Appends a record to its partition's last batch, or to a new batch if it
    /// would overflow `batch_size`.
    pub(crate) fn append(
        &mut self,
        topic: &str,
        partition: i32,
        pending: Pending,
        batch_size: usize,
        delivery_timeout: Duration,
    ) -> Appended {
        let now = Instant::now();
        let key_topic = self.intern(topic);
        let id = self.next_batch;
        let queue = self
            .queues
            .entry((key_topic.clone(), partition))
            .or_default();
        let size = pending.size;
        let mut wake = false;
        if !queue.last_fits(size, batch_size) {
            self.next_batch += 1;
            queue
                .batches
                .push_back(Batch::new(id, key_topic, partition, now, delivery_timeout));
            wake = true;
        }
        let batch = queue.batches.back_mut().expect("just ensured");
        batch.records.push(pending);
        batch.size += size;
        if batch.size >= batch_size {
            wake = true;
        }
        Appended {
            wake,
            topic: batch.topic.clone(),
        }
    }

    /// Takes the record `record_id` of `topic`/`partition` out of the accumulator if
    /// its batch never left the queue (so it is guaranteed never on the wire).
    pub(crate) fn remove_unsent(
        &mut self,
        topic: &str,
        partition: i32,
        record_id: u64,
    ) -> Option<Pending> {
        let topic = self.names.get(topic)?.clone();
        let q = self.queues.get_mut(&(topic, partition))?;
        let (bi, ri) = q.batches.iter().enumerate().find_map(|(bi, b)| {
            if b.attempts > 0 || b.encoded.is_some() || b.stamp.is_some() {
                return None;
            }
            b.records
                .iter()
                .position(|p| p.id == record_id)
                .map(|ri| (bi, ri))
        })?;
        let batch = &mut q.batches[bi];
        let pending = batch.records.remove(ri);
        batch.size -= pending.size;
        if batch.records.is_empty() {
            q.batches.remove(bi);
        }
        Some(pending)
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
        let Some(topic) = self.names.get(topic) else {
            return true;
        };
        self.queues
            .get(&(topic.clone(), partition))
            .map_or(true, |q| !q.last_fits(size, batch_size))
    }

    /// Whether nothing is queued or in flight.
    pub(crate) fn is_idle(&self) -> bool {
        self.queues
            .values()
            .all(|q| q.batches.is_empty() && q.in_flight.is_empty())
    }

    /// Whether any batch is queued (not in flight).
    pub(crate) fn has_queued(&self) -> bool {
        self.queues.values().any(|q| !q.batches.is_empty())
    }

    /// Receivers that close when every batch queued or in flight now is done.
    pub(crate) fn completions(&self) -> Vec<watch::Receiver<()>> {
        let mut out = Vec::new();
        for q in self.queues.values() {
            out.extend(q.in_flight.iter().map(|f| f.done.clone()));
            out.extend(q.batches.iter().map(|b| b.done.subscribe()));
        }
        out
    }

    /// The sequence state of `topic`/`partition`.
    pub(crate) fn seq(&self, topic: &Arc<str>, partition: i32) -> SeqState {
        self.queues
            .get(&(topic.clone(), partition))
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
        self.queues
            .get_mut(&(topic.clone(), partition))
            .map(|q| q.fence(identity))
            .unwrap_or_default()
    }

    /// Takes out every batch that is ready to send (counting it in flight), every
    /// batch whose delivery deadline passed, and the batches that cannot be sent.
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
        for q in self.queues.values_mut() {
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
                    if idem.enabled {
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
                        } else if q.seq.fenced {
                            break;
                        }
                        let count = head.count();
                        head.stamp = Some(Stamp {
                            identity,
                            base_sequence: q.seq.next,
                        });
                        q.seq.next = add_sequence(q.seq.next, count);
                    }
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
        out
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
        let queue = self.queues.entry((topic.clone(), partition)).or_default();
        queue.in_flight.retain(|f| f.id != batch_id);
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
    use std::sync::Arc;

    use baton_protocol::record::RecordBatch;
    use tokio::sync::Semaphore;

    use super::*;

    fn pending(memory: &Arc<Semaphore>, id: u64, value: &'static str) -> Pending {
        Pending {
            id,
            record: ProducerRecord::new("t").key("k").value(value),
            timestamp: 1_700_000_000_000,
            size: 40,
            tx: oneshot::channel().0,
            _permit: memory.clone().try_acquire_many_owned(1).unwrap(),
            _outstanding: Outstanding::new(&Arc::new(AtomicUsize::new(0))),
        }
    }

    /// A batch is compressed once; after a failed attempt it goes back to the front
    /// of its queue unchanged, new records go to a new batch, and the retry sends
    /// the very same bytes.
    #[tokio::test]
    async fn retries_resend_the_bytes_of_the_first_attempt() {
        let memory = Arc::new(Semaphore::new(1000));
        let timeout = Duration::from_secs(60);
        for codec in Compression::ALL {
            let mut acc = Accumulator::new(false);
            for i in 0..50 {
                let v = if i % 2 == 0 {
                    "even value"
                } else {
                    "odd value"
                };
                acc.append("t", 0, pending(&memory, i, v), 1 << 20, timeout);
            }
            let mut ready = acc.drain(Instant::now(), Duration::ZERO, 1 << 20, 1).ready;
            let mut batch = ready.pop().expect("one batch ready");
            let first = batch.encoded(codec, Some(3));
            let parsed = RecordBatch::parse(first.clone()).unwrap();
            assert_eq!(parsed.compression(), codec);
            assert_eq!(parsed.record_count(), 50);
            parsed.verify_crc().unwrap();

            batch.attempts = 1;
            let topic = batch.topic.clone();
            let id = batch.id;
            acc.finish_attempt(&topic, 0, id, None, Some(batch));
            assert!(acc.needs_new_batch("t", 0, 40, 1 << 20));
            acc.append("t", 0, pending(&memory, 99, "later"), 1 << 20, timeout);
            let mut ready = acc.drain(Instant::now(), Duration::ZERO, 1 << 20, 5).ready;
            assert_eq!(ready.len(), 1, "a retry goes out alone");
            let mut retried = ready.pop().unwrap();
            assert_eq!(retried.records.len(), 50, "the retried batch is unchanged");
            // Even a different codec setting cannot change an encoded batch.
            let again = retried.encoded(Compression::None, None);
            assert_eq!(again, first);
            assert_eq!(
                again.as_ptr(),
                first.as_ptr(),
                "the same buffer, not a rebuild"
            );
        }
    }

    /// With idempotence, up to `max_in_flight` batches of a partition go out with
    /// consecutive sequences; a failed one comes back in order and is resent alone,
    /// with its sequence, once the others are back.
    #[tokio::test]
    async fn sequences_are_stamped_once_and_kept_across_retries() {
        let memory = Arc::new(Semaphore::new(1000));
        let timeout = Duration::from_secs(60);
        let mut acc = Accumulator::new(true);
        // 7 batches of 2 records each (batch_size fits two records).
        for i in 0..14 {
            acc.append("t", 0, pending(&memory, i, "v"), 150, timeout);
        }
        let now = Instant::now();
        assert!(
            acc.drain(now, Duration::ZERO, 150, 5).ready.is_empty(),
            "no producer id yet"
        );
        let identity = ProducerIdentity { id: 7, epoch: 0 };
        acc.idem.current = Some(identity);
        let ready = acc.drain(now, Duration::ZERO, 150, 5).ready;
        let seqs: Vec<i32> = ready
            .iter()
            .map(|b| b.stamp.unwrap().base_sequence)
            .collect();
        assert_eq!(seqs, vec![0, 2, 4, 6, 8]);
        let topic = ready[0].topic.clone();
        let mut ready = ready.into_iter();
        let (b0, b1) = (ready.next().unwrap(), ready.next().unwrap());
        // b0 succeeds, b1 fails: b1 must be resent alone once nothing is in flight.
        acc.finish_attempt(&topic, 0, b0.id, Some((b0.stamp.unwrap(), 2)), None);
        assert_eq!(acc.seq(&topic, 0).last_acked, 1);
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
        let memory = Arc::new(Semaphore::new(1000));
        let mut acc = Accumulator::new(true);
        acc.idem.current = Some(ProducerIdentity { id: 1, epoch: 0 });
        for i in 0..4 {
            acc.append(
                "t",
                0,
                pending(&memory, i, "v"),
                150,
                Duration::from_secs(60),
            );
        }
        let ready = acc.drain(Instant::now(), Duration::ZERO, 150, 5).ready;
        assert_eq!(ready.len(), 2);
        let topic = ready[0].topic.clone();
        let (a, b) = (&ready[0], &ready[1]);
        acc.finish_attempt(&topic, 0, b.id, Some((b.stamp.unwrap(), 2)), None);
        acc.finish_attempt(&topic, 0, a.id, Some((a.stamp.unwrap(), 2)), None);
        assert_eq!(acc.seq(&topic, 0).last_acked, 3);
    }
}
