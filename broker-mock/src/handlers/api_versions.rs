//! ApiVersions (key 18), versions 0–4.
//!
//! Lists exactly the APIs this broker handles, with the version ranges the protocol
//! crate implements. A request in a version newer than 4 is answered in v0 with
//! `UNSUPPORTED_VERSION` and the API list, so the client can retry with a version it
//! finds there (KIP-511); its header is decoded leniently (only the correlation id is
//! used).
//!
//! Deviations from Apache Kafka: no supported or finalized features are reported, and
//! the client software name and version are not validated.

use baton_protocol::messages::TxnOffsetCommitRequest;
use baton_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, DescribeTransactionsRequest, EndTxnRequest,
    ListTransactionsRequest,
};
use baton_protocol::messages::{
    AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest, SaslAuthenticateRequest,
    SaslHandshakeRequest,
};
use baton_protocol::messages::{
    ApiVersion, ApiVersionsRequest, ApiVersionsResponse, CreateTopicsRequest, DeleteTopicsRequest,
    FetchRequest, InitProducerIdRequest, ListOffsetsRequest, MetadataRequest,
    OffsetForLeaderEpochRequest, ProduceRequest,
};
use baton_protocol::messages::{ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest};
use baton_protocol::messages::{CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};
use baton_protocol::messages::{
    DeleteGroupsRequest, DescribeClusterRequest, DescribeConfigsRequest, DescribeGroupsRequest,
    FindCoordinatorRequest, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest,
    ListGroupsRequest, OffsetCommitRequest, OffsetFetchRequest, SyncGroupRequest,
};
use baton_protocol::messages::{DescribeProducersRequest, WriteTxnMarkersRequest};
use baton_protocol::{ErrorCode, Message, RequestHeader};
use bytes::Bytes;

use crate::wire::{decode, encode, DispatchError};

fn entry<M: Message>() -> ApiVersion {
    ApiVersion {
        api_key: M::API_KEY,
        min_version: M::MIN_VERSION,
        max_version: M::MAX_VERSION,
    }
}

/// An entry advertising `min..=max` of `M`, a subset of what the protocol crate
/// implements (Kafka 4.0 dropped the oldest versions of some APIs, KIP-896).
fn ranged<M: Message>(min_version: i16, max_version: i16) -> ApiVersion {
    debug_assert!(M::supports(min_version) && M::supports(max_version));
    ApiVersion {
        api_key: M::API_KEY,
        min_version,
        max_version,
    }
}

/// The APIs and versions this broker serves, by API key.
pub fn supported() -> Vec<ApiVersion> {
    vec![
        entry::<ProduceRequest>(),
        entry::<FetchRequest>(),
        entry::<ListOffsetsRequest>(),
        entry::<MetadataRequest>(),
        ranged::<OffsetCommitRequest>(2, 9),
        ranged::<OffsetFetchRequest>(1, 9),
        ranged::<FindCoordinatorRequest>(0, 5),
        entry::<JoinGroupRequest>(),
        entry::<HeartbeatRequest>(),
        entry::<LeaveGroupRequest>(),
        entry::<SyncGroupRequest>(),
        entry::<DescribeGroupsRequest>(),
        entry::<ListGroupsRequest>(),
        entry::<ApiVersionsRequest>(),
        entry::<CreateTopicsRequest>(),
        entry::<DeleteTopicsRequest>(),
        entry::<InitProducerIdRequest>(),
        entry::<OffsetForLeaderEpochRequest>(),
        entry::<WriteTxnMarkersRequest>(),
        entry::<DeleteGroupsRequest>(),
        entry::<baton_protocol::messages::OffsetDeleteRequest>(),
        entry::<DescribeConfigsRequest>(),
        entry::<DescribeClusterRequest>(),
        ranged::<SaslHandshakeRequest>(1, 1),
        entry::<SaslAuthenticateRequest>(),
        entry::<DescribeAclsRequest>(),
        entry::<CreateAclsRequest>(),
        entry::<DeleteAclsRequest>(),
        entry::<DescribeUserScramCredentialsRequest>(),
        entry::<AlterUserScramCredentialsRequest>(),
        entry::<TxnOffsetCommitRequest>(),
        entry::<DescribeProducersRequest>(),
        entry::<AddPartitionsToTxnRequest>(),
        entry::<AddOffsetsToTxnRequest>(),
        entry::<EndTxnRequest>(),
        entry::<DescribeTransactionsRequest>(),
        entry::<ListTransactionsRequest>(),
        entry::<ConsumerGroupHeartbeatRequest>(),
        entry::<ConsumerGroupDescribeRequest>(),
        entry::<baton_protocol::messages::DeleteRecordsRequest>(),
        entry::<baton_protocol::messages::ElectLeadersRequest>(),
        entry::<baton_protocol::messages::AlterPartitionReassignmentsRequest>(),
        entry::<baton_protocol::messages::ListPartitionReassignmentsRequest>(),
        entry::<baton_protocol::messages::IncrementalAlterConfigsRequest>(),
        entry::<baton_protocol::messages::CreatePartitionsRequest>(),
        entry::<baton_protocol::messages::DescribeLogDirsRequest>(),
    ]
}

pub(crate) fn handle(frame: Bytes, version: i16) -> Result<Bytes, DispatchError> {
    if !ApiVersionsRequest::supports(version) {
        let (_, _, correlation_id) = RequestHeader::peek(&frame).map_err(DispatchError::Peek)?;
        let response = ApiVersionsResponse {
            error_code: ErrorCode::UnsupportedVersion.code(),
            api_keys: supported(),
            ..Default::default()
        };
        return encode::<ApiVersionsRequest>(correlation_id, 0, &response);
    }
    let (header, _request) = decode::<ApiVersionsRequest>(frame, version)?;
    let response = ApiVersionsResponse {
        error_code: 0,
        api_keys: supported(),
        throttle_time_ms: 0,
        ..Default::default()
    };
    encode::<ApiVersionsRequest>(header.correlation_id, version, &response)
}
