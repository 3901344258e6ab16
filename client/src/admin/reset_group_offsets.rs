//! Rewinding (or fast-forwarding) a group: [`Admin::plan_consumer_group_offsets_reset`]
//! computes target offsets from the partitions' log start and end offsets, a
//! timestamp or the committed offsets (ListOffsets, OffsetFetch), and
//! [`Admin::reset_consumer_group_offsets`] commits them with
//! [`Admin::alter_consumer_group_offsets`]. The rules follow Kafka's
//! `kafka-consumer-groups.sh --reset-offsets`.

use std::collections::BTreeMap;

use super::list_group_offsets::OffsetAndMetadata;
use super::{Admin, AdminError};
use crate::group::TopicPartition;
use crate::offsets::{list_offsets, OffsetSpec};

/// Where [`Admin::reset_consumer_group_offsets`] moves a group's committed offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupOffsetReset {
    /// To each partition's log start offset: the group re-reads everything.
    Earliest,
    /// To each partition's log end offset: the group skips everything so far.
    Latest,
    /// To the first offset whose record timestamp is at or after this time (ms
    /// since the epoch); the log end offset where there is none.
    Timestamp(i64),
    /// By this many offsets from the committed offset (negative: back), kept
    /// within the log start and end offsets. A partition without a committed
    /// offset fails with [`AdminError::NoCommittedOffset`].
    ShiftBy(i64),
    /// To this offset, kept within the log start and end offsets.
    Offset(i64),
}

impl Admin {
    /// The offsets [`Admin::reset_consumer_group_offsets`] would commit, without
    /// committing them (a dry run). `partitions` empty means every partition the
    /// group has a committed offset for.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: this only reads.
    pub async fn plan_consumer_group_offsets_reset(
        &self,
        group: impl Into<String>,
        partitions: impl IntoIterator<Item = TopicPartition>,
        to: GroupOffsetReset,
    ) -> Result<BTreeMap<TopicPartition, i64>, AdminError> {
        let group: String = group.into();
        let mut partitions: Vec<TopicPartition> = partitions.into_iter().collect();
        let needs_committed = partitions.is_empty() || matches!(to, GroupOffsetReset::ShiftBy(_));
        let committed = if needs_committed {
            self.group_offsets(group.clone()).await?
        } else {
            BTreeMap::new()
        };
        if partitions.is_empty() {
            partitions = committed.keys().cloned().collect();
        }
        partitions.sort();
        partitions.dedup();
        let ends = |spec: OffsetSpec| -> Vec<(String, i32, OffsetSpec)> {
            partitions
                .iter()
                .map(|tp| (tp.topic.to_string(), tp.partition, spec))
                .collect()
        };
        let earliest = list_offsets(&self.client, &ends(OffsetSpec::Earliest)).await?;
        let latest = list_offsets(&self.client, &ends(OffsetSpec::Latest)).await?;
        let by_time = match to {
            GroupOffsetReset::Timestamp(t) => {
                Some(list_offsets(&self.client, &ends(OffsetSpec::Timestamp(t))).await?)
            }
            _ => None,
        };
        let mut out = BTreeMap::new();
        for (i, tp) in partitions.iter().enumerate() {
            let (low, high) = (earliest[i].offset, latest[i].offset);
            let clamp = |o: i64| o.clamp(low, high.max(low));
            let target = match to {
                GroupOffsetReset::Earliest => low,
                GroupOffsetReset::Latest => high,
                GroupOffsetReset::Timestamp(_) => {
                    let found = by_time.as_ref().map_or(-1, |f| f[i].offset);
                    if found < 0 {
                        high
                    } else {
                        found
                    }
                }
                GroupOffsetReset::Offset(o) => clamp(o),
                GroupOffsetReset::ShiftBy(n) => match committed.get(tp) {
                    Some(c) => clamp(c.offset.saturating_add(n)),
                    None => {
                        return Err(AdminError::NoCommittedOffset {
                            group,
                            partition: tp.clone(),
                        })
                    }
                },
            };
            out.insert(tp.clone(), target);
        }
        Ok(out)
    }

    /// Moves the committed offsets of `group` (see [`GroupOffsetReset`]) and
    /// returns the offsets committed. `partitions` empty means every partition the
    /// group has a committed offset for. The group must have no members (stop its
    /// consumers first): otherwise [`AdminError::GroupActive`] and nothing changes.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in effect: if the future is dropped while committing, the
    /// offsets may or may not be moved; see
    /// [`Admin::alter_consumer_group_offsets`].
    pub async fn reset_consumer_group_offsets(
        &self,
        group: impl Into<String>,
        partitions: impl IntoIterator<Item = TopicPartition>,
        to: GroupOffsetReset,
    ) -> Result<BTreeMap<TopicPartition, i64>, AdminError> {
        let group: String = group.into();
        let plan = self
            .plan_consumer_group_offsets_reset(group.clone(), partitions, to)
            .await?;
        self.alter_consumer_group_offsets(
            group,
            plan.iter()
                .map(|(tp, &o)| (tp.clone(), OffsetAndMetadata::new(o))),
        )
        .await?;
        Ok(plan)
    }
}
