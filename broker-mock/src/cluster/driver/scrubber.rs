//! The background scrubber of a cluster node: re-reads every local replica's stored
//! batches at a configured rate ([`crate::cluster::NodeOptions::scrub_bytes_per_sec`]) and checks
//! each one's framing, CRC and offsets, so that corruption is found even in data nobody
//! reads. A bad batch goes through the same path as one found while serving: the
//! replica is marked corrupt, reported, resigns if it leads, and is repaired by its
//! replica fetcher.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::corruption::Where;
use crate::node_mode::ClusterLink;
use crate::partition::{read_verified, Partition, ReadError};
use crate::state::BrokerState;

/// Pause when there is nothing to scrub.
const IDLE: Duration = Duration::from_millis(100);

pub(crate) async fn scrub_loop(state: Arc<BrokerState>, link: Arc<ClusterLink>) {
    let rate = link.options.scrub_bytes_per_sec;
    if rate == 0 {
        return;
    }
    // Work in slices of about a tenth of a second's budget.
    let chunk = (rate / 10).clamp(1024, 1 << 20) as usize;
    let mut cursors: HashMap<(String, i32), i64> = HashMap::new();
    loop {
        for t in state.all_topics() {
            for p in &t.partitions {
                let scanned = scrub_step(&link, &t.name, p, chunk, &mut cursors);
                if scanned > 0 {
                    tokio::time::sleep(Duration::from_secs_f64(scanned as f64 / rate as f64)).await;
                }
            }
        }
        tokio::time::sleep(IDLE).await;
    }
}

/// Checks up to `chunk` bytes of one replica from its cursor; returns the bytes read.
fn scrub_step(
    link: &ClusterLink,
    topic: &str,
    p: &Partition,
    chunk: usize,
    cursors: &mut HashMap<(String, i32), i64>,
) -> usize {
    let key = (topic.to_owned(), p.index());
    let mut st = p.lock();
    if st.corrupt_offset().is_some() || st.is_deleted() {
        // Known bad: the repair re-fetches it.
        return 0;
    }
    let (start, end) = (st.log_start_offset(), st.log_end_offset());
    let from = cursors.get(&key).copied().unwrap_or(start).max(start);
    if from >= end {
        // A full pass is done: start again from the beginning.
        cursors.insert(key, start);
        return 0;
    }
    let outcome = match read_verified(st.log(), from, chunk) {
        Ok(batches) => {
            let n: usize = batches.iter().map(|b| b.len()).sum();
            let next = batches
                .last()
                .and_then(|b| crate::log::header::BatchHeader::parse(b).ok())
                .map_or(end, |h| h.last_offset + 1);
            Ok((n, next))
        }
        Err(ReadError::CorruptBatch { offset, reason }) => Err((offset, reason)),
        Err(e) => {
            tracing::warn!(node = link.node_id, topic, partition = p.index(), error = %e, "scrubber could not read");
            Ok((0, end))
        }
    };
    match outcome {
        Ok((n, next)) => {
            cursors.insert(key, next);
            n
        }
        Err((offset, reason)) => {
            st.on_corruption(offset, Where::Scrubber, &reason);
            cursors.insert(key, start);
            0
        }
    }
}
