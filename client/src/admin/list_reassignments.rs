//! [`Admin::list_partition_reassignments`]: ListPartitionReassignments (API key
//! 46, KIP-455), sent to the controller.

use baton_protocol::messages::{
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsTopics,
};
use baton_protocol::ErrorCode;

use super::retry::retriable_code;
use super::{Admin, AdminError};
use crate::client::ClientError;

/// A partition reassignment in progress.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OngoingReassignment {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The replicas now: the target followed by the replicas being removed.
    pub replicas: Vec<i32>,
    /// The replicas being added (catching up).
    pub adding_replicas: Vec<i32>,
    /// The replicas being removed once the target is in sync.
    pub removing_replicas: Vec<i32>,
}

impl Admin {
    /// Lists the partition reassignments in progress
    /// (ListPartitionReassignments) among `partitions` (`topic`, `partition`), or
    /// all when `None`. Partitions not being reassigned, and unknown ones, are
    /// left out. Retriable errors are retried until the operation timeout; a
    /// top-level refusal (such as CLUSTER_AUTHORIZATION_FAILED) is an
    /// [`AdminError::Client`] error.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads. The connection stays usable.
    pub async fn list_partition_reassignments(
        &self,
        partitions: Option<Vec<(String, i32)>>,
    ) -> Result<Vec<OngoingReassignment>, AdminError> {
        let topics = partitions.map(|ps| {
            let mut topics: Vec<ListPartitionReassignmentsTopics> = Vec::new();
            for (topic, partition) in ps {
                match topics.iter_mut().find(|t| t.name == topic) {
                    Some(t) => t.partition_indexes.push(partition),
                    None => topics.push(ListPartitionReassignmentsTopics {
                        name: topic,
                        partition_indexes: vec![partition],
                    }),
                }
            }
            topics
        });
        let req = ListPartitionReassignmentsRequest {
            timeout_ms: self.timeout_ms(),
            topics,
        };
        let req = &req;
        self.with_retries("list partition reassignments", || async move {
            let resp = self.controller_attempt(req).await?;
            retriable_code(resp.error_code, || "list partition reassignments".into())?;
            if resp.error_code != 0 {
                return Err(AdminError::Client(ClientError::Broker {
                    code: ErrorCode::from_code(resp.error_code),
                    context: resp
                        .error_message
                        .unwrap_or_else(|| "list partition reassignments".into()),
                }));
            }
            Ok(resp
                .topics
                .into_iter()
                .flat_map(|t| {
                    t.partitions.into_iter().map(move |p| OngoingReassignment {
                        topic: t.name.clone(),
                        partition: p.partition_index,
                        replicas: p.replicas,
                        adding_replicas: p.adding_replicas,
                        removing_replicas: p.removing_replicas,
                    })
                })
                .collect())
        })
        .await
    }
}
