//! The sender task: gets the idempotent producer's id and epoch, drains ready
//! batches, groups them per leader into Produce requests, and settles each record's
//! outcome.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use baton_protocol::messages::{
    InitProducerIdRequest, PartitionProduceData, PartitionProduceResponse, ProduceRequest,
    ProduceResponse, TopicProduceData,
};
use baton_protocol::ErrorCode;
use tokio::time::Instant;

use super::accumulator::{
    add_sequence, sequence_after, Batch, FastMap, InitBlocked, ProducerIdentity,
};
use super::leader_watch;
use super::transaction::{self, TransactionError};
use super::{brokers_connected_first, Acks, AttemptError, ProduceError, ProducerRecord, Shared};
use crate::backoff::Backoff;
use crate::client::ClientError;
use crate::connection::{Connection, ConnectionError};
use crate::metadata::LeaderHint;

/// Runs until the producer is closed and holds no more records.
pub(crate) async fn run(shared: Arc<Shared>) {
    let cfg = shared.config.clone();
    loop {
        let notified = shared.wake.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        // A transactional producer's identity comes from init_transactions and
        // the end of failed transactions, never from the sender.
        let need_init = {
            let acc = shared.lock();
            !acc.txn.enabled && acc.idem.needs_init(Instant::now()) && acc.has_queued()
        };
        if need_init {
            init_identity(&shared).await;
        }
        let (drained, done, init_at) = {
            let mut acc = shared.lock();
            let drained = acc.drain(
                Instant::now(),
                cfg.linger,
                cfg.batch_size,
                cfg.max_in_flight,
            );
            let done = acc.closed && acc.is_idle() && drained.ready.is_empty();
            let idem = &acc.idem;
            let waiting = idem.enabled
                && !acc.txn.enabled
                && idem.unsupported.is_none()
                && (idem.current.is_none() || idem.bump_requested)
                && acc.has_queued();
            let init_at = if waiting {
                Some(idem.retry_at.unwrap_or_else(Instant::now))
            } else {
                None
            };
            (drained, done, init_at)
        };
        shared
            .meter
            .buffer_available(shared.memory.available_permits());
        if !drained.expired.is_empty() || !drained.reset.is_empty() {
            if let Some(b) = drained.expired.first().or(drained.reset.first()) {
                let reason = format!("delivery timed out after {:?}", cfg.delivery_timeout);
                record_failed(&shared, &b.topic, b.partition, None, reason);
            }
        }
        for batch in drained.expired {
            fail_expired(&shared, batch);
        }
        for (batch, error) in drained.txn_failed {
            fail_records(batch, |record| ProduceError::Transaction {
                error: error.clone(),
                record,
            });
        }
        for batch in drained.reset {
            let cause = batch.last_error.clone().unwrap_or(AttemptError::Broker {
                code: ErrorCode::RequestTimedOut,
                message: Some(
                    "an earlier batch of the partition timed out after it was sent".into(),
                ),
            });
            fail_reset(batch, &cause);
        }
        if !drained.unsupported.is_empty() {
            let why = shared
                .lock()
                .idem
                .unsupported
                .clone()
                .expect("set before batches are failed for it");
            for batch in drained.unsupported {
                fail_records(batch, |record| why.error(record));
            }
        }
        if !drained.to_add.is_empty() {
            transaction::add_partitions(&shared, drained.to_add).await;
        }
        if done {
            return;
        }
        if !drained.ready.is_empty() {
            dispatch(&shared, drained.ready).await;
            continue;
        }
        let next = match (drained.next, init_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match next {
            Some(at) => {
                tokio::select! {
                    _ = &mut notified => {}
                    _ = tokio::time::sleep_until(at) => {}
                }
            }
            None => notified.await,
        }
    }
}

/// Why InitProducerId did not give an identity.
enum InitError {
    /// The cluster does not offer it (or no version this client speaks).
    Unsupported(ConnectionError),
    /// The broker refused it to this principal (CLUSTER_AUTHORIZATION_FAILED).
    Unauthorized(ErrorCode),
    /// Worth trying again after a backoff.
    Retry(String),
}

/// Asks for a producer id (or, after a broken sequence, a new epoch) and installs
/// it; on failure schedules the next attempt.
async fn init_identity(shared: &Arc<Shared>) {
    let (current, bump) = {
        let acc = shared.lock();
        (acc.idem.current, acc.idem.bump_requested)
    };
    let result = match current {
        // An idempotent (non-transactional) producer bumps its own epoch, as the
        // Java client does: partitions accept a newer epoch that starts again at
        // sequence 0 (KIP-360). Only an exhausted epoch needs a new producer id.
        Some(c) if bump && c.epoch < i16::MAX => Ok(ProducerIdentity {
            id: c.id,
            epoch: c.epoch + 1,
        }),
        _ => request_identity(shared, None).await,
    };
    let mut acc = shared.lock();
    match result {
        Ok(identity) => {
            tracing::debug!(
                producer_id = identity.id,
                epoch = identity.epoch,
                "producer identity"
            );
            acc.idem.current = Some(identity);
            acc.idem.bump_requested = false;
            acc.idem.failures = 0;
            acc.idem.retry_at = None;
        }
        Err(InitError::Unsupported(e)) => {
            tracing::warn!(error = %e, "the cluster does not support idempotent producers");
            acc.idem.unsupported = Some(InitBlocked::Unsupported(e));
        }
        Err(InitError::Unauthorized(code)) => {
            tracing::warn!(%code, "the broker refused InitProducerId to this principal");
            acc.idem.unsupported = Some(InitBlocked::Unauthorized(code));
        }
        Err(InitError::Retry(e)) => {
            acc.idem.failures += 1;
            let backoff = backoff(&shared.config, acc.idem.failures);
            tracing::info!(error = %e, ?backoff, "InitProducerId failed; retrying");
            acc.idem.retry_at = Some(Instant::now() + backoff);
        }
    }
}

/// One InitProducerId round trip to some broker. With `current`, asks to bump that
/// identity's epoch (KIP-360, v3+); a broker that refuses gets a plain request for a
/// new id.
async fn request_identity(
    shared: &Shared,
    current: Option<ProducerIdentity>,
) -> Result<ProducerIdentity, InitError> {
    let client = &shared.client;
    let nodes = brokers_connected_first(client, client.metadata_snapshot().0.brokers.keys());
    let mut last = "no broker known".to_string();
    for node in nodes {
        let conn = match client.node_connection(node).await {
            Ok(c) => c,
            Err(e) => {
                last = e.to_string();
                continue;
            }
        };
        let version = match conn.version_for::<InitProducerIdRequest>() {
            Ok(v) => v,
            Err(e) => return Err(InitError::Unsupported(e)),
        };
        let mut ask = current.filter(|_| version >= 3);
        loop {
            match init_once(&conn, shared, ask).await {
                Ok(identity) => return Ok(identity),
                Err(InitAttempt::Refused(code)) if ask.is_some() => {
                    tracing::debug!(%code, "epoch bump refused; asking for a new producer id");
                    ask = None;
                }
                Err(InitAttempt::Refused(
                    code @ (ErrorCode::ClusterAuthorizationFailed
                    | ErrorCode::TransactionalIdAuthorizationFailed),
                )) => return Err(InitError::Unauthorized(code)),
                Err(InitAttempt::Refused(code)) => {
                    last = format!("InitProducerId answered {code}");
                    break;
                }
                Err(InitAttempt::Failed(e)) => {
                    last = e;
                    client.invalidate_metadata(client.metadata_snapshot().1);
                    break;
                }
            }
        }
    }
    Err(InitError::Retry(last))
}

enum InitAttempt {
    /// The broker answered with a non-retriable error code.
    Refused(ErrorCode),
    /// The request failed or the error is retriable.
    Failed(String),
}

async fn init_once(
    conn: &Connection,
    shared: &Shared,
    current: Option<ProducerIdentity>,
) -> Result<ProducerIdentity, InitAttempt> {
    let req = InitProducerIdRequest {
        transactional_id: None,
        transaction_timeout_ms: 60_000,
        producer_id: current.map_or(-1, |c| c.id),
        producer_epoch: current.map_or(-1, |c| c.epoch),
    };
    let resp = conn
        .send_with_timeout(&req, shared.config.request_timeout)
        .await
        .map_err(|e| InitAttempt::Failed(e.to_string()))?;
    let code = ErrorCode::from_code(resp.error_code);
    if code.is_ok() && resp.producer_id >= 0 {
        Ok(ProducerIdentity {
            id: resp.producer_id,
            epoch: resp.producer_epoch,
        })
    } else if code.is_retriable() || code.is_ok() {
        Err(InitAttempt::Failed(format!(
            "InitProducerId answered {code}"
        )))
    } else {
        Err(InitAttempt::Refused(code))
    }
}

/// The wait before attempt `attempts + 1`: `retry_backoff` doubling (at most 10
/// times) up to `retry_backoff_max` (or `retry_backoff` if that is larger),
/// jittered.
fn backoff(cfg: &super::ProducerConfig, attempts: u32) -> Duration {
    let cap = cfg
        .retry_backoff_max
        .max(cfg.retry_backoff)
        .min(cfg.retry_backoff.saturating_mul(1 << 10));
    Backoff::new(cfg.retry_backoff, cap).delay(attempts)
}

/// A record of the open transaction failed at `topic`/`partition`: the
/// transaction fails (with `code`'s error if the broker gave one).
fn record_failed(
    shared: &Shared,
    topic: &str,
    partition: i32,
    code: Option<ErrorCode>,
    reason: String,
) {
    if shared.txn.is_none() {
        return;
    }
    let error = match code {
        Some(
            code @ (ErrorCode::ProducerFenced
            | ErrorCode::InvalidProducerEpoch
            | ErrorCode::TransactionAbortable
            | ErrorCode::TransactionalIdAuthorizationFailed),
        ) => TransactionError::from_code("Produce", code, transaction::timed_out(shared)),
        _ => TransactionError::RecordFailed {
            topic: topic.to_string(),
            partition,
            reason,
        },
    };
    transaction::transaction_failed(shared, error);
}

/// Fails every record of `batch`, building each error with `make`.
fn fail_records(batch: Batch, make: impl Fn(Box<ProducerRecord>) -> ProduceError) {
    batch.settle(|p| Err(make(Box::new(p.record))));
}

/// Fails every record of a batch whose delivery deadline passed.
fn fail_expired(shared: &Shared, batch: Batch) {
    let topic = batch.topic.to_string();
    let partition = batch.partition;
    let attempts = batch.attempts;
    let last_error = batch.last_error.clone().map(Box::new);
    let timeout = shared.config.delivery_timeout;
    fail_records(batch, |record| ProduceError::DeliveryTimeout {
        topic: topic.clone(),
        partition,
        timeout,
        attempts,
        last_error: last_error.clone(),
        record,
    });
}

/// Fails every record of a batch whose partition's sequence broke.
fn fail_reset(batch: Batch, cause: &AttemptError) {
    let topic = batch.topic.to_string();
    let partition = batch.partition;
    fail_records(batch, |record| ProduceError::IdempotenceReset {
        topic: topic.clone(),
        partition,
        cause: Box::new(cause.clone()),
        record,
    });
}

/// Where to send a batch: the leader and how to reach it.
struct Route {
    leader: i32,
    /// The metadata generation the leader came from (None: a KIP-951 hint).
    generation: Option<u64>,
    /// An address from a hint, if metadata may not know the broker yet.
    addr: Option<String>,
    /// The leader's epoch (-1 if unknown).
    epoch: i32,
}

/// How long routing waits for a metadata refresh before it falls back to the
/// cached leader. A refresh can queue behind a long-polling fetch on the
/// connection it uses; meanwhile a leader that moved answers with a KIP-951 hint.
const STALE_ROUTE_WAIT: Duration = Duration::from_millis(20);

/// The leader of `batch`'s partition: a KIP-951 hint newer than metadata, else
/// metadata's.
async fn route(shared: &Shared, topic: &Arc<str>, partition: i32) -> Result<Route, ClientError> {
    let client = &shared.client;
    let hint = client.leader_hint(topic, partition);
    let (meta, generation) = client.metadata_snapshot();
    let cached = meta.topic(topic).and_then(|t| t.partition(partition));
    if let Some(hint) = &hint {
        // A hint newer than the cached metadata needs no lookup.
        if hint.leader_epoch > cached.map_or(-1, |p| p.leader_epoch) {
            return Ok(Route {
                leader: hint.leader,
                generation: None,
                addr: hint.addr.clone(),
                epoch: hint.leader_epoch,
            });
        }
    }
    let looked_up = if client.metadata_is_stale() {
        let known = cached
            .and_then(|p| p.leader)
            .filter(|l| meta.broker(*l).is_some());
        let mut lookup = {
            let (inner, topic) = (client.clone(), topic.clone());
            tokio::spawn(async move { inner.leader(&topic, partition).await })
        };
        let waited = tokio::time::timeout(STALE_ROUTE_WAIT, &mut lookup).await;
        let joined = match (waited, known) {
            (Ok(joined), _) => joined,
            // The refresh carries on in its task; the cached leader serves until then.
            (Err(_), Some(leader)) => Ok(Ok((leader, generation))),
            (Err(_), None) => lookup.await,
        };
        joined.unwrap_or_else(|_| {
            Err(ClientError::LeaderNotAvailable {
                topic: topic.to_string(),
                partition,
            })
        })
    } else {
        client.leader(topic, partition).await
    };
    if let Some(hint) = hint {
        let meta_epoch = client
            .metadata_snapshot()
            .0
            .topic(topic)
            .and_then(|t| t.partition(partition))
            .map_or(-1, |p| p.leader_epoch);
        if hint.leader_epoch > meta_epoch || looked_up.is_err() {
            return Ok(Route {
                leader: hint.leader,
                generation: None,
                addr: hint.addr,
                epoch: hint.leader_epoch,
            });
        }
        client.forget_leader_hint(topic, partition);
    }
    let (leader, found_in) = looked_up?;
    // The epoch of the snapshot the leader came from, if it is still at hand.
    let (now, now_generation) = client.metadata_snapshot();
    let epoch_in = |m: &crate::metadata::ClusterMetadata| {
        m.topic(topic)
            .and_then(|t| t.partition(partition))
            .filter(|p| p.leader == Some(leader))
            .map_or(-1, |p| p.leader_epoch)
    };
    let epoch = if now_generation == found_in {
        epoch_in(&now)
    } else if generation == found_in {
        epoch_in(&meta)
    } else {
        -1
    };
    Ok(Route {
        leader,
        generation: Some(found_in),
        addr: None,
        epoch,
    })
}

/// An in-flight batch and how it was routed.
type Routed = (Batch, Option<u64>);

/// A Produce request's outcome: the response, none for `acks=0`, or the failure.
type Sent = Result<Option<ProduceResponse>, ClientError>;

/// A Produce request on its way: its batches and the exchange, which may already
/// have finished at its first poll.
struct Exchange {
    batches: Vec<Routed>,
    state: ExchangeState,
}

enum ExchangeState {
    Running(std::pin::Pin<Box<dyn std::future::Future<Output = Sent> + Send>>),
    Done(Sent),
}

/// Finds each batch's leader and sends the batches in Produce requests, one per
/// leader (more if they exceed `max_request_size` together, or hold several
/// batches of one partition: a request carries at most one batch per partition).
///
/// Requests to a leader with a live connection are put on the wire here, in
/// order, before this returns, so batches of one partition reach the broker in
/// sequence order; their responses are awaited in a spawned task.
async fn dispatch(shared: &Arc<Shared>, ready: Vec<Batch>) {
    let mut groups: BTreeMap<i32, (Option<String>, Vec<Routed>)> = BTreeMap::new();
    for mut batch in ready {
        match route(shared, &batch.topic, batch.partition).await {
            Ok(r) => {
                batch.leader_epoch = r.epoch;
                let group = groups.entry(r.leader).or_default();
                if r.addr.is_some() {
                    group.0 = r.addr;
                }
                group.1.push((batch, r.generation));
            }
            Err(e) => {
                // No leader to try: wait for one newer than what is known now.
                batch.leader_epoch =
                    leader_watch::known_epoch(&shared.client, &batch.topic, batch.partition);
                settle_failure(shared, batch, None, AttemptError::Client(e))
            }
        }
    }
    for (leader, (addr, batches)) in groups {
        let requests = split_requests(shared, batches);
        let existing = shared
            .client
            .existing_node_connection(leader)
            .filter(|c| addr.as_deref().is_none_or(|a| a == c.addr()));
        match existing {
            Some(conn) => {
                let exchanges = start(shared, &conn, leader, requests).await;
                tokio::spawn(finish(shared.clone(), exchanges));
            }
            None => {
                let shared = shared.clone();
                tokio::spawn(async move {
                    match leader_connection(&shared, leader, addr).await {
                        Ok(conn) => {
                            let exchanges = start(&shared, &conn, leader, requests).await;
                            finish(shared, exchanges).await;
                        }
                        Err(e) => {
                            for (batch, generation) in requests.into_iter().flatten() {
                                forget_hint(&shared, &batch, generation);
                                settle_failure(
                                    &shared,
                                    batch,
                                    generation,
                                    AttemptError::Client(e.clone()),
                                );
                            }
                        }
                    }
                });
            }
        }
    }
}

/// Splits one leader's batches into requests: at most one batch per partition
/// each (the first batches first), within `max_request_size` where possible.
///
/// Linear in the batches (times the few requests): a map keeps, per partition,
/// the last request holding one of its batches, so a batch goes into the first
/// request after that one with room, or a new request.
fn split_requests(shared: &Shared, batches: Vec<Routed>) -> Vec<Vec<Routed>> {
    let mut requests: Vec<(Vec<Routed>, usize)> = Vec::new();
    let mut last: FastMap<(Arc<str>, i32), usize> = FastMap::default();
    last.reserve(batches.len());
    for (mut batch, generation) in batches {
        let len = batch
            .encoded(shared.config.compression, shared.config.compression_level)
            .len();
        // A later request never takes a batch of a partition that is in an earlier
        // one after it (keeps the per-partition order across requests).
        let key = (batch.topic.clone(), batch.partition);
        let from = last.get(&key).map_or(0, |&l| l + 1);
        let max = shared.config.max_request_size;
        let fits = (from..requests.len()).find(|&i| requests[i].1 + len <= max);
        let i = match fits {
            Some(i) => {
                requests[i].1 += len;
                requests[i].0.push((batch, generation));
                i
            }
            None => {
                requests.push((vec![(batch, generation)], len));
                requests.len() - 1
            }
        };
        last.insert(key, i);
    }
    requests.into_iter().map(|(r, _)| r).collect()
}

/// Builds each request and polls its exchange once, in order: that puts its frame
/// in the connection's write queue (FIFO) before the next request's.
async fn start(
    shared: &Arc<Shared>,
    conn: &Connection,
    leader: i32,
    requests: Vec<Vec<Routed>>,
) -> Vec<Exchange> {
    let cfg = &shared.config;
    let mut out = Vec::with_capacity(requests.len());
    for mut batches in requests {
        let req = build_request(shared, &mut batches);
        let records = batches.iter().map(|(b, _)| b.records.len()).sum();
        let in_flight = shared.meter.request_started(leader, records);
        let conn = conn.clone();
        let acks = cfg.acks;
        // A little longer than the broker's own timeout, so that the broker's
        // REQUEST_TIMED_OUT answer wins the race when it comes.
        let timeout = cfg.request_timeout + Duration::from_secs(1);
        let mut fut: std::pin::Pin<Box<dyn std::future::Future<Output = Sent> + Send>> =
            Box::pin(async move {
                let sent = if acks == Acks::None {
                    conn.send_no_response(&req).await.map(|()| None)
                } else {
                    conn.send_with_timeout(&req, timeout).await.map(Some)
                };
                in_flight.finish();
                Ok(sent?)
            });
        let first = std::future::poll_fn(|cx| std::task::Poll::Ready(fut.as_mut().poll(cx))).await;
        let state = match first {
            std::task::Poll::Ready(sent) => ExchangeState::Done(sent),
            std::task::Poll::Pending => ExchangeState::Running(fut),
        };
        out.push(Exchange { batches, state });
    }
    out
}

/// Awaits each exchange's outcome and settles its batches.
async fn finish(shared: Arc<Shared>, exchanges: Vec<Exchange>) {
    for ex in exchanges {
        let sent = match ex.state {
            ExchangeState::Done(sent) => sent,
            ExchangeState::Running(fut) => fut.await,
        };
        settle_response(&shared, ex.batches, sent);
    }
}

/// A connection to `leader`, through a hint's address when metadata lacks it.
async fn leader_connection(
    shared: &Shared,
    leader: i32,
    addr: Option<String>,
) -> Result<Connection, ClientError> {
    let client = &shared.client;
    let known = client.metadata_snapshot().0.broker(leader).is_some();
    match addr {
        Some(addr) if !known => client.node_connection_at(leader, &addr).await,
        _ => client.node_connection(leader).await,
    }
}

/// Records a KIP-951 hint from a NOT_LEADER_OR_FOLLOWER answer; true if there was
/// one.
fn take_hint(
    shared: &Shared,
    topic: &Arc<str>,
    p: &PartitionProduceResponse,
    resp_endpoints: &HashMap<i32, String>,
) -> bool {
    let hint = &p.current_leader;
    if hint.leader_id < 0 || hint.leader_epoch < 0 {
        return false;
    }
    tracing::info!(%topic, partition = p.index, leader = hint.leader_id, epoch = hint.leader_epoch, "partition leader moved (leader hint)");
    shared.client.set_leader_hint(
        topic.clone(),
        p.index,
        LeaderHint {
            leader: hint.leader_id,
            leader_epoch: hint.leader_epoch,
            addr: resp_endpoints.get(&hint.leader_id).cloned(),
        },
    );
    true
}

/// The Produce request for `batches`, counting an attempt for each.
fn build_request(shared: &Shared, batches: &mut [Routed]) -> ProduceRequest {
    let cfg = &shared.config;
    let mut topics: BTreeMap<Arc<str>, Vec<PartitionProduceData>> = BTreeMap::new();
    for (batch, _) in batches.iter_mut() {
        batch.attempts += 1;
        // Encoded (and compressed) at the first attempt; a retry gets the same bytes.
        let records = batch.encoded(cfg.compression, cfg.compression_level);
        if batch.attempts == 1 {
            shared.meter.batch_sent(records.len(), batch.size);
        }
        topics
            .entry(batch.topic.clone())
            .or_default()
            .push(PartitionProduceData {
                index: batch.partition,
                records: Some(records),
            });
    }
    ProduceRequest {
        transactional_id: shared.txn.as_ref().map(|t| t.id.clone()),
        acks: cfg.acks.wire(),
        timeout_ms: cfg.request_timeout.as_millis().min(i32::MAX as u128) as i32,
        topic_data: topics
            .into_iter()
            .map(|(name, partition_data)| TopicProduceData {
                name: name.to_string(),
                partition_data,
            })
            .collect(),
    }
}

/// Settles every batch of one Produce request from its outcome.
fn settle_response(shared: &Shared, batches: Vec<Routed>, result: Sent) {
    match result {
        Err(e) => {
            for (batch, generation) in batches {
                forget_hint(shared, &batch, generation);
                settle_failure(shared, batch, generation, AttemptError::Client(e.clone()));
            }
        }
        Ok(None) => {
            for (batch, _) in batches {
                settle_success(shared, batch, -1, -1);
            }
        }
        Ok(Some(resp)) => {
            let endpoints: HashMap<i32, String> = resp
                .node_endpoints
                .iter()
                .map(|e| {
                    let host = if e.host.contains(':') && !e.host.starts_with('[') {
                        format!("[{}]", e.host)
                    } else {
                        e.host.clone()
                    };
                    (e.node_id, format!("{host}:{}", e.port))
                })
                .collect();
            let mut resp = resp;
            // Per topic name, per partition: no key allocated per partition.
            let mut by_topic: FastMap<&str, FastMap<i32, PartitionProduceResponse>> =
                FastMap::default();
            for t in &mut resp.responses {
                let partitions = by_topic.entry(t.name.as_str()).or_default();
                partitions.reserve(t.partition_responses.len());
                for p in t.partition_responses.drain(..) {
                    partitions.insert(p.index, p);
                }
            }
            for (batch, generation) in batches {
                let found = by_topic
                    .get_mut(&*batch.topic)
                    .and_then(|partitions| partitions.remove(&batch.partition));
                let Some(p) = found else {
                    settle_failure(
                        shared,
                        batch,
                        generation,
                        AttemptError::Broker {
                            code: ErrorCode::NetworkException,
                            message: Some("partition missing from the Produce response".into()),
                        },
                    );
                    continue;
                };
                let code = ErrorCode::from_code(p.error_code);
                if code.is_ok() {
                    settle_success(shared, batch, p.base_offset, p.log_append_time_ms);
                } else if code == ErrorCode::DuplicateSequenceNumber && batch.stamp.is_some() {
                    // The broker has this batch already but no longer knows where.
                    settle_success(shared, batch, -1, -1);
                } else {
                    let hinted = code == ErrorCode::NotLeaderOrFollower
                        && take_hint(shared, &batch.topic, &p, &endpoints);
                    if !hinted {
                        forget_hint(shared, &batch, generation);
                    }
                    let error = AttemptError::Broker {
                        code,
                        message: p.error_message,
                    };
                    if hinted {
                        // The new leader is known: retry at once, no metadata refresh;
                        // other batches waiting for this partition's leader too.
                        settle_failure_with(shared, batch, None, error, Some(Duration::ZERO));
                        leader_watch::hasten_moved(shared, false);
                    } else {
                        settle_failure(shared, batch, generation, error);
                    }
                }
            }
        }
    }
}

/// Drops the hint that routed `batch` (it led to a failure).
fn forget_hint(shared: &Shared, batch: &Batch, generation: Option<u64>) {
    if generation.is_none() {
        shared
            .client
            .forget_leader_hint(&batch.topic, batch.partition);
    }
}

/// Reports every record of a delivered batch, then frees its slot in flight.
fn settle_success(shared: &Shared, batch: Batch, base_offset: i64, log_append_time: i64) {
    let topic = batch.topic.clone();
    let partition = batch.partition;
    let id = batch.id;
    let acked = batch.stamp.map(|s| (s, batch.count()));
    batch.deliver(base_offset, log_append_time);
    shared
        .lock()
        .finish_attempt(&topic, partition, id, acked, None);
    shared.wake.notify_one();
}

/// A failed attempt, with the usual backoff.
fn settle_failure(shared: &Shared, batch: Batch, generation: Option<u64>, error: AttemptError) {
    settle_failure_with(shared, batch, generation, error, None);
}

/// What to do with a batch whose attempt failed.
enum Verdict {
    /// Put it back into its queue and send it again (after `backoff`).
    Retry,
    /// Fail its records with the error.
    Fail,
    /// Its partition's sequence broke: fail it and the partition's other
    /// sent-but-unacknowledged batches with [`ProduceError::IdempotenceReset`].
    Reset,
    /// Fail it with the error and break its partition's sequence (a rejected
    /// batch leaves a gap behind it).
    FailAndReset,
    /// Its sequence already broke: fail it with [`ProduceError::IdempotenceReset`].
    Stale,
    /// The leader refused its only attempt for its sequence (so it was never
    /// written): break the partition's sequence and send it again under the next
    /// epoch, from sequence 0, as Kafka's idempotent producer does.
    Resequence,
}

/// Whether an attempt that ended with `code` was refused for its producer
/// sequence or id, which the leader checks before appending: its records were
/// not written by it.
fn refused_for_sequence(code: Option<ErrorCode>) -> bool {
    matches!(
        code,
        Some(ErrorCode::OutOfOrderSequenceNumber | ErrorCode::UnknownProducerId)
    )
}

/// [`Verdict::Resequence`]: breaks the partition's sequence (a new epoch is
/// requested) and puts `batch` back into its queue without its sequence, with the
/// queued batches of its identity that were refused the same way; the other
/// queued ones (outcome unknown) fail with [`ProduceError::IdempotenceReset`].
/// The leader's metadata is refreshed: a leader without the acknowledged
/// batches is often one that was replaced and does not know yet.
fn resequence(
    shared: &Shared,
    mut acc: std::sync::MutexGuard<'_, super::accumulator::Accumulator>,
    mut batch: Batch,
    generation: Option<u64>,
    error: AttemptError,
) {
    let topic = batch.topic.clone();
    let partition = batch.partition;
    let id = batch.id;
    let stamp = batch.stamp.expect("stamped");
    let seq = acc.seq(&topic, partition);
    tracing::warn!(
        %topic,
        partition,
        %error,
        producer_id = stamp.identity.id,
        epoch = stamp.identity.epoch,
        base_sequence = stamp.base_sequence,
        last_acked = seq.last_acked,
        "the leader refused the next sequence; sending the batch again under a new epoch"
    );
    let purged = acc.fence(&topic, partition, stamp.identity);
    let (again, failed): (Vec<Batch>, Vec<Batch>) = purged.into_iter().partition(|b| {
        let code = match &b.last_error {
            Some(AttemptError::Broker { code, .. }) => Some(*code),
            _ => None,
        };
        b.attempts <= 1 && refused_for_sequence(code)
    });
    shared
        .meter
        .retried(error.metric_name(), batch.records.len());
    if let Some(g) = generation {
        shared.client.invalidate_metadata(g);
    }
    let at = Instant::now() + backoff(&shared.config, batch.attempts);
    let unstamp = |b: &mut Batch| {
        b.stamp = None;
        b.encoded = None;
        b.retry_at = Some(at);
    };
    unstamp(&mut batch);
    batch.last_error = Some(error.clone());
    acc.finish_attempt(&topic, partition, id, None, Some(batch));
    for mut b in again {
        unstamp(&mut b);
        let bid = b.id;
        acc.finish_attempt(&topic, partition, bid, None, Some(b));
    }
    drop(acc);
    for b in failed {
        fail_reset(b, &error);
    }
    shared.wake.notify_one();
}

/// A failed attempt: retriable errors put the batch back into its queue after a
/// backoff (or `backoff_override`; the sender expires it at its deadline);
/// sequence errors reset the partition's sequence; others fail its records.
fn settle_failure_with(
    shared: &Shared,
    mut batch: Batch,
    generation: Option<u64>,
    error: AttemptError,
    mut backoff_override: Option<Duration>,
) {
    let topic = batch.topic.clone();
    let partition = batch.partition;
    let id = batch.id;
    let code = match &error {
        AttemptError::Broker { code, .. } => Some(*code),
        AttemptError::Client(_) => None,
    };
    let mut acc = shared.lock();
    let verdict = match batch.stamp {
        None if error.is_retriable() => Verdict::Retry,
        None => Verdict::Fail,
        Some(stamp) => {
            let seq = acc.seq(&topic, partition);
            let stale = seq.fenced || seq.identity != Some(stamp.identity);
            let expected = add_sequence(seq.last_acked, 1);
            // Sent once, and refused before the append: no earlier attempt can
            // have written it. (A transaction cannot change epochs midway; its
            // batches fail as below and the transaction aborts.)
            let never_written =
                !acc.txn.enabled && batch.attempts <= 1 && refused_for_sequence(code);
            match code {
                _ if stale && never_written => Verdict::Resequence,
                _ if stale => Verdict::Stale,
                // An earlier batch failed and this one ran into the gap it left:
                // resend in order once the earlier one is through (no backoff of its
                // own: the queue holds it behind that batch, which keeps its backoff).
                // Only a batch ahead of the acknowledged sequences can be waiting
                // behind a gap; one behind them was overtaken (the broker accepted
                // later sequences without it), and no resend can fill that hole:
                // the sequence is reset below.
                Some(ErrorCode::OutOfOrderSequenceNumber)
                    if stamp.base_sequence != expected
                        && (seq.last_acked < 0
                            || sequence_after(stamp.base_sequence, seq.last_acked)) =>
                {
                    backoff_override = Some(Duration::ZERO);
                    Verdict::Retry
                }
                // The next sequence refused: the leader lacks acknowledged batches
                // (a leader that has not yet learned it was replaced, or lost data).
                _ if never_written && stamp.base_sequence == expected => Verdict::Resequence,
                Some(
                    ErrorCode::OutOfOrderSequenceNumber
                    | ErrorCode::UnknownProducerId
                    | ErrorCode::InvalidProducerEpoch
                    | ErrorCode::ProducerFenced,
                ) => Verdict::Reset,
                _ if error.is_retriable() => Verdict::Retry,
                _ => Verdict::FailAndReset,
            }
        }
    };
    if !matches!(verdict, Verdict::Retry) && acc.txn.enabled && acc.txn.error.is_none() {
        drop(acc);
        record_failed(shared, &topic, partition, code, error.to_string());
        acc = shared.lock();
    }
    if let Verdict::Resequence = verdict {
        resequence(shared, acc, batch, generation, error);
        return;
    }
    let mut purged = Vec::new();
    if matches!(verdict, Verdict::Reset | Verdict::FailAndReset) {
        let stamp = batch.stamp.expect("stamped");
        let identity = stamp.identity;
        let seq = acc.seq(&topic, partition);
        tracing::warn!(
            %topic,
            partition,
            %error,
            producer_id = identity.id,
            epoch = identity.epoch,
            base_sequence = stamp.base_sequence,
            last_acked = seq.last_acked,
            attempts = batch.attempts,
            "idempotent sequence broken; bumping the epoch"
        );
        purged = acc.fence(&topic, partition, identity);
    }
    if let Verdict::Retry = verdict {
        tracing::info!(%topic, partition, attempts = batch.attempts, %error, "retrying batch");
        shared
            .meter
            .retried(error.metric_name(), batch.records.len());
        if let Some(g) = generation {
            if !matches!(code, Some(ErrorCode::OutOfOrderSequenceNumber)) {
                shared.client.invalidate_metadata(g);
            }
        }
        let mut wait = backoff_override.unwrap_or_else(|| backoff(&shared.config, batch.attempts));
        let mut poll = false;
        if backoff_override.is_none() && leader_watch::leader_unreachable(&error) {
            let known = leader_watch::known_epoch(&shared.client, &topic, partition);
            if known > batch.leader_epoch {
                // A newer leader is known already: no reason to wait.
                wait = Duration::ZERO;
            } else {
                poll = acc
                    .leaders
                    .watch(topic.clone(), partition, batch.leader_epoch);
            }
        }
        batch.retry_at = Some(Instant::now() + wait);
        batch.last_error = Some(error);
        acc.finish_attempt(&topic, partition, id, None, Some(batch));
        drop(acc);
        if poll {
            if let Some(shared) = shared.owner() {
                tokio::spawn(leader_watch::poll(shared));
            }
        }
        shared.wake.notify_one();
        return;
    }
    drop(acc);
    match verdict {
        Verdict::Fail | Verdict::FailAndReset => {
            let topic_s = topic.to_string();
            fail_records(batch, |record| match &error {
                AttemptError::Broker {
                    code: ErrorCode::TopicAuthorizationFailed,
                    ..
                }
                | AttemptError::Client(ClientError::TopicAuthorizationFailed { .. }) => {
                    ProduceError::TopicAuthorizationFailed {
                        topic: topic_s.clone(),
                        partition: Some(partition),
                        record,
                    }
                }
                AttemptError::Client(source) => ProduceError::Client {
                    topic: topic_s.clone(),
                    partition: Some(partition),
                    source: source.clone(),
                    record,
                },
                AttemptError::Broker { code, message } => ProduceError::Rejected {
                    topic: topic_s.clone(),
                    partition,
                    code: *code,
                    message: message.clone(),
                    record,
                },
            });
        }
        _ => fail_reset(batch, &error),
    }
    for b in purged {
        fail_reset(b, &error);
    }
    shared
        .lock()
        .finish_attempt(&topic, partition, id, None, None);
    shared.wake.notify_one();
}
