//! The topic configs this broker applies when a topic sets none: what CreateTopics
//! fills in and DescribeConfigs reports as `DEFAULT_CONFIG`.

use crate::state::BrokerState;

/// `config_type` values (the spec's ConfigType).
pub(super) const BOOLEAN: i8 = 1;
pub(super) const STRING: i8 = 2;
pub(super) const INT: i8 = 3;
pub(super) const LONG: i8 = 5;
const DOUBLE: i8 = 6;
pub(super) const LIST: i8 = 7;

/// One config: name, value, type.
pub(super) type Entry = (&'static str, String, i8);

/// `min.insync.replicas` for topics that do not set it.
pub(super) fn default_min_insync(state: &BrokerState) -> usize {
    state
        .mode
        .replica()
        .map_or(1, |l| l.options.default_min_insync_replicas)
}

/// The topic configs this broker applies when a topic sets none, with their types.
pub(crate) fn topic_defaults(state: &BrokerState) -> Vec<Entry> {
    let c = &state.config;
    // The static defaults with the cluster-wide dynamic ones over them.
    let retention = state.effective_retention();
    vec![
        ("cleanup.policy", "delete".into(), LIST),
        ("compression.type", "producer".into(), STRING),
        (
            "delete.retention.ms",
            c.cleaner.delete_retention_ms.to_string(),
            LONG,
        ),
        (
            "index.interval.bytes",
            c.index_interval_bytes.to_string(),
            INT,
        ),
        ("max.compaction.lag.ms", i64::MAX.to_string(), LONG),
        ("message.timestamp.type", "CreateTime".into(), STRING),
        (
            "min.cleanable.dirty.ratio",
            c.cleaner.min_cleanable_ratio.to_string(),
            DOUBLE,
        ),
        ("min.compaction.lag.ms", "0".into(), LONG),
        (
            "min.insync.replicas",
            default_min_insync(state).to_string(),
            INT,
        ),
        (
            "retention.bytes",
            retention
                .retention_bytes
                .map_or(-1, |b| i64::try_from(b).unwrap_or(i64::MAX))
                .to_string(),
            LONG,
        ),
        (
            "retention.ms",
            retention.retention_ms.unwrap_or(-1).to_string(),
            LONG,
        ),
        ("segment.bytes", c.segment_bytes.to_string(), INT),
        ("unclean.leader.election.enable", "false".into(), BOOLEAN),
    ]
}
