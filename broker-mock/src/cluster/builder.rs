//! `ClusterBuilder`: the settings of an in-process cluster, and starting it (the
//! controller first, then nodes `1..=n` behind their fault proxies).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::handle::NodeSlot;
use super::{Cluster, ControllerOptions, ControllerServer, Node, NodeOptions, TruncationMode};
use crate::controller::ControllerConfig;
use crate::error::BrokerError;
use crate::inter_node::InterNodeSecurity;
use crate::listener_config::ListenerConfig;

impl Cluster {
    /// A builder with 3 in-memory brokers.
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::default()
    }
}

/// Builds a [`Cluster`].
#[derive(Debug, Clone)]
pub struct ClusterBuilder {
    brokers: usize,
    data_dir: Option<PathBuf>,
    controller: ControllerConfig,
    replica_lag_time_max: Duration,
    default_min_insync_replicas: usize,
    default_replication_factor: i16,
    default_num_partitions: i32,
    heartbeat_interval: Duration,
    segment_bytes: Option<u64>,
    listen_ip: std::net::IpAddr,
    base_port: u16,
    advertised_host: Option<String>,
    truncation_mode: TruncationMode,
    metadata_fetch_max_bytes: i32,
    network_proxies: bool,
    scrub_bytes_per_sec: u64,
    /// Every node's log cleaner settings (`None`: the broker default).
    cleaner: Option<crate::CleanerConfig>,
    /// Every node's group coordinator settings (`None`: the broker default).
    groups: Option<crate::group::GroupConfig>,
    limits: crate::limits::BrokerLimits,
    /// Every node's retention defaults and maintenance interval.
    retention: crate::log::LogRetention,
    authorizer: Option<crate::acl::AuthorizerConfig>,
    /// A further listener every node gets (its address set per node).
    client_listener: Option<ListenerConfig>,
    /// How nodes and the controller secure the traffic between them.
    inter_node: Option<std::sync::Arc<InterNodeSecurity>>,
    /// Racks by node id (`broker.rack`).
    racks: std::collections::BTreeMap<i32, String>,
    /// Every node's replica selector (`replica.selector.class`).
    replica_selector: crate::replica_selector::ReplicaSelector,
    /// Where the metrics endpoints listen: node i on the port + i - 1, the
    /// controller on the port + n (all on free ports for port 0).
    metrics_listen: Option<SocketAddr>,
}

impl Default for ClusterBuilder {
    fn default() -> Self {
        ClusterBuilder {
            brokers: 3,
            data_dir: None,
            controller: ControllerConfig {
                session_timeout_ms: 6_000,
                move_timeout_ms: 30_000,
                auto_preferred_leader: true,
            },
            replica_lag_time_max: Duration::from_secs(10),
            default_min_insync_replicas: 1,
            default_replication_factor: 3,
            default_num_partitions: 1,
            heartbeat_interval: Duration::from_millis(200),
            segment_bytes: None,
            listen_ip: std::net::IpAddr::from([127, 0, 0, 1]),
            base_port: 0,
            advertised_host: None,
            truncation_mode: TruncationMode::FetchDivergingEpoch,
            metadata_fetch_max_bytes: 1 << 20,
            limits: crate::limits::BrokerLimits::default(),
            retention: crate::log::LogRetention::default(),
            network_proxies: true,
            scrub_bytes_per_sec: 0,
            cleaner: None,
            groups: None,
            authorizer: None,
            client_listener: None,
            inter_node: None,
            racks: std::collections::BTreeMap::new(),
            replica_selector: crate::replica_selector::ReplicaSelector::LeaderOnly,
            metrics_listen: None,
        }
    }
}

impl ClusterBuilder {
    /// Serves a Prometheus endpoint (`GET /metrics`) per node and one for the
    /// controller: node i on `addr`'s port plus i - 1, the controller on its
    /// port plus n; port 0 gives each a free port (see `NodeRef::metrics_addr`
    /// and `Cluster::controller_metrics_addr`). Off by default.
    pub fn metrics_listen(mut self, addr: SocketAddr) -> Self {
        self.metrics_listen = Some(addr);
        self
    }

    /// The metrics address of the component at `offset` (node i at i - 1, the
    /// controller at n).
    fn metrics_at(&self, offset: usize) -> Option<SocketAddr> {
        self.metrics_listen.map(|mut a| {
            if a.port() != 0 {
                a.set_port(a.port().saturating_add(offset as u16));
            }
            a
        })
    }

    /// Gives every node a further listener for clients, named and secured as
    /// `listener` says (for example `SASL_SSL` with users and a certificate valid
    /// for the listen IP); each node binds it on the cluster's listen IP and a free
    /// port, kept across restarts. Metadata asked on it names every node by its
    /// endpoint of this listener, so clients stay on it; the nodes replicate and
    /// reach the controller over their first listener, which fault injection
    /// (proxies, partitions) acts on. [`Cluster::listener_bootstrap`] gives the
    /// bootstrap servers. SCRAM users of `listener` are users of every node.
    pub fn client_listener(mut self, listener: ListenerConfig) -> Self {
        self.client_listener = Some(listener);
        self
    }

    /// Secures the cluster's own traffic: every node's first listener (named
    /// `INTERNAL`, the one replication and fault injection use) and the
    /// controller's listener serve `security.listener`, and nodes connect to each
    /// other and to the controller with TLS and/or SASL as `security` says
    /// (replication fetches, registration, heartbeats, metadata, reports,
    /// forwarded admin requests). With a TLS protocol the cluster runs without
    /// fault proxies (they read Kafka frames, which TLS hides), so network
    /// faults (partitions, latency, per-API errors) do nothing on it; node kills,
    /// stops and restarts still work. Clients then use a
    /// [`client_listener`](Self::client_listener), or this protocol on
    /// [`Cluster::bootstrap`].
    pub fn inter_node_security(mut self, security: InterNodeSecurity) -> Self {
        self.inter_node = Some(std::sync::Arc::new(security));
        self
    }

    /// Puts node `node_id` in `rack` (Kafka's `broker.rack`): reported in Metadata
    /// and DescribeCluster, and used by the rack-aware replica selector. Nodes
    /// without one have no rack.
    pub fn rack(mut self, node_id: i32, rack: impl Into<String>) -> Self {
        self.racks.insert(node_id, rack.into());
        self
    }

    /// Sets every node's replica selector (Kafka's `replica.selector.class`);
    /// [`ReplicaSelector::RackAware`](crate::ReplicaSelector::RackAware) sends
    /// consumers with a rack id to an in-sync follower of their rack (KIP-392).
    /// Default: the leader only.
    pub fn replica_selector(mut self, selector: crate::replica_selector::ReplicaSelector) -> Self {
        self.replica_selector = selector;
        self
    }

    /// Number of broker nodes (ids `1..=n`); default 3.
    pub fn brokers(mut self, n: usize) -> Self {
        self.brokers = n.max(1);
        self
    }

    /// Keeps the controller's metadata log in `<dir>/controller` and node `i`'s data in
    /// `<dir>/node-<i>`. Without it everything is in memory (a restarted node then
    /// starts empty and re-replicates).
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.data_dir = Some(dir.into());
        self
    }

    /// Keeps everything in memory (the default).
    pub fn in_memory(mut self) -> Self {
        self.data_dir = None;
        self
    }

    /// `broker.session.timeout.ms`: a node without heartbeats for this long is fenced
    /// and its leaderships move. Default 6 s.
    pub fn session_timeout(mut self, t: Duration) -> Self {
        self.controller.session_timeout_ms = t.as_millis() as u64;
        self
    }

    /// How long a planned move may take before it is abandoned. Default 30 s.
    pub fn move_timeout(mut self, t: Duration) -> Self {
        self.controller.move_timeout_ms = t.as_millis() as u64;
        self
    }

    /// Whether preferred leaders are restored automatically. Default on.
    pub fn auto_preferred_leader(mut self, on: bool) -> Self {
        self.controller.auto_preferred_leader = on;
        self
    }

    /// `replica.lag.time.max.ms`. Default 10 s.
    pub fn replica_lag_time_max(mut self, t: Duration) -> Self {
        self.replica_lag_time_max = t;
        self
    }

    /// `min.insync.replicas` for topics that do not set it. Default 1.
    pub fn default_min_insync_replicas(mut self, n: usize) -> Self {
        self.default_min_insync_replicas = n.max(1);
        self
    }

    /// Replication factor for topics created with -1. Default 3 (capped at the live
    /// brokers).
    pub fn default_replication_factor(mut self, n: i16) -> Self {
        self.default_replication_factor = n.max(1);
        self
    }

    /// Partitions for topics created with -1. Default 1.
    pub fn default_num_partitions(mut self, n: i32) -> Self {
        self.default_num_partitions = n.max(1);
        self
    }

    /// Segment roll size of every node's logs.
    pub fn segment_bytes(mut self, n: u64) -> Self {
        self.segment_bytes = Some(n);
        self
    }

    /// Sets every node's retention defaults and how often its maintenance task
    /// applies retention (see [`LogRetention`](crate::LogRetention)).
    pub fn retention(mut self, retention: crate::log::LogRetention) -> Self {
        self.retention = retention;
        self
    }

    /// The IP every listener binds (default 127.0.0.1).
    pub fn listen_ip(mut self, ip: std::net::IpAddr) -> Self {
        self.listen_ip = ip;
        self
    }

    /// Fixed ports: node `i` listens on `base + i - 1` and the controller on
    /// `base + n`. Default 0: every listener picks a free port.
    pub fn base_port(mut self, base: u16) -> Self {
        self.base_port = base;
        self
    }

    /// The host name nodes advertise to clients (default: the listen IP).
    pub fn advertised_host(mut self, host: impl Into<String>) -> Self {
        self.advertised_host = Some(host.into());
        self
    }

    /// How returning followers find their divergence point: the diverging epoch in
    /// Fetch responses (default) or OffsetForLeaderEpoch before the first fetch.
    pub fn truncation_mode(mut self, mode: TruncationMode) -> Self {
        self.truncation_mode = mode;
        self
    }

    /// Most metadata log bytes a node asks for per fetch (default 1 MiB); small values
    /// make nodes replay the log in many steps.
    pub fn metadata_fetch_max_bytes(mut self, n: i32) -> Self {
        self.metadata_fetch_max_bytes = n.max(1);
        self
    }

    /// Whether every listener sits behind a fault proxy (default on; see
    /// [`crate::faults`]). Without proxies the network faults do nothing.
    pub fn network_proxies(mut self, on: bool) -> Self {
        self.network_proxies = on;
        self
    }

    /// Runs every node's background scrubber at `bytes_per_sec` (0, the default, turns
    /// it off): stored batches are re-read and checked even when nobody fetches them.
    pub fn scrub_rate(mut self, bytes_per_sec: u64) -> Self {
        self.scrub_bytes_per_sec = bytes_per_sec;
        self
    }

    /// Turns ACL authorization on for every node. The ACLs live in the controller's
    /// metadata log (CreateAcls and DeleteAcls are forwarded to it), so each node
    /// decides with the same bindings. With a SASL
    /// [`inter_node_security`](Self::inter_node_security), the inter-broker user
    /// is added to the super users (as Kafka deployments list it in
    /// `super.users`); otherwise the nodes' replication traffic is unauthenticated
    /// (`User:ANONYMOUS`) and needs ClusterAction on the cluster, from an ACL, a
    /// super user or `allow_everyone_if_no_acl_found`.
    pub fn authorizer(mut self, authorizer: crate::acl::AuthorizerConfig) -> Self {
        self.authorizer = Some(authorizer);
        self
    }

    /// Every node's log cleaner (compaction) settings; see
    /// [`CleanerConfig`](crate::CleanerConfig).
    pub fn cleaner(mut self, cleaner: crate::CleanerConfig) -> Self {
        self.cleaner = Some(cleaner);
        self
    }

    /// Every node's group coordinator settings (session and heartbeat settings
    /// of consumer groups, `group.consumer.migration.policy`, ...).
    pub fn groups(mut self, groups: crate::group::GroupConfig) -> Self {
        self.groups = Some(groups);
        self
    }

    /// Resource limits of the controller (partitions, topics) and of every node
    /// (groups, producers, connections); see [`BrokerLimits`](crate::BrokerLimits).
    pub fn limits(mut self, limits: crate::limits::BrokerLimits) -> Self {
        self.limits = limits;
        self
    }

    fn port(&self, offset: usize) -> u16 {
        if self.base_port == 0 {
            0
        } else {
            self.base_port.saturating_add(offset as u16)
        }
    }

    /// Starts the controller and every node, and waits until all nodes are
    /// registered and unfenced.
    ///
    /// # Cancel safety
    ///
    /// Cancelling drops what was started so far (killing it).
    pub async fn start(self) -> Result<Cluster, BrokerError> {
        // The fault proxies read Kafka frames, which TLS hides from them.
        let tls_inside = self
            .inter_node
            .as_ref()
            .is_some_and(|s| s.listener.protocol.uses_tls());
        let proxied = self.network_proxies && !tls_inside;
        let private = |port: u16| if proxied { 0 } else { port };
        let mut faults = crate::faults::ClusterFaults::default();
        let controller_opts = ControllerOptions {
            listen: SocketAddr::new(self.listen_ip, private(self.port(self.brokers))),
            data_dir: self.data_dir.as_ref().map(|d| d.join("controller")),
            config: self.controller,
            default_num_partitions: self.default_num_partitions,
            default_replication_factor: self.default_replication_factor,
            limits: self.limits.clone(),
            metrics_listen: self.metrics_at(self.brokers),
            security: self
                .inter_node
                .as_ref()
                .map(|s| s.listener.clone())
                .unwrap_or_default(),
            env: baton_env::Env::default(),
        };
        if let Some(s) = &self.inter_node {
            s.validate()?;
        }
        let controller = ControllerServer::start(controller_opts.clone()).await?;
        let caddr = controller.local_addr();
        let mut dial_controller = caddr;
        if proxied {
            let listen = SocketAddr::new(self.listen_ip, self.port(self.brokers));
            let p = crate::faults::proxy::Proxy::start(listen, caddr).await?;
            dial_controller = p.addr;
            faults.controller = Some(p);
        }
        let mut nodes = Vec::new();
        let corruption_log = std::sync::Arc::new(crate::corruption::CorruptionLog::new());
        for id in 1..=self.brokers as i32 {
            let mut opts = NodeOptions::new(id, dial_controller);
            opts.heartbeat_interval = self.heartbeat_interval;
            opts.replica_lag_time_max_ms = self.replica_lag_time_max.as_millis() as u64;
            opts.default_min_insync_replicas = self.default_min_insync_replicas;
            opts.broker.data_dir = self.data_dir.as_ref().map(|d| d.join(format!("node-{id}")));
            opts.broker.default_num_partitions = self.default_num_partitions;
            opts.broker.limits = self.limits.clone();
            opts.broker.retention = self.retention;
            opts.broker.rack = self.racks.get(&id).cloned();
            opts.broker.replica_selector = self.replica_selector;
            opts.broker.authorizer = self.authorizer.clone().map(|mut a| {
                let inter_broker = self.inter_node.as_ref().and_then(|s| s.principal());
                if let Some(p) = inter_broker.filter(|p| !a.super_users.contains(p)) {
                    a.super_users.push(p);
                }
                a
            });
            opts.broker.listen =
                SocketAddr::new(self.listen_ip, private(self.port(id as usize - 1)));
            let mut proxy = None;
            if proxied {
                let listen = SocketAddr::new(self.listen_ip, self.port(id as usize - 1));
                let p = crate::faults::proxy::Proxy::start(listen, opts.broker.listen).await?;
                opts.broker.advertised_port = Some(p.addr.port());
                proxy = Some(p);
            }
            opts.broker.advertised_host = self.advertised_host.clone();
            opts.truncation_mode = self.truncation_mode;
            opts.metadata_fetch_max_bytes = self.metadata_fetch_max_bytes;
            opts.scrub_bytes_per_sec = self.scrub_bytes_per_sec;
            opts.corruption_log = corruption_log.clone();
            opts.broker.metrics_listen = self.metrics_at(id as usize - 1);
            if let Some(n) = self.segment_bytes {
                opts.broker.segment_bytes = n;
            }
            if let Some(c) = &self.cleaner {
                opts.broker.cleaner = c.clone();
            }
            if let Some(g) = &self.groups {
                opts.broker.groups = g.clone();
            }
            if let Some(s) = &self.inter_node {
                opts.broker.security = s.listener.clone();
                opts.broker.listener_name = Some("INTERNAL".into());
                opts.inter_node = Some(s.clone());
            }
            if let Some(l) = &self.client_listener {
                let mut l = l.clone();
                l.listen = SocketAddr::new(self.listen_ip, 0);
                l.advertised_host = self.advertised_host.clone();
                opts.broker.extra_listeners = vec![l];
            }
            let handle = Node::start(opts.clone()).await?;
            opts.broker.listen = handle.local_addr();
            handle.keep_extra_ports(&mut opts);
            if let Some(p) = proxy {
                p.shared.set_target(handle.local_addr());
                faults.nodes.insert(id, p);
            }
            nodes.push(NodeSlot {
                id,
                options: opts,
                handle: Some(handle),
                torn_on_restart: Vec::new(),
            });
        }
        let mut cluster = Cluster {
            controller: Some(controller),
            controller_options: Box::new(ControllerOptions {
                listen: caddr,
                ..controller_opts
            }),
            nodes,
            started: std::time::Instant::now(),
            timeline: Vec::new(),
            faults,
        };
        cluster.record(format!("cluster of {} nodes started", cluster.nodes.len()));
        cluster
            .wait_for(Duration::from_secs(60), |c| {
                c.unfenced_brokers().len() == c.nodes.len()
            })
            .await
            .map_err(|_| BrokerError::Config("nodes did not register in time".into()))?;
        Ok(cluster)
    }
}
