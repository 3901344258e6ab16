//! Broker configuration.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use baton_protocol::frame::DEFAULT_MAX_FRAME;

use crate::acl::AuthorizerConfig;
use crate::group::GroupConfig;
use crate::limits::BrokerLimits;
use crate::listener_config::ListenerConfig;
use crate::security::ListenerSecurity;

/// Default size at which the active segment is rolled: 64 MiB (Kafka uses 1 GiB; a
/// test broker keeps segments smaller so rolls happen in practice).
pub const DEFAULT_SEGMENT_BYTES: u64 = 64 * 1024 * 1024;

/// Default spacing of sparse offset index entries, Kafka's `index.interval.bytes`.
pub const DEFAULT_INDEX_INTERVAL_BYTES: u32 = 4096;

/// How a broker node is set up. Fields are public; the `with_*` methods are shortcuts.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// This node's id, reported in Metadata and used as the leader of every partition.
    pub node_id: i32,
    /// Address to listen on; port 0 picks a free port (see `BrokerHandle::local_addr`).
    pub listen: SocketAddr,
    /// Host name clients are told to connect to; `None` uses the listen IP.
    pub advertised_host: Option<String>,
    /// Port clients are told to connect to; `None` uses the listen port (a fault
    /// proxy in front of the listener sets it).
    pub advertised_port: Option<u16>,
    /// Directory holding topics and their logs; `None` keeps everything in memory.
    pub data_dir: Option<PathBuf>,
    /// Whether Metadata and Produce create unknown topics (Kafka's
    /// `auto.create.topics.enable`); off by default.
    pub auto_create_topics: bool,
    /// Partition count for auto-created topics and CreateTopics with `num_partitions = -1`.
    pub default_num_partitions: i32,
    /// Largest request frame accepted; larger ones close the connection.
    pub max_frame_bytes: usize,
    /// Size at which the active on-disk segment is rolled.
    pub segment_bytes: u64,
    /// Bytes appended between two sparse offset index entries.
    pub index_interval_bytes: u32,
    /// Group coordinator settings (session timeout bounds, initial rebalance delay,
    /// `__consumer_offsets` partitions).
    pub groups: GroupConfig,
    /// Ceilings on partitions, topics, groups, producers and connections (see
    /// [`BrokerLimits`](crate::BrokerLimits)).
    pub limits: BrokerLimits,
    /// The listener's security protocol and SASL users (plaintext by default).
    /// `Debug` prints user names, never passwords or keys.
    pub security: ListenerSecurity,
    /// ACL authorization (StandardAuthorizer semantics); `None`, the default,
    /// allows every request and answers the ACL APIs with SECURITY_DISABLED.
    pub authorizer: Option<AuthorizerConfig>,
    /// The name of the listener set up by `listen`, `advertised_*` and `security`;
    /// `None` names it after its security protocol (`PLAINTEXT`, `SASL_SSL`, ...),
    /// as Kafka's default listener names do.
    pub listener_name: Option<String>,
    /// The node's further listeners, each with its own name, address and security
    /// (Kafka's `listeners=PLAINTEXT://...,SASL_SSL://...`). Connection limits
    /// apply across all listeners together.
    pub extra_listeners: Vec<ListenerConfig>,
    /// Longest transaction timeout a producer may ask for (Kafka's
    /// `transaction.max.timeout.ms`, 15 minutes); longer ones are refused with
    /// INVALID_TRANSACTION_TIMEOUT.
    pub transaction_max_timeout_ms: i32,
    /// Partitions of `__transaction_state` when this node creates it (Kafka's
    /// `transaction.state.log.num.partitions`); `None`, the default, gives it as
    /// many as `__consumer_offsets` (`groups.offsets_topic_partitions`).
    pub transaction_state_partitions: Option<i32>,
    /// The log cleaner (compaction of `cleanup.policy=compact` topics): Kafka's
    /// `log.cleaner.*` settings. Its memory bound is
    /// [`BrokerLimits::cleaner_dedupe_buffer_bytes`](crate::BrokerLimits).
    pub cleaner: crate::log::compaction::CleanerConfig,
    /// Retention defaults for topics that set none, and how often the maintenance
    /// task applies them (see [`LogRetention`](crate::log::LogRetention)).
    pub retention: crate::log::LogRetention,
    /// The node's rack (Kafka's `broker.rack`), reported in Metadata and
    /// DescribeCluster and used by the rack-aware replica selector (KIP-392);
    /// `None`, the default, for none.
    pub rack: Option<String>,
    /// Which replica a leader tells a consumer with a rack to fetch from (Kafka's
    /// `replica.selector.class`); the leader only by default.
    pub replica_selector: crate::replica_selector::ReplicaSelector,
    /// Where the Prometheus text endpoint (`GET /metrics`) listens; `None`, the
    /// default, serves none (see `BrokerHandle::metrics_addr`; port 0 picks one).
    pub metrics_listen: Option<SocketAddr>,
    /// The environment the listeners bind through ([`baton_env::Env`]); the
    /// process-wide one by default (tokio's TCP unless a simulation installed its
    /// own). Its wall clock is this node's: record timestamps, group, transaction
    /// and fetch-session deadlines, OAUTHBEARER token expiry. Randomness and
    /// blocking work are the process's.
    pub env: baton_env::Env,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            node_id: 0,
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            advertised_host: None,
            advertised_port: None,
            data_dir: None,
            auto_create_topics: false,
            default_num_partitions: 1,
            max_frame_bytes: DEFAULT_MAX_FRAME,
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            index_interval_bytes: DEFAULT_INDEX_INTERVAL_BYTES,
            groups: GroupConfig::default(),
            limits: BrokerLimits::default(),
            security: ListenerSecurity::default(),
            authorizer: None,
            listener_name: None,
            extra_listeners: Vec::new(),
            transaction_max_timeout_ms: 15 * 60 * 1000,
            transaction_state_partitions: None,
            cleaner: Default::default(),
            retention: crate::log::LogRetention::default(),
            rack: None,
            replica_selector: crate::replica_selector::ReplicaSelector::LeaderOnly,
            metrics_listen: None,
            env: baton_env::Env::default(),
        }
    }
}

impl BrokerConfig {
    /// An in-memory broker on `127.0.0.1:0`.
    pub fn in_memory() -> Self {
        BrokerConfig::default()
    }

    /// A broker on `127.0.0.1:0` storing its data in `dir`.
    pub fn on_disk(dir: impl Into<PathBuf>) -> Self {
        BrokerConfig {
            data_dir: Some(dir.into()),
            ..BrokerConfig::default()
        }
    }

    /// Sets the listen address.
    pub fn with_listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }

    /// Sets the node's rack (`broker.rack`).
    pub fn with_rack(mut self, rack: impl Into<String>) -> Self {
        self.rack = Some(rack.into());
        self
    }

    /// Sets the replica selector (`replica.selector.class`).
    pub fn with_replica_selector(
        mut self,
        selector: crate::replica_selector::ReplicaSelector,
    ) -> Self {
        self.replica_selector = selector;
        self
    }

    /// Sets the node id.
    pub fn with_node_id(mut self, id: i32) -> Self {
        self.node_id = id;
        self
    }

    /// Sets the advertised host.
    pub fn with_advertised_host(mut self, host: impl Into<String>) -> Self {
        self.advertised_host = Some(host.into());
        self
    }

    /// Enables or disables topic auto-creation.
    pub fn with_auto_create_topics(mut self, on: bool) -> Self {
        self.auto_create_topics = on;
        self
    }

    /// Sets the default partition count.
    pub fn with_default_num_partitions(mut self, n: i32) -> Self {
        self.default_num_partitions = n;
        self
    }

    /// Sets the maximum request frame size.
    pub fn with_max_frame_bytes(mut self, n: usize) -> Self {
        self.max_frame_bytes = n;
        self
    }

    /// Sets the segment roll size.
    pub fn with_segment_bytes(mut self, n: u64) -> Self {
        self.segment_bytes = n;
        self
    }

    /// Sets the resource limits.
    pub fn with_limits(mut self, limits: BrokerLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets the listener's security (protocol, SASL mechanisms and users).
    pub fn with_security(mut self, security: ListenerSecurity) -> Self {
        self.security = security;
        self
    }

    /// Turns ACL authorization on with `authorizer`'s super users and fallback.
    pub fn with_authorizer(mut self, authorizer: AuthorizerConfig) -> Self {
        self.authorizer = Some(authorizer);
        self
    }

    /// Names the listener set up by `listen` and `security`.
    pub fn with_listener_name(mut self, name: impl Into<String>) -> Self {
        self.listener_name = Some(name.into());
        self
    }

    /// Adds a listener.
    pub fn with_listener(mut self, listener: ListenerConfig) -> Self {
        self.extra_listeners.push(listener);
        self
    }

    /// Every listener of the node, the one set up by `listen` and `security`
    /// first.
    pub fn listeners(&self) -> Vec<ListenerConfig> {
        let name = self
            .listener_name
            .clone()
            .unwrap_or_else(|| self.security.protocol.name().to_owned());
        let first = ListenerConfig {
            name,
            listen: self.listen,
            advertised_host: self.advertised_host.clone(),
            advertised_port: self.advertised_port,
            security: self.security.clone(),
        };
        std::iter::once(first)
            .chain(self.extra_listeners.iter().cloned())
            .collect()
    }

    /// Sets the index interval.
    pub fn with_index_interval_bytes(mut self, n: u32) -> Self {
        self.index_interval_bytes = n;
        self
    }

    /// Sets the log cleaner's settings.
    pub fn with_cleaner(mut self, cleaner: crate::CleanerConfig) -> Self {
        self.cleaner = cleaner;
        self
    }
}
