//! Consumer groups: [`GroupConsumer`] joins a group through the group coordinator,
//! gets a share of the subscribed topics' partitions, and commits its progress so
//! that whoever consumes a partition next resumes where it stopped.
//!
//! ```no_run
//! # async fn demo(client: &baton::Client) -> Result<(), baton::GroupError> {
//! use baton::GroupConsumer;
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
//!   (the committed offset, or the [`OffsetReset`] policy), take the fetch task's
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

pub mod assignor;
mod coordinator;
mod member;

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use baton_protocol::{DecodeError, EncodeError, ErrorCode};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit};
use tokio::task::AbortHandle;
use tokio::time::Instant;

pub use assignor::{
    Assignor, CooperativeStickyAssignor, GroupAssignment, MemberSubscription, RangeAssignor,
    RebalanceProtocol, RoundRobinAssignor, TopicPartition,
};

use crate::client::{Client, ClientError};
use crate::consumer::fetcher::{self, FetchCommand, StampedChunk};
use crate::consumer::{ConsumerConfig, ConsumerError, ConsumerRecord, OffsetReset};
use crate::offsets::{list_offsets, OffsetSpec};
use coordinator::Shared;
use member::{Event, MemberConfig};

/// Errors of the group consumer.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum GroupError {
    /// Fetching one partition failed (see [`ConsumerError`]); the other partitions
    /// keep flowing.
    #[error(transparent)]
    Consumer(#[from] ConsumerError),
    /// A request failed at the cluster layer.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The coordinator answered an error that this member cannot ride out.
    #[error("{request} failed: {code}")]
    Coordinator {
        /// The error code.
        code: ErrorCode,
        /// The request that failed.
        request: &'static str,
    },
    /// Another member joined with this consumer's `group_instance_id`; this one is
    /// fenced off for good.
    #[error("fenced: another member uses group instance id {group_instance_id:?}")]
    FencedInstanceId {
        /// The contested instance id.
        group_instance_id: String,
    },
    /// The commit was refused because the group is rebalancing; the partitions are
    /// still owned, and a commit after the rebalance (the next `recv`) can succeed.
    #[error("the group is rebalancing; commit again after the rebalance")]
    RebalanceInProgress,
    /// The commit was refused because this member's generation is over
    /// (ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID): its partitions may belong to
    /// another member now.
    #[error("commit refused ({code}): the partitions may have moved to another member")]
    CommitFailed {
        /// The error code.
        code: ErrorCode,
    },
    /// The partition has no committed offset and the reset policy is
    /// [`OffsetReset::Fail`]; it is not fetched until [`GroupConsumer::seek`]
    /// positions it.
    #[error("no committed offset for {partition} and the reset policy is Fail")]
    NoCommittedOffset {
        /// The partition.
        partition: TopicPartition,
    },
    /// The partition is not assigned to this member.
    #[error("{partition} is not assigned to this member")]
    NotAssigned {
        /// The partition.
        partition: TopicPartition,
    },
    /// The builder's settings are inconsistent.
    #[error("invalid group consumer configuration: {0}")]
    InvalidConfig(&'static str),
    /// A subscription or assignment could not be encoded.
    #[error("could not encode group metadata: {0}")]
    Encode(#[from] EncodeError),
    /// The group leader sent an assignment this member cannot read.
    #[error("undecodable assignment from the group leader: {0}")]
    Decode(#[from] DecodeError),
    /// The consumer has stopped.
    #[error("the group consumer is closed")]
    Closed,
}

impl GroupError {
    /// Whether retrying the same operation later may succeed.
    pub fn is_retriable(&self) -> bool {
        match self {
            GroupError::Client(e) => e.is_retriable(),
            GroupError::Coordinator { code, .. } => code.is_retriable(),
            GroupError::RebalanceInProgress => true,
            _ => false,
        }
    }
}

/// The future a [`RebalanceListener`] method returns.
pub type ListenerFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Called from inside [`GroupConsumer::recv`] (and [`GroupConsumer::close`]) when
/// the assignment changes. Each method may use the [`RebalanceContext`] to commit,
/// seek, pause or look at positions.
///
/// ```
/// use baton::{ListenerFuture, RebalanceContext, RebalanceListener, TopicPartition};
///
/// struct CommitOnRevoke;
///
/// impl RebalanceListener for CommitOnRevoke {
///     fn on_revoked<'a>(
///         &'a mut self,
///         ctx: &'a mut RebalanceContext,
///         _partitions: &'a [TopicPartition],
///     ) -> ListenerFuture<'a> {
///         Box::pin(async move {
///             if let Err(e) = ctx.commit().await {
///                 eprintln!("commit before revocation failed: {e}");
///             }
///         })
///     }
/// }
/// ```
pub trait RebalanceListener: Send {
    /// `partitions` were added to the assignment. Their start offsets are resolved
    /// after this returns, unless it [`seek`](RebalanceContext::seek)s them.
    fn on_assigned<'a>(
        &'a mut self,
        ctx: &'a mut RebalanceContext,
        partitions: &'a [TopicPartition],
    ) -> ListenerFuture<'a> {
        let _ = (ctx, partitions);
        Box::pin(std::future::ready(()))
    }

    /// `partitions` are about to go to another member. They are still owned while
    /// this runs, so a commit here lands before the next owner starts; no record of
    /// them is returned after it.
    fn on_revoked<'a>(
        &'a mut self,
        ctx: &'a mut RebalanceContext,
        partitions: &'a [TopicPartition],
    ) -> ListenerFuture<'a> {
        let _ = (ctx, partitions);
        Box::pin(std::future::ready(()))
    }

    /// `partitions` were lost: the member's generation ended (session expiry, the
    /// coordinator forgot it), so another member may own them already and
    /// committing them is no longer possible.
    fn on_lost<'a>(
        &'a mut self,
        ctx: &'a mut RebalanceContext,
        partitions: &'a [TopicPartition],
    ) -> ListenerFuture<'a> {
        let _ = (ctx, partitions);
        Box::pin(std::future::ready(()))
    }
}

/// Group consumer settings beyond the membership.
#[derive(Debug, Clone)]
struct GroupConfig {
    auto_commit: Option<Duration>,
    offset_reset: OffsetReset,
    leave_on_close: Option<bool>,
    fetch: ConsumerConfig,
    session_timeout: Duration,
    rebalance_timeout: Duration,
    heartbeat_interval: Duration,
}

/// Builds a [`GroupConsumer`]; see [`GroupConsumer::builder`].
pub struct GroupConsumerBuilder {
    client: Client,
    group_id: String,
    instance_id: Option<String>,
    topics: Vec<String>,
    assignors: Vec<Arc<dyn Assignor>>,
    listener: Option<Box<dyn RebalanceListener>>,
    cfg: GroupConfig,
}

impl fmt::Debug for GroupConsumerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupConsumerBuilder")
            .field("group_id", &self.group_id)
            .field("instance_id", &self.instance_id)
            .field("topics", &self.topics)
            .field("assignors", &self.assignors)
            .field("listener", &self.listener.is_some())
            .field("cfg", &self.cfg)
            .finish()
    }
}

impl GroupConsumerBuilder {
    /// Subscribes to `topics` (added to any subscribed before).
    pub fn subscribe(mut self, topics: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.topics.extend(topics.into_iter().map(Into::into));
        self
    }

    /// Adds an assignor, in order of preference. Without any, the group uses
    /// [`CooperativeStickyAssignor`]. The member rebalances cooperatively only if
    /// every assignor given supports it (as Kafka's consumer decides).
    pub fn assignor(mut self, assignor: impl Assignor + 'static) -> Self {
        self.assignors.push(Arc::new(assignor));
        self
    }

    /// Makes this a static member (KIP-345) with this `group.instance.id`: a
    /// restart within the session timeout gets the same partitions back without a
    /// rebalance. Two live consumers with the same id fence each other.
    pub fn group_instance_id(mut self, id: impl Into<String>) -> Self {
        self.instance_id = Some(id.into());
        self
    }

    /// How long the coordinator waits without a heartbeat before removing the
    /// member (default 45 s, Kafka's `session.timeout.ms`).
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.cfg.session_timeout = timeout;
        self
    }

    /// How long a rebalance waits for members to rejoin, which bounds how long a
    /// revocation may wait for [`GroupConsumer::recv`] (default 5 minutes, Kafka's
    /// `max.poll.interval.ms`).
    pub fn rebalance_timeout(mut self, timeout: Duration) -> Self {
        self.cfg.rebalance_timeout = timeout;
        self
    }

    /// How often the member heartbeats (default 3 s); must be below the session
    /// timeout.
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.cfg.heartbeat_interval = interval;
        self
    }

    /// Commits finished positions every `interval` in the background (the
    /// default, every 5 s).
    pub fn auto_commit_interval(mut self, interval: Duration) -> Self {
        self.cfg.auto_commit = Some(interval);
        self
    }

    /// Turns automatic commits off: only [`GroupConsumer::commit`] and friends
    /// commit, and neither revocation nor `close` commits on its own.
    pub fn manual_commit(mut self) -> Self {
        self.cfg.auto_commit = None;
        self
    }

    /// Where a partition without a committed offset starts, and what happens on
    /// OFFSET_OUT_OF_RANGE (default [`OffsetReset::Earliest`]).
    pub fn offset_reset(mut self, reset: OffsetReset) -> Self {
        self.cfg.offset_reset = reset;
        self.cfg.fetch.offset_reset = reset;
        self
    }

    /// Whether [`GroupConsumer::close`] sends LeaveGroup. Default: yes for dynamic
    /// members; no for static ones, which Kafka expects to come back (their
    /// partitions wait for them until the session timeout).
    pub fn leave_group_on_close(mut self, leave: bool) -> Self {
        self.cfg.leave_on_close = Some(leave);
        self
    }

    /// Called on assignment changes; see [`RebalanceListener`].
    pub fn listener(mut self, listener: impl RebalanceListener + 'static) -> Self {
        self.listener = Some(Box::new(listener));
        self
    }

    /// How long the broker may hold a Fetch while it has less than `min_bytes`
    /// (default 500 ms).
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.cfg.fetch.max_wait = max_wait;
        self
    }

    /// Bytes the broker should gather before answering a Fetch (default 1).
    pub fn min_bytes(mut self, bytes: i32) -> Self {
        self.cfg.fetch.min_bytes = bytes.max(0);
        self
    }

    /// Upper bound of one Fetch response (default 50 MiB).
    pub fn max_bytes(mut self, bytes: i32) -> Self {
        self.cfg.fetch.max_bytes = bytes.max(1);
        self
    }

    /// Upper bound of one partition's data in a Fetch response (default 1 MiB).
    pub fn partition_max_bytes(mut self, bytes: i32) -> Self {
        self.cfg.fetch.partition_max_bytes = bytes.max(1);
        self
    }

    /// How many records may wait between the fetch task and
    /// [`GroupConsumer::recv`] (default 1024), besides the at most a quarter of it
    /// that `recv` takes out in one step. When full, fetching pauses.
    pub fn channel_capacity(mut self, records: usize) -> Self {
        self.cfg.fetch.channel_capacity = records.max(1);
        self
    }

    /// How many bytes of record data may wait between the fetch task and
    /// [`GroupConsumer::recv`] (default 50 MiB); charged as for
    /// [`ConsumerBuilder::max_buffered_bytes`](crate::ConsumerBuilder::max_buffered_bytes).
    /// Records dropped as stale release their share like returned ones.
    pub fn max_buffered_bytes(mut self, bytes: usize) -> Self {
        self.cfg.fetch.max_buffered_bytes = bytes.max(1);
        self
    }

    /// The most bytes one record batch may decompress to (default 50 MiB). A batch
    /// beyond it yields [`GroupError::Consumer`] with
    /// [`ConsumerError::BatchTooLarge`], and its partition is no longer fetched
    /// until it is reassigned or sought.
    pub fn max_decompressed_bytes(mut self, bytes: usize) -> Self {
        self.cfg.fetch.max_decompressed_bytes = bytes.max(1);
        self
    }

    /// Checks the settings and starts the membership, fetch and auto-commit tasks.
    /// Joining happens in the background; the first records arrive through
    /// [`GroupConsumer::recv`] once the group has assigned partitions.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: nothing has started until this returns.
    pub async fn build(self) -> Result<GroupConsumer, GroupError> {
        let cfg = self.cfg;
        if self.group_id.is_empty() {
            return Err(GroupError::InvalidConfig("the group id is empty"));
        }
        if self.topics.is_empty() {
            return Err(GroupError::InvalidConfig("no topic subscribed"));
        }
        if cfg.heartbeat_interval >= cfg.session_timeout || cfg.heartbeat_interval.is_zero() {
            return Err(GroupError::InvalidConfig(
                "the heartbeat interval must be positive and below the session timeout",
            ));
        }
        if cfg.auto_commit.is_some_and(|d| d.is_zero()) {
            return Err(GroupError::InvalidConfig(
                "the auto-commit interval is zero",
            ));
        }
        let mut assignors = self.assignors;
        if assignors.is_empty() {
            assignors.push(Arc::new(CooperativeStickyAssignor));
        }
        let protocol = if assignors
            .iter()
            .all(|a| a.protocol() == RebalanceProtocol::Cooperative)
        {
            RebalanceProtocol::Cooperative
        } else {
            RebalanceProtocol::Eager
        };
        let leave_on_close = cfg.leave_on_close.unwrap_or(self.instance_id.is_none());
        let shared = Arc::new(Shared::new(
            self.client.clone(),
            self.group_id,
            self.instance_id,
            cfg.fetch.retry_backoff,
        ));
        let member_cfg = Arc::new(MemberConfig {
            topics: self.topics,
            assignors,
            protocol,
            session_timeout: cfg.session_timeout,
            rebalance_timeout: cfg.rebalance_timeout,
            heartbeat_interval: cfg.heartbeat_interval,
        });
        // Records travel in chunks of one partition, stamped with its epoch: at most
        // `channel_capacity` records wait in the channel, plus one chunk in `buf`.
        let (tx, rx) = fetcher::Tx::stamped(&cfg.fetch);
        let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
        let fetch_task = tokio::spawn(fetcher::run(
            self.client,
            cfg.fetch.clone(),
            Vec::new(),
            Some(cmd_rx),
            tx,
        ))
        .abort_handle();
        let (ev_tx, ev_rx) = mpsc::unbounded_channel();
        let member_task =
            tokio::spawn(member::run(shared.clone(), member_cfg.clone(), ev_tx)).abort_handle();
        let commit_task = cfg.auto_commit.map(|interval| {
            let shared = shared.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(interval);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                tick.tick().await;
                loop {
                    tick.tick().await;
                    if let Err(e) = shared.commit(None).await {
                        tracing::debug!(group = %shared.group_id, error = %e, "auto-commit failed");
                    }
                }
            })
            .abort_handle()
        });
        Ok(GroupConsumer {
            ctx: RebalanceContext {
                shared,
                commands: cmd_tx,
                parts: HashMap::new(),
                pending: None,
                next_epoch: 1,
                offset_reset: cfg.offset_reset,
                resolve_at: None,
                errors: VecDeque::new(),
            },
            listener: self.listener,
            rx,
            buf: VecDeque::new(),
            buf_charge: None,
            buf_epoch: 0,
            events: ev_rx,
            interrupted: None,
            fatal: None,
            auto_commit: cfg.auto_commit.is_some(),
            leave_on_close,
            protocol,
            fetch_task,
            member_task,
            commit_task,
        })
    }
}

/// One assigned partition, application side.
#[derive(Debug, Clone, Copy)]
struct PartState {
    /// Matches the epoch of the fetch task's output that may be returned.
    epoch: u64,
    /// The next offset to return; `None` until resolved.
    position: Option<i64>,
    paused: bool,
    /// No committed offset under [`OffsetReset::Fail`]: waits for a seek.
    failed: bool,
}

/// The consumer's view of its assignment, positions and commits; what
/// [`RebalanceListener`] methods receive, and what [`GroupConsumer`]'s
/// position and commit methods use.
pub struct RebalanceContext {
    shared: Arc<Shared>,
    commands: mpsc::UnboundedSender<FetchCommand>,
    parts: HashMap<TopicPartition, PartState>,
    /// The last record returned: its partition and next offset. Becomes a
    /// finished position at the next `recv` or commit.
    pending: Option<(TopicPartition, i64)>,
    next_epoch: u64,
    offset_reset: OffsetReset,
    /// When resolving start offsets may be tried again after a failure.
    resolve_at: Option<Instant>,
    /// Errors waiting to be returned by `recv`.
    errors: VecDeque<GroupError>,
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

    /// The current generation, -1 between generations.
    pub fn generation(&self) -> i32 {
        self.shared.lock().generation
    }

    fn fresh_epoch(&mut self) -> u64 {
        let e = self.next_epoch;
        self.next_epoch += 1;
        e
    }

    /// Turns the last returned record into a finished position.
    fn release_pending(&mut self) {
        if let Some((tp, next)) = self.pending.take() {
            if self.parts.contains_key(&tp) {
                self.shared.lock().positions.insert(tp, next);
            }
        }
    }

    /// (Re)starts fetching `tp` at its position under a new epoch, unless paused or
    /// unresolved.
    fn restart_fetch(&mut self, tp: &TopicPartition) {
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
        if self.pending.as_ref().is_some_and(|(tp, _)| tp == partition) {
            self.pending = None;
        }
        self.shared
            .lock()
            .positions
            .insert(partition.clone(), offset.max(0));
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
    fn accept_record(&mut self, epoch: u64, record: ConsumerRecord) -> Option<ConsumerRecord> {
        let tp = TopicPartition {
            topic: record.topic.clone(),
            partition: record.partition,
        };
        let st = self.parts.get_mut(&tp)?;
        if st.epoch != epoch || st.paused {
            return None;
        }
        if st.position.is_some_and(|p| record.offset < p) {
            return None;
        }
        st.position = Some(record.offset + 1);
        self.pending = Some((tp, record.offset + 1));
        Some(record)
    }

    /// Whether an error the fetch task stamped with `epoch` is still current.
    fn accepts_error(&self, epoch: u64) -> bool {
        self.parts.values().any(|s| s.epoch == epoch && !s.paused)
    }

    fn has_unresolved(&self) -> bool {
        self.parts
            .values()
            .any(|s| s.position.is_none() && !s.failed)
    }

    fn unresolved(&self) -> Vec<TopicPartition> {
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
    async fn resolve(&mut self) -> Result<(), GroupError> {
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
                let found = list_offsets(&self.shared.client, &q).await?;
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
                    self.shared.lock().positions.insert(tp.clone(), offset);
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
    fn forget(&mut self, partitions: &[TopicPartition]) {
        for tp in partitions {
            if self.parts.remove(tp).is_some() {
                let _ = self.commands.send(FetchCommand::Remove {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                });
            }
            if self.pending.as_ref().is_some_and(|(p, _)| p == tp) {
                self.pending = None;
            }
        }
        let mut st = self.shared.lock();
        for tp in partitions {
            st.owned.remove(tp);
            st.positions.remove(tp);
            st.committed.remove(tp);
        }
    }
}

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
    leave_on_close: bool,
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
        GroupConsumerBuilder {
            client: client.clone(),
            group_id: group_id.into(),
            instance_id: None,
            topics: Vec::new(),
            assignors: Vec::new(),
            listener: None,
            cfg: GroupConfig {
                auto_commit: Some(Duration::from_secs(5)),
                offset_reset: OffsetReset::Earliest,
                leave_on_close: None,
                fetch: ConsumerConfig::default(),
                session_timeout: Duration::from_secs(45),
                rebalance_timeout: Duration::from_secs(300),
                heartbeat_interval: Duration::from_secs(3),
            },
        }
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
            let unresolved = self.ctx.has_unresolved();
            let due = self.ctx.resolve_at.map_or(true, |t| t <= Instant::now());
            if unresolved && due {
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
                        self.buf = VecDeque::from(chunk.records);
                        self.buf_charge = Some(chunk.charge);
                        self.buf_epoch = epoch;
                    }
                    Some(StampedChunk { epoch, item: Err(e) }) => {
                        if self.ctx.accepts_error(epoch) {
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
                for tp in &partitions {
                    self.ctx.parts.insert(
                        tp.clone(),
                        PartState {
                            epoch: 0,
                            position: None,
                            paused: false,
                            failed: false,
                        },
                    );
                }
                tracing::debug!(count = partitions.len(), "partitions assigned");
                if let Some(l) = self.listener.as_mut() {
                    l.on_assigned(&mut self.ctx, &partitions).await;
                }
            }
            Event::Revoked { partitions, ack } => {
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
    /// assignment, and sends LeaveGroup (see
    /// [`GroupConsumerBuilder::leave_group_on_close`]). Returns the first error met;
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
        if self.leave_on_close {
            if let Err(e) = member::leave(&self.ctx.shared).await {
                tracing::debug!(error = %e, "LeaveGroup failed");
                if result.is_ok() {
                    result = Err(e);
                }
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
