//! The consumer: fetches assigned partitions in the background and yields records
//! in offset order per partition.
//!
//! A background task sends one Fetch per leader broker for the assigned partitions
//! it leads. Every batch's CRC-32C is checked, and every record of the batch
//! checked in one allocation-free pass, before any record of it is yielded; a batch
//! that fails is fetched again after a metadata refresh (a new leader may serve a
//! healthy copy), and a failure that persists becomes
//! [`ConsumerError::CorruptBatch`]. A batch that decompresses beyond
//! [`ConsumerBuilder::max_decompressed_bytes`] is
//! [`ConsumerError::BatchTooLarge`] at once. Records are decoded as they are handed
//! on and reach the application through a channel bounded in records
//! ([`ConsumerBuilder::channel_capacity`]) and in bytes
//! ([`ConsumerBuilder::max_buffered_bytes`]), which is what makes
//! [`Consumer::recv`] cancel safe and applies backpressure to fetching.
//!
//! Fetches follow Kafka's consumer protocol features:
//! - **KIP-320.** Fetch and ListOffsets carry the leader epoch from metadata, and
//!   Fetch the epoch of the last batch read. After a leader change (or a
//!   [`Consumer::seek_validated`], or a group member resuming from a commit, which
//!   carries the epoch) the position is validated with OffsetForLeaderEpoch; a log
//!   truncated below it is [`ConsumerError::LogTruncation`], and reading continues
//!   from the divergence point.
//! - **KIP-227.** Requests to one broker share a fetch session: after one full
//!   request, only partitions whose fetch state changed are sent.
//! - **KIP-392.** With [`ConsumerBuilder::client_rack`], a partition is fetched
//!   from the replica the leader prefers for that rack.
//!
//! The assignment of a [`Consumer`] can change while it runs (add, remove, seek,
//! pause, resume); output fetched before a change that no longer applies is
//! dropped, never returned.

mod aborted;
mod budget;
pub(crate) mod fetcher;
mod session;

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use baton_protocol::{DecodeError, ErrorCode};
use bytes::Bytes;
use tokio::sync::{mpsc, OwnedSemaphorePermit};
use tokio::task::AbortHandle;

use crate::client::{Client, ClientError};
use crate::group::TopicPartition;
use crate::offsets::{list_offsets_at, OffsetSpec};
use crate::{RecordHeader, TraceContext};

/// Where a partition's consumption starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartOffset {
    /// The first offset still stored (log start offset).
    Earliest,
    /// The log end offset at the time the consumer is built: only new records.
    Latest,
    /// This exact offset.
    Offset(i64),
    /// The first record with a timestamp at or after this time (ms since the
    /// epoch); the log end offset if there is none.
    Timestamp(i64),
}

/// What to do when the broker answers OFFSET_OUT_OF_RANGE for a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OffsetReset {
    /// Restart from the earliest stored offset. The default: it never skips
    /// records that are still available.
    #[default]
    Earliest,
    /// Jump to the log end offset.
    Latest,
    /// Yield [`ConsumerError::OffsetOutOfRange`] and stop fetching the partition.
    Fail,
}

/// Which records a consumer reads of partitions that transactional producers
/// write to (Kafka's `isolation.level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IsolationLevel {
    /// Every record, including those of open and aborted transactions, up to the
    /// high watermark. The default, as in Kafka's consumers.
    #[default]
    ReadUncommitted,
    /// Only records outside transactions and those of committed transactions:
    /// Fetch asks the broker for data up to the last stable offset (the first
    /// offset of the oldest open transaction), and the records of aborted
    /// transactions, which the broker names in each Fetch answer, are skipped
    /// (never delivered), as are the commit and abort markers (control batches).
    /// The consumer's position moves past skipped records, so they are not fetched
    /// again.
    ReadCommitted,
}

impl IsolationLevel {
    /// The Fetch request's `isolation_level` field.
    pub(crate) fn wire(self) -> i8 {
        match self {
            IsolationLevel::ReadUncommitted => 0,
            IsolationLevel::ReadCommitted => 1,
        }
    }
}

/// A consumed record. Key, value and header values are zero-copy slices of the
/// Fetch response that carried them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumerRecord {
    /// The topic (shared by all records of the partition).
    pub topic: Arc<str>,
    /// The partition.
    pub partition: i32,
    /// The record's offset.
    pub offset: i64,
    /// The record's timestamp (create or log append time, per the topic's config).
    pub timestamp: i64,
    /// The key, `None` if null.
    pub key: Option<Bytes>,
    /// The value, `None` if null.
    pub value: Option<Bytes>,
    /// The headers, in order.
    pub headers: Vec<RecordHeader>,
    /// The leader epoch of the record's batch (KIP-320), -1 if the batch has none.
    /// Stored with a position (`offset + 1`), it lets
    /// [`Consumer::seek_validated`] detect a log truncated below that position.
    pub leader_epoch: i32,
}

impl ConsumerRecord {
    /// The W3C trace context the producer put in the record's `traceparent`
    /// header (see [`trace_context`](crate::trace_context)), to continue or link
    /// its trace; `None` if the record has none or an invalid one. Parsed anew on
    /// each call.
    pub fn trace_context(&self) -> Option<TraceContext> {
        TraceContext::from_headers(&self.headers)
    }
}

/// Errors of the consumer, wrapping the cluster layer's [`ClientError`].
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ConsumerError {
    /// Resolving start offsets or fetching failed for good.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// A record batch failed its CRC (or could not be decoded) on every attempt, new
    /// leaders included. No record of that batch was yielded, and the partition is
    /// no longer fetched.
    #[error("record batch at {topic}/{partition} offset {offset} is corrupt after {attempts} attempts: {source}")]
    CorruptBatch {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The batch's base offset (or the fetch offset if the batch could not be
        /// framed).
        offset: i64,
        /// How many fetches returned it corrupt.
        attempts: u32,
        /// The last failure.
        #[source]
        source: DecodeError,
    },
    /// The fetch offset is outside the partition's log and the reset policy is
    /// [`OffsetReset::Fail`]; the partition is no longer fetched.
    #[error("offset {offset} is out of range for {topic}/{partition}")]
    OffsetOutOfRange {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The offset that was out of range.
        offset: i64,
    },
    /// The client's principal may not read the topic (TOPIC_AUTHORIZATION_FAILED:
    /// no Read ACL); the partition is no longer fetched.
    #[error("not authorized to read topic {topic} (partition {partition})")]
    TopicAuthorizationFailed {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
    },
    /// The broker answered a non-retriable error for a partition; the partition is
    /// no longer fetched.
    #[error("fetching {topic}/{partition} failed: {code}")]
    Broker {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The error code.
        code: ErrorCode,
    },
    /// A record batch decompresses to more than the configured limit
    /// ([`ConsumerBuilder::max_decompressed_bytes`], or the protocol crate's ratio
    /// limit for tiny, very compressed batches). Fetching it again cannot help, so
    /// this comes at once; no record of the batch was yielded, and the partition is
    /// no longer fetched.
    #[error("record batch at {topic}/{partition} offset {offset} decompresses to more than {limit} bytes")]
    BatchTooLarge {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The batch's base offset.
        offset: i64,
        /// The limit that applied to the batch.
        limit: usize,
    },
    /// The partition's log was truncated below the consumer's position (KIP-320):
    /// after a leader change, the new leader's log ends the epoch of the last
    /// record read at `divergence`, below `position` (typically an unclean leader
    /// election). Records from `divergence` up to `position` that were returned
    /// are no longer in the log. Fetching continues from `divergence` (the
    /// records the new leader has there), except under [`OffsetReset::Fail`],
    /// where the partition is no longer fetched until it is sought.
    #[error("log of {topic}/{partition} truncated below the position {position}: continuing from {divergence}")]
    LogTruncation {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The position (next offset to read) before the truncation was found.
        position: i64,
        /// Where the consumer's log and the leader's part: the new position.
        divergence: i64,
    },
    /// The partition is not assigned to this consumer.
    #[error("{topic}/{partition} is not assigned to this consumer")]
    NotAssigned {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
    },
    /// The consumer's background task has stopped (the runtime is shutting down),
    /// or no assigned partition is left to fetch (every one failed, or none is
    /// assigned).
    #[error("the consumer is closed")]
    Closed,
}

/// Default of the consumer's memory bounds: Kafka's `fetch.max.bytes`, 50 MiB.
const DEFAULT_MEMORY_BOUND: usize = 50 * 1024 * 1024;

/// Consumer settings; see [`ConsumerBuilder`] for meanings and defaults.
#[derive(Debug, Clone)]
pub(crate) struct ConsumerConfig {
    pub(crate) max_wait: Duration,
    pub(crate) min_bytes: i32,
    pub(crate) max_bytes: i32,
    pub(crate) partition_max_bytes: i32,
    pub(crate) offset_reset: OffsetReset,
    pub(crate) channel_capacity: usize,
    pub(crate) max_corrupt_attempts: u32,
    pub(crate) retry_backoff: Duration,
    pub(crate) check_crcs: bool,
    pub(crate) max_decompressed_bytes: usize,
    pub(crate) max_buffered_bytes: usize,
    pub(crate) isolation_level: IsolationLevel,
    pub(crate) client_rack: String,
    /// Metric handles and the numbers behind the consumer's `stats` (registered
    /// when the consumer is built).
    pub(crate) meter: Arc<crate::metrics::ConsumerMeter>,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            max_wait: Duration::from_millis(500),
            min_bytes: 1,
            max_bytes: 50 * 1024 * 1024,
            partition_max_bytes: 1024 * 1024,
            offset_reset: OffsetReset::Earliest,
            channel_capacity: 1024,
            max_corrupt_attempts: 5,
            retry_backoff: Duration::from_millis(100),
            check_crcs: true,
            max_decompressed_bytes: DEFAULT_MEMORY_BOUND,
            max_buffered_bytes: DEFAULT_MEMORY_BOUND,
            isolation_level: IsolationLevel::ReadUncommitted,
            client_rack: String::new(),
            meter: Arc::new(crate::metrics::ConsumerMeter::detached()),
        }
    }
}

/// Builds a [`Consumer`]; see [`Consumer::builder`].
#[derive(Debug, Clone)]
pub struct ConsumerBuilder {
    client: Client,
    assignments: Vec<(String, i32, StartOffset)>,
    config: ConsumerConfig,
}

impl ConsumerBuilder {
    /// Consumes `partition` of `topic` from `start`. Call once per partition.
    pub fn assign(mut self, topic: impl Into<String>, partition: i32, start: StartOffset) -> Self {
        self.assignments.push((topic.into(), partition, start));
        self
    }

    /// How long the broker may hold a Fetch while it has less than `min_bytes`
    /// (default 500 ms, Kafka's `fetch.max.wait.ms`).
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.config.max_wait = max_wait;
        self
    }

    /// Bytes the broker should gather before answering a Fetch (default 1).
    pub fn min_bytes(mut self, bytes: i32) -> Self {
        self.config.min_bytes = bytes.max(0);
        self
    }

    /// Upper bound of one Fetch response (default 50 MiB, Kafka's
    /// `fetch.max.bytes`). The broker still returns one whole batch if the first is
    /// larger.
    pub fn max_bytes(mut self, bytes: i32) -> Self {
        self.config.max_bytes = bytes.max(1);
        self
    }

    /// Upper bound of one partition's data in a Fetch response (default 1 MiB,
    /// Kafka's `max.partition.fetch.bytes`).
    pub fn partition_max_bytes(mut self, bytes: i32) -> Self {
        self.config.partition_max_bytes = bytes.max(1);
        self
    }

    /// What to do on OFFSET_OUT_OF_RANGE (default [`OffsetReset::Earliest`]).
    pub fn offset_reset(mut self, reset: OffsetReset) -> Self {
        self.config.offset_reset = reset;
        self
    }

    /// Which records of transactional producers to read (default
    /// [`IsolationLevel::ReadUncommitted`], Kafka's `isolation.level`). At
    /// [`IsolationLevel::ReadCommitted`], [`StartOffset::Latest`] is the last
    /// stable offset.
    pub fn isolation_level(mut self, level: IsolationLevel) -> Self {
        self.config.isolation_level = level;
        self
    }

    /// The rack this consumer runs in (Kafka's `client.rack`, KIP-392; default
    /// none). Sent with every Fetch (v11+); a broker with a rack-aware replica
    /// selector may then name a replica in the same rack as the preferred read
    /// replica, which the consumer fetches from until that replica fails, the
    /// partition's leader changes or 5 minutes pass (Kafka's default
    /// `metadata.max.age.ms`), then from the leader again.
    pub fn client_rack(mut self, rack: impl Into<String>) -> Self {
        self.config.client_rack = rack.into();
        self
    }

    /// How many records may wait between the fetch task and [`Consumer::recv`]
    /// (default 1024), besides the chunk of at most a quarter of it being handed out.
    /// When full, fetching pauses. See also
    /// [`max_buffered_bytes`](Self::max_buffered_bytes).
    pub fn channel_capacity(mut self, records: usize) -> Self {
        self.config.channel_capacity = records.max(1);
        self
    }

    /// How many bytes of record data may wait between the fetch task and
    /// [`Consumer::recv`] (default 50 MiB, like Kafka's `fetch.max.bytes`; at most
    /// 4 GiB), besides the record-count bound of
    /// [`channel_capacity`](Self::channel_capacity). When used up, fetching pauses.
    ///
    /// Charged: each record's struct, key, value and header bytes, from when the
    /// fetch task sends it until `recv` has handed out the last record of its chunk
    /// (chunks hold at most a quarter of the budget); and each compressed batch's
    /// decompressed records section, which its records point into, until its last
    /// record is handed out. A chunk or batch larger than the whole budget goes
    /// through alone once everything before it has been handed out. Not charged:
    /// the Fetch response that uncompressed records point into (see
    /// [`max_bytes`](Self::max_bytes)), and records the application keeps.
    pub fn max_buffered_bytes(mut self, bytes: usize) -> Self {
        self.config.max_buffered_bytes = bytes.max(1);
        self
    }

    /// The most bytes one record batch may decompress to (default 50 MiB, like
    /// Kafka's `fetch.max.bytes`). A batch beyond it yields
    /// [`ConsumerError::BatchTooLarge`] and its partition is no longer fetched.
    /// Tiny batches are further limited by the protocol crate's ratio limit
    /// ([`baton_protocol::record::DecompressionLimits`]).
    pub fn max_decompressed_bytes(mut self, bytes: usize) -> Self {
        self.config.max_decompressed_bytes = bytes.max(1);
        self
    }

    /// How many consecutive fetches may return a corrupt batch for one partition
    /// before [`ConsumerError::CorruptBatch`] is yielded (default 5).
    pub fn max_corrupt_attempts(mut self, attempts: u32) -> Self {
        self.config.max_corrupt_attempts = attempts.max(1);
        self
    }

    /// Whether every fetched batch's CRC-32C is checked before any of its records is
    /// yielded (default on, Kafka's `check.crcs`). On a mismatch the consumer refreshes
    /// its metadata (the leader may have changed) and fetches again; after
    /// [`max_corrupt_attempts`](Self::max_corrupt_attempts) failures in a row it yields
    /// [`ConsumerError::CorruptBatch`] naming the partition and offset. Turning it off
    /// only skips the checksum: records must still decode.
    pub fn check_crcs(mut self, on: bool) -> Self {
        self.config.check_crcs = on;
        self
    }

    /// Resolves every partition's start offset (ListOffsets for all but
    /// [`StartOffset::Offset`]) and starts the background fetch task.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: nothing has started until this returns.
    pub async fn build(mut self) -> Result<Consumer, ConsumerError> {
        let client_id = self.client.connection_config().client_id.clone();
        let meter = crate::metrics::ConsumerMeter::new(client_id.as_deref().unwrap_or(""), None);
        self.config.meter = Arc::new(meter);
        let isolation = self.config.isolation_level;
        let offsets = resolve_starts(&self.client, isolation, &self.assignments).await?;
        // Records travel in chunks, so one channel operation carries many; at most
        // `channel_capacity` records wait in the channel, plus one chunk in `buf`.
        let (tx, rx) = fetcher::Tx::stamped(&self.config);
        let (commands, commands_rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(fetcher::run(
            self.client.clone(),
            self.config.clone(),
            Vec::new(),
            Some(commands_rx),
            tx,
        ))
        .abort_handle();
        let mut consumer = Consumer {
            rx,
            buf: VecDeque::new(),
            buf_epoch: 0,
            charge: None,
            client: self.client,
            isolation,
            offset_reset: self.config.offset_reset,
            commands,
            parts: HashMap::new(),
            next_epoch: 1,
            task,
            meter: self.config.meter.clone(),
        };
        // Each partition starts under its own epoch (the fetch task applies these
        // before its first fetch).
        for ((topic, partition, _), offset) in self.assignments.into_iter().zip(offsets) {
            let tp = TopicPartition::new(topic, partition);
            if consumer.parts.contains_key(&tp) {
                continue;
            }
            consumer.insert(tp, offset);
        }
        Ok(consumer)
    }
}

/// Start offsets of `assignments`, in order: ListOffsets for all but
/// [`StartOffset::Offset`], and the log end where a timestamp finds no record.
async fn resolve_starts(
    client: &Client,
    isolation: IsolationLevel,
    assignments: &[(String, i32, StartOffset)],
) -> Result<Vec<i64>, ConsumerError> {
    let queries: Vec<(String, i32, OffsetSpec)> = assignments
        .iter()
        .filter_map(|(t, p, s)| {
            let spec = match s {
                StartOffset::Earliest => OffsetSpec::Earliest,
                StartOffset::Latest => OffsetSpec::Latest,
                StartOffset::Timestamp(ts) => OffsetSpec::Timestamp(*ts),
                StartOffset::Offset(_) => return None,
            };
            Some((t.clone(), *p, spec))
        })
        .collect();
    let mut listed = if queries.is_empty() {
        Vec::new().into_iter()
    } else {
        list_offsets_at(client, &queries, isolation)
            .await?
            .into_iter()
    };
    let mut resolved = Vec::with_capacity(assignments.len());
    let mut latest_fallback = Vec::new();
    for (topic, partition, start) in assignments {
        let offset = match start {
            StartOffset::Offset(o) => (*o).max(0),
            _ => listed.next().map_or(-1, |l| l.offset),
        };
        if offset < 0 {
            // No record at or after the timestamp: start at the end.
            latest_fallback.push((resolved.len(), topic.clone(), *partition));
        }
        resolved.push(offset);
    }
    if !latest_fallback.is_empty() {
        let q: Vec<(String, i32, OffsetSpec)> = latest_fallback
            .iter()
            .map(|(_, t, p)| (t.clone(), *p, OffsetSpec::Latest))
            .collect();
        let ends = list_offsets_at(client, &q, isolation).await?;
        for ((i, _, _), end) in latest_fallback.iter().zip(ends) {
            resolved[*i] = end.offset.max(0);
        }
    }
    Ok(resolved)
}

/// The consumer's view of one assigned partition.
#[derive(Debug)]
struct Assigned {
    /// Stamped by the fetch task on everything it emits for the partition since
    /// the last (re)start; output of other epochs is dropped.
    epoch: u64,
    /// The next offset `recv` returns.
    position: i64,
    /// The leader epoch of the record before `position` (the last returned, or
    /// given to `seek_validated`), -1 if unknown.
    last_epoch: i32,
    /// Not fetched or returned until resumed.
    paused: bool,
    /// Stopped by an error; fetched again only after a seek.
    failed: bool,
}

/// Reads records of assigned partitions. Records of one partition come in offset
/// order; partitions interleave.
///
/// The assignment can change while the consumer runs
/// ([`add_partitions`](Self::add_partitions),
/// [`remove_partitions`](Self::remove_partitions), [`assign`](Self::assign)), and
/// each partition can be re-positioned ([`seek`](Self::seek)) or paused
/// ([`pause`](Self::pause), [`resume`](Self::resume)). Records fetched before such
/// a change that no longer apply are dropped, never returned.
///
/// Dropping the consumer stops its background fetch task.
///
/// ```no_run
/// # async fn demo(client: &baton_kafka::Client) -> Result<(), baton_kafka::ConsumerError> {
/// use baton_kafka::{Consumer, StartOffset};
///
/// let mut consumer = Consumer::builder(client)
///     .assign("events", 0, StartOffset::Earliest)
///     .build()
///     .await?;
/// let record = consumer.recv().await?;
/// println!("{}@{}: {:?}", record.partition, record.offset, record.value);
/// # Ok(()) }
/// ```
pub struct Consumer {
    rx: mpsc::Receiver<fetcher::StampedChunk>,
    /// Records of the chunk taken out last, not yet returned.
    buf: VecDeque<ConsumerRecord>,
    /// The epoch `buf`'s records were stamped with.
    buf_epoch: u64,
    /// The byte budget `buf`'s chunk holds; released with its last record.
    charge: Option<OwnedSemaphorePermit>,
    client: Client,
    isolation: IsolationLevel,
    offset_reset: OffsetReset,
    commands: mpsc::UnboundedSender<fetcher::FetchCommand>,
    parts: HashMap<TopicPartition, Assigned>,
    next_epoch: u64,
    task: AbortHandle,
    /// Shared with the fetch task; read by [`Consumer::stats`].
    meter: Arc<crate::metrics::ConsumerMeter>,
}

impl fmt::Debug for Consumer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consumer")
            .field("assigned", &self.parts.len())
            .field("buffered", &self.buf.len())
            .field("chunks", &self.rx.len())
            .finish_non_exhaustive()
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Consumer {
    /// Starts building a consumer on `client`.
    pub fn builder(client: &Client) -> ConsumerBuilder {
        ConsumerBuilder {
            client: client.clone(),
            assignments: Vec::new(),
            config: ConsumerConfig::default(),
        }
    }

    /// The next record, or an error about one partition (see [`ConsumerError`]);
    /// after a partition's error the others keep flowing.
    /// [`ConsumerError::Closed`] once no assigned partition is left to fetch
    /// (every one failed, or none is assigned) and nothing is buffered.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: records wait in a bounded channel, and a chunk taken out of it
    /// moves into the consumer itself (with its share of the byte budget, released
    /// when its last record is returned) in the same step, before any await; each
    /// record leaves only when this returns it. Dropping the future (in `select!`,
    /// on a timeout) loses no record; the next call returns it.
    pub async fn recv(&mut self) -> Result<ConsumerRecord, ConsumerError> {
        std::future::poll_fn(|cx| self.poll_one(cx))
            .await
            .unwrap_or(Err(ConsumerError::Closed))
    }

    /// This consumer's numbers since it was built: records returned, fetch
    /// latencies, each partition's lag at the last fetch response, and its
    /// client's connections. The same numbers go to the installed metrics
    /// recorder (see [`metrics`](crate::metrics)). Cheap: reads atomics.
    pub fn stats(&self) -> crate::ConsumerStats {
        self.meter.stats(self.client.connection_meter().stats())
    }

    /// The partitions currently assigned, sorted.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        let mut v: Vec<TopicPartition> = self.parts.keys().cloned().collect();
        v.sort();
        v
    }

    /// The next offset [`recv`](Self::recv) returns for `partition`; `None` if it
    /// is not assigned. Once the records before them are returned, it moves past
    /// batches that hold no record to return (transaction markers, and aborted
    /// transactions at [`IsolationLevel::ReadCommitted`]), so a log ending in a
    /// marker is read to its end offset.
    pub fn position(&self, partition: &TopicPartition) -> Option<i64> {
        self.parts.get(partition).map(|p| p.position)
    }

    /// Continues `partition` at `offset`: the next record returned for it is the
    /// one at `offset` (or the first after it). Records already fetched past the old
    /// position are dropped. A partition stopped by an error is fetched again.
    /// Takes effect at once (no await, so nothing to cancel).
    pub fn seek(&mut self, partition: &TopicPartition, offset: i64) -> Result<(), ConsumerError> {
        self.seek_validated(partition, offset, -1)
    }

    /// Like [`seek`](Self::seek), for a position whose record before it had leader
    /// epoch `leader_epoch` ([`ConsumerRecord::leader_epoch`] of the record at
    /// `offset - 1`, say, stored with the offset), as Kafka's consumer seeks to an
    /// `OffsetAndMetadata` with a leader epoch: the position is validated against
    /// the leader's log first (KIP-320, OffsetForLeaderEpoch), so a log truncated
    /// below `offset` since then is reported as [`ConsumerError::LogTruncation`]
    /// and reading continues from the divergence point. A negative epoch is a plain
    /// `seek`. Takes effect at once (no await, so nothing to cancel).
    pub fn seek_validated(
        &mut self,
        partition: &TopicPartition,
        offset: i64,
        leader_epoch: i32,
    ) -> Result<(), ConsumerError> {
        let Some(st) = self.parts.get_mut(partition) else {
            return Err(ConsumerError::NotAssigned {
                topic: partition.topic.to_string(),
                partition: partition.partition,
            });
        };
        st.position = offset.max(0);
        st.last_epoch = leader_epoch.max(-1);
        st.failed = false;
        self.restart(partition);
        Ok(())
    }

    /// Stops returning and fetching records of `partitions` until
    /// [`resume`](Self::resume); their positions are kept. Partitions not assigned
    /// are ignored. While every assigned partition is paused, `recv` waits.
    pub fn pause(&mut self, partitions: &[TopicPartition]) {
        for tp in partitions {
            if let Some(st) = self.parts.get_mut(tp) {
                if !st.paused {
                    st.paused = true;
                    self.restart(tp);
                }
            }
        }
    }

    /// Resumes paused `partitions` from their positions. A position whose last
    /// record's leader epoch is known is validated first (KIP-320), so a log
    /// truncated while the partition was paused is reported as
    /// [`ConsumerError::LogTruncation`].
    pub fn resume(&mut self, partitions: &[TopicPartition]) {
        for tp in partitions {
            if let Some(st) = self.parts.get_mut(tp) {
                if st.paused {
                    st.paused = false;
                    self.restart(tp);
                }
            }
        }
    }

    /// The paused partitions, sorted.
    pub fn paused(&self) -> Vec<TopicPartition> {
        let mut v: Vec<TopicPartition> = self
            .parts
            .iter()
            .filter(|(_, s)| s.paused)
            .map(|(tp, _)| tp.clone())
            .collect();
        v.sort();
        v
    }

    /// Adds partitions to the assignment, each from its start (a partition already
    /// assigned is re-positioned there, and resumed).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: start offsets are resolved first (ListOffsets), and the
    /// assignment changes only after every one is found, without awaiting; a
    /// dropped future changes nothing.
    pub async fn add_partitions(
        &mut self,
        partitions: impl IntoIterator<Item = (TopicPartition, StartOffset)>,
    ) -> Result<(), ConsumerError> {
        let list: Vec<(String, i32, StartOffset)> = partitions
            .into_iter()
            .map(|(tp, s)| (tp.topic.to_string(), tp.partition, s))
            .collect();
        let offsets = resolve_starts(&self.client, self.isolation, &list).await?;
        for ((topic, partition, _), offset) in list.into_iter().zip(offsets) {
            self.insert(TopicPartition::new(topic, partition), offset);
        }
        Ok(())
    }

    /// Removes partitions from the assignment: they are no longer fetched, and
    /// records of them already fetched are dropped. Partitions not assigned are
    /// ignored. Takes effect at once (no await, so nothing to cancel).
    pub fn remove_partitions(&mut self, partitions: &[TopicPartition]) {
        for tp in partitions {
            if self.parts.remove(tp).is_some() {
                let _ = self.commands.send(fetcher::FetchCommand::Remove {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                });
            }
        }
    }

    /// Replaces the assignment with `partitions`: those already assigned keep their
    /// position (the start given is ignored for them), new ones start at theirs,
    /// and the rest are removed.
    ///
    /// # Cancel safety
    ///
    /// As for [`add_partitions`](Self::add_partitions): nothing changes until the
    /// new partitions' start offsets are all found.
    pub async fn assign(
        &mut self,
        partitions: impl IntoIterator<Item = (TopicPartition, StartOffset)>,
    ) -> Result<(), ConsumerError> {
        let wanted: Vec<(TopicPartition, StartOffset)> = partitions.into_iter().collect();
        let new: Vec<(String, i32, StartOffset)> = wanted
            .iter()
            .filter(|(tp, _)| !self.parts.contains_key(tp))
            .map(|(tp, s)| (tp.topic.to_string(), tp.partition, *s))
            .collect();
        let offsets = resolve_starts(&self.client, self.isolation, &new).await?;
        let gone: Vec<TopicPartition> = self
            .parts
            .keys()
            .filter(|tp| !wanted.iter().any(|(w, _)| w == *tp))
            .cloned()
            .collect();
        self.remove_partitions(&gone);
        for ((topic, partition, _), offset) in new.into_iter().zip(offsets) {
            let tp = TopicPartition::new(topic, partition);
            if self.parts.contains_key(&tp) {
                continue; // listed twice
            }
            self.insert(tp, offset);
        }
        Ok(())
    }

    /// Assigns `tp` (again) from `offset` and starts fetching it.
    fn insert(&mut self, tp: TopicPartition, offset: i64) {
        self.parts.insert(
            tp.clone(),
            Assigned {
                epoch: 0,
                position: offset,
                last_epoch: -1,
                paused: false,
                failed: false,
            },
        );
        self.restart(&tp);
    }

    /// (Re)starts fetching `tp` at its position under a new epoch, or stops it if
    /// paused or failed.
    fn restart(&mut self, tp: &TopicPartition) {
        let epoch = self.next_epoch;
        self.next_epoch += 1;
        let Some(st) = self.parts.get_mut(tp) else {
            return;
        };
        st.epoch = epoch;
        let cmd = if st.paused || st.failed {
            fetcher::FetchCommand::Remove {
                topic: tp.topic.clone(),
                partition: tp.partition,
            }
        } else {
            fetcher::FetchCommand::Assign {
                topic: tp.topic.clone(),
                partition: tp.partition,
                offset: st.position,
                epoch,
                last_epoch: st.last_epoch,
            }
        };
        let _ = self.commands.send(cmd);
    }

    /// The assigned partition a record or error of `epoch` belongs to, if it is
    /// still current (same epoch, not paused).
    fn current(&mut self, topic: &Arc<str>, partition: i32, epoch: u64) -> Option<&mut Assigned> {
        let tp = TopicPartition {
            topic: topic.clone(),
            partition,
        };
        self.parts
            .get_mut(&tp)
            .filter(|st| st.epoch == epoch && !st.paused)
    }

    /// Whether any assigned partition may still yield something.
    fn live(&self) -> bool {
        self.parts.values().any(|p| !p.failed)
    }

    /// The next buffered record, else the first of the next chunk (the rest are
    /// buffered), an error, or `None` once the fetch task has stopped or nothing
    /// is left to fetch.
    fn poll_one(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<ConsumerRecord, ConsumerError>>> {
        loop {
            while let Some(record) = self.buf.pop_front() {
                if self.buf.is_empty() {
                    self.charge = None;
                }
                let epoch = self.buf_epoch;
                // The fetch task yields each partition in offset order from its
                // position, which may move (a reset, a truncation): the epoch alone
                // tells what is current.
                if let Some(st) = self.current(&record.topic, record.partition, epoch) {
                    st.position = record.offset + 1;
                    st.last_epoch = record.leader_epoch;
                    self.meter.consumed();
                    return Poll::Ready(Some(Ok(record)));
                }
            }
            self.charge = None;
            let polled = self.rx.poll_recv(cx);
            if polled.is_pending() && !self.live() {
                return Poll::Ready(None);
            }
            match std::task::ready!(polled) {
                Some(fetcher::StampedChunk {
                    epoch,
                    item: Ok(chunk),
                }) => {
                    if let Some(s) = &chunk.skipped {
                        // Past transaction markers (and skipped aborted batches)
                        // after every record returned so far.
                        if let Some(st) = self.current(&s.topic, s.partition, epoch) {
                            st.position = st.position.max(s.next_offset);
                        }
                    }
                    self.buf = VecDeque::from(chunk.records);
                    self.buf_epoch = epoch;
                    self.charge = Some(chunk.charge);
                }
                Some(fetcher::StampedChunk {
                    epoch,
                    item: Err(e),
                }) => {
                    if let Some(e) = self.accept_error(epoch, e) {
                        return Poll::Ready(Some(Err(e)));
                    }
                }
                None => return Poll::Ready(None),
            }
        }
    }

    /// Applies an error the fetch task stamped with `epoch` to its partition's
    /// state; `None` if it is stale.
    fn accept_error(&mut self, epoch: u64, e: ConsumerError) -> Option<ConsumerError> {
        let fail_on_truncation = self.offset_reset == OffsetReset::Fail;
        let (topic, partition) = match &e {
            ConsumerError::CorruptBatch {
                topic, partition, ..
            }
            | ConsumerError::OffsetOutOfRange {
                topic, partition, ..
            }
            | ConsumerError::TopicAuthorizationFailed { topic, partition }
            | ConsumerError::Broker {
                topic, partition, ..
            }
            | ConsumerError::BatchTooLarge {
                topic, partition, ..
            }
            | ConsumerError::LogTruncation {
                topic, partition, ..
            } => (Arc::<str>::from(topic.as_str()), *partition),
            // Errors about no one partition (a failed leader lookup) stop the
            // partition whose epoch they carry, except a topic or partition that
            // metadata does not name (yet): the fetch task keeps trying those.
            _ => {
                let st = self
                    .parts
                    .values_mut()
                    .find(|st| st.epoch == epoch && !st.paused)?;
                let retried = matches!(
                    &e,
                    ConsumerError::Client(
                        ClientError::UnknownTopic { .. } | ClientError::UnknownPartition { .. }
                    )
                );
                if !retried {
                    st.failed = true;
                }
                return Some(e);
            }
        };
        let st = self.current(&topic, partition, epoch)?;
        match &e {
            ConsumerError::LogTruncation { divergence, .. } => {
                st.position = *divergence;
                // Unknown here (the fetch task knows it): a later restart
                // (resume) just does not validate again.
                st.last_epoch = -1;
                st.failed = fail_on_truncation;
            }
            _ => st.failed = true,
        }
        Some(e)
    }
}

impl futures_core::Stream for Consumer {
    type Item = Result<ConsumerRecord, ConsumerError>;

    /// Like [`Consumer::recv`]; the stream ends when the background task stops or
    /// nothing is left to fetch.
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.poll_one(cx)
    }
}
