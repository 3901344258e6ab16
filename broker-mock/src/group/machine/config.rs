//! The coordinator's settings for the group machine.

/// Group coordinator settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfig {
    /// Extra wait before the first rebalance of an empty group completes, so that
    /// members starting together land in one generation. Kafka's
    /// `group.initial.rebalance.delay.ms` defaults to 3000; this broker defaults to
    /// 100 to keep tests quick. 0 disables the delay.
    pub initial_rebalance_delay_ms: i64,
    /// Smallest session timeout a member may ask for (Kafka's
    /// `group.min.session.timeout.ms`, default 6000 there; 100 here so tests can
    /// expire members quickly).
    pub min_session_timeout_ms: i32,
    /// Largest session timeout a member may ask for (`group.max.session.timeout.ms`).
    pub max_session_timeout_ms: i32,
    /// Most members per group (`group.max.size`); joins beyond it fail with
    /// GROUP_MAX_SIZE_REACHED.
    pub max_group_size: usize,
    /// Longest committed metadata string accepted (`offset.metadata.max.bytes`).
    pub offset_metadata_max_bytes: usize,
    /// Partitions of the internal `__consumer_offsets` topic when it is created
    /// (`offsets.topic.num.partitions`, 50 in Kafka).
    pub offsets_topic_partitions: i32,
    /// Session timeout of consumer-protocol members (KIP-848,
    /// `group.consumer.session.timeout.ms`, 45 s in Kafka and here).
    pub consumer_session_timeout_ms: i32,
    /// Heartbeat interval told to consumer-protocol members
    /// (`group.consumer.heartbeat.interval.ms`, 5 s).
    pub consumer_heartbeat_interval_ms: i32,
    /// Most members of a consumer-protocol group (`group.consumer.max.size`;
    /// unbounded in Kafka, 1000 here like `group.max.size`); a new member beyond
    /// it gets GROUP_MAX_SIZE_REACHED.
    pub consumer_max_size: usize,
    /// Which conversions between a classic group and a consumer group happen
    /// online (`group.consumer.migration.policy`, `bidirectional` by default as
    /// in Kafka 4).
    pub consumer_migration_policy: MigrationPolicy,
}

/// `group.consumer.migration.policy` (KIP-848): whether a classic group with
/// members becomes a consumer group when a consumer-protocol member joins it
/// (upgrade), and whether a consumer group whose last consumer-protocol member
/// leaves becomes a classic group again (downgrade). Classic members may join
/// a consumer group whatever the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MigrationPolicy {
    /// Both conversions (Kafka's default).
    #[default]
    Bidirectional,
    /// Only classic to consumer.
    Upgrade,
    /// Only consumer to classic.
    Downgrade,
    /// Neither: a consumer-protocol member cannot join a classic group with
    /// members (GROUP_ID_NOT_FOUND).
    Disabled,
}

impl MigrationPolicy {
    /// The policy of a property value (case-insensitive, as Kafka reads it).
    pub fn parse(value: &str) -> Option<MigrationPolicy> {
        match value.trim().to_ascii_lowercase().as_str() {
            "bidirectional" => Some(MigrationPolicy::Bidirectional),
            "upgrade" => Some(MigrationPolicy::Upgrade),
            "downgrade" => Some(MigrationPolicy::Downgrade),
            "disabled" => Some(MigrationPolicy::Disabled),
            _ => None,
        }
    }

    /// Kafka's name of the policy.
    pub fn name(self) -> &'static str {
        match self {
            MigrationPolicy::Bidirectional => "bidirectional",
            MigrationPolicy::Upgrade => "upgrade",
            MigrationPolicy::Downgrade => "downgrade",
            MigrationPolicy::Disabled => "disabled",
        }
    }

    /// Whether a classic group converts to a consumer group.
    pub fn upgrades(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Bidirectional | MigrationPolicy::Upgrade
        )
    }

    /// Whether a consumer group converts back to a classic group.
    pub fn downgrades(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Bidirectional | MigrationPolicy::Downgrade
        )
    }
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            initial_rebalance_delay_ms: 100,
            min_session_timeout_ms: 100,
            max_session_timeout_ms: 1_800_000,
            max_group_size: 1000,
            offset_metadata_max_bytes: 4096,
            offsets_topic_partitions: 4,
            consumer_session_timeout_ms: 45_000,
            consumer_heartbeat_interval_ms: 5_000,
            consumer_max_size: 1000,
            consumer_migration_policy: MigrationPolicy::Bidirectional,
        }
    }
}
