//! CreateTopics, DeleteTopics, CreatePartitions, IncrementalAlterConfigs (topic
//! resources), CreateAcls, DeleteAcls and AlterUserScramCredentials on a cluster node: forwarded to the controller (as
//! KRaft brokers forward them), then answered once this node's metadata image
//! shows the outcome, so that a client that asks this node next sees it. Everything
//! is authorized here first (Create and Delete on topics, Alter on the cluster for
//! ACLs and SCRAM credentials); the controller applies what nodes forward. Each
//! goes from frame to reply through [`forwarded`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use baton_protocol::acl::{AclBinding, AclOperation, ResourceType};
use baton_protocol::messages::{
    AlterUserScramCredentialsRequest, CreatableTopicResult, CreateAclsRequest, CreateTopicsRequest,
    CreateTopicsResponse, DeletableTopicResult, DeleteAclsRequest, DeleteTopicsRequest,
    DeleteTopicsResponse,
};
use baton_protocol::sasl::ScramHash;
use baton_protocol::{ErrorCode, Request, Uuid};
use bytes::Bytes;

use super::create_topics::failure;
use super::{alter_user_scram_credentials, create_acls, delete_acls};
use crate::acl::RequestContext;
use crate::controller::PartitionInfo;
use crate::node_mode::ClusterLink;
use crate::state::BrokerState;
use crate::wire::{decode, encode, DispatchError, Reply};

/// Longest wait for the local image to show a forwarded change.
const APPLY_WAIT: Duration = Duration::from_secs(15);

/// One forwarded request of type `R`, from frame to reply: decoded here,
/// answered by `answer` with this node's link to the cluster, encoded.
pub(super) async fn forwarded<R, F, Fut>(
    state: &Arc<BrokerState>,
    frame: Bytes,
    version: i16,
    answer: F,
) -> Result<Reply, DispatchError>
where
    R: Request,
    F: FnOnce(Arc<ClusterLink>, R) -> Fut,
    Fut: Future<Output = Result<R::Response, DispatchError>>,
{
    let Some(link) = state.mode.replica().cloned() else {
        return Err(DispatchError::NotAClusterNode);
    };
    let (header, req) = decode::<R>(frame, version)?;
    let resp = answer(link, req).await?;
    Ok(Reply::Now(Some(encode::<R>(
        header.correlation_id,
        version,
        &resp,
    )?)))
}

pub(super) async fn wait_until(state: &Arc<BrokerState>, done: impl Fn(&BrokerState) -> bool) {
    let Some(link) = state.mode.replica() else {
        return;
    };
    let mut rx = link.image_tx.subscribe();
    let deadline = tokio::time::Instant::now() + APPLY_WAIT;
    loop {
        if done(state) {
            return;
        }
        tokio::select! {
            r = rx.changed() => if r.is_err() { return },
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            _ = tokio::time::sleep_until(deadline) => return,
        }
    }
}

/// Waits (as [`wait_until`] does) until this node's metadata image shows each
/// `(topic, partition, epoch)` of `parts` with `epoch_of` the partition above
/// `epoch`.
pub(super) async fn wait_for_epochs(
    state: &Arc<BrokerState>,
    link: &ClusterLink,
    parts: &[(String, i32, i32)],
    epoch_of: fn(&PartitionInfo) -> i32,
) {
    wait_until(state, |_| {
        let img = link.image();
        parts.iter().all(|(topic, p, epoch)| {
            img.topic_by_name(topic)
                .and_then(|t| img.partition(t.topic_id, *p))
                .is_some_and(|pi| epoch_of(pi) > *epoch)
        })
    })
    .await;
}

/// Sends `req` to the controller in this node's name.
pub(super) async fn call_controller<R: Request + Sync>(
    link: &ClusterLink,
    req: &R,
    version: i16,
    api: &'static str,
) -> Result<R::Response, DispatchError> {
    let mut rpc = link.rpc(
        link.options.controller,
        format!("node-{}-admin", link.node_id),
    );
    rpc.call(req, version, Duration::from_secs(30))
        .await
        .map_err(|source| DispatchError::Forward { api, source })
}

pub(crate) async fn create_acls(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    frame: Bytes,
    version: i16,
) -> Result<Reply, DispatchError> {
    forwarded::<CreateAclsRequest, _, _>(state, frame, version, |link, req| async move {
        let resp = match create_acls::refusal(state, ctx) {
            Some(refusal) => create_acls::refused(&req, refusal),
            None => {
                let resp = call_controller(&link, &req, version, "CreateAcls").await?;
                let created: Vec<AclBinding> = req
                    .creations
                    .iter()
                    .zip(&resp.results)
                    .filter(|(_, r)| r.error_code == 0)
                    .filter_map(|(c, _)| AclBinding::from_creation(c).ok())
                    .collect();
                wait_until(state, |_| {
                    let img = link.image();
                    created.iter().all(|b| img.acls().contains(b))
                })
                .await;
                resp
            }
        };
        Ok(resp)
    })
    .await
}

/// AlterUserScramCredentials on a cluster node: authorized here (Alter on the
/// cluster), then sent to the controller, which writes the changes to the
/// metadata log; answered once this node's copy of the credentials shows every
/// change that succeeded.
pub(crate) async fn alter_user_scram_credentials(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    frame: Bytes,
    version: i16,
) -> Result<Reply, DispatchError> {
    forwarded::<AlterUserScramCredentialsRequest, _, _>(
        state,
        frame,
        version,
        |link, req| async move {
            let resp = if state.allowed_on_cluster(ctx, AclOperation::Alter) {
                let resp =
                    call_controller(&link, &req, version, "AlterUserScramCredentials").await?;
                let done: Vec<&str> = resp
                    .results
                    .iter()
                    .filter(|r| r.error_code == 0)
                    .map(|r| r.user.as_str())
                    .collect();
                let changes: Vec<(String, i8, bool)> = req
                    .deletions
                    .iter()
                    .filter(|d| done.contains(&d.name.as_str()))
                    .map(|d| (d.name.clone(), d.mechanism, false))
                    .chain(
                        req.upsertions
                            .iter()
                            .filter(|u| done.contains(&u.name.as_str()))
                            .map(|u| (u.name.clone(), u.mechanism, true)),
                    )
                    .collect();
                wait_until(state, |s| {
                    changes.iter().all(|(user, mechanism, present)| {
                        ScramHash::from_kafka_type(*mechanism)
                            .is_some_and(|h| s.scram.has(user, h) == *present)
                    })
                })
                .await;
                resp
            } else {
                alter_user_scram_credentials::alter(&req, false, &mut &*state.scram)
            };
            Ok(resp)
        },
    )
    .await
}

pub(crate) async fn delete_acls(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    frame: Bytes,
    version: i16,
) -> Result<Reply, DispatchError> {
    forwarded::<DeleteAclsRequest, _, _>(state, frame, version, |link, req| async move {
        let resp = match create_acls::refusal(state, ctx) {
            Some(refusal) => delete_acls::refused(&req, refusal),
            None => {
                let resp = call_controller(&link, &req, version, "DeleteAcls").await?;
                let deleted: Vec<AclBinding> = resp
                    .filter_results
                    .iter()
                    .flat_map(|r| &r.matching_acls)
                    .filter_map(|m| AclBinding::from_matching_acl(m).ok())
                    .collect();
                wait_until(state, |_| {
                    let img = link.image();
                    deleted.iter().all(|b| !img.acls().contains(b))
                })
                .await;
                resp
            }
        };
        Ok(resp)
    })
    .await
}

/// Takes the topics `ctx` may not create (Create on the cluster or the topic) out
/// of `req`, answered TOPIC_AUTHORIZATION_FAILED.
fn take_uncreatable(
    state: &BrokerState,
    ctx: &RequestContext,
    req: &mut CreateTopicsRequest,
) -> Vec<CreatableTopicResult> {
    if state.authorizer.is_none() || state.allowed_on_cluster(ctx, AclOperation::Create) {
        return Vec::new();
    }
    let (refused, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut req.topics)
        .into_iter()
        .partition(|t| !state.allowed(ctx, AclOperation::Create, ResourceType::Topic, &t.name));
    req.topics = kept;
    refused
        .into_iter()
        .map(|t| {
            let message = "Authorization failed.".to_owned();
            failure(t.name, (ErrorCode::TopicAuthorizationFailed, message))
        })
        .collect()
}

/// Takes the topics `ctx` may not delete (Delete on the topic) out of `req`,
/// answered TOPIC_AUTHORIZATION_FAILED. An id names the topic of this node's image.
fn take_undeletable(
    state: &BrokerState,
    ctx: &RequestContext,
    link: &ClusterLink,
    req: &mut DeleteTopicsRequest,
    version: i16,
) -> Vec<DeletableTopicResult> {
    if state.authorizer.is_none() {
        return Vec::new();
    }
    let refused = |name: &str| !state.allowed(ctx, AclOperation::Delete, ResourceType::Topic, name);
    let answer = |name: Option<String>, topic_id: Uuid| DeletableTopicResult {
        name,
        topic_id,
        error_code: ErrorCode::TopicAuthorizationFailed.code(),
        error_message: Some("Authorization failed.".into()),
    };
    if version >= 6 {
        let (out, kept): (Vec<_>, Vec<_>) =
            std::mem::take(&mut req.topics).into_iter().partition(|t| {
                let name = t
                    .name
                    .clone()
                    .or_else(|| link.image().topic(t.topic_id).map(|i| i.name.clone()));
                name.is_some_and(|n| refused(&n))
            });
        req.topics = kept;
        out.into_iter()
            .map(|t| answer(t.name, t.topic_id))
            .collect()
    } else {
        let (out, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut req.topic_names)
            .into_iter()
            .partition(|n| refused(n));
        req.topic_names = kept;
        out.into_iter()
            .map(|n| answer(Some(n), Uuid::ZERO))
            .collect()
    }
}

pub(crate) async fn create_topics(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    frame: Bytes,
    version: i16,
) -> Result<Reply, DispatchError> {
    forwarded::<CreateTopicsRequest, _, _>(state, frame, version, |link, mut req| async move {
        let refused = take_uncreatable(state, ctx, &mut req);
        let mut resp = if req.topics.is_empty() {
            CreateTopicsResponse::default()
        } else {
            call_controller(&link, &req, version, "CreateTopics").await?
        };
        let created: Vec<String> = resp
            .topics
            .iter()
            .filter(|t| t.error_code == 0 && !req.validate_only)
            .map(|t| t.name.clone())
            .collect();
        resp.topics.extend(refused);
        wait_until(state, |s| {
            created.iter().all(|name| {
                s.topic(name).is_some_and(|t| {
                    t.partitions.iter().all(|p| {
                        let st = p.lock();
                        !matches!(st.role(), crate::partition::Role::NotReplica)
                            || !st.replicas.contains(&link.node_id)
                    })
                }) && link.image().topic_by_name(name).is_some()
            })
        })
        .await;
        Ok(resp)
    })
    .await
}

pub(crate) async fn delete_topics(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    frame: Bytes,
    version: i16,
) -> Result<Reply, DispatchError> {
    forwarded::<DeleteTopicsRequest, _, _>(state, frame, version, |link, mut req| async move {
        let refused = take_undeletable(state, ctx, &link, &mut req, version);
        let mut resp = if req.topics.is_empty() && req.topic_names.is_empty() {
            DeleteTopicsResponse::default()
        } else {
            call_controller(&link, &req, version, "DeleteTopics").await?
        };
        let deleted: Vec<String> = resp
            .responses
            .iter()
            .filter(|t| t.error_code == 0)
            .filter_map(|t| t.name.clone())
            .collect();
        resp.responses.extend(refused);
        wait_until(state, |s| {
            deleted
                .iter()
                .all(|n| s.topic(n).is_none() && link.image().topic_by_name(n).is_none())
        })
        .await;
        Ok(resp)
    })
    .await
}

/// IncrementalAlterConfigs on a cluster node: resources answered here (repeats,
/// authorization, broker resources; see `incremental_alter_configs.rs`), topic
/// changes sent to the controller, answered once this node's topics show the new
/// configs.
pub(crate) async fn incremental_alter_configs(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    frame: Bytes,
    version: i16,
) -> Result<Reply, DispatchError> {
    use super::incremental_alter_configs::precheck;
    use crate::config_change::{apply_broker_default_changes, apply_topic_changes};
    use baton_protocol::messages::{
        IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    };
    use baton_protocol::messages::{RESOURCE_TYPE_BROKER, RESOURCE_TYPE_TOPIC};
    forwarded::<IncrementalAlterConfigsRequest, _, _>(
        state,
        frame,
        version,
        |link, req| async move {
            let mut seen = std::collections::HashSet::new();
            let mut answered = Vec::new();
            let mut onward = IncrementalAlterConfigsRequest {
                resources: Vec::new(),
                validate_only: req.validate_only,
            };
            for r in req.resources {
                match precheck(state, ctx, &r, &mut seen) {
                    Some(answer) => answered.push(answer),
                    None => onward.resources.push(r),
                }
            }
            let mut resp = if onward.resources.is_empty() {
                IncrementalAlterConfigsResponse::default()
            } else {
                // What each topic's configs become, from this node's image; the answer
                // waits until the local topics show it.
                let expected: Vec<(String, std::collections::BTreeMap<String, String>)> = onward
                    .resources
                    .iter()
                    .filter(|r| r.resource_type == RESOURCE_TYPE_TOPIC)
                    .filter_map(|r| {
                        let t = link.image().topic_by_name(&r.resource_name).cloned()?;
                        let current = t.configs.iter().cloned().collect();
                        Some((
                            r.resource_name.clone(),
                            apply_topic_changes(&current, &r.configs).ok()?,
                        ))
                    })
                    .collect();
                let defaults: Option<std::collections::BTreeMap<String, String>> = onward
                    .resources
                    .iter()
                    .find(|r| r.resource_type == RESOURCE_TYPE_BROKER)
                    .and_then(|r| {
                        apply_broker_default_changes(link.image().broker_defaults(), &r.configs)
                            .ok()
                    })
                    .filter(|_| !onward.validate_only);
                let resp =
                    call_controller(&link, &onward, version, "IncrementalAlterConfigs").await?;
                let defaults = defaults.filter(|_| {
                    resp.responses
                        .iter()
                        .any(|r| r.resource_type == RESOURCE_TYPE_BROKER && r.error_code == 0)
                });
                let changed: Vec<_> = expected
                    .into_iter()
                    .filter(|(name, _)| {
                        !onward.validate_only
                            && resp
                                .responses
                                .iter()
                                .any(|r| &r.resource_name == name && r.error_code == 0)
                    })
                    .collect();
                wait_until(state, |s| {
                    changed
                        .iter()
                        .all(|(name, want)| s.topic(name).is_none_or(|t| &t.config.entries == want))
                        && defaults.as_ref().is_none_or(|d| &s.broker_defaults() == d)
                })
                .await;
                resp
            };
            resp.responses.extend(answered);
            Ok(resp)
        },
    )
    .await
}

/// CreatePartitions on a cluster node: repeats and topics without Alter are
/// answered here; the others go to the controller, answered once this node's
/// copy of each grown topic has its new partitions with their roles.
pub(crate) async fn create_partitions(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    frame: Bytes,
    version: i16,
) -> Result<Reply, DispatchError> {
    use super::create_partitions::precheck;
    use baton_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
    forwarded::<CreatePartitionsRequest, _, _>(state, frame, version, |link, mut req| async move {
        let mut seen = std::collections::HashSet::new();
        let mut answered = Vec::new();
        let topics = std::mem::take(&mut req.topics);
        for t in topics {
            match precheck(state, ctx, &t, &mut seen) {
                Some(answer) => answered.push(answer),
                None => req.topics.push(t),
            }
        }
        let mut resp = if req.topics.is_empty() {
            CreatePartitionsResponse::default()
        } else {
            call_controller(&link, &req, version, "CreatePartitions").await?
        };
        let grown: Vec<(String, usize)> = req
            .topics
            .iter()
            .filter(|t| {
                !req.validate_only
                    && resp
                        .results
                        .iter()
                        .any(|r| r.name == t.name && r.error_code == 0)
            })
            .map(|t| (t.name.clone(), usize::try_from(t.count).unwrap_or(0)))
            .collect();
        wait_until(state, |s| {
            grown.iter().all(|(name, count)| {
                s.topic(name).is_none_or(|t| {
                    t.partitions.len() >= *count
                        && t.partitions.iter().all(|p| {
                            let st = p.lock();
                            !matches!(st.role(), crate::partition::Role::NotReplica)
                                || !st.replicas.contains(&link.node_id)
                        })
                })
            })
        })
        .await;
        resp.results.extend(answered);
        Ok(resp)
    })
    .await
}
