//! Corruption bookkeeping: where a bad stored batch was found, what the node did about
//! it, and a shared event list tests can read.
//!
//! The path, in order (see `docs/ARCHITECTURE.md`): a CRC or framing check fails when
//! a batch is served, fetched, recovered or scrubbed (**detect**); a leader stops
//! serving and gives up the leadership at once (**resign**); the node reports the
//! replica to the controller, which elects a healthy ISR member with a new epoch
//! (**elect**); the damaged replica cuts its log below the bad batch and re-fetches
//! from the leader until it has caught up (**repair**). Every step is a `tracing`
//! event with target `baton_broker::corruption` and a [`CorruptionEvent`].

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The `tracing` target of corruption events.
pub const TARGET: &str = "baton_broker::corruption";

/// Where a corrupt batch was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Where {
    /// While serving a consumer's Fetch.
    Serve,
    /// While serving a follower's Fetch.
    FollowerFetch,
    /// In a batch a follower fetched from its leader, before appending it.
    FollowerAppend,
    /// In start-up recovery of the log.
    Recovery,
    /// By the background scrubber.
    Scrubber,
    /// By the log cleaner (compaction).
    Cleaner,
}

impl std::fmt::Display for Where {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Where::Serve => "serve",
            Where::FollowerFetch => "follower-fetch",
            Where::FollowerAppend => "follower-append",
            Where::Recovery => "recovery",
            Where::Scrubber => "scrubber",
            Where::Cleaner => "cleaner",
        })
    }
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CorruptionKind {
    /// A stored (or fetched) batch failed its CRC or framing check at `offset`.
    Detected {
        /// Where it was found.
        at: Where,
        /// The first offset known bad.
        offset: i64,
        /// What check failed.
        reason: String,
    },
    /// The node gave up its leadership of the partition because of it.
    LeaderResigned {
        /// The leader epoch it gave up.
        leader_epoch: i32,
    },
    /// The controller accepted the node's report about its replica.
    Reported,
    /// The replica cut its log to `truncated_to` and started re-fetching.
    RepairStarted {
        /// The log end offset after the cut.
        truncated_to: i64,
    },
    /// The replica caught up with the leader again.
    RepairFinished {
        /// Time from detection to caught up.
        since_detected: Duration,
        /// Time from the cut to caught up.
        since_started: Duration,
    },
}

/// One corruption event of one node's replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptionEvent {
    /// When it happened.
    pub at: Instant,
    /// The node.
    pub node: i32,
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// What happened.
    pub kind: CorruptionKind,
}

impl std::fmt::Display for CorruptionEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "node {} {}-{}: ", self.node, self.topic, self.partition)?;
        match &self.kind {
            CorruptionKind::Detected { at, offset, reason } => {
                write!(f, "corruption detected ({at}) at offset {offset}: {reason}")
            }
            CorruptionKind::LeaderResigned { leader_epoch } => {
                write!(f, "leader resigned (epoch {leader_epoch})")
            }
            CorruptionKind::Reported => write!(f, "replica reported corrupt to the controller"),
            CorruptionKind::RepairStarted { truncated_to } => {
                write!(f, "repair started (log cut to {truncated_to})")
            }
            CorruptionKind::RepairFinished {
                since_detected,
                since_started,
            } => write!(
                f,
                "repair finished ({:.3}s after detection, {:.3}s after the cut)",
                since_detected.as_secs_f64(),
                since_started.as_secs_f64()
            ),
        }
    }
}

/// A list of [`CorruptionEvent`]s shared by the nodes of a cluster (it outlives
/// restarts).
#[derive(Debug, Default)]
pub struct CorruptionLog {
    events: Mutex<Vec<CorruptionEvent>>,
}

impl CorruptionLog {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends an event and emits it as a `tracing` event.
    pub fn push(&self, node: i32, topic: &str, partition: i32, kind: CorruptionKind) {
        let ev = CorruptionEvent {
            at: Instant::now(),
            node,
            topic: topic.to_owned(),
            partition,
            kind,
        };
        match &ev.kind {
            CorruptionKind::Detected { at, offset, reason } => tracing::error!(
                target: TARGET, node, topic, partition, r#where = %at, offset, reason = %reason,
                "corruption detected"
            ),
            CorruptionKind::LeaderResigned { leader_epoch } => tracing::warn!(
                target: TARGET, node, topic, partition, leader_epoch, "leader resigned"
            ),
            CorruptionKind::Reported => tracing::warn!(
                target: TARGET, node, topic, partition, "corrupt replica reported"
            ),
            CorruptionKind::RepairStarted { truncated_to } => tracing::warn!(
                target: TARGET, node, topic, partition, truncated_to, "repair started"
            ),
            CorruptionKind::RepairFinished {
                since_detected,
                since_started,
            } => tracing::info!(
                target: TARGET, node, topic, partition,
                since_detected_ms = since_detected.as_millis() as u64,
                since_started_ms = since_started.as_millis() as u64,
                "repair finished"
            ),
        }
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(ev);
    }

    /// Every event so far, oldest first.
    pub fn events(&self) -> Vec<CorruptionEvent> {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}
