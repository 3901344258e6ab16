//! The transaction state machine of one transactional id, without I/O: each request
//! (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, a timeout) is checked
//! against the current [`TxnMetadata`] and either refused with Kafka's error code or
//! turned into the next metadata, which the coordinator writes to
//! `__transaction_state` before it answers and before it applies it in memory.
//!
//! States and transitions follow Apache Kafka's `TransactionState`:
//!
//! ```text
//!   Empty ──add partitions──▶ Ongoing ──EndTxn──▶ PrepareCommit ──markers──▶ CompleteCommit
//!     ▲                         │   └──EndTxn / timeout / fence──▶ PrepareAbort ──▶ CompleteAbort
//!     └────── InitProducerId ◀──┴── (from Empty / Complete*: epoch bump) ◀─────────────┘
//! ```
//!
//! `PrepareEpochFence` is Kafka's transient "bump the epoch, then abort" step; here a
//! fence goes straight to `PrepareAbort` with the bumped epoch in one record, and the
//! state exists for reading Kafka's records and for DescribeTransactions. `Dead` is
//! the state of an expired id (never entered here: ids are not expired).
//!
//! Invariants (asserted where metadata is built): the epoch never decreases for one
//! producer id; `partitions` is empty outside `Ongoing` and `Prepare*`; a
//! `Prepare*` state names the partitions owed a marker (all of the transaction's,
//! until the completion record).

use std::collections::BTreeSet;

use baton_protocol::ErrorCode;

#[cfg(test)]
mod tests;

/// The last usable epoch: at it, the next bump takes a new producer id instead
/// (Kafka keeps `Short.MAX_VALUE` free for markers of a fenced producer).
pub const MAX_EPOCH: i16 = i16::MAX - 1;

/// The no-producer value of ids and epochs.
pub const NO_PRODUCER_ID: i64 = -1;
/// The no-epoch value.
pub const NO_PRODUCER_EPOCH: i16 = -1;

/// A transactional id's state (Kafka's `TransactionState`, with its record ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxnState {
    /// No transaction open.
    Empty,
    /// Partitions were added; records may be written.
    Ongoing,
    /// Commit decided; markers are being written.
    PrepareCommit,
    /// Abort decided; markers are being written.
    PrepareAbort,
    /// The last transaction committed.
    CompleteCommit,
    /// The last transaction aborted.
    CompleteAbort,
    /// The id expired.
    Dead,
    /// An epoch bump before an abort (transient in Kafka).
    PrepareEpochFence,
}

impl TxnState {
    /// Every state, in record-id order.
    pub const ALL: [TxnState; 8] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
        TxnState::PrepareEpochFence,
    ];

    /// The id Kafka writes in `TransactionLogValue.TransactionStatus`.
    pub fn id(self) -> i8 {
        TxnState::ALL.iter().position(|s| *s == self).unwrap_or(0) as i8
    }

    /// The state of a record id.
    pub fn from_id(id: i8) -> Option<TxnState> {
        usize::try_from(id)
            .ok()
            .and_then(|i| TxnState::ALL.get(i).copied())
    }

    /// The name DescribeTransactions and ListTransactions use.
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// The state named `name` (as in ListTransactions' state filter).
    pub fn from_name(name: &str) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Whether markers are being written (a commit or abort is in progress).
    pub fn is_prepare(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }
}

/// Everything the coordinator keeps about one transactional id; one
/// `__transaction_state` record holds it whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    /// The producer id in use.
    pub producer_id: i64,
    /// The producer id before the last change (epoch exhaustion), or -1.
    pub last_producer_id: i64,
    /// The current epoch.
    pub producer_epoch: i16,
    /// The epoch before the last bump, or -1: a retry that names it is recognised.
    pub last_producer_epoch: i16,
    /// The transaction timeout in ms.
    pub timeout_ms: i32,
    /// The state.
    pub state: TxnState,
    /// The partitions of the transaction (`Ongoing`), or those still owed a marker
    /// (`Prepare*`). Empty otherwise.
    pub partitions: BTreeSet<(String, i32)>,
    /// When the current transaction started (ms since the epoch), or -1.
    pub start_ms: i64,
    /// When the metadata last changed (ms since the epoch).
    pub last_update_ms: i64,
    /// 2 when the client ends transactions with EndTxn v5 (KIP-890 part 2: the
    /// epoch is bumped at every end), else 0.
    pub client_txn_version: i16,
}

/// Limits on what one transactional id may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnLimits {
    /// `transaction.max.timeout.ms`: longer timeouts are INVALID_TRANSACTION_TIMEOUT.
    pub max_timeout_ms: i32,
    /// Most partitions in one transaction (`BrokerLimits`); past it, POLICY_VIOLATION.
    pub max_partitions: usize,
}

impl Default for TxnLimits {
    fn default() -> Self {
        TxnLimits {
            max_timeout_ms: 15 * 60 * 1000,
            max_partitions: 10_000,
        }
    }
}

/// What InitProducerId leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitOutcome {
    /// Write this metadata, then answer with its producer id and epoch.
    Ready(TxnMetadata),
    /// An open transaction is aborted first: write this `PrepareAbort` (bumped
    /// epoch, fencing the old producer), send its markers, and answer
    /// CONCURRENT_TRANSACTIONS (the client retries).
    AbortFirst(TxnMetadata),
}

/// What an AddPartitionsToTxn (or AddOffsetsToTxn) leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddOutcome {
    /// Every partition is in the transaction already: nothing to write.
    Unchanged,
    /// Write this `Ongoing` metadata.
    Write(TxnMetadata),
}

/// What an EndTxn leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndOutcome {
    /// Write this `Prepare*` metadata, answer, then send its markers.
    Prepare(TxnMetadata),
    /// A retry of an end that completed: answer success with this producer id and
    /// epoch, write nothing.
    Done(i64, i16),
}

/// The producer id and epoch a request names, and the one it needs to match.
fn check_producer(meta: &TxnMetadata, producer_id: i64, epoch: i16) -> Result<(), ErrorCode> {
    if producer_id != meta.producer_id {
        return Err(ErrorCode::InvalidProducerIdMapping);
    }
    if epoch != meta.producer_epoch {
        return Err(ErrorCode::ProducerFenced);
    }
    Ok(())
}

fn check_timeout(timeout_ms: i32, limits: &TxnLimits) -> Result<(), ErrorCode> {
    if timeout_ms <= 0 || timeout_ms > limits.max_timeout_ms {
        return Err(ErrorCode::InvalidTransactionTimeout);
    }
    Ok(())
}

impl TxnMetadata {
    /// The metadata of a new id: epoch 0 of `producer_id`, `Empty`.
    pub fn new(producer_id: i64, timeout_ms: i32, now: i64) -> TxnMetadata {
        TxnMetadata {
            producer_id,
            last_producer_id: NO_PRODUCER_ID,
            producer_epoch: 0,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now,
            client_txn_version: 0,
        }
    }

    /// Whether an `Ongoing` transaction has passed its timeout at `now`.
    pub fn timed_out(&self, now: i64) -> bool {
        self.state == TxnState::Ongoing
            && self.start_ms >= 0
            && now.saturating_sub(self.start_ms) > i64::from(self.timeout_ms)
    }

    /// The metadata after a bump of the epoch: a new producer id (from `next_id`)
    /// with epoch 0 when the epoch is exhausted.
    fn bumped(
        &self,
        next_id: &mut dyn FnMut() -> Result<i64, ErrorCode>,
    ) -> Result<TxnMetadata, ErrorCode> {
        let mut m = self.clone();
        if self.producer_epoch >= MAX_EPOCH {
            m.last_producer_id = self.producer_id;
            m.producer_id = next_id()?;
            m.producer_epoch = 0;
            m.last_producer_epoch = NO_PRODUCER_EPOCH;
        } else {
            m.last_producer_epoch = self.producer_epoch;
            m.producer_epoch = self.producer_epoch + 1;
        }
        Ok(m)
    }

    /// InitProducerId for an id that has this metadata (`None`: a new id).
    /// `expected` is the producer id and epoch the client names (v3+, KIP-360;
    /// `(-1, -1)` for none); `next_id` allocates a producer id.
    pub fn init_producer_id(
        current: Option<&TxnMetadata>,
        timeout_ms: i32,
        expected: (i64, i16),
        next_id: &mut dyn FnMut() -> Result<i64, ErrorCode>,
        limits: &TxnLimits,
        now: i64,
    ) -> Result<InitOutcome, ErrorCode> {
        check_timeout(timeout_ms, limits)?;
        let Some(cur) = current else {
            return Ok(InitOutcome::Ready(TxnMetadata::new(
                next_id()?,
                timeout_ms,
                now,
            )));
        };
        let (exp_id, exp_epoch) = expected;
        let named = exp_id != NO_PRODUCER_ID || exp_epoch != NO_PRODUCER_EPOCH;
        if named {
            // KIP-360: the client names its current id and epoch to keep them.
            let known_id = exp_id == cur.producer_id || exp_id == cur.last_producer_id;
            if !known_id {
                return Err(ErrorCode::ProducerFenced);
            }
        }
        match cur.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence => {
                Err(ErrorCode::ConcurrentTransactions)
            }
            TxnState::Dead => Err(ErrorCode::InvalidTxnState),
            TxnState::Ongoing => {
                // The bump fences the old producer; its transaction aborts. At an
                // exhausted epoch the abort keeps it (markers carry the id and epoch
                // the transaction wrote with), and the retry gets a new id.
                let mut next = cur.clone();
                if cur.producer_epoch < MAX_EPOCH {
                    next.last_producer_epoch = cur.producer_epoch;
                    next.producer_epoch = cur.producer_epoch + 1;
                }
                next.state = TxnState::PrepareAbort;
                next.last_update_ms = now;
                Ok(InitOutcome::AbortFirst(next))
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                if named
                    && exp_id == cur.producer_id
                    && exp_epoch == cur.last_producer_epoch
                    && cur.last_producer_epoch != NO_PRODUCER_EPOCH
                {
                    // The client names the epoch before the last bump: a retry of
                    // that bump, or a producer recovering after the coordinator
                    // bumped its epoch to abort it (a timeout). It gets the current
                    // epoch, as in Kafka, without another bump.
                    let mut next = cur.clone();
                    next.state = TxnState::Empty;
                    next.timeout_ms = timeout_ms;
                    next.partitions.clear();
                    next.start_ms = -1;
                    next.last_update_ms = now;
                    return Ok(InitOutcome::Ready(next));
                }
                if named && exp_id == cur.producer_id && exp_epoch != cur.producer_epoch {
                    return Err(ErrorCode::ProducerFenced);
                }
                let mut next = cur.bumped(next_id)?;
                next.state = TxnState::Empty;
                next.timeout_ms = timeout_ms;
                next.partitions.clear();
                next.start_ms = -1;
                next.last_update_ms = now;
                next.client_txn_version = 0;
                Ok(InitOutcome::Ready(next))
            }
        }
    }

    /// AddPartitionsToTxn (or AddOffsetsToTxn, with the group's offsets partition).
    pub fn add_partitions(
        &self,
        producer_id: i64,
        epoch: i16,
        partitions: &[(String, i32)],
        limits: &TxnLimits,
        now: i64,
    ) -> Result<AddOutcome, ErrorCode> {
        check_producer(self, producer_id, epoch)?;
        match self.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence => {
                return Err(ErrorCode::ConcurrentTransactions)
            }
            TxnState::Dead => return Err(ErrorCode::InvalidTxnState),
            TxnState::Ongoing
                if partitions
                    .iter()
                    .all(|p| self.partitions.contains(&(p.0.clone(), p.1))) =>
            {
                return Ok(AddOutcome::Unchanged)
            }
            _ => {}
        }
        let mut next = self.clone();
        if self.state != TxnState::Ongoing {
            next.partitions.clear();
            next.start_ms = now;
        }
        next.partitions.extend(partitions.iter().cloned());
        if next.partitions.len() > limits.max_partitions {
            return Err(ErrorCode::PolicyViolation);
        }
        next.state = TxnState::Ongoing;
        next.last_update_ms = now;
        Ok(AddOutcome::Write(next))
    }

    /// KIP-890 part 1: whether `partition` is in the producer's ongoing
    /// transaction (AddPartitionsToTxn v4+ with `verify_only`). `Ok(false)` is
    /// answered INVALID_TXN_STATE for that partition.
    pub fn verify_partition(
        &self,
        producer_id: i64,
        epoch: i16,
        partition: &(String, i32),
    ) -> Result<bool, ErrorCode> {
        check_producer(self, producer_id, epoch)?;
        Ok(self.state == TxnState::Ongoing && self.partitions.contains(partition))
    }

    /// EndTxn. `v2` is KIP-890 part 2 (EndTxn v5): the epoch is bumped with the
    /// end (not past [`MAX_EPOCH`]: there the next InitProducerId takes a new id),
    /// a retry naming the epoch before that bump is recognised, and an abort is
    /// allowed without a transaction.
    pub fn end(
        &self,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        v2: bool,
        now: i64,
    ) -> Result<EndOutcome, ErrorCode> {
        if producer_id != self.producer_id {
            return Err(ErrorCode::InvalidProducerIdMapping);
        }
        let done = |state| {
            (state
                == if commit {
                    TxnState::CompleteCommit
                } else {
                    TxnState::CompleteAbort
                })
            .then_some(EndOutcome::Done(self.producer_id, self.producer_epoch))
        };
        let preparing = if commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        if epoch != self.producer_epoch {
            let retry = v2
                && epoch == self.last_producer_epoch
                && epoch != NO_PRODUCER_EPOCH
                && self.client_txn_version == 2;
            if !retry {
                return Err(ErrorCode::ProducerFenced);
            }
            if self.state == preparing {
                return Err(ErrorCode::ConcurrentTransactions);
            }
            return done(self.state).ok_or(ErrorCode::ProducerFenced);
        }
        match self.state {
            TxnState::Ongoing => {}
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
                if v2 && !commit => {}
            s if s == preparing => return Err(ErrorCode::ConcurrentTransactions),
            s => return done(s).ok_or(ErrorCode::InvalidTxnState),
        }
        let mut next = self.clone();
        if v2 && self.producer_epoch < MAX_EPOCH {
            next.last_producer_epoch = self.producer_epoch;
            next.producer_epoch = self.producer_epoch + 1;
        }
        if self.state != TxnState::Ongoing {
            next.partitions.clear();
            next.start_ms = now;
        }
        next.state = preparing;
        next.last_update_ms = now;
        next.client_txn_version = if v2 { 2 } else { 0 };
        Ok(EndOutcome::Prepare(next))
    }

    /// The abort of a timed-out transaction: the epoch is bumped (fencing the
    /// producer, as in Kafka) unless it is exhausted.
    pub fn abort_timed_out(&self, now: i64) -> Option<TxnMetadata> {
        if !self.timed_out(now) {
            return None;
        }
        let mut next = self.clone();
        if self.producer_epoch < MAX_EPOCH {
            next.last_producer_epoch = self.producer_epoch;
            next.producer_epoch = self.producer_epoch + 1;
        }
        next.state = TxnState::PrepareAbort;
        next.last_update_ms = now;
        Some(next)
    }

    /// The state after every marker of a `Prepare*` state was written.
    pub fn complete(&self, now: i64) -> Option<TxnMetadata> {
        let state = match self.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            _ => return None,
        };
        let mut next = self.clone();
        next.state = state;
        next.partitions.clear();
        next.last_update_ms = now;
        Some(next)
    }
}
