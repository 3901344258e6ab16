//! DeleteTopics (key 20), versions 1–6.
//!
//! Deletes topics by name (v1–5 `topic_names`; v6 `topics` entries with a name) or by
//! id (v6 entries with a null name), removing their data. Unknown names answer
//! `UNKNOWN_TOPIC_OR_PARTITION`, unknown ids `UNKNOWN_TOPIC_ID`; an entry with both a
//! name and a non-zero id is `INVALID_REQUEST`.
//!
//! On a cluster node the request is forwarded to the controller
//! (`cluster/forward.rs`) and answered once this node's metadata shows the deletion.
//!
//! Deviations from Apache Kafka: deletion is immediate and synchronous (the timeout is
//! not needed); no authorization.

use baton_protocol::messages::{DeletableTopicResult, DeleteTopicsRequest, DeleteTopicsResponse};
use baton_protocol::{ErrorCode, Uuid};

use crate::state::BrokerState;

pub(crate) fn handle(
    state: &BrokerState,
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
            let result = match (&name, id) {
                (Some(_), id) if id != Uuid::ZERO => Err((ErrorCode::InvalidRequest, name.clone())),
                (Some(n), _) => state
                    .delete_topic(n)
                    .map(|t| (t.name.clone(), t.id))
                    .map_err(|c| (c, name.clone())),
                (None, id) => match state.topic_by_id(id) {
                    Some(t) => state
                        .delete_topic(&t.name)
                        .map(|t| (t.name.clone(), t.id))
                        .map_err(|_| (ErrorCode::UnknownTopicId, None)),
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
