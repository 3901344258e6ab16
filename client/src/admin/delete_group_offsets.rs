//! [`Admin::delete_consumer_group_offsets`]: OffsetDelete (API key 47, KIP-496)
//! sent to the group's coordinator.

use std::collections::BTreeMap;

use baton_protocol::messages::{
    OffsetDeleteRequest, OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use baton_protocol::ErrorCode;

use super::group_coordinators::{partition_failures, GroupOutcome};
use super::{Admin, AdminError};
use crate::group::TopicPartition;

impl Admin {
    /// Deletes the committed offsets of `group` for `partitions` (OffsetDelete).
    /// A partition of a topic that a live member of the group subscribes to is
    /// refused with GROUP_SUBSCRIBED_TO_TOPIC, reported with other partition
    /// failures in [`AdminError::GroupOffsets`] (the other partitions' offsets
    /// were deleted). A group-level refusal (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP
    /// for a running group of another protocol type,
    /// GROUP_AUTHORIZATION_FAILED) comes back as [`AdminError::Groups`].
    ///
    /// Coordinator moves, loading coordinators and connection failures are retried
    /// with backoff until the operation timeout; deleting twice is harmless.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in effect: if the future is dropped after the request was
    /// sent, the offsets may or may not be deleted. The connection stays usable.
    pub async fn delete_consumer_group_offsets(
        &self,
        group: impl Into<String>,
        partitions: impl IntoIterator<Item = TopicPartition>,
    ) -> Result<(), AdminError> {
        let group: String = group.into();
        let mut topics: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for tp in partitions {
            let ps = topics.entry(tp.topic.to_string()).or_default();
            if !ps.contains(&tp.partition) {
                ps.push(tp.partition);
            }
        }
        if topics.is_empty() {
            return Ok(());
        }
        let req = OffsetDeleteRequest {
            group_id: group.clone(),
            topics: topics
                .into_iter()
                .map(|(name, ps)| OffsetDeleteRequestTopic {
                    name,
                    partitions: ps
                        .into_iter()
                        .map(|partition_index| OffsetDeleteRequestPartition { partition_index })
                        .collect(),
                })
                .collect(),
        };
        let req = &req;
        let results = self
            .per_coordinator(vec![group.clone()], |_, conn, _| {
                Box::pin(async move {
                    let resp = conn.send(req).await?;
                    let code = ErrorCode::from_code(resp.error_code);
                    if !code.is_ok() {
                        let outcome = GroupOutcome::from_error(&req.group_id, code, None);
                        return Ok(vec![(req.group_id.clone(), outcome)]);
                    }
                    let mut failed = Vec::new();
                    let mut retry = None;
                    for t in resp.topics {
                        for p in t.partitions {
                            let code = ErrorCode::from_code(p.error_code);
                            if code.is_ok() {
                                continue;
                            }
                            if matches!(
                                code,
                                ErrorCode::NotCoordinator
                                    | ErrorCode::CoordinatorNotAvailable
                                    | ErrorCode::CoordinatorLoadInProgress
                            ) {
                                retry = Some(code);
                            }
                            failed.push((
                                TopicPartition::new(t.name.as_str(), p.partition_index),
                                code,
                            ));
                        }
                    }
                    let outcome = match retry {
                        Some(code) => GroupOutcome::Retry(code),
                        None => GroupOutcome::Done(failed),
                    };
                    Ok(vec![(req.group_id.clone(), outcome)])
                })
            })
            .await?;
        let (_, result) = results.into_iter().next().expect("one group asked for");
        match result {
            Ok(failed) => partition_failures(&group, failed),
            Err(f) => Err(AdminError::Groups(vec![f])),
        }
    }
}
