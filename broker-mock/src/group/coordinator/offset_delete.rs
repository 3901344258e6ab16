//! [`GroupCoordinator::delete_offsets`]: OffsetDelete (KIP-496) on the
//! coordinator: tombstones in `__consumer_offsets`, so the deletion survives a
//! restart and a coordinator failover.

use bytes::Bytes;

use baton_protocol::ErrorCode;

use super::{append, await_replicated, catalog, GroupCoordinator, GroupHost};
use crate::group::records::{self, OffsetKey};

/// The outcome of each partition of an OffsetDelete: topic, partition, error code.
pub(crate) type DeletedOffsets = Vec<(String, i32, ErrorCode)>;

impl GroupCoordinator {
    /// Deletes the committed offsets of `group_id` for `partitions`, as Kafka's
    /// coordinator does: the whole request fails with GROUP_ID_NOT_FOUND without
    /// the group, NON_EMPTY_GROUP for a running classic group of another protocol
    /// type than `consumer`, NOT_COORDINATOR elsewhere; a partition of a topic a
    /// member subscribes to answers GROUP_SUBSCRIBED_TO_TOPIC; the others are
    /// deleted (a partition without a committed offset simply succeeds). Returns
    /// once the tombstones are stored (and, in a cluster, replicated).
    pub fn delete_offsets(
        &self,
        state: &dyn GroupHost,
        group_id: &str,
        partitions: Vec<(String, i32)>,
    ) -> Result<DeletedOffsets, ErrorCode> {
        let catalog = catalog(state);
        let mut inner = self.owned(state, group_id)?;
        let protected = match inner.consumer.subscribed_topic_names(group_id, &catalog) {
            Some(topics) => topics,
            None => inner.groups.offset_delete_protected(group_id)?,
        };
        let mut out = Vec::with_capacity(partitions.len());
        let mut entries: Vec<(Bytes, Option<Bytes>)> = Vec::new();
        let mut deleted = Vec::new();
        for (topic, partition) in partitions {
            if protected.contains(&topic) {
                out.push((topic, partition, ErrorCode::GroupSubscribedToTopic));
                continue;
            }
            if inner.groups.offset(group_id, &topic, partition).is_some()
                && !deleted.contains(&(topic.clone(), partition))
            {
                let key = OffsetKey {
                    group: group_id.to_owned(),
                    topic: topic.clone(),
                    partition,
                };
                entries.push((records::encode_key(&key), None));
                deleted.push((topic.clone(), partition));
            }
            out.push((topic, partition, ErrorCode::None));
        }
        if entries.is_empty() {
            return Ok(out);
        }
        let (position, wait) = append(state, group_id, &entries, None, state.now_ms())?;
        for ((topic, partition), position) in deleted.into_iter().zip(position..) {
            inner
                .groups
                .apply_offset(group_id, &topic, partition, None, position);
        }
        drop(inner);
        await_replicated(wait)?;
        Ok(out)
    }
}
