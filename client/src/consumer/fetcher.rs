//! The consumer's background fetch task.
//!
//! Each assigned partition is idle, in a fetch, waiting out a backoff, or stopped
//! (after a terminal error). Idle partitions are grouped by leader; a leader with no
//! Fetch in flight gets one covering all of them. Responses are handled as they
//! arrive, so a slow broker does not hold back the others.
//!
//! The group consumer changes the assignment while the task runs, through
//! [`FetchCommand`]s: each (re)assignment carries an epoch that stamps every record
//! and error emitted for the partition from then on, so the receiver can drop what
//! was already in the channel for a revoked, paused or re-positioned partition. A
//! Fetch answer that arrives for an older epoch is discarded.
//!
//! Idle partitions are grouped by the broker to fetch them from: the leader, or the
//! `preferred_read_replica` it named (KIP-392). Each request to a broker goes
//! through that broker's fetch session ([`super::session`], KIP-227) and carries
//! the leader epochs of KIP-320; a partition whose leader epoch grew since it was
//! last fetched, or that was assigned with a known last epoch, is validated first
//! ([`validate`]).
//!
//! Fetches go over the task's own connections (one per leader, closed when the
//! task ends), not the client's shared pool: a Fetch can wait up to `max_wait` at
//! the broker, and a broker answers each connection's requests in order, so on a
//! shared connection every Produce, Metadata or admin answer to that broker would
//! queue behind the long poll (the Java client and librdkafka likewise give each
//! consumer its own sockets).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use baton_protocol::messages::{
    FetchPartition, FetchRequest, FetchResponse, FetchResponsePartitionData,
    OffsetForLeaderEpochResponse,
};
use baton_protocol::record::{batches, Compression, DecompressionLimits};
use baton_protocol::{DecodeError, ErrorCode, Uuid};
use tokio::sync::{mpsc, OwnedSemaphorePermit};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::aborted::{is_abort_marker, AbortedFilter, BatchInfo};
use super::budget::{record_cost, Budget};
use super::session::{FetchSession, Want};
use super::{ConsumerConfig, ConsumerError, ConsumerRecord, IsolationLevel, OffsetReset};
use crate::backoff::Backoff;
use crate::client::{Client, ClientError};
use crate::offsets::{list_offsets, OffsetSpec};
use crate::pool::BrokerPool;

mod validate;

/// What the consumers receive: up to one chunk of records of one partition, in
/// offset order, or an error about one partition.
pub(crate) type Chunk = Result<RecordChunk, ConsumerError>;

/// Records of one partition, in offset order, and the share of the byte budget
/// they hold (see [`super::budget`]): the receiver keeps `charge` until it has
/// handed out (or dropped) the last of `records`, then drops it.
#[derive(Debug)]
pub(crate) struct RecordChunk {
    pub(crate) records: Vec<ConsumerRecord>,
    pub(crate) charge: OwnedSemaphorePermit,
    /// Set, with no records, when a fetch of the partition ended in batches that
    /// yield no record (transaction markers; aborted batches at read_committed):
    /// the consumers' position moves past them, as Kafka's consumer's does.
    pub(crate) skipped: Option<Skipped>,
}

/// The position of a partition after batches that yield no record.
#[derive(Debug)]
pub(crate) struct Skipped {
    pub(crate) topic: Arc<str>,
    pub(crate) partition: i32,
    /// The offset after the last of those batches.
    pub(crate) next_offset: i64,
}

/// Where the task sends its output, in chunks (one channel operation for many
/// records) bounded in records and in bytes.
#[derive(Debug)]
pub(crate) struct Tx {
    out: mpsc::Sender<StampedChunk>,
    /// Most records per chunk.
    chunk: usize,
    /// A chunk is sent once its records cost this much (a quarter of the budget).
    chunk_bytes: usize,
    budget: Budget,
}

/// A [`Chunk`] and the epoch of its partition when it was emitted.
#[derive(Debug)]
pub(crate) struct StampedChunk {
    pub(crate) epoch: u64,
    pub(crate) item: Chunk,
}

impl Tx {
    /// Epoch-stamped output (the consumers check the epoch of each record as they
    /// return it) and its receiver.
    pub(crate) fn stamped(cfg: &ConsumerConfig) -> (Tx, mpsc::Receiver<StampedChunk>) {
        let (chunk, slots, budget) = shape(cfg);
        let (tx, rx) = mpsc::channel(slots);
        (Tx::new(tx, chunk, budget), rx)
    }

    fn new(out: mpsc::Sender<StampedChunk>, chunk: usize, budget: Budget) -> Tx {
        Tx {
            out,
            chunk,
            chunk_bytes: (budget.total() / 4).max(1),
            budget,
        }
    }

    async fn closed(&self) {
        self.out.closed().await
    }

    async fn send(&self, epoch: u64, item: Chunk) -> Result<(), Gone> {
        self.out
            .send(StampedChunk { epoch, item })
            .await
            .map_err(|_| Gone)
    }
}

/// Records per chunk, channel slots and the byte budget. At most
/// `channel_capacity` records wait in the channel, plus one chunk in the receiver;
/// a chunk is at most a quarter of each bound (its vector alone is reserved up
/// front, so it must fit a quarter of the byte budget too).
fn shape(cfg: &ConsumerConfig) -> (usize, usize, Budget) {
    let budget = Budget::new(cfg.max_buffered_bytes);
    let cap = cfg.channel_capacity.max(1);
    let by_bytes = budget.total() / 4 / std::mem::size_of::<ConsumerRecord>();
    let chunk = (cap / 4).min(by_bytes).max(1);
    (chunk, (cap / chunk).max(1), budget)
}

/// A change to the fetched partitions while the task runs.
#[derive(Debug)]
pub(crate) enum FetchCommand {
    /// Fetch `topic`/`partition` from `offset`, stamping its output with `epoch`
    /// (which must differ from the partition's previous epoch). Replaces any earlier
    /// position of the partition, including a stopped one. `last_epoch` is the
    /// leader epoch of the record before `offset` (a committed offset's leader
    /// epoch, a record's [`ConsumerRecord::leader_epoch`]), -1 if unknown: when
    /// known, the position is validated against the leader's log (KIP-320) before
    /// it is fetched, so a truncated log is reported as
    /// [`ConsumerError::LogTruncation`].
    Assign {
        topic: Arc<str>,
        partition: i32,
        offset: i64,
        epoch: u64,
        last_epoch: i32,
    },
    /// Stop fetching `topic`/`partition` (revoked or paused).
    Remove { topic: Arc<str>, partition: i32 },
}

/// One assigned partition.
struct Part {
    topic: Arc<str>,
    partition: i32,
    /// The next offset to yield (and to fetch).
    offset: i64,
    /// In a Fetch right now.
    busy: bool,
    /// Not fetched until then.
    retry_at: Option<Instant>,
    /// Failed for good; never fetched again (until reassigned).
    stopped: bool,
    /// Removed by a [`FetchCommand::Remove`]; not fetched until reassigned.
    removed: bool,
    /// Stamped on everything emitted for the partition; answers to fetches sent
    /// under another epoch are discarded.
    epoch: u64,
    /// Consecutive fetches that returned a corrupt batch.
    corrupt: u32,
    /// Per-partition fetch size, raised when one batch does not fit.
    max_bytes: i32,
    /// Consecutive retriable failures, for backoff.
    failures: u32,
    /// The leader epoch of the last batch the position moved past (Kafka's last
    /// fetched epoch, KIP-320), -1 while unknown. Sent as `last_fetched_epoch`, and
    /// the epoch whose end offset validates the position after a leader change.
    last_epoch: i32,
    /// The partition's leader epoch as metadata gave it when the partition was last
    /// fetched (sent as `current_leader_epoch`), -1 before that.
    leader_epoch: i32,
    /// The leader changed since the position was fetched: the position is checked
    /// with OffsetForLeaderEpoch (KIP-320) before it is fetched again.
    validate: bool,
    /// The replica the leader named as `preferred_read_replica` (KIP-392), fetched
    /// from instead of the leader until it errors, the leader epoch changes or
    /// `preferred_until` passes.
    preferred: Option<i32>,
    /// When the leader is asked again which replica to read from: a lease of
    /// [`PREFERRED_REPLICA_LEASE`], as Kafka's consumer keeps the preferred replica
    /// for `metadata.max.age.ms`.
    preferred_until: Option<Instant>,
    /// The partition's lag, updated at each fetch response.
    meter: Arc<crate::metrics::PartitionMeter>,
    /// Metadata did not name the topic or partition, and the application was
    /// told so; reset when the leader is found again.
    missing_reported: bool,
}

/// How long a preferred read replica is fetched from before the leader is asked
/// again (Kafka's consumer: `metadata.max.age.ms`, 5 minutes by default).
const PREFERRED_REPLICA_LEASE: Duration = Duration::from_secs(300);

/// What a spawned request hands back.
enum Outcome {
    Fetch(Done),
    Validate(validate::Done),
    /// A metadata poll for partitions waiting out a backoff ended.
    Polled,
}

/// What a fetch task hands back.
struct Done {
    /// The broker fetched from: the leader, or a preferred read replica.
    node: i32,
    /// Whether the request was a full fetch (not an incremental one of a session).
    full: bool,
    generation: u64,
    parts: Vec<usize>,
    /// The epoch of each partition when the Fetch was built.
    epochs: Vec<u64>,
    topic_ids: Vec<Uuid>,
    result: Result<FetchResponse, ClientError>,
}

fn new_part(
    cfg: &ConsumerConfig,
    topic: Arc<str>,
    partition: i32,
    offset: i64,
    epoch: u64,
) -> Part {
    Part {
        partition,
        offset,
        busy: false,
        retry_at: None,
        stopped: false,
        removed: false,
        epoch,
        corrupt: 0,
        max_bytes: cfg.partition_max_bytes,
        failures: 0,
        last_epoch: -1,
        leader_epoch: -1,
        validate: false,
        preferred: None,
        preferred_until: None,
        meter: cfg.meter.partition(&topic, partition),
        missing_reported: false,
        topic,
    }
}

/// Applies one command. Partitions keep their slot once seen (in-flight fetches
/// refer to slots by index), so the slot count is bounded by the distinct
/// partitions ever assigned.
fn apply(cfg: &ConsumerConfig, parts: &mut Vec<Part>, cmd: FetchCommand) {
    match cmd {
        FetchCommand::Assign {
            topic,
            partition,
            offset,
            epoch,
            last_epoch,
        } => {
            let mut part = new_part(cfg, topic, partition, offset, epoch);
            part.last_epoch = last_epoch.max(-1);
            part.validate = last_epoch >= 0;
            match parts
                .iter_mut()
                .find(|p| p.partition == partition && p.topic == part.topic)
            {
                Some(p) => {
                    // An answer still in flight is discarded by its epoch.
                    part.busy = p.busy;
                    *p = part;
                }
                None => parts.push(part),
            }
        }
        FetchCommand::Remove { topic, partition } => {
            if let Some(p) = parts
                .iter_mut()
                .find(|p| p.partition == partition && p.topic == topic)
            {
                p.removed = true;
            }
        }
    }
}

async fn next_command(
    commands: &mut Option<mpsc::UnboundedReceiver<FetchCommand>>,
) -> Option<FetchCommand> {
    match commands {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Runs until the consumer is dropped (its receiver closes), or, for a fixed
/// assignment (`commands` is `None`), every partition has stopped.
pub(crate) async fn run(
    client: Client,
    cfg: ConsumerConfig,
    assigned: Vec<(String, i32, i64)>,
    mut commands: Option<mpsc::UnboundedReceiver<FetchCommand>>,
    tx: Tx,
) {
    let mut parts: Vec<Part> = assigned
        .into_iter()
        .map(|(topic, partition, offset)| new_part(&cfg, Arc::from(topic), partition, offset, 0))
        .collect();
    let mut inflight: JoinSet<Outcome> = JoinSet::new();
    // Brokers with a Fetch in flight (one at a time per broker, on its own connection).
    let mut busy_nodes: BTreeSet<i32> = BTreeSet::new();
    // The fetch session with each broker fetched from (KIP-227).
    let mut sessions: HashMap<i32, FetchSession> = HashMap::new();
    let fetch_pool = Arc::new(BrokerPool::counted_by(
        client.connection_config().clone(),
        client.connection_meter().clone(),
    ));
    // While partitions wait out a backoff (their leader failed, say), metadata is
    // polled every `metadata_fast_refresh_interval`; a partition whose leader
    // epoch grew is fetched again at once. One poll at a time.
    let mut poll_at: Option<Instant> = None;
    let mut polling = false;
    loop {
        if let Some(rx) = commands.as_mut() {
            loop {
                match rx.try_recv() {
                    Ok(cmd) => apply(&cfg, &mut parts, cmd),
                    Err(mpsc::error::TryRecvError::Empty) => break,
                    Err(mpsc::error::TryRecvError::Disconnected) => {
                        commands = None;
                        break;
                    }
                }
            }
        }
        if commands.is_none() && parts.iter().all(|p| p.stopped || p.removed) {
            return;
        }
        let now = Instant::now();
        // Group idle partitions by the broker to fetch them from, and those whose
        // position must be validated first by leader.
        let mut groups: BTreeMap<i32, (u64, Vec<usize>)> = BTreeMap::new();
        let mut validations: BTreeMap<i32, (u64, Vec<usize>)> = BTreeMap::new();
        for (i, p) in parts.iter_mut().enumerate() {
            if p.busy || p.stopped || p.removed || p.retry_at.is_some_and(|t| t > now) {
                continue;
            }
            match client.leader(&p.topic, p.partition).await {
                Ok((leader, generation)) => {
                    p.missing_reported = false;
                    let meta = client.metadata();
                    let epoch = meta
                        .topic(&p.topic)
                        .and_then(|t| t.partition(p.partition))
                        .map_or(-1, |m| m.leader_epoch);
                    if epoch > p.leader_epoch {
                        // A new leader (KIP-320): what we read may not be in its
                        // log. Validate the position unless nothing was read yet.
                        if p.leader_epoch >= 0 && p.last_epoch >= 0 {
                            p.validate = true;
                        }
                        p.leader_epoch = epoch;
                        p.preferred = None;
                    }
                    if p.validate {
                        validations
                            .entry(leader)
                            .or_insert((generation, Vec::new()))
                            .1
                            .push(i);
                        continue;
                    }
                    let node = match p.preferred {
                        Some(r)
                            if meta.broker(r).is_some()
                                && p.preferred_until.is_some_and(|t| t > now) =>
                        {
                            r
                        }
                        _ => {
                            p.preferred = None;
                            leader
                        }
                    };
                    if !busy_nodes.contains(&node) {
                        groups
                            .entry(node)
                            .or_insert((generation, Vec::new()))
                            .1
                            .push(i);
                    }
                }
                Err(e) if e.is_retriable() => backoff(p, &cfg),
                Err(
                    e @ (ClientError::UnknownTopic { .. } | ClientError::UnknownPartition { .. }),
                ) => {
                    // Metadata can lag the cluster (a broker that restarted and
                    // has not replayed the topic yet answered): keep trying, as
                    // Kafka's consumer does. The application hears of it once.
                    backoff(p, &cfg);
                    if !p.missing_reported {
                        p.missing_reported = true;
                        if emit(&tx, p.epoch, e.into()).await.is_err() {
                            return;
                        }
                    }
                }
                Err(e) => {
                    p.stopped = true;
                    if emit(&tx, p.epoch, e.into()).await.is_err() {
                        return;
                    }
                }
            }
        }
        for (leader, (generation, idxs)) in validations {
            let req = validate::request(idxs.iter().map(|&i| {
                let p = &parts[i];
                (&*p.topic, p.partition, p.leader_epoch, p.last_epoch)
            }));
            let epochs: Vec<u64> = idxs.iter().map(|&i| parts[i].epoch).collect();
            for &i in &idxs {
                parts[i].busy = true;
            }
            let client = client.clone();
            inflight.spawn(async move {
                let result = async {
                    let conn = client.node_connection(leader).await?;
                    Ok::<OffsetForLeaderEpochResponse, ClientError>(conn.send(&req).await?)
                }
                .await;
                Outcome::Validate(validate::Done {
                    generation,
                    parts: idxs,
                    epochs,
                    result,
                })
            });
        }
        for (node, (generation, idxs)) in groups {
            let meta = client.metadata();
            let topic_ids: Vec<Uuid> = idxs
                .iter()
                .map(|&i| {
                    meta.topic(&parts[i].topic)
                        .map_or(Uuid::ZERO, |t| t.topic_id)
                })
                .collect();
            let wants = wants(&parts, &idxs, &topic_ids);
            let session = sessions.entry(node).or_default();
            let req = build_request(&cfg, session, &wants);
            let full = req.session_epoch == 0;
            tracing::trace!(
                node,
                session_id = req.session_id,
                session_epoch = req.session_epoch,
                partitions = wants.len(),
                sent = req.topics.iter().map(|t| t.partitions.len()).sum::<usize>(),
                "fetch"
            );
            let epochs: Vec<u64> = idxs.iter().map(|&i| parts[i].epoch).collect();
            for &i in &idxs {
                parts[i].busy = true;
            }
            busy_nodes.insert(node);
            let client = client.clone();
            let pool = fetch_pool.clone();
            let timeout = client.request_timeout() + cfg.max_wait;
            let meter = cfg.meter.clone();
            inflight.spawn(async move {
                let result = async {
                    let conn = client.node_connection_in(&pool, node).await?;
                    let started = Instant::now();
                    let sent = conn.send_with_timeout(&req, timeout).await;
                    meter.fetched(node, started.elapsed());
                    Ok(sent?)
                }
                .await;
                Outcome::Fetch(Done {
                    node,
                    full,
                    generation,
                    parts: idxs,
                    epochs,
                    topic_ids,
                    result,
                })
            });
        }
        let backing_off = parts
            .iter()
            .any(|p| !p.busy && !p.stopped && !p.removed && p.retry_at.is_some_and(|t| t > now));
        if !backing_off {
            poll_at = None;
        } else if !polling {
            let at = *poll_at.get_or_insert(now + client.fast_refresh_interval());
            if at <= now {
                polling = true;
                poll_at = None;
                let client = client.clone();
                inflight.spawn(async move {
                    let seen = client.metadata_snapshot().1;
                    if let Err(e) = client
                        .refresh(crate::metadata::Scope::Topics(Vec::new()), Some(seen))
                        .await
                    {
                        tracing::debug!(error = %e, "leader poll: metadata refresh failed");
                    }
                    Outcome::Polled
                });
            }
        }
        // The next backoff (or leader poll) to end. A backoff that has ended
        // already belongs to a partition whose broker has a fetch in flight: that
        // fetch's completion wakes this loop, so waiting for it here would spin.
        let next_retry = parts
            .iter()
            .filter(|p| !p.busy && !p.stopped && !p.removed)
            .filter_map(|p| p.retry_at)
            .filter(|&t| t > now)
            .chain(poll_at.filter(|_| !polling))
            .min();
        let outcome = tokio::select! {
            Some(joined) = inflight.join_next(), if !inflight.is_empty() => match joined {
                Ok(outcome) => Some(outcome),
                Err(_) => return, // a fetch task panicked or was cancelled at shutdown
            },
            _ = sleep_until_opt(next_retry) => None,
            cmd = next_command(&mut commands) => {
                match cmd {
                    Some(cmd) => apply(&cfg, &mut parts, cmd),
                    None => commands = None,
                }
                None
            }
            _ = tx.closed() => return,
        };
        let handled = match outcome {
            None => continue,
            Some(Outcome::Polled) => {
                polling = false;
                hasten_moved(&client, &mut parts);
                Ok(())
            }
            Some(Outcome::Validate(done)) => {
                for &i in &done.parts {
                    parts[i].busy = false;
                }
                validate::handle(&client, &cfg, &mut parts, done, &tx).await
            }
            Some(Outcome::Fetch(done)) => {
                busy_nodes.remove(&done.node);
                for &i in &done.parts {
                    parts[i].busy = false;
                }
                let session = sessions.entry(done.node).or_default();
                match &done.result {
                    Ok(resp) => session.on_response(resp.error_code, resp.session_id),
                    Err(_) => session.on_failure(),
                }
                handle(&client, &cfg, &mut parts, done, &tx).await
            }
        };
        if handled.is_err() {
            return;
        }
    }
}

/// Ends the backoff of partitions whose leader epoch in metadata grew past the
/// one they last fetched from: the new leader is tried at once.
fn hasten_moved(client: &Client, parts: &mut [Part]) {
    let meta = client.metadata();
    let now = Instant::now();
    for p in parts.iter_mut() {
        if p.busy || p.stopped || p.removed || p.retry_at.is_none_or(|t| t <= now) {
            continue;
        }
        let epoch = meta
            .topic(&p.topic)
            .and_then(|t| t.partition(p.partition))
            .filter(|m| m.leader.is_some())
            .map_or(-1, |m| m.leader_epoch);
        if epoch > p.leader_epoch {
            tracing::debug!(topic = %p.topic, partition = p.partition, leader_epoch = epoch, "partition has a new leader; fetching without backoff");
            p.retry_at = None;
        }
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Counts a retriable failure of `p` and sets when it is fetched again:
/// `retry_backoff` doubling (at most 4 times) up to 1 s, jittered.
fn backoff(p: &mut Part, cfg: &ConsumerConfig) {
    p.failures = p.failures.saturating_add(1);
    let cap = Duration::from_secs(1).min(cfg.retry_backoff.saturating_mul(1 << 4));
    p.retry_at = Some(Instant::now() + Backoff::new(cfg.retry_backoff, cap).delay(p.failures));
}

/// What to fetch of the partitions `idxs` (KIP-320: with the leader epoch from
/// metadata and the epoch of the last batch read).
fn wants(parts: &[Part], idxs: &[usize], topic_ids: &[Uuid]) -> Vec<Want> {
    idxs.iter()
        .zip(topic_ids)
        .map(|(&i, &topic_id)| {
            let p = &parts[i];
            Want {
                topic: p.topic.clone(),
                topic_id,
                fetch: FetchPartition {
                    partition: p.partition,
                    current_leader_epoch: p.leader_epoch,
                    fetch_offset: p.offset,
                    last_fetched_epoch: p.last_epoch,
                    log_start_offset: -1,
                    partition_max_bytes: p.max_bytes,
                },
            }
        })
        .collect()
}

/// The Fetch request for `wants` in `session` (full or incremental, KIP-227).
fn build_request(cfg: &ConsumerConfig, session: &mut FetchSession, wants: &[Want]) -> FetchRequest {
    let built = session.build(wants);
    FetchRequest {
        cluster_id: None,
        replica_id: -1,
        max_wait_ms: cfg.max_wait.as_millis().min(i32::MAX as u128) as i32,
        min_bytes: cfg.min_bytes,
        max_bytes: cfg.max_bytes,
        isolation_level: cfg.isolation_level.wire(),
        session_id: built.session_id,
        session_epoch: built.session_epoch,
        topics: built.topics,
        forgotten_topics_data: built.forgotten,
        rack_id: cfg.client_rack.clone(),
    }
}

/// The receiver is gone; stop.
struct Gone;

/// Sends an error about one partition.
async fn emit(tx: &Tx, epoch: u64, e: ConsumerError) -> Result<(), Gone> {
    tx.send(epoch, Err(e)).await
}

/// Records gathered for the next chunk of one partition, and the budget held for
/// them (see [`super::budget`]).
///
/// Invariant: the fetch task holds `carried + batch` permits, fewer than the whole
/// budget (or none when the budget is one byte).
#[derive(Default)]
struct Pending {
    records: Vec<ConsumerRecord>,
    /// The records' cost, acquired when they are sent.
    bytes: usize,
    /// Charges that travel with this chunk: the decompressed sections of the
    /// batches whose last record is in `records`.
    carried: Option<OwnedSemaphorePermit>,
    /// The charge of the compressed batch whose records are being gathered; moves
    /// to `carried` with its last record.
    batch: Option<OwnedSemaphorePermit>,
}

fn permits(p: &Option<OwnedSemaphorePermit>) -> usize {
    p.as_ref().map_or(0, |p| p.num_permits())
}

fn merge(into: &mut Option<OwnedSemaphorePermit>, other: Option<OwnedSemaphorePermit>) {
    match (into.as_mut(), other) {
        (Some(a), Some(b)) => a.merge(b),
        (None, b) => *into = b,
        (Some(_), None) => {}
    }
}

impl Pending {
    fn held(&self) -> usize {
        permits(&self.carried) + permits(&self.batch)
    }

    /// Charges a compressed batch's decompressed section of `bytes`, before any of
    /// its records is gathered. Sends the gathered records first if the charges
    /// they carry leave too little room.
    async fn charge_batch(&mut self, tx: &Tx, epoch: u64, bytes: usize) -> Result<(), Gone> {
        let ceiling = tx.budget.total().saturating_sub(1);
        if self.carried.is_some() && permits(&self.carried).saturating_add(bytes) > ceiling {
            self.flush(tx, epoch).await?;
        }
        let room = ceiling.saturating_sub(self.held());
        self.batch = Some(tx.budget.acquire(bytes.min(room), self.held()).await);
        Ok(())
    }

    /// The current batch's records are all gathered: its charge goes with them.
    fn end_batch(&mut self) {
        let batch = self.batch.take();
        merge(&mut self.carried, batch);
    }

    /// Gathers one record, sending the chunk when it is full.
    async fn push(&mut self, tx: &Tx, epoch: u64, record: ConsumerRecord) -> Result<(), Gone> {
        if self.records.capacity() == 0 {
            self.records.reserve_exact(tx.chunk);
        }
        self.bytes += record_cost(&record);
        self.records.push(record);
        if self.records.len() >= tx.chunk || self.bytes >= tx.chunk_bytes {
            self.flush(tx, epoch).await?;
        }
        Ok(())
    }

    /// Acquires the gathered records' charge and sends them with it, if any.
    async fn flush(&mut self, tx: &Tx, epoch: u64) -> Result<(), Gone> {
        if self.records.is_empty() {
            // A batch none of whose records is yielded: its section is not kept.
            self.carried = None;
            return Ok(());
        }
        let mut charge = tx.budget.acquire(self.bytes, self.held()).await;
        if let Some(carried) = self.carried.take() {
            charge.merge(carried);
        }
        self.bytes = 0;
        let records = std::mem::take(&mut self.records);
        tx.send(
            epoch,
            Ok(RecordChunk {
                records,
                charge,
                skipped: None,
            }),
        )
        .await
    }
}

/// Handles one Fetch response: yields records, schedules retries, reports errors.
async fn handle(
    client: &Client,
    cfg: &ConsumerConfig,
    parts: &mut [Part],
    done: Done,
    tx: &Tx,
) -> Result<(), Gone> {
    let resp = match done.result {
        Ok(resp) if resp.error_code == 0 => resp,
        other => {
            let session_error = match &other {
                Err(e) => {
                    tracing::debug!(node = done.node, error = %e, "fetch failed");
                    false
                }
                Ok(resp) => {
                    let code = ErrorCode::from_code(resp.error_code);
                    tracing::debug!(node = done.node, %code, "fetch refused");
                    matches!(
                        code,
                        ErrorCode::FetchSessionIdNotFound | ErrorCode::InvalidFetchSessionEpoch
                    )
                }
            };
            if session_error && !done.full {
                // The session is gone or out of step (KIP-227): the next request,
                // a full one, goes out at once.
                return Ok(());
            }
            if !session_error {
                client.invalidate_metadata(done.generation);
            }
            for (k, &i) in done.parts.iter().enumerate() {
                let p = &mut parts[i];
                if p.epoch == done.epochs[k] {
                    if p.preferred == Some(done.node) {
                        // A failing preferred replica: back to the leader (KIP-392).
                        p.preferred = None;
                    }
                    backoff(p, cfg);
                }
            }
            return Ok(());
        }
    };
    // Where each partition of the request is, by topic name and by topic id.
    let mut by_name: HashMap<(&str, i32), usize> = HashMap::with_capacity(done.parts.len());
    let mut by_id: HashMap<(Uuid, i32), usize> = HashMap::new();
    for (k, &i) in done.parts.iter().enumerate() {
        by_name.insert((&*parts[i].topic, parts[i].partition), k);
        if done.topic_ids[k] != Uuid::ZERO {
            by_id.insert((done.topic_ids[k], parts[i].partition), k);
        }
    }
    let mut found: Vec<(usize, FetchResponsePartitionData)> = Vec::new();
    for t in resp.responses {
        for pd in t.partitions {
            let k = by_name
                .get(&(t.topic.as_str(), pd.partition_index))
                .or_else(|| {
                    (t.topic_id != Uuid::ZERO)
                        .then(|| by_id.get(&(t.topic_id, pd.partition_index)))
                        .flatten()
                })
                .copied();
            if let Some(k) = k {
                found.push((k, pd));
            }
        }
    }
    drop(by_name);
    drop(by_id);
    let mut answered = vec![false; done.parts.len()];
    for (k, pd) in found {
        if answered[k] {
            continue;
        }
        answered[k] = true;
        let part = &mut parts[done.parts[k]];
        if part.epoch != done.epochs[k] || part.removed || part.stopped {
            // Reassigned, sought or removed since the Fetch was built.
            continue;
        }
        let from_replica = part.preferred == Some(done.node);
        let code = ErrorCode::from_code(pd.error_code);
        match code {
            ErrorCode::None
                if pd.diverging_epoch.epoch >= 0 || pd.diverging_epoch.end_offset >= 0 =>
            {
                // The log parted from what we read (KIP-320, Fetch v12+).
                part.failures = 0;
                let div = &pd.diverging_epoch;
                validate::diverged(client, cfg, part, div.epoch, div.end_offset, tx).await?;
            }
            ErrorCode::None => {
                part.failures = 0;
                if pd.preferred_read_replica >= 0 && pd.preferred_read_replica != done.node {
                    tracing::debug!(topic = %part.topic, partition = part.partition, replica = pd.preferred_read_replica, "fetching from the preferred read replica");
                    part.preferred = Some(pd.preferred_read_replica);
                    part.preferred_until = Some(Instant::now() + PREFERRED_REPLICA_LEASE);
                }
                let high_watermark = pd.high_watermark;
                let data = pd.records.unwrap_or_default();
                let aborted = match cfg.isolation_level {
                    IsolationLevel::ReadCommitted => AbortedFilter::new(pd.aborted_transactions),
                    IsolationLevel::ReadUncommitted => AbortedFilter::default(),
                };
                consume(client, cfg, part, data, aborted, done.generation, tx).await?;
                part.meter.update(high_watermark, part.offset);
            }
            ErrorCode::OffsetOutOfRange if from_replica => {
                // A follower may lag the leader or be ahead of what it knows
                // of the high watermark: ask the leader, as Kafka's consumer
                // does, before any reset.
                part.preferred = None;
            }
            ErrorCode::OffsetOutOfRange => out_of_range(client, cfg, part, tx).await?,
            code if code.is_retriable() => {
                part.preferred = None;
                client.invalidate_metadata(done.generation);
                backoff(part, cfg);
            }
            code => {
                part.stopped = true;
                let topic = part.topic.to_string();
                let partition = part.partition;
                let error = match code {
                    ErrorCode::TopicAuthorizationFailed => {
                        ConsumerError::TopicAuthorizationFailed { topic, partition }
                    }
                    code => ConsumerError::Broker {
                        topic,
                        partition,
                        code,
                    },
                };
                emit(tx, part.epoch, error).await?;
            }
        }
    }
    // Partitions left out of the response (the broker's size limit, or unchanged
    // in an incremental fetch) are simply fetched again.
    Ok(())
}

/// OFFSET_OUT_OF_RANGE from the leader: apply the reset policy.
async fn out_of_range(
    client: &Client,
    cfg: &ConsumerConfig,
    part: &mut Part,
    tx: &Tx,
) -> Result<(), Gone> {
    let spec = match cfg.offset_reset {
        OffsetReset::Fail => {
            part.stopped = true;
            return emit(
                tx,
                part.epoch,
                ConsumerError::OffsetOutOfRange {
                    topic: part.topic.to_string(),
                    partition: part.partition,
                    offset: part.offset,
                },
            )
            .await;
        }
        OffsetReset::Latest => OffsetSpec::Latest,
        OffsetReset::Earliest => OffsetSpec::Earliest,
    };
    let q = [(part.topic.to_string(), part.partition, spec)];
    match list_offsets(client, &q).await {
        Ok(found) => {
            let to = found.first().map_or(part.offset, |l| l.offset);
            tracing::info!(topic = %part.topic, partition = part.partition, from = part.offset, to, "offset out of range; reset");
            part.offset = to;
            part.last_epoch = found.first().map_or(-1, |l| l.leader_epoch);
            part.validate = false;
        }
        Err(e) if e.is_retriable() => backoff(part, cfg),
        Err(e) => {
            part.stopped = true;
            emit(tx, part.epoch, e.into()).await?;
        }
    }
    Ok(())
}

/// The position moved past a batch of leader epoch `epoch` (-1 for none).
fn note_epoch(part: &mut Part, epoch: i32) {
    if epoch >= 0 {
        part.last_epoch = epoch;
    }
}

/// Why [`consume`] stopped before the end of the fetched data.
enum Stop {
    /// A batch (at this offset) failed its CRC or could not be decoded.
    Corrupt(i64, DecodeError),
    /// A batch (at this offset) decompresses beyond this limit.
    TooLarge(i64, usize),
}

/// Yields the records of one partition's fetched data, batch by batch, each only
/// after its CRC and all its records check out. Records are decoded as they are
/// handed on, so only a chunk of them exists at a time (see [`super::budget`]).
/// Control batches, and batches `aborted` says belong to an aborted transaction,
/// are skipped: the position moves past them.
async fn consume(
    client: &Client,
    cfg: &ConsumerConfig,
    part: &mut Part,
    data: bytes::Bytes,
    mut aborted: AbortedFilter,
    generation: u64,
    tx: &Tx,
) -> Result<(), Gone> {
    let total = data.len();
    let limits = DecompressionLimits {
        max_bytes: cfg.max_decompressed_bytes,
        ..DecompressionLimits::default()
    };
    let mut iter = batches(data);
    let mut progressed = false;
    let mut stop: Option<Stop> = None;
    let mut pending = Pending::default();
    // The last batches handled yielded no record: the position moved past them.
    let mut trailing_skip = false;
    'batches: for next in iter.by_ref() {
        let batch = match next {
            Ok(b) => b,
            Err(e) => {
                stop = Some(Stop::Corrupt(part.offset, e));
                break;
            }
        };
        let abort_marker = if batch.is_control() {
            Some(
                batch
                    .records()
                    .ok()
                    .and_then(|mut r| r.next())
                    .and_then(Result::ok)
                    .and_then(|r| r.key)
                    .and_then(|k| is_abort_marker(&k))
                    .unwrap_or(false),
            )
        } else {
            None
        };
        // Every batch passes the filter, also those below the position, so that
        // the aborted transactions they start are known.
        let skip = aborted.skip(BatchInfo {
            producer_id: batch.producer_id(),
            last_offset: batch.last_offset(),
            transactional: batch.is_transactional(),
            abort_marker,
        });
        if batch.next_offset() <= part.offset {
            continue;
        }
        if cfg.check_crcs {
            if let Err(e) = batch.verify_crc() {
                stop = Some(Stop::Corrupt(batch.base_offset(), e));
                break;
            }
        }
        if batch.is_control() || skip {
            part.offset = batch.next_offset();
            note_epoch(part, batch.partition_leader_epoch());
            progressed = true;
            trailing_skip = true;
            continue;
        }
        // Decompressed once; every record checked in one pass before any is yielded.
        let records = match batch
            .records_with_limits(&limits)
            .and_then(|r| r.check().map(|()| r))
        {
            Ok(r) => r,
            Err(DecodeError::DecompressedTooLarge { limit, .. }) => {
                stop = Some(Stop::TooLarge(batch.base_offset(), limit));
                break;
            }
            Err(e) => {
                stop = Some(Stop::Corrupt(batch.base_offset(), e));
                break;
            }
        };
        if batch.compression() != Compression::None {
            pending
                .charge_batch(tx, part.epoch, records.remaining_bytes())
                .await?;
        }
        for r in records {
            let r = match r {
                Ok(r) => r,
                Err(e) => {
                    // `check` passed, so decoding cannot fail; should it, what was
                    // yielded stays yielded.
                    pending.end_batch();
                    stop = Some(Stop::Corrupt(batch.base_offset(), e));
                    break 'batches;
                }
            };
            if r.offset < part.offset {
                continue;
            }
            let record = ConsumerRecord {
                topic: part.topic.clone(),
                partition: part.partition,
                offset: r.offset,
                timestamp: r.timestamp,
                key: r.key,
                value: r.value,
                headers: r.headers,
                leader_epoch: batch.partition_leader_epoch().max(-1),
            };
            part.offset = r.offset.wrapping_add(1);
            pending.push(tx, part.epoch, record).await?;
        }
        pending.end_batch();
        part.offset = batch.next_offset();
        note_epoch(part, batch.partition_leader_epoch());
        part.corrupt = 0;
        progressed = true;
        trailing_skip = false;
    }
    pending.flush(tx, part.epoch).await?;
    if trailing_skip {
        let skipped = Skipped {
            topic: part.topic.clone(),
            partition: part.partition,
            next_offset: part.offset,
        };
        let chunk = RecordChunk {
            records: Vec::new(),
            charge: tx.budget.acquire(0, 0).await,
            skipped: Some(skipped),
        };
        tx.send(part.epoch, Ok(chunk)).await?;
    }
    match stop {
        Some(Stop::TooLarge(offset, limit)) => {
            // Fetching it again cannot help.
            part.stopped = true;
            tracing::warn!(topic = %part.topic, partition = part.partition, offset, limit, "record batch decompresses beyond the limit");
            let e = ConsumerError::BatchTooLarge {
                topic: part.topic.to_string(),
                partition: part.partition,
                offset,
                limit,
            };
            return emit(tx, part.epoch, e).await;
        }
        Some(Stop::Corrupt(offset, e)) => {
            part.corrupt += 1;
            tracing::warn!(topic = %part.topic, partition = part.partition, offset, attempt = part.corrupt, error = %e, "corrupt record batch");
            if part.corrupt >= cfg.max_corrupt_attempts {
                part.stopped = true;
                emit(
                    tx,
                    part.epoch,
                    ConsumerError::CorruptBatch {
                        topic: part.topic.to_string(),
                        partition: part.partition,
                        offset,
                        attempts: part.corrupt,
                        source: e,
                    },
                )
                .await?;
            } else {
                // A new leader may serve a healthy copy.
                client.invalidate_metadata(generation);
                backoff(part, cfg);
            }
            return Ok(());
        }
        None => {}
    }
    if !progressed && iter.position() == 0 && total > 0 {
        // One batch larger than the partition limit came back truncated: ask for more.
        part.max_bytes = part.max_bytes.saturating_mul(2);
    }
    Ok(())
}
