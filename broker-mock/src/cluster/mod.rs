//! A replicated cluster: a controller plus broker nodes, each with its own listener
//! and data directory, talking over real TCP.
//!
//! ```no_run
//! # async fn demo() -> Result<(), baton_broker::BrokerError> {
//! use baton_broker::cluster::Cluster;
//! let mut cluster = Cluster::builder().brokers(3).start().await?;
//! println!("bootstrap: {}", cluster.bootstrap());
//! cluster.node(2).kill();             // hard kill, nothing flushed
//! cluster.node(2).restart().await?;   // same data directory and port
//! cluster.node(3).stop().await;       // controlled shutdown
//! cluster.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! Map: `builder` ([`ClusterBuilder`]), `handle` ([`Cluster`] and [`NodeRef`]) and
//! `views` (timeline events, partition views) are the in-process cluster itself;
//! [`controller_server`] is the controller's listener and persisted metadata log;
//! [`driver`] runs a broker node (session, metadata replay, role reconciliation,
//! reports, ticks; replica fetchers; the scrubber); [`messages`] holds the private
//! requests on the controller listener; `partition_admin` turns ElectLeaders and
//! partition reassignment requests into controller decisions; `tooling` adds the fault- and
//! corruption-injection methods tests use. Below them: the crate's `node_mode` (what
//! a node is, and the replica's link), `rpc` (request/response connections) and
//! `handlers::forward` (CreateTopics/DeleteTopics forwarded to the controller).

mod builder;
pub mod controller_server;
pub mod driver;
mod handle;
pub mod messages;
pub(crate) mod partition_admin;
mod tooling;
mod views;

pub use crate::faults::FramingDamage;
pub use crate::replication::TruncationMode;
pub use crate::rpc::RpcError;
pub use builder::ClusterBuilder;
pub use controller_server::{ControllerHandle, ControllerOptions, ControllerServer};
pub use driver::node::{Node, NodeHandle, NodeOptions};
pub use handle::{Cluster, NodeRef, WaitTimedOut};
pub use views::{PartitionView, ReplicaView, TimelineEvent};
