//! The shared handle of one partition: its state behind a mutex, created for a
//! single node or as a cluster replica, and deleted with its topic.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use super::state::{PartitionState, Role};
use crate::error::LogError;
use crate::log::Log;
use crate::producer_state::{self, ProducerLimits};
use crate::replication::LeaderEpochCache;

/// Rebuilds the epoch cache from the stored batches' leader epochs.
fn rebuild_epoch_cache(log: &Log) -> LeaderEpochCache {
    let mut cache = LeaderEpochCache::new();
    let mut from = log.log_start_offset();
    let end = log.log_end_offset();
    while from < end {
        let Ok(batches) = log.read(from, 1 << 20) else {
            break;
        };
        if batches.is_empty() {
            break;
        }
        for b in &batches {
            let Ok(h) = crate::log::header::BatchHeader::parse(b) else {
                return cache;
            };
            let epoch = i32::from_be_bytes([b[12], b[13], b[14], b[15]]);
            if epoch >= 0 {
                let _ = cache.assign(epoch, h.base_offset);
            }
            from = h.last_offset + 1;
        }
    }
    // The first batch read may begin below the log start (DeleteRecords).
    cache.truncate_from_start(log.log_start_offset());
    cache
}

/// One partition of a topic.
#[derive(Debug)]
pub struct Partition {
    /// Shared by all partitions of the topic, not copied per partition.
    topic: Arc<str>,
    index: i32,
    state: Mutex<PartitionState>,
}

impl Partition {
    /// A partition led by `node_id` at epoch 0 over `log`, with the high watermark at
    /// the log end (single node: everything stored is committed), its producer
    /// state rebuilt from the log within `producer_limits`.
    pub fn new(
        topic: impl Into<Arc<str>>,
        index: i32,
        node_id: i32,
        log: Log,
        producer_limits: ProducerLimits,
    ) -> Self {
        let hw = log.log_end_offset();
        let producers = producer_state::rebuild_or_empty(&log, producer_limits, hw);
        let topic = topic.into();
        Partition {
            state: Mutex::new(PartitionState {
                log,
                high_watermark: hw,
                leader: node_id,
                leader_epoch: 0,
                replicas: vec![node_id],
                isr: vec![node_id],
                deleted: false,
                role: Role::Standalone,
                epoch_cache: LeaderEpochCache::new(),
                waiters: BTreeMap::new(),
                next_wait_id: 0,
                reports: None,
                ident: Some((topic.clone(), index)),
                producers,
                corrupt: None,
                corruption_link: None,
                metrics: None,
            }),
            topic,
            index,
        }
    }

    /// A cluster replica over `log`, with no role yet. Its HW starts at the log start
    /// (a restarted replica does not know what was committed) and its epoch cache is
    /// rebuilt from the stored batches, and its producer state within
    /// `producer_limits`.
    pub fn new_replica(
        topic: impl Into<Arc<str>>,
        index: i32,
        log: Log,
        producer_limits: ProducerLimits,
    ) -> Self {
        let hw = log.log_start_offset();
        let cache = rebuild_epoch_cache(&log);
        let producers = producer_state::rebuild_or_empty(&log, producer_limits, hw);
        let topic = topic.into();
        Partition {
            state: Mutex::new(PartitionState {
                log,
                high_watermark: hw,
                leader: -1,
                leader_epoch: cache.latest_epoch().unwrap_or(0),
                replicas: Vec::new(),
                isr: Vec::new(),
                deleted: false,
                role: Role::NotReplica,
                epoch_cache: cache,
                waiters: BTreeMap::new(),
                next_wait_id: 0,
                reports: None,
                ident: Some((topic.clone(), index)),
                producers,
                corrupt: None,
                corruption_link: None,
                metrics: None,
            }),
            topic,
            index,
        }
    }

    /// The topic name.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The partition index.
    pub fn index(&self) -> i32 {
        self.index
    }

    /// Locks the partition's state. Holders do only short, bounded work (file reads
    /// and writes included), never await.
    pub fn lock(&self) -> MutexGuard<'_, PartitionState> {
        // A panic while holding the lock is a broken invariant; keep serving the data.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks the partition deleted and removes its data.
    pub(crate) fn delete(&self) -> Result<(), LogError> {
        let mut st = self.lock();
        st.deleted = true;
        st.end_role();
        let log = std::mem::replace(&mut st.log, Log::memory());
        log.delete()
    }
}
