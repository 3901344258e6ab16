//! The group consumer's settings and builder, which joins the group's tasks up.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::client::Client;
use crate::consumer::fetcher;
use crate::consumer::{ConsumerConfig, IsolationLevel, OffsetReset};
use crate::metrics::ConsumerMeter;

use super::assignor::{Assignor, CooperativeStickyAssignor, RebalanceProtocol};
use super::coordinator::Shared;
use super::error::GroupError;
use super::listener::{RebalanceContext, RebalanceListener};
use super::member::{self, MemberConfig};
use super::GroupConsumer;
use super::{consumer_member, Leave};

/// Which rebalance protocol a [`GroupConsumer`] speaks (Kafka's `group.protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum GroupProtocol {
    /// JoinGroup, SyncGroup and Heartbeat; the group's leader assigns with the
    /// client-side [`Assignor`]s (the default, as in Kafka).
    #[default]
    Classic,
    /// The consumer rebalance protocol of KIP-848 (Apache Kafka 4.0+): one
    /// ConsumerGroupHeartbeat loop, the coordinator assigns (server-side assignor,
    /// see [`GroupConsumerBuilder::server_assignor`]) and members reconcile
    /// incrementally. Client-side assignors are not used.
    Consumer,
}

/// Group consumer settings beyond the membership.
#[derive(Debug, Clone)]
pub(super) struct GroupConfig {
    pub(super) auto_commit: Option<Duration>,
    pub(super) offset_reset: OffsetReset,
    pub(super) leave_on_close: Option<bool>,
    pub(super) fetch: ConsumerConfig,
    pub(super) session_timeout: Duration,
    pub(super) rebalance_timeout: Duration,
    pub(super) heartbeat_interval: Duration,
    pub(super) group_protocol: GroupProtocol,
    pub(super) server_assignor: Option<String>,
    pub(super) topic_regex: Option<String>,
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
    /// A builder with the defaults; see [`GroupConsumer::builder`].
    pub(super) fn new(client: &Client, group_id: String) -> Self {
        GroupConsumerBuilder {
            client: client.clone(),
            group_id,
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
                group_protocol: GroupProtocol::Classic,
                server_assignor: None,
                topic_regex: None,
            },
        }
    }

    /// Subscribes to `topics` (added to any subscribed before).
    pub fn subscribe(mut self, topics: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.topics.extend(topics.into_iter().map(Into::into));
        self
    }

    /// Which rebalance protocol to speak (default [`GroupProtocol::Classic`]).
    /// With [`GroupProtocol::Consumer`] the coordinator assigns the partitions, the
    /// heartbeat interval and session timeout are the coordinator's
    /// (`group.consumer.heartbeat.interval.ms`, `group.consumer.session.timeout.ms`;
    /// the builder's interval is used only until its first answer), and
    /// [`assignor`](Self::assignor) is not allowed.
    pub fn group_protocol(mut self, protocol: GroupProtocol) -> Self {
        self.cfg.group_protocol = protocol;
        self
    }

    /// The coordinator's assignor to use with [`GroupProtocol::Consumer`], e.g.
    /// `"uniform"` or `"range"` (Kafka's `group.remote.assignor`); without it the
    /// coordinator picks its default (`uniform` in Apache Kafka).
    pub fn server_assignor(mut self, name: impl Into<String>) -> Self {
        self.cfg.server_assignor = Some(name.into());
        self
    }

    /// Subscribes, with [`GroupProtocol::Consumer`], to every topic whose name
    /// matches `regex` (RE2/J syntax, evaluated by the coordinator, KIP-848), in
    /// addition to the topics named with [`subscribe`](Self::subscribe). Needs a
    /// coordinator with ConsumerGroupHeartbeat version 1 (Apache Kafka 4.0+).
    pub fn subscribe_regex(mut self, regex: impl Into<String>) -> Self {
        self.cfg.topic_regex = Some(regex.into());
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

    /// The member's rack (KIP-392 `client.rack`; default none): sent with every
    /// Fetch, so that a broker with a rack-aware replica selector may serve the
    /// member from a replica in its rack (as [`ConsumerBuilder::client_rack`](crate::ConsumerBuilder::client_rack)),
    /// and to the coordinator with the membership (ConsumerGroupHeartbeat's
    /// `RackId`, the classic subscription's `rack_id`) for rack-aware assignors.
    pub fn client_rack(mut self, rack: impl Into<String>) -> Self {
        self.cfg.fetch.client_rack = rack.into();
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

    /// Which records of transactional producers to read (default
    /// [`IsolationLevel::ReadUncommitted`]); see [`IsolationLevel`]. A
    /// consume-transform-produce loop that commits its offsets through
    /// [`Producer::send_offsets_to_transaction`](crate::Producer::send_offsets_to_transaction)
    /// reads at [`IsolationLevel::ReadCommitted`], so that it never sees records of
    /// aborted transactions.
    pub fn isolation_level(mut self, level: IsolationLevel) -> Self {
        self.cfg.fetch.isolation_level = level;
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
    /// [`ConsumerError::BatchTooLarge`](crate::consumer::ConsumerError::BatchTooLarge), and its partition is no longer fetched
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
        let mut cfg = self.cfg;
        let client_id = self.client.connection_config().client_id.clone();
        let meter = ConsumerMeter::new(client_id.as_deref().unwrap_or(""), Some(&self.group_id));
        cfg.fetch.meter = Arc::new(meter);
        if self.group_id.is_empty() {
            return Err(GroupError::InvalidConfig("the group id is empty"));
        }
        let consumer_protocol = cfg.group_protocol == GroupProtocol::Consumer;
        if self.topics.is_empty() && cfg.topic_regex.is_none() {
            return Err(GroupError::InvalidConfig("no topic subscribed"));
        }
        if !consumer_protocol && (cfg.topic_regex.is_some() || cfg.server_assignor.is_some()) {
            return Err(GroupError::InvalidConfig(
                "regular expression subscriptions and server assignors need the consumer group protocol",
            ));
        }
        if consumer_protocol && !self.assignors.is_empty() {
            return Err(GroupError::InvalidConfig(
                "client-side assignors are not used by the consumer group protocol; use server_assignor",
            ));
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
        let protocol = if consumer_protocol
            || assignors
                .iter()
                .all(|a| a.protocol() == RebalanceProtocol::Cooperative)
        {
            RebalanceProtocol::Cooperative
        } else {
            RebalanceProtocol::Eager
        };
        let leave_on_close = cfg.leave_on_close.unwrap_or(self.instance_id.is_none());
        // KIP-848: a closing static member says it will come back (epoch -2) unless
        // told not to leave at all or to leave for good.
        let leave = match (cfg.group_protocol, cfg.leave_on_close, &self.instance_id) {
            (GroupProtocol::Classic, _, _) => Leave::Classic(leave_on_close),
            (GroupProtocol::Consumer, Some(false), _) => Leave::None,
            (GroupProtocol::Consumer, None, Some(_)) => Leave::Temporarily,
            (GroupProtocol::Consumer, _, _) => Leave::ForGood,
        };
        let shared = Arc::new(Shared::new(
            self.client.clone(),
            self.group_id,
            self.instance_id,
            cfg.fetch.retry_backoff,
            cfg.fetch.meter.clone(),
        ));
        let member_cfg = Arc::new(MemberConfig {
            topics: self.topics,
            assignors,
            protocol,
            session_timeout: cfg.session_timeout,
            rebalance_timeout: cfg.rebalance_timeout,
            heartbeat_interval: cfg.heartbeat_interval,
            server_assignor: cfg.server_assignor.clone(),
            topic_regex: cfg.topic_regex.clone(),
            rack: Some(cfg.fetch.client_rack.clone()).filter(|r| !r.is_empty()),
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
        let member_task = if consumer_protocol {
            shared.lock().member_id = consumer_member::new_member_id();
            tokio::spawn(consumer_member::run(
                shared.clone(),
                member_cfg.clone(),
                ev_tx,
            ))
            .abort_handle()
        } else {
            tokio::spawn(member::run(shared.clone(), member_cfg.clone(), ev_tx)).abort_handle()
        };
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
                pending_cell: None,
                maybe_unresolved: false,
                next_epoch: 1,
                offset_reset: cfg.offset_reset,
                isolation_level: cfg.fetch.isolation_level,
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
            leave,
            protocol,
            fetch_task,
            member_task,
            commit_task,
        })
    }
}
