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
//! can never reclaim bytes the producer may still send.
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
//! Retriable failures (NOT_LEADER_OR_FOLLOWER, a broken connection, a request
//! timeout) refresh metadata and retry the same batch, with backoff, until the
//! delivery timeout. Order within a partition is kept: each partition has at most one
//! batch in flight and a retried batch goes back to the front of its queue.
//! Idempotence is not enabled yet, so a retry after a lost response can write a batch
//! twice: delivery is **at least once** for now.

mod accumulator;
mod partitioner;
mod record;
mod sender;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use baton_protocol::record::RecordBatchBuilder;
use baton_protocol::ErrorCode;
use tokio::sync::{oneshot, Notify, Semaphore};
use tokio::time::Instant;

pub use baton_protocol::record::Compression;
pub use partitioner::{
    murmur2, partition_for_key, DefaultPartitioner, Partitioner, RoundRobinPartitioner,
};
pub use record::{ProducerRecord, RecordMetadata};

use crate::client::{Client, ClientError};
use accumulator::{Accumulator, Pending};

/// How many acknowledgements the producer asks the broker for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Acks {
    /// No acknowledgement (`acks=0`): a record counts as delivered once written to
    /// the socket, and its offset is reported as -1. Records can be lost silently.
    None,
    /// The leader has written the record (`acks=1`).
    Leader,
    /// All in-sync replicas have the record (`acks=all`). The default.
    #[default]
    All,
}

impl Acks {
    fn wire(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }
}

/// Why one attempt to deliver a batch failed (kept to explain a later timeout).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum AttemptError {
    /// The request could not be delivered or answered (connection, metadata).
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The broker answered with an error code for this partition.
    #[error("broker error {code}{}", .message.as_ref().map(|m| format!(": {m}")).unwrap_or_default())]
    Broker {
        /// The error code.
        code: ErrorCode,
        /// The broker's message, if any.
        message: Option<String>,
    },
}

impl AttemptError {
    fn is_retriable(&self) -> bool {
        match self {
            AttemptError::Client(e) => e.is_retriable(),
            AttemptError::Broker { code, .. } => code.is_retriable(),
        }
    }
}

fn describe_last(e: &Option<Box<AttemptError>>) -> String {
    e.as_ref()
        .map_or_else(|| "none".to_string(), |e| e.to_string())
}

/// Errors of the producer, wrapping the cluster layer's [`ClientError`].
///
/// Every variant that concerns one record carries that record, handed back
/// untouched: see [`ProduceError::into_record`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProduceError {
    /// The producer was closed; the record was never accepted (never on the wire).
    #[error("the producer is closed")]
    Closed {
        /// The record, if this error concerns one.
        record: Option<Box<ProducerRecord>>,
    },
    /// The record is larger than `max_request_size` or `buffer_memory`; it was
    /// never accepted.
    #[error("record of about {size} bytes exceeds the limit of {max} bytes")]
    RecordTooLarge {
        /// Estimated encoded size.
        size: usize,
        /// The limit it exceeds.
        max: usize,
        /// The record.
        record: Box<ProducerRecord>,
    },
    /// The record's explicit partition, or the partitioner's choice, is not a
    /// partition of the topic; the record was never accepted.
    #[error(
        "partition {partition} does not exist in topic {topic} ({partition_count} partitions)"
    )]
    InvalidPartition {
        /// The topic.
        topic: String,
        /// The partition asked for.
        partition: i32,
        /// The topic's partition count.
        partition_count: i32,
        /// The record.
        record: Box<ProducerRecord>,
    },
    /// The cluster layer failed for good (unknown topic, a non-retriable connection
    /// error). `partition` is `None` if it failed before a partition was chosen, in
    /// which case the record was never on the wire.
    #[error("producing to {topic} failed: {source}")]
    Client {
        /// The topic.
        topic: String,
        /// The partition, if one was chosen.
        partition: Option<i32>,
        /// The cause.
        #[source]
        source: ClientError,
        /// The record.
        record: Box<ProducerRecord>,
    },
    /// The broker rejected the record's batch with a non-retriable error.
    #[error("broker rejected the batch for {topic}/{partition}: {code}{}", .message.as_ref().map(|m| format!(" ({m})")).unwrap_or_default())]
    Rejected {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The error code.
        code: ErrorCode,
        /// The broker's message, if any.
        message: Option<String>,
        /// The record.
        record: Box<ProducerRecord>,
    },
    /// The delivery timeout elapsed before the record was acknowledged. With
    /// `attempts == 0` the record was never on the wire; otherwise it may or may not
    /// have been written.
    #[error(
        "delivery to {topic}/{partition} timed out after {timeout:?} ({attempts} attempts); last error: {}",
        describe_last(.last_error)
    )]
    DeliveryTimeout {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The configured delivery timeout.
        timeout: Duration,
        /// How many times the record's batch was sent.
        attempts: u32,
        /// The error of the last attempt, if there was one.
        last_error: Option<Box<AttemptError>>,
        /// The record.
        record: Box<ProducerRecord>,
    },
}

impl ProduceError {
    /// The record this error concerns, if any.
    pub fn record(&self) -> Option<&ProducerRecord> {
        match self {
            ProduceError::Closed { record } => record.as_deref(),
            ProduceError::RecordTooLarge { record, .. }
            | ProduceError::InvalidPartition { record, .. }
            | ProduceError::Client { record, .. }
            | ProduceError::Rejected { record, .. }
            | ProduceError::DeliveryTimeout { record, .. } => Some(record),
        }
    }

    /// Takes back the record this error concerns, if any.
    pub fn into_record(self) -> Option<ProducerRecord> {
        match self {
            ProduceError::Closed { record } => record.map(|r| *r),
            ProduceError::RecordTooLarge { record, .. }
            | ProduceError::InvalidPartition { record, .. }
            | ProduceError::Client { record, .. }
            | ProduceError::Rejected { record, .. }
            | ProduceError::DeliveryTimeout { record, .. } => Some(*record),
        }
    }
}

/// Resolves to a sent record's outcome: where it landed, or why it failed. Both hand
/// the record back.
///
/// # Cancel safety
///
/// Dropping a `DeliveryFuture` does not cancel the delivery: the record is still
/// sent, and its outcome is simply not observed.
#[derive(Debug)]
pub struct DeliveryFuture {
    rx: oneshot::Receiver<Result<RecordMetadata, ProduceError>>,
}

impl Future for DeliveryFuture {
    type Output = Result<RecordMetadata, ProduceError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.rx)
            .poll(cx)
            .map(|r| r.unwrap_or(Err(ProduceError::Closed { record: None })))
    }
}

/// Producer settings; see [`ProducerBuilder`] for each one's meaning and default.
#[derive(Debug, Clone)]
pub(crate) struct ProducerConfig {
    pub(crate) acks: Acks,
    pub(crate) linger: Duration,
    pub(crate) batch_size: usize,
    pub(crate) buffer_memory: usize,
    pub(crate) max_request_size: usize,
    pub(crate) request_timeout: Duration,
    pub(crate) delivery_timeout: Duration,
    pub(crate) retry_backoff: Duration,
    pub(crate) retry_backoff_max: Duration,
    /// Codec of every batch. Invariant (checked at build): supported by this build.
    pub(crate) compression: Compression,
    /// Level for `compression`; `None` is the codec's default. Invariant (checked
    /// at build): in the codec's range if the codec has levels.
    pub(crate) compression_level: Option<i32>,
}

impl ProducerConfig {
    /// Checks the settings that can be wrong.
    fn validate(&self) -> Result<(), ProducerConfigError> {
        let codec = self.compression;
        if !codec.is_supported() {
            return Err(ProducerConfigError::UnsupportedCompression(codec));
        }
        if let (Some(level), Some(range)) = (self.compression_level, codec.level_range()) {
            if !range.contains(&level) {
                return Err(ProducerConfigError::InvalidCompressionLevel {
                    codec,
                    level,
                    min: *range.start(),
                    max: *range.end(),
                });
            }
        }
        Ok(())
    }
}

/// A producer setting that cannot work, reported by [`ProducerBuilder::try_build`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProducerConfigError {
    /// The codec's cargo feature (of `baton-protocol`) is off in this build; see
    /// [`Compression::is_supported`].
    #[error("compression codec {0} is not enabled in this build")]
    UnsupportedCompression(Compression),
    /// The compression level is outside the codec's range (see
    /// [`Compression::level_range`]).
    #[error("compression level {level} is outside {codec}'s range {min}..={max}")]
    InvalidCompressionLevel {
        /// The codec.
        codec: Compression,
        /// The level asked for.
        level: i32,
        /// The lowest level the codec accepts.
        min: i32,
        /// The highest level the codec accepts.
        max: i32,
    },
}

/// Builds a [`Producer`]; see [`Producer::builder`].
#[derive(Debug, Clone)]
pub struct ProducerBuilder {
    client: Client,
    config: ProducerConfig,
    partitioner: Arc<dyn Partitioner>,
}

impl ProducerBuilder {
    /// Acknowledgements to ask for (default [`Acks::All`]).
    pub fn acks(mut self, acks: Acks) -> Self {
        self.config.acks = acks;
        self
    }

    /// How long a batch waits for more records before it is sent (default 5 ms,
    /// Kafka 4's `linger.ms`).
    pub fn linger(mut self, linger: Duration) -> Self {
        self.config.linger = linger;
        self
    }

    /// Target size in bytes of one partition's batch (default 256 KiB). A batch is
    /// sent as soon as it reaches this size. This is larger than Kafka's 16 KiB
    /// because this producer keeps one batch per partition in flight; a record
    /// larger than this still goes out, alone in its batch.
    pub fn batch_size(mut self, bytes: usize) -> Self {
        self.config.batch_size = bytes.max(1);
        self
    }

    /// Bytes of records the producer may hold before [`Producer::send`] waits
    /// (default 32 MiB, Kafka's `buffer.memory`). Records are counted by their
    /// estimated encoded size and released when their outcome is final.
    pub fn buffer_memory(mut self, bytes: usize) -> Self {
        self.config.buffer_memory = bytes.clamp(1, Semaphore::MAX_PERMITS);
        self
    }

    /// The largest record accepted and the largest Produce request sent (default
    /// 1 MiB, Kafka's `max.request.size`).
    pub fn max_request_size(mut self, bytes: usize) -> Self {
        self.config.max_request_size = bytes.max(1);
        self
    }

    /// How long one Produce request may wait for its response; also sent to the
    /// broker as the request's timeout (default 30 s).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.config.request_timeout = timeout;
        self
    }

    /// How long a record may take from `send` returning to a final outcome, retries
    /// included (default 120 s, Kafka's `delivery.timeout.ms`). Should be at least
    /// `linger + request_timeout`.
    pub fn delivery_timeout(mut self, timeout: Duration) -> Self {
        self.config.delivery_timeout = timeout;
        self
    }

    /// First wait before retrying a failed batch (default 100 ms); doubles per
    /// attempt up to 1 s.
    pub fn retry_backoff(mut self, backoff: Duration) -> Self {
        self.config.retry_backoff = backoff;
        self
    }

    /// The partitioner for records without an explicit partition (default
    /// [`DefaultPartitioner`]: murmur2 for keys as the Java client, sticky for
    /// unkeyed records).
    pub fn partitioner(mut self, partitioner: impl Partitioner) -> Self {
        self.partitioner = Arc::new(partitioner);
        self
    }

    /// The codec that compresses every batch (default [`Compression::None`], as the
    /// Java client's `compression.type`). Each batch is compressed once, when it is
    /// first sent; retries resend the same compressed bytes. The codec must be
    /// enabled in this build ([`Compression::is_supported`]; all are by default),
    /// which [`ProducerBuilder::try_build`] checks.
    pub fn compression(mut self, codec: Compression) -> Self {
        self.config.compression = codec;
        self
    }

    /// The compression level (default: the codec's own default, gzip 6 and
    /// Zstandard 3, as in the Java client). Must lie in the codec's
    /// [`Compression::level_range`] (gzip 1-9, Zstandard -131072 to 22), which
    /// [`ProducerBuilder::try_build`] checks; codecs without levels here (Snappy,
    /// LZ4, none) ignore it.
    pub fn compression_level(mut self, level: i32) -> Self {
        self.config.compression_level = Some(level);
        self
    }

    /// Checks the settings, then starts the producer and its background sender
    /// task.
    ///
    /// # Errors
    ///
    /// [`ProducerConfigError`] if the compression codec is not enabled in this
    /// build or the compression level is outside the codec's range.
    ///
    /// # Panics
    ///
    /// If called outside a Tokio runtime.
    pub fn try_build(self) -> Result<Producer, ProducerConfigError> {
        self.config.validate()?;
        Ok(self.start())
    }

    /// Starts the producer and its background sender task; use
    /// [`ProducerBuilder::try_build`] when the settings come from configuration.
    ///
    /// # Panics
    ///
    /// If a setting is invalid (see [`ProducerConfigError`]: only the compression
    /// codec and level can be), or if called outside a Tokio runtime.
    pub fn build(self) -> Producer {
        if let Err(e) = self.config.validate() {
            panic!("invalid producer settings: {e}");
        }
        self.start()
    }

    fn start(self) -> Producer {
        let shared = Arc::new(Shared {
            memory: Arc::new(Semaphore::new(self.config.buffer_memory)),
            client: self.client,
            config: self.config,
            partitioner: self.partitioner,
            acc: Mutex::new(Accumulator::default()),
            wake: Notify::new(),
        });
        tokio::spawn(sender::run(shared.clone()));
        Producer {
            handle: Arc::new(Handle { shared }),
        }
    }
}

/// State shared by producer handles, the sender task and request tasks.
pub(crate) struct Shared {
    pub(crate) client: Client,
    pub(crate) config: ProducerConfig,
    pub(crate) partitioner: Arc<dyn Partitioner>,
    pub(crate) acc: Mutex<Accumulator>,
    /// Wakes the sender task.
    pub(crate) wake: Notify,
    /// Buffer memory, one permit per byte.
    pub(crate) memory: Arc<Semaphore>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Accumulator> {
        self.acc.lock().expect("accumulator lock poisoned")
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
/// # async fn demo(client: &baton::Client) -> Result<(), Box<dyn std::error::Error>> {
/// use baton::{Acks, Producer, ProducerRecord};
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

/// Now, in ms since the epoch.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl Producer {
    /// Starts building a producer on `client`.
    pub fn builder(client: &Client) -> ProducerBuilder {
        ProducerBuilder {
            client: client.clone(),
            config: ProducerConfig {
                acks: Acks::All,
                linger: Duration::from_millis(5),
                batch_size: 256 * 1024,
                buffer_memory: 32 * 1024 * 1024,
                max_request_size: 1024 * 1024,
                request_timeout: Duration::from_secs(30),
                delivery_timeout: Duration::from_secs(120),
                retry_backoff: Duration::from_millis(100),
                retry_backoff_max: Duration::from_secs(1),
                compression: Compression::None,
                compression_level: None,
            },
            partitioner: Arc::new(DefaultPartitioner::new()),
        }
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
    /// never accepted (it is dropped with the future and never sent). Once it
    /// returns a [`DeliveryFuture`], the record will be delivered or fail whether or
    /// not that future is polled.
    pub async fn send(&self, record: ProducerRecord) -> Result<DeliveryFuture, ProduceError> {
        let shared = &self.handle.shared;
        let cfg = &shared.config;
        if shared.lock().closed {
            return Err(ProduceError::Closed {
                record: Some(Box::new(record)),
            });
        }
        let size = RecordBatchBuilder::estimate_record_size(
            record.key.as_ref().map_or(0, |k| k.len()),
            record.value.as_ref().map_or(0, |v| v.len()),
            &record.headers,
        );
        let max = cfg
            .max_request_size
            .min(cfg.buffer_memory)
            .min(u32::MAX as usize);
        if size + accumulator::BATCH_OVERHEAD > max {
            return Err(ProduceError::RecordTooLarge {
                size,
                max,
                record: Box::new(record),
            });
        }
        let (record, mut partition, count) = self.choose_partition(record).await?;
        let permit = shared
            .memory
            .clone()
            .acquire_many_owned(size as u32)
            .await
            .expect("buffer memory semaphore is never closed");
        let (tx, rx) = oneshot::channel();
        let timestamp = record.timestamp.unwrap_or_else(now_ms);
        let topic = record.topic.clone();
        // A partition the partitioner chose may move once, when the record would
        // open a new batch there (sticky partitioning). The partitioner runs outside
        // the accumulator lock.
        let mut may_move = record.partition.is_none();
        let appended = loop {
            let mut acc = shared.lock();
            if acc.closed {
                return Err(ProduceError::Closed {
                    record: Some(Box::new(record)),
                });
            }
            if may_move && acc.needs_new_batch(&topic, partition, size, cfg.batch_size) {
                drop(acc);
                may_move = false;
                partition = shared.partitioner.on_new_batch(
                    &topic,
                    record.key.as_deref(),
                    count,
                    partition,
                );
                if !(0..count).contains(&partition) {
                    return Err(ProduceError::InvalidPartition {
                        topic,
                        partition,
                        partition_count: count,
                        record: Box::new(record),
                    });
                }
                continue;
            }
            break acc.append(
                &topic,
                partition,
                Pending {
                    record,
                    timestamp,
                    tx,
                    _permit: permit,
                },
                size,
                cfg.batch_size,
                cfg.delivery_timeout,
            );
        };
        if appended.wake {
            shared.wake.notify_one();
        }
        Ok(DeliveryFuture { rx })
    }

    /// The record's partition (explicit, or chosen by the partitioner) and the
    /// topic's partition count. Retries retriable metadata errors until the delivery
    /// timeout.
    async fn choose_partition(
        &self,
        record: ProducerRecord,
    ) -> Result<(ProducerRecord, i32, i32), ProduceError> {
        let shared = &self.handle.shared;
        let deadline = Instant::now() + shared.config.delivery_timeout;
        let mut backoff = Duration::from_millis(10);
        let count = loop {
            match shared.client.inner.partition_count(&record.topic).await {
                Ok(n) => break n,
                Err(e) if e.is_retriable() && Instant::now() + backoff < deadline => {
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(shared.config.retry_backoff_max);
                }
                Err(source) => {
                    return Err(ProduceError::Client {
                        topic: record.topic.clone(),
                        partition: record.partition,
                        source,
                        record: Box::new(record),
                    })
                }
            }
        };
        let partition = match record.partition {
            Some(p) => p,
            None => shared
                .partitioner
                .partition(&record.topic, record.key.as_deref(), count),
        };
        if !(0..count).contains(&partition) {
            return Err(ProduceError::InvalidPartition {
                topic: record.topic.clone(),
                partition,
                partition_count: count,
                record: Box::new(record),
            });
        }
        Ok((record, partition, count))
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
