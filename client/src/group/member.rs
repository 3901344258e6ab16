//! The membership task: joins the group, leads the assignment when chosen, keeps
//! the membership alive with heartbeats and rejoins when the group rebalances.
//!
//! It never touches the fetcher or the application's positions itself. What the
//! application must see (partitions assigned, revoked, lost) goes out as
//! [`Event`]s, handled inside [`GroupConsumer::recv`](super::GroupConsumer::recv);
//! a revocation waits for the application's acknowledgement, so the application
//! can commit before anyone else takes the partitions. Heartbeats continue while
//! it waits.
//!
//! Rebalance protocols:
//! - eager: before (re)joining, everything owned is revoked; the new assignment is
//!   then taken whole;
//! - cooperative (KIP-429): the member rejoins owning its partitions and keeps
//!   consuming them; after SyncGroup it revokes only the partitions no longer
//!   assigned to it and, if there were any, rejoins at once so the group can hand
//!   them to their new owner.
//!
//! # Joining is never silent
//!
//! A coordinator may hold a JoinGroup (and a follower's SyncGroup) for a long
//! time, legitimately: Apache Kafka holds a new group's first join for
//! `group.initial.rebalance.delay.ms` and any join until every known member has
//! rejoined or the rebalance timeout expires; tansu 0.6 holds every join for half
//! the session timeout (22.5 s with the default 45 s). Transient errors
//! (coordinator moving or loading, broken connections, REBALANCE_IN_PROGRESS) can
//! also repeat for a while. So a join that takes long is not an error, and the
//! member keeps retrying for as long as the consumer lives, as the Java client and
//! librdkafka do; a fatal error from `recv` would make a slow group formation or
//! a long coordinator failover kill every application that uses `?` on it. What
//! it never does is wait silently:
//! - each join round (one JoinGroup + SyncGroup exchange) starts with an info line;
//! - a JoinGroup or SyncGroup the coordinator holds is reported at info while it
//!   waits, first after one heartbeat interval, then at doubling intervals;
//! - every outcome that leads to another attempt is logged with its reason: at
//!   info for the rebalance-relevant ones (REBALANCE_IN_PROGRESS,
//!   ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, MEMBER_ID_REQUIRED), at debug for each
//!   failed request (coordinator lookup, wire error, other retriable codes);
//! - once a join has not completed within the rebalance timeout, a warning names
//!   the attempts, the time spent and the last reason, and repeats every further
//!   rebalance timeout until the member joins.
//!
//! Errors that cannot be ridden out (authorization, an unknown protocol, a fenced
//! static member) end the membership and surface through `recv` as before.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use baton_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, ConsumerProtocolTopicPartition,
    HeartbeatRequest, JoinGroupRequest, JoinGroupRequestProtocol, JoinGroupResponse,
    LeaveGroupRequest, MemberIdentity, SyncGroupRequest, SyncGroupRequestAssignment,
};
use baton_protocol::ErrorCode;
use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, MissedTickBehavior};

use super::assignor::{Assignor, MemberSubscription, RebalanceProtocol};
use super::coordinator::{Lane, Shared};
use super::{GroupError, TopicPartition};
use crate::backoff::Backoff;
use crate::client::ClientError;
use crate::connection::Connection;

/// What the membership task tells the application side.
#[derive(Debug)]
pub(crate) enum Event {
    /// Newly assigned partitions: resolve their start offsets and fetch them.
    Assigned(Vec<TopicPartition>),
    /// Give these up; send on `ack` once done (commits included). If `lost` is
    /// set by the time the application gets to it, the membership ended while the
    /// revocation waited: the partitions are lost instead (no commit, `on_lost`).
    Revoked {
        partitions: Vec<TopicPartition>,
        ack: oneshot::Sender<()>,
        lost: Arc<AtomicBool>,
    },
    /// These are gone already (the generation ended without us); forget them
    /// without committing.
    Lost(Vec<TopicPartition>),
    /// The membership ended for good.
    Fatal(GroupError),
}

/// Settings the task needs.
#[derive(Debug)]
pub(crate) struct MemberConfig {
    pub(crate) topics: Vec<String>,
    pub(crate) assignors: Vec<Arc<dyn Assignor>>,
    pub(crate) protocol: RebalanceProtocol,
    pub(crate) session_timeout: Duration,
    pub(crate) rebalance_timeout: Duration,
    pub(crate) heartbeat_interval: Duration,
    /// The server-side assignor asked for (consumer protocol only).
    pub(crate) server_assignor: Option<String>,
    /// The subscribed topic regular expression (consumer protocol only).
    pub(crate) topic_regex: Option<String>,
    /// The member's rack (`client.rack`), if set.
    pub(crate) rack: Option<String>,
}

/// Why the stable phase ended.
enum Next {
    Rejoin,
    Stop,
}

/// Why a join round must be repeated: logged when it happens, and named again if
/// the join outlasts the rebalance timeout.
#[derive(Debug, Clone)]
enum Retry {
    /// No usable coordinator yet (FindCoordinator failed or is retrying).
    NoCoordinator(String),
    /// The request failed on the wire (broken connection, timeout).
    Request {
        request: &'static str,
        error: String,
    },
    /// The coordinator answered a retriable error code.
    Code {
        request: &'static str,
        code: ErrorCode,
    },
}

impl Retry {
    /// Whether this retry is part of the group's rebalance protocol (logged at
    /// info) rather than a failed request (logged at debug).
    fn is_rebalance(&self) -> bool {
        matches!(
            self,
            Retry::Code {
                code: ErrorCode::RebalanceInProgress
                    | ErrorCode::IllegalGeneration
                    | ErrorCode::UnknownMemberId
                    | ErrorCode::MemberIdRequired,
                ..
            }
        )
    }
}

impl std::fmt::Display for Retry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Retry::NoCoordinator(e) => write!(f, "no coordinator: {e}"),
            Retry::Request { request, error } => write!(f, "{request} failed: {error}"),
            Retry::Code { request, code } => write!(f, "{request} answered {code}"),
        }
    }
}

struct Member {
    shared: Arc<Shared>,
    cfg: Arc<MemberConfig>,
    events: mpsc::UnboundedSender<Event>,
    /// What this member owns in the group protocol (its subscription's owned
    /// partitions).
    owned: BTreeSet<TopicPartition>,
    /// The generation `owned` belongs to, -1 if none.
    generation: i32,
    member_id: String,
    /// Partition counts the last assignment was computed from, when leader.
    led_counts: Option<BTreeMap<String, i32>>,
    /// A cooperative revocation happened: rejoin at once so the revoked partitions
    /// reach their new owner.
    pending_rejoin: bool,
}

/// Runs the membership until a fatal error, or until the application side is gone.
pub(crate) async fn run(
    shared: Arc<Shared>,
    cfg: Arc<MemberConfig>,
    events: mpsc::UnboundedSender<Event>,
) {
    let mut m = Member {
        shared,
        cfg,
        events,
        owned: BTreeSet::new(),
        generation: -1,
        member_id: String::new(),
        led_counts: None,
        pending_rejoin: false,
    };
    let outcome: Result<(), GroupError> = async {
        loop {
            m.join_and_sync().await?;
            match m.stable().await? {
                Next::Rejoin => continue,
                Next::Stop => return Ok(()),
            }
        }
    }
    .await;
    if let Err(e) = outcome {
        tracing::warn!(group = %m.shared.group_id, error = %e, "group membership ended");
        m.shared.lock().fatal = Some(e.clone());
        let _ = m.events.send(Event::Fatal(e));
    }
}

/// The result of one heartbeat.
enum Beat {
    Ok,
    Rebalance,
    /// The generation is gone; `reset_member` when the member id is unknown too.
    Lost {
        reset_member: bool,
    },
    /// Coordinator or connection trouble: try again later.
    Retry,
}

impl Member {
    fn fenced(&self) -> GroupError {
        GroupError::FencedInstanceId {
            group_instance_id: self.shared.instance_id.clone().unwrap_or_default(),
        }
    }

    fn closed(&self) -> bool {
        self.events.is_closed()
    }

    /// One Heartbeat round trip.
    async fn heartbeat(&self) -> Result<Beat, GroupError> {
        let (node, conn) = match self.shared.coordinator(Lane::Membership).await {
            Ok(c) => c,
            Err(e) if e.is_retriable() => return Ok(Beat::Retry),
            Err(e) => return Err(e),
        };
        let req = HeartbeatRequest {
            group_id: self.shared.group_id.clone(),
            generation_id: self.generation,
            member_id: self.member_id.clone(),
            group_instance_id: self.shared.instance_id.clone(),
        };
        let resp = match conn.send(&req).await {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(error = %e, "heartbeat failed");
                self.shared.coordinator_failed(node);
                return Ok(Beat::Retry);
            }
        };
        Ok(match ErrorCode::from_code(resp.error_code) {
            ErrorCode::None => Beat::Ok,
            ErrorCode::RebalanceInProgress => Beat::Rebalance,
            ErrorCode::IllegalGeneration => Beat::Lost {
                reset_member: false,
            },
            ErrorCode::UnknownMemberId => Beat::Lost { reset_member: true },
            ErrorCode::FencedInstanceId => return Err(self.fenced()),
            ErrorCode::NotCoordinator
            | ErrorCode::CoordinatorNotAvailable
            | ErrorCode::CoordinatorLoadInProgress => {
                self.shared.coordinator_failed(node);
                Beat::Retry
            }
            ErrorCode::GroupAuthorizationFailed => {
                return Err(GroupError::Coordinator {
                    code: ErrorCode::GroupAuthorizationFailed,
                    request: "Heartbeat",
                })
            }
            code => {
                tracing::debug!(%code, "heartbeat error");
                Beat::Retry
            }
        })
    }

    /// Everything owned is gone without a chance to commit.
    fn lose_all(&mut self, reset_member: bool) {
        let lost: Vec<TopicPartition> = std::mem::take(&mut self.owned).into_iter().collect();
        self.generation = -1;
        if reset_member {
            self.member_id.clear();
        }
        {
            let mut st = self.shared.lock();
            for tp in &lost {
                st.owned.remove(tp);
            }
            st.generation = -1;
            if reset_member {
                st.member_id.clear();
            }
        }
        if !lost.is_empty() {
            tracing::info!(group = %self.shared.group_id, count = lost.len(), "partitions lost");
            let _ = self.events.send(Event::Lost(lost));
        }
    }

    /// Hands `partitions` to the application for revocation and waits until it is
    /// done, heartbeating meanwhile. If the generation ends while it waits, whatever
    /// else is owned is lost.
    async fn revoke(&mut self, partitions: Vec<TopicPartition>) -> Result<(), GroupError> {
        if partitions.is_empty() {
            return Ok(());
        }
        tracing::info!(group = %self.shared.group_id, count = partitions.len(), "revoking partitions");
        let (ack, mut acked) = oneshot::channel();
        let list = partitions.clone();
        let lost = Arc::new(AtomicBool::new(false));
        if self
            .events
            .send(Event::Revoked {
                partitions: list,
                ack,
                lost: lost.clone(),
            })
            .is_err()
        {
            return Ok(());
        }
        let mut tick = tokio::time::interval(self.cfg.heartbeat_interval);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        tick.tick().await;
        let mut generation_gone = None;
        loop {
            tokio::select! {
                _ = &mut acked => break,
                _ = tick.tick(), if generation_gone.is_none() && self.generation >= 0 => {
                    match self.heartbeat().await? {
                        Beat::Lost { reset_member } => {
                            generation_gone = Some(reset_member);
                            lost.store(true, Ordering::Release);
                            self.shared.lock().generation = -1;
                        }
                        Beat::Ok | Beat::Rebalance | Beat::Retry => {}
                    }
                }
            }
        }
        for tp in &partitions {
            self.owned.remove(tp);
        }
        if let Some(reset_member) = generation_gone {
            self.lose_all(reset_member);
        }
        Ok(())
    }

    fn subscription(&self, assignor: &dyn Assignor) -> Result<Bytes, GroupError> {
        let mut owned: Vec<ConsumerProtocolTopicPartition> = Vec::new();
        for tp in &self.owned {
            match owned.last_mut() {
                Some(t) if *t.topic == *tp.topic => t.partitions.push(tp.partition),
                _ => owned.push(ConsumerProtocolTopicPartition {
                    topic: tp.topic.to_string(),
                    partitions: vec![tp.partition],
                }),
            }
        }
        let mut topics = self.cfg.topics.clone();
        topics.sort();
        topics.dedup();
        let sub = ConsumerProtocolSubscription {
            topics,
            user_data: assignor.user_data(self.generation),
            owned_partitions: owned,
            generation_id: self.generation,
            rack_id: self.cfg.rack.clone(),
        };
        sub.encode_versioned(3).map_err(GroupError::from)
    }

    /// JoinGroup + SyncGroup until this member holds a generation; then applies the
    /// new assignment (revoking and announcing partitions). Retries for as long as
    /// it takes, logging every retry (see the module docs).
    async fn join_and_sync(&mut self) -> Result<(), GroupError> {
        if self.cfg.protocol == RebalanceProtocol::Eager {
            let all: Vec<TopicPartition> = self.owned.iter().cloned().collect();
            self.revoke(all).await?;
        }
        tracing::info!(group = %self.shared.group_id, member = %self.member_id, "joining group");
        let started = Instant::now();
        let mut warn_at = started + self.cfg.rebalance_timeout;
        let mut attempt = 0u32;
        // `retry_backoff` doubling (at most 5 times) up to 2 s.
        let base = self.shared.retry_backoff;
        let backoff = Backoff::new(
            base,
            Duration::from_secs(2).min(base.saturating_mul(1 << 5)),
        );
        loop {
            if self.closed() {
                return Ok(());
            }
            if attempt > 0 {
                tokio::time::sleep(backoff.delay(attempt)).await;
            }
            attempt += 1;
            let retry = match self.join_round().await? {
                Ok(()) => {
                    self.shared.meter.rebalanced(started.elapsed());
                    return Ok(());
                }
                Err(retry) => retry,
            };
            if retry.is_rebalance() {
                tracing::info!(group = %self.shared.group_id, attempt, reason = %retry, "join round repeated");
            } else {
                tracing::info!(group = %self.shared.group_id, attempt, reason = %retry, "join round failed; retrying");
            }
            if Instant::now() >= warn_at {
                warn_at = Instant::now() + self.cfg.rebalance_timeout;
                tracing::warn!(
                    group = %self.shared.group_id,
                    attempts = attempt,
                    waited = ?started.elapsed(),
                    last = %retry,
                    "join has not completed within the rebalance timeout; still retrying"
                );
            }
        }
    }

    /// One JoinGroup + SyncGroup exchange; installs the assignment when it
    /// succeeds.
    async fn join_round(&mut self) -> Result<Result<(), Retry>, GroupError> {
        let joined = match self.join().await? {
            Ok(j) => j,
            Err(retry) => return Ok(Err(retry)),
        };
        let generation = joined.generation_id;
        let protocol_name = joined.protocol_name.clone().unwrap_or_default();
        let assignments = if joined.leader == joined.member_id && !joined.skip_assignment {
            self.lead(&protocol_name, &joined.members).await?
        } else {
            Vec::new()
        };
        let assigned = match self.sync(generation, &protocol_name, assignments).await? {
            Ok(a) => a,
            Err(retry) => return Ok(Err(retry)),
        };
        self.install(generation, assigned).await?;
        Ok(Ok(()))
    }

    /// Awaits a JoinGroup or SyncGroup response, logging at info while the
    /// coordinator holds it: first after one heartbeat interval, then at doubling
    /// intervals.
    async fn held<T>(&self, request: &'static str, response: impl Future<Output = T>) -> T {
        let started = Instant::now();
        let mut every = self.cfg.heartbeat_interval;
        let report = tokio::time::sleep(every);
        tokio::pin!(response);
        tokio::pin!(report);
        loop {
            tokio::select! {
                r = &mut response => return r,
                _ = &mut report => {
                    tracing::info!(
                        group = %self.shared.group_id,
                        member = %self.member_id,
                        waited = ?started.elapsed(),
                        "{request} held by the coordinator; still waiting"
                    );
                    every = (every * 2)
                        .min(self.cfg.rebalance_timeout)
                        .max(self.cfg.heartbeat_interval);
                    report.as_mut().reset(Instant::now() + every);
                }
            }
        }
    }

    /// The coordinator's connection, or why there is none yet.
    async fn coordinator(&self) -> Result<Result<(i32, Connection), Retry>, GroupError> {
        match self.shared.coordinator(Lane::Membership).await {
            Ok(c) => Ok(Ok(c)),
            Err(e) if e.is_retriable() => Ok(Err(Retry::NoCoordinator(e.to_string()))),
            Err(e) => Err(e),
        }
    }

    /// One JoinGroup (repeated at once for MEMBER_ID_REQUIRED).
    async fn join(&mut self) -> Result<Result<JoinGroupResponse, Retry>, GroupError> {
        let (node, conn) = match self.coordinator().await? {
            Ok(c) => c,
            Err(retry) => return Ok(Err(retry)),
        };
        let mut protocols = Vec::with_capacity(self.cfg.assignors.len());
        for a in &self.cfg.assignors {
            protocols.push(JoinGroupRequestProtocol {
                name: a.name().to_string(),
                metadata: self.subscription(a.as_ref())?,
            });
        }
        let mut req = JoinGroupRequest {
            group_id: self.shared.group_id.clone(),
            session_timeout_ms: millis(self.cfg.session_timeout),
            rebalance_timeout_ms: millis(self.cfg.rebalance_timeout),
            member_id: self.member_id.clone(),
            group_instance_id: self.shared.instance_id.clone(),
            protocol_type: "consumer".to_string(),
            protocols,
            reason: None,
        };
        let timeout = self.cfg.rebalance_timeout + self.shared.client.request_timeout();
        for _ in 0..2 {
            let sent = self
                .held("JoinGroup", conn.send_with_timeout(&req, timeout))
                .await;
            let resp = match sent {
                Ok(r) => r,
                Err(e) => {
                    self.shared.coordinator_failed(node);
                    return Ok(Err(Retry::Request {
                        request: "JoinGroup",
                        error: e.to_string(),
                    }));
                }
            };
            let code = ErrorCode::from_code(resp.error_code);
            let retry = |code| {
                Ok(Err(Retry::Code {
                    request: "JoinGroup",
                    code,
                }))
            };
            match code {
                ErrorCode::None => {
                    // `self.generation` stays the generation of what this member
                    // owns until SyncGroup hands it the new assignment: it is what
                    // the next subscription claims its partitions under.
                    self.member_id = resp.member_id.clone();
                    let mut st = self.shared.lock();
                    st.member_id = resp.member_id.clone();
                    // Commits wait for SyncGroup: the generation is not usable yet.
                    st.generation = -1;
                    drop(st);
                    tracing::info!(group = %self.shared.group_id, member = %resp.member_id, generation = resp.generation_id, leader = %resp.leader, "joined");
                    return Ok(Ok(resp));
                }
                ErrorCode::MemberIdRequired => {
                    tracing::debug!(group = %self.shared.group_id, member = %resp.member_id, "JoinGroup: member id assigned; joining with it");
                    self.member_id = resp.member_id.clone();
                    self.shared.lock().member_id = resp.member_id.clone();
                    req.member_id = resp.member_id;
                }
                ErrorCode::UnknownMemberId => {
                    self.lose_all(true);
                    return retry(code);
                }
                ErrorCode::FencedInstanceId => return Err(self.fenced()),
                ErrorCode::NotCoordinator
                | ErrorCode::CoordinatorNotAvailable
                | ErrorCode::CoordinatorLoadInProgress => {
                    self.shared.coordinator_failed(node);
                    return retry(code);
                }
                ErrorCode::RebalanceInProgress | ErrorCode::IllegalGeneration => {
                    return retry(code)
                }
                code if code.is_retriable() => return retry(code),
                code => {
                    return Err(GroupError::Coordinator {
                        code,
                        request: "JoinGroup",
                    })
                }
            }
        }
        // MEMBER_ID_REQUIRED twice in a row: start over with the latest id.
        Ok(Err(Retry::Code {
            request: "JoinGroup",
            code: ErrorCode::MemberIdRequired,
        }))
    }

    /// Runs the group's chosen assignor over the members' subscriptions.
    async fn lead(
        &mut self,
        protocol_name: &str,
        members: &[baton_protocol::messages::JoinGroupResponseMember],
    ) -> Result<Vec<SyncGroupRequestAssignment>, GroupError> {
        let assignor = self
            .cfg
            .assignors
            .iter()
            .find(|a| a.name() == protocol_name)
            .cloned()
            .ok_or(GroupError::Coordinator {
                code: ErrorCode::InconsistentGroupProtocol,
                request: "JoinGroup",
            })?;
        let mut subs = Vec::with_capacity(members.len());
        let mut topics: BTreeSet<String> = BTreeSet::new();
        for m in members {
            let (version, sub) = match ConsumerProtocolSubscription::decode_versioned(
                m.metadata.clone(),
            ) {
                Ok(x) => x,
                Err(e) => {
                    // A member we cannot read gets nothing rather than failing the group.
                    tracing::warn!(member = %m.member_id, error = %e, "undecodable subscription");
                    (0, ConsumerProtocolSubscription::default())
                }
            };
            topics.extend(sub.topics.iter().cloned());
            let owned = sub
                .owned_partitions
                .iter()
                .flat_map(|t| {
                    let topic: Arc<str> = Arc::from(t.topic.as_str());
                    t.partitions
                        .iter()
                        .map(move |&p| TopicPartition::new(topic.clone(), p))
                })
                .collect();
            subs.push(MemberSubscription {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                topics: sub.topics,
                owned_partitions: owned,
                generation: (version >= 2).then_some(sub.generation_id),
                rack_id: sub.rack_id,
                user_data: sub.user_data,
            });
        }
        let mut counts = BTreeMap::new();
        for topic in &topics {
            match self.shared.client.partition_count(topic).await {
                Ok(n) => {
                    counts.insert(topic.clone(), n);
                }
                Err(e) => {
                    tracing::debug!(%topic, error = %e, "subscribed topic not assignable yet")
                }
            }
        }
        let assignment = assignor.assign(&counts, &subs);
        tracing::debug!(group = %self.shared.group_id, assignor = protocol_name, members = subs.len(), "computed assignment");
        self.led_counts = Some(counts);
        let mut out = Vec::with_capacity(assignment.len());
        for (member_id, parts) in assignment {
            let mut topics: Vec<ConsumerProtocolTopicPartition> = Vec::new();
            let mut sorted = parts;
            sorted.sort();
            for tp in sorted {
                match topics.last_mut() {
                    Some(t) if *t.topic == *tp.topic => t.partitions.push(tp.partition),
                    _ => topics.push(ConsumerProtocolTopicPartition {
                        topic: tp.topic.to_string(),
                        partitions: vec![tp.partition],
                    }),
                }
            }
            let bytes = ConsumerProtocolAssignment {
                assigned_partitions: topics,
                user_data: None,
            }
            .encode_versioned(3)
            .map_err(GroupError::from)?;
            out.push(SyncGroupRequestAssignment {
                member_id,
                assignment: bytes,
            });
        }
        Ok(out)
    }

    /// SyncGroup; a [`Retry`] means rejoin.
    async fn sync(
        &mut self,
        generation: i32,
        protocol_name: &str,
        assignments: Vec<SyncGroupRequestAssignment>,
    ) -> Result<Result<BTreeSet<TopicPartition>, Retry>, GroupError> {
        let (node, conn) = match self.coordinator().await? {
            Ok(c) => c,
            Err(retry) => return Ok(Err(retry)),
        };
        let req = SyncGroupRequest {
            group_id: self.shared.group_id.clone(),
            generation_id: generation,
            member_id: self.member_id.clone(),
            group_instance_id: self.shared.instance_id.clone(),
            protocol_type: Some("consumer".to_string()),
            protocol_name: Some(protocol_name.to_string()),
            assignments,
        };
        let timeout = self.cfg.rebalance_timeout + self.shared.client.request_timeout();
        let sent = self
            .held("SyncGroup", conn.send_with_timeout(&req, timeout))
            .await;
        let resp = match sent {
            Ok(r) => r,
            Err(e) => {
                self.shared.coordinator_failed(node);
                return Ok(Err(Retry::Request {
                    request: "SyncGroup",
                    error: e.to_string(),
                }));
            }
        };
        let code = ErrorCode::from_code(resp.error_code);
        let retry = Retry::Code {
            request: "SyncGroup",
            code,
        };
        match code {
            ErrorCode::None => {}
            ErrorCode::RebalanceInProgress => return Ok(Err(retry)),
            ErrorCode::UnknownMemberId => {
                self.lose_all(true);
                return Ok(Err(retry));
            }
            ErrorCode::IllegalGeneration => {
                self.lose_all(false);
                return Ok(Err(retry));
            }
            ErrorCode::FencedInstanceId => return Err(self.fenced()),
            ErrorCode::NotCoordinator
            | ErrorCode::CoordinatorNotAvailable
            | ErrorCode::CoordinatorLoadInProgress => {
                self.shared.coordinator_failed(node);
                return Ok(Err(retry));
            }
            code if code.is_retriable() => return Ok(Err(retry)),
            code => {
                return Err(GroupError::Coordinator {
                    code,
                    request: "SyncGroup",
                })
            }
        }
        let (_, assignment) = ConsumerProtocolAssignment::decode_versioned(resp.assignment)
            .map_err(GroupError::from)?;
        let mut set = BTreeSet::new();
        for t in assignment.assigned_partitions {
            let topic: Arc<str> = Arc::from(t.topic.as_str());
            for p in t.partitions {
                set.insert(TopicPartition::new(topic.clone(), p));
            }
        }
        Ok(Ok(set))
    }

    /// Takes the new generation: revokes what is no longer assigned (cooperative),
    /// announces what is new.
    async fn install(
        &mut self,
        generation: i32,
        assigned: BTreeSet<TopicPartition>,
    ) -> Result<(), GroupError> {
        let revoked: Vec<TopicPartition> = self.owned.difference(&assigned).cloned().collect();
        let added: Vec<TopicPartition> = assigned.difference(&self.owned).cloned().collect();
        self.generation = generation;
        {
            let mut st = self.shared.lock();
            st.generation = generation;
            st.member_id = self.member_id.clone();
            st.owned.extend(added.iter().cloned());
        }
        tracing::info!(
            group = %self.shared.group_id,
            member = %self.member_id,
            generation,
            assigned = assigned.len(),
            added = added.len(),
            revoked = revoked.len(),
            "assignment received"
        );
        let must_rejoin = !revoked.is_empty();
        // Announce additions first: they are ours now, whatever happens to the
        // revocation.
        self.owned.extend(added.iter().cloned());
        if !added.is_empty() {
            let _ = self.events.send(Event::Assigned(added));
        }
        self.revoke(revoked).await?;
        if must_rejoin {
            self.pending_rejoin = true;
        }
        Ok(())
    }

    /// Heartbeats until the group needs a rejoin (or the member is gone).
    async fn stable(&mut self) -> Result<Next, GroupError> {
        if std::mem::take(&mut self.pending_rejoin) {
            return Ok(Next::Rejoin);
        }
        let mut tick = tokio::time::interval(self.cfg.heartbeat_interval);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut last_ok = Instant::now();
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = self.events.closed() => return Ok(Next::Stop),
            }
            if self.generation < 0 {
                return Ok(Next::Rejoin);
            }
            match self.heartbeat().await? {
                Beat::Ok => last_ok = Instant::now(),
                Beat::Rebalance => {
                    tracing::info!(group = %self.shared.group_id, "rebalance in progress; rejoining");
                    return Ok(Next::Rejoin);
                }
                Beat::Lost { reset_member } => {
                    self.lose_all(reset_member);
                    return Ok(Next::Rejoin);
                }
                Beat::Retry => {
                    if last_ok.elapsed() > self.cfg.session_timeout {
                        // The coordinator has surely expired us by now.
                        self.lose_all(false);
                        return Ok(Next::Rejoin);
                    }
                }
            }
            if self.partition_counts_changed() {
                tracing::info!(group = %self.shared.group_id, "subscribed topics changed; rejoining");
                return Ok(Next::Rejoin);
            }
        }
    }

    /// As leader: whether the metadata now shows other partition counts for the
    /// subscribed topics than the last assignment used.
    fn partition_counts_changed(&self) -> bool {
        let Some(led) = &self.led_counts else {
            return false;
        };
        let meta = self.shared.client.metadata();
        led.keys().chain(self.cfg.topics.iter()).any(|topic| {
            let now = meta.topic(topic).map(|t| t.partitions.len() as i32);
            match (now, led.get(topic)) {
                (Some(n), Some(&was)) => n > 0 && n != was,
                (Some(n), None) => n > 0,
                _ => false,
            }
        })
    }
}

fn millis(d: Duration) -> i32 {
    d.as_millis().min(i32::MAX as u128) as i32
}

/// Sends LeaveGroup for this member (best effort, one attempt).
pub(crate) async fn leave(shared: &Shared) -> Result<(), GroupError> {
    let member_id = shared.lock().member_id.clone();
    if member_id.is_empty() && shared.instance_id.is_none() {
        return Ok(());
    }
    // Not the membership lane: a JoinGroup the aborted membership task left parked
    // at the coordinator would hold this request behind it.
    let (node, conn) = shared.coordinator(Lane::Offsets).await?;
    let req = LeaveGroupRequest {
        group_id: shared.group_id.clone(),
        member_id: member_id.clone(),
        members: vec![MemberIdentity {
            member_id,
            group_instance_id: shared.instance_id.clone(),
            reason: Some("the consumer is closing".to_string()),
        }],
    };
    let resp = match conn.send(&req).await {
        Ok(r) => r,
        Err(e) => {
            shared.coordinator_failed(node);
            return Err(ClientError::from(e).into());
        }
    };
    let code = ErrorCode::from_code(resp.error_code);
    let member_code = resp
        .members
        .iter()
        .map(|m| ErrorCode::from_code(m.error_code))
        .find(|c| *c != ErrorCode::None);
    match member_code.unwrap_or(code) {
        ErrorCode::None | ErrorCode::UnknownMemberId => Ok(()),
        code => Err(GroupError::Coordinator {
            code,
            request: "LeaveGroup",
        }),
    }
}
