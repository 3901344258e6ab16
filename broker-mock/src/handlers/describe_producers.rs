//! DescribeProducers (key 61), version 0 (flexible).
//!
//! For each partition this node leads, the producers its producer state tracks
//! (KIP-664): id, current epoch, last sequence (-1 if the producer's last trace is
//! a transaction marker), the timestamp of its last batch or marker, the coordinator
//! epoch of its last marker (-1 if none) and the first offset of its open
//! transaction (-1 if none).
//!
//! Per-partition errors, as in Kafka: `UNKNOWN_TOPIC_OR_PARTITION` for a partition
//! this node does not know, `NOT_LEADER_OR_FOLLOWER` when it does not lead it. With
//! an authorizer each topic needs Read, else `TOPIC_AUTHORIZATION_FAILED` on each
//! of its partitions.
//!
//! Deviations from Apache Kafka: the producers are listed by producer id (Kafka's
//! order is its map's); producers are the ones this partition still remembers
//! (`BrokerLimits::max_producers_per_partition`, not expired by time).

use baton_protocol::acl::{AclOperation, ResourceType};
use baton_protocol::messages::{
    DescribeProducersActiveProducer, DescribeProducersPartitionResponse, DescribeProducersRequest,
    DescribeProducersResponse, DescribeProducersTopicResponse,
};
use baton_protocol::ErrorCode;

use crate::acl::RequestContext;
use crate::state::BrokerState;

fn failed(partition_index: i32, code: ErrorCode) -> DescribeProducersPartitionResponse {
    DescribeProducersPartitionResponse {
        partition_index,
        error_code: code.code(),
        error_message: None,
        active_producers: Vec::new(),
    }
}

/// The producers of one partition, or the error that stops describing it.
fn describe(state: &BrokerState, topic: &str, index: i32) -> DescribeProducersPartitionResponse {
    let Some(topic) = state.topic(topic) else {
        return failed(index, ErrorCode::UnknownTopicOrPartition);
    };
    let Some(partition) = topic.partition(index) else {
        return failed(index, ErrorCode::UnknownTopicOrPartition);
    };
    let st = partition.lock();
    if st.is_deleted() {
        return failed(index, ErrorCode::UnknownTopicOrPartition);
    }
    if !st.is_leader() {
        return failed(index, ErrorCode::NotLeaderOrFollower);
    }
    let mut active_producers: Vec<DescribeProducersActiveProducer> = st
        .producers()
        .iter()
        .map(|(producer_id, e)| DescribeProducersActiveProducer {
            producer_id,
            producer_epoch: e.epoch() as i32,
            last_sequence: e.last_seq(),
            last_timestamp: e.last_timestamp(),
            coordinator_epoch: e.coordinator_epoch(),
            current_txn_start_offset: e.txn_first_offset().unwrap_or(-1),
        })
        .collect();
    active_producers.sort_unstable_by_key(|p| p.producer_id);
    DescribeProducersPartitionResponse {
        partition_index: index,
        error_code: 0,
        error_message: None,
        active_producers,
    }
}

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: DescribeProducersRequest,
    _version: i16,
) -> DescribeProducersResponse {
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let allowed = state.allowed(ctx, AclOperation::Read, ResourceType::Topic, &t.name);
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&p| {
                    if allowed {
                        describe(state, &t.name, p)
                    } else {
                        failed(p, ErrorCode::TopicAuthorizationFailed)
                    }
                })
                .collect();
            DescribeProducersTopicResponse {
                name: t.name,
                partitions,
            }
        })
        .collect();
    DescribeProducersResponse {
        throttle_time_ms: 0,
        topics,
    }
}
