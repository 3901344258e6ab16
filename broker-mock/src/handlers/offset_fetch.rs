//! OffsetFetch (key 9), versions 0–9 (advertised 1–9, Kafka 4.0's range).
//!
//! Answers each requested partition with its committed offset, leader epoch (v5+)
//! and metadata, or offset -1, epoch -1 and empty metadata when nothing is
//! committed. Null topics (v2+) ask for every committed partition of the group. v8+
//! reads several groups; coordinator errors are per group (v8+), top-level (v2–7) or
//! per partition (v0–1).
//!
//! Deviations from Apache Kafka: `require_stable` (v7+) has nothing to wait for, as
//! there are no transactional offset commits; the KIP-848 member id and epoch (v9+)
//! are ignored (all groups are classic).

use baton_protocol::messages::{
    OffsetFetchRequest, OffsetFetchResponse, OffsetFetchResponseGroup,
    OffsetFetchResponsePartition, OffsetFetchResponsePartitions, OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
};
use baton_protocol::ErrorCode;

use crate::group::{CommittedOffset, TopicOffsets};
use crate::state::BrokerState;

fn lookup(
    state: &BrokerState,
    group_id: &str,
    wanted: Option<Vec<(String, Vec<i32>)>>,
) -> Result<TopicOffsets, ErrorCode> {
    state
        .groups
        .fetch_offsets(state, group_id, wanted.as_deref())
}

fn parts(o: Option<CommittedOffset>) -> (i64, i32, String) {
    match o {
        Some(o) => (o.offset, o.leader_epoch, o.metadata),
        None => (-1, -1, String::new()),
    }
}

pub(crate) fn handle(
    state: &BrokerState,
    req: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    if version >= 8 {
        let groups = req
            .groups
            .into_iter()
            .map(|g| {
                let wanted = g.topics.map(|ts| {
                    ts.into_iter()
                        .map(|t| (t.name, t.partition_indexes))
                        .collect()
                });
                match lookup(state, &g.group_id, wanted) {
                    Err(code) => OffsetFetchResponseGroup {
                        group_id: g.group_id,
                        topics: Vec::new(),
                        error_code: code.code(),
                    },
                    Ok(found) => OffsetFetchResponseGroup {
                        group_id: g.group_id,
                        topics: found
                            .into_iter()
                            .map(|(name, ps)| OffsetFetchResponseTopics {
                                name,
                                partitions: ps
                                    .into_iter()
                                    .map(|(index, o)| {
                                        let (offset, epoch, metadata) = parts(o);
                                        OffsetFetchResponsePartitions {
                                            partition_index: index,
                                            committed_offset: offset,
                                            committed_leader_epoch: epoch,
                                            metadata: Some(metadata),
                                            error_code: 0,
                                        }
                                    })
                                    .collect(),
                            })
                            .collect(),
                        error_code: 0,
                    },
                }
            })
            .collect();
        return OffsetFetchResponse {
            groups,
            ..Default::default()
        };
    }
    let wanted: Option<Vec<(String, Vec<i32>)>> = req.topics.as_ref().map(|ts| {
        ts.iter()
            .map(|t| (t.name.clone(), t.partition_indexes.clone()))
            .collect()
    });
    match lookup(state, &req.group_id, wanted.clone()) {
        Ok(found) => OffsetFetchResponse {
            topics: found
                .into_iter()
                .map(|(name, ps)| OffsetFetchResponseTopic {
                    name,
                    partitions: ps
                        .into_iter()
                        .map(|(index, o)| {
                            let (offset, epoch, metadata) = parts(o);
                            OffsetFetchResponsePartition {
                                partition_index: index,
                                committed_offset: offset,
                                committed_leader_epoch: epoch,
                                metadata: Some(metadata),
                                error_code: 0,
                            }
                        })
                        .collect(),
                })
                .collect(),
            ..Default::default()
        },
        Err(code) if version >= 2 => OffsetFetchResponse {
            error_code: code.code(),
            ..Default::default()
        },
        Err(code) => OffsetFetchResponse {
            topics: wanted
                .unwrap_or_default()
                .into_iter()
                .map(|(name, ps)| OffsetFetchResponseTopic {
                    name,
                    partitions: ps
                        .into_iter()
                        .map(|index| OffsetFetchResponsePartition {
                            partition_index: index,
                            committed_offset: -1,
                            committed_leader_epoch: -1,
                            metadata: Some(String::new()),
                            error_code: code.code(),
                        })
                        .collect(),
                })
                .collect(),
            ..Default::default()
        },
    }
}
