//! Resource limits: what one request, one batch or one client can make a node hold.
//!
//! Every resource a client can buy with a few bytes has a configured ceiling here:
//! partitions and topics (CreateTopics, auto-creation), consumer groups, producers
//! remembered per partition, connections, and fetch sessions (KIP-227) with the
//! partitions they cache. Each limit, once reached, is answered
//! with the error code Apache Kafka uses for it where Kafka has one (see each field),
//! and with `POLICY_VIOLATION` and a message naming the limit where Kafka has none.
//! Group members and committed metadata are bounded by [`GroupConfig`]
//! (`group.max.size`, `offset.metadata.max.bytes`), frames by
//! [`BrokerConfig::max_frame_bytes`](crate::BrokerConfig::max_frame_bytes).
//!
//! The defaults suit a test broker on one machine: far above what an application's
//! tests use, far below what would exhaust the machine.
//!
//! [`GroupConfig`]: crate::group::GroupConfig

/// Default of [`BrokerLimits::max_partitions`].
pub const DEFAULT_MAX_PARTITIONS: usize = 100_000;
/// Default of [`BrokerLimits::max_topics`].
pub const DEFAULT_MAX_TOPICS: usize = 10_000;
/// Default of [`BrokerLimits::max_partitions_per_request`].
pub const DEFAULT_MAX_PARTITIONS_PER_REQUEST: usize = 10_000;
/// Default of [`BrokerLimits::max_groups`].
pub const DEFAULT_MAX_GROUPS: usize = 10_000;
/// Default of [`BrokerLimits::max_producers_per_partition`].
pub const DEFAULT_MAX_PRODUCERS_PER_PARTITION: usize = 10_000;
/// Default of [`BrokerLimits::max_aborted_txns_per_partition`].
pub const DEFAULT_MAX_ABORTED_TXNS_PER_PARTITION: usize = 100_000;
/// Default of [`BrokerLimits::max_transactional_ids`].
pub const DEFAULT_MAX_TRANSACTIONAL_IDS: usize = 10_000;
/// Default of [`BrokerLimits::max_partitions_per_transaction`].
pub const DEFAULT_MAX_PARTITIONS_PER_TRANSACTION: usize = 10_000;
/// Default of [`BrokerLimits::max_acls`].
pub const DEFAULT_MAX_ACLS: usize = 10_000;
/// Default of [`BrokerLimits::max_pending_txn_offsets`].
pub const DEFAULT_MAX_PENDING_TXN_OFFSETS: usize = 100_000;
/// Default of [`BrokerLimits::cleaner_dedupe_buffer_bytes`] (Kafka's 128 MiB).
pub const DEFAULT_CLEANER_DEDUPE_BUFFER_BYTES: usize = 128 << 20;
/// Default of [`BrokerLimits::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
/// Default of [`BrokerLimits::max_connections_per_ip`].
pub const DEFAULT_MAX_CONNECTIONS_PER_IP: usize = 4096;
/// Default of [`BrokerLimits::max_fetch_sessions`]: Kafka's
/// `max.incremental.fetch.session.cache.slots` default.
pub const DEFAULT_MAX_FETCH_SESSIONS: usize = 1000;
/// Default of [`BrokerLimits::max_fetch_session_partitions`].
pub const DEFAULT_MAX_FETCH_SESSION_PARTITIONS: usize = 100_000;

/// Ceilings on what clients can make a node (or a cluster's controller) hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerLimits {
    /// Most partitions of all topics together, internal ones included (a cluster
    /// counts them at the controller). A CreateTopics (or an auto-creation) that would
    /// pass it fails with `POLICY_VIOLATION`, naming the limit. Apache Kafka has no
    /// such ceiling (KIP-578 proposed one).
    pub max_partitions: usize,
    /// Most topics, internal ones included; beyond it as for `max_partitions`.
    pub max_topics: usize,
    /// Most partitions one CreateTopics request may create, over all its topics (and
    /// so also per topic). Topics of a request past the sum fail with
    /// `POLICY_VIOLATION`; a single topic asking for more fails with
    /// `INVALID_PARTITIONS`. Also the most partitions one OffsetDelete request may
    /// name (more: `POLICY_VIOLATION` for the request).
    pub max_partitions_per_request: usize,
    /// Most consumer groups a coordinator holds (groups with members, pending
    /// members or committed offsets). A JoinGroup or OffsetCommit that would create
    /// one more fails with `POLICY_VIOLATION`.
    pub max_groups: usize,
    /// Most idempotent producers one partition remembers; past it, the producer
    /// whose last batch is oldest in the log is forgotten (Kafka expires them by
    /// time, `producer.id.expiration.ms`).
    pub max_producers_per_partition: usize,
    /// Most aborted transactions one partition's aborted-transactions index keeps
    /// (24 bytes each); past it the oldest entry is dropped, and a read_committed
    /// consumer reading that old range again would no longer be told to skip its
    /// records. Kafka keeps the index per log segment, as long as the segment.
    /// Producers with an open transaction are never forgotten, and at most
    /// `max_producers_per_partition` transactions may be open on one partition: a
    /// batch that would open one more fails with `POLICY_VIOLATION`.
    pub max_aborted_txns_per_partition: usize,
    /// Most open client connections to one node, all its listeners together
    /// (Kafka's `max.connections`).
    /// A connection accepted beyond it is closed at once.
    pub max_connections: usize,
    /// Most open client connections from one IP address (Kafka's
    /// `max.connections.per.ip`); beyond it the new connection is closed at once.
    pub max_connections_per_ip: usize,
    /// Most ACL bindings a node holds. A CreateAcls creation beyond it fails with
    /// `POLICY_VIOLATION`, naming the limit; Kafka has no such ceiling.
    pub max_acls: usize,
    /// Most transactional ids a transaction coordinator holds. An InitProducerId
    /// for one more fails with `POLICY_VIOLATION`; Kafka has no such ceiling (it
    /// expires idle ids after `transactional.id.expiration.ms`).
    pub max_transactional_ids: usize,
    /// Most partitions (offsets partitions included) in one transaction. An
    /// AddPartitionsToTxn or AddOffsetsToTxn past it fails with `POLICY_VIOLATION`;
    /// Kafka has no such ceiling.
    pub max_partitions_per_transaction: usize,
    /// Most transactional offsets a group coordinator holds pending (committed by
    /// TxnOffsetCommit, waiting for their transaction's marker), over all its
    /// groups. A TxnOffsetCommit beyond it fails with `POLICY_VIOLATION`; Kafka
    /// has no such ceiling.
    pub max_pending_txn_offsets: usize,
    /// Most bytes the log cleaner's key map and transaction index hold while
    /// cleaning one log (Kafka's `log.cleaner.dedupe.buffer.size`, shared there
    /// among cleaner threads; Baton runs one per node). A log whose keys do not fit
    /// is cleaned up to where they stopped fitting, the rest in later rounds.
    pub cleaner_dedupe_buffer_bytes: usize,
    /// Most incremental fetch sessions (KIP-227) a node caches (Kafka's
    /// `max.incremental.fetch.session.cache.slots`, default 1000; 0 turns sessions
    /// off). A full fetch that finds the cache full may evict a session as Kafka's
    /// does (stale ones, then by privilege and size); otherwise it is answered
    /// without a session (session id 0) and the fetcher keeps sending full fetches.
    pub max_fetch_sessions: usize,
    /// Most partitions all of a node's fetch sessions cache together (about 200
    /// bytes each). A full fetch that would pass it opens no session; an incremental
    /// one that would add past it closes its session with
    /// `FETCH_SESSION_ID_NOT_FOUND`, so the fetcher falls back to full fetches.
    /// Kafka has no such ceiling.
    pub max_fetch_session_partitions: usize,
}

impl Default for BrokerLimits {
    fn default() -> Self {
        BrokerLimits {
            max_partitions: DEFAULT_MAX_PARTITIONS,
            max_topics: DEFAULT_MAX_TOPICS,
            max_partitions_per_request: DEFAULT_MAX_PARTITIONS_PER_REQUEST,
            max_groups: DEFAULT_MAX_GROUPS,
            max_producers_per_partition: DEFAULT_MAX_PRODUCERS_PER_PARTITION,
            max_aborted_txns_per_partition: DEFAULT_MAX_ABORTED_TXNS_PER_PARTITION,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_ip: DEFAULT_MAX_CONNECTIONS_PER_IP,
            max_acls: DEFAULT_MAX_ACLS,
            max_transactional_ids: DEFAULT_MAX_TRANSACTIONAL_IDS,
            max_partitions_per_transaction: DEFAULT_MAX_PARTITIONS_PER_TRANSACTION,
            max_pending_txn_offsets: DEFAULT_MAX_PENDING_TXN_OFFSETS,
            cleaner_dedupe_buffer_bytes: DEFAULT_CLEANER_DEDUPE_BUFFER_BYTES,
            max_fetch_sessions: DEFAULT_MAX_FETCH_SESSIONS,
            max_fetch_session_partitions: DEFAULT_MAX_FETCH_SESSION_PARTITIONS,
        }
    }
}
