//! [`Admin::consumer_group_lag`]: a group's committed offsets (OffsetFetch)
//! against its partitions' log end offsets (ListOffsets).

use crate::group::TopicPartition;
use crate::offsets::{list_offsets, OffsetSpec};

use super::{Admin, AdminError};

/// How far a group is behind on one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartitionLag {
    /// The partition.
    pub partition: TopicPartition,
    /// The group's committed offset.
    pub committed: i64,
    /// The partition's log end offset (the offset of the next record).
    pub log_end: i64,
    /// `log_end - committed`, at least 0: records not yet consumed.
    pub lag: i64,
}

impl Admin {
    /// The lag of `group` on every partition it has a committed offset for,
    /// ordered by topic and partition.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: this only reads.
    pub async fn consumer_group_lag(
        &self,
        group: impl Into<String>,
    ) -> Result<Vec<PartitionLag>, AdminError> {
        let committed = self.group_offsets(group).await?;
        let queries: Vec<(String, i32, OffsetSpec)> = committed
            .keys()
            .map(|tp| (tp.topic.to_string(), tp.partition, OffsetSpec::Latest))
            .collect();
        let ends = list_offsets(&self.client, &queries).await?;
        Ok(committed
            .into_iter()
            .zip(ends)
            .map(|((partition, o), end)| PartitionLag {
                partition,
                committed: o.offset,
                log_end: end.offset,
                lag: (end.offset - o.offset).max(0),
            })
            .collect())
    }
}
