//! OffsetForLeaderEpoch (key 23), versions 2–4.
//!
//! Answers, from the leader's epoch cache, the end offset of the largest epoch not
//! above the requested one (KIP-101, KIP-279): a follower or consumer truncates its
//! log to it after a leader change. `current_leader_epoch` is checked when >= 0
//! (`FENCED_LEADER_EPOCH` / `UNKNOWN_LEADER_EPOCH`); only the leader answers
//! (`NOT_LEADER_OR_FOLLOWER` elsewhere). With an authorizer, a consumer needs
//! Describe on each topic (else `TOPIC_AUTHORIZATION_FAILED`) and a follower
//! (`replica_id` >= 0, v3+) ClusterAction on the cluster (else
//! `CLUSTER_AUTHORIZATION_FAILED`), as in Kafka.
//!
//! Deviations from Apache Kafka: none known.

use baton_protocol::messages::{
    EpochEndOffset, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
};
use baton_protocol::ErrorCode;

use baton_protocol::acl::{AclOperation, ResourceType};

use crate::acl::RequestContext;
use crate::state::BrokerState;

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: OffsetForLeaderEpochRequest,
    _version: i16,
) -> OffsetForLeaderEpochResponse {
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let topic = state.topic(&t.topic);
            let refusal = if req.replica_id >= 0 {
                (!state.allowed_on_cluster(ctx, AclOperation::ClusterAction))
                    .then_some(ErrorCode::ClusterAuthorizationFailed)
            } else {
                (!state.allowed(ctx, AclOperation::Describe, ResourceType::Topic, &t.topic))
                    .then_some(ErrorCode::TopicAuthorizationFailed)
            };
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let mut out = EpochEndOffset {
                        error_code: 0,
                        partition: p.partition,
                        leader_epoch: -1,
                        end_offset: -1,
                    };
                    if let Some(code) = refusal {
                        out.error_code = code.code();
                        return out;
                    }
                    let Some(part) = topic.as_ref().and_then(|t| t.partition(p.partition)) else {
                        out.error_code = ErrorCode::UnknownTopicOrPartition.code();
                        return out;
                    };
                    let st = part.lock();
                    if st.is_deleted() {
                        out.error_code = ErrorCode::UnknownTopicOrPartition.code();
                        return out;
                    }
                    if !st.is_leader() {
                        out.error_code = ErrorCode::NotLeaderOrFollower.code();
                        return out;
                    }
                    if let Err(code) = st.check_epoch(p.current_leader_epoch) {
                        out.error_code = code.code();
                        return out;
                    }
                    let answer = st
                        .epoch_cache()
                        .end_offset_for(p.leader_epoch, st.log_end_offset());
                    out.leader_epoch = answer.epoch;
                    out.end_offset = answer.end_offset;
                    out
                })
                .collect();
            OffsetForLeaderTopicResult {
                topic: t.topic,
                partitions,
            }
        })
        .collect();
    OffsetForLeaderEpochResponse {
        throttle_time_ms: 0,
        topics,
    }
}
