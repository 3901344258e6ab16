//! What the proxy reads from request bodies and the answers it makes itself: a
//! Produce request's acks, whether a request touches a partition, and an injected
//! error response.

use baton_protocol::envelope;
use baton_protocol::messages::{
    FetchRequest, FetchResponse, FetchResponsePartitionData, FetchableTopicResponse,
    PartitionProduceResponse, ProduceRequest, ProduceResponse, TopicProduceResponse,
};
use baton_protocol::Message;
use bytes::Bytes;

/// The acks of a Produce request (`None` when it does not decode).
pub(super) fn produce_acks(body: &Bytes, version: i16) -> Option<i16> {
    let (_, req) = envelope::decode_request::<ProduceRequest>(body.clone(), version).ok()?;
    Some(req.acks)
}

/// Whether a Produce or Fetch request names `topic`/`partition` (other APIs: never).
pub(super) fn request_touches(
    api_key: i16,
    body: &Bytes,
    version: i16,
    topic: &str,
    partition: i32,
) -> bool {
    if api_key == ProduceRequest::API_KEY {
        if let Ok((_, req)) = envelope::decode_request::<ProduceRequest>(body.clone(), version) {
            return req
                .topic_data
                .iter()
                .any(|t| t.name == topic && t.partition_data.iter().any(|p| p.index == partition));
        }
    } else if api_key == FetchRequest::API_KEY {
        if let Ok((_, req)) = envelope::decode_request::<FetchRequest>(body.clone(), version) {
            return req.topics.iter().any(|t| {
                t.topic == topic && t.partitions.iter().any(|p| p.partition == partition)
            });
        }
    }
    false
}

/// The proxy's own answer to a Produce or Fetch request: `code` for every partition.
pub(super) fn error_response(
    api_key: i16,
    body: &Bytes,
    version: i16,
    correlation_id: i32,
    code: i16,
) -> Option<Bytes> {
    if api_key == ProduceRequest::API_KEY {
        let (_, req) = envelope::decode_request::<ProduceRequest>(body.clone(), version).ok()?;
        let resp = ProduceResponse {
            responses: req
                .topic_data
                .iter()
                .map(|t| TopicProduceResponse {
                    name: t.name.clone(),
                    partition_responses: t
                        .partition_data
                        .iter()
                        .map(|p| PartitionProduceResponse {
                            index: p.index,
                            error_code: code,
                            base_offset: -1,
                            ..Default::default()
                        })
                        .collect(),
                })
                .collect(),
            ..Default::default()
        };
        return envelope::encode_response::<ProduceRequest>(correlation_id, version, &resp).ok();
    }
    if api_key == FetchRequest::API_KEY {
        let (_, req) = envelope::decode_request::<FetchRequest>(body.clone(), version).ok()?;
        let resp = FetchResponse {
            responses: req
                .topics
                .iter()
                .map(|t| FetchableTopicResponse {
                    topic: t.topic.clone(),
                    topic_id: t.topic_id,
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| FetchResponsePartitionData {
                            partition_index: p.partition,
                            error_code: code,
                            high_watermark: -1,
                            ..Default::default()
                        })
                        .collect(),
                })
                .collect(),
            ..Default::default()
        };
        return envelope::encode_response::<FetchRequest>(correlation_id, version, &resp).ok();
    }
    None
}
