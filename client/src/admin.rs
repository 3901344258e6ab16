//! [`Admin`]: create and delete topics, list partition offsets, delete records
//! (`admin/delete_records.rs`), describe the cluster (`admin/cluster.rs`),
//! describe and alter configs (`admin/configs.rs`), create partitions
//! (`admin/create_partitions.rs`), describe log dirs (`admin/log_dirs.rs`),
//! elect leaders (`admin/elect_leaders.rs`), alter and list partition
//! reassignments (`admin/alter_reassignments.rs`, `admin/list_reassignments.rs`),
//! create, describe and delete ACLs, and manage SCRAM users (`admin/scram.rs`);
//! list, describe and delete groups, and list, alter, reset and delete their
//! committed offsets (one file per operation, sharing
//! `admin/group_coordinators.rs`). Every call retries retriable errors until its
//! operation timeout (`admin/retry.rs`; group calls per group, re-finding each
//! group's coordinator).

mod alter_group_offsets;
mod alter_reassignments;
mod cluster;
mod configs;
mod create_partitions;
mod delete_group_offsets;
mod delete_groups;
mod delete_records;
mod describe_groups;
mod elect_leaders;
mod group_coordinators;
mod group_lag;
mod list_group_offsets;
mod list_groups;
mod list_reassignments;
mod log_dirs;
mod reset_group_offsets;
mod retry;
mod scram;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use baton_protocol::acl::{AclBinding, AclBindingFilter};
use baton_protocol::messages::{
    CreatableTopic, CreatableTopicConfig, CreateAclsRequest, CreateTopicsRequest,
    DeleteAclsRequest, DeleteTopicState, DeleteTopicsRequest,
};
use baton_protocol::{ErrorCode, Uuid};
use tokio::time::Instant;

use crate::backoff::Backoff;
use crate::client::{Client, ClientError};
use crate::group::TopicPartition;
use crate::metadata::{ClusterMetadata, Scope};
use crate::offsets::list_offsets;
pub use crate::offsets::{ListedOffset, OffsetSpec};
pub use alter_reassignments::{PartitionError, Reassignment};
pub use cluster::ClusterDescription;
pub use configs::{
    AlterConfigOp, ConfigEntry, ConfigError, ConfigResource, ConfigSource, ConfigSynonym,
    DescribeConfigsOptions, ResourceConfig,
};
pub use create_partitions::NewPartitions;
pub use delete_records::{DeletedRecords, RecordsError, RecordsToDelete};
pub use describe_groups::{GroupDescription, MemberDescription};
pub use elect_leaders::{ElectionResult, ElectionType};
pub use group_coordinators::GroupFailure;
pub use group_lag::PartitionLag;
pub use list_group_offsets::{GroupOffsets, GroupOffsetsQuery, OffsetAndMetadata};
pub use list_groups::{GroupListing, GroupState, GroupType, ListGroupsFilter};
pub use list_reassignments::OngoingReassignment;
pub use log_dirs::{LogDirDescription, ReplicaLogInfo};
pub use reset_group_offsets::GroupOffsetReset;
use retry::{retriable_code, RETRY_BACKOFF_BASE, RETRY_BACKOFF_CAP};
pub use scram::{ScramChange, UserScramCredentials, DEFAULT_SCRAM_ITERATIONS};

/// Locks state shared between the attempts of one call; a poisoned lock (a
/// panicking attempt) still holds consistent outcomes.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Errors of the admin API, wrapping the cluster layer's [`ClientError`].
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// The request could not be delivered or answered.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The broker refused the operation for some topics; the others succeeded.
    #[error("{} topic(s) failed: {}", .0.len(), describe(.0))]
    Topics(Vec<TopicError>),
    /// The broker refused some ACL creations or filters (or, for
    /// [`Admin::describe_acls`], the one filter): CLUSTER_AUTHORIZATION_FAILED
    /// without Alter (Describe) on the cluster, SECURITY_DISABLED without an
    /// authorizer, INVALID_REQUEST for a malformed binding. The others succeeded.
    #[error("{} ACL operation(s) failed: {}", .0.len(), describe_acl_failures(.0))]
    Acls(Vec<AclFailure>),
    /// The broker described an ACL with a code this client does not know.
    #[error("the broker described an ACL this client cannot read: {0}")]
    InvalidAclResponse(#[from] baton_protocol::acl::AclError),
    /// The broker refused the operation for some users (SCRAM credential
    /// administration); the changes of the others were applied.
    #[error("{} user(s) failed: {}", .0.len(), describe_users(.0))]
    Users(Vec<UserError>),
    /// The broker refused to delete records of some partitions
    /// ([`Admin::delete_records`]); the others' records were deleted.
    #[error("{} partition(s) failed: {}", .0.len(), describe_records(.0))]
    Records(Vec<RecordsError>),
    /// The broker refused some partitions' reassignments
    /// ([`Admin::alter_partition_reassignments`]); the others' were applied.
    #[error("{} partition(s) failed: {}", .0.len(), describe_partitions(.0))]
    Partitions(Vec<PartitionError>),
    /// Some groups failed (their coordinator refused, or was not reachable
    /// before the operation timeout): NON_EMPTY_GROUP for deleting a group with
    /// members, GROUP_ID_NOT_FOUND, GROUP_AUTHORIZATION_FAILED, ... The other
    /// groups succeeded.
    #[error("{} group(s) failed: {}", .0.len(), describe_groups(.0))]
    Groups(Vec<GroupFailure>),
    /// The group's committed offsets cannot be altered while it has members (the
    /// coordinator answered `code`: UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, ...).
    #[error("group {group} is active ({code}): stop its consumers before altering its offsets")]
    GroupActive {
        /// The group.
        group: String,
        /// What the coordinator answered.
        code: ErrorCode,
    },
    /// Some partitions of a group offset operation failed
    /// (GROUP_SUBSCRIBED_TO_TOPIC, TOPIC_AUTHORIZATION_FAILED, ...); the others
    /// succeeded.
    #[error("{} partition(s) failed: {}", .0.len(), describe_group_offsets(.0))]
    GroupOffsets(Vec<GroupOffsetFailure>),
    /// A shift of committed offsets ([`GroupOffsetReset::ShiftBy`]) met a
    /// partition the group has no committed offset for.
    #[error("group {group} has no committed offset for {}/{} to shift", partition.topic, partition.partition)]
    NoCommittedOffset {
        /// The group.
        group: String,
        /// The partition.
        partition: TopicPartition,
    },
    /// The broker refused to describe or alter the configs of some resources
    /// ([`Admin::describe_configs`], [`Admin::incremental_alter_configs`]); the
    /// others' were described or altered.
    #[error("{} resource(s) failed: {}", .0.len(), describe_configs(.0))]
    Configs(Vec<ConfigError>),
    /// Topics were created but some partitions still had no leader when the
    /// operation timeout elapsed.
    #[error("topics created, but partitions of {topics:?} had no leader after {timeout:?}")]
    LeadersNotElected {
        /// Topics with leaderless partitions.
        topics: Vec<String>,
        /// How long the call waited.
        timeout: Duration,
    },
}

fn describe(errors: &[TopicError]) -> String {
    errors
        .iter()
        .map(|e| match &e.message {
            Some(m) => format!("{}: {} ({m})", e.topic, e.code),
            None => format!("{}: {}", e.topic, e.code),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn describe_configs(errors: &[ConfigError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn describe_acl_failures(errors: &[AclFailure]) -> String {
    errors
        .iter()
        .map(|e| match &e.message {
            Some(m) => format!("#{}: {} ({m})", e.index, e.code),
            None => format!("#{}: {}", e.index, e.code),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn describe_records(errors: &[RecordsError]) -> String {
    errors
        .iter()
        .map(|e| format!("{}/{}: {}", e.topic, e.partition, e.code))
        .collect::<Vec<_>>()
        .join(", ")
}

fn describe_partitions(errors: &[PartitionError]) -> String {
    errors
        .iter()
        .map(|e| match &e.message {
            Some(m) => format!("{}/{}: {} ({m})", e.topic, e.partition, e.code),
            None => format!("{}/{}: {}", e.topic, e.partition, e.code),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn describe_groups(errors: &[GroupFailure]) -> String {
    errors
        .iter()
        .map(|e| match &e.message {
            Some(m) => format!("{}: {} ({m})", e.group, e.code),
            None => format!("{}: {}", e.group, e.code),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn describe_group_offsets(errors: &[GroupOffsetFailure]) -> String {
    errors
        .iter()
        .map(|e| {
            format!(
                "{} {}/{}: {}",
                e.group, e.partition.topic, e.partition.partition, e.code
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// One partition's failure in a group offset operation.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupOffsetFailure {
    /// The group.
    pub group: String,
    /// The partition.
    pub partition: TopicPartition,
    /// The error code the broker sent.
    pub code: ErrorCode,
}

fn describe_users(errors: &[UserError]) -> String {
    errors
        .iter()
        .map(|e| match &e.message {
            Some(m) => format!("{}: {} ({m})", e.user, e.code),
            None => format!("{}: {}", e.user, e.code),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// One failed ACL creation or deletion filter.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AclFailure {
    /// Its position in the list the call was given (0 for `describe_acls`).
    pub index: usize,
    /// The error code the broker sent.
    pub code: ErrorCode,
    /// The broker's message, if it sent one.
    pub message: Option<String>,
}

/// One user's failure in a SCRAM credential change or description.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UserError {
    /// The user (empty for a failure of the whole request).
    pub user: String,
    /// The error code the broker sent (or the client's own check gave).
    pub code: ErrorCode,
    /// The broker's message, if it sent one.
    pub message: Option<String>,
}

impl AclFailure {
    fn of(index: usize, code: i16, message: Option<String>) -> Option<AclFailure> {
        (code != 0).then(|| AclFailure {
            index,
            code: ErrorCode::from_code(code),
            message,
        })
    }
}

/// One topic's failure in a create or delete.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopicError {
    /// The topic.
    pub topic: String,
    /// The error code the broker sent.
    pub code: ErrorCode,
    /// The broker's message, if it sent one.
    pub message: Option<String>,
}

/// A topic to create.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NewTopic {
    /// The topic name.
    pub name: String,
    /// Number of partitions (-1: the broker's default).
    pub num_partitions: i32,
    /// Replication factor (-1: the broker's default).
    pub replication_factor: i16,
    /// Topic configs (`cleanup.policy`, `retention.ms`, ...).
    pub configs: Vec<(String, Option<String>)>,
}

impl NewTopic {
    /// A topic with `num_partitions` partitions replicated `replication_factor` times.
    pub fn new(name: impl Into<String>, num_partitions: i32, replication_factor: i16) -> Self {
        NewTopic {
            name: name.into(),
            num_partitions,
            replication_factor,
            configs: Vec::new(),
        }
    }

    /// Adds a topic config.
    pub fn config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.configs.push((key.into(), Some(value.into())));
        self
    }
}

/// Cluster administration. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Admin {
    client: Client,
    operation_timeout: Duration,
}

impl Admin {
    /// An admin handle on `client`'s cluster.
    pub fn new(client: &Client) -> Self {
        Admin {
            client: client.clone(),
            operation_timeout: Duration::from_secs(30),
        }
    }

    /// How long the broker may take to create or delete topics, how long
    /// [`Admin::create_topics`] and [`Admin::create_partitions`] wait for
    /// leaders, and how long every call keeps retrying retriable errors (broken
    /// connections, NOT_CONTROLLER, REQUEST_TIMED_OUT, ...) with backoff
    /// (default 30 s).
    pub fn with_operation_timeout(mut self, timeout: Duration) -> Self {
        self.operation_timeout = timeout;
        self
    }

    /// Creates topics through the controller, then waits (up to the operation
    /// timeout) until metadata shows a leader for every new partition, so that
    /// producing and consuming can start at once. A topic this client's principal
    /// may not Describe (ACLs) is not waited for.
    ///
    /// A topic that already exists is reported as TOPIC_ALREADY_EXISTS in
    /// [`AdminError::Topics`]. A broken connection or an unknown controller is
    /// retried on fresh metadata until the operation timeout; if an attempt whose
    /// answer was lost had created a topic, the retry reports it as
    /// TOPIC_ALREADY_EXISTS.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in effect: if the future is dropped after the request was
    /// sent, the topics may or may not be created. The connection stays usable.
    pub async fn create_topics(
        &self,
        topics: impl IntoIterator<Item = NewTopic>,
    ) -> Result<(), AdminError> {
        let topics: Vec<NewTopic> = topics.into_iter().collect();
        if topics.is_empty() {
            return Ok(());
        }
        // Topics whose outcome is final; the others are sent again.
        let outcomes: Mutex<BTreeMap<String, Option<TopicError>>> = Mutex::new(BTreeMap::new());
        let outcomes = &outcomes;
        let topics_ref = &topics;
        self.with_retries("create topics", || async move {
            let req = CreateTopicsRequest {
                topics: topics_ref
                    .iter()
                    .filter(|t| !lock(outcomes).contains_key(&t.name))
                    .map(|t| CreatableTopic {
                        name: t.name.clone(),
                        num_partitions: t.num_partitions,
                        replication_factor: t.replication_factor,
                        assignments: Vec::new(),
                        configs: t
                            .configs
                            .iter()
                            .map(|(name, value)| CreatableTopicConfig {
                                name: name.clone(),
                                value: value.clone(),
                            })
                            .collect(),
                    })
                    .collect(),
                timeout_ms: self.timeout_ms(),
                validate_only: false,
            };
            let resp = self.controller_attempt(&req).await?;
            let mut retry = Ok(());
            for t in resp.topics {
                if let Err(e) = retriable_code(t.error_code, || format!("topic {}", t.name)) {
                    retry = Err(e);
                    continue;
                }
                let error = (t.error_code != 0).then(|| TopicError {
                    topic: t.name.clone(),
                    code: ErrorCode::from_code(t.error_code),
                    message: t.error_message,
                });
                lock(outcomes).insert(t.name, error);
            }
            retry
        })
        .await?;
        let errors: Vec<TopicError> = lock(outcomes).values().flatten().cloned().collect();
        let created: Vec<String> = topics
            .iter()
            .map(|t| t.name.clone())
            .filter(|n| !errors.iter().any(|e| &e.topic == n))
            .collect();
        self.wait_for_leaders(&created).await?;
        if errors.is_empty() {
            Ok(())
        } else {
            Err(AdminError::Topics(errors))
        }
    }

    async fn wait_for_leaders(&self, topics: &[String]) -> Result<(), AdminError> {
        self.poll_topics_until_led(topics.to_vec(), |refreshed| {
            let (meta, _) = refreshed?;
            // A topic this principal may not describe cannot be watched: it was
            // created, and its leaders are none of this client's business.
            Ok(topics
                .iter()
                .filter(|name| !meta.unauthorized_topics.contains(*name))
                .filter(|name| match meta.topic(name) {
                    None => true,
                    Some(t) => {
                        t.partitions.is_empty() || t.partitions.iter().any(|p| p.leader.is_none())
                    }
                })
                .cloned()
                .collect())
        })
        .await
    }

    /// Refreshes the metadata of `topics` until `missing` (given each refresh's
    /// result) names no topic still waiting for leaders, backing off between
    /// refreshes; [`AdminError::LeadersNotElected`] with the topics still missing
    /// when the operation timeout would pass. Nothing to wait for when `topics` is
    /// empty.
    async fn poll_topics_until_led(
        &self,
        topics: Vec<String>,
        mut missing: impl FnMut(
            Result<(Arc<ClusterMetadata>, u64), ClientError>,
        ) -> Result<Vec<String>, AdminError>,
    ) -> Result<(), AdminError> {
        if topics.is_empty() {
            return Ok(());
        }
        let deadline = Instant::now() + self.operation_timeout;
        let mut backoff = Backoff::new(RETRY_BACKOFF_BASE, RETRY_BACKOFF_CAP);
        loop {
            let refreshed = self
                .client
                .refresh(Scope::Topics(topics.clone()), None)
                .await;
            let missing = missing(refreshed)?;
            if missing.is_empty() {
                return Ok(());
            }
            let wait = backoff.next_delay();
            if Instant::now() + wait > deadline {
                return Err(AdminError::LeadersNotElected {
                    topics: missing,
                    timeout: self.operation_timeout,
                });
            }
            tokio::time::sleep(wait).await;
        }
    }

    /// Creates one topic; see [`Admin::create_topics`].
    ///
    /// # Cancel safety
    ///
    /// As for [`Admin::create_topics`].
    pub async fn create_topic(
        &self,
        name: impl Into<String>,
        num_partitions: i32,
        replication_factor: i16,
    ) -> Result<(), AdminError> {
        self.create_topics([NewTopic::new(name, num_partitions, replication_factor)])
            .await
    }

    /// Deletes topics by name through the controller.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in effect: if the future is dropped after the request was
    /// sent, the topics may or may not be deleted.
    pub async fn delete_topics(
        &self,
        names: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<(), AdminError> {
        let names: Vec<String> = names.into_iter().map(Into::into).collect();
        if names.is_empty() {
            return Ok(());
        }
        let outcomes: Mutex<BTreeMap<String, Option<TopicError>>> = Mutex::new(BTreeMap::new());
        let outcomes = &outcomes;
        let names_ref = &names;
        let attempts = self
            .with_retries("delete topics", || async move {
                let pending: Vec<String> = names_ref
                    .iter()
                    .filter(|n| !lock(outcomes).contains_key(*n))
                    .cloned()
                    .collect();
                let req = DeleteTopicsRequest {
                    topics: pending
                        .iter()
                        .map(|n| DeleteTopicState {
                            name: Some(n.clone()),
                            topic_id: Uuid::ZERO,
                        })
                        .collect(),
                    topic_names: pending,
                    timeout_ms: self.timeout_ms(),
                };
                let resp = self.controller_attempt(&req).await?;
                let mut retry = Ok(());
                for t in resp.responses {
                    let name = t.name.unwrap_or_default();
                    if let Err(e) = retriable_code(t.error_code, || format!("topic {name}")) {
                        retry = Err(e);
                        continue;
                    }
                    let error = (t.error_code != 0).then(|| TopicError {
                        topic: name.clone(),
                        code: ErrorCode::from_code(t.error_code),
                        message: t.error_message,
                    });
                    lock(outcomes).insert(name, error);
                }
                retry
            })
            .await;
        // Forget the deleted topics' metadata.
        let _ = self.client.refresh(Scope::Topics(names), None).await;
        attempts?;
        let errors: Vec<TopicError> = lock(outcomes).values().flatten().cloned().collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(AdminError::Topics(errors))
        }
    }

    /// Looks up offsets of partitions, asking each partition's leader. Results come
    /// in the order of `queries`. Retriable errors (a leader change) are retried
    /// after a metadata refresh for up to the request timeout.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: this only reads.
    pub async fn list_offsets<T: Into<String>>(
        &self,
        queries: impl IntoIterator<Item = (T, i32, OffsetSpec)>,
    ) -> Result<Vec<ListedOffset>, AdminError> {
        let queries: Vec<(String, i32, OffsetSpec)> = queries
            .into_iter()
            .map(|(t, p, s)| (t.into(), p, s))
            .collect();
        self.with_retries("list offsets", || async {
            Ok(list_offsets(&self.client, &queries).await?)
        })
        .await
    }

    /// Describes the cluster: brokers, controller, and every topic with its
    /// partitions' leaders, replicas and in-sync replicas (fresh metadata). For
    /// the DescribeCluster API (racks, authorized operations), see
    /// [`Admin::describe_cluster_info`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: this only reads.
    pub async fn describe_cluster(&self) -> Result<ClusterMetadata, AdminError> {
        self.with_retries("describe cluster", || async {
            let meta = self.client.refresh_metadata().await?;
            Ok((*meta).clone())
        })
        .await
    }

    /// Creates ACL bindings (CreateAcls). The principal needs Alter on the
    /// cluster. Creating a binding that exists already succeeds.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in effect: if the future is dropped after the request was
    /// sent, the bindings may or may not be created.
    pub async fn create_acls(
        &self,
        acls: impl IntoIterator<Item = AclBinding>,
    ) -> Result<(), AdminError> {
        let req = CreateAclsRequest {
            creations: acls.into_iter().map(|b| b.to_creation()).collect(),
        };
        if req.creations.is_empty() {
            return Ok(());
        }
        let resp = self.to_controller(&req).await?;
        let failures: Vec<AclFailure> = resp
            .results
            .into_iter()
            .enumerate()
            .filter_map(|(i, r)| AclFailure::of(i, r.error_code, r.error_message))
            .collect();
        if failures.is_empty() {
            Ok(())
        } else {
            Err(AdminError::Acls(failures))
        }
    }

    /// The ACL bindings that `filter` selects (DescribeAcls). The principal needs
    /// Describe on the cluster.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: this only reads.
    pub async fn describe_acls(
        &self,
        filter: &AclBindingFilter,
    ) -> Result<Vec<AclBinding>, AdminError> {
        let resp = self.to_controller(&filter.to_describe()).await?;
        if let Some(failure) = AclFailure::of(0, resp.error_code, resp.error_message) {
            return Err(AdminError::Acls(vec![failure]));
        }
        let mut out = Vec::new();
        for r in &resp.resources {
            for acl in &r.acls {
                out.push(AclBinding::from_description(
                    r.resource_type,
                    &r.resource_name,
                    r.pattern_type,
                    acl,
                )?);
            }
        }
        Ok(out)
    }

    /// Deletes the ACL bindings that any of `filters` selects (DeleteAcls) and
    /// returns them. The principal needs Alter on the cluster. When some filters
    /// fail ([`AdminError::Acls`]), the others have still deleted what they
    /// selected.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in effect: if the future is dropped after the request was
    /// sent, the bindings may or may not be deleted.
    pub async fn delete_acls(
        &self,
        filters: impl IntoIterator<Item = AclBindingFilter>,
    ) -> Result<Vec<AclBinding>, AdminError> {
        let req = DeleteAclsRequest {
            filters: filters.into_iter().map(|f| f.to_delete()).collect(),
        };
        if req.filters.is_empty() {
            return Ok(Vec::new());
        }
        let resp = self.to_controller(&req).await?;
        let mut failures = Vec::new();
        let mut deleted = Vec::new();
        for (i, r) in resp.filter_results.into_iter().enumerate() {
            if let Some(f) = AclFailure::of(i, r.error_code, r.error_message) {
                failures.push(f);
                continue;
            }
            for m in &r.matching_acls {
                if let Some(f) = AclFailure::of(i, m.error_code, m.error_message.clone()) {
                    failures.push(f);
                    continue;
                }
                deleted.push(AclBinding::from_matching_acl(m)?);
            }
        }
        if failures.is_empty() {
            Ok(deleted)
        } else {
            Err(AdminError::Acls(failures))
        }
    }
}
