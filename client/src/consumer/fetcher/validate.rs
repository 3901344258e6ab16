//! Position validation after a leader change (KIP-320).
//!
//! When metadata names a newer leader epoch for a partition the consumer has read
//! from, the records it read may not be in the new leader's log (an unclean
//! election, or a leader that lost its unreplicated tail). Before fetching again,
//! the fetch task asks the leader with OffsetForLeaderEpoch for the end offset of
//! the epoch of the last batch it read. If that end offset is below the position,
//! the log was truncated under the consumer: the position moves back to the end
//! offset (the divergence point) and the application gets
//! [`ConsumerError::LogTruncation`], never a silent rewind. A Fetch answer's
//! `diverging_epoch` (Fetch v12+) leads to the same check.
//!
//! As in Kafka's consumer, an undefined end offset (the leader has no epoch at or
//! below ours) is handled like OFFSET_OUT_OF_RANGE (the reset policy), and a
//! broker without OffsetForLeaderEpoch skips validation.

use baton_protocol::messages::{
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, OffsetForLeaderPartition,
    OffsetForLeaderTopic,
};
use baton_protocol::ErrorCode;

use super::{backoff, emit, out_of_range, Gone, Part, Tx};
use crate::client::{Client, ClientError};
use crate::connection::ConnectionError;
use crate::consumer::{ConsumerConfig, ConsumerError, OffsetReset};

/// What a validation request hands back.
pub(super) struct Done {
    pub(super) generation: u64,
    pub(super) parts: Vec<usize>,
    /// The epoch of each partition when the request was built.
    pub(super) epochs: Vec<u64>,
    pub(super) result: Result<OffsetForLeaderEpochResponse, ClientError>,
}

/// The OffsetForLeaderEpoch request for `(topic, partition, current leader epoch,
/// epoch of the last batch read)`s, as a consumer sends it (replica id -1).
pub(super) fn request<'a>(
    parts: impl Iterator<Item = (&'a str, i32, i32, i32)>,
) -> OffsetForLeaderEpochRequest {
    let mut topics: Vec<OffsetForLeaderTopic> = Vec::new();
    for (topic, partition, current, last) in parts {
        let p = OffsetForLeaderPartition {
            partition,
            current_leader_epoch: current,
            leader_epoch: last,
        };
        match topics.iter_mut().find(|t| t.topic == topic) {
            Some(t) => t.partitions.push(p),
            None => topics.push(OffsetForLeaderTopic {
                topic: topic.to_string(),
                partitions: vec![p],
            }),
        }
    }
    OffsetForLeaderEpochRequest {
        replica_id: -1,
        topics,
    }
}

/// Whether `e` says the broker does not speak OffsetForLeaderEpoch (in a version
/// we know).
fn unsupported(e: &ClientError) -> bool {
    matches!(
        e,
        ClientError::Connection(
            ConnectionError::UnsupportedApi { .. } | ConnectionError::NoCommonVersion { .. }
        )
    )
}

/// Handles the answer to a validation request.
pub(super) async fn handle(
    client: &Client,
    cfg: &ConsumerConfig,
    parts: &mut [Part],
    done: Done,
    tx: &Tx,
) -> Result<(), Gone> {
    let resp = match done.result {
        Ok(resp) => resp,
        Err(e) => {
            let skip = unsupported(&e);
            tracing::debug!(error = %e, skip, "validating positions failed");
            if !skip {
                client.invalidate_metadata(done.generation);
            }
            for (k, &i) in done.parts.iter().enumerate() {
                let p = &mut parts[i];
                if p.epoch != done.epochs[k] {
                    continue;
                }
                if skip {
                    p.validate = false;
                } else {
                    backoff(p, cfg);
                }
            }
            return Ok(());
        }
    };
    let mut answered = vec![false; done.parts.len()];
    for t in resp.topics {
        for r in t.partitions {
            let Some(k) = done.parts.iter().enumerate().position(|(k, &i)| {
                !answered[k] && parts[i].partition == r.partition && *parts[i].topic == t.topic
            }) else {
                continue;
            };
            answered[k] = true;
            let part = &mut parts[done.parts[k]];
            if part.epoch != done.epochs[k] || part.removed || part.stopped || !part.validate {
                continue;
            }
            let code = ErrorCode::from_code(r.error_code);
            match code {
                ErrorCode::None => {
                    part.failures = 0;
                    diverged(client, cfg, part, r.leader_epoch, r.end_offset, tx).await?;
                }
                code if code.is_retriable() => {
                    tracing::debug!(topic = %part.topic, partition = part.partition, %code, "validating the position: retry");
                    client.invalidate_metadata(done.generation);
                    backoff(part, cfg);
                }
                code => {
                    part.stopped = true;
                    let error = match code {
                        ErrorCode::TopicAuthorizationFailed => {
                            ConsumerError::TopicAuthorizationFailed {
                                topic: part.topic.to_string(),
                                partition: part.partition,
                            }
                        }
                        code => ConsumerError::Broker {
                            topic: part.topic.to_string(),
                            partition: part.partition,
                            code,
                        },
                    };
                    emit(tx, part.epoch, error).await?;
                }
            }
        }
    }
    for (k, &i) in done.parts.iter().enumerate() {
        let p = &mut parts[i];
        if !answered[k] && p.epoch == done.epochs[k] && p.validate {
            backoff(p, cfg);
        }
    }
    Ok(())
}

/// The leader says epoch `epoch` (the largest at or below the one asked about)
/// ends at `end_offset`: if that is below the position, the log was truncated
/// under the consumer; move back to it and say so.
pub(super) async fn diverged(
    client: &Client,
    cfg: &ConsumerConfig,
    part: &mut Part,
    epoch: i32,
    end_offset: i64,
    tx: &Tx,
) -> Result<(), Gone> {
    part.validate = false;
    if epoch < 0 || end_offset < 0 {
        tracing::info!(topic = %part.topic, partition = part.partition, position = part.offset, "no end offset for the last epoch read; applying the reset policy");
        return out_of_range(client, cfg, part, tx).await;
    }
    if end_offset >= part.offset {
        return Ok(());
    }
    let position = part.offset;
    tracing::warn!(topic = %part.topic, partition = part.partition, position, divergence = end_offset, epoch, "log truncation detected; continuing from the divergence point");
    part.offset = end_offset;
    part.last_epoch = epoch;
    if cfg.offset_reset == OffsetReset::Fail {
        part.stopped = true;
    }
    emit(
        tx,
        part.epoch,
        ConsumerError::LogTruncation {
            topic: part.topic.to_string(),
            partition: part.partition,
            position,
            divergence: end_offset,
        },
    )
    .await
}
