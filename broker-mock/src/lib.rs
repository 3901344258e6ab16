//! Baton's Kafka-protocol reference broker.
//!
//! A single node for now: every partition is led by this node, and its high watermark
//! equals its log end offset. Types are shaped for replication: a [`Partition`] owns
//! a [`Log`] plus leader, leader epoch, replicas, ISR and high watermark.
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
//! Map: [`server`] (listener, connections, ordering), [`handlers`] (one file per API
//! key, each opening with its versions and deviations from Kafka), [`partition`],
//! [`log`] (segmented on-disk and in-memory logs), [`topics`] (names, configs,
//! persistence), [`group`] (consumer groups and committed offsets), [`config`].

pub mod cluster;
pub mod config;
pub mod controller;
pub mod error;
pub mod group;
pub mod handlers;
pub mod log;
pub mod partition;
pub mod producer_state;
pub mod replication;
pub mod server;
mod state;
pub mod topics;

pub use cluster::{Cluster, ClusterBuilder};
pub use config::BrokerConfig;
pub use error::{BrokerError, LogError};
pub use log::Log;
pub use partition::Partition;
pub use server::{Broker, BrokerHandle};
