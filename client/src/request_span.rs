//! The `tracing` span of each request a [`Connection`](crate::connection::Connection)
//! sends, and the outcome recorded on it when the response (or the failure) is in.
//!
//! Span `kafka.request`, level DEBUG, target `baton_kafka::request_span`:
//!
//! | field | set | value |
//! |---|---|---|
//! | `api` | at start | the API's name (`Produce`, `Fetch`, `JoinGroup`...) |
//! | `api_version` | at start | the negotiated version |
//! | `broker` | at start | the broker's address |
//! | `node_id` | at start, when known | the broker's node id (not for bootstrap connections) |
//! | `correlation_id` | once encoded | the request's correlation id |
//! | `error_code` | at the end, if any | the response's top-level error code, else its first non-zero partition (or member) error code |
//! | `error` | at the end, if any | the error code's name and number (`NotLeaderOrFollower (6)`), or the connection error |
//!
//! With no subscriber interested in DEBUG spans of this target, the span is
//! [`Span::none`]: nothing is allocated or formatted, and the outcome is not
//! looked at.

use std::any::Any;

use baton_protocol::messages::{
    ConsumerGroupHeartbeatResponse, FetchResponse, FindCoordinatorResponse, HeartbeatResponse,
    InitProducerIdResponse, JoinGroupResponse, LeaveGroupResponse, OffsetCommitResponse,
    OffsetFetchResponse, ProduceResponse, SyncGroupResponse,
};
use baton_protocol::ErrorCode;
use tracing::field::Empty;
use tracing::Span;

use crate::connection::ConnectionError;

/// The span of one request of API `api_key` in `version` to the broker at `addr`
/// (`node_id` -1: not known, as for a bootstrap server).
pub(crate) fn start(api_key: i16, version: i16, node_id: i32, addr: &str) -> Span {
    let span = tracing::debug_span!(
        "kafka.request",
        api = api_name(api_key),
        api_version = version,
        broker = addr,
        node_id = Empty,
        correlation_id = Empty,
        error_code = Empty,
        error = Empty,
    );
    if node_id >= 0 {
        span.record("node_id", node_id);
    }
    span
}

/// Records the outcome of the request on `span`, and logs a failed request (at
/// DEBUG, with its error).
pub(crate) fn finish<T: Any>(span: &Span, api_key: i16, result: &Result<T, ConnectionError>) {
    match result {
        Ok(resp) => {
            if span.is_disabled() && !tracing::enabled!(tracing::Level::DEBUG) {
                return;
            }
            let code = error_code(resp);
            if code != 0 {
                let error = ErrorCode::from_code(code);
                span.record("error_code", code);
                span.record("error", tracing::field::display(error));
                tracing::debug!(parent: span, api = api_name(api_key), %error, "request answered with an error");
            }
        }
        Err(e) => {
            span.record("error", tracing::field::display(e));
            tracing::debug!(parent: span, api = api_name(api_key), error = %e, "request failed");
        }
    }
}

/// The error code a response carries: its top-level one, else the first non-zero
/// one of its partitions (or members); 0 if none, or for APIs not listed here.
fn error_code(resp: &dyn Any) -> i16 {
    fn first(codes: impl IntoIterator<Item = i16>) -> i16 {
        codes.into_iter().find(|&c| c != 0).unwrap_or(0)
    }
    if let Some(r) = resp.downcast_ref::<ProduceResponse>() {
        first(
            r.responses
                .iter()
                .flat_map(|t| t.partition_responses.iter().map(|p| p.error_code)),
        )
    } else if let Some(r) = resp.downcast_ref::<FetchResponse>() {
        first(
            std::iter::once(r.error_code).chain(
                r.responses
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            ),
        )
    } else if let Some(r) = resp.downcast_ref::<JoinGroupResponse>() {
        r.error_code
    } else if let Some(r) = resp.downcast_ref::<SyncGroupResponse>() {
        r.error_code
    } else if let Some(r) = resp.downcast_ref::<HeartbeatResponse>() {
        r.error_code
    } else if let Some(r) = resp.downcast_ref::<LeaveGroupResponse>() {
        first(std::iter::once(r.error_code).chain(r.members.iter().map(|m| m.error_code)))
    } else if let Some(r) = resp.downcast_ref::<OffsetCommitResponse>() {
        first(
            r.topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
        )
    } else if let Some(r) = resp.downcast_ref::<OffsetFetchResponse>() {
        let old = r
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code));
        let new = r.groups.iter().flat_map(|g| {
            std::iter::once(g.error_code).chain(
                g.topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            )
        });
        first(std::iter::once(r.error_code).chain(old).chain(new))
    } else if let Some(r) = resp.downcast_ref::<ConsumerGroupHeartbeatResponse>() {
        r.error_code
    } else if let Some(r) = resp.downcast_ref::<FindCoordinatorResponse>() {
        first(std::iter::once(r.error_code).chain(r.coordinators.iter().map(|c| c.error_code)))
    } else if let Some(r) = resp.downcast_ref::<InitProducerIdResponse>() {
        r.error_code
    } else {
        0
    }
}

/// The name of API `key`, as in Apache Kafka's message specs.
pub(crate) fn api_name(key: i16) -> &'static str {
    match key {
        0 => "Produce",
        1 => "Fetch",
        2 => "ListOffsets",
        3 => "Metadata",
        8 => "OffsetCommit",
        9 => "OffsetFetch",
        10 => "FindCoordinator",
        11 => "JoinGroup",
        12 => "Heartbeat",
        13 => "LeaveGroup",
        14 => "SyncGroup",
        15 => "DescribeGroups",
        16 => "ListGroups",
        17 => "SaslHandshake",
        18 => "ApiVersions",
        19 => "CreateTopics",
        20 => "DeleteTopics",
        21 => "DeleteRecords",
        22 => "InitProducerId",
        23 => "OffsetForLeaderEpoch",
        24 => "AddPartitionsToTxn",
        25 => "AddOffsetsToTxn",
        26 => "EndTxn",
        27 => "WriteTxnMarkers",
        28 => "TxnOffsetCommit",
        29 => "DescribeAcls",
        30 => "CreateAcls",
        31 => "DeleteAcls",
        32 => "DescribeConfigs",
        33 => "AlterConfigs",
        34 => "AlterReplicaLogDirs",
        35 => "DescribeLogDirs",
        36 => "SaslAuthenticate",
        37 => "CreatePartitions",
        42 => "DeleteGroups",
        43 => "ElectLeaders",
        44 => "IncrementalAlterConfigs",
        45 => "AlterPartitionReassignments",
        46 => "ListPartitionReassignments",
        47 => "OffsetDelete",
        50 => "DescribeUserScramCredentials",
        51 => "AlterUserScramCredentials",
        56 => "AlterPartition",
        60 => "DescribeCluster",
        61 => "DescribeProducers",
        62 => "BrokerRegistration",
        63 => "BrokerHeartbeat",
        65 => "DescribeTransactions",
        66 => "ListTransactions",
        68 => "ConsumerGroupHeartbeat",
        69 => "ConsumerGroupDescribe",
        _ => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_protocol::messages::{
        FetchResponsePartitionData, FetchableTopicResponse, PartitionProduceResponse,
        TopicProduceResponse,
    };

    #[test]
    fn error_codes_come_from_the_top_level_or_the_first_failed_partition() {
        let produce = ProduceResponse {
            responses: vec![TopicProduceResponse {
                partition_responses: vec![
                    PartitionProduceResponse::default(),
                    PartitionProduceResponse {
                        error_code: ErrorCode::NotLeaderOrFollower.code(),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(error_code(&produce), ErrorCode::NotLeaderOrFollower.code());
        let mut fetch = FetchResponse {
            responses: vec![FetchableTopicResponse {
                partitions: vec![FetchResponsePartitionData {
                    error_code: ErrorCode::OffsetOutOfRange.code(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(error_code(&fetch), ErrorCode::OffsetOutOfRange.code());
        fetch.error_code = ErrorCode::FetchSessionIdNotFound.code();
        assert_eq!(error_code(&fetch), ErrorCode::FetchSessionIdNotFound.code());
        assert_eq!(error_code(&HeartbeatResponse::default()), 0);
        assert_eq!(error_code(&"not a response"), 0);
    }

    #[test]
    fn every_api_the_protocol_crate_knows_has_a_name() {
        use baton_protocol::messages::*;
        fn name<R: Request>() -> &'static str {
            api_name(R::API_KEY)
        }
        for n in [
            name::<ProduceRequest>(),
            name::<FetchRequest>(),
            name::<JoinGroupRequest>(),
            name::<ConsumerGroupHeartbeatRequest>(),
            name::<ConsumerGroupDescribeRequest>(),
            name::<OffsetDeleteRequest>(),
            name::<DescribeProducersRequest>(),
            name::<ListTransactionsRequest>(),
        ] {
            assert_ne!(n, "Unknown");
        }
        assert_eq!(name::<OffsetFetchRequest>(), "OffsetFetch");
        assert_eq!(name::<SyncGroupRequest>(), "SyncGroup");
    }
}
