//! [`Admin::list_consumer_group_offsets`]: OffsetFetch (API key 9) sent to each
//! group's coordinator; several groups in one request where the coordinator has
//! OffsetFetch v8+ (KIP-709), one request per group below.

use std::collections::BTreeMap;
use std::sync::Arc;

use baton_protocol::messages::{
    OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use baton_protocol::ErrorCode;

use super::describe_groups::collect;
use super::group_coordinators::GroupOutcome;
use super::{Admin, AdminError};
use crate::client::ClientError;
use crate::connection::Connection;
use crate::group::TopicPartition;

/// A committed offset: what [`Admin::list_consumer_group_offsets`] finds and
/// [`Admin::alter_consumer_group_offsets`] writes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OffsetAndMetadata {
    /// The next offset the group will consume.
    pub offset: i64,
    /// The leader epoch of the record before `offset` (KIP-320), if known.
    pub leader_epoch: Option<i32>,
    /// The metadata committed with it (empty if none).
    pub metadata: String,
}

impl OffsetAndMetadata {
    /// `offset`, without leader epoch or metadata.
    pub fn new(offset: i64) -> Self {
        OffsetAndMetadata {
            offset,
            leader_epoch: None,
            metadata: String::new(),
        }
    }

    /// With the leader epoch of the record before the offset.
    pub fn leader_epoch(mut self, epoch: i32) -> Self {
        self.leader_epoch = Some(epoch);
        self
    }

    /// With metadata.
    pub fn metadata(mut self, metadata: impl Into<String>) -> Self {
        self.metadata = metadata.into();
        self
    }
}

/// Which committed offsets of a group [`Admin::list_consumer_group_offsets`]
/// reads.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupOffsetsQuery {
    /// The group.
    pub group: String,
    /// The partitions, or `None` for every partition the group committed.
    pub partitions: Option<Vec<TopicPartition>>,
}

impl GroupOffsetsQuery {
    /// Every committed offset of `group`.
    pub fn all(group: impl Into<String>) -> Self {
        GroupOffsetsQuery {
            group: group.into(),
            partitions: None,
        }
    }

    /// The committed offsets of `group` for `partitions`.
    pub fn partitions(
        group: impl Into<String>,
        partitions: impl IntoIterator<Item = TopicPartition>,
    ) -> Self {
        GroupOffsetsQuery {
            group: group.into(),
            partitions: Some(partitions.into_iter().collect()),
        }
    }
}

/// One group's committed offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupOffsets {
    /// The group.
    pub group: String,
    /// The committed offset of each partition that has one; a partition asked for
    /// without a committed offset is absent.
    pub offsets: BTreeMap<TopicPartition, OffsetAndMetadata>,
}

impl Admin {
    /// Reads committed offsets of groups (OffsetFetch), asking each group's
    /// coordinator: all the groups of one coordinator in one request where it
    /// supports OffsetFetch v8+, one request per group otherwise. Results come in
    /// the order of `queries` (one per group).
    ///
    /// Coordinator moves, loading coordinators and connection failures are retried
    /// with backoff until the operation timeout. Groups that fail
    /// (GROUP_AUTHORIZATION_FAILED, ...) are reported together in
    /// [`AdminError::Groups`]; a partition that fails (TOPIC_AUTHORIZATION_FAILED,
    /// ...) in [`AdminError::GroupOffsets`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: this only reads.
    pub async fn list_consumer_group_offsets(
        &self,
        queries: impl IntoIterator<Item = GroupOffsetsQuery>,
    ) -> Result<Vec<GroupOffsets>, AdminError> {
        let queries: Vec<GroupOffsetsQuery> = queries.into_iter().collect();
        let groups = queries.iter().map(|q| q.group.clone()).collect();
        let queries = &queries;
        let results = self
            .per_coordinator(groups, |_, conn, groups| {
                Box::pin(async move { fetch_on(&conn, queries, groups).await })
            })
            .await?;
        let mut partition_failures = Vec::new();
        let found = collect(results)?;
        let mut out = Vec::with_capacity(found.len());
        for (group, offsets) in found {
            let mut map = BTreeMap::new();
            for (tp, r) in offsets {
                match r {
                    Ok(Some(o)) => {
                        map.insert(tp, o);
                    }
                    Ok(None) => {}
                    Err(code) => partition_failures.push(super::GroupOffsetFailure {
                        group: group.clone(),
                        partition: tp,
                        code,
                    }),
                }
            }
            out.push(GroupOffsets {
                group,
                offsets: map,
            });
        }
        if partition_failures.is_empty() {
            Ok(out)
        } else {
            Err(AdminError::GroupOffsets(partition_failures))
        }
    }

    /// Every committed offset of one group; see
    /// [`Admin::list_consumer_group_offsets`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: this only reads.
    pub async fn group_offsets(
        &self,
        group: impl Into<String>,
    ) -> Result<BTreeMap<TopicPartition, OffsetAndMetadata>, AdminError> {
        let mut found = self
            .list_consumer_group_offsets([GroupOffsetsQuery::all(group)])
            .await?;
        Ok(found.pop().map(|g| g.offsets).unwrap_or_default())
    }
}

/// One partition's committed offset (`None`: nothing committed) or error code.
type FetchedPartition = (TopicPartition, Result<Option<OffsetAndMetadata>, ErrorCode>);
/// A group with its fetched partitions.
type FetchedGroup = (String, Vec<FetchedPartition>);

/// Topics and partitions of a query, grouped by topic.
fn by_topic(partitions: &[TopicPartition]) -> BTreeMap<&str, Vec<i32>> {
    let mut out: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        out.entry(&tp.topic).or_default().push(tp.partition);
    }
    out
}

fn fetched(
    topic: &Arc<str>,
    partition: i32,
    offset: i64,
    epoch: i32,
    metadata: Option<String>,
    code: i16,
) -> FetchedPartition {
    let tp = TopicPartition::new(topic.clone(), partition);
    let code = ErrorCode::from_code(code);
    if !code.is_ok() {
        return (tp, Err(code));
    }
    let found = (offset >= 0).then(|| OffsetAndMetadata {
        offset,
        leader_epoch: (epoch >= 0).then_some(epoch),
        metadata: metadata.unwrap_or_default(),
    });
    (tp, Ok(found))
}

/// OffsetFetch for `groups` (as `queries` describe them) on one coordinator.
async fn fetch_on(
    conn: &Connection,
    queries: &[GroupOffsetsQuery],
    groups: Vec<String>,
) -> Result<Vec<(String, GroupOutcome<FetchedGroup>)>, ClientError> {
    let version = conn.version_for::<OffsetFetchRequest>()?;
    let query = |g: &str| {
        queries
            .iter()
            .find(|q| q.group == g)
            .and_then(|q| q.partitions.as_deref())
    };
    let mut out = Vec::with_capacity(groups.len());
    if version >= 8 {
        let req = OffsetFetchRequest {
            groups: groups
                .iter()
                .map(|g| OffsetFetchRequestGroup {
                    group_id: g.clone(),
                    member_id: None,
                    member_epoch: -1,
                    topics: query(g).map(|ps| {
                        by_topic(ps)
                            .into_iter()
                            .map(|(name, partition_indexes)| OffsetFetchRequestTopics {
                                name: name.to_owned(),
                                partition_indexes,
                            })
                            .collect()
                    }),
                })
                .collect(),
            ..Default::default()
        };
        let resp = conn.send(&req).await?;
        for g in resp.groups {
            let code = ErrorCode::from_code(g.error_code);
            if !code.is_ok() {
                out.push((
                    g.group_id.clone(),
                    GroupOutcome::from_error(&g.group_id, code, None),
                ));
                continue;
            }
            let mut parts = Vec::new();
            for t in g.topics {
                let topic: Arc<str> = Arc::from(t.name.as_str());
                for p in t.partitions {
                    parts.push(fetched(
                        &topic,
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch,
                        p.metadata,
                        p.error_code,
                    ));
                }
            }
            out.push((g.group_id.clone(), retry_or_done(g.group_id, parts)));
        }
    } else {
        for g in groups {
            let req = OffsetFetchRequest {
                group_id: g.clone(),
                topics: query(&g).map(|ps| {
                    by_topic(ps)
                        .into_iter()
                        .map(|(name, partition_indexes)| OffsetFetchRequestTopic {
                            name: name.to_owned(),
                            partition_indexes,
                        })
                        .collect()
                }),
                ..Default::default()
            };
            let resp = conn.send(&req).await?;
            let code = ErrorCode::from_code(resp.error_code);
            if !code.is_ok() {
                out.push((g.clone(), GroupOutcome::from_error(&g, code, None)));
                continue;
            }
            let mut parts = Vec::new();
            for t in resp.topics {
                let topic: Arc<str> = Arc::from(t.name.as_str());
                for p in t.partitions {
                    parts.push(fetched(
                        &topic,
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch,
                        p.metadata,
                        p.error_code,
                    ));
                }
            }
            out.push((g.clone(), retry_or_done(g, parts)));
        }
    }
    Ok(out)
}

/// A group whose partitions answered a coordinator error (OffsetFetch v0–1 puts
/// them there) is retried; otherwise its partitions are its answer.
fn retry_or_done(group: String, parts: Vec<FetchedPartition>) -> GroupOutcome<FetchedGroup> {
    let coordinator_error = parts.iter().find_map(|(_, r)| match r {
        Err(
            code @ (ErrorCode::NotCoordinator
            | ErrorCode::CoordinatorNotAvailable
            | ErrorCode::CoordinatorLoadInProgress),
        ) => Some(*code),
        _ => None,
    });
    match coordinator_error {
        Some(code) => GroupOutcome::Retry(code),
        None => GroupOutcome::Done((group, parts)),
    }
}
