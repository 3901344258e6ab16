//! OffsetFetch (key 9), versions 0–9 (advertised 1–9, Kafka 4.0's range).
//!
//! Answers each requested partition with its committed offset, leader epoch (v5+)
//! and metadata, or offset -1, epoch -1 and empty metadata when nothing is
//! committed. Null topics (v2+) ask for every committed partition of the group. v8+
//! reads several groups; coordinator errors are per group (v8+), top-level (v2–7) or
//! per partition (v0–1).
//!
//! With an authorizer, as in Kafka: the group needs Describe (else
//! `GROUP_AUTHORIZATION_FAILED`); topics the principal may not Describe are left
//! out of an all-topics answer, and named ones answer `TOPIC_AUTHORIZATION_FAILED`
//! on their partitions.
//!
//! `require_stable` (v7+, KIP-447): a partition with a transactional offset still
//! waiting for its transaction's marker answers UNSTABLE_OFFSET_COMMIT (offset -1),
//! so the consumer retries; without it the last committed offset is answered and
//! pending ones are invisible, as in Kafka.
//!
//! The KIP-848 member id and epoch (v9+) are checked for consumer-protocol groups
//! as Kafka checks them: epoch -1 (an admin) passes, otherwise the member must
//! exist (UNKNOWN_MEMBER_ID) at that epoch (STALE_MEMBER_EPOCH).
//!
//! Deviations from Apache Kafka: none known.

use baton_protocol::messages::{
    OffsetFetchRequest, OffsetFetchResponse, OffsetFetchResponseGroup,
    OffsetFetchResponsePartition, OffsetFetchResponsePartitions, OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
};
use baton_protocol::ErrorCode;

use baton_protocol::acl::{AclOperation, ResourceType};

use crate::acl::RequestContext;
use crate::group::{CommittedOffset, TopicOffsets};
use crate::state::BrokerState;

/// Named topics the principal may not Describe, with their partitions.
type Refused = Vec<(String, Vec<i32>)>;

/// The offsets of `group_id` that `ctx` may see, and the named topics it may not.
fn lookup(
    state: &BrokerState,
    ctx: &RequestContext,
    group_id: &str,
    wanted: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
    member: Option<(Option<String>, i32)>,
) -> Result<(TopicOffsets, Refused), ErrorCode> {
    if !state.allowed(ctx, AclOperation::Describe, ResourceType::Group, group_id) {
        return Err(ErrorCode::GroupAuthorizationFailed);
    }
    if let Some((member_id, epoch)) = member {
        state
            .groups
            .validate_fetch_member(state, group_id, member_id.as_deref(), epoch)?;
    }
    let describable =
        |name: &str| state.allowed(ctx, AclOperation::Describe, ResourceType::Topic, name);
    let (wanted, refused) = match wanted {
        None => (None, Vec::new()),
        Some(ts) => {
            let (ok, refused): (Vec<_>, Vec<_>) = ts.into_iter().partition(|(n, _)| describable(n));
            (Some(ok), refused)
        }
    };
    let mut found =
        state
            .groups
            .fetch_offsets(state, group_id, wanted.as_deref(), require_stable)?;
    found.retain(|(name, _)| describable(name));
    Ok((found, refused))
}

fn parts(o: Option<CommittedOffset>) -> (i64, i32, String) {
    match o {
        Some(o) => (o.offset, o.leader_epoch, o.metadata),
        None => (-1, -1, String::new()),
    }
}

/// One partition's answer: index, committed offset (if any), error code.
type Answer = (i32, Option<CommittedOffset>, i16);

/// The found topics with no error, then the refused ones.
fn answers(found: TopicOffsets, refused: Refused) -> Vec<(String, Vec<Answer>)> {
    let denied = ErrorCode::TopicAuthorizationFailed.code();
    found
        .into_iter()
        .map(|(name, ps)| {
            let ps = ps
                .into_iter()
                .map(|(i, o)| match o {
                    Ok(o) => (i, o, 0),
                    Err(code) => (i, None, code.code()),
                })
                .collect();
            (name, ps)
        })
        .chain(
            refused
                .into_iter()
                .map(|(name, ps)| (name, ps.into_iter().map(|i| (i, None, denied)).collect())),
        )
        .collect()
}

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
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
                let member = (version >= 9).then(|| (g.member_id.clone(), g.member_epoch));
                match lookup(state, ctx, &g.group_id, wanted, req.require_stable, member) {
                    Err(code) => OffsetFetchResponseGroup {
                        group_id: g.group_id,
                        topics: Vec::new(),
                        error_code: code.code(),
                    },
                    Ok((found, refused)) => OffsetFetchResponseGroup {
                        group_id: g.group_id,
                        topics: answers(found, refused)
                            .into_iter()
                            .map(|(name, ps)| OffsetFetchResponseTopics {
                                name,
                                partitions: ps
                                    .into_iter()
                                    .map(|(index, o, error_code)| {
                                        let (offset, epoch, metadata) = parts(o);
                                        OffsetFetchResponsePartitions {
                                            partition_index: index,
                                            committed_offset: offset,
                                            committed_leader_epoch: epoch,
                                            metadata: Some(metadata),
                                            error_code,
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
    match lookup(
        state,
        ctx,
        &req.group_id,
        wanted.clone(),
        req.require_stable,
        None,
    ) {
        Ok((found, refused)) => OffsetFetchResponse {
            topics: answers(found, refused)
                .into_iter()
                .map(|(name, ps)| OffsetFetchResponseTopic {
                    name,
                    partitions: ps
                        .into_iter()
                        .map(|(index, o, error_code)| {
                            let (offset, epoch, metadata) = parts(o);
                            OffsetFetchResponsePartition {
                                partition_index: index,
                                committed_offset: offset,
                                committed_leader_epoch: epoch,
                                metadata: Some(metadata),
                                error_code,
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
