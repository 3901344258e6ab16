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
//! Map: [`server`] (listener, connections, ordering), [`handlers`] (one file per API
//! key, each opening with its versions and deviations from Kafka), [`partition`],
//! [`log`] (segmented on-disk and in-memory logs), [`topics`] (names, configs,
//! persistence), [`group`] (consumer groups and committed offsets), [`config`],
//! [`replication`] and [`controller`] (I/O-free state machines), [`cluster`] (the
//! async drivers that run them: controller, nodes, replica fetchers).

mod clock;
pub mod cluster;
pub mod config;
mod connections;
pub mod controller;
pub mod corruption;
pub mod error;
pub mod faults;
pub mod group;
pub mod handlers;
pub mod history;
pub mod limits;
pub mod log;
mod node_mode;
pub mod partition;
pub mod producer_state;
pub mod replication;
mod rpc;
pub mod server;
mod state;
mod topic_limits;
pub mod topics;
mod wire;

pub use cluster::{Cluster, ClusterBuilder};
pub use config::BrokerConfig;
pub use error::{BrokerError, LogError};
pub use limits::BrokerLimits;
pub use log::Log;
pub use partition::Partition;
pub use server::{Broker, BrokerHandle};
