//! [`Admin::delete_records`]: DeleteRecords (API key 21, KIP-107), sent to each
//! partition's leader.

use std::collections::BTreeMap;

use baton_protocol::messages::{DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic};
use baton_protocol::ErrorCode;
use tokio::time::Instant;

use super::retry::{RETRY_BACKOFF_BASE, RETRY_BACKOFF_CAP};
use super::{Admin, AdminError};
use crate::backoff::Backoff;
use crate::client::ClientError;
use crate::offsets::{group_by_leader, LeaderRound};

/// Deletes the records of a partition below an offset, for [`Admin::delete_records`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordsToDelete {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// Records below this offset are deleted; [`RecordsToDelete::HIGH_WATERMARK`]
    /// (-1) means the partition's high watermark (every committed record).
    pub before_offset: i64,
}

impl RecordsToDelete {
    /// The `before_offset` that means the partition's high watermark.
    pub const HIGH_WATERMARK: i64 = -1;

    /// Deletes the records of `topic`/`partition` below `before_offset`.
    pub fn new(topic: impl Into<String>, partition: i32, before_offset: i64) -> Self {
        RecordsToDelete {
            topic: topic.into(),
            partition,
            before_offset,
        }
    }
}

/// A partition whose records were deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeletedRecords {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The partition's low watermark after the deletion: the smallest log start
    /// offset among its replicas, at least the requested offset.
    pub low_watermark: i64,
}

/// A partition whose records could not be deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordsError {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The error code the broker sent: OFFSET_OUT_OF_RANGE for an offset past the
    /// high watermark, POLICY_VIOLATION for a compacted topic,
    /// TOPIC_AUTHORIZATION_FAILED without Delete on the topic, REQUEST_TIMED_OUT
    /// when the replicas did not all follow in time, or the last retriable error
    /// when the operation timeout ran out.
    pub code: ErrorCode,
}

impl Admin {
    /// Deletes records below the given offsets (DeleteRecords), asking each
    /// partition's leader, which answers once every live replica has moved its log
    /// start offset. Returns one [`DeletedRecords`] per deletion, in order.
    ///
    /// Retriable errors (a leader change, a partition not yet known) are retried on
    /// fresh metadata until the operation timeout; a deletion is idempotent, so a
    /// retry after a lost answer is harmless. Partitions that fail are reported
    /// together in [`AdminError::Records`]; the others were deleted.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in effect: if the future is dropped after a request was
    /// sent, the records may or may not be deleted. The connections stay usable.
    pub async fn delete_records(
        &self,
        deletions: impl IntoIterator<Item = RecordsToDelete>,
    ) -> Result<Vec<DeletedRecords>, AdminError> {
        let queries: Vec<RecordsToDelete> = deletions.into_iter().collect();
        let deadline = Instant::now() + self.operation_timeout;
        let timeout_ms = self.operation_timeout.as_millis().min(i32::MAX as u128) as i32;
        let mut results: Vec<Option<Result<i64, ErrorCode>>> = vec![None; queries.len()];
        let mut last_retriable: Vec<Option<ErrorCode>> = vec![None; queries.len()];
        let mut backoff = Backoff::new(RETRY_BACKOFF_BASE, RETRY_BACKOFF_CAP);
        let client = &self.client;
        loop {
            let pending: Vec<_> = queries
                .iter()
                .zip(&results)
                .map(|(q, r)| r.is_none().then_some((q.topic.as_str(), q.partition)))
                .collect();
            let LeaderRound {
                by_leader,
                deferred,
                mut last_error,
            } = group_by_leader(client, &pending).await?;
            for (leader, (generation, indices)) in by_leader {
                let mut topics: BTreeMap<&str, Vec<DeleteRecordsPartition>> = BTreeMap::new();
                for &i in &indices {
                    let q = &queries[i];
                    topics
                        .entry(&q.topic)
                        .or_default()
                        .push(DeleteRecordsPartition {
                            partition_index: q.partition,
                            offset: q.before_offset,
                        });
                }
                let req = DeleteRecordsRequest {
                    topics: topics
                        .into_iter()
                        .map(|(name, partitions)| DeleteRecordsTopic {
                            name: name.to_owned(),
                            partitions,
                        })
                        .collect(),
                    timeout_ms,
                };
                // The broker may hold the answer for `timeout_ms`.
                let wait = self.operation_timeout + client.request_timeout();
                let resp = match client.node_connection(leader).await {
                    Ok(conn) => conn
                        .send_with_timeout(&req, wait)
                        .await
                        .map_err(ClientError::from),
                    Err(e) => Err(e),
                };
                let resp = match resp {
                    Ok(r) => r,
                    Err(e) if e.is_retriable() => {
                        client.invalidate_metadata(generation);
                        last_error = Some(e);
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                };
                for t in resp.topics {
                    for p in t.partitions {
                        let Some(&i) = indices.iter().find(|&&i| {
                            queries[i].topic == t.name && queries[i].partition == p.partition_index
                        }) else {
                            continue;
                        };
                        let code = ErrorCode::from_code(p.error_code);
                        if code.is_ok() {
                            results[i] = Some(Ok(p.low_watermark));
                        } else if code.is_retriable() && code != ErrorCode::RequestTimedOut {
                            client.invalidate_metadata(generation);
                            last_retriable[i] = Some(code);
                        } else {
                            results[i] = Some(Err(code));
                        }
                    }
                }
            }
            let pending = results.iter().any(Option::is_none);
            if pending && (deferred && last_error.is_none()) {
                continue;
            }
            let wait = backoff.next_delay();
            if pending && Instant::now() + wait <= deadline {
                tokio::time::sleep(wait).await;
                continue;
            }
            if pending && last_retriable.iter().all(Option::is_none) {
                if let Some(e) = last_error {
                    return Err(e.into());
                }
            }
            let mut done = Vec::with_capacity(queries.len());
            let mut failed = Vec::new();
            for (i, q) in queries.into_iter().enumerate() {
                let outcome = results[i].unwrap_or(Err(last_retriable[i]
                    .take()
                    .unwrap_or(ErrorCode::RequestTimedOut)));
                match outcome {
                    Ok(low_watermark) => done.push(DeletedRecords {
                        topic: q.topic,
                        partition: q.partition,
                        low_watermark,
                    }),
                    Err(code) => failed.push(RecordsError {
                        topic: q.topic,
                        partition: q.partition,
                        code,
                    }),
                }
            }
            return if failed.is_empty() {
                Ok(done)
            } else {
                Err(AdminError::Records(failed))
            };
        }
    }
}
