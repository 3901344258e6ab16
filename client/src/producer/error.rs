//! The producer's errors: why an attempt failed, why a record failed, and a
//! flush that ran out of time.

use std::time::Duration;

use baton_protocol::ErrorCode;

use crate::client::ClientError;
use crate::connection::ConnectionError;

use super::record::ProducerRecord;
use super::transaction::TransactionError;
#[cfg(doc)]
use super::Producer;
#[cfg(doc)]
use tokio_util::sync::CancellationToken;

/// Why one attempt to deliver a batch failed (kept to explain a later timeout).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum AttemptError {
    /// The request could not be delivered or answered (connection, metadata).
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The broker answered with an error code for this partition.
    #[error("broker error {code}{}", .message.as_ref().map(|m| format!(": {m}")).unwrap_or_default())]
    Broker {
        /// The error code.
        code: ErrorCode,
        /// The broker's message, if any.
        message: Option<String>,
    },
}

impl AttemptError {
    pub(super) fn is_retriable(&self) -> bool {
        match self {
            AttemptError::Client(e) => e.is_retriable(),
            AttemptError::Broker { code, .. } => code.is_retriable(),
        }
    }

    /// The error's name for the retry metric, as Kafka names errors: the error
    /// code's name (`NOT_LEADER_OR_FOLLOWER`), or for a failure on this side the
    /// code the Java client reports for it (`NETWORK_EXCEPTION` for a broken
    /// connection).
    pub(crate) fn metric_name(&self) -> String {
        match self {
            AttemptError::Broker { code, .. } => code_name(*code),
            AttemptError::Client(e) => match e {
                ClientError::Broker { code, .. } => code_name(*code),
                ClientError::Connection(ConnectionError::Timeout { .. }) => {
                    "REQUEST_TIMED_OUT".into()
                }
                ClientError::Connection(_) | ClientError::NoBrokerAvailable { .. } => {
                    "NETWORK_EXCEPTION".into()
                }
                ClientError::LeaderNotAvailable { .. } | ClientError::UnknownBroker { .. } => {
                    "LEADER_NOT_AVAILABLE".into()
                }
                ClientError::UnknownTopic { .. } | ClientError::UnknownPartition { .. } => {
                    "UNKNOWN_TOPIC_OR_PARTITION".into()
                }
                _ => "CLIENT_ERROR".into(),
            },
        }
    }
}

fn describe_last(e: &Option<Box<AttemptError>>) -> String {
    e.as_ref()
        .map_or_else(|| "none".to_string(), |e| e.to_string())
}

/// Errors of the producer, wrapping the cluster layer's [`ClientError`].
///
/// Every variant that concerns one record carries that record, handed back
/// untouched: see [`ProduceError::into_record`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProduceError {
    /// The producer was closed; the record was never accepted (never on the wire).
    #[error("the producer is closed")]
    Closed {
        /// The record, if this error concerns one.
        record: Option<Box<ProducerRecord>>,
    },
    /// The record is larger than `max_request_size` or `buffer_memory`; it was
    /// never accepted.
    #[error("record of about {size} bytes exceeds the limit of {max} bytes")]
    RecordTooLarge {
        /// Estimated encoded size.
        size: usize,
        /// The limit it exceeds.
        max: usize,
        /// The record.
        record: Box<ProducerRecord>,
    },
    /// The record's explicit partition, or the partitioner's choice, is not a
    /// partition of the topic; the record was never accepted.
    #[error(
        "partition {partition} does not exist in topic {topic} ({partition_count} partitions)"
    )]
    InvalidPartition {
        /// The topic.
        topic: String,
        /// The partition asked for.
        partition: i32,
        /// The topic's partition count.
        partition_count: i32,
        /// The record.
        record: Box<ProducerRecord>,
    },
    /// The cluster layer failed for good (unknown topic, a non-retriable connection
    /// error). `partition` is `None` if it failed before a partition was chosen, in
    /// which case the record was never on the wire.
    #[error("producing to {topic} failed: {source}")]
    Client {
        /// The topic.
        topic: String,
        /// The partition, if one was chosen.
        partition: Option<i32>,
        /// The cause.
        #[source]
        source: ClientError,
        /// The record.
        record: Box<ProducerRecord>,
    },
    /// The client's principal may not write to the topic: the broker refused to
    /// describe it (`partition` is `None`; the record was never sent) or refused
    /// the batch with TOPIC_AUTHORIZATION_FAILED. Not retried: an ACL must change.
    #[error("not authorized to write to topic {topic}")]
    TopicAuthorizationFailed {
        /// The topic.
        topic: String,
        /// The partition, if the batch reached the broker.
        partition: Option<i32>,
        /// The record.
        record: Box<ProducerRecord>,
    },
    /// The broker refused InitProducerId to this client's principal
    /// (CLUSTER_AUTHORIZATION_FAILED: an idempotent producer needs IdempotentWrite
    /// on the cluster or Write on some topic). The record was never sent; build
    /// the producer with `.idempotence(false)` to produce without a producer id.
    #[error("not authorized to get a producer id ({code}); grant IdempotentWrite on the cluster or Write on a topic, or build the producer with `.idempotence(false)`")]
    IdempotenceUnauthorized {
        /// The error code of InitProducerId.
        code: ErrorCode,
        /// The record.
        record: Box<ProducerRecord>,
    },
    /// The broker rejected the record's batch with a non-retriable error.
    #[error("broker rejected the batch for {topic}/{partition}: {code}{}", .message.as_ref().map(|m| format!(" ({m})")).unwrap_or_default())]
    Rejected {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The error code.
        code: ErrorCode,
        /// The broker's message, if any.
        message: Option<String>,
        /// The record.
        record: Box<ProducerRecord>,
    },
    /// The delivery timeout elapsed before the record was acknowledged. With
    /// `attempts == 0` the record was never on the wire; otherwise it may or may not
    /// have been written.
    #[error(
        "delivery to {topic}/{partition} timed out after {timeout:?} ({attempts} attempts); last error: {}",
        describe_last(.last_error)
    )]
    DeliveryTimeout {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The configured delivery timeout.
        timeout: Duration,
        /// How many times the record's batch was sent.
        attempts: u32,
        /// The error of the last attempt, if there was one.
        last_error: Option<Box<AttemptError>>,
        /// The record.
        record: Box<ProducerRecord>,
    },
    /// The [`CancellationToken`] given to [`Producer::send_with_cancel`] fired
    /// before the record was accepted; it was never sent.
    #[error("cancelled before the record was accepted")]
    Cancelled {
        /// The record.
        record: Box<ProducerRecord>,
    },
    /// The producer is idempotent (the default) but the cluster does not offer
    /// InitProducerId; the record was never sent. Build the producer with
    /// `.idempotence(false)` to produce to this cluster without idempotence.
    #[error(
        "the cluster does not support idempotent producers ({source}); \
         build the producer with `.idempotence(false)` to produce without idempotence"
    )]
    IdempotenceUnsupported {
        /// What the broker said (or did not offer).
        #[source]
        source: ConnectionError,
        /// The record.
        record: Box<ProducerRecord>,
    },
    /// The partition's idempotent sequence broke while this record was sent but not
    /// acknowledged: the broker answered OUT_OF_ORDER_SEQUENCE_NUMBER,
    /// UNKNOWN_PRODUCER_ID or INVALID_PRODUCER_EPOCH, or an earlier batch of the
    /// partition timed out after it was sent. The record **may or may not** be in
    /// the log (it was not acknowledged). The producer got a new epoch and restarts
    /// the partition's sequence; records sent later are not affected.
    ///
    /// A batch whose only attempt the leader refused for its sequence
    /// (OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID) was never written, so an
    /// idempotent, non-transactional producer sends it again under the new epoch
    /// instead of failing its records; so do the queued batches behind it that
    /// were refused the same way.
    #[error("idempotent sequence of {topic}/{partition} was reset: {cause}")]
    IdempotenceReset {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The error that broke the sequence.
        cause: Box<AttemptError>,
        /// The record.
        record: Box<ProducerRecord>,
    },
    /// The producer is transactional and did not send the record: no transaction
    /// is open (before [`Producer::begin_transaction`], or once commit or abort
    /// started), or the open one failed and must be aborted (records waiting in
    /// the accumulator then fail at once, as in Kafka's client). The record was
    /// never sent.
    #[error("the record was not accepted: {error}")]
    Transaction {
        /// Why no transaction takes records.
        error: TransactionError,
        /// The record.
        record: Box<ProducerRecord>,
    },
    /// The record's transaction was aborted ([`Producer::abort_transaction`])
    /// before the record was sent; it was never on the wire.
    #[error("the transaction was aborted before the record was sent")]
    TransactionAborted {
        /// The record.
        record: Box<ProducerRecord>,
    },
}

impl ProduceError {
    /// The record this error concerns, if any.
    pub fn record(&self) -> Option<&ProducerRecord> {
        match self {
            ProduceError::Closed { record } => record.as_deref(),
            ProduceError::RecordTooLarge { record, .. }
            | ProduceError::InvalidPartition { record, .. }
            | ProduceError::Client { record, .. }
            | ProduceError::Rejected { record, .. }
            | ProduceError::DeliveryTimeout { record, .. }
            | ProduceError::Cancelled { record }
            | ProduceError::IdempotenceUnsupported { record, .. }
            | ProduceError::TopicAuthorizationFailed { record, .. }
            | ProduceError::IdempotenceUnauthorized { record, .. }
            | ProduceError::IdempotenceReset { record, .. }
            | ProduceError::Transaction { record, .. }
            | ProduceError::TransactionAborted { record } => Some(record),
        }
    }

    /// Takes back the record this error concerns, if any.
    pub fn into_record(self) -> Option<ProducerRecord> {
        match self {
            ProduceError::Closed { record } => record.map(|r| *r),
            ProduceError::RecordTooLarge { record, .. }
            | ProduceError::InvalidPartition { record, .. }
            | ProduceError::Client { record, .. }
            | ProduceError::Rejected { record, .. }
            | ProduceError::DeliveryTimeout { record, .. }
            | ProduceError::Cancelled { record }
            | ProduceError::IdempotenceUnsupported { record, .. }
            | ProduceError::TopicAuthorizationFailed { record, .. }
            | ProduceError::IdempotenceUnauthorized { record, .. }
            | ProduceError::IdempotenceReset { record, .. }
            | ProduceError::Transaction { record, .. }
            | ProduceError::TransactionAborted { record } => Some(*record),
        }
    }
}

/// [`Producer::flush_timeout`] or [`Producer::close_timeout`] ran out of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{pending} records still had no final outcome after {timeout:?}")]
#[non_exhaustive]
pub struct FlushTimeout {
    /// The deadline that passed.
    pub timeout: Duration,
    /// Records of the producer (any clone) without a final outcome when the
    /// deadline passed; the producer still holds and delivers them.
    pub pending: usize,
}

/// `NotLeaderOrFollower` as `NOT_LEADER_OR_FOLLOWER`; an unknown code as
/// `UNKNOWN_<n>`.
fn code_name(code: ErrorCode) -> String {
    if let ErrorCode::Unknown(n) = code {
        return format!("UNKNOWN_{n}");
    }
    let debug = format!("{code:?}");
    let mut out = String::with_capacity(debug.len() + 8);
    for (i, c) in debug.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

#[cfg(test)]
mod metric_name_tests {
    use super::*;

    #[test]
    fn metric_names_follow_kafka() {
        let broker = |code| AttemptError::Broker {
            code,
            message: None,
        };
        assert_eq!(
            broker(ErrorCode::NotLeaderOrFollower).metric_name(),
            "NOT_LEADER_OR_FOLLOWER"
        );
        assert_eq!(broker(ErrorCode::Unknown(999)).metric_name(), "UNKNOWN_999");
        let gone = AttemptError::Client(ClientError::LeaderNotAvailable {
            topic: "t".into(),
            partition: 0,
        });
        assert_eq!(gone.metric_name(), "LEADER_NOT_AVAILABLE");
    }
}
