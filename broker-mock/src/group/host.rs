//! What the group coordinator needs from the broker node that hosts it: its
//! topics, the creation of `__consumer_offsets`, its mode, the append
//! notification and its wall clock. The node's state implements it, so the coordinator sits below
//! the state that owns it.

use std::sync::Arc;

use baton_protocol::ErrorCode;

use crate::node_mode::NodeMode;
use crate::topics::{Topic, TopicConfig};

/// The broker node hosting a group coordinator.
pub(crate) trait GroupHost: Send + Sync + 'static {
    /// The local topic named `name`.
    fn topic(&self, name: &str) -> Option<Arc<Topic>>;

    /// Every local topic (a standalone node's topics; a cluster node asks its
    /// metadata image instead).
    fn topics(&self) -> Vec<Arc<Topic>>;

    /// Creates a local topic (within the broker-wide limits); the error is Kafka's
    /// code and a reason.
    fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        config: TopicConfig,
    ) -> Result<Arc<Topic>, (ErrorCode, String)>;

    /// Standalone, or a replica in a cluster.
    fn mode(&self) -> &NodeMode;

    /// Wakes long-polling fetches after an append.
    fn notify_append(&self);

    /// The node's wall clock, in ms since the Unix epoch (`BrokerConfig::env`'s).
    fn now_ms(&self) -> i64;
}
