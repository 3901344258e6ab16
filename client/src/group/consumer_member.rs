//! The membership task of the consumer rebalance protocol (KIP-848,
//! [`GroupProtocol::Consumer`](super::GroupProtocol::Consumer)): one
//! ConsumerGroupHeartbeat loop instead of JoinGroup, SyncGroup and Heartbeat. The
//! coordinator computes the assignment (with its `uniform` or `range` assignor);
//! the member reconciles it and acknowledges.
//!
//! - **Joining.** The member joins with epoch 0 and a member id it generated
//!   itself (a random UUID in Kafka's base64 form, as Kafka 4 clients do, KIP-1082),
//!   sending its whole state: subscription, rebalance timeout, server assignor,
//!   owned partitions (none) and static instance id. Later heartbeats carry only
//!   the fields that changed since the last acknowledged one (the instance id
//!   always, as Kafka's consumer does); after any failed heartbeat the next one
//!   carries everything again, because the coordinator may not have seen the last.
//! - **Interval.** The coordinator's `heartbeat_interval_ms` paces the loop; the
//!   builder's interval is used only until the first answer.
//! - **Reconciliation.** An assignment in a response is the set of partitions the
//!   member may own now, by topic id. Partitions owned but no longer assigned are
//!   revoked first (through [`Event::Revoked`], which commits with automatic
//!   commits and runs `on_revoked` inside `recv`, while heartbeats continue); then
//!   the new partitions are announced ([`Event::Assigned`]); then the member
//!   heartbeats at once with the partitions it owns, which is the acknowledgement
//!   the coordinator waits for before it bumps the member's epoch or hands the
//!   revoked partitions on. A newer assignment that arrives while one is being
//!   reconciled is reconciled right after it. Topic ids the client's metadata does
//!   not know yet stay pending until a metadata refresh names them.
//! - **Fencing.** FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID mean the coordinator
//!   removed the member: everything owned is lost (`on_lost`, no commit) and the
//!   member rejoins with epoch 0 and the same member id. Fenced while a
//!   revocation waits for the application (which stopped calling `recv` for
//!   longer than the rebalance timeout), the member declares everything lost at
//!   once (the partitions being revoked too, unless the application already
//!   started revoking them) and rejoins once the application has caught up.
//! - **Coordinator moves.** NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
//!   COORDINATOR_LOAD_IN_PROGRESS and broken connections send the member back to
//!   FindCoordinator; it keeps its epoch and partitions and heartbeats the new
//!   coordinator with its full state, as Kafka's consumer does.
//! - **Commits** use the member epoch as the generation (OffsetCommit v9+ checks
//!   it against the member's epoch); outside an epoch (joining, fenced) they are
//!   refused locally as between generations of the classic protocol.
//! - **Leaving** ([`leave`]) is a heartbeat with epoch -1, or -2 for a static
//!   member that will come back and keep its partitions until the session times
//!   out.
//!
//! Fatal: FENCED_INSTANCE_ID and UNRELEASED_INSTANCE_ID (another process uses this
//! static member's instance id), authorization failures, UNSUPPORTED_ASSIGNOR,
//! GROUP_MAX_SIZE_REACHED, INVALID_REQUEST, INVALID_REGULAR_EXPRESSION,
//! UNSUPPORTED_VERSION and a broker without ConsumerGroupHeartbeat.

use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use baton_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
    ConsumerGroupHeartbeatTopicPartitions,
};
use baton_protocol::{ErrorCode, Uuid};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::coordinator::{Lane, Shared};
use super::member::{Event, MemberConfig};
use super::{GroupError, TopicPartition};
use crate::backoff::Backoff;
use crate::client::ClientError;

/// The request's name in errors.
const REQUEST: &str = "ConsumerGroupHeartbeat";

/// Partitions by topic id, as the protocol carries them.
type ById = BTreeMap<Uuid, BTreeSet<i32>>;

/// What the last acknowledged heartbeat told the coordinator; `None` fields (and a
/// reset) mean "send it again".
#[derive(Debug, Default)]
struct Sent {
    rebalance_timeout_ms: Option<i32>,
    topics: Option<Vec<String>>,
    regex: Option<String>,
    server_assignor: Option<String>,
    rack: Option<String>,
    owned: Option<ById>,
}

/// The result of one heartbeat.
enum Beat {
    /// Answered; the member's epoch and interval are updated, and a new target
    /// assignment (if any) recorded.
    Ok,
    /// The coordinator removed the member: lose everything, rejoin at epoch 0.
    Fenced(ErrorCode),
    /// Coordinator or connection trouble: try again after a backoff.
    Retry,
}

struct Member {
    shared: Arc<Shared>,
    cfg: Arc<MemberConfig>,
    events: mpsc::UnboundedSender<Event>,
    /// Sent in every heartbeat; generated once (or, with a broker that speaks only
    /// version 0, given by the coordinator).
    member_id: String,
    /// 0 while joining; the coordinator's answer afterwards.
    epoch: i32,
    /// What the application owns (announced and not revoked).
    owned: BTreeSet<TopicPartition>,
    /// Topic ids of the topics seen in assignments, by name.
    ids: HashMap<Arc<str>, Uuid>,
    /// The latest assignment not yet fully reconciled.
    target: Option<ById>,
    /// Owned partitions must be reported at once (a reconciliation finished).
    ack_now: bool,
    interval: Duration,
    sent: Sent,
    /// The negotiated ConsumerGroupHeartbeat version, once known.
    version: Option<i16>,
}

/// A new member id: 16 random bytes in URL-safe base64 without padding, the form
/// of Kafka's `Uuid.toString()`.
pub(crate) fn new_member_id() -> String {
    let hi = RandomState::new().build_hasher().finish();
    let lo = RandomState::new().build_hasher().finish();
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&hi.to_be_bytes());
    bytes[8..].copy_from_slice(&lo.to_be_bytes());
    base64url(&bytes)
}

fn base64url(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len() * 4 / 3 + 2);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | (u32::from(b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ABC[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// Runs the membership until a fatal error, or until the application side is gone.
pub(crate) async fn run(
    shared: Arc<Shared>,
    cfg: Arc<MemberConfig>,
    events: mpsc::UnboundedSender<Event>,
) {
    let mut m = Member::new(shared, cfg, events);
    if let Err(e) = m.run().await {
        tracing::warn!(group = %m.shared.group_id, error = %e, "group membership ended");
        m.shared.lock().fatal = Some(e.clone());
        let _ = m.events.send(Event::Fatal(e));
    }
}

impl Member {
    /// A member about to join (epoch 0) with the member id in `shared`.
    fn new(
        shared: Arc<Shared>,
        cfg: Arc<MemberConfig>,
        events: mpsc::UnboundedSender<Event>,
    ) -> Self {
        let member_id = shared.lock().member_id.clone();
        Member {
            interval: cfg.heartbeat_interval,
            shared,
            cfg,
            events,
            member_id,
            epoch: 0,
            owned: BTreeSet::new(),
            ids: HashMap::new(),
            target: None,
            ack_now: false,
            sent: Sent::default(),
            version: None,
        }
    }

    async fn run(&mut self) -> Result<(), GroupError> {
        tracing::info!(group = %self.shared.group_id, member = %self.member_id, "joining group (consumer protocol)");
        // Failed heartbeats are retried after `retry_backoff`, doubling up to 1 s
        // (Kafka's `retry.backoff.max.ms`), never later than the next heartbeat.
        let base = self.shared.retry_backoff;
        let backoff = Backoff::new(base, Duration::from_secs(1).max(base));
        let mut failures = 0u32;
        loop {
            if self.events.is_closed() {
                return Ok(());
            }
            let joining = self.epoch == 0;
            let wait = match self.heartbeat().await? {
                Beat::Ok => {
                    failures = 0;
                    self.reconcile().await?;
                    if std::mem::take(&mut self.ack_now) {
                        continue;
                    }
                    self.interval
                }
                Beat::Fenced(code) => {
                    tracing::info!(group = %self.shared.group_id, member = %self.member_id, %code, "fenced by the coordinator; rejoining");
                    self.fence();
                    if !joining {
                        failures = 0;
                        continue;
                    }
                    // Refused while joining already: do not spin.
                    failures = failures.saturating_add(1);
                    backoff.delay(failures).min(self.interval)
                }
                Beat::Retry => {
                    failures = failures.saturating_add(1);
                    backoff.delay(failures).min(self.interval)
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = self.events.closed() => return Ok(()),
            }
        }
    }

    /// The partitions owned, by topic id (for the heartbeat).
    fn owned_by_id(&self) -> ById {
        let mut out = ById::new();
        for tp in &self.owned {
            if let Some(id) = self.ids.get(&tp.topic) {
                out.entry(*id).or_default().insert(tp.partition);
            }
        }
        out
    }

    fn subscribed_topics(&self) -> Vec<String> {
        let mut topics = self.cfg.topics.clone();
        topics.sort();
        topics.dedup();
        topics
    }

    /// The next heartbeat request: everything when joining (or after a failure),
    /// otherwise only what changed since the last acknowledged heartbeat.
    fn request(&self) -> ConsumerGroupHeartbeatRequest {
        let full = self.epoch == 0;
        let pick = |now: &Option<String>, sent: &Option<String>| {
            if now.is_some() && (full || now != sent) {
                now.clone()
            } else {
                None
            }
        };
        let rebalance_timeout_ms = millis(self.cfg.rebalance_timeout);
        let topics = self.subscribed_topics();
        let owned = self.owned_by_id();
        let send_topics = !topics.is_empty() || self.cfg.topic_regex.is_none();
        ConsumerGroupHeartbeatRequest {
            group_id: self.shared.group_id.clone(),
            member_id: self.member_id.clone(),
            member_epoch: self.epoch,
            instance_id: self.shared.instance_id.clone(),
            rack_id: pick(&self.cfg.rack, &self.sent.rack),
            rebalance_timeout_ms: if full
                || self.sent.rebalance_timeout_ms != Some(rebalance_timeout_ms)
            {
                rebalance_timeout_ms
            } else {
                -1
            },
            subscribed_topic_names: (send_topics
                && (full || self.sent.topics.as_ref() != Some(&topics)))
            .then_some(topics),
            subscribed_topic_regex: pick(&self.cfg.topic_regex, &self.sent.regex),
            server_assignor: pick(&self.cfg.server_assignor, &self.sent.server_assignor),
            topic_partitions: (full || self.sent.owned.as_ref() != Some(&owned)).then(|| {
                owned
                    .into_iter()
                    .map(|(topic_id, ps)| ConsumerGroupHeartbeatTopicPartitions {
                        topic_id,
                        partitions: ps.into_iter().collect(),
                    })
                    .collect()
            }),
        }
    }

    /// Records what an acknowledged heartbeat carried.
    fn remember(&mut self, req: &ConsumerGroupHeartbeatRequest) {
        if req.rebalance_timeout_ms >= 0 {
            self.sent.rebalance_timeout_ms = Some(req.rebalance_timeout_ms);
        }
        if let Some(t) = &req.subscribed_topic_names {
            self.sent.topics = Some(t.clone());
        }
        if let Some(r) = &req.subscribed_topic_regex {
            self.sent.regex = Some(r.clone());
        }
        if let Some(a) = &req.server_assignor {
            self.sent.server_assignor = Some(a.clone());
        }
        if let Some(r) = &req.rack_id {
            self.sent.rack = Some(r.clone());
        }
        if let Some(tps) = &req.topic_partitions {
            let mut owned = ById::new();
            for t in tps {
                owned
                    .entry(t.topic_id)
                    .or_default()
                    .extend(t.partitions.iter().copied());
            }
            self.sent.owned = Some(owned);
        }
    }

    /// One ConsumerGroupHeartbeat round trip.
    async fn heartbeat(&mut self) -> Result<Beat, GroupError> {
        let (node, conn) = match self.shared.coordinator(Lane::Membership).await {
            Ok(c) => c,
            Err(e) if e.is_retriable() => {
                tracing::debug!(group = %self.shared.group_id, error = %e, "no coordinator yet");
                self.sent = Sent::default();
                return Ok(Beat::Retry);
            }
            Err(e) => return Err(e),
        };
        let version = conn
            .version_for::<ConsumerGroupHeartbeatRequest>()
            .map_err(ClientError::from)?;
        if self.version != Some(version) {
            self.version = Some(version);
            if version == 0 {
                if self.cfg.topic_regex.is_some() {
                    return Err(GroupError::InvalidConfig(
                        "the coordinator does not support regular expression subscriptions",
                    ));
                }
                if self.epoch == 0 {
                    // Version 0: the coordinator generates the member id.
                    self.member_id.clear();
                }
            }
        }
        let req = self.request();
        let resp: ConsumerGroupHeartbeatResponse = match conn.send(&req).await {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(group = %self.shared.group_id, error = %e, "heartbeat failed");
                self.shared.coordinator_failed(node);
                self.sent = Sent::default();
                return Ok(Beat::Retry);
            }
        };
        let code = ErrorCode::from_code(resp.error_code);
        if code != ErrorCode::None {
            self.sent = Sent::default();
        }
        match code {
            ErrorCode::None => {}
            ErrorCode::FencedMemberEpoch | ErrorCode::UnknownMemberId => {
                return Ok(Beat::Fenced(code));
            }
            ErrorCode::NotCoordinator
            | ErrorCode::CoordinatorNotAvailable
            | ErrorCode::CoordinatorLoadInProgress => {
                tracing::debug!(group = %self.shared.group_id, %code, "coordinator moved or loading");
                self.shared.coordinator_failed(node);
                return Ok(Beat::Retry);
            }
            // Another process uses this static member's instance id. (Kafka answers
            // UNRELEASED_INSTANCE_ID when the other one has not left; it is fatal
            // too and comes back as a `GroupError::Coordinator` naming the code.)
            ErrorCode::FencedInstanceId => {
                return Err(GroupError::FencedInstanceId {
                    group_instance_id: self.shared.instance_id.clone().unwrap_or_default(),
                });
            }
            ErrorCode::TopicAuthorizationFailed => {
                tracing::warn!(group = %self.shared.group_id, message = ?resp.error_message, "heartbeat: not authorized for a subscribed topic");
                return Ok(Beat::Retry);
            }
            code if code.is_retriable() => {
                tracing::debug!(group = %self.shared.group_id, %code, "heartbeat: retriable error");
                return Ok(Beat::Retry);
            }
            code => {
                tracing::warn!(group = %self.shared.group_id, %code, message = ?resp.error_message, "heartbeat refused");
                return Err(GroupError::Coordinator {
                    code,
                    request: REQUEST,
                });
            }
        }
        self.remember(&req);
        if let Some(id) = resp.member_id.filter(|id| !id.is_empty()) {
            self.member_id = id;
        }
        if self.epoch == 0 && resp.member_epoch > 0 {
            tracing::info!(group = %self.shared.group_id, member = %self.member_id, epoch = resp.member_epoch, "joined group");
        }
        self.epoch = resp.member_epoch;
        if resp.heartbeat_interval_ms > 0 {
            self.interval = Duration::from_millis(resp.heartbeat_interval_ms as u64);
        }
        {
            let mut st = self.shared.lock();
            st.member_id = self.member_id.clone();
            st.generation = if self.epoch > 0 { self.epoch } else { -1 };
        }
        if let Some(a) = resp.assignment {
            let mut target = ById::new();
            for t in a.topic_partitions {
                target
                    .entry(t.topic_id)
                    .or_default()
                    .extend(t.partitions.iter().copied());
            }
            tracing::debug!(group = %self.shared.group_id, epoch = self.epoch, topics = target.len(), "assignment received");
            self.target = Some(target);
        }
        Ok(Beat::Ok)
    }

    /// Everything owned is gone; back to epoch 0 with the same member id.
    fn fence(&mut self) {
        self.epoch = 0;
        self.target = None;
        self.sent = Sent::default();
        let lost: Vec<TopicPartition> = std::mem::take(&mut self.owned).into_iter().collect();
        {
            let mut st = self.shared.lock();
            st.generation = -1;
            for tp in &lost {
                st.owned.remove(tp);
            }
        }
        if !lost.is_empty() {
            tracing::info!(group = %self.shared.group_id, count = lost.len(), "partitions lost");
            let _ = self.events.send(Event::Lost(lost));
        }
    }

    /// Topic names of `target`'s ids; ids the metadata does not know are left out
    /// (after one refresh), and reported by the second value.
    async fn resolve(&mut self, target: &ById) -> (BTreeSet<TopicPartition>, bool) {
        let mut meta = self.shared.client.metadata();
        if target.keys().any(|id| meta.topic_by_id(*id).is_none()) {
            match self.shared.client.refresh_metadata().await {
                Ok(m) => meta = m,
                Err(e) => {
                    tracing::debug!(group = %self.shared.group_id, error = %e, "metadata refresh failed")
                }
            }
        }
        let mut out = BTreeSet::new();
        let mut complete = true;
        for (id, partitions) in target {
            let Some(topic) = meta.topic_by_id(*id) else {
                tracing::debug!(group = %self.shared.group_id, topic_id = ?id, "assigned topic id not in metadata yet");
                complete = false;
                continue;
            };
            let name: Arc<str> = Arc::from(topic.name.as_str());
            self.ids.insert(name.clone(), *id);
            for &p in partitions {
                out.insert(TopicPartition::new(name.clone(), p));
            }
        }
        (out, complete)
    }

    /// Brings what the application owns to the latest target: revokes first, then
    /// announces the additions, then asks for an immediate acknowledging heartbeat.
    async fn reconcile(&mut self) -> Result<(), GroupError> {
        while let Some(target) = self.target.take() {
            let started = Instant::now();
            let (assigned, complete) = self.resolve(&target).await;
            let revoked: Vec<TopicPartition> = self.owned.difference(&assigned).cloned().collect();
            let added: Vec<TopicPartition> = assigned.difference(&self.owned).cloned().collect();
            if revoked.is_empty() && added.is_empty() {
                if !complete {
                    self.target = Some(target);
                }
                return Ok(());
            }
            tracing::info!(
                group = %self.shared.group_id,
                member = %self.member_id,
                epoch = self.epoch,
                assigned = assigned.len(),
                added = added.len(),
                revoked = revoked.len(),
                "reconciling assignment"
            );
            if !revoked.is_empty() && !self.revoke(revoked).await? {
                // Fenced while revoking: everything is lost already.
                return Ok(());
            }
            if !added.is_empty() {
                self.shared.lock().owned.extend(added.iter().cloned());
                self.owned.extend(added.iter().cloned());
                let _ = self.events.send(Event::Assigned(added));
            }
            self.shared.meter.rebalanced(started.elapsed());
            self.ack_now = true;
            if !complete && self.target.is_none() {
                // Try the unknown topic ids again at the next heartbeat.
                self.target = Some(target);
                return Ok(());
            }
        }
        Ok(())
    }

    /// Hands `partitions` to the application for revocation and waits until it is
    /// done (commits included), heartbeating meanwhile. `false` if the member was
    /// fenced while it waited (everything owned is then lost).
    async fn revoke(&mut self, partitions: Vec<TopicPartition>) -> Result<bool, GroupError> {
        tracing::info!(group = %self.shared.group_id, count = partitions.len(), "revoking partitions");
        let (ack, mut acked) = oneshot::channel();
        let lost = Arc::new(AtomicBool::new(false));
        if self
            .events
            .send(Event::Revoked {
                partitions: partitions.clone(),
                ack,
                lost: lost.clone(),
            })
            .is_err()
        {
            return Ok(true);
        }
        let mut next = Instant::now() + self.interval;
        let mut fenced = false;
        loop {
            tokio::select! {
                _ = &mut acked => break,
                _ = tokio::time::sleep_until(next), if !fenced => {
                    match self.heartbeat().await? {
                        Beat::Ok => next = Instant::now() + self.interval,
                        Beat::Retry => {
                            next = Instant::now() + self.shared.retry_backoff.min(self.interval)
                        }
                        Beat::Fenced(code) => {
                            tracing::info!(group = %self.shared.group_id, %code, "fenced while revoking");
                            fenced = true;
                            // Everything is lost at once: the partitions being
                            // revoked (the application handles them as lost if it
                            // has not started yet) and the others, which the
                            // application must stop returning records of now, not
                            // only after it acknowledges the revocation. Rejoining
                            // waits for the acknowledgement.
                            lost.store(true, Ordering::Release);
                            for tp in &partitions {
                                self.owned.remove(tp);
                            }
                            self.fence();
                        }
                    }
                }
            }
        }
        for tp in &partitions {
            self.owned.remove(tp);
        }
        Ok(!fenced)
    }
}

fn millis(d: Duration) -> i32 {
    d.as_millis().min(i32::MAX as u128) as i32
}

/// Leaves the group with a heartbeat of epoch -1, or -2 for a static member that
/// will come back (`temporary`). Best effort, one attempt.
pub(crate) async fn leave(shared: &Shared, temporary: bool) -> Result<(), GroupError> {
    let (member_id, generation) = {
        let st = shared.lock();
        (st.member_id.clone(), st.generation)
    };
    if member_id.is_empty() || generation <= 0 && shared.instance_id.is_none() {
        return Ok(());
    }
    let (node, conn) = shared.coordinator(Lane::Offsets).await?;
    let req = ConsumerGroupHeartbeatRequest {
        group_id: shared.group_id.clone(),
        member_id,
        member_epoch: if temporary { -2 } else { -1 },
        instance_id: shared.instance_id.clone(),
        ..Default::default()
    };
    let resp = match conn.send(&req).await {
        Ok(r) => r,
        Err(e) => {
            shared.coordinator_failed(node);
            return Err(ClientError::from(e).into());
        }
    };
    match ErrorCode::from_code(resp.error_code) {
        ErrorCode::None | ErrorCode::UnknownMemberId | ErrorCode::FencedMemberEpoch => Ok(()),
        code => Err(GroupError::Coordinator {
            code,
            request: REQUEST,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::assignor::RebalanceProtocol;
    use crate::Client;

    /// A member on a client of an in-process broker (only for its settings; no
    /// heartbeat is sent).
    async fn member() -> (
        baton_broker::BrokerHandle,
        Member,
        mpsc::UnboundedReceiver<Event>,
    ) {
        let broker = baton_broker::Broker::start(baton_broker::BrokerConfig::in_memory())
            .await
            .expect("broker");
        let client = Client::builder([broker.bootstrap()])
            .build()
            .await
            .expect("client");
        let shared = Arc::new(Shared::new(
            client,
            "g".to_string(),
            Some("static-1".to_string()),
            Duration::from_millis(100),
            Arc::new(crate::metrics::ConsumerMeter::detached()),
        ));
        shared.lock().member_id = new_member_id();
        let cfg = Arc::new(MemberConfig {
            topics: vec!["b".into(), "a".into(), "a".into()],
            assignors: Vec::new(),
            protocol: RebalanceProtocol::Cooperative,
            session_timeout: Duration::from_secs(45),
            rebalance_timeout: Duration::from_secs(10),
            heartbeat_interval: Duration::from_secs(1),
            server_assignor: Some("range".into()),
            topic_regex: Some("c.*".into()),
            rack: Some("r1".into()),
        });
        let (tx, rx) = mpsc::unbounded_channel();
        (broker, Member::new(shared, cfg, tx), rx)
    }

    #[tokio::test]
    async fn heartbeats_carry_everything_on_join_and_after_a_failure_and_only_changes_otherwise() {
        let (_broker, mut m, _events) = member().await;
        let join = m.request();
        assert_eq!(join.member_epoch, 0);
        assert_eq!(join.member_id.len(), 22, "a client-generated id");
        assert_eq!(join.instance_id.as_deref(), Some("static-1"));
        assert_eq!(join.rebalance_timeout_ms, 10_000);
        assert_eq!(
            join.subscribed_topic_names,
            Some(vec!["a".to_string(), "b".to_string()])
        );
        assert_eq!(join.subscribed_topic_regex.as_deref(), Some("c.*"));
        assert_eq!(join.server_assignor.as_deref(), Some("range"));
        assert_eq!(join.rack_id.as_deref(), Some("r1"), "client_rack as RackId");
        assert_eq!(join.topic_partitions, Some(Vec::new()), "owns nothing yet");

        // Acknowledged: the next heartbeat says only who it is.
        m.remember(&join);
        m.epoch = 5;
        let beat = m.request();
        let bare = ConsumerGroupHeartbeatRequest {
            group_id: "g".into(),
            member_id: join.member_id.clone(),
            member_epoch: 5,
            instance_id: Some("static-1".into()),
            ..Default::default()
        };
        assert_eq!(beat, bare);

        // A reconciled assignment is reported once.
        let id = Uuid::from_u64_pair(1, 2);
        m.ids.insert(Arc::from("a"), id);
        m.owned.insert(TopicPartition::new("a", 1));
        m.owned.insert(TopicPartition::new("a", 0));
        let ack = m.request();
        let owned = vec![ConsumerGroupHeartbeatTopicPartitions {
            topic_id: id,
            partitions: vec![0, 1],
        }];
        assert_eq!(ack.topic_partitions, Some(owned.clone()));
        assert_eq!(ack.subscribed_topic_names, None);
        m.remember(&ack);
        assert_eq!(m.request(), bare);

        // After a failed heartbeat everything is sent again, at the same epoch.
        m.sent = Sent::default();
        let again = m.request();
        assert_eq!(again.member_epoch, 5);
        assert_eq!(again.rebalance_timeout_ms, 10_000);
        assert_eq!(again.subscribed_topic_names, join.subscribed_topic_names);
        assert_eq!(again.subscribed_topic_regex, join.subscribed_topic_regex);
        assert_eq!(again.server_assignor, join.server_assignor);
        assert_eq!(again.rack_id, join.rack_id);
        assert_eq!(again.topic_partitions, Some(owned));
    }

    #[test]
    fn member_ids_are_22_char_url_safe_base64_and_differ() {
        let a = new_member_id();
        let b = new_member_id();
        assert_eq!(a.len(), 22, "{a}");
        assert!(a
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
        assert_ne!(a, b);
    }

    #[test]
    fn base64url_matches_known_vectors() {
        // RFC 4648 test vectors, URL-safe alphabet, no padding.
        assert_eq!(base64url(b"f"), "Zg");
        assert_eq!(base64url(b"fo"), "Zm8");
        assert_eq!(base64url(b"foo"), "Zm9v");
        assert_eq!(base64url(b"foob"), "Zm9vYg");
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
    }
}
