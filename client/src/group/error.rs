//! The group consumer's errors.

use baton_protocol::{DecodeError, EncodeError, ErrorCode};

use crate::client::ClientError;
use crate::consumer::ConsumerError;

use super::assignor::TopicPartition;
#[cfg(doc)]
use super::GroupConsumer;

/// Errors of the group consumer.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum GroupError {
    /// Fetching one partition failed (see [`ConsumerError`]); the other partitions
    /// keep flowing.
    #[error(transparent)]
    Consumer(#[from] ConsumerError),
    /// A request failed at the cluster layer.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The coordinator answered an error that this member cannot ride out.
    #[error("{request} failed: {code}")]
    Coordinator {
        /// The error code.
        code: ErrorCode,
        /// The request that failed.
        request: &'static str,
    },
    /// Another member joined with this consumer's `group_instance_id`; this one is
    /// fenced off for good.
    #[error("fenced: another member uses group instance id {group_instance_id:?}")]
    FencedInstanceId {
        /// The contested instance id.
        group_instance_id: String,
    },
    /// The commit was refused because the group is rebalancing; the partitions are
    /// still owned, and a commit after the rebalance (the next `recv`) can succeed.
    #[error("the group is rebalancing; commit again after the rebalance")]
    RebalanceInProgress,
    /// The commit was refused because this member's generation is over
    /// (ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID): its partitions may belong to
    /// another member now.
    #[error("commit refused ({code}): the partitions may have moved to another member")]
    CommitFailed {
        /// The error code.
        code: ErrorCode,
    },
    /// The partition has no committed offset and the reset policy is
    /// [`OffsetReset::Fail`](crate::consumer::OffsetReset::Fail); it is not fetched until [`GroupConsumer::seek`]
    /// positions it.
    #[error("no committed offset for {partition} and the reset policy is Fail")]
    NoCommittedOffset {
        /// The partition.
        partition: TopicPartition,
    },
    /// The partition is not assigned to this member.
    #[error("{partition} is not assigned to this member")]
    NotAssigned {
        /// The partition.
        partition: TopicPartition,
    },
    /// The builder's settings are inconsistent.
    #[error("invalid group consumer configuration: {0}")]
    InvalidConfig(&'static str),
    /// A subscription or assignment could not be encoded.
    #[error("could not encode group metadata: {0}")]
    Encode(#[from] EncodeError),
    /// The group leader sent an assignment this member cannot read.
    #[error("undecodable assignment from the group leader: {0}")]
    Decode(#[from] DecodeError),
    /// The consumer has stopped.
    #[error("the group consumer is closed")]
    Closed,
}

impl GroupError {
    /// Whether retrying the same operation later may succeed.
    pub fn is_retriable(&self) -> bool {
        match self {
            GroupError::Client(e) => e.is_retriable(),
            GroupError::Coordinator { code, .. } => code.is_retriable(),
            GroupError::RebalanceInProgress => true,
            _ => false,
        }
    }
}
