//! [`Admin::create_partitions`]: CreatePartitions (API key 37, KIP-195), sent to
//! the controller.

use std::sync::Mutex;

use baton_protocol::messages::{
    CreatePartitionsAssignment, CreatePartitionsRequest, CreatePartitionsTopic,
};
use baton_protocol::ErrorCode;

use super::retry::retriable_code;
use super::{lock, Admin, AdminError, TopicError};
use crate::metadata::Scope;

/// A topic's new partition count, for [`Admin::create_partitions`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NewPartitions {
    /// The topic.
    pub topic: String,
    /// The partition count after the call (not the number added).
    pub total_count: i32,
    /// The replicas of each new partition (its first broker is the preferred
    /// leader), one list per new partition; `None` lets the controller place them.
    pub assignments: Option<Vec<Vec<i32>>>,
}

impl NewPartitions {
    /// Grows `topic` to `total_count` partitions, placed by the controller.
    pub fn increase_to(topic: impl Into<String>, total_count: i32) -> Self {
        NewPartitions {
            topic: topic.into(),
            total_count,
            assignments: None,
        }
    }

    /// Places the new partitions on the given brokers: one list of broker ids
    /// per new partition, the preferred leader first.
    pub fn assignments(mut self, assignments: Vec<Vec<i32>>) -> Self {
        self.assignments = Some(assignments);
        self
    }
}

impl Admin {
    /// Raises topics' partition counts (CreatePartitions) through the controller,
    /// then (unless `validate_only`) waits, up to the operation timeout, until
    /// metadata shows every new partition with a leader, so that producing to
    /// them can start at once. Producers pick the new partitions up on their next
    /// metadata refresh.
    ///
    /// Topics that fail are reported in [`AdminError::Topics`]:
    /// INVALID_PARTITIONS for a count not above the current one,
    /// INVALID_REPLICA_ASSIGNMENT for assignments that do not fit,
    /// UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED. Retriable errors
    /// are retried until the operation timeout; a retry after a lost answer finds
    /// the partitions there and reports INVALID_PARTITIONS for that topic.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in effect: if the future is dropped after the request was
    /// sent, the partitions may or may not be created. The connection stays usable;
    /// the same call again either creates them or reports INVALID_PARTITIONS, and
    /// either way leaves the client's metadata showing them.
    pub async fn create_partitions(
        &self,
        topics: impl IntoIterator<Item = NewPartitions>,
        validate_only: bool,
    ) -> Result<(), AdminError> {
        let topics: Vec<NewPartitions> = topics.into_iter().collect();
        if topics.is_empty() {
            return Ok(());
        }
        let outcomes: Mutex<Vec<(String, Option<TopicError>)>> = Mutex::new(Vec::new());
        let outcomes = &outcomes;
        let topics_ref = &topics;
        self.with_retries("create partitions", || async move {
            let req = CreatePartitionsRequest {
                topics: topics_ref
                    .iter()
                    .filter(|t| !lock(outcomes).iter().any(|(n, _)| n == &t.topic))
                    .map(|t| CreatePartitionsTopic {
                        name: t.topic.clone(),
                        count: t.total_count,
                        assignments: t.assignments.as_ref().map(|a| {
                            a.iter()
                                .map(|ids| CreatePartitionsAssignment {
                                    broker_ids: ids.clone(),
                                })
                                .collect()
                        }),
                    })
                    .collect(),
                timeout_ms: self.timeout_ms(),
                validate_only,
            };
            let resp = self.controller_attempt(&req).await?;
            let mut retry = Ok(());
            for r in resp.results {
                if let Err(e) = retriable_code(r.error_code, || format!("topic {}", r.name)) {
                    retry = Err(e);
                    continue;
                }
                let error = (r.error_code != 0).then(|| TopicError {
                    topic: r.name.clone(),
                    code: ErrorCode::from_code(r.error_code),
                    message: r.error_message,
                });
                lock(outcomes).push((r.name, error));
            }
            retry
        })
        .await?;
        let outcomes = std::mem::take(&mut *lock(outcomes));
        let errors: Vec<TopicError> = outcomes.iter().filter_map(|(_, e)| e.clone()).collect();
        if !validate_only {
            let grown: Vec<(String, i32)> = topics
                .iter()
                .filter(|t| !errors.iter().any(|e| e.topic == t.topic))
                .map(|t| (t.topic.clone(), t.total_count))
                .collect();
            // INVALID_PARTITIONS may mean an earlier call (dropped, or its answer
            // lost) grew the topic already: refresh its cached metadata, so its
            // partitions are usable at once whichever call created them.
            let refused: Vec<String> = errors
                .iter()
                .filter(|e| e.code == ErrorCode::InvalidPartitions)
                .map(|e| e.topic.clone())
                .collect();
            if !refused.is_empty() {
                let _ = self.client.refresh(Scope::Topics(refused), None).await;
            }
            self.wait_for_partitions(&grown).await?;
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(AdminError::Topics(errors))
        }
    }

    /// Waits until metadata shows each topic with at least its count of
    /// partitions, each with a leader.
    async fn wait_for_partitions(&self, topics: &[(String, i32)]) -> Result<(), AdminError> {
        let names: Vec<String> = topics.iter().map(|(t, _)| t.clone()).collect();
        self.poll_topics_until_led(names.clone(), |refreshed| match refreshed {
            Ok((meta, _)) => Ok(topics
                .iter()
                .filter(|(name, count)| match meta.topic(name) {
                    None => !meta.unauthorized_topics.contains(name),
                    Some(t) => {
                        (t.partitions.len() as i64) < i64::from(*count)
                            || t.partitions.iter().any(|p| p.leader.is_none())
                    }
                })
                .map(|(name, _)| name.clone())
                .collect()),
            Err(e) if e.is_retriable() => Ok(names.clone()),
            Err(e) => Err(e.into()),
        })
        .await
    }
}
