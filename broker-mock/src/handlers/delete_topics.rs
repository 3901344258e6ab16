//! DeleteTopics (key 20), versions 1–6.
//!
//! Deletes topics by name (v1–5 `topic_names`; v6 `topics` entries with a name) or by
//! id (v6 entries with a null name), removing their data. Unknown names answer
//! `UNKNOWN_TOPIC_OR_PARTITION`, unknown ids `UNKNOWN_TOPIC_ID`; an entry with both a
//! name and a non-zero id is `INVALID_REQUEST`.
//!
//! One path serves both places that delete topics: [`delete_topics`] reads the
//! entries and builds the response, and a [`TopicDeleter`] removes each topic. On a
//! standalone node that is the node's topic table ([`handle`]); on a cluster node the
//! request is forwarded to the controller (`handlers/forward.rs`), whose deleter
//! proposes controller records, and answered once this node's metadata shows the
//! deletion.
//!
//! With an authorizer, each topic needs Delete (else `TOPIC_AUTHORIZATION_FAILED`),
//! as in Kafka.
//!
//! Deviations from Apache Kafka: deletion is immediate and synchronous (the timeout is
//! not needed).

use baton_protocol::messages::{DeletableTopicResult, DeleteTopicsRequest, DeleteTopicsResponse};
use baton_protocol::{ErrorCode, Uuid};

use baton_protocol::acl::{AclOperation, ResourceType};

use crate::acl::RequestContext;
use crate::state::BrokerState;

/// Where a DeleteTopics request's topics are removed: a standalone node's topic
/// table or the cluster controller.
pub(crate) trait TopicDeleter {
    /// The name of the topic with id `id`, if there is one.
    fn topic_name(&self, id: Uuid) -> Option<String>;

    /// Deletes the topic named `name` and returns its id.
    fn delete(&mut self, name: &str) -> Result<Uuid, ErrorCode>;
}

/// A standalone node's topic table, and who asks.
struct LocalDeleter<'a>(&'a BrokerState, &'a RequestContext);

impl TopicDeleter for LocalDeleter<'_> {
    fn topic_name(&self, id: Uuid) -> Option<String> {
        self.0.topic_by_id(id).map(|t| t.name.clone())
    }

    fn delete(&mut self, name: &str) -> Result<Uuid, ErrorCode> {
        if !self
            .0
            .allowed(self.1, AclOperation::Delete, ResourceType::Topic, name)
        {
            return Err(ErrorCode::TopicAuthorizationFailed);
        }
        self.0.delete_topic(name).map(|t| t.id)
    }
}

/// Serves DeleteTopics on a standalone node.
pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    delete_topics(&mut LocalDeleter(state, ctx), req, version)
}

/// Deletes the topics `req` names (by name, or by id in v6 entries without one)
/// through `deleter`, and builds the response.
pub(crate) fn delete_topics(
    deleter: &mut impl TopicDeleter,
    req: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    let entries: Vec<(Option<String>, Uuid)> = if version >= 6 {
        req.topics
            .into_iter()
            .map(|t| (t.name, t.topic_id))
            .collect()
    } else {
        req.topic_names
            .into_iter()
            .map(|n| (Some(n), Uuid::ZERO))
            .collect()
    };
    let responses = entries
        .into_iter()
        .map(|(name, id)| {
            let result = match name {
                Some(n) if id != Uuid::ZERO => Err((ErrorCode::InvalidRequest, Some(n))),
                Some(n) => match deleter.delete(&n) {
                    Ok(topic_id) => Ok((n, topic_id)),
                    Err(code) => Err((code, Some(n))),
                },
                None => match deleter.topic_name(id) {
                    Some(n) => deleter
                        .delete(&n)
                        .map(|topic_id| (n, topic_id))
                        .map_err(|code| match code {
                            ErrorCode::TopicAuthorizationFailed => (code, None),
                            _ => (ErrorCode::UnknownTopicId, None),
                        }),
                    None => Err((ErrorCode::UnknownTopicId, None)),
                },
            };
            match result {
                Ok((n, topic_id)) => DeletableTopicResult {
                    name: Some(n),
                    topic_id,
                    error_code: 0,
                    error_message: None,
                },
                Err((code, n)) => DeletableTopicResult {
                    name: n,
                    topic_id: id,
                    error_code: code.code(),
                    error_message: Some(format!("{code:?}")),
                },
            }
        })
        .collect();
    DeleteTopicsResponse {
        throttle_time_ms: 0,
        responses,
    }
}
