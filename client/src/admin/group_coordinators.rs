//! The machinery the group admin calls share: each group's coordinator found with
//! FindCoordinator (API key 10; v4+ asks for many groups in one request, KIP-699),
//! and [`Admin::per_coordinator`], which sends one request per coordinator for its
//! groups and retries the groups whose coordinator moved, was loading or could not
//! be reached, until the operation timeout.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

use baton_protocol::messages::FindCoordinatorRequest;
use baton_protocol::ErrorCode;
use tokio::time::Instant;

use super::{Admin, AdminError, GroupOffsetFailure, RETRY_BACKOFF_BASE, RETRY_BACKOFF_CAP};
use crate::backoff::Backoff;
use crate::client::ClientError;
use crate::connection::Connection;
use crate::group::TopicPartition;

/// One group's failure in a group admin call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupFailure {
    /// The group.
    pub group: String,
    /// The error code the broker sent: for example GROUP_ID_NOT_FOUND,
    /// NON_EMPTY_GROUP (a group with members cannot be deleted),
    /// GROUP_AUTHORIZATION_FAILED, or the last retriable error
    /// (COORDINATOR_NOT_AVAILABLE, ...) when the operation timeout ran out.
    pub code: ErrorCode,
    /// The broker's message, if it sent one.
    pub message: Option<String>,
}

impl GroupFailure {
    pub(super) fn new(group: impl Into<String>, code: ErrorCode, message: Option<String>) -> Self {
        GroupFailure {
            group: group.into(),
            code,
            message,
        }
    }
}

/// What a coordinator said about one group.
pub(super) enum GroupOutcome<T> {
    /// Answered.
    Done(T),
    /// Failed for good.
    Failed(GroupFailure),
    /// A retriable error (the coordinator moved or is loading): find the
    /// coordinator again and retry after a backoff.
    Retry(ErrorCode),
}

impl<T> GroupOutcome<T> {
    /// The outcome of a group-level error `code` (not NONE): coordinator errors
    /// and other retriable ones are retried.
    pub(super) fn from_error(group: &str, code: ErrorCode, message: Option<String>) -> Self {
        if is_retriable_group_error(code) {
            GroupOutcome::Retry(code)
        } else {
            GroupOutcome::Failed(GroupFailure::new(group, code, message))
        }
    }
}

/// Whether a group-level error code means "ask again, maybe elsewhere":
/// NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS and
/// the other retriable codes.
pub(super) fn is_retriable_group_error(code: ErrorCode) -> bool {
    code.is_retriable()
}

/// `Ok` when no partition of `group` failed in an offset call, else
/// [`AdminError::GroupOffsets`] naming each failed partition with its code.
pub(super) fn partition_failures(
    group: &str,
    failed: Vec<(TopicPartition, ErrorCode)>,
) -> Result<(), AdminError> {
    if failed.is_empty() {
        return Ok(());
    }
    Err(AdminError::GroupOffsets(
        failed
            .into_iter()
            .map(|(partition, code)| GroupOffsetFailure {
                group: group.to_owned(),
                partition,
                code,
            })
            .collect(),
    ))
}

/// One request to a coordinator for some of the groups: its per-group outcomes
/// (groups it does not mention are retried), or a connection-level failure.
pub(super) type CoordinatorCall<'a, T> =
    Pin<Box<dyn Future<Output = Result<Vec<(String, GroupOutcome<T>)>, ClientError>> + Send + 'a>>;

/// The outcome of a group admin call per group, in the order of the groups asked
/// for (duplicates removed).
pub(super) type PerGroup<T> = Vec<(String, Result<T, GroupFailure>)>;

impl Admin {
    /// Runs `call` against the coordinator of every group in `groups` (one call per
    /// coordinator: its node id, a connection to it and its groups), until each group has a final outcome or the
    /// operation timeout runs out.
    ///
    /// Groups whose coordinator is unknown, moved (NOT_COORDINATOR), is loading
    /// (COORDINATOR_LOAD_IN_PROGRESS) or could not be reached are looked up again and
    /// retried with backoff. At the timeout a group still pending fails with its last
    /// retriable error code; if it only ever saw connection failures, the last one
    /// is returned as [`AdminError::Client`]. A non-retriable connection failure is
    /// returned at once.
    pub(super) async fn per_coordinator<'a, T, F>(
        &'a self,
        groups: Vec<String>,
        call: F,
    ) -> Result<PerGroup<T>, AdminError>
    where
        F: Fn(i32, Connection, Vec<String>) -> CoordinatorCall<'a, T>,
    {
        let mut order: Vec<String> = Vec::with_capacity(groups.len());
        for g in groups {
            if !order.contains(&g) {
                order.push(g);
            }
        }
        let deadline = Instant::now() + self.operation_timeout;
        let mut backoff = Backoff::new(RETRY_BACKOFF_BASE, RETRY_BACKOFF_CAP);
        let mut done: BTreeMap<String, Result<T, GroupFailure>> = BTreeMap::new();
        let mut last_code: BTreeMap<String, ErrorCode> = BTreeMap::new();
        let mut last_error: Option<ClientError> = None;
        loop {
            let pending: Vec<String> = order
                .iter()
                .filter(|g| !done.contains_key(*g))
                .cloned()
                .collect();
            if pending.is_empty() {
                break;
            }
            let found = match self.find_group_coordinators(&pending).await {
                Ok(found) => found,
                Err(e) if e.is_retriable() => {
                    last_error = Some(e);
                    Vec::new()
                }
                Err(e) => return Err(e.into()),
            };
            let mut by_node: BTreeMap<(i32, String), Vec<String>> = BTreeMap::new();
            for (group, found) in found {
                match found {
                    Ok(at) => by_node.entry(at).or_default().push(group),
                    Err(code) if is_retriable_group_error(code) => {
                        last_code.insert(group, code);
                    }
                    Err(code) => {
                        let failure = GroupFailure::new(group.clone(), code, None);
                        done.insert(group, Err(failure));
                    }
                }
            }
            for ((node, addr), groups) in by_node {
                let conn = match self.client.node_connection_at(node, &addr).await {
                    Ok(conn) => conn,
                    Err(e) if e.is_retriable() => {
                        last_error = Some(e);
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                };
                match call(node, conn, groups).await {
                    Ok(outcomes) => {
                        for (group, outcome) in outcomes {
                            match outcome {
                                GroupOutcome::Done(v) => {
                                    done.insert(group, Ok(v));
                                }
                                GroupOutcome::Failed(f) => {
                                    done.insert(group, Err(f));
                                }
                                GroupOutcome::Retry(code) => {
                                    tracing::debug!(%group, node, %code, "group request to retry");
                                    last_code.insert(group, code);
                                }
                            }
                        }
                    }
                    Err(e) if e.is_retriable() => {
                        tracing::debug!(node, error = %e, "coordinator request failed; retrying");
                        last_error = Some(e);
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            if order.iter().all(|g| done.contains_key(g)) {
                break;
            }
            let wait = backoff.next_delay();
            if Instant::now() + wait > deadline {
                for g in &order {
                    if done.contains_key(g) {
                        continue;
                    }
                    match (last_code.get(g), &last_error) {
                        (Some(&code), _) => {
                            done.insert(g.clone(), Err(GroupFailure::new(g.clone(), code, None)));
                        }
                        (None, Some(e)) => return Err(e.clone().into()),
                        (None, None) => {
                            let code = ErrorCode::CoordinatorNotAvailable;
                            done.insert(g.clone(), Err(GroupFailure::new(g.clone(), code, None)));
                        }
                    }
                }
                break;
            }
            tokio::time::sleep(wait).await;
        }
        Ok(order
            .into_iter()
            .map(|g| {
                let outcome = done.remove(&g).expect("every group has an outcome");
                (g, outcome)
            })
            .collect())
    }

    /// The coordinator (node id and address) of each group, or the error
    /// FindCoordinator answered for it. Asks one live broker: all groups in one
    /// request from v4, one request per group below.
    async fn find_group_coordinators(
        &self,
        groups: &[String],
    ) -> Result<Vec<(String, Result<(i32, String), ErrorCode>)>, ClientError> {
        let conn = self.any_broker().await?;
        let version = conn.version_for::<FindCoordinatorRequest>()?;
        let mut out = Vec::with_capacity(groups.len());
        if version >= 4 {
            let req = FindCoordinatorRequest {
                key_type: 0,
                coordinator_keys: groups.to_vec(),
                ..Default::default()
            };
            let resp = conn.send(&req).await?;
            for g in groups {
                let found = match resp.coordinators.iter().find(|c| &c.key == g) {
                    Some(c) => at(c.error_code, c.node_id, &c.host, c.port),
                    None => Err(ErrorCode::CoordinatorNotAvailable),
                };
                out.push((g.clone(), found));
            }
        } else {
            for g in groups {
                let req = FindCoordinatorRequest {
                    key: g.clone(),
                    key_type: 0,
                    ..Default::default()
                };
                let resp = conn.send(&req).await?;
                out.push((
                    g.clone(),
                    at(resp.error_code, resp.node_id, &resp.host, resp.port),
                ));
            }
        }
        Ok(out)
    }

    /// A connection to some live broker, those already connected first.
    pub(super) async fn any_broker(&self) -> Result<Connection, ClientError> {
        let (mut meta, _) = self.client.metadata_snapshot();
        if meta.brokers.is_empty() {
            meta = self.client.refresh_metadata().await?;
        }
        let mut nodes: Vec<i32> = meta.brokers.keys().copied().collect();
        nodes.sort_by_key(|n| self.client.existing_node_connection(*n).is_none());
        let mut last = None;
        for node in nodes {
            match self.client.node_connection(node).await {
                Ok(conn) => return Ok(conn),
                Err(e) => last = Some(e),
            }
        }
        // Every known broker failed: look the cluster up again for the next try.
        let _ = self.client.refresh_metadata().await;
        Err(last.unwrap_or(ClientError::NoBootstrapServers))
    }
}

/// A coordinator from FindCoordinator's fields, or its error.
fn at(error_code: i16, node_id: i32, host: &str, port: i32) -> Result<(i32, String), ErrorCode> {
    let code = ErrorCode::from_code(error_code);
    if !code.is_ok() {
        return Err(code);
    }
    if node_id < 0 {
        return Err(ErrorCode::CoordinatorNotAvailable);
    }
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    Ok((node_id, format!("{host}:{port}")))
}
