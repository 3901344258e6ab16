//! Which responses count as errors: a response carrying a non-zero error code at
//! its top level or for one of its partitions (or, for the coordinator APIs, one
//! of its members or transactions). The APIs inspected are the data path and the
//! group and transaction APIs clients run continuously: Produce, Fetch,
//! ListOffsets, FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
//! OffsetCommit, TxnOffsetCommit, InitProducerId, AddPartitionsToTxn,
//! AddOffsetsToTxn and EndTxn. Other responses are not inspected (they count as
//! requests, never as errors). A fenced producer is an error code
//! PRODUCER_FENCED or INVALID_PRODUCER_EPOCH in any of these.

use std::any::Any;

use baton_protocol::messages::{
    AddOffsetsToTxnResponse, AddPartitionsToTxnResponse, EndTxnResponse, FetchResponse,
    FindCoordinatorResponse, HeartbeatResponse, InitProducerIdResponse, JoinGroupResponse,
    LeaveGroupResponse, ListOffsetsResponse, OffsetCommitResponse, ProduceResponse,
    SyncGroupResponse, TxnOffsetCommitResponse,
};
use baton_protocol::ErrorCode;

/// The error codes a response carries, as far as this module inspects it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Some code is non-zero.
    pub error: bool,
    /// Some code says the producer is fenced.
    pub fenced: bool,
}

impl Outcome {
    fn of(codes: impl IntoIterator<Item = i16>) -> Outcome {
        let fenced = [ErrorCode::ProducerFenced, ErrorCode::InvalidProducerEpoch].map(|c| c.code());
        codes.into_iter().fold(Outcome::default(), |o, c| Outcome {
            error: o.error || c != 0,
            fenced: o.fenced || fenced.contains(&c),
        })
    }
}

/// Inspects `response` (any response type; those not listed above carry no
/// error as far as the metrics go).
pub(crate) fn outcome(response: &dyn Any) -> Outcome {
    if let Some(r) = response.downcast_ref::<ProduceResponse>() {
        let parts = r.responses.iter().flat_map(|t| &t.partition_responses);
        return Outcome::of(parts.map(|p| p.error_code));
    }
    if let Some(r) = response.downcast_ref::<FetchResponse>() {
        let parts = r.responses.iter().flat_map(|t| &t.partitions);
        return Outcome::of(
            [r.error_code]
                .into_iter()
                .chain(parts.map(|p| p.error_code)),
        );
    }
    if let Some(r) = response.downcast_ref::<ListOffsetsResponse>() {
        return Outcome::of(
            r.topics
                .iter()
                .flat_map(|t| &t.partitions)
                .map(|p| p.error_code),
        );
    }
    if let Some(r) = response.downcast_ref::<OffsetCommitResponse>() {
        return Outcome::of(
            r.topics
                .iter()
                .flat_map(|t| &t.partitions)
                .map(|p| p.error_code),
        );
    }
    if let Some(r) = response.downcast_ref::<TxnOffsetCommitResponse>() {
        return Outcome::of(
            r.topics
                .iter()
                .flat_map(|t| &t.partitions)
                .map(|p| p.error_code),
        );
    }
    if let Some(r) = response.downcast_ref::<FindCoordinatorResponse>() {
        let keys = r.coordinators.iter().map(|c| c.error_code);
        return Outcome::of([r.error_code].into_iter().chain(keys));
    }
    if let Some(r) = response.downcast_ref::<LeaveGroupResponse>() {
        let members = r.members.iter().map(|m| m.error_code);
        return Outcome::of([r.error_code].into_iter().chain(members));
    }
    if let Some(r) = response.downcast_ref::<AddPartitionsToTxnResponse>() {
        let old = r.results_by_topic_v3_and_below.iter();
        let new = r
            .results_by_transaction
            .iter()
            .flat_map(|t| &t.topic_results);
        let parts = old.chain(new).flat_map(|t| &t.results_by_partition);
        let codes = parts.map(|p| p.partition_error_code);
        return Outcome::of([r.error_code].into_iter().chain(codes));
    }
    let top = if let Some(r) = response.downcast_ref::<JoinGroupResponse>() {
        r.error_code
    } else if let Some(r) = response.downcast_ref::<SyncGroupResponse>() {
        r.error_code
    } else if let Some(r) = response.downcast_ref::<HeartbeatResponse>() {
        r.error_code
    } else if let Some(r) = response.downcast_ref::<InitProducerIdResponse>() {
        r.error_code
    } else if let Some(r) = response.downcast_ref::<AddOffsetsToTxnResponse>() {
        r.error_code
    } else if let Some(r) = response.downcast_ref::<EndTxnResponse>() {
        r.error_code
    } else {
        0
    };
    Outcome::of([top])
}

/// Counts `response` of `api_key`/`version` in `metrics`: an error, a fenced
/// producer.
pub(crate) fn count(metrics: &super::NodeMetrics, api_key: i16, version: i16, response: &dyn Any) {
    let o = outcome(response);
    if o.error {
        metrics.error(api_key, version);
    }
    if o.fenced {
        super::registry::inc(&metrics.fenced_producers);
    }
}

/// Encodes a response frame like `wire::encode`, first counting its errors and
/// fenced producers in `metrics`.
pub(crate) fn encode_counted<R: baton_protocol::Request>(
    metrics: &super::NodeMetrics,
    correlation_id: i32,
    version: i16,
    response: &R::Response,
) -> Result<bytes::Bytes, crate::wire::DispatchError>
where
    R::Response: 'static,
{
    count(metrics, R::API_KEY, version, response);
    crate::wire::encode::<R>(correlation_id, version, response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_protocol::messages::{PartitionProduceResponse, TopicProduceResponse};

    #[test]
    fn partition_and_top_level_codes_count() {
        let mut produce = ProduceResponse::default();
        assert_eq!(outcome(&produce), Outcome::default());
        produce.responses.push(TopicProduceResponse {
            partition_responses: vec![PartitionProduceResponse::default(); 2],
            ..Default::default()
        });
        assert_eq!(outcome(&produce), Outcome::default());
        produce.responses[0].partition_responses[1].error_code =
            ErrorCode::InvalidProducerEpoch.code();
        assert_eq!(
            outcome(&produce),
            Outcome {
                error: true,
                fenced: true
            }
        );
        let heartbeat = HeartbeatResponse {
            error_code: ErrorCode::RebalanceInProgress.code(),
            ..Default::default()
        };
        assert_eq!(
            outcome(&heartbeat),
            Outcome {
                error: true,
                fenced: false
            }
        );
        assert_eq!(outcome(&"not a response"), Outcome::default());
    }
}
