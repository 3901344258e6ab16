//! The log maintenance task of a node: every `log.retention.check.interval.ms` it
//! applies retention to each partition the node hosts, leader and follower alike
//! (as in Kafka each replica deletes its own old segments; a follower's log start
//! also follows its leader's through the fetch responses, and only moves forward).
//!
//! [`run_pass`] is one pass over every hosted partition. The log cleaner of
//! `cleanup.policy=compact` topics is a task of its own (`crate::cleaner`, on
//! `log.cleaner.backoff.ms`); both take a partition's lock for each partition they
//! work on, one partition at a time.
//!
//! A partition's policy is its topic's `retention.ms`, `retention.bytes` and
//! `segment.ms` over the broker's [`LogRetention`] defaults ([`policy_for`]); retention deletes only
//! on topics whose `cleanup.policy` includes `delete`. See `log/retention.rs` for
//! what a pass deletes.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::log::{LogRetention, RetentionOutcome, RetentionPolicy};
use crate::partition::Role;
use crate::state::BrokerState;
use crate::topics::TopicConfig;

/// The policy of a topic with `config`: its own settings over the broker's
/// `defaults` (a negative value means unlimited, as in Kafka). Retention applies
/// only when the topic's `cleanup.policy` includes `delete`.
pub fn policy_for(defaults: &LogRetention, config: &TopicConfig) -> RetentionPolicy {
    let deletes = config.deletes();
    let retention_ms = config
        .retention_ms()
        .map_or(defaults.retention_ms, |v| (v >= 0).then_some(v));
    let retention_bytes = config
        .retention_bytes()
        .map_or(defaults.retention_bytes, |v| u64::try_from(v).ok());
    RetentionPolicy {
        retention_ms: retention_ms.filter(|_| deletes),
        retention_bytes: retention_bytes.filter(|_| deletes),
        segment_ms: config.segment_ms().or(defaults.roll_ms).filter(|v| *v > 0),
    }
}

/// What one maintenance pass did, summed over the partitions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PassReport {
    /// Partitions looked at.
    pub partitions: usize,
    /// Segments (batches in memory) deleted.
    pub deleted_segments: usize,
    /// Bytes deleted.
    pub deleted_bytes: u64,
    /// Active segments rolled by age.
    pub rolled: usize,
    /// Whether some partition's log start offset moved.
    pub start_moved: bool,
}

/// One maintenance pass at `now_ms` over every partition this node hosts (not the
/// ones it has no role for). Blocking: file deletions; run it off the async
/// workers. Each partition is locked only for its own step.
pub(crate) fn run_pass(state: &BrokerState, now_ms: i64) -> PassReport {
    let defaults = state.effective_retention();
    let mut report = PassReport::default();
    for topic in state.all_topics() {
        let policy = policy_for(&defaults, &topic.config);
        if policy == RetentionPolicy::default() {
            continue;
        }
        for part in &topic.partitions {
            let mut st = part.lock();
            if st.is_deleted() || matches!(st.role(), Role::NotReplica) {
                continue;
            }
            report.partitions += 1;
            match st.apply_retention(&policy, now_ms) {
                Ok(out) => {
                    report.start_moved |= out.start_after > out.start_before;
                    add(&mut report, &out, &topic.name, part.index())
                }
                Err(e) => {
                    tracing::error!(topic = %topic.name, partition = part.index(), error = %e, "retention failed")
                }
            }
        }
    }
    report
}

fn add(report: &mut PassReport, out: &RetentionOutcome, topic: &str, partition: i32) {
    if out.deleted_any() {
        tracing::info!(
            topic,
            partition,
            by_time = out.deleted_by_time,
            by_size = out.deleted_by_size,
            bytes = out.deleted_bytes,
            log_start = out.start_after,
            "retention deleted old data"
        );
    }
    report.deleted_segments += out.deleted_by_time + out.deleted_by_size;
    report.deleted_bytes += out.deleted_bytes;
    report.rolled += usize::from(out.rolled);
}

/// Starts the node's maintenance task: a [`run_pass`] every
/// `config.retention.check_interval`, until `stop` turns true or the state is
/// dropped.
pub(crate) fn start(state: &Arc<BrokerState>, stop: &watch::Receiver<bool>) {
    let weak = Arc::downgrade(state);
    let interval = state
        .config
        .retention
        .check_interval
        .max(Duration::from_millis(1));
    let mut stop = stop.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                r = stop.changed() => if r.is_err() || *stop.borrow() { break } else { continue },
            }
            let Some(st) = weak.upgrade() else { break };
            let now = st.clock.now_ms();
            let pass = baton_env::spawn_blocking(move || {
                let report = run_pass(&st, now);
                if report.start_moved {
                    // Parked follower fetches answer at once with the new start.
                    st.notify_append();
                }
            });
            if pass.await.is_err() {
                break;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::policy::DEFAULT_RETENTION_MS;

    fn config(entries: &[(&str, &str)]) -> TopicConfig {
        TopicConfig {
            entries: entries
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    #[test]
    fn a_topic_without_settings_keeps_data_for_kafkas_seven_days() {
        let defaults = LogRetention::default();
        assert_eq!(DEFAULT_RETENTION_MS, 604_800_000);
        assert_eq!(defaults.retention_ms, Some(DEFAULT_RETENTION_MS));
        assert_eq!(defaults.retention_bytes, None);
        let p = policy_for(&defaults, &config(&[]));
        assert_eq!(p.retention_ms, Some(604_800_000));
        assert_eq!(p.retention_bytes, None);
        // The topic's own settings win; -1 keeps data forever.
        let p = policy_for(&defaults, &config(&[("retention.ms", "-1")]));
        assert_eq!(p.retention_ms, None);
        let p = policy_for(&defaults, &config(&[("retention.ms", "60000")]));
        assert_eq!(p.retention_ms, Some(60_000));
        // Compacted topics delete nothing by age.
        let p = policy_for(&defaults, &config(&[("cleanup.policy", "compact")]));
        assert_eq!(p.retention_ms, None);
        // A broker that keeps data forever (`log.retention.ms=-1`).
        let forever = LogRetention {
            retention_ms: None,
            ..defaults
        };
        assert_eq!(policy_for(&forever, &config(&[])).retention_ms, None);
    }
}
