//! [`Admin::alter_partition_reassignments`]: AlterPartitionReassignments (API key
//! 45, KIP-455), sent to the controller.

use std::sync::Mutex;

use baton_protocol::messages::{
    AlterPartitionReassignmentsRequest, ReassignablePartition, ReassignableTopic,
};
use baton_protocol::ErrorCode;

use super::retry::retriable_code;
use super::{lock, Admin, AdminError};
use crate::client::ClientError;

/// One partition's reassignment for [`Admin::alter_partition_reassignments`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reassignment {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The target replicas, preferred leader first; `None` cancels the
    /// reassignment in progress.
    pub target: Option<Vec<i32>>,
}

impl Reassignment {
    /// Moves the partition's replicas to `replicas` (broker ids, preferred leader
    /// first).
    pub fn to(topic: impl Into<String>, partition: i32, replicas: Vec<i32>) -> Self {
        Reassignment {
            topic: topic.into(),
            partition,
            target: Some(replicas),
        }
    }

    /// Cancels the partition's reassignment in progress: its original replicas
    /// stay.
    pub fn cancel(topic: impl Into<String>, partition: i32) -> Self {
        Reassignment {
            topic: topic.into(),
            partition,
            target: None,
        }
    }
}

/// A partition the broker refused to act on.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartitionError {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The error code the broker sent.
    pub code: ErrorCode,
    /// The broker's message, if any.
    pub message: Option<String>,
}

impl Admin {
    /// Starts, replaces or cancels partition reassignments
    /// (AlterPartitionReassignments). The controller records each target; the
    /// replicas being added then copy the partition from its leader, and once all
    /// of the target is in sync the old replicas are dropped (their data deleted)
    /// and, if the leader was one of them, a target replica leads. The call
    /// returns once the broker's metadata shows each reassignment started; follow
    /// it with [`Admin::list_partition_reassignments`].
    ///
    /// Partitions refused are reported in [`AdminError::Partitions`]:
    /// INVALID_REPLICA_ASSIGNMENT (empty, repeated or unknown brokers),
    /// NO_REASSIGNMENT_IN_PROGRESS (a cancellation with nothing to cancel),
    /// UNKNOWN_TOPIC_OR_PARTITION; a top-level refusal (such as
    /// CLUSTER_AUTHORIZATION_FAILED) is an [`AdminError::Client`] error.
    /// Retriable errors are retried for the partitions they concern until the
    /// operation timeout; a target sent again changes nothing, a cancellation sent
    /// again after a lost answer reports NO_REASSIGNMENT_IN_PROGRESS.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in effect: if the future is dropped after the request was
    /// sent, the reassignments may or may not have started. The connection stays
    /// usable.
    pub async fn alter_partition_reassignments(
        &self,
        reassignments: impl IntoIterator<Item = Reassignment>,
    ) -> Result<(), AdminError> {
        let wanted: Vec<Reassignment> = reassignments.into_iter().collect();
        let done: Mutex<Vec<(String, i32, Option<PartitionError>)>> = Mutex::new(Vec::new());
        let (done, wanted) = (&done, &wanted);
        self.with_retries("alter partition reassignments", || async move {
            let mut topics: Vec<ReassignableTopic> = Vec::new();
            {
                let finished = lock(done);
                for r in wanted.iter().filter(|r| {
                    !finished
                        .iter()
                        .any(|(t, p, _)| t == &r.topic && *p == r.partition)
                }) {
                    let partition = ReassignablePartition {
                        partition_index: r.partition,
                        replicas: r.target.clone(),
                    };
                    match topics.iter_mut().find(|t| t.name == r.topic) {
                        Some(t) => t.partitions.push(partition),
                        None => topics.push(ReassignableTopic {
                            name: r.topic.clone(),
                            partitions: vec![partition],
                        }),
                    }
                }
            }
            if topics.is_empty() {
                return Ok(());
            }
            let req = AlterPartitionReassignmentsRequest {
                timeout_ms: self.timeout_ms(),
                topics,
            };
            let resp = self.controller_attempt(&req).await?;
            retriable_code(resp.error_code, || "alter partition reassignments".into())?;
            if resp.error_code != 0 {
                return Err(AdminError::Client(ClientError::Broker {
                    code: ErrorCode::from_code(resp.error_code),
                    context: resp
                        .error_message
                        .unwrap_or_else(|| "alter partition reassignments".into()),
                }));
            }
            let mut retry = Ok(());
            for t in resp.responses {
                for p in t.partitions {
                    let at = || format!("{}/{}", t.name, p.partition_index);
                    if let Err(e) = retriable_code(p.error_code, at) {
                        retry = Err(e);
                        continue;
                    }
                    let error = (p.error_code != 0).then(|| PartitionError {
                        topic: t.name.clone(),
                        partition: p.partition_index,
                        code: ErrorCode::from_code(p.error_code),
                        message: p.error_message,
                    });
                    lock(done).push((t.name.clone(), p.partition_index, error));
                }
            }
            retry
        })
        .await?;
        let errors: Vec<PartitionError> = std::mem::take(&mut *lock(done))
            .into_iter()
            .filter_map(|(_, _, e)| e)
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(AdminError::Partitions(errors))
        }
    }
}
