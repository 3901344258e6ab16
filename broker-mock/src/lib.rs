//! Baton's Kafka-protocol reference broker.
//!
//! Two shapes, one code base. [`Broker::start`] runs a single node that leads every
//! partition (its high watermark follows its log end). [`Cluster`] runs a replicated
//! cluster in-process: a controller with a persisted metadata log and broker nodes
//! that replicate over TCP (leader epochs, ISR, high watermark, `acks=all`,
//! `min.insync.replicas`, clean elections, truncation, lossless controlled shutdown);
//! the binary runs the same cluster as separate processes or all in one.
//!
//! ```no_run
//! # async fn demo() -> Result<(), baton_broker::BrokerError> {
//! use baton_broker::{Broker, BrokerConfig};
//! let broker = Broker::start(BrokerConfig::in_memory()).await?;
//! println!("bootstrap: {}", broker.bootstrap());
//! broker.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! Public API: [`Broker`], [`BrokerConfig`], [`BrokerLimits`], [`BrokerHandle`] and
//! [`BrokerError`] for one node; [`cluster`] ([`Cluster`], node and controller
//! handles) for a replicated cluster; [`faults`] (fault injection), [`history`]
//! (the history checker), [`corruption`] (corruption events), [`group`] (group
//! settings), [`rpc`] (a request/response [`rpc::Channel`] for tools and
//! tests), [`security`] (a listener's security protocol, SASL mechanisms and
//! users), and the I/O-free [`replication`] and [`controller`] state machines.
//! Internals (server loop, one handler per API key, partitions, logs, topics,
//! producer state) are crate-private; `docs/ARCHITECTURE.md` maps them.

pub(crate) mod acl;
mod cleaner;
mod clock;
pub mod cluster;
pub(crate) mod config;
mod config_change;
mod connections;
pub mod controller;
pub mod corruption;
pub(crate) mod error;
pub mod faults;
pub(crate) mod fetch_session;
#[doc(hidden)]
pub mod fuzzing;
pub mod group;
pub(crate) mod handlers;
pub mod history;
mod inter_node;
pub(crate) mod limits;
mod listener_config;
pub(crate) mod log;
pub(crate) mod maintenance;
pub mod metrics;
mod node_mode;
pub(crate) mod partition;
pub(crate) mod producer_state;
pub mod properties;
mod refusals;
pub mod replica_selector;
pub mod replication;
pub mod rpc;
pub mod security;
pub(crate) mod server;
mod state;
mod topic_limits;
pub(crate) mod topics;
pub mod txn;
mod wire;

pub use acl::AuthorizerConfig;
pub use cluster::{Cluster, ClusterBuilder};
pub use config::BrokerConfig;
pub use error::{BrokerError, LogError};
pub use inter_node::InterNodeSecurity;
pub use limits::BrokerLimits;
pub use listener_config::{ListenerConfig, MAX_LISTENER_NAME};
pub use log::compaction::{CleanerConfig, TopicCleaning};
pub use log::Log;
pub use log::LogRetention;
pub use metrics::{BrokerMetrics, ControllerMetrics};
pub use partition::Partition;
pub use producer_state::ProducerLimits;
pub use refusals::RefusedConnections;
pub use replica_selector::ReplicaSelector;
pub use security::{ClientAuth, ListenerSecurity, SaslSettings, SecurityProtocol, TlsSettings};
pub use server::{Broker, BrokerHandle};
