//! ListOffsets (key 2), versions 1–8.
//!
//! Timestamps: -2 is the log start offset, -1 the high watermark (the last stable
//! offset under read_committed), -3 (v7+) the record with the largest timestamp
//! (KIP-734), -4 (v8, KIP-405) the earliest local offset, which is the log start
//! here. Any other value finds the first committed record whose timestamp is at or
//! after it: the first batch whose max timestamp qualifies, then the record inside it;
//! none found answers offset -1 and timestamp -1. Searches start at the log start
//! (records below it, in a batch that DeleteRecords cut through, never match), as
//! Kafka's do. `current_leader_epoch` (v4+) is checked when >= 0.
//!
//! In a cluster only the leader answers (`NOT_LEADER_OR_FOLLOWER` elsewhere).
//! With an authorizer, each topic needs Describe (else `TOPIC_AUTHORIZATION_FAILED`
//! per partition), as in Kafka.
//!
//! Deviations from Apache Kafka: the leader epoch returned is the partition's current
//! epoch rather than the epoch of the batch holding the offset (identical while there
//! is a single leader); for compressed or LogAppendTime batches a timestamp search
//! answers the batch's base offset and max timestamp; the stored batch is CRC-checked
//! before it is searched (`KAFKA_STORAGE_ERROR` if it fails).

use baton_protocol::messages::{
    ListOffsetsPartitionResponse, ListOffsetsRequest, ListOffsetsResponse, ListOffsetsTopicResponse,
};
use baton_protocol::ErrorCode;

use crate::partition::Isolation;
use baton_protocol::acl::{AclOperation, ResourceType};

use crate::acl::RequestContext;
use crate::state::BrokerState;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let isolation = Isolation::from_wire(req.isolation_level);
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let topic = state.topic(&t.name);
            let authorized = state.allowed(ctx, AclOperation::Describe, ResourceType::Topic, &t.name);
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let mut out = ListOffsetsPartitionResponse {
                        partition_index: p.partition_index,
                        error_code: 0,
                        timestamp: -1,
                        offset: -1,
                        leader_epoch: -1,
                    };
                    if !authorized {
                        out.error_code = ErrorCode::TopicAuthorizationFailed.code();
                        return out;
                    }
                    let Some(partition) = topic.as_ref().and_then(|t| t.partition(p.partition_index)) else {
                        out.error_code = ErrorCode::UnknownTopicOrPartition.code();
                        return out;
                    };
                    let st = partition.lock();
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
                    let epoch = st.leader_epoch();
                    let found = match p.timestamp {
                        EARLIEST | EARLIEST_LOCAL => Ok(Some((st.log_start_offset(), -1))),
                        LATEST => Ok(Some((st.max_readable(isolation), -1))),
                        MAX_TIMESTAMP if version >= 7 => st.max_timestamp_offset(isolation),
                        ts => st.offset_for_timestamp(ts, isolation),
                    };
                    match found {
                        Ok(Some((offset, ts))) => {
                            out.offset = offset;
                            out.timestamp = ts;
                            out.leader_epoch = epoch;
                        }
                        Ok(None) => {}
                        Err(e) => {
                            tracing::error!(topic = %t.name, partition = p.partition_index, error = %e, "offset lookup failed");
                            out.error_code = e.code().code();
                        }
                    }
                    out
                })
                .collect();
            ListOffsetsTopicResponse {
                name: t.name,
                partitions,
            }
        })
        .collect();
    ListOffsetsResponse {
        throttle_time_ms: 0,
        topics,
    }
}
