//! Retention settings: a partition's [`RetentionPolicy`], the broker-wide
//! [`LogRetention`] defaults it is made from, and what a pass did
//! ([`RetentionOutcome`]). Plain data, so configuration can name it without
//! reaching the log or the broker state.

use std::time::Duration;

/// Kafka's `log.retention.check.interval.ms` default: 5 minutes.
pub const DEFAULT_CHECK_INTERVAL: Duration = Duration::from_secs(300);

/// Kafka's `log.retention.hours` default, 168 (7 days), in milliseconds: the
/// `retention.ms` of topics that set none.
pub const DEFAULT_RETENTION_MS: i64 = 7 * 24 * 3_600_000;

/// Broker-wide retention defaults (Kafka's `log.retention.*`, `log.roll.*`), applied
/// to topics that do not set their own. The defaults are Kafka's: records are kept
/// for 7 days (`DEFAULT_RETENTION_MS`) with no size limit; `log.retention.ms=-1`
/// keeps data forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRetention {
    /// `log.retention.ms` (or `.minutes`, `.hours`); `None` keeps data forever.
    pub retention_ms: Option<i64>,
    /// `log.retention.bytes` per partition; `None` has no size limit.
    pub retention_bytes: Option<u64>,
    /// `log.roll.ms` (or `log.roll.hours`): roll the active segment by age;
    /// `None` rolls by size only (Kafka's default is 7 days).
    pub roll_ms: Option<i64>,
    /// `log.retention.check.interval.ms`: how often the maintenance pass runs.
    pub check_interval: Duration,
}

impl Default for LogRetention {
    fn default() -> Self {
        LogRetention {
            retention_ms: Some(DEFAULT_RETENTION_MS),
            retention_bytes: None,
            roll_ms: None,
            check_interval: DEFAULT_CHECK_INTERVAL,
        }
    }
}

/// One partition's retention settings (a topic's configs over the broker defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetentionPolicy {
    /// `retention.ms`; `None` (Kafka's -1) keeps data forever.
    pub retention_ms: Option<i64>,
    /// `retention.bytes`; `None` (Kafka's -1) keeps any size.
    pub retention_bytes: Option<u64>,
    /// `segment.ms`: roll the active segment once its first batch is this old;
    /// `None` never rolls by age.
    pub segment_ms: Option<i64>,
}

/// What one retention pass did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetentionOutcome {
    /// Segments (batches in memory) deleted by age.
    pub deleted_by_time: usize,
    /// Segments (batches in memory) deleted by size.
    pub deleted_by_size: usize,
    /// Bytes deleted.
    pub deleted_bytes: u64,
    /// Whether the active segment was rolled by age.
    pub rolled: bool,
    /// The log start offset before and after the pass.
    pub start_before: i64,
    /// The log start offset after the pass.
    pub start_after: i64,
}

impl RetentionOutcome {
    /// Whether the pass deleted anything.
    pub fn deleted_any(&self) -> bool {
        self.deleted_by_time + self.deleted_by_size > 0
    }
}
