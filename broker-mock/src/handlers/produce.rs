//! Produce (key 0), versions 3–10.
//!
//! Each partition's records must be whole v2 batches (magic 2) with valid CRCs and
//! consistent record counts, or nothing of that partition is appended
//! (`CORRUPT_MESSAGE`, or `INVALID_RECORD` for control batches and count mismatches).
//! The broker assigns offsets and stamps its leader epoch in place (both outside the
//! CRC); with topic config `message.timestamp.type=LogAppendTime` it also stamps the
//! append time (rewriting the CRC). `acks` may be 0, 1 or -1 (on one node -1 equals
//! 1); anything else is `INVALID_REQUIRED_ACKS`. With `acks=0` no response is sent.
//! Unknown topics are `UNKNOWN_TOPIC_OR_PARTITION` unless the broker auto-creates
//! topics.
//!
//! Deviations from Apache Kafka: no idempotence or transaction checks yet (producer
//! ids and sequences are stored, not validated; `transactional_id` is ignored);
//! compressed batches are stored without decompressing their records; no
//! `max.message.bytes` limit; a null or empty records field is `CORRUPT_MESSAGE`.

use baton_protocol::messages::{
    PartitionProduceResponse, ProduceRequest, ProduceResponse, TopicProduceResponse,
};
use baton_protocol::ErrorCode;

use crate::state::{now_ms, BrokerState};

fn failed(index: i32, code: ErrorCode) -> PartitionProduceResponse {
    PartitionProduceResponse {
        index,
        error_code: code.code(),
        base_offset: -1,
        log_append_time_ms: -1,
        log_start_offset: -1,
        ..Default::default()
    }
}

pub(crate) fn handle(
    state: &BrokerState,
    req: ProduceRequest,
    _version: i16,
) -> Option<ProduceResponse> {
    let acks_ok = (-1..=1).contains(&req.acks);
    let mut appended = false;
    let mut responses = Vec::with_capacity(req.topic_data.len());
    for topic_data in req.topic_data {
        let topic = if acks_ok {
            state.topic_or_auto_create(&topic_data.name, true)
        } else {
            None
        };
        let partition_responses = topic_data
            .partition_data
            .into_iter()
            .map(|pd| {
                if !acks_ok {
                    return failed(pd.index, ErrorCode::InvalidRequiredAcks);
                }
                let Some(partition) = topic.as_ref().and_then(|t| t.partition(pd.index)) else {
                    return failed(pd.index, ErrorCode::UnknownTopicOrPartition);
                };
                let Some(records) = pd.records else {
                    return failed(pd.index, ErrorCode::CorruptMessage);
                };
                let ts_type = topic
                    .as_ref()
                    .map(|t| t.config.timestamp_type())
                    .unwrap_or_default();
                let result = partition.lock().append_records(&records, ts_type, now_ms());
                match result {
                    Ok(info) => {
                        appended = true;
                        PartitionProduceResponse {
                            index: pd.index,
                            error_code: 0,
                            base_offset: info.base_offset,
                            log_append_time_ms: info.log_append_time_ms,
                            log_start_offset: info.log_start_offset,
                            ..Default::default()
                        }
                    }
                    Err(code) => {
                        tracing::debug!(topic = %topic_data.name, partition = pd.index, ?code, "produce rejected");
                        failed(pd.index, code)
                    }
                }
            })
            .collect();
        responses.push(TopicProduceResponse {
            name: topic_data.name,
            partition_responses,
        });
    }
    if appended {
        state.notify_append();
    }
    if req.acks == 0 {
        return None;
    }
    Some(ProduceResponse {
        responses,
        throttle_time_ms: 0,
        ..Default::default()
    })
}
