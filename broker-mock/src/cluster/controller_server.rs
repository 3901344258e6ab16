//! The controller as a running component: its own listener, its metadata log on disk,
//! and the requests brokers send it.
//!
//! Requests served (each on a plain request/response connection):
//! - BrokerRegistration (62), BrokerHeartbeat (63): sessions, fencing and controlled
//!   shutdown, through [`Controller`]'s decisions;
//! - AlterPartition (56) v2–3: ISR changes proposed by leaders;
//! - LeaderMoveReport (Baton-private, see [`super::messages::move_report`]):
//!   planned-move steps;
//! - CreateTopics (19), DeleteTopics (20): forwarded by brokers, checked and answered
//!   by the same path as a standalone node's (`handlers/create_topics.rs`,
//!   `delete_topics.rs`), applied here as controller records;
//! - ElectLeaders (43), AlterPartitionReassignments (45): forwarded by brokers
//!   (authorized there), decided by the controller (`partition_admin.rs`);
//! - Fetch (1) of `__cluster_metadata` partition 0: the metadata log itself, which
//!   brokers replay as KRaft brokers do. Deviation: the `records` bytes are this
//!   crate's metadata entry framing ([`crate::controller::records`]), not record
//!   batches.
//!
//! Every decision's entries are appended to `<data_dir>/metadata.log` and synced
//! before the answer is sent or the entries are served; a restarted controller replays
//! the file (cutting a torn tail) and continues with the next controller epoch.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::time::Instant;

use baton_protocol::frame::DEFAULT_MAX_FRAME;
use baton_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionRequest, AlterPartitionResponse,
    AlterPartitionResponsePartitionData, AlterPartitionResponseTopicData,
    AlterUserScramCredentialsRequest, BrokerHeartbeatRequest, BrokerHeartbeatResponse,
    BrokerRegistrationRequest, BrokerRegistrationResponse, CreatableReplicaAssignment,
    CreatableTopicResult, CreateAclsRequest, CreateAclsResponse, CreateTopicsRequest,
    DeleteAclsRequest, DeleteAclsResponse, DeleteTopicsRequest, ElectLeadersRequest, FetchRequest,
    FetchResponse, FetchResponsePartitionData, FetchableTopicResponse,
};
use baton_protocol::sasl::{ScramCredential, ScramHash};
use baton_protocol::{ErrorCode, Message, RequestHeader, Uuid};
use bytes::{Bytes, BytesMut};
use tokio::sync::watch;

use super::messages::corrupt_report::{
    CorruptReplicaReportRequest, CorruptReplicaReportResponse, CORRUPT_REPLICA_REPORT_KEY,
};
use super::messages::move_report::{
    LeaderMoveReportRequest, LeaderMoveReportResponse, LEADER_MOVE_REPORT_KEY, PHASE_CAUGHT_UP,
};
use crate::acl::RequestContext;
use crate::clock::WallClock;
use crate::connections::ConnectionLimiter;
use crate::controller::{
    decode_log, AlterPartition, Controller, ControllerConfig, ControllerState, Heartbeat,
};
use crate::error::{BrokerError, LogError};
use crate::handlers::alter_user_scram_credentials::{alter as alter_scram, ScramTarget};
use crate::handlers::create_acls::{checked, result as acl_result};
use crate::handlers::create_topics::{create_topics, CheckedTopic, TopicCreator};
use crate::handlers::delete_acls::filter_result;
use crate::handlers::delete_topics::{delete_topics, TopicDeleter};
use crate::limits::BrokerLimits;
use crate::metrics::ControllerMetrics;
use crate::security::ListenerSecurity;
use crate::security::ScramStore;
use crate::server::{serve, Dispatch, ServeOptions};
use crate::state::Creation;
use crate::topic_limits::{check_totals, Refusal, Usage};
use crate::topics::random_uuid;
use crate::wire::{decode, encode, ClientId, DispatchError, Reply};

/// The metadata log's topic name in Fetch requests.
pub const METADATA_TOPIC: &str = "__cluster_metadata";
/// Most metadata bytes served per Fetch.
const MAX_FETCH_BYTES: usize = 1 << 20;
/// Longest metadata long-poll honoured.
const MAX_WAIT: Duration = Duration::from_secs(5);
/// How often time-based decisions (session expiry, move timeouts, preferred leaders)
/// run.
const TICK: Duration = Duration::from_millis(100);

/// How a controller is set up.
#[derive(Debug, Clone)]
pub struct ControllerOptions {
    /// Address to listen on (port 0 picks one).
    pub listen: SocketAddr,
    /// Directory for `metadata.log`; `None` keeps the log in memory only.
    pub data_dir: Option<PathBuf>,
    /// Session timeout, move timeout and preferred-leader restore.
    pub config: ControllerConfig,
    /// Partitions for CreateTopics with `num_partitions = -1`.
    pub default_num_partitions: i32,
    /// Replication factor for CreateTopics with `replication_factor = -1` (capped at
    /// the eligible brokers).
    pub default_replication_factor: i16,
    /// Ceilings on partitions and topics (and partitions per CreateTopics request);
    /// see [`BrokerLimits`].
    pub limits: crate::limits::BrokerLimits,
    /// The listener's security: plaintext by default, the cluster's inter-node
    /// security when it has one (nodes then connect with TLS and/or SASL).
    pub security: ListenerSecurity,
    /// Where the controller's Prometheus endpoint (`GET /metrics`) listens;
    /// `None`, the default, serves none.
    pub metrics_listen: Option<SocketAddr>,
    /// The environment the listener binds through, whose wall clock checks
    /// OAUTHBEARER token expiry; the process-wide one by default. (Broker leases
    /// and heartbeats are measured on tokio's monotonic clock.)
    pub env: baton_env::Env,
}

impl Default for ControllerOptions {
    fn default() -> Self {
        ControllerOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir: None,
            config: ControllerConfig::default(),
            default_num_partitions: 1,
            default_replication_factor: 3,
            limits: crate::limits::BrokerLimits::default(),
            security: ListenerSecurity::default(),
            metrics_listen: None,
            env: baton_env::Env::default(),
        }
    }
}

struct Inner {
    ctl: Controller,
    /// Encoded entries, by offset.
    encoded: Vec<Bytes>,
    file: Option<(PathBuf, File)>,
}

struct Core {
    inner: Mutex<Inner>,
    /// The next metadata offset, published after entries are durable.
    grew: watch::Sender<i64>,
    start: Instant,
    options: ControllerOptions,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core").finish_non_exhaustive()
    }
}

impl Core {
    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Persists the entries the last decisions wrote, then publishes them.
    fn commit(&self, inner: &mut Inner) {
        let entries = inner.ctl.take_entries();
        if entries.is_empty() {
            return;
        }
        let mut all = Vec::new();
        for e in &entries {
            let mut buf = Vec::new();
            e.encode(&mut buf);
            all.extend_from_slice(&buf);
            inner.encoded.push(Bytes::from(buf));
        }
        if let Some((path, file)) = &mut inner.file {
            if let Err(e) = file.write_all(&all).and_then(|_| file.sync_data()) {
                tracing::error!(path = %path.display(), error = %e, "writing the metadata log failed");
            }
        }
        let next = inner.ctl.state().next_offset();
        self.grew.send_replace(next);
    }
}

/// Starts controllers.
#[derive(Debug)]
pub struct ControllerServer;

impl ControllerServer {
    /// Replays the metadata log (if any), binds the listener and starts serving.
    ///
    /// # Cancel safety
    ///
    /// Cancelling before it completes leaves nothing running; a torn log tail already
    /// cut stays cut.
    pub async fn start(options: ControllerOptions) -> Result<ControllerHandle, BrokerError> {
        let tls = options.security.validate()?;
        let scram = Arc::new(ScramStore::default());
        for (user, credential) in options.security.sasl.scram_users() {
            scram
                .upsert(user, credential.clone())
                .map_err(|_| BrokerError::Config("too many SCRAM credentials".into()))?;
        }
        let listener = options
            .env
            .net
            .bind(options.listen)
            .await
            .map_err(|source| BrokerError::Bind {
                addr: options.listen,
                source,
            })?;
        let local_addr = listener.local_addr().map_err(|source| BrokerError::Bind {
            addr: options.listen,
            source,
        })?;
        let start = Instant::now();
        let opts = options.clone();
        let inner = baton_env::spawn_blocking(move || open_log(&opts))
            .await
            .map_err(|e| BrokerError::Config(format!("start-up task failed: {e}")))??;
        let next = inner.ctl.state().next_offset();
        let core = Arc::new(Core {
            inner: Mutex::new(inner),
            grew: watch::Sender::new(next),
            start,
            options,
        });
        let (stop_tx, stop_rx) = watch::channel(false);
        let limits = &core.options.limits;
        let serve_options = ServeOptions {
            name: "controller",
            max_frame_bytes: DEFAULT_MAX_FRAME,
            listener: "CONTROLLER".into(),
            limiter: ConnectionLimiter::new(limits.max_connections, limits.max_connections_per_ip),
            refusals: Arc::default(),
            // Connections are closed at once, with nothing owed to finish.
            shutdown_grace: Duration::ZERO,
            security: Arc::new(
                core.options
                    .security
                    .clone()
                    .on_clock(WallClock::of(&core.options.env)),
            ),
            scram,
            tls,
            metrics: None,
        };
        let dispatch = Arc::new(ControllerDispatch(core.clone()));
        let accept = tokio::spawn(serve(listener, dispatch, serve_options, stop_rx.clone()));
        let mut tasks = vec![accept];
        let mut metrics_addr = None;
        if let Some(addr) = core.options.metrics_listen {
            let c = core.clone();
            let render = Arc::new(move || controller_metrics(&c).to_prometheus());
            let (bound, task) = crate::metrics::http::start(addr, render, stop_rx.clone())
                .await
                .map_err(|source| BrokerError::Bind { addr, source })?;
            metrics_addr = Some(bound);
            tasks.push(task);
        }
        tasks.push(tokio::spawn(tick_loop(core.clone(), stop_rx)));
        tracing::info!(addr = %local_addr, metadata_offset = next, "controller listening");
        Ok(ControllerHandle {
            local_addr,
            core,
            stop: stop_tx,
            tasks,
            metrics_addr,
        })
    }
}

/// The controller's counters and its partitions and brokers now.
fn controller_metrics(core: &Core) -> ControllerMetrics {
    let inner = core.lock();
    let counters = inner.ctl.counters();
    let state = inner.ctl.state();
    ControllerMetrics {
        leader_elections: counters.leader_elections,
        unclean_leader_elections: counters.unclean_leader_elections,
        isr_shrinks: counters.isr_shrinks,
        isr_expands: counters.isr_expands,
        offline_partitions: state.partitions().filter(|p| p.is_offline()).count() as u64,
        partitions: state.partitions().count() as u64,
        active_brokers: state.brokers().filter(|b| !b.fenced).count() as u64,
    }
}

fn open_log(options: &ControllerOptions) -> Result<Inner, BrokerError> {
    let Some(dir) = &options.data_dir else {
        return Ok(Inner {
            ctl: Controller::new(1, options.config),
            encoded: Vec::new(),
            file: None,
        });
    };
    std::fs::create_dir_all(dir).map_err(|e| LogError::io(dir, e))?;
    let path = dir.join("metadata.log");
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(LogError::io(&path, e).into()),
    };
    let bad = |reason: String| BrokerError::Config(format!("{}: {reason}", path.display()));
    let decoded = decode_log(&bytes).map_err(|e| bad(e.to_string()))?;
    if decoded.torn_tail {
        tracing::warn!(path = %path.display(), cut = bytes.len() - decoded.valid_len, "cutting a torn metadata log tail");
    }
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| LogError::io(&path, e))?;
    file.set_len(decoded.valid_len as u64)
        .map_err(|e| LogError::io(&path, e))?;
    let mut file = file;
    use std::io::Seek;
    file.seek(std::io::SeekFrom::End(0))
        .map_err(|e| LogError::io(&path, e))?;
    let mut encoded = Vec::with_capacity(decoded.entries.len());
    let mut pos = 0;
    for _ in &decoded.entries {
        let (_, used) = crate::controller::MetadataLogEntry::decode(&bytes[pos..])
            .map_err(|e| bad(e.to_string()))?;
        encoded.push(Bytes::copy_from_slice(&bytes[pos..pos + used]));
        pos += used;
    }
    let n = decoded.entries.len();
    let ctl = if n == 0 {
        Controller::new(1, options.config)
    } else {
        Controller::recover(decoded.entries, options.config, 0).map_err(|e| bad(e.to_string()))?
    };
    tracing::info!(
        entries = n,
        epoch = ctl.controller_epoch(),
        "controller replayed its metadata log"
    );
    Ok(Inner {
        ctl,
        encoded,
        file: Some((path, file)),
    })
}

/// A running controller. Dropping it without [`ControllerHandle::shutdown`] aborts it
/// (what was synced stays on disk).
#[derive(Debug)]
pub struct ControllerHandle {
    local_addr: SocketAddr,
    core: Arc<Core>,
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// The metrics endpoint's bound address, if `metrics_listen` asked for one.
    metrics_addr: Option<SocketAddr>,
}

impl ControllerHandle {
    /// The address of the controller's Prometheus endpoint, if it has one.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// A snapshot of the controller's metrics (what its endpoint shows).
    pub fn metrics(&self) -> ControllerMetrics {
        controller_metrics(&self.core)
    }

    /// The listener's address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// A copy of the replicated state.
    pub fn state(&self) -> ControllerState {
        self.core.lock().ctl.state().clone()
    }

    /// The offset the next metadata entry gets.
    pub fn metadata_offset(&self) -> i64 {
        *self.core.grew.borrow()
    }

    /// Stops serving.
    ///
    /// # Cancel safety
    ///
    /// If cancelled, the tasks are aborted when the handle is dropped.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
    }
}

impl Drop for ControllerHandle {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

async fn tick_loop(core: Arc<Core>, mut stop: watch::Receiver<bool>) {
    let mut every = tokio::time::interval(TICK);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = every.tick() => {}
            _ = stop.changed() => return,
        }
        let c = core.clone();
        let _ = baton_env::spawn_blocking(move || {
            let now = c.now_ms();
            let mut inner = c.lock();
            inner.ctl.tick(now);
            c.commit(&mut inner);
        })
        .await;
    }
}

/// The controller's requests go to [`handle`].
#[derive(Debug)]
struct ControllerDispatch(Arc<Core>);

impl Dispatch for ControllerDispatch {
    async fn dispatch(
        &self,
        frame: Bytes,
        _ctx: &RequestContext,
        stop: &watch::Receiver<bool>,
    ) -> Result<Reply, DispatchError> {
        let bytes = handle(&self.0, frame, &mut stop.clone()).await?;
        Ok(Reply::Now(Some(bytes)))
    }
}

/// Runs a synchronous decision on the blocking pool.
async fn blocking<T: Send + 'static>(
    core: &Arc<Core>,
    f: impl FnOnce(&Core, &mut Inner) -> T + Send + 'static,
) -> Result<T, DispatchError> {
    let c = core.clone();
    baton_env::spawn_blocking(move || {
        let mut inner = c.lock();
        let out = f(&c, &mut inner);
        c.commit(&mut inner);
        out
    })
    .await
    .map_err(DispatchError::ControllerTask)
}

async fn handle(
    core: &Arc<Core>,
    frame: Bytes,
    stop: &mut watch::Receiver<bool>,
) -> Result<Bytes, DispatchError> {
    let (api_key, version, _) = RequestHeader::peek(&frame).map_err(DispatchError::Peek)?;
    match api_key {
        BrokerRegistrationRequest::API_KEY => {
            let (h, req) = decode::<BrokerRegistrationRequest>(frame, version)?;
            let resp = blocking(core, move |c, inner| register(c, inner, req)).await?;
            encode::<BrokerRegistrationRequest>(h.correlation_id, version, &resp)
        }
        BrokerHeartbeatRequest::API_KEY => {
            let (h, req) = decode::<BrokerHeartbeatRequest>(frame, version)?;
            let resp = blocking(core, move |c, inner| heartbeat(c, inner, req)).await?;
            encode::<BrokerHeartbeatRequest>(h.correlation_id, version, &resp)
        }
        AlterPartitionRequest::API_KEY => {
            let (h, req) = decode::<AlterPartitionRequest>(frame, version)?;
            let resp = blocking(core, move |_, inner| alter_partition(inner, req, version)).await?;
            encode::<AlterPartitionRequest>(h.correlation_id, version, &resp)
        }
        CORRUPT_REPLICA_REPORT_KEY => {
            let (h, req) = decode::<CorruptReplicaReportRequest>(frame, version)?;
            let resp = blocking(core, move |_, inner| corrupt_report(inner, req)).await?;
            encode::<CorruptReplicaReportRequest>(h.correlation_id, version, &resp)
        }
        LEADER_MOVE_REPORT_KEY => {
            let (h, req) = decode::<LeaderMoveReportRequest>(frame, version)?;
            let resp = blocking(core, move |_, inner| move_report(inner, req)).await?;
            encode::<LeaderMoveReportRequest>(h.correlation_id, version, &resp)
        }
        CreateTopicsRequest::API_KEY => {
            let (h, req) = decode::<CreateTopicsRequest>(frame, version)?;
            let resp = blocking(core, move |core, inner| {
                create_topics(&mut ControllerTopics { core, inner }, req)
            })
            .await?;
            encode::<CreateTopicsRequest>(h.correlation_id, version, &resp)
        }
        DeleteTopicsRequest::API_KEY => {
            let (h, req) = decode::<DeleteTopicsRequest>(frame, version)?;
            let resp = blocking(core, move |core, inner| {
                delete_topics(&mut ControllerTopics { core, inner }, req, version)
            })
            .await?;
            encode::<DeleteTopicsRequest>(h.correlation_id, version, &resp)
        }
        baton_protocol::messages::IncrementalAlterConfigsRequest::API_KEY => {
            use crate::handlers::incremental_alter_configs::alter_on_controller;
            use baton_protocol::messages::{
                IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
            };
            let (h, req) = decode::<IncrementalAlterConfigsRequest>(frame, version)?;
            let resp = blocking(core, move |_, inner| IncrementalAlterConfigsResponse {
                throttle_time_ms: 0,
                responses: req
                    .resources
                    .iter()
                    .map(|r| alter_on_controller(&mut inner.ctl, r, req.validate_only))
                    .collect(),
            })
            .await?;
            encode::<IncrementalAlterConfigsRequest>(h.correlation_id, version, &resp)
        }
        baton_protocol::messages::CreatePartitionsRequest::API_KEY => {
            use baton_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
            let (h, req) = decode::<CreatePartitionsRequest>(frame, version)?;
            let resp = blocking(core, move |core, inner| CreatePartitionsResponse {
                throttle_time_ms: 0,
                results: req
                    .topics
                    .iter()
                    .map(|t| create_partitions(core, inner, t, req.validate_only))
                    .collect(),
            })
            .await?;
            encode::<CreatePartitionsRequest>(h.correlation_id, version, &resp)
        }
        CreateAclsRequest::API_KEY => {
            let (h, req) = decode::<CreateAclsRequest>(frame, version)?;
            let resp = blocking(core, move |core, inner| create_acls(core, inner, req)).await?;
            encode::<CreateAclsRequest>(h.correlation_id, version, &resp)
        }
        DeleteAclsRequest::API_KEY => {
            let (h, req) = decode::<DeleteAclsRequest>(frame, version)?;
            let resp = blocking(core, move |_, inner| DeleteAclsResponse {
                throttle_time_ms: 0,
                filter_results: req
                    .filters
                    .iter()
                    .map(|f| filter_result(f, |filter| Ok(inner.ctl.remove_acls(filter))))
                    .collect(),
            })
            .await?;
            encode::<DeleteAclsRequest>(h.correlation_id, version, &resp)
        }
        AlterUserScramCredentialsRequest::API_KEY => {
            let (h, req) = decode::<AlterUserScramCredentialsRequest>(frame, version)?;
            let resp = blocking(core, move |_, inner| {
                alter_scram(&req, true, &mut ClusterScram(&mut inner.ctl))
            })
            .await?;
            encode::<AlterUserScramCredentialsRequest>(h.correlation_id, version, &resp)
        }
        ElectLeadersRequest::API_KEY => {
            let (h, req) = decode::<ElectLeadersRequest>(frame, version)?;
            let resp = blocking(core, move |_, inner| {
                super::partition_admin::elect_leaders(&mut inner.ctl, &req)
            })
            .await?;
            encode::<ElectLeadersRequest>(h.correlation_id, version, &resp)
        }
        AlterPartitionReassignmentsRequest::API_KEY => {
            let (h, req) = decode::<AlterPartitionReassignmentsRequest>(frame, version)?;
            let resp = blocking(core, move |_, inner| {
                super::partition_admin::alter_reassignments(&mut inner.ctl, &req)
            })
            .await?;
            encode::<AlterPartitionReassignmentsRequest>(h.correlation_id, version, &resp)
        }
        FetchRequest::API_KEY => {
            let (h, req) = decode::<FetchRequest>(frame, version)?;
            let resp = fetch_metadata(core, req, stop).await;
            encode::<FetchRequest>(h.correlation_id, version, &resp)
        }
        api_key => Err(DispatchError::ControllerApiKey {
            api_key,
            version,
            client_id: ClientId::peek(&frame),
        }),
    }
}

fn incarnation(id: &Uuid) -> u64 {
    let mut hi = [0u8; 8];
    let mut lo = [0u8; 8];
    hi.copy_from_slice(&id.0[..8]);
    lo.copy_from_slice(&id.0[8..]);
    u64::from_be_bytes(hi) ^ u64::from_be_bytes(lo).rotate_left(17)
}

fn register(
    core: &Core,
    inner: &mut Inner,
    req: BrokerRegistrationRequest,
) -> BrokerRegistrationResponse {
    let Some(l) = req.listeners.first() else {
        return BrokerRegistrationResponse {
            error_code: ErrorCode::InvalidRequest.code(),
            ..Default::default()
        };
    };
    let extra = req.listeners[1..]
        .iter()
        .map(|l| crate::controller::ListenerRecord {
            name: l.name.clone(),
            host: l.host.clone(),
            port: l.port,
        })
        .collect();
    match inner.ctl.register_broker_in_rack(
        req.broker_id,
        incarnation(&req.incarnation_id),
        &l.host,
        l.port,
        extra,
        req.rack.clone().filter(|r| !r.is_empty()),
        core.now_ms(),
    ) {
        Ok(epoch) => BrokerRegistrationResponse {
            broker_epoch: epoch,
            ..Default::default()
        },
        Err(e) => BrokerRegistrationResponse {
            error_code: e.error_code().code(),
            ..Default::default()
        },
    }
}

fn heartbeat(
    core: &Core,
    inner: &mut Inner,
    req: BrokerHeartbeatRequest,
) -> BrokerHeartbeatResponse {
    let hb = Heartbeat {
        broker_id: req.broker_id,
        broker_epoch: req.broker_epoch,
        metadata_offset: req.current_metadata_offset,
        want_shutdown: req.want_shut_down,
    };
    match inner.ctl.heartbeat(hb, core.now_ms()) {
        Ok(r) => BrokerHeartbeatResponse {
            is_caught_up: req.current_metadata_offset >= inner.ctl.state().next_offset(),
            is_fenced: r.fenced,
            should_shut_down: r.should_shut_down,
            ..Default::default()
        },
        Err(e) => BrokerHeartbeatResponse {
            error_code: e.error_code().code(),
            ..Default::default()
        },
    }
}

fn alter_partition(
    inner: &mut Inner,
    req: AlterPartitionRequest,
    version: i16,
) -> AlterPartitionResponse {
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let topic_id = if version >= 2 {
                t.topic_id
            } else {
                inner
                    .ctl
                    .state()
                    .topic_by_name(&t.topic_name)
                    .map_or(Uuid::ZERO, |x| x.topic_id)
            };
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let (new_isr, broker_epochs) = if version >= 3 {
                        let ids = p.new_isr_with_epochs.iter().map(|b| b.broker_id);
                        let epochs = p
                            .new_isr_with_epochs
                            .iter()
                            .filter(|b| b.broker_epoch >= 0)
                            .map(|b| (b.broker_id, b.broker_epoch));
                        (ids.collect(), epochs.collect())
                    } else {
                        (p.new_isr, Vec::new())
                    };
                    let ask = AlterPartition {
                        broker_id: req.broker_id,
                        topic_id,
                        partition: p.partition_index,
                        leader_epoch: p.leader_epoch,
                        partition_epoch: p.partition_epoch,
                        new_isr,
                        broker_epochs,
                    };
                    match inner.ctl.alter_partition(&ask) {
                        Ok(info) => AlterPartitionResponsePartitionData {
                            partition_index: p.partition_index,
                            error_code: 0,
                            leader_id: info.leader,
                            leader_epoch: info.leader_epoch,
                            isr: info.isr,
                            leader_recovery_state: 0,
                            partition_epoch: info.partition_epoch,
                        },
                        Err(e) => AlterPartitionResponsePartitionData {
                            partition_index: p.partition_index,
                            error_code: e.error_code().code(),
                            ..Default::default()
                        },
                    }
                })
                .collect();
            AlterPartitionResponseTopicData {
                topic_name: t.topic_name,
                topic_id,
                partitions,
            }
        })
        .collect();
    AlterPartitionResponse {
        topics,
        ..Default::default()
    }
}

/// A node's replica is corrupt: out of the ISR, and a new leader if it led.
fn corrupt_report(
    inner: &mut Inner,
    req: CorruptReplicaReportRequest,
) -> CorruptReplicaReportResponse {
    let registered = inner
        .ctl
        .state()
        .broker(req.broker_id)
        .is_some_and(|b| b.broker_epoch == req.broker_epoch);
    if !registered {
        return CorruptReplicaReportResponse {
            error_code: ErrorCode::StaleBrokerEpoch.code(),
        };
    }
    let r = inner
        .ctl
        .report_corrupt_replica(req.topic_id, req.partition, req.broker_id);
    match &r {
        Ok(p) => tracing::warn!(
            broker = req.broker_id,
            partition = req.partition,
            offset = req.offset,
            leader = p.leader,
            leader_epoch = p.leader_epoch,
            isr = ?p.isr,
            "corrupt replica reported"
        ),
        Err(e) => {
            tracing::warn!(broker = req.broker_id, error = %e, "corrupt replica report refused")
        }
    }
    CorruptReplicaReportResponse {
        error_code: r.err().map_or(0, |e| e.error_code().code()),
    }
}

fn move_report(inner: &mut Inner, req: LeaderMoveReportRequest) -> LeaderMoveReportResponse {
    let r = if req.phase == PHASE_CAUGHT_UP {
        inner
            .ctl
            .report_successor_caught_up(
                req.broker_id,
                req.topic_id,
                req.partition,
                req.successor,
                req.log_end_offset,
            )
            .map(|_| ())
    } else {
        inner.ctl.report_drain_started(
            req.broker_id,
            req.topic_id,
            req.partition,
            req.log_end_offset,
        )
    };
    LeaderMoveReportResponse {
        error_code: r.err().map_or(0, |e| e.error_code().code()),
    }
}

/// Forwarded CreatePartitions for one topic: the broker limits, then the
/// controller's checks and PartitionRecords.
fn create_partitions(
    core: &Core,
    inner: &mut Inner,
    t: &baton_protocol::messages::CreatePartitionsTopic,
    validate_only: bool,
) -> baton_protocol::messages::CreatePartitionsTopicResult {
    use crate::handlers::create_partitions::{check_limits, outcome};
    let state = inner.ctl.state();
    let have = state.topic_by_name(&t.name).map_or(0, |i| i.partitions);
    let added = usize::try_from(t.count.saturating_sub(have)).unwrap_or(0);
    let result =
        check_limits(&core.options.limits, state.partition_count(), added).and_then(|()| {
            let assignments: Option<Vec<Vec<i32>>> = t
                .assignments
                .as_ref()
                .map(|a| a.iter().map(|a| a.broker_ids.clone()).collect());
            inner
                .ctl
                .create_partitions(&t.name, t.count, assignments.as_deref(), validate_only)
        });
    outcome(&t.name, result)
}

/// The controller's side of CreateTopics and DeleteTopics: checked topics become
/// controller records, their replicas placed round-robin over the eligible brokers.
struct ControllerTopics<'a> {
    core: &'a Core,
    inner: &'a mut Inner,
}

impl TopicCreator for ControllerTopics<'_> {
    fn limits(&self) -> &BrokerLimits {
        &self.core.options.limits
    }

    fn default_num_partitions(&self) -> i32 {
        self.core.options.default_num_partitions
    }

    /// -1 is the default capped at the eligible brokers; any other factor is
    /// checked against the brokers when the topic is created.
    fn replication_factor(&self, requested: i16) -> Result<i16, Refusal> {
        let live = self.inner.ctl.state().eligible_brokers().len();
        Ok(match requested {
            -1 => (self.core.options.default_replication_factor as usize).min(live.max(1)) as i16,
            n => n,
        })
    }

    fn assigned_replication(&self, _: &[CreatableReplicaAssignment]) -> Result<i16, Refusal> {
        Err((
            ErrorCode::InvalidReplicaAssignment,
            "explicit assignments are not supported by this cluster".into(),
        ))
    }

    fn create(
        &mut self,
        topic: &CheckedTopic,
        creation: Creation,
    ) -> Result<CreatableTopicResult, Refusal> {
        let CheckedTopic {
            name,
            partitions,
            replication_factor,
            config,
        } = topic;
        let (partitions, replication_factor) = (*partitions, *replication_factor);
        let state = self.inner.ctl.state();
        if state.topic_by_name(name).is_some() {
            return Err((
                ErrorCode::TopicAlreadyExists,
                format!("Topic '{name}' already exists."),
            ));
        }
        let mut exists = Usage {
            topics: state.topic_count(),
            partitions: state.partition_count(),
        };
        if let Creation::ValidateOnly { earlier } = creation {
            exists = exists.plus(earlier);
        }
        check_totals(self.limits(), exists, partitions as usize)?;
        let mut result = CreatableTopicResult {
            name: name.to_owned(),
            num_partitions: partitions,
            replication_factor,
            configs: Some(Vec::new()),
            ..Default::default()
        };
        if let Creation::ValidateOnly { .. } = creation {
            return Ok(result);
        }
        let id = random_uuid();
        let configs = config
            .entries
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        self.inner
            .ctl
            .create_topic(name, id, partitions, replication_factor.into(), configs)
            .map_err(|e| (e.error_code(), e.to_string()))?;
        result.topic_id = id;
        Ok(result)
    }
}

impl TopicDeleter for ControllerTopics<'_> {
    fn topic_name(&self, id: Uuid) -> Option<String> {
        self.inner.ctl.state().topic(id).map(|t| t.name.clone())
    }

    fn delete(&mut self, name: &str) -> Result<Uuid, ErrorCode> {
        self.inner
            .ctl
            .delete_topic(name)
            .map_err(|e| e.error_code())
    }
}

/// Forwarded AlterUserScramCredentials write the cluster's metadata log: each
/// change becomes a UserScramCredential or RemoveUserScramCredential record.
struct ClusterScram<'a>(&'a mut Controller);

impl ScramTarget for ClusterScram<'_> {
    fn has(&self, user: &str, hash: ScramHash) -> bool {
        let key = (user.to_owned(), hash.kafka_type());
        self.0.state().scram_credentials().contains_key(&key)
    }

    fn delete(&mut self, user: &str, hash: ScramHash) {
        self.0.remove_scram(user, hash);
    }

    fn upsert(&mut self, user: &str, credential: ScramCredential) -> bool {
        self.0
            .upsert_scram(user, credential, crate::security::MAX_SCRAM_CREDENTIALS)
    }
}

/// Forwarded CreateAcls: each creation checked as a standalone node checks it,
/// within `max_acls` for the cluster, then written as an ACL record.
fn create_acls(core: &Core, inner: &mut Inner, req: CreateAclsRequest) -> CreateAclsResponse {
    let max = core.options.limits.max_acls;
    let results = req
        .creations
        .iter()
        .map(|c| match checked(c) {
            Err(refused) => refused,
            Ok(binding) => {
                let acls = inner.ctl.state().acls();
                if !acls.contains(&binding) && acls.len() >= max {
                    let message = format!("the cluster holds its limit of {max} ACLs (max_acls)");
                    return acl_result(ErrorCode::PolicyViolation, Some(message));
                }
                inner.ctl.add_acl(binding);
                acl_result(ErrorCode::None, None)
            }
        })
        .collect();
    CreateAclsResponse {
        throttle_time_ms: 0,
        results,
    }
}

async fn fetch_metadata(
    core: &Arc<Core>,
    req: FetchRequest,
    stop: &mut watch::Receiver<bool>,
) -> FetchResponse {
    let offset = req
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .map_or(0, |p| p.fetch_offset);
    let max_bytes = req
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .map_or(MAX_FETCH_BYTES, |p| p.partition_max_bytes.max(1) as usize)
        .min(req.max_bytes.max(1) as usize)
        .min(MAX_FETCH_BYTES);
    let wait = Duration::from_millis(req.max_wait_ms.max(0) as u64).min(MAX_WAIT);
    let mut grew = core.grew.subscribe();
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let next = *grew.borrow_and_update();
        if offset != next || tokio::time::Instant::now() >= deadline {
            break;
        }
        tokio::select! {
            r = grew.changed() => if r.is_err() { break },
            _ = tokio::time::sleep_until(deadline) => break,
            _ = stop.changed() => break,
        }
    }
    let inner = core.lock();
    let next = inner.ctl.state().next_offset();
    let mut data = FetchResponsePartitionData {
        partition_index: 0,
        high_watermark: next,
        last_stable_offset: next,
        log_start_offset: 0,
        preferred_read_replica: -1,
        records: Some(Bytes::new()),
        ..Default::default()
    };
    if offset < 0 || offset > next {
        data.error_code = ErrorCode::OffsetOutOfRange.code();
    } else {
        let mut out = BytesMut::new();
        for e in &inner.encoded[offset as usize..] {
            if !out.is_empty() && out.len() + e.len() > max_bytes {
                break;
            }
            out.extend_from_slice(e);
        }
        data.records = Some(out.freeze());
    }
    FetchResponse {
        responses: vec![FetchableTopicResponse {
            topic: METADATA_TOPIC.to_owned(),
            partitions: vec![data],
            ..Default::default()
        }],
        ..Default::default()
    }
}
