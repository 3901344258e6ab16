//! [`Admin::elect_leaders`]: ElectLeaders (API key 43; KIP-183 preferred,
//! KIP-460 unclean), sent to the controller.

use std::sync::Mutex;

use baton_protocol::messages::{
    ElectLeadersRequest, ElectLeadersTopicPartitions, ELECTION_PREFERRED, ELECTION_UNCLEAN,
};
use baton_protocol::ErrorCode;

use super::retry::retriable_code;
use super::{lock, Admin, AdminError};
use crate::client::ClientError;

/// Which leader [`Admin::elect_leaders`] elects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ElectionType {
    /// The preferred (first) replica, if it is alive and in sync.
    Preferred,
    /// For a partition without a leader: an in-sync replica if one is alive, else
    /// the first live replica even though it is out of sync (records only the
    /// old leader had are lost).
    Unclean,
}

/// The outcome of one partition's election.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ElectionResult {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// `ErrorCode::None` if a leader was elected; else ELECTION_NOT_NEEDED (the
    /// preferred replica leads already, or, unclean, the partition has a leader),
    /// PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
    /// UNKNOWN_TOPIC_OR_PARTITION, CLUSTER_AUTHORIZATION_FAILED, or the last
    /// retriable error when the operation timeout ran out.
    pub code: ErrorCode,
    /// The broker's message, if any.
    pub message: Option<String>,
}

/// The codes an election answers with as its outcome: retriable in Kafka's
/// table, but a repeat would answer the same, so they are reported, not retried.
fn final_outcome(code: i16) -> bool {
    [
        ErrorCode::ElectionNotNeeded,
        ErrorCode::PreferredLeaderNotAvailable,
        ErrorCode::EligibleLeadersNotAvailable,
    ]
    .iter()
    .any(|c| c.code() == code)
}

impl Admin {
    /// Elects leaders (ElectLeaders) for `partitions` (`topic`, `partition`), or
    /// for every partition when `None` (then only partitions that needed an
    /// election are reported). Returns one [`ElectionResult`] per partition; the
    /// broker's answer comes once its metadata shows the new leaders.
    ///
    /// Retriable errors (no controller, a lost connection, NOT_CONTROLLER,
    /// REQUEST_TIMED_OUT, ...) are retried for the partitions they concern until
    /// the operation timeout. A retry after a lost answer may find the election
    /// done and report ELECTION_NOT_NEEDED. A top-level refusal (such as
    /// CLUSTER_AUTHORIZATION_FAILED) is an [`AdminError::Client`] error.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in effect: if the future is dropped after the request was
    /// sent, the elections may or may not happen. The connection stays usable.
    pub async fn elect_leaders(
        &self,
        election: ElectionType,
        partitions: Option<Vec<(String, i32)>>,
    ) -> Result<Vec<ElectionResult>, AdminError> {
        let done: Mutex<Vec<ElectionResult>> = Mutex::new(Vec::new());
        let (done, partitions) = (&done, &partitions);
        self.with_retries("elect leaders", || async move {
            let topic_partitions = partitions.as_ref().map(|ps| {
                let pending = lock(done);
                let mut topics: Vec<ElectLeadersTopicPartitions> = Vec::new();
                for (topic, partition) in ps {
                    if pending
                        .iter()
                        .any(|r| &r.topic == topic && r.partition == *partition)
                    {
                        continue;
                    }
                    match topics.iter_mut().find(|t| &t.topic == topic) {
                        Some(t) => t.partitions.push(*partition),
                        None => topics.push(ElectLeadersTopicPartitions {
                            topic: topic.clone(),
                            partitions: vec![*partition],
                        }),
                    }
                }
                topics
            });
            if topic_partitions.as_ref().is_some_and(|t| t.is_empty()) {
                return Ok(());
            }
            let req = ElectLeadersRequest {
                election_type: match election {
                    ElectionType::Preferred => ELECTION_PREFERRED,
                    ElectionType::Unclean => ELECTION_UNCLEAN,
                },
                topic_partitions,
                timeout_ms: self.timeout_ms(),
            };
            let resp = self.controller_attempt(&req).await?;
            retriable_code(resp.error_code, || "elect leaders".into())?;
            if resp.error_code != 0 && resp.replica_election_results.is_empty() {
                return Err(AdminError::Client(ClientError::Broker {
                    code: ErrorCode::from_code(resp.error_code),
                    context: "elect leaders".into(),
                }));
            }
            let mut retry = Ok(());
            for t in resp.replica_election_results {
                for p in t.partition_result {
                    if !final_outcome(p.error_code) {
                        if let Err(e) = retriable_code(p.error_code, || {
                            format!("{}/{}", t.topic, p.partition_id)
                        }) {
                            retry = Err(e);
                            continue;
                        }
                    }
                    lock(done).push(ElectionResult {
                        topic: t.topic.clone(),
                        partition: p.partition_id,
                        code: ErrorCode::from_code(p.error_code),
                        message: p.error_message,
                    });
                }
            }
            retry
        })
        .await?;
        let results = std::mem::take(&mut *lock(done));
        Ok(results)
    }
}
