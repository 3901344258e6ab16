//! Per-partition queues of batches waiting to be sent.
//!
//! Invariant: at most one batch per partition is in flight, and a batch that comes
//! back for a retry goes to the *front* of its queue, so records of one partition
//! reach the broker in the order they were sent.

use std::collections::{HashMap, HashSet, VecDeque};
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

/// A record waiting for its outcome, with what is needed to report it.
pub(crate) struct Pending {
    pub(crate) record: ProducerRecord,
    /// The timestamp written into the batch.
    pub(crate) timestamp: i64,
    pub(crate) tx: oneshot::Sender<Result<RecordMetadata, ProduceError>>,
    /// Buffer memory held by this record; released when the outcome is final.
    pub(crate) _permit: OwnedSemaphorePermit,
}

/// Records of one partition sent together.
pub(crate) struct Batch {
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
    fn new(topic: Arc<str>, partition: i32, now: Instant, delivery_timeout: Duration) -> Self {
        Batch {
            topic,
            partition,
            records: Vec::new(),
            size: BATCH_OVERHEAD,
            created: now,
            deadline: now + delivery_timeout,
            attempts: 0,
            encoded: None,
            retry_at: None,
            last_error: None,
            done: watch::channel(()).0,
        }
    }

    /// The encoded batch, built (and compressed with `codec` at `level`) on first
    /// use; every later call, retries included, returns the same bytes.
    ///
    /// Invariant: once encoded, a batch never changes (`append` never adds to it),
    /// so a retry resends exactly what the first attempt sent.
    pub(crate) fn encoded(&mut self, codec: Compression, level: Option<i32>) -> Bytes {
        if let Some(b) = &self.encoded {
            return b.clone();
        }
        let base = self.records.first().map_or(0, |p| p.timestamp);
        let mut builder = RecordBatchBuilder::new(base).compression(codec);
        if let Some(level) = level {
            builder = builder.compression_level(level);
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

/// The queue of one partition.
#[derive(Default)]
pub(crate) struct PartitionQueue {
    pub(crate) batches: VecDeque<Batch>,
    /// Set while a batch of this partition is on the wire.
    pub(crate) in_flight: Option<watch::Receiver<()>>,
}

impl PartitionQueue {
    /// Whether a record of estimated size `size` can join the last batch (which
    /// must exist, never have been encoded or sent, and have room for it).
    fn last_fits(&self, size: usize, batch_size: usize) -> bool {
        self.batches.back().is_some_and(|last| {
            last.attempts == 0
                && last.encoded.is_none()
                && (last.records.is_empty() || last.size + size <= batch_size)
        })
    }
}

/// What `append` did, so the caller knows whether to wake the sender.
pub(crate) struct Appended {
    /// A new batch was started (the sender must learn its linger deadline) or a
    /// batch became full.
    pub(crate) wake: bool,
}

/// All partition queues.
#[derive(Default)]
pub(crate) struct Accumulator {
    pub(crate) queues: HashMap<(Arc<str>, i32), PartitionQueue>,
    /// Interned topic names.
    names: HashSet<Arc<str>>,
    /// No new records once set.
    pub(crate) closed: bool,
    /// While non-zero, every batch is ready at once (flush in progress).
    pub(crate) flushes: usize,
}

impl Accumulator {
    /// Appends a record of estimated size `size` to its partition's last batch, or
    /// to a new batch if it would overflow `batch_size`.
    pub(crate) fn append(
        &mut self,
        topic: &str,
        partition: i32,
        pending: Pending,
        size: usize,
        batch_size: usize,
        delivery_timeout: Duration,
    ) -> Appended {
        let now = Instant::now();
        let key_topic: Arc<str> = match self.names.get(topic) {
            Some(t) => t.clone(),
            None => {
                let t: Arc<str> = Arc::from(topic);
                self.names.insert(t.clone());
                t
            }
        };
        let queue = self
            .queues
            .entry((key_topic.clone(), partition))
            .or_default();
        let mut wake = false;
        if !queue.last_fits(size, batch_size) {
            queue
                .batches
                .push_back(Batch::new(key_topic, partition, now, delivery_timeout));
            wake = true;
        }
        let batch = queue.batches.back_mut().expect("just ensured");
        batch.records.push(pending);
        batch.size += size;
        if batch.size >= batch_size {
            wake = true;
        }
        Appended { wake }
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
            .all(|q| q.batches.is_empty() && q.in_flight.is_none())
    }

    /// Receivers that close when every batch queued or in flight now is done.
    pub(crate) fn completions(&self) -> Vec<watch::Receiver<()>> {
        let mut out = Vec::new();
        for q in self.queues.values() {
            out.extend(q.in_flight.iter().cloned());
            out.extend(q.batches.iter().map(|b| b.done.subscribe()));
        }
        out
    }

    /// Takes out every batch that is ready to send (marking its partition in
    /// flight) and every batch whose delivery deadline passed; returns both and the
    /// next instant at which something becomes ready or expires.
    pub(crate) fn drain(
        &mut self,
        now: Instant,
        linger: Duration,
        batch_size: usize,
    ) -> (Vec<Batch>, Vec<Batch>, Option<Instant>) {
        let mut ready = Vec::new();
        let mut expired = Vec::new();
        let mut next: Option<Instant> = None;
        let mut wake_at = |t: Instant| next = Some(next.map_or(t, |n: Instant| n.min(t)));
        let hurry = self.closed || self.flushes > 0;
        for q in self.queues.values_mut() {
            while q.batches.front().is_some_and(|b| b.deadline <= now) {
                expired.push(q.batches.pop_front().expect("checked"));
            }
            let Some(head) = q.batches.front() else {
                continue;
            };
            if let Some(last) = q.batches.back() {
                wake_at(last.deadline.min(head.deadline));
            }
            if q.in_flight.is_some() {
                continue;
            }
            if let Some(at) = head.retry_at {
                if at > now {
                    wake_at(at);
                    continue;
                }
            }
            let full = q.batches.len() > 1 || head.size >= batch_size;
            let lingered = head.created + linger <= now;
            if full || lingered || hurry || head.attempts > 0 {
                let batch = q.batches.pop_front().expect("checked");
                q.in_flight = Some(batch.done.subscribe());
                ready.push(batch);
            } else {
                wake_at(head.created + linger);
            }
        }
        self.queues
            .retain(|_, q| !q.batches.is_empty() || q.in_flight.is_some());
        (ready, expired, next)
    }

    /// Marks `batch`'s partition no longer in flight and, for a retry, puts the
    /// batch back at the front of its queue.
    pub(crate) fn finish_attempt(
        &mut self,
        topic: &Arc<str>,
        partition: i32,
        retry: Option<Batch>,
    ) {
        let queue = self.queues.entry((topic.clone(), partition)).or_default();
        queue.in_flight = None;
        if let Some(batch) = retry {
            queue.batches.push_front(batch);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use baton_protocol::record::RecordBatch;
    use tokio::sync::Semaphore;

    use super::*;

    fn pending(memory: &Arc<Semaphore>, value: &'static str) -> Pending {
        Pending {
            record: ProducerRecord::new("t").key("k").value(value),
            timestamp: 1_700_000_000_000,
            tx: oneshot::channel().0,
            _permit: memory.clone().try_acquire_many_owned(1).unwrap(),
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
            let mut acc = Accumulator::default();
            for i in 0..50 {
                let v = if i % 2 == 0 {
                    "even value"
                } else {
                    "odd value"
                };
                acc.append("t", 0, pending(&memory, v), 40, 1 << 20, timeout);
            }
            let (mut ready, _, _) = acc.drain(Instant::now(), Duration::ZERO, 1 << 20);
            let mut batch = ready.pop().expect("one batch ready");
            let first = batch.encoded(codec, Some(3));
            let parsed = RecordBatch::parse(first.clone()).unwrap();
            assert_eq!(parsed.compression(), codec);
            assert_eq!(parsed.record_count(), 50);
            parsed.verify_crc().unwrap();

            batch.attempts = 1;
            let topic = batch.topic.clone();
            acc.finish_attempt(&topic, 0, Some(batch));
            assert!(acc.needs_new_batch("t", 0, 40, 1 << 20));
            acc.append("t", 0, pending(&memory, "later"), 40, 1 << 20, timeout);
            let (mut ready, _, _) = acc.drain(Instant::now(), Duration::ZERO, 1 << 20);
            assert_eq!(ready.len(), 1, "one batch per partition in flight");
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
}
