//! Metadata (key 3), versions 0–12.
//!
//! Reports this node as the only broker and the controller, and every partition as
//! led by it with itself as the only replica and ISR member. `topics`: in v0 an empty
//! list means all topics; in v1+ null means all and empty means none. Topics may be
//! named or (v10+) given by id. Unknown topics are `UNKNOWN_TOPIC_OR_PARTITION` (or
//! `UNKNOWN_TOPIC_ID`), unless auto-creation is enabled in the broker config *and*
//! allowed by the request (always allowed before v4), in which case they are created
//! with the default partition count. An auto-creation that the broker's topic or
//! partition limits (`BrokerLimits`) refuse is logged and answered
//! `UNKNOWN_TOPIC_OR_PARTITION` (so is a produce to such a topic).
//!
//! In a cluster the answer comes from the node's replay of the controller's metadata
//! log: every unfenced broker, and per partition the real leader (`-1` with
//! `LEADER_NOT_AVAILABLE` while offline), leader epoch, replicas, ISR and the replicas
//! on fenced brokers as offline replicas. Topics are never auto-created there.
//!
//! With an authorizer, as in Kafka: a request for all topics lists only those
//! the principal may Describe; a named topic (or id) it may not Describe is
//! answered `TOPIC_AUTHORIZATION_FAILED`, whether it exists or not; an
//! auto-creation needs Create on the cluster or the topic (else
//! `TOPIC_AUTHORIZATION_FAILED`).
//!
//! Deviations from Apache Kafka: authorized-operations fields keep their "not
//! requested" value; auto-created topics are reported as ready at
//! once (Kafka first answers `LEADER_NOT_AVAILABLE`); no internal topics exist.

use baton_protocol::messages::{
    MetadataRequest, MetadataResponse, MetadataResponseBroker, MetadataResponsePartition,
    MetadataResponseTopic,
};
use baton_protocol::{ErrorCode, Uuid};

use baton_protocol::acl::{AclOperation, ResourceType};

use crate::acl::RequestContext;
use crate::controller::{ControllerState, TopicInfo};
use crate::node_mode::ClusterLink;
use crate::state::BrokerState;
use crate::topics::{validate_topic_name, Topic};

fn describe(topic: &Topic) -> MetadataResponseTopic {
    MetadataResponseTopic {
        error_code: 0,
        name: Some(topic.name.clone()),
        topic_id: topic.id,
        is_internal: topic.name == crate::group::OFFSETS_TOPIC,
        partitions: topic
            .partitions
            .iter()
            .map(|p| {
                let st = p.lock();
                MetadataResponsePartition {
                    error_code: 0,
                    partition_index: p.index(),
                    leader_id: st.leader,
                    leader_epoch: st.leader_epoch(),
                    replica_nodes: st.replicas.clone(),
                    isr_nodes: st.isr.clone(),
                    offline_replicas: Vec::new(),
                }
            })
            .collect(),
        ..Default::default()
    }
}

fn error_topic(code: ErrorCode, name: Option<String>, topic_id: Uuid) -> MetadataResponseTopic {
    MetadataResponseTopic {
        error_code: code.code(),
        name,
        topic_id,
        ..Default::default()
    }
}

fn describe_cluster_topic(img: &ControllerState, t: &TopicInfo) -> MetadataResponseTopic {
    let partitions = (0..t.partitions)
        .filter_map(|i| img.partition(t.topic_id, i))
        .map(|p| {
            let offline: Vec<i32> = p
                .replicas
                .iter()
                .copied()
                .filter(|r| img.broker(*r).is_none_or(|b| b.fenced))
                .collect();
            MetadataResponsePartition {
                error_code: if p.is_offline() {
                    ErrorCode::LeaderNotAvailable.code()
                } else {
                    0
                },
                partition_index: p.partition,
                leader_id: if p.is_offline() { -1 } else { p.leader },
                leader_epoch: p.leader_epoch,
                replica_nodes: p.replicas.clone(),
                isr_nodes: p.isr.clone(),
                offline_replicas: offline,
            }
        })
        .collect();
    MetadataResponseTopic {
        error_code: 0,
        name: Some(t.name.clone()),
        topic_id: t.topic_id,
        is_internal: t.name == crate::group::OFFSETS_TOPIC,
        partitions,
        ..Default::default()
    }
}

/// Whether `ctx` may see the topic `name`.
fn describable(state: &BrokerState, ctx: &RequestContext, name: &str) -> bool {
    state.allowed(ctx, AclOperation::Describe, ResourceType::Topic, name)
}

fn refused(name: Option<String>) -> MetadataResponseTopic {
    error_topic(ErrorCode::TopicAuthorizationFailed, name, Uuid::ZERO)
}

fn handle_cluster(
    state: &BrokerState,
    ctx: &RequestContext,
    link: &ClusterLink,
    req: MetadataRequest,
    version: i16,
    listener: usize,
) -> MetadataResponse {
    let name = state.listener_name(listener);
    let img = link.image();
    let all = match &req.topics {
        None => true,
        Some(t) => t.is_empty() && version == 0,
    };
    let topics = if all {
        img.topics()
            .filter(|t| describable(state, ctx, &t.name))
            .map(|t| describe_cluster_topic(&img, t))
            .collect()
    } else {
        req.topics
            .unwrap_or_default()
            .into_iter()
            .map(|t| match t.name {
                Some(name) => {
                    if validate_topic_name(&name).is_err() {
                        return error_topic(
                            ErrorCode::InvalidTopicException,
                            Some(name),
                            Uuid::ZERO,
                        );
                    }
                    if !describable(state, ctx, &name) {
                        return refused(Some(name));
                    }
                    match img.topic_by_name(&name) {
                        Some(topic) => describe_cluster_topic(&img, topic),
                        None => {
                            error_topic(ErrorCode::UnknownTopicOrPartition, Some(name), Uuid::ZERO)
                        }
                    }
                }
                None => match img.topic(t.topic_id) {
                    Some(topic) if !describable(state, ctx, &topic.name) => refused(None),
                    Some(topic) => describe_cluster_topic(&img, topic),
                    None => error_topic(ErrorCode::UnknownTopicId, None, t.topic_id),
                },
            })
            .collect()
    };
    // Brokers by their endpoint of the listener asked (Kafka leaves out brokers
    // without that listener).
    let brokers = img
        .brokers()
        .filter(|b| !b.fenced)
        .filter_map(|b| {
            let (host, port) = b.endpoint(name)?;
            Some(MetadataResponseBroker {
                node_id: b.broker_id,
                host: host.to_owned(),
                port: i32::from(port),
                rack: b.rack.clone(),
            })
        })
        .collect();
    MetadataResponse {
        throttle_time_ms: 0,
        brokers,
        cluster_id: Some(link.options.cluster_id.clone()),
        controller_id: state.config.node_id,
        topics,
        ..Default::default()
    }
}

/// `listener` is the index of the listener the request arrived on; a single node
/// answers with that listener's advertised endpoint.
pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: MetadataRequest,
    version: i16,
    listener: usize,
) -> MetadataResponse {
    if let Some(link) = state.mode.replica() {
        return handle_cluster(state, ctx, link, req, version, listener);
    }
    let all = match &req.topics {
        None => true,
        Some(t) => t.is_empty() && version == 0,
    };
    let topics = if all {
        state
            .all_topics()
            .iter()
            .filter(|t| describable(state, ctx, &t.name))
            .map(|t| describe(t))
            .collect()
    } else {
        let auto = req.allow_auto_topic_creation || version < 4;
        req.topics
            .unwrap_or_default()
            .into_iter()
            .map(|t| match t.name {
                Some(name) => {
                    if validate_topic_name(&name).is_err() {
                        return error_topic(
                            ErrorCode::InvalidTopicException,
                            Some(name),
                            Uuid::ZERO,
                        );
                    }
                    if !describable(state, ctx, &name) {
                        return refused(Some(name));
                    }
                    let creatable = || {
                        state.allowed_on_cluster(ctx, AclOperation::Create)
                            || state.allowed(ctx, AclOperation::Create, ResourceType::Topic, &name)
                    };
                    if auto
                        && state.config.auto_create_topics
                        && state.topic(&name).is_none()
                        && !creatable()
                    {
                        return refused(Some(name));
                    }
                    match state.topic_or_auto_create(&name, auto) {
                        Some(topic) => describe(&topic),
                        None => {
                            error_topic(ErrorCode::UnknownTopicOrPartition, Some(name), Uuid::ZERO)
                        }
                    }
                }
                None => match state.topic_by_id(t.topic_id) {
                    Some(topic) if !describable(state, ctx, &topic.name) => refused(None),
                    Some(topic) => describe(&topic),
                    None => error_topic(ErrorCode::UnknownTopicId, None, t.topic_id),
                },
            })
            .collect()
    };
    MetadataResponse {
        throttle_time_ms: 0,
        brokers: vec![MetadataResponseBroker {
            node_id: state.config.node_id,
            host: state.endpoint(listener).host.clone(),
            port: state.endpoint(listener).port,
            rack: state.config.rack.clone(),
        }],
        cluster_id: Some(state.cluster_id.clone()),
        controller_id: state.config.node_id,
        topics,
        ..Default::default()
    }
}
