//! [`Admin::list_groups`]: ListGroups (API key 16) sent to every broker, each
//! answering for the groups it coordinates, merged as Kafka's admin client does.

use std::fmt;

use baton_protocol::messages::{ListGroupsRequest, Message};
use baton_protocol::ErrorCode;
use tokio::time::Instant;

use super::{Admin, AdminError, RETRY_BACKOFF_BASE, RETRY_BACKOFF_CAP};
use crate::backoff::Backoff;
use crate::client::ClientError;
use crate::connection::ConnectionError;
use crate::metadata::Scope;

/// The kind of a group (KIP-848): which rebalance protocol it runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GroupType {
    /// The classic protocol: JoinGroup / SyncGroup, client-side assignment.
    Classic,
    /// The consumer protocol of KIP-848: ConsumerGroupHeartbeat, server-side
    /// assignment.
    Consumer,
    /// Another type the broker named (`share`, `streams`, ...).
    Other(String),
}

impl GroupType {
    /// The type named by `name` (case-insensitive), as ListGroups writes it.
    pub fn parse(name: &str) -> GroupType {
        if name.eq_ignore_ascii_case("classic") {
            GroupType::Classic
        } else if name.eq_ignore_ascii_case("consumer") {
            GroupType::Consumer
        } else {
            GroupType::Other(name.to_owned())
        }
    }

    /// The name ListGroups uses.
    pub fn name(&self) -> &str {
        match self {
            GroupType::Classic => "classic",
            GroupType::Consumer => "consumer",
            GroupType::Other(n) => n,
        }
    }
}

impl fmt::Display for GroupType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The state of a group, classic or consumer protocol.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GroupState {
    /// No members (it may still have committed offsets).
    Empty,
    /// Classic: waiting for members to (re)join.
    PreparingRebalance,
    /// Classic: joined, waiting for the leader's assignment.
    CompletingRebalance,
    /// Every member has its assignment.
    Stable,
    /// Consumer protocol: a new target assignment is being computed.
    Assigning,
    /// Consumer protocol: members are moving to the target assignment.
    Reconciling,
    /// The group does not exist (any more).
    Dead,
    /// A state this client does not know, as the broker named it.
    Other(String),
}

impl GroupState {
    /// The state named by `name` (case-insensitive), as the brokers write it.
    pub fn parse(name: &str) -> GroupState {
        const KNOWN: [(&str, GroupState); 7] = [
            ("Empty", GroupState::Empty),
            ("PreparingRebalance", GroupState::PreparingRebalance),
            ("CompletingRebalance", GroupState::CompletingRebalance),
            ("Stable", GroupState::Stable),
            ("Assigning", GroupState::Assigning),
            ("Reconciling", GroupState::Reconciling),
            ("Dead", GroupState::Dead),
        ];
        KNOWN
            .into_iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, s)| s)
            .unwrap_or_else(|| GroupState::Other(name.to_owned()))
    }

    /// The name the brokers use (what [`ListGroupsFilter::states`] sends).
    pub fn name(&self) -> &str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Assigning => "Assigning",
            GroupState::Reconciling => "Reconciling",
            GroupState::Dead => "Dead",
            GroupState::Other(n) => n,
        }
    }
}

impl fmt::Display for GroupState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which groups [`Admin::list_groups`] lists; the default lists all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListGroupsFilter {
    /// Only groups in one of these states; empty for any (ListGroups v4+).
    pub states: Vec<GroupState>,
    /// Only groups of one of these types; empty for any (ListGroups v5+).
    pub types: Vec<GroupType>,
}

impl ListGroupsFilter {
    /// Every group.
    pub fn all() -> Self {
        Self::default()
    }

    /// Only groups in `states`.
    pub fn states(mut self, states: impl IntoIterator<Item = GroupState>) -> Self {
        self.states = states.into_iter().collect();
        self
    }

    /// Only groups of `types`.
    pub fn types(mut self, types: impl IntoIterator<Item = GroupType>) -> Self {
        self.types = types.into_iter().collect();
        self
    }
}

/// One group found by [`Admin::list_groups`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupListing {
    /// The group id.
    pub group_id: String,
    /// The protocol type (`consumer` for consumer groups; empty for a group with
    /// only committed offsets).
    pub protocol_type: String,
    /// The state, if the broker reported it (ListGroups v4+).
    pub state: Option<GroupState>,
    /// The type, if the broker reported it (ListGroups v5+).
    pub group_type: Option<GroupType>,
    /// The broker that coordinates it.
    pub coordinator: i32,
}

impl Admin {
    /// Lists the groups of the cluster: ListGroups is sent to every broker (each
    /// answers for the groups it coordinates) and the answers are merged, sorted by
    /// group id. `filter` selects states (brokers with ListGroups v4+) and types
    /// (v5+); a broker too old for a filter in use fails the call with
    /// [`ConnectionError::NoCommonVersion`].
    ///
    /// A broker that is loading its groups (COORDINATOR_LOAD_IN_PROGRESS), cannot
    /// be reached, or answers another retriable error is asked again with backoff
    /// until the operation timeout; then its last error is returned.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: this only reads.
    pub async fn list_groups(
        &self,
        filter: &ListGroupsFilter,
    ) -> Result<Vec<GroupListing>, AdminError> {
        let deadline = Instant::now() + self.operation_timeout;
        let mut backoff = Backoff::new(RETRY_BACKOFF_BASE, RETRY_BACKOFF_CAP);
        // The brokers only: no topic metadata is needed.
        let (meta, _) = self.client.refresh(Scope::Topics(Vec::new()), None).await?;
        let mut nodes: Vec<i32> = meta.brokers.keys().copied().collect();
        let mut out: Vec<GroupListing> = Vec::new();
        loop {
            let mut failed = Vec::new();
            let mut last: Option<ClientError> = None;
            for &node in &nodes {
                match self.list_groups_on(node, filter).await {
                    Ok(groups) => out.extend(groups),
                    Err(e) if e.is_retriable() => {
                        tracing::debug!(node, error = %e, "ListGroups failed; retrying");
                        failed.push(node);
                        last = Some(e);
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            let Some(last) = last else { break };
            let wait = backoff.next_delay();
            if Instant::now() + wait > deadline {
                return Err(last.into());
            }
            tokio::time::sleep(wait).await;
            nodes = failed;
        }
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        Ok(out)
    }

    /// ListGroups on one broker.
    async fn list_groups_on(
        &self,
        node: i32,
        filter: &ListGroupsFilter,
    ) -> Result<Vec<GroupListing>, ClientError> {
        let conn = self.client.node_connection(node).await?;
        let version = conn.version_for::<ListGroupsRequest>()?;
        let needed = if !filter.types.is_empty() {
            5
        } else if !filter.states.is_empty() {
            4
        } else {
            0
        };
        if version < needed {
            let range = conn
                .broker_versions(ListGroupsRequest::API_KEY)
                .expect("version_for found the API");
            return Err(ConnectionError::NoCommonVersion {
                addr: conn.addr().to_owned(),
                api_key: ListGroupsRequest::API_KEY,
                broker_min: range.min,
                broker_max: range.max,
                client_min: needed,
                client_max: version,
            }
            .into());
        }
        let req = ListGroupsRequest {
            states_filter: filter.states.iter().map(|s| s.name().to_owned()).collect(),
            types_filter: filter.types.iter().map(|t| t.name().to_owned()).collect(),
        };
        let resp = conn.send(&req).await?;
        let code = ErrorCode::from_code(resp.error_code);
        if !code.is_ok() {
            return Err(ClientError::Broker {
                code,
                context: format!("ListGroups on broker {node}"),
            });
        }
        Ok(resp
            .groups
            .into_iter()
            .map(|g| GroupListing {
                state: (version >= 4).then(|| GroupState::parse(&g.group_state)),
                group_type: (version >= 5).then(|| GroupType::parse(&g.group_type)),
                group_id: g.group_id,
                protocol_type: g.protocol_type,
                coordinator: node,
            })
            .collect())
    }
}
