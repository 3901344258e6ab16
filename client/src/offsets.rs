//! Offset lookup by ListOffsets (API key 2), grouped by partition leader.
//!
//! Below both [`admin`](crate::admin) (which offers it to applications) and the
//! consumers (which resolve start offsets and lag with it).

use std::collections::BTreeMap;
use std::time::Duration;

use baton_protocol::messages::{ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic};
use baton_protocol::ErrorCode;
use tokio::time::Instant;

use crate::backoff::Backoff;
use crate::client::{Client, ClientError};
use crate::consumer::IsolationLevel;

/// The first wait between ListOffsets rounds.
const RETRY_BACKOFF_BASE: Duration = Duration::from_millis(10);
/// The longest wait between ListOffsets rounds.
const RETRY_BACKOFF_CAP: Duration = Duration::from_millis(500);

/// Which offset of a partition to look up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log start offset (the first offset still stored).
    Earliest,
    /// The log end offset (the offset the next record will get).
    Latest,
    /// The first offset whose record timestamp is at or after this time (ms since
    /// the epoch); the log end offset if there is none.
    Timestamp(i64),
}

impl OffsetSpec {
    fn wire(self) -> i64 {
        match self {
            OffsetSpec::Earliest => -2,
            OffsetSpec::Latest => -1,
            OffsetSpec::Timestamp(t) => t,
        }
    }
}

/// An offset found by [`Admin::list_offsets`](crate::Admin::list_offsets).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListedOffset {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The offset (-1 if the broker found none, see [`OffsetSpec::Timestamp`]).
    pub offset: i64,
    /// The timestamp of the record at `offset`, -1 if not applicable.
    pub timestamp: i64,
    /// The leader epoch of that record, -1 if unknown.
    pub leader_epoch: i32,
}

/// One round of a request sent per partition leader: the pending queries grouped
/// by the leader of their partition.
pub(crate) struct LeaderRound {
    /// Leader node id -> (the metadata generation its lookup came from, indices
    /// into the queries).
    pub(crate) by_leader: BTreeMap<i32, (u64, Vec<usize>)>,
    /// A pending query repeats a partition already in this round and waits for a
    /// later one (a partition may appear only once per request).
    pub(crate) deferred: bool,
    /// The last retriable error of a leader lookup (its query stays pending).
    pub(crate) last_error: Option<ClientError>,
}

/// Groups the pending queries by the leader of their partition: `pending` holds,
/// per query in order, its topic and partition, or `None` for one already
/// answered. A non-retriable error of a leader lookup is returned.
///
/// Shared by ListOffsets here and DeleteRecords in [`admin`](crate::admin).
pub(crate) async fn group_by_leader(
    client: &Client,
    pending: &[Option<(&str, i32)>],
) -> Result<LeaderRound, ClientError> {
    let mut round = LeaderRound {
        by_leader: BTreeMap::new(),
        deferred: false,
        last_error: None,
    };
    let mut this_round: Vec<(&str, i32)> = Vec::new();
    for (i, query) in pending.iter().enumerate() {
        let &Some((topic, partition)) = query else {
            continue;
        };
        if this_round.contains(&(topic, partition)) {
            round.deferred = true;
            continue;
        }
        this_round.push((topic, partition));
        match client.leader(topic, partition).await {
            Ok((leader, generation)) => round
                .by_leader
                .entry(leader)
                .or_insert((generation, Vec::new()))
                .1
                .push(i),
            Err(e) if e.is_retriable() => round.last_error = Some(e),
            Err(e) => return Err(e),
        }
    }
    Ok(round)
}

/// Looks up offsets, grouping the queries by leader and retrying retriable errors
/// until the request timeout elapses. Shared by [`Admin`](crate::Admin) and the consumers.
pub(crate) async fn list_offsets(
    client: &Client,
    queries: &[(String, i32, OffsetSpec)],
) -> Result<Vec<ListedOffset>, ClientError> {
    list_offsets_at(client, queries, IsolationLevel::ReadUncommitted).await
}

/// [`list_offsets`] at `isolation`: at [`IsolationLevel::ReadCommitted`],
/// [`OffsetSpec::Latest`] is the last stable offset (Kafka's read_committed
/// consumers start there).
pub(crate) async fn list_offsets_at(
    client: &Client,
    queries: &[(String, i32, OffsetSpec)],
    isolation: IsolationLevel,
) -> Result<Vec<ListedOffset>, ClientError> {
    let deadline = Instant::now() + client.request_timeout();
    let mut results: Vec<Option<ListedOffset>> = vec![None; queries.len()];
    let mut backoff = Backoff::new(RETRY_BACKOFF_BASE, RETRY_BACKOFF_CAP);
    loop {
        let pending: Vec<_> = queries
            .iter()
            .zip(&results)
            .map(|((topic, partition, _), r)| r.is_none().then_some((topic.as_str(), *partition)))
            .collect();
        let LeaderRound {
            by_leader,
            deferred,
            mut last_error,
        } = group_by_leader(client, &pending).await?;
        for (leader, (generation, indices)) in by_leader {
            let meta = client.metadata();
            let mut topics: BTreeMap<&str, Vec<ListOffsetsPartition>> = BTreeMap::new();
            for &i in &indices {
                let (topic, partition, spec) = &queries[i];
                topics.entry(topic).or_default().push(ListOffsetsPartition {
                    partition_index: *partition,
                    // KIP-320: a leader with another epoch answers
                    // FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH (retried after a
                    // metadata refresh) rather than offsets of a log we do not know.
                    current_leader_epoch: meta
                        .topic(topic)
                        .and_then(|t| t.partition(*partition))
                        .map_or(-1, |p| p.leader_epoch),
                    timestamp: spec.wire(),
                });
            }
            let req = ListOffsetsRequest {
                replica_id: -1,
                isolation_level: isolation.wire(),
                topics: topics
                    .into_iter()
                    .map(|(name, partitions)| ListOffsetsTopic {
                        name: name.to_string(),
                        partitions,
                    })
                    .collect(),
            };
            let resp = match client.node_connection(leader).await {
                Ok(conn) => conn.send(&req).await.map_err(ClientError::from),
                Err(e) => Err(e),
            };
            let resp = match resp {
                Ok(r) => r,
                Err(e) if e.is_retriable() => {
                    client.invalidate_metadata(generation);
                    last_error = Some(e);
                    continue;
                }
                Err(e) => return Err(e),
            };
            for t in resp.topics {
                for p in t.partitions {
                    let Some(&i) = indices
                        .iter()
                        .find(|&&i| queries[i].0 == t.name && queries[i].1 == p.partition_index)
                    else {
                        continue;
                    };
                    let code = ErrorCode::from_code(p.error_code);
                    if code.is_ok() {
                        results[i] = Some(ListedOffset {
                            topic: t.name.clone(),
                            partition: p.partition_index,
                            offset: p.offset,
                            timestamp: p.timestamp,
                            leader_epoch: p.leader_epoch,
                        });
                    } else {
                        let e = ClientError::Broker {
                            code,
                            context: format!("ListOffsets {}/{}", t.name, p.partition_index),
                        };
                        if !code.is_retriable() {
                            return Err(e);
                        }
                        client.invalidate_metadata(generation);
                        last_error = Some(e);
                    }
                }
            }
        }
        if results.iter().all(Option::is_some) {
            return Ok(results.into_iter().map(|r| r.expect("checked")).collect());
        }
        if deferred && last_error.is_none() {
            continue;
        }
        let wait = backoff.next_delay();
        if Instant::now() + wait > deadline {
            return Err(last_error.unwrap_or(ClientError::Broker {
                code: ErrorCode::RequestTimedOut,
                context: "ListOffsets: partitions missing from the response".to_string(),
            }));
        }
        tokio::time::sleep(wait).await;
    }
}
