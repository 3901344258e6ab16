//! What a [`Cluster`](super::Cluster) reports: its timeline of faults and lifecycle
//! steps, and partitions as the controller and each replica see them.

use std::time::Duration;

/// One fault or lifecycle step applied to a [`Cluster`](super::Cluster), for
/// [`Cluster::timeline`](super::Cluster::timeline).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineEvent {
    /// Time since the cluster started.
    pub at: Duration,
    /// What happened, e.g. `"node 2 killed"`.
    pub what: String,
}

impl std::fmt::Display for TimelineEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:>9.3}s  {}", self.at.as_secs_f64(), self.what)
    }
}

/// One replica's view of a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaView {
    /// The node.
    pub node: i32,
    /// Whether the node is running.
    pub running: bool,
    /// `"leader"`, `"follower"`, `"none"` or `"standalone"`.
    pub role: &'static str,
    /// The node's leader epoch for the partition.
    pub leader_epoch: i32,
    /// Log end offset.
    pub log_end_offset: i64,
    /// High watermark.
    pub high_watermark: i64,
    /// Log start offset (-1 when not running).
    pub log_start_offset: i64,
    /// Whether the replica's log went offline after a failed write or fsync (it
    /// takes no writes and serves nothing until the node restarts).
    pub log_offline: bool,
}

impl ReplicaView {
    /// The view of running node `node`'s replica, read from its state.
    pub(crate) fn of(node: i32, st: &crate::partition::PartitionState) -> ReplicaView {
        use crate::partition::Role;
        ReplicaView {
            node,
            running: true,
            role: match st.role() {
                Role::Leader(_) => "leader",
                Role::Follower { .. } => "follower",
                Role::Standalone => "standalone",
                _ => "none",
            },
            leader_epoch: st.leader_epoch(),
            log_end_offset: st.log_end_offset(),
            high_watermark: st.high_watermark(),
            log_start_offset: st.log_start_offset(),
            log_offline: st.log_offline(),
        }
    }
}

/// A partition as the controller and the replicas see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionView {
    /// The leader, or -1.
    pub leader: i32,
    /// The controller's leader epoch.
    pub leader_epoch: i32,
    /// The controller's partition epoch.
    pub partition_epoch: i32,
    /// Assigned replicas, preferred first.
    pub replicas: Vec<i32>,
    /// The committed ISR.
    pub isr: Vec<i32>,
    /// Each replica's local state (running nodes only report numbers).
    pub replica_states: Vec<ReplicaView>,
}

impl PartitionView {
    /// The state of `node`'s replica.
    pub fn replica(&self, node: i32) -> Option<&ReplicaView> {
        self.replica_states.iter().find(|r| r.node == node)
    }

    /// The leader's high watermark, if the leader is running.
    pub fn high_watermark(&self) -> Option<i64> {
        self.replica(self.leader)
            .filter(|r| r.running)
            .map(|r| r.high_watermark)
    }
}
