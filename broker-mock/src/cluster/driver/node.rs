//! A broker node of a cluster: the single-node broker's listener and handlers, plus
//! the tasks that tie it to the controller and to the other nodes.
//!
//! - **session**: BrokerRegistration, then a BrokerHeartbeat every interval carrying
//!   the applied metadata offset and, on [`NodeHandle::stop`], `want_shut_down`;
//! - **metadata**: long-polling Fetch of the controller's metadata log, replayed into
//!   this node's copy of [`ControllerState`] (the "image");
//! - **reconcile**: after every image change, creates and deletes local topics and
//!   gives each partition its role (leader through [`LeaderState`], follower, none),
//!   starts planned-move drains, and runs one replica fetcher per followed partition;
//! - **reports**: sends leaders' ISR proposals (AlterPartition) and planned-move steps;
//! - **ticker**: ticks every leader (ISR shrink, `acks=all` timeouts).
//!
//! [`LeaderState`]: crate::replication::LeaderState

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::time::Instant;

use baton_protocol::messages::{
    AlterPartitionRequest, AlterPartitionRequestBrokerState, AlterPartitionRequestPartitionData,
    AlterPartitionRequestTopicData, BrokerHeartbeatRequest, BrokerRegistrationRequest,
    BrokerRegistrationRequestListener, FetchPartition, FetchRequest, FetchTopic,
};
use baton_protocol::ErrorCode;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::fetcher::run_fetcher;
use crate::cluster::controller_server::METADATA_TOPIC;
use crate::cluster::messages::corrupt_report::CorruptReplicaReportRequest;
use crate::cluster::messages::move_report::{
    LeaderMoveReportRequest, PHASE_CAUGHT_UP, PHASE_DRAIN_STARTED,
};
use crate::controller::{ControllerState, MetadataLogEntry, NO_LEADER};
use crate::corruption::CorruptionKind;
use crate::error::BrokerError;
pub(crate) use crate::node_mode::ClusterLink;
use crate::node_mode::NodeMode;
pub use crate::node_mode::NodeOptions;
use crate::partition::{LeaderReport, Role};
use crate::replication::LeaderInit;
use crate::rpc::Rpc;
use crate::server::{Broker, BrokerHandle};
use crate::state::BrokerState;
use crate::topics::{random_uuid, TopicConfig};

/// Starts cluster nodes.
#[derive(Debug)]
pub struct Node;

/// Aborts a task when dropped.
#[derive(Debug)]
pub(crate) struct AbortOnDrop(pub JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Node {
    /// Opens the node's data, binds its listener and starts its cluster tasks. The
    /// node registers with the controller in the background.
    ///
    /// # Cancel safety
    ///
    /// Cancelling before it completes leaves nothing running.
    pub async fn start(options: NodeOptions) -> Result<NodeHandle, BrokerError> {
        let (reports_tx, reports_rx) = mpsc::unbounded_channel();
        let link = Arc::new(ClusterLink {
            node_id: options.broker.node_id,
            options: options.clone(),
            image: RwLock::new(ControllerState::new()),
            image_tx: watch::Sender::new(0),
            reconciled: watch::Sender::new(0),
            reports: reports_tx,
            broker_epoch: AtomicI64::new(-1),
            replication_paused: watch::Sender::new(false),
            clock: Instant::now(),
        });
        let broker =
            Broker::start_with(options.broker.clone(), NodeMode::Replica(link.clone())).await?;
        let state = broker.state().clone();
        let (want_tx, want_rx) = watch::channel(false);
        let (done_tx, done_rx) = watch::channel(false);
        let incarnation = random_uuid();
        let tasks = vec![
            AbortOnDrop(tokio::spawn(session_loop(
                link.clone(),
                broker.local_addr(),
                broker.state().listeners[1..].to_vec(),
                incarnation,
                want_rx,
                done_tx,
            ))),
            AbortOnDrop(tokio::spawn(metadata_loop(link.clone()))),
            AbortOnDrop(tokio::spawn(reconcile_loop(state.clone(), link.clone()))),
            AbortOnDrop(tokio::spawn(reports_loop(
                state.clone(),
                link.clone(),
                reports_rx,
            ))),
            AbortOnDrop(tokio::spawn(tick_loop(state.clone(), link.clone()))),
            AbortOnDrop(tokio::spawn(super::scrubber::scrub_loop(
                state,
                link.clone(),
            ))),
        ];
        tracing::info!(node = link.node_id, addr = %broker.local_addr(), "cluster node started");
        Ok(NodeHandle {
            broker: Some(broker),
            link,
            tasks,
            want_shutdown: want_tx,
            shutdown_ok: done_rx,
        })
    }
}

/// A running cluster node.
///
/// Dropping it is [`NodeHandle::kill`]: every task stops at once, nothing is flushed.
#[derive(Debug)]
pub struct NodeHandle {
    broker: Option<BrokerHandle>,
    link: Arc<ClusterLink>,
    tasks: Vec<AbortOnDrop>,
    want_shutdown: watch::Sender<bool>,
    shutdown_ok: watch::Receiver<bool>,
}

impl NodeHandle {
    /// This node's id.
    pub fn node_id(&self) -> i32 {
        self.link.node_id
    }

    /// The listener's address.
    pub fn local_addr(&self) -> SocketAddr {
        self.broker
            .as_ref()
            .map_or(SocketAddr::from(([0, 0, 0, 0], 0)), |b| b.local_addr())
    }

    /// The bound address of this node's listener named `name` (ignoring case);
    /// `None` if it has none or is stopped.
    pub fn listener_addr(&self, name: &str) -> Option<SocketAddr> {
        self.broker.as_ref()?.listener_addr(name)
    }

    /// The address of this node's Prometheus endpoint, if it has one.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.broker.as_ref()?.metrics_addr()
    }

    /// A snapshot of this node's metrics; `None` once it is stopped.
    pub fn metrics(&self) -> Option<crate::metrics::BrokerMetrics> {
        Some(self.broker.as_ref()?.metrics())
    }

    /// Points `options`' extra listeners at the ports this node bound, so that a
    /// restart binds them again.
    pub(crate) fn keep_extra_ports(&self, options: &mut NodeOptions) {
        if let Some(addr) = self.metrics_addr() {
            options.broker.metrics_listen = Some(addr);
        }
        for l in &mut options.broker.extra_listeners {
            if let Some(addr) = self.listener_addr(&l.name) {
                l.listen = addr;
            }
        }
    }

    /// The metadata offset this node has applied.
    pub fn metadata_offset(&self) -> i64 {
        *self.link.image_tx.borrow()
    }

    /// The broker epoch, -1 before registration.
    pub fn broker_epoch(&self) -> i64 {
        self.link.broker_epoch.load(Ordering::Relaxed)
    }

    /// Fault injection: stops (`true`) or resumes (`false`) this node's replica
    /// fetchers. The node keeps its session, so the leaders see a live follower that
    /// falls behind and, after `replica.lag.time.max.ms`, remove it from the ISR.
    pub fn pause_replication(&self, paused: bool) {
        self.link.replication_paused.send_replace(paused);
    }

    /// This node's replica of `topic`/`partition` as it stands (role, leader epoch,
    /// log end offset, high watermark), for probes that watch invariants; `None` if
    /// the node hosts no such replica.
    pub fn replica_view(&self, topic: &str, partition: i32) -> Option<crate::cluster::ReplicaView> {
        let part = self.state()?.topic(topic)?.partition(partition).cloned()?;
        let view = crate::cluster::ReplicaView::of(self.link.node_id, &part.lock());
        Some(view)
    }

    pub(crate) fn state(&self) -> Option<&Arc<BrokerState>> {
        self.broker.as_ref().map(|b| b.state())
    }

    /// Hard stop: tasks and connections are aborted, nothing is flushed, the
    /// controller is not told (it fences the node when its session expires).
    pub fn kill(mut self) {
        self.halt();
        tracing::info!(node = self.link.node_id, "node killed");
    }

    /// Aborts the node's tasks, then ends every leadership it holds (see
    /// [`PartitionState::halt`](crate::partition::PartitionState::halt)) and drops
    /// the broker: with the ticker gone nothing would ever answer a write waiting
    /// for replication, and the blocking thread running it (a coordinator's state
    /// change) would keep the node's state alive and hold up the runtime's shutdown.
    fn halt(&mut self) {
        self.tasks.clear();
        if let Some(b) = self.broker.take() {
            halt_partitions(b.state());
        }
    }

    /// Controlled shutdown: asks the controller to move this node's leaderships away
    /// (each planned move drains the old leader first, so nothing acknowledged is
    /// lost), waits until it may stop (or the configured timeout passes), then stops
    /// serving and flushes its logs.
    ///
    /// # Cancel safety
    ///
    /// If cancelled, the node stays in controlled shutdown until the handle is dropped,
    /// which kills it.
    pub async fn stop(mut self) {
        let _ = self.want_shutdown.send(true);
        let timeout = self.link.options.controlled_shutdown_timeout;
        let mut ok = self.shutdown_ok.clone();
        let wait = async move {
            while !*ok.borrow_and_update() {
                if ok.changed().await.is_err() {
                    return;
                }
            }
        };
        let waited = tokio::time::timeout(timeout, wait).await;
        if waited.is_err() {
            tracing::warn!(
                node = self.link.node_id,
                "controlled shutdown timed out; stopping anyway"
            );
        }
        self.tasks.clear();
        if let Some(b) = self.broker.take() {
            halt_partitions(b.state());
            b.shutdown().await;
        }
        tracing::info!(node = self.link.node_id, "node stopped");
    }
}

impl Drop for NodeHandle {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Ends every leadership of a stopping node's partitions.
fn halt_partitions(state: &BrokerState) {
    for t in state.all_topics() {
        for p in &t.partitions {
            p.lock().halt();
        }
    }
}

/// Keeps the node registered and heartbeating; `extra` are the node's
/// listeners beyond its first, registered so that Metadata asked on one of them
/// names every broker by that listener's endpoint.
async fn session_loop(
    link: Arc<ClusterLink>,
    addr: SocketAddr,
    extra: Vec<crate::state::Endpoint>,
    incarnation: baton_protocol::Uuid,
    mut want_shutdown: watch::Receiver<bool>,
    done: watch::Sender<bool>,
) {
    let me = link.node_id;
    let mut rpc = link.rpc(link.options.controller, format!("node-{me}"));
    let timeout = controller_timeout(link.options.heartbeat_interval);
    let host = link
        .options
        .broker
        .advertised_host
        .clone()
        .unwrap_or_else(|| addr.ip().to_string());
    // A controlled shutdown needs the controller; if it stays unreachable this long,
    // the node stops without it (its leaderships then move when its session expires).
    const UNREACHABLE: Duration = Duration::from_secs(5);
    let mut last_answer = tokio::time::Instant::now();
    loop {
        let want = *want_shutdown.borrow();
        if want && last_answer.elapsed() > UNREACHABLE {
            tracing::warn!(
                node = me,
                "controller unreachable; stopping without controlled shutdown"
            );
            let _ = done.send(true);
        }
        let mut epoch = link.broker_epoch.load(Ordering::Relaxed);
        if epoch < 0 {
            let req = BrokerRegistrationRequest {
                broker_id: me,
                cluster_id: link.options.cluster_id.clone(),
                incarnation_id: incarnation,
                listeners: std::iter::once(BrokerRegistrationRequestListener {
                    name: "PLAINTEXT".into(),
                    host: host.clone(),
                    port: link.options.broker.advertised_port.unwrap_or(addr.port()),
                    security_protocol: 0,
                })
                .chain(extra.iter().map(|e| BrokerRegistrationRequestListener {
                    name: e.name.clone(),
                    host: e.host.clone(),
                    port: u16::try_from(e.port).unwrap_or(0),
                    security_protocol: protocol_id(e.protocol),
                }))
                .collect(),
                rack: link.options.broker.rack.clone(),
                ..Default::default()
            };
            let answer = rpc.call(&req, 0, timeout).await;
            if answer.is_ok() {
                last_answer = tokio::time::Instant::now();
            }
            match answer {
                Ok(r) if r.error_code == 0 => {
                    epoch = r.broker_epoch;
                    link.broker_epoch.store(epoch, Ordering::Relaxed);
                    tracing::info!(node = me, broker_epoch = epoch, "registered");
                }
                Ok(r) => tracing::warn!(node = me, code = r.error_code, "registration refused"),
                Err(e) => tracing::debug!(node = me, error = %e, "registration failed"),
            }
        }
        if epoch >= 0 {
            let req = BrokerHeartbeatRequest {
                broker_id: me,
                broker_epoch: epoch,
                current_metadata_offset: *link.image_tx.borrow(),
                want_fence: false,
                want_shut_down: want,
                ..Default::default()
            };
            let answer = rpc.call(&req, 0, timeout).await;
            if answer.is_ok() {
                last_answer = tokio::time::Instant::now();
            }
            match answer {
                Ok(r) if r.error_code == 0 => {
                    if want && r.should_shut_down {
                        let _ = done.send(true);
                    }
                }
                Ok(r) => {
                    let code = ErrorCode::from_code(r.error_code);
                    tracing::warn!(node = me, ?code, "heartbeat refused; registering again");
                    if matches!(
                        code,
                        ErrorCode::StaleBrokerEpoch | ErrorCode::BrokerIdNotRegistered
                    ) {
                        link.broker_epoch.store(-1, Ordering::Relaxed);
                    }
                }
                Err(e) => tracing::debug!(node = me, error = %e, "heartbeat failed"),
            }
        }
        let pause = if *want_shutdown.borrow() {
            Duration::from_millis(50)
        } else {
            link.options.heartbeat_interval
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = want_shutdown.changed() => {}
        }
    }
}

/// How long a node waits for the controller to answer a registration, a
/// heartbeat or (beyond its long-poll wait) a metadata fetch: four heartbeat
/// intervals, from 1 s to 5 s. A request lost on the way (a dropped connection
/// the node has not noticed) is then sent again on a new connection well within
/// the session timeout, instead of the node's session expiring while it waits.
fn controller_timeout(heartbeat_interval: Duration) -> Duration {
    (heartbeat_interval * 4).clamp(Duration::from_secs(1), Duration::from_secs(5))
}

async fn metadata_loop(link: Arc<ClusterLink>) {
    let me = link.node_id;
    let mut rpc = link.rpc(link.options.controller, format!("node-{me}-metadata"));
    const METADATA_WAIT_MS: i32 = 500;
    let timeout = Duration::from_millis(METADATA_WAIT_MS as u64)
        + controller_timeout(link.options.heartbeat_interval);
    loop {
        let offset = link.image().next_offset();
        let req = FetchRequest {
            replica_id: me,
            max_wait_ms: METADATA_WAIT_MS,
            min_bytes: 1,
            max_bytes: link.options.metadata_fetch_max_bytes,
            topics: vec![FetchTopic {
                topic: METADATA_TOPIC.to_owned(),
                partitions: vec![FetchPartition {
                    partition: 0,
                    fetch_offset: offset,
                    partition_max_bytes: link.options.metadata_fetch_max_bytes,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let resp = match rpc.call(&req, 12, timeout).await {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(node = me, error = %e, "metadata fetch failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Some(pd) = resp.responses.first().and_then(|t| t.partitions.first()) else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        if pd.error_code == ErrorCode::OffsetOutOfRange.code() {
            tracing::warn!(
                node = me,
                "the controller's metadata log is behind ours; replaying from the start"
            );
            // Not published: reconciling an empty image would delete every local
            // topic. The replay publishes once it has caught up.
            *link.image.write().unwrap_or_else(|p| p.into_inner()) = ControllerState::new();
            continue;
        }
        let records = pd.records.clone().unwrap_or_default();
        if records.is_empty() {
            continue;
        }
        let mut pos = 0;
        let mut applied = 0;
        {
            let mut img = link.image.write().unwrap_or_else(|p| p.into_inner());
            while pos < records.len() {
                match MetadataLogEntry::decode(&records[pos..]) {
                    Ok((entry, used)) => {
                        pos += used;
                        if entry.offset < img.next_offset() {
                            continue;
                        }
                        if let Err(e) = img.apply(&entry) {
                            tracing::error!(node = me, error = %e, "metadata entry does not apply; replaying from the start");
                            *img = ControllerState::new();
                            break;
                        }
                        applied += 1;
                    }
                    Err(e) => {
                        tracing::warn!(node = me, error = %e, "bad metadata entry");
                        break;
                    }
                }
            }
        }
        // Publish only an image that reached the controller's log end as of this
        // response: a partial replay (the first fetches after a start, or after a
        // reset) lacks topics, and reconciling it would delete their local data.
        let next = link.image().next_offset();
        if applied > 0 && next >= pd.high_watermark {
            link.image_tx.send_replace(next);
        }
    }
}

/// A running replica fetcher and what it follows.
struct FetcherTask {
    leader: i32,
    epoch: i32,
    _task: AbortOnDrop,
}

async fn reconcile_loop(state: Arc<BrokerState>, link: Arc<ClusterLink>) {
    let mut rx = link.image_tx.subscribe();
    let mut fetchers: HashMap<(String, i32), FetcherTask> = HashMap::new();
    loop {
        tokio::select! {
            r = rx.changed() => if r.is_err() { return },
            // Fetchers that gave up (leader unreachable for long) are restarted.
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        let published = *rx.borrow_and_update();
        let (st, l) = (state.clone(), link.clone());
        let wanted = match baton_env::spawn_blocking(move || reconcile(&st, &l)).await {
            Ok(Some(w)) => {
                link.reconciled.send_if_modified(|r| {
                    let newer = published > *r;
                    if newer {
                        *r = published;
                    }
                    newer
                });
                w
            }
            // A replay in progress: nothing published to act on yet.
            Ok(None) => continue,
            Err(e) => {
                tracing::error!(error = %e, "reconcile failed");
                continue;
            }
        };
        state.notify_append();
        fetchers.retain(|k, f| {
            let keep = wanted
                .get(k)
                .is_some_and(|&(leader, epoch)| leader == f.leader && epoch == f.epoch)
                && !f._task.0.is_finished();
            keep
        });
        for (key, (leader, epoch)) in wanted {
            if fetchers.contains_key(&key) {
                continue;
            }
            let task = tokio::spawn(run_fetcher(
                state.clone(),
                link.clone(),
                key.0.clone(),
                key.1,
                leader,
                epoch,
            ));
            fetchers.insert(
                key,
                FetcherTask {
                    leader,
                    epoch,
                    _task: AbortOnDrop(task),
                },
            );
        }
    }
}

/// Applies the image to local topics and partition roles. Returns the partitions to
/// fetch: `(topic, partition) -> (leader, leader epoch)`, or `None` while the image
/// is a partial replay that was not published (acting on it could delete topics it
/// has not replayed yet).
fn reconcile(
    state: &BrokerState,
    link: &ClusterLink,
) -> Option<HashMap<(String, i32), (i32, i32)>> {
    let me = link.node_id;
    let img = link.image().clone();
    // Nothing replayed yet (a node just started, its controller not reached):
    // an empty image would delete every local topic.
    if img.next_offset() == 0 || img.next_offset() != *link.image_tx.borrow() {
        return None;
    }
    // The cluster-wide dynamic broker defaults (retention) apply on this node.
    if state.broker_defaults() != *img.broker_defaults() {
        let _ = state.set_broker_defaults(img.broker_defaults().clone());
    }
    // The cluster's SCRAM users log in on this node's SASL listeners.
    state
        .scram
        .sync_replicated(img.scram_version(), img.scram_credentials());
    let now = link.now_ms();
    let mut wanted = HashMap::new();
    let mut known = std::collections::HashSet::new();
    // Lead only as the registered, unfenced incarnation: a restarted node replaying
    // the log must not act on leaderships of its previous life (a client with stale
    // metadata could otherwise get acknowledgements for records that are truncated
    // later).
    let my_epoch = link.broker_epoch.load(Ordering::Relaxed);
    let active = my_epoch >= 0
        && img
            .broker(me)
            .is_some_and(|b| b.broker_epoch == my_epoch && !b.fenced);
    for topic in img.topics() {
        known.insert(topic.name.clone());
        let config = TopicConfig {
            entries: topic.configs.iter().cloned().collect(),
        };
        let rf = img
            .partition(topic.topic_id, 0)
            .map_or(1, |p| p.replicas.len() as i16);
        let local = match state.ensure_replica_topic(
            &topic.name,
            topic.topic_id,
            topic.partitions,
            rf,
            config,
        ) {
            Ok(t) => t,
            Err(e) => {
                tracing::error!(node = me, topic = %topic.name, error = %e, "cannot create local replica");
                continue;
            }
        };
        let leader_config = link.leader_config(topic);
        for part in &local.partitions {
            let Some(pi) = img.partition(topic.topic_id, part.index()) else {
                continue;
            };
            let mut st = part.lock();
            st.replicas = pi.replicas.clone();
            st.isr = pi.isr.clone();
            st.attach_corruption_link(
                me,
                link.options.corruption_log.clone(),
                link.reports.clone(),
            );
            // A replica with known corruption, or whose log went offline after a
            // storage failure, never leads: it waits for the controller to elect a
            // healthy one (or to take the partition offline).
            let corrupt = st.corrupt_offset().is_some() || st.log_offline();
            if pi.leader == me && (!active || corrupt) {
                if !matches!(st.role(), Role::Follower { leader } if *leader == NO_LEADER) {
                    st.become_follower(NO_LEADER, pi.leader_epoch);
                }
            } else if pi.leader == me {
                let current = st.leader_state().map(|l| l.leader_epoch());
                if current != Some(pi.leader_epoch) {
                    let init = LeaderInit {
                        local_id: me,
                        leader_epoch: pi.leader_epoch,
                        partition_epoch: pi.partition_epoch,
                        replicas: pi.replicas.clone(),
                        isr: pi.isr.clone(),
                        log_end_offset: st.log_end_offset(),
                        high_watermark: st.high_watermark(),
                        now_ms: now,
                    };
                    if let Err(e) = st.become_leader(init, leader_config, link.reports.clone()) {
                        tracing::error!(node = me, topic = %topic.name, partition = part.index(), error = %e, "cannot lead");
                        continue;
                    }
                    tracing::info!(node = me, topic = %topic.name, partition = part.index(), epoch = pi.leader_epoch, leo = st.log_end_offset(), "leading");
                } else if let Some(l) = st.leader_state_mut() {
                    if pi.partition_epoch > l.partition_epoch() {
                        let r = if l.replicas() != pi.replicas.as_slice() {
                            l.on_replicas_changed(
                                pi.replicas.clone(),
                                pi.isr.clone(),
                                pi.partition_epoch,
                            )
                        } else {
                            l.on_isr_committed(pi.isr.clone(), pi.partition_epoch)
                        };
                        if let Err(e) = r {
                            tracing::warn!(node = me, error = %e, "ISR update refused");
                        }
                    }
                }
                if let Some(l) = st.leader_state_mut() {
                    // Topic configs altered since this node took the lead.
                    l.set_config(leader_config);
                    let ineligible = pi
                        .replicas
                        .iter()
                        .copied()
                        .filter(|r| *r != me && !img.is_eligible(*r))
                        .collect();
                    l.set_ineligible(ineligible);
                }
                let mv = img.leader_move(topic.topic_id, part.index()).copied();
                let accepts = st.leader_state().is_some_and(|l| l.accepts_writes());
                match mv {
                    Some(m)
                        if m.from == me
                            && m.state == crate::controller::MoveState::Requested
                            && accepts =>
                    {
                        if let Some(l) = st.leader_state_mut() {
                            if l.begin_drain(m.to).is_ok() {
                                st.report_drain_started();
                                tracing::info!(node = me, topic = %topic.name, partition = part.index(), to = m.to, "draining for a planned move");
                            }
                        }
                    }
                    Some(_) => {}
                    None => {
                        if !accepts {
                            if let Some(l) = st.leader_state_mut() {
                                l.abort_drain();
                            }
                        }
                    }
                }
                st.drive_leader();
            } else if pi.replicas.contains(&me) {
                let same = matches!(st.role(), Role::Follower { leader } if *leader == pi.leader)
                    && st.leader_epoch() == pi.leader_epoch;
                if !same {
                    st.become_follower(pi.leader, pi.leader_epoch);
                    tracing::info!(node = me, topic = %topic.name, partition = part.index(), leader = pi.leader, epoch = pi.leader_epoch, "following");
                }
                // An offline log takes nothing more: no fetcher (it would report a
                // log end it cannot extend, and could rejoin the ISR).
                if pi.leader != NO_LEADER && !st.log_offline() {
                    wanted.insert(
                        (topic.name.clone(), part.index()),
                        (pi.leader, pi.leader_epoch),
                    );
                }
            } else if !matches!(st.role(), Role::NotReplica) || st.leader_epoch() < pi.leader_epoch
            {
                let was_replica = !matches!(st.role(), Role::NotReplica);
                st.become_not_replica(pi.leader, pi.leader_epoch);
                // Reassigned away: the partition's data goes.
                if was_replica || st.log_end_offset() > 0 {
                    match st.drop_replica_data() {
                        Ok(()) => {
                            tracing::info!(node = me, topic = %topic.name, partition = part.index(), "no longer a replica; data deleted")
                        }
                        Err(e) => {
                            tracing::error!(node = me, topic = %topic.name, partition = part.index(), error = %e, "cannot delete a removed replica's data")
                        }
                    }
                }
            }
        }
    }
    for t in state.all_topics() {
        if !known.contains(&t.name) {
            let _ = state.delete_topic(&t.name);
        }
    }
    Some(wanted)
}

async fn reports_loop(
    state: Arc<BrokerState>,
    link: Arc<ClusterLink>,
    mut rx: mpsc::UnboundedReceiver<LeaderReport>,
) {
    let me = link.node_id;
    let mut rpc = link.rpc(link.options.controller, format!("node-{me}-reports"));
    let timeout = Duration::from_secs(5);
    let mut reports_side = tokio::task::JoinSet::new();
    while let Some(report) = rx.recv().await {
        while reports_side.try_join_next().is_some() {}
        let epoch = link.broker_epoch.load(Ordering::Relaxed);
        match report {
            LeaderReport::AlterIsr {
                topic,
                partition,
                leader_epoch,
                partition_epoch,
                isr,
                broker_epochs,
            } => {
                let Some(topic_id) = link.image().topic_by_name(&topic).map(|t| t.topic_id) else {
                    continue;
                };
                // Each member with the registration its fetches came from (ours for
                // this node, -1 where unknown), so the controller can refuse one
                // that has restarted since (KIP-903).
                let new_isr_with_epochs = isr
                    .iter()
                    .map(|&broker_id| AlterPartitionRequestBrokerState {
                        broker_id,
                        broker_epoch: if broker_id == me {
                            epoch
                        } else {
                            broker_epochs
                                .iter()
                                .find(|(r, _)| *r == broker_id)
                                .map_or(-1, |(_, e)| *e)
                        },
                    })
                    .collect();
                let req = AlterPartitionRequest {
                    broker_id: me,
                    broker_epoch: epoch,
                    topics: vec![AlterPartitionRequestTopicData {
                        topic_id,
                        partitions: vec![AlterPartitionRequestPartitionData {
                            partition_index: partition,
                            leader_epoch,
                            new_isr_with_epochs,
                            partition_epoch,
                            ..Default::default()
                        }],
                        ..Default::default()
                    }],
                };
                let answer = rpc.call(&req, 3, timeout).await;
                let result = match &answer {
                    Ok(r) => r
                        .topics
                        .first()
                        .and_then(|t| t.partitions.first())
                        .filter(|p| p.error_code == 0 && r.error_code == 0)
                        .map(|p| (p.isr.clone(), p.partition_epoch, p.leader_epoch)),
                    Err(_) => None,
                };
                if result.is_none() {
                    tracing::debug!(node = me, %topic, partition, ?isr, "ISR change refused");
                }
                let Some(part) = state
                    .topic(&topic)
                    .and_then(|t| t.partition(partition).cloned())
                else {
                    continue;
                };
                let moved = {
                    let mut st = part.lock();
                    if let Some(l) = st.leader_state_mut() {
                        if l.leader_epoch() == leader_epoch {
                            match result {
                                Some((isr, pe, le)) if le == leader_epoch => {
                                    if pe >= l.partition_epoch() {
                                        if let Err(e) = l.on_isr_committed(isr, pe) {
                                            tracing::warn!(error = %e, "ISR answer refused");
                                        }
                                    }
                                }
                                _ => l.on_isr_rejected(),
                            }
                        }
                    }
                    st.drive_leader()
                };
                if moved {
                    state.notify_append();
                }
            }
            LeaderReport::DrainStarted {
                topic,
                partition,
                log_end_offset,
            } => {
                send_move_report(
                    &link,
                    &mut rpc,
                    &topic,
                    partition,
                    PHASE_DRAIN_STARTED,
                    -1,
                    log_end_offset,
                )
                .await;
            }
            LeaderReport::CorruptReplica {
                topic,
                partition,
                offset,
            } => {
                // In its own task (it retries until the controller answers), aborted
                // with this loop when the node stops.
                reports_side.spawn(send_corrupt_report(
                    state.clone(),
                    link.clone(),
                    topic,
                    partition,
                    offset,
                    Unusable::Corrupt,
                ));
            }
            LeaderReport::OfflineReplica {
                topic,
                partition,
                log_end_offset,
            } => {
                reports_side.spawn(send_corrupt_report(
                    state.clone(),
                    link.clone(),
                    topic,
                    partition,
                    log_end_offset,
                    Unusable::Offline,
                ));
            }
            LeaderReport::SuccessorCaughtUp {
                topic,
                partition,
                successor,
                log_end_offset,
            } => {
                send_move_report(
                    &link,
                    &mut rpc,
                    &topic,
                    partition,
                    PHASE_CAUGHT_UP,
                    successor,
                    log_end_offset,
                )
                .await;
            }
        }
    }
}

/// Why a replica is reported with CorruptReplicaReport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unusable {
    /// It holds a corrupt batch (repaired by re-fetching).
    Corrupt,
    /// Its log went offline after a failed write or fsync (until the node restarts).
    Offline,
}

/// Reports this node's replica as corrupt or offline, retrying until the controller
/// answers (the report decides whether the replica may keep leading and stay in the
/// ISR, so it must arrive). The controller treats both alike: out of the ISR, and a
/// new leader if it led.
async fn send_corrupt_report(
    state: Arc<BrokerState>,
    link: Arc<ClusterLink>,
    topic: String,
    partition: i32,
    offset: i64,
    why: Unusable,
) {
    let topic = topic.as_str();
    let mut rpc = link.rpc(
        link.options.controller,
        format!("node-{}-corruption", link.node_id),
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while tokio::time::Instant::now() < deadline {
        let epoch = link.broker_epoch.load(Ordering::Relaxed);
        let topic_id = link.image().topic_by_name(topic).map(|t| t.topic_id);
        let (Some(topic_id), true) = (topic_id, epoch >= 0) else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let still = state
            .topic(topic)
            .and_then(|t| t.partition(partition).cloned())
            .is_some_and(|p| {
                let st = p.lock();
                match why {
                    Unusable::Corrupt => st.corrupt_offset().is_some(),
                    Unusable::Offline => st.log_offline(),
                }
            });
        if !still {
            return;
        }
        let req = CorruptReplicaReportRequest {
            broker_id: link.node_id,
            broker_epoch: epoch,
            topic_id,
            partition,
            offset,
        };
        match rpc.call(&req, 0, Duration::from_secs(5)).await {
            Ok(r) if r.error_code == 0 => {
                if let Some(p) = state
                    .topic(topic)
                    .and_then(|t| t.partition(partition).cloned())
                {
                    if why == Unusable::Corrupt {
                        p.lock().corruption_event(CorruptionKind::Reported);
                    } else {
                        tracing::warn!(
                            node = link.node_id,
                            topic,
                            partition,
                            "offline replica reported to the controller"
                        );
                    }
                }
                return;
            }
            Ok(r) => {
                tracing::warn!(
                    node = link.node_id,
                    topic,
                    partition,
                    code = r.error_code,
                    "corrupt replica report refused"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => {
                tracing::debug!(node = link.node_id, error = %e, "corrupt replica report failed; retrying");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn send_move_report(
    link: &ClusterLink,
    rpc: &mut Rpc,
    topic: &str,
    partition: i32,
    phase: i8,
    successor: i32,
    log_end_offset: i64,
) {
    let Some(topic_id) = link.image().topic_by_name(topic).map(|t| t.topic_id) else {
        return;
    };
    let req = LeaderMoveReportRequest {
        broker_id: link.node_id,
        broker_epoch: link.broker_epoch.load(Ordering::Relaxed),
        topic_id,
        partition,
        phase,
        successor,
        log_end_offset,
    };
    for _ in 0..5 {
        match rpc.call(&req, 0, Duration::from_secs(5)).await {
            Ok(r) => {
                if r.error_code != 0 {
                    tracing::debug!(
                        node = link.node_id,
                        topic,
                        partition,
                        phase,
                        code = r.error_code,
                        "move report refused"
                    );
                }
                return;
            }
            Err(e) => {
                tracing::debug!(node = link.node_id, error = %e, "move report failed; retrying");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn tick_loop(state: Arc<BrokerState>, link: Arc<ClusterLink>) {
    let mut every = tokio::time::interval(Duration::from_millis(100));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let now = link.now_ms();
        let mut moved = false;
        for t in state.all_topics() {
            for p in &t.partitions {
                let mut st = p.lock();
                if let Some(l) = st.leader_state_mut() {
                    l.tick(now);
                    moved |= st.drive_leader();
                }
            }
        }
        if moved {
            state.notify_append();
        }
    }
}

/// Kafka's number for a security protocol in BrokerRegistration.
fn protocol_id(p: crate::security::SecurityProtocol) -> i16 {
    use crate::security::SecurityProtocol as P;
    match p {
        P::Ssl => 1,
        P::SaslPlaintext => 2,
        P::SaslSsl => 3,
        _ => 0,
    }
}
