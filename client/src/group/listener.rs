//! Rebalance listeners and the context they receive: the consumer's view of
//! its assignment, positions and commits.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::consumer::fetcher::{FetchCommand, Skipped};
use crate::consumer::IsolationLevel;
use crate::consumer::{ConsumerError, ConsumerRecord, OffsetReset};
use crate::offsets::{list_offsets_at, OffsetSpec};

use super::assignor::TopicPartition;
use super::coordinator::Shared;
use super::error::GroupError;
use super::position::PositionCell;
#[cfg(doc)]
use super::GroupConsumer;
use super::PendingCommit;

/// Called from inside [`GroupConsumer::recv`] (and [`GroupConsumer::close`]) when
/// the assignment changes. Each method may use the [`RebalanceContext`] to commit,
/// seek, pause or look at positions.
///
/// An object-safe async trait: implement it with the [`async_trait`](crate::async_trait)
/// attribute (re-exported by this crate), which boxes each method's future.
///
/// ```
/// use baton_kafka::{async_trait, RebalanceContext, RebalanceListener, TopicPartition};
///
/// struct CommitOnRevoke;
///
/// #[async_trait]
/// impl RebalanceListener for CommitOnRevoke {
///     async fn on_revoked(&mut self, ctx: &mut RebalanceContext, _partitions: &[TopicPartition]) {
///         if let Err(e) = ctx.commit().await {
///             eprintln!("commit before revocation failed: {e}");
///         }
///     }
/// }
/// ```
///
/// # Cancel safety
///
/// A method's future is dropped if the `recv` (or `close`) that runs it is
/// dropped; the consumer then finishes the rebalance step (a revocation's
/// acknowledgement) at its next call, without running the method again.
#[async_trait::async_trait]
pub trait RebalanceListener: Send {
    /// `partitions` were added to the assignment. Their start offsets are resolved
    /// after this returns, unless it [`seek`](RebalanceContext::seek)s them.
    async fn on_assigned(&mut self, ctx: &mut RebalanceContext, partitions: &[TopicPartition]) {
        let _ = (ctx, partitions);
    }

    /// `partitions` are about to go to another member. They are still owned while
    /// this runs, so a commit here lands before the next owner starts; no record of
    /// them is returned after it.
    async fn on_revoked(&mut self, ctx: &mut RebalanceContext, partitions: &[TopicPartition]) {
        let _ = (ctx, partitions);
    }

    /// `partitions` were lost: the member's generation ended (session expiry, the
    /// coordinator forgot it), so another member may own them already and
    /// committing them is no longer possible.
    async fn on_lost(&mut self, ctx: &mut RebalanceContext, partitions: &[TopicPartition]) {
        let _ = (ctx, partitions);
    }
}

/// One assigned partition, application side.
#[derive(Debug, Clone)]
pub(super) struct PartState {
    /// Matches the epoch of the fetch task's output that may be returned.
    pub(super) epoch: u64,
    /// The next offset to return; `None` until resolved.
    pub(super) position: Option<i64>,
    pub(super) paused: bool,
    /// No committed offset under [`OffsetReset::Fail`]: waits for a seek.
    pub(super) failed: bool,
    /// The leader epoch of the record before `position` (the last returned, or
    /// committed with the offset resumed from), -1 if unknown (KIP-320).
    pub(super) last_epoch: i32,
    /// The finished position commits read; also in the shared state's
    /// `positions`.
    pub(super) cell: Arc<PositionCell>,
}

impl PartState {
    /// A newly assigned partition, its start offset not resolved yet.
    pub(super) fn new() -> Self {
        PartState {
            epoch: 0,
            position: None,
            paused: false,
            failed: false,
            last_epoch: -1,
            cell: Arc::new(PositionCell::new()),
        }
    }
}

/// A group member's identity in its generation, as the transactional producer
/// sends it with a transaction's offsets (TxnOffsetCommit); see
/// [`GroupConsumer::group_metadata`](crate::GroupConsumer::group_metadata).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumerGroupMetadata {
    /// The group id.
    pub group_id: String,
    /// The generation (the member epoch with the consumer rebalance protocol),
    /// -1 between generations (the coordinator then checks no membership).
    pub generation_id: i32,
    /// The member id, empty before joining.
    pub member_id: String,
    /// The static member's instance id, if it has one.
    pub group_instance_id: Option<String>,
}

impl ConsumerGroupMetadata {
    /// Metadata naming only `group_id` (no generation or member): the coordinator
    /// then accepts the offsets without a membership check, as for a group
    /// without members.
    pub fn new(group_id: impl Into<String>) -> Self {
        ConsumerGroupMetadata {
            group_id: group_id.into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
        }
    }
}

/// The consumer's view of its assignment, positions and commits; what
/// [`RebalanceListener`] methods receive, and what [`GroupConsumer`]'s
/// position and commit methods use.
pub struct RebalanceContext {
    pub(super) shared: Arc<Shared>,
    pub(super) commands: mpsc::UnboundedSender<FetchCommand>,
    pub(super) parts: HashMap<TopicPartition, PartState>,
    /// The last record returned: its next offset and leader epoch, in
    /// `pending_cell`'s partition. Becomes a finished position at the next `recv`
    /// or commit.
    pub(super) pending: Option<(i64, i32)>,
    /// The position cell of the partition of the record returned last; kept
    /// while records of one partition follow each other, so handing one out
    /// touches no reference count.
    pub(super) pending_cell: Option<Arc<PositionCell>>,
    /// Set when partitions are assigned: some may have no start offset yet.
    /// Cleared once a check finds none, so `recv` does not look at every
    /// partition for every record.
    pub(super) maybe_unresolved: bool,
    pub(super) next_epoch: u64,
    pub(super) offset_reset: OffsetReset,
    /// Where [`OffsetReset::Latest`] starts: the high watermark, or at
    /// read_committed the last stable offset.
    pub(super) isolation_level: IsolationLevel,
    /// When resolving start offsets may be tried again after a failure.
    pub(super) resolve_at: Option<Instant>,
    /// Errors waiting to be returned by `recv`.
    pub(super) errors: VecDeque<GroupError>,
}

impl fmt::Debug for RebalanceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RebalanceContext")
            .field("group_id", &self.shared.group_id)
            .field("assigned", &self.parts.len())
            .finish_non_exhaustive()
    }
}

impl RebalanceContext {
    /// The partitions currently assigned to this member, sorted.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        let mut v: Vec<TopicPartition> = self.parts.keys().cloned().collect();
        v.sort();
        v
    }

    /// The next offset [`GroupConsumer::recv`] returns for `partition`; `None` if it
    /// is not assigned or its start offset is not resolved yet.
    pub fn position(&self, partition: &TopicPartition) -> Option<i64> {
        self.parts.get(partition).and_then(|p| p.position)
    }

    /// The highest offset known to be committed for `partition` (by this member,
    /// or found when the partition was assigned).
    pub fn committed(&self, partition: &TopicPartition) -> Option<i64> {
        self.shared.lock().committed.get(partition).copied()
    }

    /// The member id the coordinator gave this member (empty before joining).
    pub fn member_id(&self) -> String {
        self.shared.lock().member_id.clone()
    }

    /// The current generation, -1 between generations. With the consumer
    /// rebalance protocol (KIP-848) this is the member epoch, -1 while joining.
    pub fn generation(&self) -> i32 {
        self.shared.lock().generation
    }

    /// The member's standing in the group, for
    /// [`Producer::send_offsets_to_transaction`](crate::Producer::send_offsets_to_transaction):
    /// the group coordinator accepts the transaction's offsets only from the
    /// current generation's members (KIP-447 fencing of zombie instances).
    pub fn group_metadata(&self) -> ConsumerGroupMetadata {
        let st = self.shared.lock();
        ConsumerGroupMetadata {
            group_id: self.shared.group_id.clone(),
            generation_id: st.generation,
            member_id: st.member_id.clone(),
            group_instance_id: self.shared.instance_id.clone(),
        }
    }

    pub(super) fn fresh_epoch(&mut self) -> u64 {
        let e = self.next_epoch;
        self.next_epoch += 1;
        e
    }

    /// Turns the last returned record into a finished position.
    ///
    /// Cheap (a few stores into the partition's cell, no lock): runs once per
    /// record. A partition revoked or sought since has its pending record
    /// cleared, and a forgotten partition's cell is no longer read by commits.
    #[inline]
    pub(super) fn release_pending(&mut self) {
        if let Some((next, epoch)) = self.pending.take() {
            if let Some(cell) = &self.pending_cell {
                cell.set(next, epoch);
            }
        }
    }

    /// Whether the record returned last belongs to the partition of `cell`.
    fn pending_in(&self, cell: &Arc<PositionCell>) -> bool {
        self.pending.is_some()
            && self
                .pending_cell
                .as_ref()
                .is_some_and(|c| Arc::ptr_eq(c, cell))
    }

    /// (Re)starts fetching `tp` at its position under a new epoch, unless paused or
    /// unresolved.
    pub(super) fn restart_fetch(&mut self, tp: &TopicPartition) {
        let epoch = self.fresh_epoch();
        let Some(st) = self.parts.get_mut(tp) else {
            return;
        };
        st.epoch = epoch;
        match (st.position, st.paused) {
            (Some(offset), false) => {
                let _ = self.commands.send(FetchCommand::Assign {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                    offset,
                    epoch,
                    // Known: the position is validated first (KIP-320).
                    last_epoch: st.last_epoch,
                });
            }
            _ => {
                let _ = self.commands.send(FetchCommand::Remove {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                });
            }
        }
    }

    /// Continues `partition` at `offset`: the next record returned for it is the
    /// one at `offset` (or the first after it). Records already fetched past it are
    /// dropped. Also sets the position a later commit uses, though a commit never
    /// moves a committed offset backwards.
    pub fn seek(&mut self, partition: &TopicPartition, offset: i64) -> Result<(), GroupError> {
        let Some(st) = self.parts.get_mut(partition) else {
            return Err(GroupError::NotAssigned {
                partition: partition.clone(),
            });
        };
        st.position = Some(offset.max(0));
        st.failed = false;
        st.last_epoch = -1;
        st.cell.set_offset(offset.max(0));
        let cell = st.cell.clone();
        if self.pending_in(&cell) {
            self.pending = None;
        }
        self.restart_fetch(partition);
        Ok(())
    }

    /// Stops returning and fetching records of `partitions` until
    /// [`resume`](Self::resume). Their positions, and ownership, are kept;
    /// heartbeats go on. Partitions not assigned are ignored.
    pub fn pause(&mut self, partitions: &[TopicPartition]) {
        for tp in partitions {
            if let Some(st) = self.parts.get_mut(tp) {
                if !st.paused {
                    st.paused = true;
                    self.restart_fetch(tp);
                }
            }
        }
    }

    /// Resumes paused `partitions` from their positions.
    pub fn resume(&mut self, partitions: &[TopicPartition]) {
        for tp in partitions {
            if let Some(st) = self.parts.get_mut(tp) {
                if st.paused {
                    st.paused = false;
                    self.restart_fetch(tp);
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

    /// Commits the position of every assigned partition, including the record
    /// `recv` returned last, and waits for the coordinator's answer. Retries
    /// coordinator moves within the client's request timeout.
    ///
    /// # Cancel safety
    ///
    /// If the future is dropped, the commit may or may not have reached the
    /// coordinator. Either way the never-backwards rule holds: commits are
    /// serialised, and a later commit sends only offsets above those acknowledged.
    pub async fn commit(&mut self) -> Result<(), GroupError> {
        self.release_pending();
        self.shared.commit(None).await
    }

    /// Commits exactly `offsets` (partition → the next offset to consume), skipping
    /// partitions not assigned and offsets not above the committed one.
    ///
    /// # Cancel safety
    ///
    /// As for [`commit`](Self::commit).
    pub async fn commit_offsets(
        &mut self,
        offsets: impl IntoIterator<Item = (TopicPartition, i64)>,
    ) -> Result<(), GroupError> {
        let list: Vec<(TopicPartition, i64)> = offsets.into_iter().collect();
        self.shared.commit(Some(list)).await
    }

    /// Starts committing the positions of every assigned partition (including the
    /// record `recv` returned last) in the background; the returned future reports
    /// the outcome and may be dropped without stopping the commit.
    pub fn commit_async(&mut self) -> PendingCommit {
        self.release_pending();
        let shared = self.shared.clone();
        let (tx, rx) = oneshot::channel();
        tokio::spawn(async move {
            let _ = tx.send(shared.commit(None).await);
        });
        PendingCommit { rx }
    }

    /// Accepts one record the fetch task stamped with `epoch`, or drops it if stale.
    ///
    /// Only the epoch tells what is current, never the offset: within one epoch
    /// the fetch task yields offsets in increasing order, but its position may
    /// move backwards (an OFFSET_OUT_OF_RANGE reset to an earlier offset, a log
    /// truncation), and the records from there on must be returned.
    pub(super) fn accept_record(
        &mut self,
        epoch: u64,
        record: ConsumerRecord,
    ) -> Option<ConsumerRecord> {
        let tp = TopicPartition {
            topic: record.topic.clone(),
            partition: record.partition,
        };
        let st = self.parts.get_mut(&tp)?;
        if st.epoch != epoch || st.paused {
            return None;
        }
        st.position = Some(record.offset + 1);
        st.last_epoch = record.leader_epoch;
        let same = self
            .pending_cell
            .as_ref()
            .is_some_and(|c| Arc::ptr_eq(c, &st.cell));
        if !same {
            self.pending_cell = Some(st.cell.clone());
        }
        self.pending = Some((record.offset + 1, record.leader_epoch));
        Some(record)
    }

    /// Moves the position of a partition past batches that yield no record
    /// (transaction markers), once every record before them was returned, so that
    /// the position, and what a commit stores, is past them (as in Kafka's
    /// consumer). Stale (`epoch`) or paused partitions are left alone.
    pub(super) fn accept_skip(&mut self, epoch: u64, skipped: &Skipped) {
        let tp = TopicPartition {
            topic: skipped.topic.clone(),
            partition: skipped.partition,
        };
        match self.parts.get(&tp) {
            Some(st) if st.epoch == epoch && !st.paused => {}
            _ => return,
        }
        // The record returned before the batches is finished.
        self.release_pending();
        let Some(st) = self.parts.get_mut(&tp) else {
            return;
        };
        let next = st
            .position
            .map_or(skipped.next_offset, |p| p.max(skipped.next_offset));
        st.position = Some(next);
        st.cell.set_offset(next);
    }

    /// Follows the fetch task back to the divergence point after a log truncation
    /// (KIP-320), so that the new leader's records from there are returned.
    pub(super) fn note_truncation(&mut self, e: &ConsumerError) {
        let ConsumerError::LogTruncation {
            topic,
            partition,
            divergence,
            ..
        } = e
        else {
            return;
        };
        let tp = TopicPartition::new(topic.as_str(), *partition);
        let Some(st) = self.parts.get_mut(&tp) else {
            return;
        };
        st.position = Some(*divergence);
        st.last_epoch = -1;
        st.cell.set_offset(*divergence);
        let cell = st.cell.clone();
        if self.pending_in(&cell) {
            self.pending = None;
        }
    }

    /// Whether an error the fetch task stamped with `epoch` is still current.
    pub(super) fn accepts_error(&self, epoch: u64) -> bool {
        self.parts.values().any(|s| s.epoch == epoch && !s.paused)
    }

    pub(super) fn has_unresolved(&self) -> bool {
        self.parts
            .values()
            .any(|s| s.position.is_none() && !s.failed)
    }

    pub(super) fn unresolved(&self) -> Vec<TopicPartition> {
        let mut v: Vec<TopicPartition> = self
            .parts
            .iter()
            .filter(|(_, s)| s.position.is_none() && !s.failed)
            .map(|(tp, _)| tp.clone())
            .collect();
        v.sort();
        v
    }

    /// Finds start offsets for newly assigned partitions: the committed offset,
    /// else the reset policy. State changes only after every lookup succeeded.
    pub(super) async fn resolve(&mut self) -> Result<(), GroupError> {
        let todo = self.unresolved();
        if todo.is_empty() {
            return Ok(());
        }
        let committed = self.shared.fetch_committed(&todo).await?;
        let missing: Vec<&TopicPartition> = todo
            .iter()
            .filter(|tp| !committed.contains_key(*tp))
            .collect();
        let mut starts: HashMap<TopicPartition, i64> = committed.clone();
        if !missing.is_empty() {
            let spec = match self.offset_reset {
                OffsetReset::Earliest => Some(OffsetSpec::Earliest),
                OffsetReset::Latest => Some(OffsetSpec::Latest),
                OffsetReset::Fail => None,
            };
            // Under `Fail`, partitions without a commit stay unresolved (below).
            if let Some(spec) = spec {
                let q: Vec<(String, i32, OffsetSpec)> = missing
                    .iter()
                    .map(|tp| (tp.topic.to_string(), tp.partition, spec))
                    .collect();
                let found = list_offsets_at(&self.shared.client, &q, self.isolation_level).await?;
                for (tp, l) in missing.iter().zip(found) {
                    starts.insert((*tp).clone(), l.offset.max(0));
                }
            }
        }
        for tp in &todo {
            let Some(st) = self.parts.get_mut(tp) else {
                continue;
            };
            if st.position.is_some() {
                continue; // sought meanwhile
            }
            match starts.get(tp) {
                Some(&offset) => {
                    tracing::debug!(partition = %tp, offset, committed = committed.contains_key(tp), "start position");
                    st.position = Some(offset);
                    // The leader epoch committed with the offset, if any: the
                    // fetch task validates the position with it (KIP-320).
                    st.last_epoch = match self.shared.lock().leader_epochs.get(tp) {
                        Some(&(o, e)) if committed.get(tp) == Some(&offset) && o == offset => e,
                        _ => -1,
                    };
                    st.cell.set(offset, st.last_epoch);
                    self.restart_fetch(tp);
                }
                None => {
                    st.failed = true;
                    self.errors.push_back(GroupError::NoCommittedOffset {
                        partition: tp.clone(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Forgets `partitions` (revoked or lost): stops fetching them and drops their
    /// positions and ownership.
    pub(super) fn forget(&mut self, partitions: &[TopicPartition]) {
        for tp in partitions {
            if let Some(st) = self.parts.remove(tp) {
                let _ = self.commands.send(FetchCommand::Remove {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                });
                if self.pending_in(&st.cell) {
                    self.pending = None;
                    self.pending_cell = None;
                }
            }
        }
        let mut st = self.shared.lock();
        for tp in partitions {
            st.owned.remove(tp);
            st.positions.remove(tp);
            st.committed.remove(tp);
            st.leader_epochs.remove(tp);
        }
    }
}
