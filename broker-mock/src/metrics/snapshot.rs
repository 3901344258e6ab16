//! The typed snapshots tests and the endpoint read: [`BrokerMetrics`] of a node
//! (its counters, and gauges of its partitions computed from its state at the
//! time of the snapshot) and [`ControllerMetrics`] of a cluster's controller.

use std::sync::atomic::Ordering;

use super::registry::{CorruptionSite, NodeMetrics, LATENCY_BUCKETS};
use crate::partition::Role;
use crate::state::BrokerState;

/// Requests of one API key and version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiRequests {
    /// The API key.
    pub api_key: i16,
    /// The request version (versions past the counted range are counted with
    /// the highest counted one).
    pub version: i16,
    /// Requests answered, or that closed their connection.
    pub requests: u64,
    /// Responses carrying a non-zero error code at the top level or for a
    /// partition (see `docs/ARCHITECTURE.md`, Broker metrics).
    pub errors: u64,
}

/// The latency histogram of one API key.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyHistogram {
    /// The API key.
    pub api_key: i16,
    /// `(upper bound in seconds, requests at most that long)`, cumulative; the
    /// last bound is `f64::INFINITY`.
    pub buckets: Vec<(f64, u64)>,
    /// Sum of the latencies, in seconds.
    pub sum_seconds: f64,
    /// Requests observed.
    pub count: u64,
}

/// Gauges of one partition replica this node hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMetrics {
    /// The topic.
    pub topic: String,
    /// The partition index.
    pub partition: i32,
    /// Whether this node leads it.
    pub leader: bool,
    /// The replica's log end offset.
    pub log_end_offset: i64,
    /// The replica's high watermark.
    pub high_watermark: i64,
    /// In-sync replicas, as this node knows them.
    pub isr_size: usize,
    /// Assigned replicas.
    pub replicas: usize,
}

impl PartitionMetrics {
    /// Led here with fewer in-sync replicas than assigned ones (Kafka's
    /// UnderReplicatedPartitions counts such partitions on their leader).
    pub fn under_replicated(&self) -> bool {
        self.leader && self.isr_size < self.replicas
    }
}

/// A snapshot of one broker node's metrics: the same numbers its `/metrics`
/// endpoint shows. Counters start at zero when the node starts.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerMetrics {
    /// The node id.
    pub node_id: i32,
    /// Requests and errors by API key and version (only those with requests).
    pub requests: Vec<ApiRequests>,
    /// Request latency by API key (only keys with requests).
    pub latency: Vec<LatencyHistogram>,
    /// Requests with an API key outside the counted range.
    pub other_requests: u64,
    /// Bytes read from client and replica connections.
    pub bytes_in: u64,
    /// Bytes written to them.
    pub bytes_out: u64,
    /// Connections accepted (within the connection limits).
    pub connections_accepted: u64,
    /// Connections closed.
    pub connections_closed: u64,
    /// ISR shrinks this node proposed as a leader.
    pub isr_shrinks: u64,
    /// ISR expansions this node proposed as a leader.
    pub isr_expands: u64,
    /// Corruption detected, by site (every site listed, zeros included).
    pub corruption_detected: Vec<(CorruptionSite, u64)>,
    /// Repairs of a corrupt replica completed (caught up with the leader again).
    pub repairs_completed: u64,
    /// Group rebalances by this node's coordinator: new classic generations and
    /// new consumer group epochs (KIP-848).
    pub group_rebalances: u64,
    /// Requests refused because their producer was fenced (PRODUCER_FENCED or
    /// INVALID_PRODUCER_EPOCH).
    pub fenced_producers: u64,
    /// Every partition replica this node hosts.
    pub partitions: Vec<PartitionMetrics>,
    /// Hosted replicas whose partition has no leader.
    pub offline_partitions: u64,
}

impl BrokerMetrics {
    /// Connections open now.
    pub fn connections_open(&self) -> u64 {
        self.connections_accepted
            .saturating_sub(self.connections_closed)
    }

    /// Requests of `api_key`, all versions.
    pub fn requests_of(&self, api_key: i16) -> u64 {
        self.requests
            .iter()
            .filter(|r| r.api_key == api_key)
            .map(|r| r.requests)
            .sum()
    }

    /// Error responses of `api_key`, all versions.
    pub fn errors_of(&self, api_key: i16) -> u64 {
        self.requests
            .iter()
            .filter(|r| r.api_key == api_key)
            .map(|r| r.errors)
            .sum()
    }

    /// Corruption detected at `site`.
    pub fn corruption_at(&self, site: CorruptionSite) -> u64 {
        self.corruption_detected
            .iter()
            .find(|(s, _)| *s == site)
            .map_or(0, |(_, n)| *n)
    }

    /// Corruption detected, all sites.
    pub fn corruption_total(&self) -> u64 {
        self.corruption_detected.iter().map(|(_, n)| n).sum()
    }

    /// The gauges of a hosted partition.
    pub fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionMetrics> {
        self.partitions
            .iter()
            .find(|p| p.topic == topic && p.partition == partition)
    }

    /// Partitions this node leads with fewer in-sync replicas than assigned.
    pub fn under_replicated_partitions(&self) -> u64 {
        self.partitions
            .iter()
            .filter(|p| p.under_replicated())
            .count() as u64
    }
}

/// A snapshot of a cluster controller's metrics (elections and ISR changes it
/// wrote to the metadata log since it started, and its partitions now).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ControllerMetrics {
    /// Leader elections: partition changes giving a partition a new, live leader
    /// (failover, corrupt leader replaced, planned moves, ElectLeaders).
    pub leader_elections: u64,
    /// Elections of a leader outside the ISR (the topic allows unclean election).
    pub unclean_leader_elections: u64,
    /// Partition changes that removed replicas from an ISR.
    pub isr_shrinks: u64,
    /// Partition changes that added replicas to an ISR.
    pub isr_expands: u64,
    /// Partitions with no leader now.
    pub offline_partitions: u64,
    /// Partitions now.
    pub partitions: u64,
    /// Brokers registered and not fenced now.
    pub active_brokers: u64,
}

/// Reads `metrics` and the partitions of `state` into a snapshot.
pub(crate) fn broker(state: &BrokerState) -> BrokerMetrics {
    let m: &NodeMetrics = &state.metrics;
    let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    let requests: Vec<ApiRequests> = m
        .request_counts()
        .into_iter()
        .map(|(api_key, version, requests, errors)| ApiRequests {
            api_key,
            version,
            requests,
            errors,
        })
        .collect();
    let mut keys: Vec<i16> = requests.iter().map(|r| r.api_key).collect();
    keys.dedup();
    let latency = keys
        .into_iter()
        .filter_map(|api_key| {
            let (cumulative, sum_seconds, count) = m.latency(api_key)?.read();
            let bounds = LATENCY_BUCKETS.iter().copied().chain([f64::INFINITY]);
            Some(LatencyHistogram {
                api_key,
                buckets: bounds.zip(cumulative).collect(),
                sum_seconds,
                count,
            })
        })
        .collect();
    let mut partitions = Vec::new();
    let mut offline = 0;
    for topic in state.all_topics() {
        for p in &topic.partitions {
            let st = p.lock();
            if matches!(st.role(), Role::NotReplica) || st.is_deleted() {
                continue;
            }
            if matches!(st.role(), Role::Follower { leader } if *leader < 0) {
                offline += 1;
            }
            partitions.push(PartitionMetrics {
                topic: topic.name.clone(),
                partition: p.index(),
                leader: st.is_leader(),
                log_end_offset: st.log_end_offset(),
                high_watermark: st.high_watermark(),
                isr_size: st.isr.len(),
                replicas: st.replicas.len(),
            });
        }
    }
    BrokerMetrics {
        node_id: state.config.node_id,
        requests,
        latency,
        other_requests: load(&m.other_requests),
        bytes_in: load(&m.bytes_in),
        bytes_out: load(&m.bytes_out),
        connections_accepted: load(&m.connections_accepted),
        connections_closed: load(&m.connections_closed),
        isr_shrinks: load(&m.isr_shrinks),
        isr_expands: load(&m.isr_expands),
        corruption_detected: CorruptionSite::ALL
            .iter()
            .map(|s| (*s, m.corruption_count(*s)))
            .collect(),
        repairs_completed: load(&m.repairs),
        group_rebalances: state.groups.rebalances(),
        fenced_producers: load(&m.fenced_producers),
        partitions,
        offline_partitions: offline,
    }
}
