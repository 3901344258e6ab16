//! Producer settings and the builder that checks them.

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_protocol::record::Compression;
use tokio::sync::{Notify, Semaphore};

use crate::client::Client;
use crate::TraceContext;

use super::accumulator::Accumulator;
use super::partitioner::{DefaultPartitioner, Partitioner};
#[cfg(doc)]
use super::ProduceError;
use super::{sender, Handle, Producer, Shared};

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
    pub(super) fn wire(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
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
    /// `Some` if the application chose; `None` is the default (on unless `acks`
    /// or `max_in_flight` conflict with it, as in the Java client).
    pub(crate) idempotence: Option<bool>,
    /// Batches per partition on the wire at once. Invariant: >= 1.
    pub(crate) max_in_flight: usize,
    /// Makes the producer transactional (implies idempotence and `acks=all`).
    pub(crate) transactional_id: Option<String>,
    /// How long the transaction coordinator lets a transaction stay open before
    /// it aborts it (InitProducerId's `transaction_timeout_ms`).
    pub(crate) transaction_timeout: Duration,
    /// A `kafka.record` span per record, from `send` to its outcome.
    pub(crate) record_spans: bool,
    /// Where `send` gets the trace context it writes into a record's headers.
    pub(crate) trace_context: Option<TraceContextSource>,
}

/// The application's current trace context, asked for at each `send`.
#[derive(Clone)]
pub(crate) struct TraceContextSource(
    pub(crate) Arc<dyn Fn() -> Option<TraceContext> + Send + Sync>,
);

impl std::fmt::Debug for TraceContextSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TraceContextSource")
    }
}

/// The most batches per partition an idempotent producer keeps in flight (the
/// broker remembers the last 5 batches of each producer for deduplication).
pub const MAX_IN_FLIGHT_IDEMPOTENT: usize = 5;

impl ProducerConfig {
    /// Whether the producer is idempotent.
    pub(crate) fn idempotent(&self) -> bool {
        self.transactional_id.is_some()
            || self
                .idempotence
                .unwrap_or(self.acks == Acks::All && self.max_in_flight <= MAX_IN_FLIGHT_IDEMPOTENT)
    }

    /// Checks the settings that can be wrong.
    fn validate(&self) -> Result<(), ProducerConfigError> {
        if self.transactional_id.is_some() {
            if self.idempotence == Some(false) {
                return Err(ProducerConfigError::TransactionsNeedIdempotence);
            }
            if self.transactional_id.as_deref() == Some("") {
                return Err(ProducerConfigError::EmptyTransactionalId);
            }
        }
        if self.idempotence == Some(true) || self.transactional_id.is_some() {
            if self.acks != Acks::All {
                return Err(ProducerConfigError::IdempotenceNeedsAcksAll(self.acks));
            }
            if self.max_in_flight > MAX_IN_FLIGHT_IDEMPOTENT {
                return Err(ProducerConfigError::TooManyInFlight(self.max_in_flight));
            }
        }
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
    /// Idempotence was asked for with `acks` other than [`Acks::All`].
    #[error("idempotence needs acks=all, not {0:?}")]
    IdempotenceNeedsAcksAll(Acks),
    /// Idempotence was asked for with more than [`MAX_IN_FLIGHT_IDEMPOTENT`]
    /// batches in flight per partition.
    #[error("idempotence allows at most 5 batches in flight per partition, not {0}")]
    TooManyInFlight(usize),
    /// A transactional id was set together with `idempotence(false)`: transactions
    /// need the idempotent producer.
    #[error("a transactional producer is idempotent; idempotence(false) conflicts with transactional_id")]
    TransactionsNeedIdempotence,
    /// The transactional id is empty.
    #[error("the transactional id is empty")]
    EmptyTransactionalId,
}

/// Builds a [`Producer`]; see [`Producer::builder`].
#[derive(Debug, Clone)]
pub struct ProducerBuilder {
    client: Client,
    config: ProducerConfig,
    partitioner: Arc<dyn Partitioner>,
}

impl ProducerBuilder {
    /// A builder with the defaults; see [`Producer::builder`].
    pub(super) fn new(client: &Client) -> Self {
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
                idempotence: None,
                max_in_flight: MAX_IN_FLIGHT_IDEMPOTENT,
                transactional_id: None,
                transaction_timeout: Duration::from_secs(60),
                record_spans: false,
                trace_context: None,
            },
            partitioner: Arc::new(DefaultPartitioner::new()),
        }
    }

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
    /// sent as soon as it reaches this size. This is larger than Kafka's 16 KiB:
    /// larger batches carry more records per sequence number and per retry. A
    /// record larger than this still goes out, alone in its batch.
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

    /// First wait before retrying a failed batch (default 100 ms, Kafka's
    /// `retry.backoff.ms`); doubles per attempt up to
    /// [`retry_backoff_max`](Self::retry_backoff_max).
    ///
    /// A batch that failed because its partition's leader could not be reached
    /// does not always wait this out: while it waits, metadata is polled every
    /// [`ClientBuilder::metadata_fast_refresh_interval`](crate::ClientBuilder::metadata_fast_refresh_interval),
    /// and once metadata or a KIP-951 leader hint names a leader with a newer
    /// leader epoch, the partition's batches are retried at once, in order.
    pub fn retry_backoff(mut self, backoff: Duration) -> Self {
        self.config.retry_backoff = backoff;
        self
    }

    /// The longest wait before retrying a failed batch (default 1 s, Kafka's
    /// `retry.backoff.max.ms`). If it is below
    /// [`retry_backoff`](Self::retry_backoff), every retry waits `retry_backoff`,
    /// as in the Java client.
    pub fn retry_backoff_max(mut self, backoff: Duration) -> Self {
        self.config.retry_backoff_max = backoff;
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

    /// Whether the producer is idempotent (default: yes, unless [`Acks`] other than
    /// [`Acks::All`] or more than 5 in-flight batches are set, which turn the
    /// default off as in the Java client). Asking for `true` together with such
    /// settings is an error at build ([`ProducerConfigError`]).
    ///
    /// An idempotent producer gets a producer id from the cluster before its first
    /// batch; a cluster that does not offer InitProducerId fails every record with
    /// [`ProduceError::IdempotenceUnsupported`] (there is no silent downgrade):
    /// then build with `idempotence(false)`.
    pub fn idempotence(mut self, enabled: bool) -> Self {
        self.config.idempotence = Some(enabled);
        self
    }

    /// How many batches of one partition may be on the wire at once (default 5;
    /// 1 to 5 with idempotence; 0 counts as 1). With idempotence, order holds
    /// whatever the setting; without it, more than 1 lets a retried batch land
    /// behind later ones.
    pub fn max_in_flight(mut self, batches: usize) -> Self {
        self.config.max_in_flight = batches.max(1);
        self
    }

    /// Makes the producer transactional with this id (Kafka's `transactional.id`;
    /// default none). A transactional producer is idempotent with `acks=all` (other
    /// settings are an error at build); it sends records only inside a
    /// transaction: call [`Producer::init_transactions`] once, then
    /// [`Producer::begin_transaction`], send, and
    /// [`Producer::commit_transaction`] or [`Producer::abort_transaction`]. The
    /// id identifies the producer across restarts: a new producer with the same id
    /// fences the older one and aborts its open transaction.
    pub fn transactional_id(mut self, id: impl Into<String>) -> Self {
        self.config.transactional_id = Some(id.into());
        self
    }

    /// How long a transaction may stay open before the transaction coordinator
    /// aborts it (default 60 s, Kafka's `transaction.timeout.ms`). The broker caps
    /// it (`transaction.max.timeout.ms`, 15 minutes by default).
    pub fn transaction_timeout(mut self, timeout: Duration) -> Self {
        self.config.transaction_timeout = timeout;
        self
    }

    /// Whether each record gets a `tracing` span from [`Producer::send`] to its
    /// final outcome (default off). The span, `kafka.record` at INFO level, is a
    /// child of the span current at `send`; it has the fields `topic`,
    /// `partition` (once chosen), and `offset` or `error` (the outcome). It is
    /// made only when a subscriber wants it, and closes when the outcome is
    /// final.
    pub fn record_spans(mut self, enabled: bool) -> Self {
        self.config.record_spans = enabled;
        self
    }

    /// Writes the application's trace context into every record as a W3C
    /// `traceparent` header (default off). `current` is called in
    /// [`Producer::send`], in the caller's context, for each record that has no
    /// `traceparent` header yet (one already there is kept); `None` adds
    /// nothing. With `tracing-opentelemetry`, for example, it reads the trace and
    /// span ids of `tracing::Span::current()`'s OpenTelemetry context. For a single
    /// record, see [`ProducerRecord::trace_context`](super::ProducerRecord::trace_context).
    pub fn propagate_trace_context(
        mut self,
        current: impl Fn() -> Option<TraceContext> + Send + Sync + 'static,
    ) -> Self {
        self.config.trace_context = Some(TraceContextSource(Arc::new(current)));
        self
    }

    /// Checks the settings, then starts the producer and its background sender
    /// task.
    ///
    /// # Errors
    ///
    /// [`ProducerConfigError`] if the compression codec is not enabled in this
    /// build, the compression level is outside the codec's range, or idempotence
    /// was asked for with settings that conflict with it.
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
    /// If a setting is invalid (see [`ProducerConfigError`]: the compression codec
    /// and level, and an explicit idempotence that conflicts with `acks` or
    /// `max_in_flight`), or if called outside a Tokio runtime.
    pub fn build(self) -> Producer {
        if let Err(e) = self.config.validate() {
            panic!("invalid producer settings: {e}");
        }
        self.start()
    }

    fn start(self) -> Producer {
        let idempotent = self.config.idempotent();
        let memory = Arc::new(Semaphore::new(self.config.buffer_memory));
        let outstanding = Arc::new(AtomicUsize::new(0));
        let client_id = self.client.connection_config().client_id.clone();
        let meter = crate::metrics::ProducerMeter::new(client_id.as_deref().unwrap_or(""));
        let shared = Arc::new_cyclic(|owner| Shared {
            acc: Mutex::new({
                let mut acc = Accumulator::for_producer(
                    idempotent,
                    memory.clone(),
                    outstanding.clone(),
                    owner.clone(),
                );
                acc.txn.enabled = self.config.transactional_id.is_some();
                acc
            }),
            txn: self
                .config
                .transactional_id
                .clone()
                .map(super::transaction::TxnControl::new),
            memory,
            client: self.client,
            config: self.config,
            partitioner: self.partitioner,
            wake: Notify::new(),
            outstanding,
            meter: Arc::new(meter),
            this: owner.clone(),
        });
        tokio::spawn(sender::run(shared.clone()));
        Producer {
            handle: Arc::new(Handle { shared }),
        }
    }
}
