//! The producer: batching, backpressure, delivery with retries.
//!
//! [`Producer::send`] waits for buffer space, picks the record's partition and
//! appends it to that partition's current batch in the accumulator, then returns a
//! [`DeliveryFuture`]. A background sender task drains batches that are ready (their
//! linger elapsed, they are full, or a flush or close is under way), groups them by
//! leader broker into Produce requests, and resolves each record's future with its
//! offset or its error.
//!
//! # Ownership
//!
//! The producer takes each [`ProducerRecord`] by value and holds its [`bytes::Bytes`]
//! until the record's outcome is final (delivered, or failed for good); the outcome
//! hands the record back ([`RecordMetadata::into_record`],
//! [`ProduceError::into_record`]). No buffer is released earlier, so a buffer pool
//! can never reclaim bytes the producer may still send. This holds for cancelled
//! records too: [`CancelOutcome::NeverSent`] hands the record back at once (the
//! producer keeps nothing), while a record cancelled [`CancelOutcome::InFlight`] is
//! held until its outcome is final, and a record whose [`DeliveryFuture`] was
//! dropped is dropped by the producer at that moment.
//!
//! # Compression
//!
//! [`ProducerBuilder::compression`] picks the codec of every batch the producer
//! writes (default [`Compression::None`], as in the Java client's
//! `compression.type=none`), and [`ProducerBuilder::compression_level`] its level.
//! A batch is encoded and compressed once, when the sender takes it for its first
//! attempt; from then on it is immutable, and every retry resends exactly the same
//! bytes (the same CRC). The records themselves are still held, unchanged, until
//! their outcome is final. `batch_size` measures records before compression, as the
//! Java client's `batch.size` does.
//!
//! # Partitioning
//!
//! Records without an explicit partition are placed by the producer's
//! [`Partitioner`]. The [`DefaultPartitioner`] is compatible with the Java client
//! and with librdkafka's `murmur2_random`: a keyed record goes to
//! `(murmur2(key) & 0x7fffffff) % partitions` ([`partition_for_key`]); unkeyed
//! records stick to one partition until its batch is sent or full. See
//! [`DefaultPartitioner`] for details and [`RoundRobinPartitioner`] for the
//! alternative.
//!
//! # Delivery guarantees
//!
//! The producer is **idempotent** by default, with `acks=all` (as the Java client
//! since Kafka 3.0). Before its first batch it asks the cluster for a producer id and
//! epoch (InitProducerId); every batch carries them and a per-partition sequence
//! number, assigned when the batch is first sent and kept across retries, so the
//! broker writes a retried batch at most once and rejects gaps. Up to
//! [`ProducerBuilder::max_in_flight`] batches per partition (default 5) are on the
//! wire at once; a failed batch goes back into its queue in sequence order and is
//! resent alone, after the batches sent before it are back, so order within a
//! partition holds across retries.
//!
//! Retriable failures (NOT_LEADER_OR_FOLLOWER, a broken connection, a request
//! timeout) refresh the leader and retry, with exponential backoff, until the
//! delivery timeout (a time, not a count). A Produce v10 answer that names the new
//! leader (KIP-951) is used directly, without a metadata round trip.
//!
//! When a partition's sequence cannot go on (the broker answers
//! OUT_OF_ORDER_SEQUENCE_NUMBER for the next expected batch, UNKNOWN_PRODUCER_ID or
//! INVALID_PRODUCER_EPOCH, or a batch that was sent times out), the producer fails
//! that partition's sent-but-unacknowledged records with
//! [`ProduceError::IdempotenceReset`] (outcome unknown: never reported as
//! delivered), gets a new epoch (KIP-360) and starts the partition's sequence again
//! at 0. It never reports success for a record the broker did not acknowledge.
//! DUPLICATE_SEQUENCE_NUMBER means the broker already has the batch: the records are
//! reported delivered, with offset -1 (the broker no longer knows it), as the Java
//! client does.
//!
//! With [`ProducerBuilder::idempotence`]`(false)` a retry after a lost response can
//! write a batch twice (at least once), and with more than one batch in flight a
//! retry can land behind later batches.
//!
//! # Transactions
//!
//! With [`ProducerBuilder::transactional_id`] the producer writes records in
//! transactions (exactly-once with a read_committed consumer and
//! [`Producer::send_offsets_to_transaction`]); see the [`transaction`] module docs:
//!
//! ```no_run
//! # async fn demo(client: &baton_kafka::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use baton_kafka::{Producer, ProducerRecord};
//!
//! let producer = Producer::builder(client).transactional_id("billing-1").build();
//! producer.init_transactions().await?;
//! producer.begin_transaction().await?;
//! producer.send(ProducerRecord::new("invoices").value("42")).await?;
//! producer.commit_transaction().await?;
//! # Ok(()) }
//! ```
//!
//! # Cancellation
//!
//! Every way of giving up on a record has a typed outcome; see [`CancelOutcome`],
//! [`DeliveryFuture::cancel`], [`DeliveryFuture::until_cancelled`],
//! [`Producer::send_with_cancel`], [`Producer::flush_timeout`] and
//! [`Producer::close_timeout`]. Every async method documents its cancel safety.

mod accumulator;
mod config;
mod delivery;
mod error;
mod leader_watch;
mod partitioner;
mod pending;
mod record;
mod sender;
pub mod transaction;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use baton_protocol::record::RecordBatchBuilder;
use tokio::sync::{Notify, Semaphore, TryAcquireError};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use baton_protocol::record::Compression;
pub(crate) use config::ProducerConfig;
pub use config::{Acks, ProducerBuilder, ProducerConfigError, MAX_IN_FLIGHT_IDEMPOTENT};
pub use delivery::{CancelOutcome, DeliveryFuture, InFlight};
pub use error::{AttemptError, FlushTimeout, ProduceError};
pub use partitioner::{
    murmur2, partition_for_key, DefaultPartitioner, Partitioner, RoundRobinPartitioner,
};
pub use record::{ProducerRecord, RecordMetadata};
pub use transaction::{TransactionError, TransactionOutcome};

use crate::backoff::Backoff;
use crate::client::{Client, ClientError};
use accumulator::{Accumulator, TryAppend};

/// State shared by producer handles, the sender task and request tasks.
pub(crate) struct Shared {
    pub(crate) client: Client,
    pub(crate) config: ProducerConfig,
    pub(crate) partitioner: Arc<dyn Partitioner>,
    pub(crate) acc: Mutex<Accumulator>,
    /// Wakes the sender task.
    pub(crate) wake: Notify,
    /// Buffer memory, one permit per byte. `send` reserves a record's bytes (and
    /// forgets the permit); its batch gives them back when the outcome is final.
    pub(crate) memory: Arc<Semaphore>,
    /// Records whose outcome is not final yet.
    pub(crate) outstanding: Arc<AtomicUsize>,
    /// The transactional part, if the producer has a transactional id.
    pub(crate) txn: Option<transaction::TxnControl>,
    /// Metric handles and the numbers behind [`Producer::stats`].
    pub(crate) meter: Arc<crate::metrics::ProducerMeter>,
    /// This very value, for starting tasks from code that holds a reference.
    pub(crate) this: std::sync::Weak<Shared>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Accumulator> {
        self.acc.lock().expect("accumulator lock poisoned")
    }

    /// An owning handle on this value (None while it is being dropped).
    fn owner(&self) -> Option<Arc<Shared>> {
        self.this.upgrade()
    }
}

/// Closes the producer (without waiting) when the last handle is dropped.
struct Handle {
    shared: Arc<Shared>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.wake.notify_one();
    }
}

/// Produces records to Kafka with batching and retries. Cheap to clone; clones share
/// one accumulator and sender task.
///
/// When the last clone is dropped the producer closes: it accepts no more records
/// but still delivers those it holds, resolving their [`DeliveryFuture`]s. Call
/// [`Producer::close`] to wait for that.
///
/// ```no_run
/// # async fn demo(client: &baton_kafka::Client) -> Result<(), Box<dyn std::error::Error>> {
/// use baton_kafka::{Acks, Producer, ProducerRecord};
///
/// let producer = Producer::builder(client).acks(Acks::All).build();
/// let delivery = producer.send(ProducerRecord::new("events").value("hello")).await?;
/// let meta = delivery.await?;
/// println!("written at {}/{}", meta.partition, meta.offset);
/// producer.close().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Producer {
    handle: Arc<Handle>,
}

impl fmt::Debug for Producer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer")
            .field("config", &self.handle.shared.config)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Producer {
    /// Starts building a producer on `client`.
    pub fn builder(client: &Client) -> ProducerBuilder {
        ProducerBuilder::new(client)
    }

    /// Hands `record` to the producer and returns a handle on its outcome.
    ///
    /// Waits while the producer holds `buffer_memory` bytes of undelivered records
    /// (backpressure), and while the topic's metadata is loaded. The record's
    /// partition is its explicit one or the partitioner's choice.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: if the future is dropped before it completes, the record was
    /// never accepted (it is dropped with the future and never sent). Use
    /// [`Producer::send_with_cancel`] to get the record back instead. Once it
    /// returns a [`DeliveryFuture`], the record will be delivered or fail whether or
    /// not that future is polled; see [`DeliveryFuture::cancel`] to give up on it.
    pub fn send(
        &self,
        record: ProducerRecord,
    ) -> impl Future<Output = Result<DeliveryFuture, ProduceError>> + Send + '_ {
        SendFuture::new(self, None, record)
    }

    /// Like [`Producer::send`], but gives up when `token` is cancelled before the
    /// record is accepted: then it fails with [`ProduceError::Cancelled`], which
    /// hands the record back (never sent). Once accepted, the token no longer
    /// matters to this call; pass it to [`DeliveryFuture::until_cancelled`] to keep
    /// honouring it.
    ///
    /// # Cancel safety
    ///
    /// As for [`Producer::send`]: dropping the future drops the record unsent.
    pub fn send_with_cancel<'a>(
        &'a self,
        record: ProducerRecord,
        token: &'a CancellationToken,
    ) -> impl Future<Output = Result<DeliveryFuture, ProduceError>> + Send + 'a {
        SendFuture::new(self, Some(token), record)
    }

    /// `send` without waiting: the outcome of `send` if it needs no wait, else what
    /// the slow path needs to go on (nothing is accepted or reserved then).
    ///
    /// The record stays in `slot` until it is appended or handed back in an error
    /// (it is moved once, into its batch); it is still there when the slow path is
    /// needed.
    fn try_send_now(
        &self,
        slot: &mut Option<ProducerRecord>,
    ) -> Result<Result<DeliveryFuture, ProduceError>, SlowStart> {
        let shared = &self.handle.shared;
        let cfg = &shared.config;
        let record = slot.as_ref().expect("send future polled after completion");
        let size = RecordBatchBuilder::estimate_record_size(
            record.key.as_ref().map_or(0, |k| k.len()),
            record.value.as_ref().map_or(0, |v| v.len()),
            &record.headers,
        );
        let take = |slot: &mut Option<ProducerRecord>| slot.take().expect("checked above");
        let max = cfg
            .max_request_size
            .min(cfg.buffer_memory)
            .min(u32::MAX as usize);
        if size + accumulator::BATCH_OVERHEAD > max {
            let refusal = shared.lock().refusal();
            let record = take(slot);
            return Ok(Err(match refusal {
                Some(refusal) => refusal.error(record),
                None => ProduceError::RecordTooLarge {
                    size,
                    max,
                    record: Box::new(record),
                },
            }));
        }
        let Some(reserved) = self.try_reserve(size) else {
            return Err(SlowStart { size });
        };
        let fresh = shared.client.fresh_metadata_generation();
        let timestamp = record.timestamp.unwrap_or_else(|| shared.client.now_ms());
        let mut acc = shared.lock();
        if let Some(refusal) = acc.refusal() {
            drop(acc);
            return Ok(Err(refusal.error(take(slot))));
        }
        let count = if record.partition.is_some() {
            // An explicit partition: one lookup, under this lock.
            match acc.try_append(
                slot,
                fresh,
                timestamp,
                size,
                cfg.batch_size,
                cfg.delivery_timeout,
            ) {
                TryAppend::Appended(appended) => {
                    reserved.passed_on();
                    drop(acc);
                    return Ok(Ok(self.appended(appended)));
                }
                TryAppend::Missed(count) => count,
            }
        } else {
            acc.partition_count(&record.topic, fresh)
        };
        drop(acc);
        let Some(count) = count else {
            return Err(SlowStart { size });
        };
        let record = take(slot);
        let partition = match record.partition {
            Some(p) => p,
            None => shared
                .partitioner
                .partition(&record.topic, record.key.as_deref(), count),
        };
        if !(0..count).contains(&partition) {
            return Ok(Err(invalid_partition(record, partition, count)));
        }
        Ok(self.accept(record, timestamp, size, count, partition, reserved))
    }

    /// `send` with waits: for the topic's metadata and for buffer memory. `size`
    /// is the record's estimated size.
    async fn send_slow(
        &self,
        record: ProducerRecord,
        size: usize,
        token: Option<&CancellationToken>,
    ) -> Result<DeliveryFuture, ProduceError> {
        let shared = &self.handle.shared;
        let refusal = shared.lock().refusal();
        if let Some(refusal) = refusal {
            return Err(refusal.error(record));
        }
        let count = match until(token, self.partition_count(&record.topic)).await {
            None => {
                return Err(ProduceError::Cancelled {
                    record: Box::new(record),
                })
            }
            Some(Ok(n)) => n,
            Some(Err(ClientError::TopicAuthorizationFailed { topic })) => {
                return Err(ProduceError::TopicAuthorizationFailed {
                    topic,
                    partition: None,
                    record: Box::new(record),
                })
            }
            Some(Err(source)) => {
                return Err(ProduceError::Client {
                    topic: record.topic.clone(),
                    partition: record.partition,
                    source,
                    record: Box::new(record),
                })
            }
        };
        let partition = match record.partition {
            Some(p) => p,
            None => shared
                .partitioner
                .partition(&record.topic, record.key.as_deref(), count),
        };
        if !(0..count).contains(&partition) {
            return Err(invalid_partition(record, partition, count));
        }
        let reserved = match self.try_reserve(size) {
            Some(reserved) => reserved,
            None => match until(
                token,
                shared
                    .meter
                    .waiting(shared.memory.acquire_many(size as u32)),
            )
            .await
            {
                None => {
                    return Err(ProduceError::Cancelled {
                        record: Box::new(record),
                    })
                }
                Some(permit) => {
                    permit
                        .expect("buffer memory semaphore is never closed")
                        .forget();
                    Reserved {
                        memory: &shared.memory,
                        bytes: size,
                    }
                }
            },
        };
        let timestamp = record.timestamp.unwrap_or_else(|| shared.client.now_ms());
        self.accept(record, timestamp, size, count, partition, reserved)
    }

    /// Reserves `size` bytes of buffer memory if they are free now.
    fn try_reserve(&self, size: usize) -> Option<Reserved<'_>> {
        let memory = &self.handle.shared.memory;
        match memory.try_acquire_many(size as u32) {
            Ok(permit) => {
                permit.forget();
                Some(Reserved {
                    memory,
                    bytes: size,
                })
            }
            Err(TryAcquireError::NoPermits) => None,
            Err(TryAcquireError::Closed) => unreachable!("buffer memory semaphore is never closed"),
        }
    }

    /// Appends the record (partition and memory settled) to the accumulator.
    fn accept(
        &self,
        record: ProducerRecord,
        timestamp: i64,
        size: usize,
        count: i32,
        mut partition: i32,
        reserved: Reserved<'_>,
    ) -> Result<DeliveryFuture, ProduceError> {
        let shared = &self.handle.shared;
        let cfg = &shared.config;
        // A partition the partitioner chose may move once, when the record would
        // open a new batch there (sticky partitioning). The partitioner runs outside
        // the accumulator lock.
        let mut may_move = record.partition.is_none();
        let appended = loop {
            let mut acc = shared.lock();
            if let Some(refusal) = acc.refusal() {
                return Err(refusal.error(record));
            }
            if may_move && acc.needs_new_batch(&record.topic, partition, size, cfg.batch_size) {
                drop(acc);
                may_move = false;
                partition = shared.partitioner.on_new_batch(
                    &record.topic,
                    record.key.as_deref(),
                    count,
                    partition,
                );
                if !(0..count).contains(&partition) {
                    return Err(invalid_partition(record, partition, count));
                }
                continue;
            }
            let appended = acc.append(
                partition,
                record,
                timestamp,
                size,
                cfg.batch_size,
                cfg.delivery_timeout,
            );
            reserved.passed_on();
            break appended;
        };
        Ok(self.appended(appended))
    }

    /// The delivery future of an appended record; wakes the sender if needed.
    fn appended(&self, appended: accumulator::Appended) -> DeliveryFuture {
        if appended.wake {
            self.handle.shared.wake.notify_one();
        }
        DeliveryFuture::new(appended.completion, appended.slot)
    }

    /// The partition count of `topic`. Retries retriable metadata errors until the
    /// delivery timeout. Caches the count for `send`'s fast path.
    async fn partition_count(&self, topic: &str) -> Result<i32, ClientError> {
        let shared = &self.handle.shared;
        let deadline = Instant::now() + shared.config.delivery_timeout;
        // From 10 ms up to `retry_backoff_max`.
        let mut backoff = Backoff::new(Duration::from_millis(10), shared.config.retry_backoff_max);
        loop {
            let wait = backoff.next_delay();
            match shared.client.partition_count_at(topic).await {
                Ok((n, generation)) => {
                    shared.lock().set_partition_count(topic, n, generation);
                    return Ok(n);
                }
                Err(e) if e.is_retriable() && Instant::now() + wait < deadline => {
                    tokio::time::sleep(wait).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// How many records handed to this producer (by any clone) do not have their
    /// final outcome yet. Each of them is still held, with its buffers.
    pub fn outstanding(&self) -> usize {
        self.handle.shared.outstanding.load(Ordering::Acquire)
    }

    /// This producer's numbers since it was built: records sent and failed,
    /// retries by error, requests in flight per broker, request latencies, buffer
    /// memory, and its client's connections. The same numbers go to the installed
    /// metrics recorder (see [`metrics`](crate::metrics)). Cheap: reads atomics
    /// (and the short per-broker and per-error lists).
    pub fn stats(&self) -> crate::ProducerStats {
        let shared = &self.handle.shared;
        shared.meter.stats(shared.client.connection_meter().stats())
    }

    /// Sends every record handed over before this call at once (ignoring linger) and
    /// waits until each has its final outcome.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future stops the waiting only; the records are
    /// still delivered.
    pub async fn flush(&self) {
        let shared = &self.handle.shared;
        let completions = {
            let mut acc = shared.lock();
            acc.flushes += 1;
            acc.completions()
        };
        let _guard = FlushGuard { shared };
        shared.wake.notify_one();
        for mut rx in completions {
            // Resolves (with an error) when the batch's sender side is dropped.
            let _ = rx.changed().await;
        }
    }

    /// Stops accepting records, delivers every record already handed over, and
    /// waits until each has its final outcome. Later `send` calls (on any clone)
    /// fail with [`ProduceError::Closed`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future stops the waiting only; the producer stays
    /// closed and still delivers the records it holds.
    pub async fn close(&self) {
        let shared = &self.handle.shared;
        shared.lock().closed = true;
        shared.wake.notify_one();
        loop {
            let completions = {
                let acc = shared.lock();
                if acc.is_idle() {
                    return;
                }
                acc.completions()
            };
            for mut rx in completions {
                let _ = rx.changed().await;
            }
            // A finished batch's partition is marked idle just after its outcome is
            // reported; let that happen.
            tokio::task::yield_now().await;
        }
    }
    /// [`Producer::flush`] with a deadline: `Ok(())` if every record handed over
    /// before the call has its final outcome within `timeout`, else
    /// [`FlushTimeout`] with the number of records still outstanding. Records are
    /// not cancelled by the timeout: the producer keeps delivering them (cancel
    /// individual records with [`DeliveryFuture::cancel`]).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`Producer::flush`].
    pub async fn flush_timeout(&self, timeout: Duration) -> Result<(), FlushTimeout> {
        match tokio::time::timeout(timeout, self.flush()).await {
            Ok(()) => Ok(()),
            Err(_) => Err(FlushTimeout {
                timeout,
                pending: self.outstanding(),
            }),
        }
    }

    /// [`Producer::close`] with a deadline: the producer is closed at once (later
    /// `send`s fail); `Ok(())` if every record it holds has its final outcome
    /// within `timeout`, else [`FlushTimeout`]. The records still held keep being
    /// delivered in the background until their delivery timeout, and their
    /// [`DeliveryFuture`]s still resolve.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`Producer::close`].
    pub async fn close_timeout(&self, timeout: Duration) -> Result<(), FlushTimeout> {
        match tokio::time::timeout(timeout, self.close()).await {
            Ok(()) => Ok(()),
            Err(_) => Err(FlushTimeout {
                timeout,
                pending: self.outstanding(),
            }),
        }
    }
}

/// The future of [`Producer::send`] and [`Producer::send_with_cancel`]. Its first
/// poll does all the work when nothing needs waiting for; only a wait (metadata,
/// buffer memory) goes through the boxed slow path, which keeps this future small.
struct SendFuture<'a> {
    producer: &'a Producer,
    token: Option<&'a CancellationToken>,
    /// The record until it is accepted (or handed back), or moves to `slow`.
    record: Option<ProducerRecord>,
    /// The slow path, once taken.
    slow: Option<SlowFuture<'a>>,
    /// The record's span (`ProducerBuilder::record_spans`), handed to its batch
    /// once the record is accepted.
    span: Option<tracing::Span>,
}

impl<'a> SendFuture<'a> {
    /// The future of sending `record`: adds the application's trace context
    /// (`ProducerBuilder::propagate_trace_context`) and opens the record's span,
    /// in the caller's context.
    fn new(
        producer: &'a Producer,
        token: Option<&'a CancellationToken>,
        mut record: ProducerRecord,
    ) -> Self {
        let cfg = &producer.handle.shared.config;
        if let Some(source) = &cfg.trace_context {
            crate::trace_context::inject_from(&mut record.headers, &*source.0);
        }
        let span = cfg
            .record_spans
            .then(|| {
                tracing::info_span!(
                    "kafka.record",
                    topic = record.topic.as_str(),
                    partition = tracing::field::Empty,
                    offset = tracing::field::Empty,
                    error = tracing::field::Empty,
                )
            })
            .filter(|span| !span.is_disabled());
        SendFuture {
            producer,
            token,
            record: Some(record),
            slow: None,
            span,
        }
    }

    /// Hands the record's span to its batch, or ends it with the error.
    fn sent(&mut self, result: &Result<DeliveryFuture, ProduceError>) {
        let Some(span) = self.span.take() else { return };
        match result {
            Ok(delivery) => delivery.attach_span(span),
            Err(e) => {
                span.record("error", tracing::field::display(e));
            }
        }
    }
}

/// The boxed slow path of `send`.
type SlowFuture<'a> =
    Pin<Box<dyn Future<Output = Result<DeliveryFuture, ProduceError>> + Send + 'a>>;

impl Future for SendFuture<'_> {
    type Output = Result<DeliveryFuture, ProduceError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let poll = this.poll_send(cx);
        if let Poll::Ready(result) = &poll {
            this.sent(result);
        }
        poll
    }
}

impl SendFuture<'_> {
    /// Polls the fast path once, then the slow path if it was taken.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<Result<DeliveryFuture, ProduceError>> {
        let this = self;
        if this.slow.is_none() {
            // As a biased select: a token that fired already wins.
            if this.token.is_some_and(CancellationToken::is_cancelled) {
                let record = this
                    .record
                    .take()
                    .expect("send future polled after completion");
                return Poll::Ready(Err(ProduceError::Cancelled {
                    record: Box::new(record),
                }));
            }
            match this.producer.try_send_now(&mut this.record) {
                Ok(result) => return Poll::Ready(result),
                Err(SlowStart { size }) => {
                    let record = this.record.take().expect("left for the slow path");
                    let slow = this.producer.send_slow(record, size, this.token);
                    this.slow = Some(Box::pin(slow));
                }
            }
        }
        let slow = this.slow.as_mut().expect("set above");
        slow.as_mut().poll(cx)
    }
}

/// What `send`'s slow path needs besides the record: its estimated size.
struct SlowStart {
    size: usize,
}

/// Buffer memory reserved for one record by `send`; given back on drop unless
/// passed on to the record's batch.
struct Reserved<'a> {
    memory: &'a Semaphore,
    bytes: usize,
}

impl Reserved<'_> {
    /// The record's batch holds the bytes now.
    fn passed_on(mut self) {
        self.bytes = 0;
    }
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.memory.add_permits(self.bytes);
        }
    }
}

/// The error for a record whose partition is not one of the topic's `count`.
fn invalid_partition(record: ProducerRecord, partition: i32, count: i32) -> ProduceError {
    ProduceError::InvalidPartition {
        topic: record.topic.clone(),
        partition,
        partition_count: count,
        record: Box::new(record),
    }
}

/// Runs `f` until `token` (if any) is cancelled; `None` if the token won.
async fn until<F: std::future::Future>(
    token: Option<&CancellationToken>,
    f: F,
) -> Option<F::Output> {
    match token {
        None => Some(f.await),
        Some(token) => tokio::select! {
            biased;
            () = token.cancelled() => None,
            v = f => Some(v),
        },
    }
}

/// Ends one flush's "everything is ready" window, also when `flush` is cancelled.
struct FlushGuard<'a> {
    shared: &'a Shared,
}

impl Drop for FlushGuard<'_> {
    fn drop(&mut self) {
        let mut acc = self.shared.lock();
        acc.flushes = acc.flushes.saturating_sub(1);
    }
}

/// The brokers `known`, those this client already has a connection to first
/// (they answer without a new handshake).
fn brokers_connected_first<'a>(client: &Client, known: impl Iterator<Item = &'a i32>) -> Vec<i32> {
    let mut nodes: Vec<i32> = known.copied().collect();
    nodes.sort_by_key(|id| client.existing_node_connection(*id).is_none());
    nodes
}
