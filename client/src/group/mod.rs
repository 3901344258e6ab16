//! Consumer groups: [`GroupConsumer`] joins a group through the group coordinator,
//! gets a share of the subscribed topics' partitions, and commits its progress so
//! that whoever consumes a partition next resumes where it stopped.
//!
//! ```no_run
//! # async fn demo(client: &baton_kafka::Client) -> Result<(), baton_kafka::GroupError> {
//! use baton_kafka::GroupConsumer;
//!
//! let mut consumer = GroupConsumer::builder(client, "billing")
//!     .subscribe(["invoices"])
//!     .build()
//!     .await?;
//! for _ in 0..100 {
//!     let record = consumer.recv().await?;
//!     println!("{}/{}@{}", record.topic, record.partition, record.offset);
//! }
//! consumer.close().await?; // commits, then leaves the group
//! # Ok(()) }
//! ```
//!
//! # How it works
//!
//! Three tasks cooperate:
//! - the membership task (JoinGroup, SyncGroup, Heartbeat; leads the assignment
//!   when the coordinator picks this member) decides what the member owns;
//! - the fetch task (the same one [`Consumer`](crate::Consumer) uses) fetches the
//!   partitions it is told to, stamping each partition's records with an epoch;
//! - the application's calls to [`GroupConsumer::recv`] apply rebalance events
//!   (running the [`RebalanceListener`]), resolve start offsets of new partitions
//!   (the committed offset, or the [`OffsetReset`](crate::consumer::OffsetReset) policy), take the fetch task's
//!   output out of its channel many records at a time, and drop records whose
//!   epoch is stale (revoked, paused or sought partitions) as they return them.
//!
//! Revocations wait for `recv` (or [`close`](GroupConsumer::close)): a member that
//! stops calling `recv` for longer than the rebalance timeout is removed from the
//! group by the coordinator, as with Kafka's `max.poll.interval.ms`.
//!
//! # Positions and commits
//!
//! A record counts as *consumed* once `recv` returns it, and as *finished* at the
//! next `recv` call. Automatic commits (every `auto_commit_interval`, before a
//! revocation, and in `close`) commit finished positions, so with automatic commits
//! a crash re-delivers at most the records received since the last commit — never
//! skips one. [`commit`](GroupConsumer::commit) commits consumed positions,
//! including the record just returned. A committed offset never goes backwards:
//! offsets at or below the last acknowledged commit are not sent.
//!
//! # Failover
//!
//! NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and broken connections send the
//! member back to FindCoordinator; UNKNOWN_MEMBER_ID and ILLEGAL_GENERATION mean the
//! partitions were lost (they are dropped without committing, and the member
//! rejoins); REBALANCE_IN_PROGRESS rejoins; FENCED_INSTANCE_ID (another process
//! uses this static member's `group_instance_id`) ends the membership with
//! [`GroupError::FencedInstanceId`].
//!
//! # The consumer rebalance protocol (KIP-848)
//!
//! With [`GroupConsumerBuilder::group_protocol`]`(`[`GroupProtocol::Consumer`]`)`
//! the membership task speaks ConsumerGroupHeartbeat instead (Apache Kafka 4.0+):
//! the coordinator assigns (its `uniform` or `range` assignor, see
//! [`GroupConsumerBuilder::server_assignor`]), and the member reconciles each new
//! assignment incrementally: revoked partitions first (committed with automatic
//! commits, `on_revoked`), then the new ones (`on_assigned`), then it acknowledges.
//! Commits carry the member epoch as their generation. FENCED_MEMBER_EPOCH and
//! UNKNOWN_MEMBER_ID lose the partitions (`on_lost`) and rejoin at epoch 0;
//! coordinator moves and broken connections keep the membership (the member
//! heartbeats the new coordinator with its epoch). The listener callbacks and the
//! commit guarantees are those of the classic protocol.

pub mod assignor;
mod builder;
mod consumer_member;
mod coordinator;
mod error;
mod listener;
mod member;
mod position;

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit};
use tokio::task::AbortHandle;
use tokio::time::Instant;

pub use assignor::{
    Assignor, CooperativeStickyAssignor, GroupAssignment, MemberSubscription, RangeAssignor,
    RebalanceProtocol, RoundRobinAssignor, TopicPartition,
};
pub use builder::{GroupConsumerBuilder, GroupProtocol};
pub use error::GroupError;
pub use listener::{ConsumerGroupMetadata, RebalanceContext, RebalanceListener};

use crate::client::Client;
use crate::consumer::fetcher::StampedChunk;
use crate::consumer::ConsumerRecord;
use listener::PartState;
use member::Event;

/// The outcome of [`GroupConsumer::commit_async`]. Dropping it does not stop the
/// commit.
#[derive(Debug)]
pub struct PendingCommit {
    rx: oneshot::Receiver<Result<(), GroupError>>,
}

impl Future for PendingCommit {
    type Output = Result<(), GroupError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.rx)
            .poll(cx)
            .map(|r| r.unwrap_or(Err(GroupError::Closed)))
    }
}

/// What [`GroupConsumer::close`] tells the coordinator.
#[derive(Debug, Clone, Copy)]
enum Leave {
    /// Classic protocol: LeaveGroup if `true`.
    Classic(bool),
    /// Consumer protocol: nothing.
    None,
    /// Consumer protocol: a heartbeat with epoch -1.
    ForGood,
    /// Consumer protocol, static member: a heartbeat with epoch -2 (it will come
    /// back; its partitions wait for it until the session times out).
    Temporarily,
}

/// A revocation whose handling was interrupted (the `recv` future was dropped
/// while the listener or a commit ran); finished at the next call.
#[derive(Debug)]
struct Interrupted {
    partitions: Vec<TopicPartition>,
    ack: oneshot::Sender<()>,
}

/// A member of a consumer group: receives records of the partitions the group
/// assigns it, commits its progress, and takes part in rebalances.
///
/// Dropping it without [`close`](Self::close) stops its tasks without leaving the
/// group; the coordinator then notices after the session timeout.
pub struct GroupConsumer {
    ctx: RebalanceContext,
    listener: Option<Box<dyn RebalanceListener>>,
    rx: mpsc::Receiver<StampedChunk>,
    /// The records of the chunk taken out of `rx` last, not yet returned or
    /// dropped; each is checked against its partition's epoch only when it leaves,
    /// exactly as if it were still in the channel.
    buf: VecDeque<ConsumerRecord>,
    /// The byte budget `buf`'s chunk holds; released when its last record is
    /// returned or dropped.
    buf_charge: Option<OwnedSemaphorePermit>,
    /// The epoch `buf`'s records were stamped with.
    buf_epoch: u64,
    events: mpsc::UnboundedReceiver<Event>,
    interrupted: Option<Interrupted>,
    fatal: Option<GroupError>,
    auto_commit: bool,
    leave: Leave,
    protocol: RebalanceProtocol,
    fetch_task: AbortHandle,
    member_task: AbortHandle,
    commit_task: Option<AbortHandle>,
}

impl fmt::Debug for GroupConsumer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupConsumer")
            .field("group_id", &self.ctx.shared.group_id)
            .field("assigned", &self.ctx.parts.len())
            .field("protocol", &self.protocol)
            .field("buffered", &self.buf.len())
            .field("chunks", &self.rx.len())
            .finish_non_exhaustive()
    }
}

impl Drop for GroupConsumer {
    fn drop(&mut self) {
        self.fetch_task.abort();
        self.member_task.abort();
        if let Some(t) = &self.commit_task {
            t.abort();
        }
    }
}

impl GroupConsumer {
    /// Starts building a member of group `group_id` on `client`.
    pub fn builder(client: &Client, group_id: impl Into<String>) -> GroupConsumerBuilder {
        GroupConsumerBuilder::new(client, group_id.into())
    }

    /// The rebalance protocol this member uses.
    pub fn rebalance_protocol(&self) -> RebalanceProtocol {
        self.protocol
    }

    /// The next record of an assigned partition, or an error about one partition
    /// (the others keep flowing) or about the membership.
    ///
    /// Rebalance events are applied here: the [`RebalanceListener`] runs inside
    /// this call, revoked partitions are committed first (with automatic commits)
    /// and no record of a partition is returned after its revocation.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: records wait in a bounded channel, and those taken out of it in
    /// one step move into the consumer itself (with their share of the byte budget,
    /// released when the last of them is returned or dropped) before any await;
    /// each record leaves only when returned (or dropped as stale). If the future
    /// is dropped while a revocation is being handled, the revocation is completed
    /// (without the rest of the listener) at the next call on the consumer.
    pub async fn recv(&mut self) -> Result<ConsumerRecord, GroupError> {
        loop {
            self.resume_interrupted();
            self.ctx.release_pending();
            if let Some(e) = &self.fatal {
                return Err(e.clone());
            }
            if let Some(e) = self.ctx.errors.pop_front() {
                return Err(e);
            }
            match self.events.try_recv() {
                Ok(ev) => {
                    self.handle(ev).await?;
                    continue;
                }
                Err(mpsc::error::TryRecvError::Empty) => {}
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    let e = self.ctx.shared.lock().fatal.clone();
                    let e = e.unwrap_or(GroupError::Closed);
                    self.fatal = Some(e.clone());
                    return Err(e);
                }
            }
            let unresolved = self.ctx.maybe_unresolved && self.ctx.has_unresolved();
            if !unresolved {
                // Only an assignment adds partitions without a start offset.
                self.ctx.maybe_unresolved = false;
            }
            let due = unresolved && self.ctx.resolve_at.is_none_or(|t| t <= Instant::now());
            if due {
                match self.ctx.resolve().await {
                    Ok(()) => self.ctx.resolve_at = None,
                    Err(e) if e.is_retriable() => {
                        tracing::debug!(error = %e, "resolving start offsets failed; will retry");
                        self.ctx.resolve_at = Some(Instant::now() + self.ctx.shared.retry.delay(1));
                    }
                    Err(e) => {
                        self.ctx.resolve_at = Some(Instant::now() + self.ctx.shared.retry.delay(1));
                        return Err(e);
                    }
                }
                continue;
            }
            while let Some(record) = self.buf.pop_front() {
                if self.buf.is_empty() {
                    self.buf_charge = None;
                }
                if let Some(record) = self.ctx.accept_record(self.buf_epoch, record) {
                    self.ctx.shared.meter.consumed();
                    return Ok(record);
                }
            }
            let retry_at = self.ctx.resolve_at.filter(|_| unresolved);
            tokio::select! {
                biased;
                ev = self.events.recv() => {
                    if let Some(ev) = ev {
                        self.handle(ev).await?;
                    }
                }
                chunk = self.rx.recv() => match chunk {
                    Some(StampedChunk { epoch, item: Ok(chunk) }) => {
                        if let Some(s) = &chunk.skipped {
                            self.ctx.accept_skip(epoch, s);
                        }
                        self.buf = VecDeque::from(chunk.records);
                        self.buf_charge = Some(chunk.charge);
                        self.buf_epoch = epoch;
                    }
                    Some(StampedChunk { epoch, item: Err(e) }) => {
                        if self.ctx.accepts_error(epoch) {
                            self.ctx.note_truncation(&e);
                            return Err(e.into());
                        }
                    }
                    None => return Err(GroupError::Closed),
                },
                _ = sleep_until_opt(retry_at) => {}
            }
        }
    }

    /// Completes a revocation whose handling was cut short by a dropped `recv`
    /// future (without the rest of its listener call).
    fn resume_interrupted(&mut self) {
        if self.interrupted.is_some() {
            tracing::debug!("completing a revocation interrupted by a cancelled recv");
            self.finish_interrupted();
        }
    }

    fn finish_interrupted(&mut self) {
        if let Some(Interrupted { partitions, ack }) = self.interrupted.take() {
            self.ctx.forget(&partitions);
            let _ = ack.send(());
        }
    }

    async fn handle(&mut self, ev: Event) -> Result<(), GroupError> {
        match ev {
            Event::Assigned(partitions) => {
                {
                    let mut shared = self.ctx.shared.lock();
                    for tp in &partitions {
                        let mut st = PartState::new();
                        if let Some(old) = self.ctx.parts.get(tp) {
                            // Assigned again while owned: the finished position
                            // stays what commits see.
                            st.cell = old.cell.clone();
                        }
                        shared.positions.insert(tp.clone(), st.cell.clone());
                        self.ctx.parts.insert(tp.clone(), st);
                    }
                }
                self.ctx.maybe_unresolved = true;
                tracing::info!(count = partitions.len(), "partitions assigned");
                if let Some(l) = self.listener.as_mut() {
                    l.on_assigned(&mut self.ctx, &partitions).await;
                }
            }
            Event::Revoked {
                partitions,
                ack,
                lost,
            } if lost.load(Ordering::Acquire) => {
                // The membership ended while this revocation waited for us.
                self.ctx.forget(&partitions);
                if let Some(l) = self.listener.as_mut() {
                    l.on_lost(&mut self.ctx, &partitions).await;
                }
                let _ = ack.send(());
            }
            Event::Revoked {
                partitions,
                ack,
                lost: _,
            } => {
                // Nothing of these is returned from here on.
                for tp in &partitions {
                    if let Some(st) = self.ctx.parts.get_mut(tp) {
                        st.paused = true;
                    }
                }
                self.interrupted = Some(Interrupted {
                    partitions: partitions.clone(),
                    ack,
                });
                if self.auto_commit {
                    if let Err(e) = self.ctx.shared.commit(None).await {
                        tracing::warn!(error = %e, "commit before revocation failed");
                    }
                }
                if let Some(l) = self.listener.as_mut() {
                    l.on_revoked(&mut self.ctx, &partitions).await;
                }
                self.finish_interrupted();
            }
            Event::Lost(partitions) => {
                self.ctx.forget(&partitions);
                if let Some(l) = self.listener.as_mut() {
                    l.on_lost(&mut self.ctx, &partitions).await;
                }
            }
            Event::Fatal(e) => {
                self.fatal = Some(e.clone());
                return Err(e);
            }
        }
        Ok(())
    }

    /// This member's numbers since it was built: records returned, fetch
    /// latencies, each partition's lag at the last fetch response, rebalances and
    /// their durations, commit latencies, and its client's connections. The same
    /// numbers go to the installed metrics recorder (see
    /// [`metrics`](crate::metrics)). Cheap: reads atomics.
    pub fn stats(&self) -> crate::ConsumerStats {
        let shared = &self.ctx.shared;
        shared.meter.stats(shared.client.connection_meter().stats())
    }

    /// The partitions currently assigned to this member, sorted.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.ctx.assignment()
    }

    /// See [`RebalanceContext::position`].
    pub fn position(&self, partition: &TopicPartition) -> Option<i64> {
        self.ctx.position(partition)
    }

    /// See [`RebalanceContext::committed`].
    pub fn committed(&self, partition: &TopicPartition) -> Option<i64> {
        self.ctx.committed(partition)
    }

    /// See [`RebalanceContext::member_id`].
    pub fn member_id(&self) -> String {
        self.ctx.member_id()
    }

    /// See [`RebalanceContext::generation`].
    pub fn generation(&self) -> i32 {
        self.ctx.generation()
    }

    /// See [`RebalanceContext::group_metadata`].
    pub fn group_metadata(&self) -> ConsumerGroupMetadata {
        self.ctx.group_metadata()
    }

    /// See [`RebalanceContext::seek`].
    pub fn seek(&mut self, partition: &TopicPartition, offset: i64) -> Result<(), GroupError> {
        self.ctx.seek(partition, offset)
    }

    /// See [`RebalanceContext::pause`].
    pub fn pause(&mut self, partitions: &[TopicPartition]) {
        self.ctx.pause(partitions)
    }

    /// See [`RebalanceContext::resume`].
    pub fn resume(&mut self, partitions: &[TopicPartition]) {
        self.ctx.resume(partitions)
    }

    /// See [`RebalanceContext::paused`].
    pub fn paused(&self) -> Vec<TopicPartition> {
        self.ctx.paused()
    }

    /// See [`RebalanceContext::commit`].
    ///
    /// # Cancel safety
    ///
    /// As for [`RebalanceContext::commit`].
    pub async fn commit(&mut self) -> Result<(), GroupError> {
        self.resume_interrupted();
        self.ctx.commit().await
    }

    /// See [`RebalanceContext::commit_offsets`].
    ///
    /// # Cancel safety
    ///
    /// As for [`RebalanceContext::commit`].
    pub async fn commit_offsets(
        &mut self,
        offsets: impl IntoIterator<Item = (TopicPartition, i64)>,
    ) -> Result<(), GroupError> {
        self.resume_interrupted();
        self.ctx.commit_offsets(offsets).await
    }

    /// See [`RebalanceContext::commit_async`].
    pub fn commit_async(&mut self) -> PendingCommit {
        self.resume_interrupted();
        self.ctx.commit_async()
    }

    /// Turns the consumer into a [`Stream`](futures_core::Stream) of what
    /// [`recv`](Self::recv) returns; it ends after the consumer stops for good.
    pub fn into_stream(self) -> GroupStream {
        GroupStream {
            state: StreamState::Idle(Box::new(self)),
        }
    }

    /// Leaves the group cleanly: stops fetching, commits finished positions (with
    /// automatic commits), runs the listener's `on_revoked` for the whole
    /// assignment, and leaves the group (see
    /// [`GroupConsumerBuilder::leave_group_on_close`]): LeaveGroup with the classic
    /// protocol, a ConsumerGroupHeartbeat with epoch -1 (a static member: -2) with
    /// the consumer protocol. Returns the first error met;
    /// every step is attempted regardless.
    ///
    /// # Cancel safety
    ///
    /// If the future is dropped, the consumer's tasks stop as on drop; the commit
    /// or LeaveGroup may or may not have happened.
    pub async fn close(mut self) -> Result<(), GroupError> {
        self.resume_interrupted();
        self.ctx.release_pending();
        self.fetch_task.abort();
        if let Some(t) = &self.commit_task {
            t.abort();
        }
        let mut result = Ok(());
        if self.auto_commit {
            let deadline = Instant::now() + self.ctx.shared.client.request_timeout();
            loop {
                match self.ctx.shared.commit(None).await {
                    Err(GroupError::RebalanceInProgress) if Instant::now() < deadline => {
                        // Let the rebalance finish; it may be waiting for this
                        // member to acknowledge a revocation.
                        tokio::select! {
                            ev = self.events.recv() => match ev {
                                Some(Event::Fatal(_)) | None => {}
                                Some(ev) => {
                                    let _ = self.handle(ev).await;
                                }
                            },
                            _ = tokio::time::sleep(self.ctx.shared.retry.delay(1)) => {}
                        }
                    }
                    other => {
                        result = other;
                        break;
                    }
                }
            }
        }
        let all = self.ctx.assignment();
        if !all.is_empty() {
            if let Some(l) = self.listener.as_mut() {
                l.on_revoked(&mut self.ctx, &all).await;
            }
        }
        self.member_task.abort();
        let left = match self.leave {
            Leave::None | Leave::Classic(false) => None,
            Leave::Classic(true) => Some(member::leave(&self.ctx.shared).await),
            Leave::ForGood => Some(consumer_member::leave(&self.ctx.shared, false).await),
            Leave::Temporarily => Some(consumer_member::leave(&self.ctx.shared, true).await),
        };
        if let Some(Err(e)) = left {
            tracing::debug!(error = %e, "leaving the group failed");
            if result.is_ok() {
                result = Err(e);
            }
        }
        self.ctx.forget(&all);
        result
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

type RecvFuture =
    Pin<Box<dyn Future<Output = (Box<GroupConsumer>, Result<ConsumerRecord, GroupError>)> + Send>>;

enum StreamState {
    Idle(Box<GroupConsumer>),
    Busy(RecvFuture),
    Done,
}

/// A [`GroupConsumer`] as a [`Stream`](futures_core::Stream); see
/// [`GroupConsumer::into_stream`]. Dropping it drops the consumer.
pub struct GroupStream {
    state: StreamState,
}

impl fmt::Debug for GroupStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            StreamState::Idle(_) => "idle",
            StreamState::Busy(_) => "receiving",
            StreamState::Done => "done",
        };
        f.debug_struct("GroupStream")
            .field("state", &state)
            .finish()
    }
}

impl futures_core::Stream for GroupStream {
    type Item = Result<ConsumerRecord, GroupError>;

    /// Like [`GroupConsumer::recv`]; the stream ends once the consumer is closed or
    /// its membership ended for good (after yielding that error once).
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            match std::mem::replace(&mut self.state, StreamState::Done) {
                StreamState::Done => return Poll::Ready(None),
                StreamState::Idle(mut consumer) => {
                    self.state = StreamState::Busy(Box::pin(async move {
                        let r = consumer.recv().await;
                        (consumer, r)
                    }));
                }
                StreamState::Busy(mut fut) => match fut.as_mut().poll(cx) {
                    Poll::Pending => {
                        self.state = StreamState::Busy(fut);
                        return Poll::Pending;
                    }
                    Poll::Ready((consumer, r)) => {
                        if matches!(r, Err(GroupError::Closed)) {
                            return Poll::Ready(None);
                        }
                        if consumer.fatal.is_none() {
                            self.state = StreamState::Idle(consumer);
                        }
                        return Poll::Ready(Some(r));
                    }
                },
            }
        }
    }
}
