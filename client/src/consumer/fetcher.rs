//! The consumer's background fetch task.
//!
//! Each assigned partition is idle, in a fetch, waiting out a backoff, or stopped
//! (after a terminal error). Idle partitions are grouped by leader; a leader with no
//! Fetch in flight gets one covering all of them. Responses are handled as they
//! arrive, so a slow broker does not hold back the others.

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

type Tx = mpsc::Sender<Result<ConsumerRecord, ConsumerError>>;

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
    /// Failed for good; never fetched again.
    stopped: bool,
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
    topic_ids: Vec<Uuid>,
    result: Result<FetchResponse, ClientError>,
}

/// Runs until the consumer is dropped (its receiver closes) or every partition has
/// stopped.
pub(crate) async fn run(
    client: Client,
    cfg: ConsumerConfig,
    assigned: Vec<(String, i32, i64)>,
    tx: Tx,
) {
    let mut parts: Vec<Part> = assigned
        .into_iter()
        .map(|(topic, partition, offset)| Part {
            topic: Arc::from(topic),
            partition,
            offset,
            busy: false,
            retry_at: None,
            stopped: false,
            corrupt: 0,
            max_bytes: cfg.partition_max_bytes,
            failures: 0,
        })
        .collect();
    let mut inflight: JoinSet<Done> = JoinSet::new();
    let mut busy_leaders: BTreeSet<i32> = BTreeSet::new();
    loop {
        if parts.iter().all(|p| p.stopped) {
            return;
        }
        let now = Instant::now();
        // Group idle partitions by leader.
        let mut groups: BTreeMap<i32, (u64, Vec<usize>)> = BTreeMap::new();
        for (i, p) in parts.iter_mut().enumerate() {
            if p.busy || p.stopped || p.retry_at.is_some_and(|t| t > now) {
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
                    if tx.send(Err(e.into())).await.is_err() {
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
            for &i in &idxs {
                parts[i].busy = true;
            }
            busy_leaders.insert(leader);
            let client = client.clone();
            let timeout = client.request_timeout() + cfg.max_wait;
            inflight.spawn(async move {
                let result = async {
                    let conn = client.inner.node_connection(leader).await?;
                    Ok(conn.send_with_timeout(&req, timeout).await?)
                }
                .await;
                Done {
                    leader,
                    generation,
                    parts: idxs,
                    topic_ids,
                    result,
                }
            });
        }
        let next_retry = parts
            .iter()
            .filter(|p| !p.busy && !p.stopped)
            .filter_map(|p| p.retry_at)
            .min();
        let done = tokio::select! {
            Some(joined) = inflight.join_next(), if !inflight.is_empty() => match joined {
                Ok(done) => Some(done),
                Err(_) => return, // a fetch task panicked or was cancelled at shutdown
            },
            _ = sleep_until_opt(next_retry) => None,
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

async fn emit(tx: &Tx, item: Result<ConsumerRecord, ConsumerError>) -> Result<(), Gone> {
    tx.send(item).await.map_err(|_| Gone)
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
            for &i in &done.parts {
                backoff(&mut parts[i], cfg);
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
                                emit(tx, Err(e.into())).await?;
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
        if let Err(e) = batch.verify_crc() {
            corrupt = Some((batch.base_offset(), e));
            break;
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
            emit(tx, Ok(record)).await?;
        }
        part.offset = batch.next_offset();
        part.corrupt = 0;
        progressed = true;
    }
    if let Some((offset, e)) = corrupt {
        part.corrupt += 1;
        tracing::warn!(topic = %part.topic, partition = part.partition, offset, attempt = part.corrupt, error = %e, "corrupt record batch");
        if part.corrupt >= cfg.max_corrupt_attempts {
            part.stopped = true;
            emit(
                tx,
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
