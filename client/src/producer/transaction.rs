//! The transactional producer (KIP-98, KIP-447): its errors, its outcome, and the
//! requests to the transaction and group coordinators.
//!
//! A producer built with [`ProducerBuilder::transactional_id`] sends records only
//! inside a transaction:
//!
//! 1. [`Producer::init_transactions`] (once) finds the transaction coordinator
//!    (FindCoordinator, key type 1) and gets the id's producer id and epoch
//!    (InitProducerId); this fences any older producer with the same id and aborts
//!    its open transaction.
//! 2. [`Producer::begin_transaction`] opens a transaction locally.
//! 3. [`Producer::send`] appends records; before the first batch to a partition
//!    new to the transaction, the sender task adds the partition with
//!    AddPartitionsToTxn. Batches carry the TRANSACTIONAL attribute.
//! 4. [`Producer::send_offsets_to_transaction`] puts a consumer group's offsets
//!    into the transaction (AddOffsetsToTxn, then TxnOffsetCommit to the group
//!    coordinator).
//! 5. [`Producer::commit_transaction`] sends every record, then EndTxn(commit);
//!    [`Producer::abort_transaction`] drops the records not sent yet (their
//!    futures fail with [`ProduceError::TransactionAborted`], handing each record
//!    back), waits for those in flight, then EndTxn(abort).
//!
//! # Errors
//!
//! As Kafka's client classifies them ([`TransactionError::is_fatal`]): after an
//! *abortable* error the application aborts the transaction and may go on with
//! the next one; after a *fatal* one ([`TransactionError::ProducerFenced`]: a newer
//! producer took the transactional id; an authorization failure) every
//! transactional call fails with it, and the producer should be closed.
//!
//! # Dropped commit and abort futures
//!
//! Commit and abort first do what can be undone (flush records, drop unsent
//! ones). From the moment EndTxn may be sent, the end of the transaction runs in a
//! task the producer owns: a dropped `commit_transaction` or `abort_transaction`
//! future does not stop it, the next transactional call waits for it, and
//! [`Producer::transaction_outcome`] reports how it ended.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use baton_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, AddPartitionsToTxnTopic, EndTxnRequest,
    FindCoordinatorRequest, InitProducerIdRequest, TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use baton_protocol::ErrorCode;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::accumulator::ProducerIdentity;
#[cfg(doc)]
use super::ProducerBuilder;
use super::{brokers_connected_first, ProduceError, Producer, Shared};
use crate::backoff::Backoff;
use crate::connection::Connection;
use crate::group::{ConsumerGroupMetadata, TopicPartition};

/// The highest AddPartitionsToTxn version a client sends: v4+ is the batched form
/// brokers send to the coordinator.
const ADD_PARTITIONS_MAX_VERSION: i16 = 3;
/// EndTxn v5 and TxnOffsetCommit v5 announce transactions v2 (KIP-890 part 2:
/// partitions added implicitly by Produce v12, an epoch bump per transaction),
/// which this producer does not speak.
const END_TXN_MAX_VERSION: i16 = 4;
/// See [`END_TXN_MAX_VERSION`].
const TXN_OFFSET_COMMIT_MAX_VERSION: i16 = 4;
/// The first wait before retrying a coordinator request (CONCURRENT_TRANSACTIONS
/// after a commit is usual and short, as Kafka's client knows).
const COORDINATOR_RETRY_BASE: Duration = Duration::from_millis(20);

/// Why a transactional call failed, or why a transaction failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum TransactionError {
    /// The producer has no transactional id ([`ProducerBuilder::transactional_id`]).
    #[error("the producer is not transactional (no transactional id)")]
    NotTransactional,
    /// The call does not fit the producer's state (for example
    /// `begin_transaction` before `init_transactions`, or twice).
    #[error("{operation} is not allowed now: {state}")]
    InvalidState {
        /// The call.
        operation: &'static str,
        /// What the producer is doing.
        state: &'static str,
    },
    /// No transaction is open: records and offsets are only taken between
    /// [`Producer::begin_transaction`] and the start of its commit or abort.
    #[error("no transaction is open")]
    NoTransaction,
    /// A newer producer with the same transactional id exists (PRODUCER_FENCED, or
    /// INVALID_PRODUCER_EPOCH from the coordinator on re-initialisation). Fatal:
    /// the producer's open transaction is aborted by the coordinator, and this
    /// producer cannot write transactionally any more.
    #[error("fenced by a newer producer with the same transactional id")]
    ProducerFenced,
    /// A partition leader refused the producer's epoch (INVALID_PRODUCER_EPOCH).
    /// Abortable (KIP-588): aborting gets a new epoch if the id is still this
    /// producer's, or fails with [`TransactionError::ProducerFenced`].
    #[error("the producer epoch is no longer valid (INVALID_PRODUCER_EPOCH)")]
    InvalidProducerEpoch,
    /// The transaction stayed open longer than the transaction timeout and the
    /// coordinator aborted it (its epoch moved on: INVALID_PRODUCER_EPOCH or
    /// PRODUCER_FENCED past the timeout, or TRANSACTION_ABORTABLE). Abortable: abort,
    /// then start the next transaction.
    #[error("the transaction coordinator aborted the transaction after the transaction timeout ({code})")]
    AbortedOnTimeout {
        /// What the broker answered.
        code: ErrorCode,
    },
    /// A record of the transaction failed (its delivery future has the details).
    /// Abortable.
    #[error("a record of the transaction failed at {topic}/{partition}: {reason}")]
    RecordFailed {
        /// The record's topic.
        topic: String,
        /// The record's partition.
        partition: i32,
        /// Why.
        reason: String,
    },
    /// A broker answered a transactional request with an error that Kafka's
    /// client treats as abortable (TRANSACTION_ABORTABLE, TOPIC_AUTHORIZATION_FAILED,
    /// GROUP_AUTHORIZATION_FAILED, UNKNOWN_PRODUCER_ID, a group generation error
    /// from TxnOffsetCommit...). Abort, then go on.
    #[error("{request} failed: {code}")]
    Abortable {
        /// The request.
        request: &'static str,
        /// The error code.
        code: ErrorCode,
    },
    /// A broker answered a transactional request with an error that Kafka's
    /// client treats as fatal (TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    /// INVALID_TXN_STATE, an unsupported version...). The producer cannot write
    /// transactionally any more.
    #[error("{request} failed fatally: {code}")]
    Fatal {
        /// The request.
        request: &'static str,
        /// The error code.
        code: ErrorCode,
    },
    /// The cluster does not offer a request transactions need.
    #[error("the cluster does not support transactions: {0}")]
    Unsupported(String),
    /// A request to a coordinator kept failing (connection errors, a coordinator
    /// that kept moving or loading) until the deadline. For EndTxn the outcome is
    /// unknown; calling the same commit or abort again retries it.
    #[error("{request} did not succeed within {timeout:?}; last error: {last}")]
    Timeout {
        /// The request.
        request: &'static str,
        /// How long it was retried.
        timeout: Duration,
        /// The last failure.
        last: String,
    },
}

impl TransactionError {
    /// Whether the producer can no longer write transactionally (Kafka's fatal
    /// errors); every later transactional call fails with this error.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            TransactionError::NotTransactional
                | TransactionError::ProducerFenced
                | TransactionError::Fatal { .. }
                | TransactionError::Unsupported(_)
        )
    }

    /// Whether the application should abort the transaction and may then go on
    /// with a new one.
    pub fn is_abortable(&self) -> bool {
        matches!(
            self,
            TransactionError::InvalidProducerEpoch
                | TransactionError::AbortedOnTimeout { .. }
                | TransactionError::RecordFailed { .. }
                | TransactionError::Abortable { .. }
        )
    }

    /// The error for `code` answered to transactional `request`; `timed_out` if
    /// the transaction has been open longer than the transaction timeout.
    pub(crate) fn from_code(request: &'static str, code: ErrorCode, timed_out: bool) -> Self {
        match code {
            ErrorCode::ProducerFenced | ErrorCode::InvalidProducerEpoch
                if timed_out && request != "InitProducerId" =>
            {
                TransactionError::AbortedOnTimeout { code }
            }
            ErrorCode::TransactionAbortable if timed_out => {
                TransactionError::AbortedOnTimeout { code }
            }
            ErrorCode::ProducerFenced | ErrorCode::TransactionCoordinatorFenced => {
                TransactionError::ProducerFenced
            }
            ErrorCode::InvalidProducerEpoch if request == "Produce" => {
                TransactionError::InvalidProducerEpoch
            }
            // From the coordinator, an old epoch means a newer producer (Kafka's
            // client raises ProducerFencedException for it).
            ErrorCode::InvalidProducerEpoch => TransactionError::ProducerFenced,
            ErrorCode::TransactionAbortable
            | ErrorCode::TopicAuthorizationFailed
            | ErrorCode::GroupAuthorizationFailed
            | ErrorCode::UnknownProducerId
            | ErrorCode::UnknownMemberId
            | ErrorCode::IllegalGeneration
            | ErrorCode::FencedInstanceId
            | ErrorCode::UnknownTopicOrPartition
            | ErrorCode::OutOfOrderSequenceNumber
            | ErrorCode::InvalidRecord
            | ErrorCode::CorruptMessage
            | ErrorCode::MessageTooLarge
            | ErrorCode::RecordListTooLarge
            | ErrorCode::RequestTimedOut
            | ErrorCode::OperationNotAttempted => TransactionError::Abortable { request, code },
            code => TransactionError::Fatal { request, code },
        }
    }
}

/// How a transaction ended.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum TransactionOutcome {
    /// The coordinator committed it: read_committed consumers see its records and
    /// its offsets are the group's.
    Committed,
    /// It was aborted: no read_committed consumer ever sees its records.
    Aborted,
    /// Its end was asked for but not confirmed; the error says why. A commit
    /// whose outcome is unknown may still complete at the coordinator; call
    /// [`Producer::commit_transaction`] again to retry it (or read the output at
    /// read_committed).
    Unknown(TransactionError),
}

/// What [`Producer::transaction_outcome`] watches: whether an end is under way,
/// and the last finished one.
#[derive(Debug, Clone, Default)]
struct OutcomeState {
    ending: bool,
    last: Option<TransactionOutcome>,
}

/// Where the transactional producer stands, between calls.
#[derive(Debug, Clone)]
enum Phase {
    /// `init_transactions` has not succeeded yet.
    Uninitialized,
    /// Ready for `begin_transaction`.
    Ready,
    /// A transaction is open (possibly failed: then the accumulator's
    /// `txn.error` holds why, and only abort is allowed).
    InTransaction,
    /// Its end (commit if `commit`) was asked for and is not confirmed; the same
    /// end may be asked for again.
    Ending { commit: bool },
    /// A fatal error: every transactional call fails with it.
    Fatal(TransactionError),
}

impl Phase {
    fn describe(&self) -> &'static str {
        match self {
            Phase::Uninitialized => "init_transactions has not completed",
            Phase::Ready => "no transaction is open",
            Phase::InTransaction => "a transaction is open",
            Phase::Ending { commit: true } => "the transaction's commit is not confirmed",
            Phase::Ending { commit: false } => "the transaction's abort is not confirmed",
            Phase::Fatal(_) => "the producer hit a fatal error",
        }
    }
}

/// The state behind the transactional calls, one call at a time.
struct Core {
    phase: Phase,
    /// The task ending the last transaction, if a caller stopped waiting for it.
    ending: Option<JoinHandle<Ended>>,
    /// Groups whose offsets are in the current transaction (AddOffsetsToTxn done).
    groups: HashSet<String>,
}

/// What the task ending a transaction reports.
struct Ended {
    commit: bool,
    result: Result<(), TransactionError>,
}

/// The transactional part of a producer.
pub(crate) struct TxnControl {
    /// The transactional id.
    pub(crate) id: String,
    core: tokio::sync::Mutex<Core>,
    /// The transaction coordinator's node and address, once found; shared with
    /// the sender task (AddPartitionsToTxn).
    coordinator: std::sync::Mutex<Option<(i32, String)>>,
    outcome: watch::Sender<OutcomeState>,
    /// Signalled when the sender records the transaction's first error.
    pub(crate) failed: Notify,
}

impl fmt::Debug for TxnControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TxnControl")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl TxnControl {
    pub(crate) fn new(id: String) -> Self {
        TxnControl {
            id,
            core: tokio::sync::Mutex::new(Core {
                phase: Phase::Uninitialized,
                ending: None,
                groups: HashSet::new(),
            }),
            coordinator: std::sync::Mutex::new(None),
            outcome: watch::channel(OutcomeState::default()).0,
            failed: Notify::new(),
        }
    }

    fn forget_coordinator(&self) {
        *self.coordinator.lock().expect("coordinator lock poisoned") = None;
    }
}

/// Records the first error of the open transaction (from the sender task).
pub(crate) fn transaction_failed(shared: &Shared, error: TransactionError) {
    let mut acc = shared.lock();
    if acc.txn.enabled && acc.txn.error.is_none() {
        tracing::warn!(%error, "transaction failed; it must be aborted");
        acc.txn.error = Some(error);
        drop(acc);
        if let Some(txn) = &shared.txn {
            txn.failed.notify_waiters();
        }
    }
}

/// Whether the open transaction has been open longer than the transaction
/// timeout.
pub(crate) fn timed_out(shared: &Shared) -> bool {
    let begun = shared.lock().txn.begun;
    begun.is_some_and(|b| b.elapsed() >= shared.config.transaction_timeout)
}

/// The current producer identity.
fn identity(shared: &Shared) -> Option<ProducerIdentity> {
    shared.lock().idem.current
}

/// The transaction part, or [`TransactionError::NotTransactional`].
fn control(shared: &Shared) -> Result<&TxnControl, TransactionError> {
    shared
        .txn
        .as_ref()
        .ok_or(TransactionError::NotTransactional)
}

/// Applies the result of a finished end-of-transaction task to `core`.
fn apply_ended(shared: &Shared, core: &mut Core, ended: Result<Ended, tokio::task::JoinError>) {
    core.ending = None;
    let (commit, result) = match ended {
        Ok(e) => (e.commit, e.result),
        Err(join) => (
            true,
            Err(TransactionError::Timeout {
                request: "EndTxn",
                timeout: Duration::ZERO,
                last: join.to_string(),
            }),
        ),
    };
    core.phase = match result {
        Ok(()) => {
            core.groups.clear();
            Phase::Ready
        }
        Err(e) if e.is_fatal() => Phase::Fatal(e),
        Err(e) if e.is_abortable() => {
            // The commit was refused: the application must abort.
            shared.lock().txn.error = Some(e);
            Phase::InTransaction
        }
        Err(_) => Phase::Ending { commit },
    };
}

/// Waits for an end-of-transaction task a dropped call left running.
async fn settle_pending(shared: &Shared, core: &mut Core) {
    if let Some(handle) = core.ending.as_mut() {
        let ended = handle.await;
        apply_ended(shared, core, ended);
    }
}

/// The opening of every transactional call: the transaction part, its core
/// locked (calls run one at a time), the end a dropped call left running
/// applied, and the fatal error if the producer has one.
async fn settled_core(
    shared: &Shared,
) -> Result<(&TxnControl, tokio::sync::MutexGuard<'_, Core>), TransactionError> {
    let txn = control(shared)?;
    let mut core = txn.core.lock().await;
    settle_pending(shared, &mut core).await;
    if let Phase::Fatal(e) = &core.phase {
        return Err(e.clone());
    }
    Ok((txn, core))
}

/// [`TransactionError::InvalidState`] for `operation` unless the phase is
/// `wanted`.
fn require_phase(
    core: &Core,
    operation: &'static str,
    wanted: impl Fn(&Phase) -> bool,
) -> Result<(), TransactionError> {
    if wanted(&core.phase) {
        Ok(())
    } else {
        Err(TransactionError::InvalidState {
            operation,
            state: core.phase.describe(),
        })
    }
}

/// Whether a commit (`commit`) or an abort may start: `Ok(true)` with a
/// transaction open, `Ok(false)` when the same end is already under way (a
/// failed or dropped one, to be resumed), otherwise
/// [`TransactionError::InvalidState`] for `operation`.
fn end_may_start(
    core: &Core,
    commit: bool,
    operation: &'static str,
) -> Result<bool, TransactionError> {
    require_phase(core, operation, |p| {
        matches!(p, Phase::InTransaction)
            || matches!(p, Phase::Ending { commit: c } if *c == commit)
    })?;
    Ok(matches!(core.phase, Phase::InTransaction))
}

impl Producer {
    /// Finds the transaction coordinator and gets the transactional id's producer
    /// id and epoch (InitProducerId). Any older producer with the same id is fenced
    /// from then on, and its open transaction is aborted (or completed, if its
    /// commit had started) before this returns. Call once, before the first
    /// transaction. Retries CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS,
    /// NOT_COORDINATOR and connection failures until the delivery timeout.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: if the future is dropped, the producer stays uninitialized and
    /// `init_transactions` can be called again. The coordinator may have handed
    /// out an epoch meanwhile (fencing older producers); the next call gets a newer
    /// one.
    pub async fn init_transactions(&self) -> Result<(), TransactionError> {
        let shared = &self.handle.shared;
        let (_, mut core) = settled_core(shared).await?;
        require_phase(&core, "init_transactions", |p| {
            matches!(p, Phase::Uninitialized)
        })?;
        match init_producer_id(shared, None).await {
            Ok(identity) => {
                install_identity(shared, identity);
                core.phase = Phase::Ready;
                Ok(())
            }
            Err(e) => {
                if e.is_fatal() {
                    core.phase = Phase::Fatal(e.clone());
                }
                Err(e)
            }
        }
    }

    /// Opens a transaction: records sent from now on belong to it, until
    /// [`Producer::commit_transaction`] or [`Producer::abort_transaction`]. Nothing
    /// goes to the broker until the first record is sent. Waits first for the end
    /// of a previous transaction whose commit or abort future was dropped.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: if the future is dropped before it returns, no transaction was
    /// opened.
    pub async fn begin_transaction(&self) -> Result<(), TransactionError> {
        let shared = &self.handle.shared;
        let (_, mut core) = settled_core(shared).await?;
        require_phase(&core, "begin_transaction", |p| matches!(p, Phase::Ready))?;
        let mut acc = shared.lock();
        acc.txn.open = true;
        acc.txn.error = None;
        acc.txn.added.clear();
        acc.txn.begun = Some(Instant::now());
        drop(acc);
        core.groups.clear();
        core.phase = Phase::InTransaction;
        Ok(())
    }

    /// Puts the consumer offsets `offsets` (each partition's next offset to read)
    /// of `group` into the open transaction: they become the group's committed
    /// offsets if and only if the transaction commits (AddOffsetsToTxn to the
    /// transaction coordinator, then TxnOffsetCommit to the group coordinator,
    /// with the group generation of `group`, from
    /// [`GroupConsumer::group_metadata`](crate::GroupConsumer::group_metadata)).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: if the future is dropped, the transaction stays open, and the
    /// offsets may or may not be part of it; calling again with the same (or
    /// later) offsets is safe, the last ones sent count.
    pub async fn send_offsets_to_transaction(
        &self,
        offsets: impl IntoIterator<Item = (TopicPartition, i64)>,
        group: &ConsumerGroupMetadata,
    ) -> Result<(), TransactionError> {
        let shared = &self.handle.shared;
        let (_, mut core) = settled_core(shared).await?;
        if !matches!(core.phase, Phase::InTransaction) {
            return Err(TransactionError::NoTransaction);
        }
        if let Some(e) = shared.lock().txn.error.clone() {
            return Err(e);
        }
        let offsets: Vec<(TopicPartition, i64)> = offsets.into_iter().collect();
        let result = async {
            if !core.groups.contains(&group.group_id) {
                add_offsets(shared, &group.group_id).await?;
                core.groups.insert(group.group_id.clone());
            }
            txn_offset_commit(shared, &offsets, group).await
        }
        .await;
        if let Err(e) = &result {
            if e.is_fatal() {
                core.phase = Phase::Fatal(e.clone());
            } else {
                transaction_failed(shared, e.clone());
            }
        }
        result
    }

    /// Commits the open transaction: sends every record handed over (ignoring
    /// linger) and waits for each to be acknowledged, then asks the coordinator to
    /// commit (EndTxn). Returns once the coordinator has written the commit: then
    /// read_committed consumers see the records (as soon as the markers reach the
    /// partitions) and the offsets sent with
    /// [`Producer::send_offsets_to_transaction`] are the group's.
    ///
    /// If a record of the transaction failed, nothing is committed: the error is
    /// returned and the transaction must be aborted. A commit whose EndTxn kept
    /// failing returns [`TransactionError::Timeout`] (outcome unknown); calling
    /// `commit_transaction` again retries it.
    ///
    /// # Cancel safety
    ///
    /// Defined outcome when dropped: while the records are being flushed, the
    /// transaction stays open (commit or abort may be called again). Once every
    /// record is acknowledged the commit is handed to a task the producer owns,
    /// which finishes it even if this future is dropped; the next transactional
    /// call waits for it, and [`Producer::transaction_outcome`] reports the
    /// outcome.
    pub async fn commit_transaction(&self) -> Result<(), TransactionError> {
        let shared = &self.handle.shared;
        let (txn, mut core) = settled_core(shared).await?;
        if !end_may_start(&core, true, "commit_transaction")? {
            return self.end_in_task(&mut core, true, false).await;
        }
        if let Some(e) = shared.lock().txn.error.clone() {
            return Err(e);
        }
        // Flush, or stop at the transaction's first error.
        {
            let failed = txn.failed.notified();
            tokio::pin!(failed);
            failed.as_mut().enable();
            if shared.lock().txn.error.is_none() {
                tokio::select! {
                    () = self.flush() => {}
                    () = &mut failed => {}
                }
            }
        }
        if let Some(e) = shared.lock().txn.error.clone() {
            return Err(e);
        }
        // From here on the commit finishes in the producer's task.
        shared.lock().txn.open = false;
        let nothing_added = {
            let acc = shared.lock();
            acc.txn.added.is_empty()
        } && core.groups.is_empty();
        self.end_in_task(&mut core, true, nothing_added).await
    }

    /// Aborts the open transaction: records not sent yet are dropped (their
    /// delivery futures fail with [`ProduceError::TransactionAborted`], each handing
    /// its record back), records in flight are waited for, then the coordinator
    /// aborts the transaction (EndTxn): read_committed consumers never see its
    /// records, and its offsets are discarded. After an abortable error, the
    /// producer also gets a new epoch (InitProducerId), as Kafka's client does, so
    /// that the next transaction starts with clean sequence numbers. A fenced
    /// producer gets [`TransactionError::ProducerFenced`].
    ///
    /// # Cancel safety
    ///
    /// Defined outcome when dropped: the unsent records are dropped at the first
    /// poll, and no record is accepted any more; if dropped while in-flight records
    /// are awaited, the transaction stays open for `abort_transaction` to be
    /// called again. Once EndTxn may be sent the abort finishes in a task the
    /// producer owns, as for [`Producer::commit_transaction`].
    pub async fn abort_transaction(&self) -> Result<(), TransactionError> {
        let shared = &self.handle.shared;
        let (_, mut core) = settled_core(shared).await?;
        if !end_may_start(&core, false, "abort_transaction")? {
            return self.end_in_task(&mut core, false, false).await;
        }
        let (dropped, sent) = {
            let mut acc = shared.lock();
            acc.txn.open = false;
            acc.take_queued()
        };
        if sent {
            // Sequence numbers of the dropped batches are used up.
            transaction_failed(
                shared,
                TransactionError::Abortable {
                    request: "Produce",
                    code: ErrorCode::OperationNotAttempted,
                },
            );
        }
        for batch in dropped {
            batch.settle(|p| {
                Err(ProduceError::TransactionAborted {
                    record: Box::new(p.record),
                })
            });
        }
        shared.wake.notify_one();
        // The batches in flight finish (or fail) on their own.
        self.flush().await;
        let nothing_added = shared.lock().txn.added.is_empty() && core.groups.is_empty();
        self.end_in_task(&mut core, false, nothing_added).await
    }

    /// Hands the end of the transaction to a task of the producer and waits for
    /// it; `local_only` when the coordinator knows nothing of the transaction.
    async fn end_in_task(
        &self,
        core: &mut Core,
        commit: bool,
        local_only: bool,
    ) -> Result<(), TransactionError> {
        let shared = self.handle.shared.clone();
        let txn = control(&shared)?;
        core.phase = Phase::Ending { commit };
        txn.outcome.send_modify(|o| o.ending = true);
        let task = tokio::spawn(end_transaction(shared.clone(), commit, local_only));
        core.ending = Some(task);
        let handle = core.ending.as_mut().expect("just set");
        let ended = handle.await;
        let result = match &ended {
            Ok(e) => e.result.clone(),
            Err(join) => Err(TransactionError::Timeout {
                request: "EndTxn",
                timeout: Duration::ZERO,
                last: join.to_string(),
            }),
        };
        apply_ended(&shared, core, ended);
        result
    }

    /// How the last transaction that finished ended (committed, aborted, or
    /// unknown with the error), `None` before the first one ends. A transaction
    /// whose end is still under way is not reported yet; see
    /// [`Producer::transaction_outcome`].
    pub fn last_transaction_outcome(&self) -> Option<TransactionOutcome> {
        let txn = self.handle.shared.txn.as_ref()?;
        let state = txn.outcome.borrow();
        state.last.clone()
    }

    /// Waits until no transaction end is under way (a commit or abort whose
    /// future was dropped keeps running in the producer's task), then returns how
    /// the last transaction ended, as [`Producer::last_transaction_outcome`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub async fn transaction_outcome(&self) -> Option<TransactionOutcome> {
        let txn = self.handle.shared.txn.as_ref()?;
        let mut rx = txn.outcome.subscribe();
        let state = rx.wait_for(|s| !s.ending).await.ok()?;
        state.last.clone()
    }
}

/// Ends the transaction (EndTxn unless `local_only`), gets a new epoch if the
/// transaction failed, resets the transaction's local state and publishes the
/// outcome.
async fn end_transaction(shared: Arc<Shared>, commit: bool, local_only: bool) -> Ended {
    let failed = shared.lock().txn.error.clone();
    let timed_out = timed_out(&shared);
    let mut result = if local_only {
        Ok(())
    } else {
        end_txn(&shared, commit).await
    };
    if !commit {
        if let Err(e) = &result {
            // A coordinator that aborted the transaction on its timeout bumped the
            // epoch: the abort happened, and re-initialising tells whether the id
            // is still this producer's.
            if matches!(e, TransactionError::AbortedOnTimeout { .. })
                || (timed_out && matches!(e, TransactionError::ProducerFenced))
            {
                result = Ok(());
            }
        }
    }
    if result.is_ok() && failed.is_some() {
        let current = identity(&shared);
        result = init_producer_id(&shared, current).await.map(|identity| {
            install_identity(&shared, identity);
        });
    }
    if result.is_ok() {
        let mut acc = shared.lock();
        acc.txn.added.clear();
        acc.txn.error = None;
        acc.txn.begun = None;
        acc.txn.open = false;
    }
    let outcome = match &result {
        Ok(()) if commit => TransactionOutcome::Committed,
        Ok(()) => TransactionOutcome::Aborted,
        Err(e) => TransactionOutcome::Unknown(e.clone()),
    };
    tracing::debug!(?outcome, "transaction ended");
    if let Some(txn) = &shared.txn {
        txn.outcome.send_modify(|o| {
            o.ending = false;
            o.last = Some(outcome);
        });
    }
    Ended { commit, result }
}

/// Installs a new identity from InitProducerId: sequences start again at 0.
fn install_identity(shared: &Shared, identity: ProducerIdentity) {
    let mut acc = shared.lock();
    tracing::debug!(
        producer_id = identity.id,
        epoch = identity.epoch,
        "transactional producer identity"
    );
    acc.idem.current = Some(identity);
    acc.idem.bump_requested = false;
    acc.idem.failures = 0;
    acc.idem.retry_at = None;
}

/// A connection to the transaction coordinator, found with FindCoordinator (key
/// type 1) unless known.
async fn coordinator_connection(shared: &Shared) -> Result<Connection, Attempt> {
    let txn = control(shared).map_err(Attempt::Fail)?;
    let (node, addr) = cached_coordinator(shared, &txn.coordinator, 1, &txn.id).await?;
    match shared.client.node_connection_at(node, &addr).await {
        Ok(conn) => Ok(conn),
        Err(e) => {
            txn.forget_coordinator();
            Err(Attempt::Retry(e.to_string()))
        }
    }
}

/// The coordinator (node and address) `cache` holds, or else the one
/// FindCoordinator names for `key` of `key_type`, which `cache` then keeps.
async fn cached_coordinator(
    shared: &Shared,
    cache: &std::sync::Mutex<Option<(i32, String)>>,
    key_type: i8,
    key: &str,
) -> Result<(i32, String), Attempt> {
    let known = cache.lock().expect("coordinator lock poisoned").clone();
    match known {
        Some(found) => Ok(found),
        None => {
            let found = find_coordinator(shared, key_type, key).await?;
            *cache.lock().expect("coordinator lock poisoned") = Some(found.clone());
            Ok(found)
        }
    }
}

/// One attempt's failure.
enum Attempt {
    /// Worth retrying after a backoff.
    Retry(String),
    /// Final.
    Fail(TransactionError),
}

/// FindCoordinator for `key` of `key_type` (0 group, 1 transaction): the node
/// and its address.
async fn find_coordinator(
    shared: &Shared,
    key_type: i8,
    key: &str,
) -> Result<(i32, String), Attempt> {
    let client = &shared.client;
    let mut nodes = brokers_connected_first(client, client.metadata_snapshot().0.brokers.keys());
    if nodes.is_empty() {
        let _ = client.refresh_metadata().await;
        nodes = brokers_connected_first(client, client.metadata().brokers.keys());
    }
    let mut last = "no broker known".to_string();
    for node in nodes {
        let conn = match client.node_connection(node).await {
            Ok(c) => c,
            Err(e) => {
                last = e.to_string();
                continue;
            }
        };
        let version = match conn.version_for::<FindCoordinatorRequest>() {
            Ok(v) => v,
            Err(e) => return Err(Attempt::Fail(TransactionError::Unsupported(e.to_string()))),
        };
        if version < 1 {
            return Err(Attempt::Fail(TransactionError::Unsupported(
                "FindCoordinator v1+ (coordinator key types)".into(),
            )));
        }
        let req = FindCoordinatorRequest {
            key: key.to_string(),
            key_type,
            coordinator_keys: vec![key.to_string()],
        };
        let resp = match conn
            .send_with_timeout(&req, shared.config.request_timeout)
            .await
        {
            Ok(r) => r,
            Err(e) => {
                last = e.to_string();
                continue;
            }
        };
        let (code, node_id, host, port) = if version >= 4 {
            match resp.coordinators.into_iter().find(|c| c.key == key) {
                Some(c) => (c.error_code, c.node_id, c.host, c.port),
                None => (
                    ErrorCode::CoordinatorNotAvailable.code(),
                    -1,
                    String::new(),
                    0,
                ),
            }
        } else {
            (resp.error_code, resp.node_id, resp.host, resp.port)
        };
        let code = ErrorCode::from_code(code);
        if code.is_ok() && node_id >= 0 {
            let host = if host.contains(':') && !host.starts_with('[') {
                format!("[{host}]")
            } else {
                host
            };
            return Ok((node_id, format!("{host}:{port}")));
        }
        if code.is_retriable() || code.is_ok() {
            last = format!("FindCoordinator answered {code}");
            continue;
        }
        return Err(Attempt::Fail(TransactionError::from_code(
            "FindCoordinator",
            code,
            false,
        )));
    }
    Err(Attempt::Retry(last))
}

/// Whether `code` from a coordinator means: look the coordinator up again.
fn coordinator_moved(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::NotCoordinator | ErrorCode::CoordinatorNotAvailable
    )
}

/// Whether `code` from a coordinator means: the same coordinator, a bit later.
fn coordinator_busy(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::CoordinatorLoadInProgress
            | ErrorCode::ConcurrentTransactions
            | ErrorCode::RequestTimedOut
    )
}

/// Runs `attempt` until it succeeds, fails for good, or the delivery timeout
/// passes (then [`TransactionError::Timeout`]), with a backoff between attempts.
async fn with_retries<T, F, Fut>(
    shared: &Shared,
    request: &'static str,
    mut attempt: F,
) -> Result<T, TransactionError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Attempt>>,
{
    let timeout = shared.config.delivery_timeout;
    let deadline = Instant::now() + timeout;
    let backoff = Backoff::new(COORDINATOR_RETRY_BASE, shared.config.retry_backoff_max);
    let mut failures = 0;
    loop {
        match attempt().await {
            Ok(v) => return Ok(v),
            Err(Attempt::Fail(e)) => return Err(e),
            Err(Attempt::Retry(last)) => {
                failures += 1;
                let wait = backoff.delay(failures);
                tracing::info!(request, %last, ?wait, "transactional request failed; retrying");
                if Instant::now() + wait >= deadline {
                    return Err(TransactionError::Timeout {
                        request,
                        timeout,
                        last,
                    });
                }
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// Sorts a coordinator's answer `code` to `request` into done, retry, or fail.
fn judge(shared: &Shared, request: &'static str, code: ErrorCode) -> Result<(), Attempt> {
    if code.is_ok() {
        return Ok(());
    }
    if coordinator_moved(code) {
        if let Some(txn) = &shared.txn {
            txn.forget_coordinator();
        }
        return Err(Attempt::Retry(format!("{request} answered {code}")));
    }
    if coordinator_busy(code) {
        return Err(Attempt::Retry(format!("{request} answered {code}")));
    }
    let error = TransactionError::from_code(request, code, timed_out(shared));
    if matches!(error, TransactionError::ProducerFenced) {
        tracing::info!(request, %code, "producer fenced by a newer one with the same transactional id");
    }
    Err(Attempt::Fail(error))
}

/// A connection failure of a coordinator request: forget the coordinator, retry.
fn lost(shared: &Shared, e: impl fmt::Display) -> Attempt {
    if let Some(txn) = &shared.txn {
        txn.forget_coordinator();
    }
    Attempt::Retry(e.to_string())
}

/// InitProducerId for the transactional id; with `current`, asks to bump that
/// identity's epoch (KIP-360), which Kafka allows when it is the id's current or
/// last epoch.
async fn init_producer_id(
    shared: &Shared,
    current: Option<ProducerIdentity>,
) -> Result<ProducerIdentity, TransactionError> {
    let txn = control(shared)?;
    let timeout_ms = shared
        .config
        .transaction_timeout
        .as_millis()
        .min(i32::MAX as u128) as i32;
    with_retries(shared, "InitProducerId", || async {
        let conn = coordinator_connection(shared).await?;
        let req = InitProducerIdRequest {
            transactional_id: Some(txn.id.clone()),
            transaction_timeout_ms: timeout_ms,
            producer_id: current.map_or(-1, |c| c.id),
            producer_epoch: current.map_or(-1, |c| c.epoch),
        };
        if current.is_some() && conn.version_for::<InitProducerIdRequest>().unwrap_or(0) < 3 {
            return Err(Attempt::Fail(TransactionError::Unsupported(
                "InitProducerId v3+ (epoch bump after an aborted transaction)".into(),
            )));
        }
        let resp = conn
            .send_with_timeout(&req, shared.config.request_timeout)
            .await
            .map_err(|e| lost(shared, e))?;
        judge(
            shared,
            "InitProducerId",
            ErrorCode::from_code(resp.error_code),
        )?;
        Ok(ProducerIdentity {
            id: resp.producer_id,
            epoch: resp.producer_epoch,
        })
    })
    .await
}

/// EndTxn (commit or abort) with the current identity.
async fn end_txn(shared: &Shared, commit: bool) -> Result<(), TransactionError> {
    let txn = control(shared)?;
    let Some(identity) = identity(shared) else {
        return Err(TransactionError::InvalidState {
            operation: "EndTxn",
            state: "the producer has no producer id",
        });
    };
    with_retries(shared, "EndTxn", || async {
        let conn = coordinator_connection(shared).await?;
        let req = EndTxnRequest {
            transactional_id: txn.id.clone(),
            producer_id: identity.id,
            producer_epoch: identity.epoch,
            committed: commit,
        };
        let resp = conn
            .send_at_most(&req, END_TXN_MAX_VERSION, shared.config.request_timeout)
            .await
            .map_err(|e| lost(shared, e))?;
        judge(shared, "EndTxn", ErrorCode::from_code(resp.error_code))
    })
    .await
}

/// AddOffsetsToTxn: the group's offsets partition joins the transaction.
async fn add_offsets(shared: &Shared, group_id: &str) -> Result<(), TransactionError> {
    let txn = control(shared)?;
    let identity = identity(shared).ok_or(TransactionError::NoTransaction)?;
    with_retries(shared, "AddOffsetsToTxn", || async {
        let conn = coordinator_connection(shared).await?;
        let req = AddOffsetsToTxnRequest {
            transactional_id: txn.id.clone(),
            producer_id: identity.id,
            producer_epoch: identity.epoch,
            group_id: group_id.to_string(),
        };
        let resp = conn
            .send_with_timeout(&req, shared.config.request_timeout)
            .await
            .map_err(|e| lost(shared, e))?;
        judge(
            shared,
            "AddOffsetsToTxn",
            ErrorCode::from_code(resp.error_code),
        )
    })
    .await
}

/// TxnOffsetCommit of `offsets` to `group`'s coordinator.
async fn txn_offset_commit(
    shared: &Shared,
    offsets: &[(TopicPartition, i64)],
    group: &ConsumerGroupMetadata,
) -> Result<(), TransactionError> {
    let txn = control(shared)?;
    let identity = identity(shared).ok_or(TransactionError::NoTransaction)?;
    let mut by_topic: BTreeMap<&str, Vec<TxnOffsetCommitRequestPartition>> = BTreeMap::new();
    for (tp, offset) in offsets {
        by_topic
            .entry(&tp.topic)
            .or_default()
            .push(TxnOffsetCommitRequestPartition {
                partition_index: tp.partition,
                committed_offset: *offset,
                committed_leader_epoch: -1,
                committed_metadata: None,
            });
    }
    let req = TxnOffsetCommitRequest {
        transactional_id: txn.id.clone(),
        group_id: group.group_id.clone(),
        producer_id: identity.id,
        producer_epoch: identity.epoch,
        generation_id: group.generation_id,
        member_id: group.member_id.clone(),
        group_instance_id: group.group_instance_id.clone(),
        topics: by_topic
            .into_iter()
            .map(|(name, partitions)| TxnOffsetCommitRequestTopic {
                name: name.to_string(),
                partitions,
            })
            .collect(),
    };
    let group_coordinator: std::sync::Mutex<Option<(i32, String)>> = std::sync::Mutex::new(None);
    with_retries(shared, "TxnOffsetCommit", || async {
        let (node, addr) =
            cached_coordinator(shared, &group_coordinator, 0, &group.group_id).await?;
        let forget = || *group_coordinator.lock().expect("coordinator lock poisoned") = None;
        let conn = match shared.client.node_connection_at(node, &addr).await {
            Ok(c) => c,
            Err(e) => {
                forget();
                return Err(Attempt::Retry(e.to_string()));
            }
        };
        let resp = match conn
            .send_at_most(
                &req,
                TXN_OFFSET_COMMIT_MAX_VERSION,
                shared.config.request_timeout,
            )
            .await
        {
            Ok(r) => r,
            Err(e) => {
                forget();
                return Err(Attempt::Retry(e.to_string()));
            }
        };
        let mut worst = ErrorCode::None;
        for t in &resp.topics {
            for p in &t.partitions {
                let code = ErrorCode::from_code(p.error_code);
                if !code.is_ok() && (worst.is_ok() || !code.is_retriable()) {
                    worst = code;
                }
            }
        }
        if coordinator_moved(worst) {
            forget();
            return Err(Attempt::Retry(format!("TxnOffsetCommit answered {worst}")));
        }
        if coordinator_busy(worst) || worst == ErrorCode::UnstableOffsetCommit {
            return Err(Attempt::Retry(format!("TxnOffsetCommit answered {worst}")));
        }
        judge(shared, "TxnOffsetCommit", worst)
    })
    .await
}

/// Adds `partitions` to the open transaction (AddPartitionsToTxn), for the
/// sender task before their first batch; retries until the delivery timeout; on
/// failure the transaction fails with the error. Partitions an answer accepts
/// stay added even if others failed.
pub(crate) async fn add_partitions(shared: &Shared, partitions: Vec<(Arc<str>, i32)>) {
    let Ok(txn) = control(shared) else { return };
    let Some(identity) = identity(shared) else {
        return;
    };
    let (begun, mut todo): (Option<Instant>, Vec<(Arc<str>, i32)>) = {
        let acc = shared.lock();
        let mut seen = HashSet::new();
        let todo = partitions
            .into_iter()
            .filter(|p| !acc.txn.added.contains(p) && seen.insert(p.clone()))
            .collect();
        (acc.txn.begun, todo)
    };
    let timeout = shared.config.delivery_timeout;
    let deadline = Instant::now() + timeout;
    let backoff = Backoff::new(COORDINATOR_RETRY_BASE, shared.config.retry_backoff_max);
    let mut failures = 0;
    let outcome = loop {
        if todo.is_empty() {
            break Ok(());
        }
        let answer = add_partitions_once(shared, txn, identity, &todo).await;
        if !same_transaction(shared, identity, begun) {
            // The transaction ended (and the epoch may have been bumped) while this
            // was retrying: its answer, a fencing one included, is not the current
            // transaction's.
            tracing::debug!("AddPartitionsToTxn outlived its transaction; dropped");
            shared.wake.notify_one();
            return;
        }
        let last = match answer {
            Ok((added, worst)) => {
                let mut acc = shared.lock();
                for (t, p) in added {
                    if let Some(i) = todo.iter().position(|(tt, pp)| **tt == *t && *pp == p) {
                        acc.txn.added.insert(todo.swap_remove(i));
                    }
                }
                drop(acc);
                match judge(shared, "AddPartitionsToTxn", worst) {
                    Ok(()) if todo.is_empty() => break Ok(()),
                    Ok(()) => "partitions missing from the AddPartitionsToTxn answer".to_string(),
                    Err(Attempt::Fail(e)) => break Err(e),
                    Err(Attempt::Retry(last)) => last,
                }
            }
            Err(Attempt::Fail(e)) => break Err(e),
            Err(Attempt::Retry(last)) => last,
        };
        failures += 1;
        let wait = backoff.delay(failures);
        tracing::info!(%last, ?wait, "AddPartitionsToTxn failed; retrying");
        if Instant::now() + wait >= deadline {
            break Err(TransactionError::Timeout {
                request: "AddPartitionsToTxn",
                timeout,
                last,
            });
        }
        tokio::time::sleep(wait).await;
    };
    if let Err(e) = outcome {
        transaction_failed(shared, e);
    }
    shared.wake.notify_one();
}

/// Whether the transaction begun at `begun` under `identity` is still the
/// producer's current one.
fn same_transaction(shared: &Shared, identity: ProducerIdentity, begun: Option<Instant>) -> bool {
    let acc = shared.lock();
    acc.idem.current == Some(identity) && acc.txn.begun == begun
}

/// One AddPartitionsToTxn round trip: the partitions added, and the worst error
/// of the others (retriable ones rank below final ones).
async fn add_partitions_once(
    shared: &Shared,
    txn: &TxnControl,
    identity: ProducerIdentity,
    todo: &[(Arc<str>, i32)],
) -> Result<(Vec<(String, i32)>, ErrorCode), Attempt> {
    let conn = coordinator_connection(shared).await?;
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (t, p) in todo {
        topics.entry(t).or_default().push(*p);
    }
    let req = AddPartitionsToTxnRequest {
        transactions: Vec::new(),
        v3_and_below_transactional_id: txn.id.clone(),
        v3_and_below_producer_id: identity.id,
        v3_and_below_producer_epoch: identity.epoch,
        v3_and_below_topics: topics
            .into_iter()
            .map(|(name, partitions)| AddPartitionsToTxnTopic {
                name: name.to_string(),
                partitions,
            })
            .collect(),
    };
    let resp = conn
        .send_at_most(
            &req,
            ADD_PARTITIONS_MAX_VERSION,
            shared.config.request_timeout,
        )
        .await
        .map_err(|e| lost(shared, e))?;
    let mut added = Vec::new();
    let mut worst = ErrorCode::None;
    for t in resp.results_by_topic_v3_and_below {
        for p in t.results_by_partition {
            let code = ErrorCode::from_code(p.partition_error_code);
            if code.is_ok() {
                added.push((t.name.clone(), p.partition_index));
            } else if worst.is_ok()
                || worst == ErrorCode::OperationNotAttempted
                || (coordinator_busy(worst) && !coordinator_busy(code))
            {
                worst = code;
            }
        }
    }
    Ok((added, worst))
}
