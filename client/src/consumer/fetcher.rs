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
//! Fetches go over the task's own connections (one per leader, closed when the
//! task ends), not the client's shared pool: a Fetch can wait up to `max_wait` at
//! the broker, and a broker answers each connection's requests in order, so on a
//! shared connection every Produce, Metadata or admin answer to that broker would
//! queue behind the long poll (the Java client and librdkafka likewise give each
//! consumer its own sockets).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use baton_protocol::messages::{FetchPartition, FetchRequest, FetchResponse, FetchTopic};
use baton_protocol::record::{batches, Record};
use baton_protocol::{DecodeError, ErrorCode, Uuid};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::{ConsumerConfig, ConsumerError, ConsumerRecord, OffsetReset};
use crate::admin::{list_offsets, OffsetSpec};
use crate::client::{Client, ClientError};
use crate::pool::BrokerPool;

/// What the plain [`Consumer`](super::Consumer) receives: up to one chunk of
/// records of one partition, in offset order, or an error about one partition.
pub(crate) type Chunk = Result<Vec<ConsumerRecord>, ConsumerError>;

/// Where the task sends its output.
#[derive(Debug)]
pub(crate) enum Tx {
    /// One message per chunk of at most `chunk` records (a fixed assignment, where
    /// epochs never change): one channel operation for many records.
    Chunks {
        tx: mpsc::Sender<Chunk>,
        chunk: usize,
    },
    /// One message per chunk of at most `chunk` records of one partition, stamped
    /// with the partition's epoch (the group consumer, which checks the epoch of
    /// each record as it returns it).
    Stamped {
        tx: mpsc::Sender<StampedChunk>,
        chunk: usize,
    },
}

/// A [`Chunk`] and the epoch of its partition when it was emitted.
#[derive(Debug)]
pub(crate) struct StampedChunk {
    pub(crate) epoch: u64,
    pub(crate) item: Chunk,
}

impl Tx {
    async fn closed(&self) {
        match self {
            Tx::Chunks { tx, .. } => tx.closed().await,
            Tx::Stamped { tx, .. } => tx.closed().await,
        }
    }
}

/// A change to the fetched partitions while the task runs.
#[derive(Debug)]
pub(crate) enum FetchCommand {
    /// Fetch `topic`/`partition` from `offset`, stamping its output with `epoch`
    /// (which must differ from the partition's previous epoch). Replaces any earlier
    /// position of the partition, including a stopped one.
    Assign {
        topic: Arc<str>,
        partition: i32,
        offset: i64,
        epoch: u64,
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
}

/// What a fetch task hands back.
struct Done {
    leader: i32,
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
        topic,
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
        } => match parts
            .iter_mut()
            .find(|p| p.partition == partition && p.topic == topic)
        {
            Some(p) => {
                let busy = p.busy;
                *p = new_part(cfg, topic, partition, offset, epoch);
                // An answer still in flight is discarded by its epoch.
                p.busy = busy;
            }
            None => parts.push(new_part(cfg, topic, partition, offset, epoch)),
        },
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
    tx: impl Into<Tx>,
) {
    let tx: Tx = tx.into();
    let mut parts: Vec<Part> = assigned
        .into_iter()
        .map(|(topic, partition, offset)| new_part(&cfg, Arc::from(topic), partition, offset, 0))
        .collect();
    let mut inflight: JoinSet<Done> = JoinSet::new();
    let mut busy_leaders: BTreeSet<i32> = BTreeSet::new();
    let fetch_pool = Arc::new(BrokerPool::new(client.inner.pool.config().clone()));
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
        // Group idle partitions by leader.
        let mut groups: BTreeMap<i32, (u64, Vec<usize>)> = BTreeMap::new();
        for (i, p) in parts.iter_mut().enumerate() {
            if p.busy || p.stopped || p.removed || p.retry_at.is_some_and(|t| t > now) {
                continue;
            }
            match client.inner.leader(&p.topic, p.partition).await {
                Ok((leader, generation)) => {
                    if !busy_leaders.contains(&leader) {
                        groups
                            .entry(leader)
                            .or_insert((generation, Vec::new()))
                            .1
                            .push(i);
                    }
                }
                Err(e) if e.is_retriable() => backoff(p, &cfg),
                Err(e) => {
                    p.stopped = true;
                    if emit(&tx, p.epoch, Err(e.into())).await.is_err() {
                        return;
                    }
                }
            }
        }
        for (leader, (generation, idxs)) in groups {
            let meta = client.metadata();
            let topic_ids: Vec<Uuid> = idxs
                .iter()
                .map(|&i| {
                    meta.topic(&parts[i].topic)
                        .map_or(Uuid::ZERO, |t| t.topic_id)
                })
                .collect();
            let req = build_request(&cfg, &parts, &idxs, &topic_ids);
            let epochs: Vec<u64> = idxs.iter().map(|&i| parts[i].epoch).collect();
            for &i in &idxs {
                parts[i].busy = true;
            }
            busy_leaders.insert(leader);
            let client = client.clone();
            let pool = fetch_pool.clone();
            let timeout = client.request_timeout() + cfg.max_wait;
            inflight.spawn(async move {
                let result = async {
                    let conn = client.inner.node_connection_in(&pool, leader).await?;
                    Ok(conn.send_with_timeout(&req, timeout).await?)
                }
                .await;
                Done {
                    leader,
                    generation,
                    parts: idxs,
                    epochs,
                    topic_ids,
                    result,
                }
            });
        }
        let next_retry = parts
            .iter()
            .filter(|p| !p.busy && !p.stopped && !p.removed)
            .filter_map(|p| p.retry_at)
            .min();
        let done = tokio::select! {
            Some(joined) = inflight.join_next(), if !inflight.is_empty() => match joined {
                Ok(done) => Some(done),
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
        let Some(done) = done else { continue };
        busy_leaders.remove(&done.leader);
        for &i in &done.parts {
            parts[i].busy = false;
        }
        if handle(&client, &cfg, &mut parts, done, &tx).await.is_err() {
            return;
        }
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn backoff(p: &mut Part, cfg: &ConsumerConfig) {
    p.failures = p.failures.saturating_add(1);
    let shift = p.failures.saturating_sub(1).min(4);
    p.retry_at =
        Some(Instant::now() + (cfg.retry_backoff * (1u32 << shift)).min(Duration::from_secs(1)));
}

fn build_request(
    cfg: &ConsumerConfig,
    parts: &[Part],
    idxs: &[usize],
    topic_ids: &[Uuid],
) -> FetchRequest {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for (k, &i) in idxs.iter().enumerate() {
        let p = &parts[i];
        let fp = FetchPartition {
            partition: p.partition,
            current_leader_epoch: -1,
            fetch_offset: p.offset,
            last_fetched_epoch: -1,
            log_start_offset: -1,
            partition_max_bytes: p.max_bytes,
        };
        match topics.iter_mut().find(|t| t.topic == *p.topic) {
            Some(t) => t.partitions.push(fp),
            None => topics.push(FetchTopic {
                topic: p.topic.to_string(),
                topic_id: topic_ids[k],
                partitions: vec![fp],
            }),
        }
    }
    FetchRequest {
        cluster_id: None,
        replica_id: -1,
        max_wait_ms: cfg.max_wait.as_millis().min(i32::MAX as u128) as i32,
        min_bytes: cfg.min_bytes,
        max_bytes: cfg.max_bytes,
        isolation_level: 0,
        session_id: 0,
        session_epoch: -1,
        topics,
        forgotten_topics_data: Vec::new(),
        rack_id: String::new(),
    }
}

/// The receiver is gone; stop.
struct Gone;

async fn emit(
    tx: &Tx,
    epoch: u64,
    item: Result<ConsumerRecord, ConsumerError>,
) -> Result<(), Gone> {
    match tx {
        Tx::Chunks { tx, .. } => tx.send(item.map(|r| vec![r])).await.map_err(|_| Gone),
        Tx::Stamped { tx, .. } => {
            let item = item.map(|r| vec![r]);
            tx.send(StampedChunk { epoch, item })
                .await
                .map_err(|_| Gone)
        }
    }
}

/// Queues one record: gathered into `pending`, which is sent as one chunk when it
/// is full (and by [`flush`] at the end of each partition's records).
async fn push(
    tx: &Tx,
    pending: &mut Vec<ConsumerRecord>,
    epoch: u64,
    record: ConsumerRecord,
) -> Result<(), Gone> {
    match tx {
        Tx::Chunks { chunk, .. } | Tx::Stamped { chunk, .. } => {
            if pending.capacity() == 0 {
                pending.reserve_exact(*chunk);
            }
            pending.push(record);
            if pending.len() >= *chunk {
                flush(tx, pending, epoch).await?;
            }
            Ok(())
        }
    }
}

/// Sends the records gathered by [`push`], if any.
async fn flush(tx: &Tx, pending: &mut Vec<ConsumerRecord>, epoch: u64) -> Result<(), Gone> {
    match tx {
        Tx::Chunks { tx, .. } if !pending.is_empty() => {
            tx.send(Ok(std::mem::take(pending))).await.map_err(|_| Gone)
        }
        Tx::Stamped { tx, .. } if !pending.is_empty() => {
            let item = Ok(std::mem::take(pending));
            tx.send(StampedChunk { epoch, item })
                .await
                .map_err(|_| Gone)
        }
        _ => Ok(()),
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
            if let Err(e) = &other {
                tracing::debug!(leader = done.leader, error = %e, "fetch failed");
            }
            client.inner.metadata.invalidate(done.generation);
            for (k, &i) in done.parts.iter().enumerate() {
                if parts[i].epoch == done.epochs[k] {
                    backoff(&mut parts[i], cfg);
                }
            }
            return Ok(());
        }
    };
    let mut answered = vec![false; done.parts.len()];
    for t in resp.responses {
        for pd in t.partitions {
            let Some(k) = done.parts.iter().enumerate().position(|(k, &i)| {
                let p = &parts[i];
                p.partition == pd.partition_index
                    && (*p.topic == t.topic
                        || (t.topic_id != Uuid::ZERO && t.topic_id == done.topic_ids[k]))
            }) else {
                continue;
            };
            if answered[k] {
                continue;
            }
            answered[k] = true;
            let part = &mut parts[done.parts[k]];
            if part.epoch != done.epochs[k] || part.removed || part.stopped {
                // Reassigned, sought or removed since the Fetch was built.
                continue;
            }
            let code = ErrorCode::from_code(pd.error_code);
            match code {
                ErrorCode::None => {
                    part.failures = 0;
                    let data = pd.records.unwrap_or_default();
                    consume(client, cfg, part, data, done.generation, tx).await?;
                }
                ErrorCode::OffsetOutOfRange => match cfg.offset_reset {
                    OffsetReset::Fail => {
                        part.stopped = true;
                        emit(
                            tx,
                            part.epoch,
                            Err(ConsumerError::OffsetOutOfRange {
                                topic: part.topic.to_string(),
                                partition: part.partition,
                                offset: part.offset,
                            }),
                        )
                        .await?;
                    }
                    reset => {
                        let spec = if reset == OffsetReset::Latest {
                            OffsetSpec::Latest
                        } else {
                            OffsetSpec::Earliest
                        };
                        let q = [(part.topic.to_string(), part.partition, spec)];
                        match list_offsets(&client.inner, &q).await {
                            Ok(found) => {
                                let to = found.first().map_or(part.offset, |l| l.offset);
                                tracing::info!(topic = %part.topic, partition = part.partition, from = part.offset, to, "offset out of range; reset");
                                part.offset = to;
                            }
                            Err(e) if e.is_retriable() => backoff(part, cfg),
                            Err(e) => {
                                part.stopped = true;
                                emit(tx, part.epoch, Err(e.into())).await?;
                            }
                        }
                    }
                },
                code if code.is_retriable() => {
                    client.inner.metadata.invalidate(done.generation);
                    backoff(part, cfg);
                }
                code => {
                    part.stopped = true;
                    emit(
                        tx,
                        part.epoch,
                        Err(ConsumerError::Broker {
                            topic: part.topic.to_string(),
                            partition: part.partition,
                            code,
                        }),
                    )
                    .await?;
                }
            }
        }
    }
    // Partitions left out of the response (the broker's size limit) are simply
    // fetched again.
    Ok(())
}

/// Yields the records of one partition's fetched data, batch by batch, each only
/// after its CRC and all its records check out.
async fn consume(
    client: &Client,
    cfg: &ConsumerConfig,
    part: &mut Part,
    data: bytes::Bytes,
    generation: u64,
    tx: &Tx,
) -> Result<(), Gone> {
    let total = data.len();
    let mut iter = batches(data);
    let mut progressed = false;
    let mut corrupt: Option<(i64, DecodeError)> = None;
    let mut pending: Vec<ConsumerRecord> = Vec::new();
    for next in iter.by_ref() {
        let batch = match next {
            Ok(b) => b,
            Err(e) => {
                corrupt = Some((part.offset, e));
                break;
            }
        };
        if batch.next_offset() <= part.offset {
            continue;
        }
        if cfg.check_crcs {
            if let Err(e) = batch.verify_crc() {
                corrupt = Some((batch.base_offset(), e));
                break;
            }
        }
        if batch.is_control() {
            part.offset = batch.next_offset();
            progressed = true;
            continue;
        }
        let records: Result<Vec<Record>, DecodeError> = match batch.records() {
            Ok(it) => it.collect(),
            Err(e) => Err(e),
        };
        let records = match records {
            Ok(r) => r,
            Err(e) => {
                corrupt = Some((batch.base_offset(), e));
                break;
            }
        };
        for r in records {
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
            };
            push(tx, &mut pending, part.epoch, record).await?;
        }
        part.offset = batch.next_offset();
        part.corrupt = 0;
        progressed = true;
    }
    flush(tx, &mut pending, part.epoch).await?;
    if let Some((offset, e)) = corrupt {
        part.corrupt += 1;
        tracing::warn!(topic = %part.topic, partition = part.partition, offset, attempt = part.corrupt, error = %e, "corrupt record batch");
        if part.corrupt >= cfg.max_corrupt_attempts {
            part.stopped = true;
            emit(
                tx,
                part.epoch,
                Err(ConsumerError::CorruptBatch {
                    topic: part.topic.to_string(),
                    partition: part.partition,
                    offset,
                    attempts: part.corrupt,
                    source: e,
                }),
            )
            .await?;
        } else {
            // A new leader may serve a healthy copy.
            client.inner.metadata.invalidate(generation);
            backoff(part, cfg);
        }
        return Ok(());
    }
    if !progressed && iter.position() == 0 && total > 0 {
        // One batch larger than the partition limit came back truncated: ask for more.
        part.max_bytes = part.max_bytes.saturating_mul(2);
    }
    Ok(())
}
