//! The transaction coordinator of one broker node: the [`TxnMetadata`] of every
//! transactional id whose `__transaction_state` partition this node leads, behind a
//! mutex, each change written to that partition before it is answered.
//!
//! Ownership follows the log, as for groups: before serving an id the coordinator
//! checks that it leads the id's partition ([`records::partition_for`]); when it has
//! just gained it (or the leader epoch changed) it replays the partition into
//! memory, and when it has lost it it forgets the partition's ids. The leader epoch
//! at which a partition was loaded is the coordinator epoch that markers carry, so
//! a partition leader can refuse a stale coordinator's markers. Every id the replay
//! finds in `PrepareCommit` / `PrepareAbort` is queued for its markers: a new
//! coordinator finishes what the old one decided.
//!
//! Durability: a transition is appended while the lock is held and applied to
//! memory in the same critical section, so memory follows the leader's log order;
//! the answer then waits (without the lock) until the high watermark covers it on a
//! cluster (`acks=all`). An answer read from memory without a write (a retry
//! finding its change applied) waits likewise for what the partition holds. A
//! transition that is not replicated because leadership
//! moved is not lost from the protocol's view: the new leader's log is the truth,
//! and the client retries against the new coordinator.
//!
//! Markers are I/O: a `Prepare*` transition queues a [`MarkerJob`] and wakes the
//! driver (`txn::driver`), which sends the markers and calls
//! [`TxnCoordinator::complete`]. Entry points are synchronous and may touch files
//! or wait for replication, so callers run them on the blocking pool.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use baton_protocol::record::{RecordBatch, RecordBatchBuilder, TimestampType};
use baton_protocol::ErrorCode;
use bytes::Bytes;
use tokio::sync::{oneshot, Notify};

use super::machine::{AddOutcome, EndOutcome, InitOutcome, TxnLimits, TxnMetadata, TxnState};
use super::peers::PeerPool;
use super::records::{self, TRANSACTION_STATE_TOPIC};
use crate::group::{internal_topic, GroupHost, InternalTopic};
use crate::partition::Partition;
use crate::replication::ProduceOutcome;
use crate::topics::Topic;

/// Bytes read per step while replaying `__transaction_state`.
const LOAD_CHUNK: usize = 1 << 20;
/// How long a state change waits for replication.
const WRITE_TIMEOUT_MS: u64 = 5_000;

/// The markers a `Prepare*` transition owes: one per partition of the transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MarkerJob {
    /// The transactional id.
    pub transactional_id: String,
    /// The producer id the transaction wrote with.
    pub producer_id: i64,
    /// The epoch the markers carry (bumped when the producer was fenced).
    pub producer_epoch: i16,
    /// Commit or abort.
    pub commit: bool,
    /// The coordinator epoch (the leader epoch of the id's state partition).
    pub coordinator_epoch: i32,
    /// The partitions owed a marker.
    pub partitions: Vec<(String, i32)>,
}

#[derive(Debug, Default)]
struct Inner {
    txns: HashMap<String, TxnMetadata>,
    /// State partitions whose ids are in memory, with the leader epoch they were
    /// replayed at (the coordinator epoch).
    owned: HashMap<i32, i32>,
    /// Partition count of `__transaction_state` (0 before it exists).
    partitions: i32,
    /// Marker jobs queued for the driver.
    jobs: Vec<MarkerJob>,
    /// Ids whose markers the driver is sending; not queued twice.
    sending: HashSet<String>,
}

impl Inner {
    fn unload(&mut self, partition: i32) {
        self.owned.remove(&partition);
        let n = self.partitions;
        self.txns
            .retain(|id, _| records::partition_for(id, n) != partition);
        self.jobs
            .retain(|j| records::partition_for(&j.transactional_id, n) != partition);
    }

    fn queue(&mut self, id: &str, m: &TxnMetadata) {
        let n = self.partitions;
        let Some(&epoch) = self.owned.get(&records::partition_for(id, n)) else {
            return;
        };
        if !m.state.is_prepare() || self.sending.contains(id) {
            return;
        }
        self.jobs.retain(|j| j.transactional_id != id);
        self.jobs.push(MarkerJob {
            transactional_id: id.to_owned(),
            producer_id: m.producer_id,
            producer_epoch: m.producer_epoch,
            commit: m.state == TxnState::PrepareCommit,
            coordinator_epoch: epoch,
            partitions: m.partitions.iter().cloned().collect(),
        });
    }
}

/// The coordinator of every transactional id whose `__transaction_state` partition
/// this node leads.
#[derive(Debug)]
pub(crate) struct TxnCoordinator {
    inner: Mutex<Inner>,
    limits: TxnLimits,
    /// Most ids held (`BrokerLimits::max_transactional_ids`).
    max_ids: usize,
    /// Partitions of `__transaction_state` when this node creates it.
    topic_partitions: i32,
    /// Wakes the driver: a job was queued or a deadline moved.
    pub(crate) wake: Notify,
    /// `__transaction_state`, created on first use.
    topic: InternalTopic,
    /// Idle connections to other nodes (markers, verification).
    pub(crate) peers: PeerPool,
}

/// Whether this node leads `p`, and at which epoch.
fn leadership(p: &Partition) -> Option<i32> {
    let st = p.lock();
    st.is_leader().then(|| st.leader_epoch())
}

impl TxnCoordinator {
    /// A coordinator with these limits, creating `__transaction_state` with
    /// `topic_partitions` partitions when it is missing.
    pub fn new(limits: TxnLimits, max_ids: usize, topic_partitions: i32) -> Self {
        TxnCoordinator {
            inner: Mutex::new(Inner::default()),
            limits,
            max_ids,
            topic_partitions: topic_partitions.max(1),
            wake: Notify::new(),
            topic: InternalTopic::new(TRANSACTION_STATE_TOPIC, "txn"),
            peers: PeerPool::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `__transaction_state`, created if missing: at once on a single node; in a
    /// cluster through the controller, COORDINATOR_NOT_AVAILABLE meanwhile.
    pub fn state_topic(&self, host: &dyn GroupHost) -> Result<Arc<Topic>, ErrorCode> {
        self.topic.get_or_create(host, || self.topic_partitions)
    }

    /// The node coordinating `transactional_id` on a cluster (node id), from the
    /// metadata image; `None` on a single node (always this one).
    pub fn coordinator_node(
        &self,
        host: &dyn GroupHost,
        transactional_id: &str,
    ) -> Option<Result<i32, ErrorCode>> {
        let link = host.mode().replica()?;
        let found = {
            let img = link.image();
            img.topic_by_name(TRANSACTION_STATE_TOPIC).map(|t| {
                let p = records::partition_for(transactional_id, t.partitions);
                img.partition(t.topic_id, p)
                    .map(|pi| pi.leader)
                    .filter(|l| *l != crate::controller::NO_LEADER)
                    .ok_or(ErrorCode::CoordinatorNotAvailable)
            })
        };
        Some(found.unwrap_or_else(|| {
            self.topic.request(host, self.topic_partitions);
            Err(ErrorCode::CoordinatorNotAvailable)
        }))
    }

    /// Locks the coordinator for a request about `id`: NOT_COORDINATOR unless this
    /// node leads the id's partition, which is replayed first if it was not loaded
    /// at the current leader epoch.
    fn owned(&self, host: &dyn GroupHost, id: &str) -> Result<MutexGuard<'_, Inner>, ErrorCode> {
        let topic = self.state_topic(host)?;
        let n = topic.partitions.len() as i32;
        let p = records::partition_for(id, n);
        let partition = topic
            .partition(p)
            .ok_or(ErrorCode::CoordinatorNotAvailable)?;
        let mut inner = self.lock();
        inner.partitions = n;
        self.own(&mut inner, partition);
        if inner.owned.contains_key(&p) {
            Ok(inner)
        } else {
            Err(ErrorCode::NotCoordinator)
        }
    }

    /// Brings `partition`'s ownership up to date: loaded at the current leader
    /// epoch when led here, forgotten when not.
    fn own(&self, inner: &mut Inner, partition: &Partition) {
        let p = partition.index();
        match leadership(partition) {
            None => {
                if inner.owned.contains_key(&p) {
                    inner.unload(p);
                    tracing::info!(partition = p, "no longer coordinating transactions");
                }
            }
            Some(epoch) => {
                if inner.owned.get(&p) != Some(&epoch) {
                    inner.unload(p);
                    let loaded = load_partition(partition);
                    inner.owned.insert(p, epoch);
                    for (id, m) in loaded {
                        inner.queue(&id, &m);
                        inner.txns.insert(id, m);
                    }
                    tracing::info!(partition = p, epoch, "coordinating transactions");
                    self.wake.notify_one();
                }
            }
        }
    }

    /// Loads every state partition led here and forgets those no longer led.
    pub fn sync_ownership(&self, host: &dyn GroupHost) {
        let topic = host.topic(TRANSACTION_STATE_TOPIC);
        let mut inner = self.lock();
        let Some(topic) = topic else {
            let owned: Vec<i32> = inner.owned.keys().copied().collect();
            for p in owned {
                inner.unload(p);
            }
            return;
        };
        inner.partitions = topic.partitions.len() as i32;
        for partition in &topic.partitions {
            self.own(&mut inner, partition);
        }
    }

    /// Writes `m` as `id`'s state and applies it; the returned wait resolves when
    /// it is replicated.
    fn write(
        &self,
        host: &dyn GroupHost,
        inner: &mut Inner,
        id: &str,
        m: TxnMetadata,
    ) -> Result<Option<oneshot::Receiver<ProduceOutcome>>, ErrorCode> {
        let value = records::encode_value(&m);
        let wait = append(host, id, records::encode_key(id), Some(value))?;
        inner.queue(id, &m);
        inner.txns.insert(id.to_owned(), m);
        if !inner.jobs.is_empty() {
            self.wake.notify_one();
        }
        Ok(wait)
    }

    /// InitProducerId with a transactional id: the producer id and epoch, or
    /// CONCURRENT_TRANSACTIONS while an open transaction is being aborted (the
    /// client retries). `next_id` allocates producer ids.
    pub fn init_producer_id(
        &self,
        host: &dyn GroupHost,
        id: &str,
        timeout_ms: i32,
        expected: (i64, i16),
        next_id: &mut dyn FnMut() -> Result<i64, ErrorCode>,
    ) -> Result<(i64, i16), ErrorCode> {
        let mut inner = self.owned(host, id)?;
        let current = inner.txns.get(id).cloned();
        if current.is_none() && inner.txns.len() >= self.max_ids {
            return Err(ErrorCode::PolicyViolation);
        }
        let out = TxnMetadata::init_producer_id(
            current.as_ref(),
            timeout_ms,
            expected,
            next_id,
            &self.limits,
            host.now_ms(),
        )
        .inspect_err(|&code| {
            if let Some(m) = &current {
                refused("InitProducerId", id, expected.0, expected.1, m, code);
            }
        })?;
        match out {
            InitOutcome::Ready(m) => {
                let answer = (m.producer_id, m.producer_epoch);
                if current.as_ref() == Some(&m) {
                    return await_durable(host, id, inner).map(|()| answer);
                }
                let wait = self.write(host, &mut inner, id, m)?;
                drop(inner);
                await_replicated(wait).map(|()| answer)
            }
            InitOutcome::AbortFirst(m) => {
                let wait = self.write(host, &mut inner, id, m)?;
                drop(inner);
                await_replicated(wait)?;
                Err(ErrorCode::ConcurrentTransactions)
            }
        }
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn: adds `partitions` to the transaction.
    pub fn add_partitions(
        &self,
        host: &dyn GroupHost,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[(String, i32)],
    ) -> Result<(), ErrorCode> {
        let mut inner = self.owned(host, id)?;
        let current = inner
            .txns
            .get(id)
            .ok_or(ErrorCode::InvalidProducerIdMapping)?;
        let outcome = current
            .add_partitions(producer_id, epoch, partitions, &self.limits, host.now_ms())
            .inspect_err(|&code| {
                refused("AddPartitionsToTxn", id, producer_id, epoch, current, code)
            })?;
        match outcome {
            AddOutcome::Unchanged => await_durable(host, id, inner),
            AddOutcome::Write(m) => {
                let wait = self.write(host, &mut inner, id, m)?;
                drop(inner);
                await_replicated(wait)
            }
        }
    }

    /// KIP-890 verification: for each of `partitions`, whether it is in the
    /// producer's ongoing transaction.
    pub fn verify(
        &self,
        host: &dyn GroupHost,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[(String, i32)],
    ) -> Result<Vec<bool>, ErrorCode> {
        let inner = self.owned(host, id)?;
        let current = inner
            .txns
            .get(id)
            .ok_or(ErrorCode::InvalidProducerIdMapping)?;
        partitions
            .iter()
            .map(|p| current.verify_partition(producer_id, epoch, p))
            .collect()
    }

    /// EndTxn: the producer id and epoch for the next transaction once the
    /// `Prepare*` state is durable (markers follow in the background).
    pub fn end(
        &self,
        host: &dyn GroupHost,
        id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        v2: bool,
    ) -> Result<(i64, i16), ErrorCode> {
        let mut inner = self.owned(host, id)?;
        let current = inner
            .txns
            .get(id)
            .ok_or(ErrorCode::InvalidProducerIdMapping)?;
        let outcome = current
            .end(producer_id, epoch, commit, v2, host.now_ms())
            .inspect_err(|&code| refused("EndTxn", id, producer_id, epoch, current, code))?;
        match outcome {
            EndOutcome::Done(pid, e) => await_durable(host, id, inner).map(|()| (pid, e)),
            EndOutcome::Prepare(m) => {
                let answer = (m.producer_id, m.producer_epoch);
                let wait = self.write(host, &mut inner, id, m)?;
                drop(inner);
                await_replicated(wait).map(|()| answer)
            }
        }
    }

    /// Marks `job`'s transaction complete once its markers are written, if the id
    /// is still in that `Prepare*` state here.
    pub fn complete(&self, host: &dyn GroupHost, job: &MarkerJob) -> Result<(), ErrorCode> {
        let id = job.transactional_id.as_str();
        self.lock().sending.remove(id);
        let mut inner = self.owned(host, id)?;
        let Some(current) = inner.txns.get(id) else {
            return Ok(());
        };
        let same = current.producer_id == job.producer_id
            && current.producer_epoch == job.producer_epoch
            && current.state
                == if job.commit {
                    TxnState::PrepareCommit
                } else {
                    TxnState::PrepareAbort
                };
        let Some(next) = current.complete(host.now_ms()).filter(|_| same) else {
            return Ok(());
        };
        let wait = self.write(host, &mut inner, id, next)?;
        drop(inner);
        await_replicated(wait)
    }

    /// Whether `job`'s transaction is still owed its markers by this node.
    pub fn still_owes(&self, job: &MarkerJob) -> bool {
        let inner = self.lock();
        let n = inner.partitions;
        let owned = inner
            .owned
            .get(&records::partition_for(&job.transactional_id, n))
            == Some(&job.coordinator_epoch);
        owned
            && inner.txns.get(&job.transactional_id).is_some_and(|m| {
                m.producer_id == job.producer_id
                    && m.producer_epoch == job.producer_epoch
                    && m.state.is_prepare()
            })
    }

    /// Gives back a job whose markers could not all be written (it is queued again
    /// if its transaction is still owed them here).
    pub fn retry(&self, job: &MarkerJob) {
        let mut inner = self.lock();
        inner.sending.remove(&job.transactional_id);
        if let Some(m) = inner.txns.get(&job.transactional_id).cloned() {
            inner.queue(&job.transactional_id, &m);
        }
    }

    /// The queued marker jobs, now marked as being sent.
    pub fn take_jobs(&self) -> Vec<MarkerJob> {
        let mut inner = self.lock();
        let jobs = std::mem::take(&mut inner.jobs);
        for j in &jobs {
            inner.sending.insert(j.transactional_id.clone());
        }
        jobs
    }

    /// Aborts every transaction past its timeout (bumping the epoch, which fences
    /// the producer) and returns when the next one would time out.
    pub fn abort_timed_out(&self, host: &dyn GroupHost, now: i64) -> Option<i64> {
        let mut inner = self.lock();
        let due: Vec<(String, TxnMetadata)> = inner
            .txns
            .iter()
            .filter_map(|(id, m)| m.abort_timed_out(now).map(|n| (id.clone(), n)))
            .collect();
        let mut waits = Vec::new();
        for (id, next) in due {
            tracing::info!(transactional_id = %id, "aborting a timed-out transaction");
            match self.write(host, &mut inner, &id, next) {
                Ok(w) => waits.push(w),
                Err(code) => {
                    tracing::warn!(transactional_id = %id, ?code, "cannot abort a timed-out transaction")
                }
            }
        }
        let next = inner
            .txns
            .values()
            .filter(|m| m.state == TxnState::Ongoing && m.start_ms >= 0)
            .map(|m| m.start_ms.saturating_add(i64::from(m.timeout_ms)) + 1)
            .min();
        drop(inner);
        for w in waits {
            let _ = await_replicated(w);
        }
        next
    }

    /// The metadata of `id`: TRANSACTIONAL_ID_NOT_FOUND if it has none.
    pub fn describe(&self, host: &dyn GroupHost, id: &str) -> Result<TxnMetadata, ErrorCode> {
        let inner = self.owned(host, id)?;
        inner
            .txns
            .get(id)
            .cloned()
            .ok_or(ErrorCode::TransactionalIdNotFound)
    }

    /// Every id coordinated here with its metadata (none without the topic;
    /// listing does not create it).
    pub fn list(&self, host: &dyn GroupHost) -> Vec<(String, TxnMetadata)> {
        self.sync_ownership(host);
        let mut out: Vec<(String, TxnMetadata)> = self
            .lock()
            .txns
            .iter()
            .map(|(id, m)| (id.clone(), m.clone()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

/// Logs a request the state machine refused, with what the coordinator holds:
/// a fenced producer is then traceable to the state that fenced it.
fn refused(
    request: &str,
    id: &str,
    producer_id: i64,
    epoch: i16,
    current: &TxnMetadata,
    code: ErrorCode,
) {
    tracing::debug!(
        request,
        transactional_id = id,
        producer_id,
        epoch,
        ?code,
        current_producer_id = current.producer_id,
        current_epoch = current.producer_epoch,
        last_epoch = current.last_producer_epoch,
        state = current.state.name(),
        "transactional request refused"
    );
}

/// Appends one record to `id`'s state partition, which this node leads. Returns
/// the replication wait in a cluster. Errors are mapped as Kafka's coordinator
/// maps them.
fn append(
    host: &dyn GroupHost,
    id: &str,
    key: Bytes,
    value: Option<Bytes>,
) -> Result<Option<oneshot::Receiver<ProduceOutcome>>, ErrorCode> {
    let topic = host
        .topic(TRANSACTION_STATE_TOPIC)
        .ok_or(ErrorCode::CoordinatorNotAvailable)?;
    let n = topic.partitions.len() as i32;
    let partition = topic
        .partition(records::partition_for(id, n))
        .ok_or(ErrorCode::CoordinatorNotAvailable)?;
    let now = host.now_ms();
    let mut builder = RecordBatchBuilder::new(now);
    builder.push(now, Some(&key), value.as_deref(), &[]);
    let batch = builder.finish();
    let mut st = partition.lock();
    if !st.is_leader() {
        return Err(ErrorCode::NotCoordinator);
    }
    if let Some(l) = st.leader_state() {
        if let Err(r) = l.check_produce(true) {
            return Err(map_append_error(r.error_code()));
        }
    }
    if let Err(code) = st.append_records(&batch, TimestampType::CreateTime, now) {
        drop(st);
        tracing::warn!(
            transactional_id = id,
            ?code,
            "appending to {TRANSACTION_STATE_TOPIC} failed"
        );
        return Err(map_append_error(code));
    }
    let wait = match host.mode().replica() {
        Some(link) => {
            let leo = st.log_end_offset();
            st.await_replication(leo, link.now_ms() + WRITE_TIMEOUT_MS)
        }
        None => None,
    };
    drop(st);
    host.notify_append();
    Ok(wait)
}

/// Registers a wait for everything already appended to `id`'s state partition
/// to be replicated (`None` on a single node, or once this node no longer leads
/// it: a stale answer is then refused by [`await_durable`]). Memory follows the
/// leader's log, which may hold changes a leader change would still undo.
fn durable_wait(
    host: &dyn GroupHost,
    id: &str,
) -> Result<Option<oneshot::Receiver<ProduceOutcome>>, ErrorCode> {
    let Some(link) = host.mode().replica() else {
        return Ok(None);
    };
    let topic = host
        .topic(TRANSACTION_STATE_TOPIC)
        .ok_or(ErrorCode::CoordinatorNotAvailable)?;
    let n = topic.partitions.len() as i32;
    let partition = topic
        .partition(records::partition_for(id, n))
        .ok_or(ErrorCode::CoordinatorNotAvailable)?;
    let mut st = partition.lock();
    let leo = st.log_end_offset();
    match st.await_replication(leo, link.now_ms() + WRITE_TIMEOUT_MS) {
        Some(wait) => Ok(Some(wait)),
        None => Err(ErrorCode::NotCoordinator),
    }
}

/// An answer read from memory without a write of its own (a retry finding its
/// change already applied, an add of partitions already in the transaction, an
/// end already completed) is given only once what memory holds is replicated:
/// otherwise a change whose write timed out could be confirmed to the client and
/// then lost with a leader change, and the client's next request (at an epoch the
/// new coordinator never saw) would be answered PRODUCER_FENCED.
fn await_durable(
    host: &dyn GroupHost,
    id: &str,
    inner: MutexGuard<'_, Inner>,
) -> Result<(), ErrorCode> {
    let wait = durable_wait(host, id);
    drop(inner);
    await_replicated(wait?)
}

/// Kafka's mapping of log errors to transaction coordinator errors.
fn map_append_error(code: ErrorCode) -> ErrorCode {
    match code {
        ErrorCode::UnknownTopicOrPartition
        | ErrorCode::NotEnoughReplicas
        | ErrorCode::NotEnoughReplicasAfterAppend
        | ErrorCode::RequestTimedOut => ErrorCode::CoordinatorNotAvailable,
        ErrorCode::NotLeaderOrFollower | ErrorCode::KafkaStorageError => ErrorCode::NotCoordinator,
        ErrorCode::MessageTooLarge | ErrorCode::RecordListTooLarge => ErrorCode::UnknownServerError,
        other => other,
    }
}

/// Waits (on a blocking-pool thread) until the high watermark covers an append.
fn await_replicated(wait: Option<oneshot::Receiver<ProduceOutcome>>) -> Result<(), ErrorCode> {
    internal_topic::await_replicated(wait, map_append_error)
}

/// Replays one `__transaction_state` partition (its whole log: a new leader's log
/// is the truth) into the latest metadata per id. Undecodable records are logged
/// and skipped.
fn load_partition(partition: &Partition) -> HashMap<String, TxnMetadata> {
    let mut out = HashMap::new();
    let p = partition.lock();
    let mut from = p.log_start_offset();
    let end = p.log_end_offset();
    while from < end {
        let batches = match p.read_for_replica(from, LOAD_CHUNK) {
            Ok(b) if !b.is_empty() => b,
            Ok(_) => break,
            Err(e) => {
                tracing::error!(partition = partition.index(), offset = from, error = %e, "cannot replay {TRANSACTION_STATE_TOPIC}");
                break;
            }
        };
        for bytes in batches {
            let batch = match RecordBatch::parse(bytes) {
                Ok(b) => b,
                Err(e) => {
                    tracing::error!(offset = from, error = %e, "bad batch in {TRANSACTION_STATE_TOPIC}");
                    return out;
                }
            };
            from = batch.next_offset();
            if batch.is_control() {
                continue;
            }
            let Ok(recs) = batch.records() else {
                tracing::error!("unreadable batch in {TRANSACTION_STATE_TOPIC}");
                continue;
            };
            for rec in recs {
                let Ok(rec) = rec else {
                    tracing::error!("bad record in {TRANSACTION_STATE_TOPIC}");
                    break;
                };
                let Some(Ok(Some(id))) = rec.key.map(records::decode_key) else {
                    continue;
                };
                match rec.value.map(records::decode_value) {
                    None => {
                        out.remove(&id);
                    }
                    Some(Ok(m)) => {
                        out.insert(id, m);
                    }
                    Some(Err(e)) => {
                        tracing::warn!(transactional_id = %id, error = %e, "skipping an undecodable transaction record")
                    }
                }
            }
        }
    }
    out
}
