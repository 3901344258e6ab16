//! [`Admin::alter_consumer_group_offsets`]: OffsetCommit (API key 8) sent to the
//! group's coordinator as Kafka's admin client sends it: outside any generation
//! (generation -1, empty member id), which the coordinator accepts only while the
//! group has no members.

use std::collections::BTreeMap;

use baton_protocol::messages::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use baton_protocol::ErrorCode;

use super::group_coordinators::{partition_failures, GroupFailure, GroupOutcome};
use super::list_group_offsets::OffsetAndMetadata;
use super::{Admin, AdminError};
use crate::group::TopicPartition;

/// The codes a coordinator answers an out-of-generation commit to a group with
/// members: the group must be stopped first.
fn means_group_active(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::UnknownMemberId
            | ErrorCode::RebalanceInProgress
            | ErrorCode::IllegalGeneration
            | ErrorCode::StaleMemberEpoch
    )
}

impl Admin {
    /// Sets committed offsets of `group` (OffsetCommit outside any generation, as
    /// Kafka's admin client does). The group must have no members: the
    /// coordinator refuses the commit for a running group (UNKNOWN_MEMBER_ID,
    /// REBALANCE_IN_PROGRESS), which comes back as [`AdminError::GroupActive`];
    /// stop its consumers first. Committing to a group that does not exist
    /// creates it, with just these offsets. Partitions that fail
    /// (TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION, ...) are reported
    /// in [`AdminError::GroupOffsets`]; the others were committed.
    ///
    /// Coordinator moves, loading coordinators and connection failures are retried
    /// with backoff until the operation timeout; committing the same offsets twice
    /// is harmless.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in effect: if the future is dropped after the request was
    /// sent, the offsets may or may not be committed. The connection stays usable.
    pub async fn alter_consumer_group_offsets(
        &self,
        group: impl Into<String>,
        offsets: impl IntoIterator<Item = (TopicPartition, OffsetAndMetadata)>,
    ) -> Result<(), AdminError> {
        let group: String = group.into();
        let offsets: BTreeMap<TopicPartition, OffsetAndMetadata> = offsets.into_iter().collect();
        if offsets.is_empty() {
            return Ok(());
        }
        let mut topics: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
        for (tp, o) in &offsets {
            topics
                .entry(&tp.topic)
                .or_default()
                .push(OffsetCommitRequestPartition {
                    partition_index: tp.partition,
                    committed_offset: o.offset,
                    committed_leader_epoch: o.leader_epoch.unwrap_or(-1),
                    commit_timestamp: -1,
                    committed_metadata: Some(o.metadata.clone()),
                });
        }
        let req = OffsetCommitRequest {
            group_id: group.clone(),
            generation_id_or_member_epoch: -1,
            member_id: String::new(),
            group_instance_id: None,
            retention_time_ms: -1,
            topics: topics
                .into_iter()
                .map(|(name, partitions)| OffsetCommitRequestTopic {
                    name: name.to_owned(),
                    partitions,
                })
                .collect(),
        };
        let req = &req;
        let results = self
            .per_coordinator(vec![group.clone()], |_, conn, _| {
                Box::pin(async move {
                    let resp = conn.send(req).await?;
                    let mut failed = Vec::new();
                    let mut group_code = None;
                    for t in resp.topics {
                        for p in t.partitions {
                            let code = ErrorCode::from_code(p.error_code);
                            if code.is_ok() {
                                continue;
                            }
                            if code.is_retriable() || means_group_active(code) {
                                group_code.get_or_insert(code);
                            } else {
                                failed.push((
                                    TopicPartition::new(t.name.as_str(), p.partition_index),
                                    code,
                                ));
                            }
                        }
                    }
                    let outcome = match group_code {
                        Some(code) => GroupOutcome::from_error(&req.group_id, code, None),
                        None => GroupOutcome::Done(failed),
                    };
                    Ok(vec![(req.group_id.clone(), outcome)])
                })
            })
            .await?;
        let (_, result) = results.into_iter().next().expect("one group asked for");
        match result {
            Ok(failed) => partition_failures(&group, failed),
            Err(GroupFailure { code, .. }) if means_group_active(code) => {
                Err(AdminError::GroupActive { group, code })
            }
            Err(f) => Err(AdminError::Groups(vec![f])),
        }
    }
}
