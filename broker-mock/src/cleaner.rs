//! The node's log cleaner task: every `log.cleaner.backoff.ms` it goes over the
//! partitions this node hosts and cleans the compacted ones that are worth it (see
//! [`crate::log::compaction`]). Each replica cleans its own log, leader or follower,
//! as in Kafka. The cleaning of one partition runs on a blocking thread under that
//! partition's lock (the log is rewritten in place; produce and fetch of that
//! partition wait meanwhile).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::log::compaction::CleanPoint;
use crate::state::BrokerState;

/// Where each log's last cleaning ended, by topic and partition.
type Points = HashMap<(String, i32), CleanPoint>;

/// Starts the cleaner of the node `state` (nothing when `log.cleaner.enable` is
/// off); it stops when `stop` turns true or the node is gone.
pub(crate) fn start(state: &Arc<BrokerState>, stop: &watch::Receiver<bool>) {
    if !state.config.cleaner.enable {
        return;
    }
    let backoff = Duration::from_millis(state.config.cleaner.backoff_ms.max(1));
    let weak = Arc::downgrade(state);
    let mut stop = stop.clone();
    tokio::spawn(async move {
        let mut points = Points::new();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                r = stop.changed() => if r.is_err() { break } else { continue },
            }
            if *stop.borrow() {
                break;
            }
            let Some(st) = weak.upgrade() else { break };
            let mut taken = std::mem::take(&mut points);
            let done = baton_env::spawn_blocking(move || {
                round(&st, &mut taken);
                taken
            })
            .await;
            match done {
                Ok(p) => points = p,
                Err(_) => break,
            }
        }
    });
}

/// One pass over the node's compacted partitions.
fn round(state: &BrokerState, points: &mut Points) {
    let limit = state.config.limits.cleaner_dedupe_buffer_bytes;
    let mut seen = Points::new();
    for t in state.all_topics() {
        let settings = t.config.cleaning(&state.config.cleaner);
        if !settings.compact {
            continue;
        }
        for p in &t.partitions {
            let key = (t.name.clone(), p.index());
            let mut point = points.remove(&key).unwrap_or_default();
            let result = p
                .lock()
                .clean(&settings, limit, state.clock.now_ms(), &mut point);
            match result {
                Ok(Some(stats)) => tracing::debug!(
                    node = state.config.node_id,
                    topic = %t.name,
                    partition = p.index(),
                    ?stats,
                    "log cleaned"
                ),
                Ok(None) => {}
                Err(e) => tracing::warn!(
                    node = state.config.node_id,
                    topic = %t.name,
                    partition = p.index(),
                    error = %e,
                    "log cleaning stopped"
                ),
            }
            seen.insert(key, point);
        }
    }
    *points = seen;
}
