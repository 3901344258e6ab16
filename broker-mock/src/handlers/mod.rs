//! Request dispatch and one handler per API key.
//!
//! `dispatch` peeks a frame's API key and version, decodes the request header and
//! body with the version's header format, runs the handler (off the async threads:
//! handlers touch files), and encodes the response with its header. Anything that
//! cannot be decoded or is not supported is an `Err` with a reason, which closes the
//! connection (the server logs it at warn with the peer; an unknown API key or an
//! unsupported version names the client id too). ApiVersions is the exception: a
//! too-new version is answered (KIP-511). Every UNSUPPORTED_VERSION answer is
//! logged at warn with the API key, version, client id and peer.
//! SaslHandshake and SaslAuthenticate never reach `dispatch`: the connection's
//! authentication gate (`security::gate`) answers them with their handlers here.

pub(crate) mod add_offsets_to_txn;
pub(crate) mod add_partitions_to_txn;
mod alter_partition_reassignments;
pub(crate) mod alter_user_scram_credentials;
pub mod api_versions;
pub(crate) mod consumer_group_describe;
pub(crate) mod consumer_group_heartbeat;
pub(crate) mod create_acls;
pub(crate) mod create_partitions;
pub(crate) mod create_topics;
pub(crate) mod delete_acls;
pub mod delete_groups;
pub mod delete_records;
pub(crate) mod delete_topics;
mod describe_acls;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub(crate) mod describe_log_dirs;
pub(crate) mod describe_producers;
pub(crate) mod describe_transactions;
pub(crate) mod describe_user_scram_credentials;
mod elect_leaders;
pub(crate) mod end_txn;
pub mod fetch;
pub mod find_coordinator;
mod forward;
pub mod heartbeat;
pub(crate) mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
mod list_partition_reassignments;
pub(crate) mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub(crate) mod sasl_authenticate;
pub(crate) mod sasl_handshake;
pub mod sync_group;
mod topic_defaults;
pub(crate) mod txn_offset_commit;
pub(crate) mod write_txn_markers;

use std::sync::Arc;
use std::time::Duration;

use baton_protocol::messages::TxnOffsetCommitRequest;
use baton_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, DescribeTransactionsRequest, EndTxnRequest,
    ListTransactionsRequest,
};
use baton_protocol::messages::{
    AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest,
};
use baton_protocol::messages::{
    ApiVersionsRequest, CreateTopicsRequest, DeleteTopicsRequest, FetchRequest,
    InitProducerIdRequest, ListOffsetsRequest, MetadataRequest, OffsetForLeaderEpochRequest,
    ProduceRequest, ProduceResponse,
};
use baton_protocol::messages::{ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest};
use baton_protocol::messages::{CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};
use baton_protocol::messages::{
    DeleteGroupsRequest, DescribeClusterRequest, DescribeConfigsRequest, DescribeGroupsRequest,
    FindCoordinatorRequest, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest,
    ListGroupsRequest, OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest,
    SyncGroupRequest,
};
use baton_protocol::messages::{DescribeProducersRequest, WriteTxnMarkersRequest};
use baton_protocol::{Message, Request, RequestHeader};
use bytes::Bytes;
use tokio::sync::watch;

use crate::acl::RequestContext;
use crate::metrics::errors::encode_counted;
use crate::state::BrokerState;
use crate::wire::{decode, encode, ClientId, DispatchError, Reply};

/// Decodes, runs `handler` on the blocking pool, and encodes its response (`None`
/// means the request gets no response).
async fn run<R, F>(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    frame: Bytes,
    version: i16,
    handler: F,
) -> Result<Reply, DispatchError>
where
    R: Request + Send + 'static,
    R::Response: Send + 'static,
    F: FnOnce(&BrokerState, &RequestContext, R, i16) -> Option<R::Response> + Send + 'static,
{
    let (header, request) = decode::<R>(frame, version)?;
    let st = state.clone();
    let ctx = ctx.clone();
    let response = baton_env::spawn_blocking(move || handler(&st, &ctx, request, version))
        .await
        .map_err(|source| DispatchError::Handler {
            api_key: R::API_KEY,
            source,
        })?;
    match response {
        None => Ok(Reply::Now(None)),
        Some(r) => Ok(Reply::Now(Some(encode_counted::<R>(
            &state.metrics,
            header.correlation_id,
            version,
            &r,
        )?))),
    }
}

/// ConsumerGroupHeartbeat: like [`run`], with the header's client id for the
/// member's description.
async fn consumer_group_heartbeat_request(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    frame: Bytes,
    version: i16,
) -> Result<Reply, DispatchError> {
    let (header, request) = decode::<ConsumerGroupHeartbeatRequest>(frame, version)?;
    let st = state.clone();
    let ctx = ctx.clone();
    let client_id = header.client_id.clone().unwrap_or_default();
    let response = baton_env::spawn_blocking(move || {
        consumer_group_heartbeat::handle(&st, &ctx, request, version, client_id)
    })
    .await
    .map_err(|source| DispatchError::Handler {
        api_key: ConsumerGroupHeartbeatRequest::API_KEY,
        source,
    })?;
    Ok(Reply::Now(Some(encode::<ConsumerGroupHeartbeatRequest>(
        header.correlation_id,
        version,
        &response,
    )?)))
}

/// OffsetCommit: stores the commits on the blocking pool, then waits for their
/// replication as a task (no thread parked while a follower catches up).
async fn offset_commit_request(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    frame: Bytes,
    version: i16,
) -> Result<Reply, DispatchError> {
    let (header, request) = decode::<OffsetCommitRequest>(frame, version)?;
    let st = state.clone();
    let ctx = ctx.clone();
    let (response, wait) =
        baton_env::spawn_blocking(move || offset_commit::handle(&st, &ctx, request, version))
            .await
            .map_err(|source| DispatchError::Handler {
                api_key: OffsetCommitRequest::API_KEY,
                source,
            })?;
    let response = offset_commit::finish(response, wait).await;
    Ok(Reply::Now(Some(encode_counted::<OffsetCommitRequest>(
        &state.metrics,
        header.correlation_id,
        version,
        &response,
    )?)))
}

/// Longest a produce waits for the local roles to catch up with a new image.
const RECONCILE_WAIT: Duration = Duration::from_millis(200);
/// Longest a refusal from a leader handing over waits for the successor's name.
const MAX_HANDOVER_WAIT_MS: i32 = 5_000;

/// The partitions of `response` refused with NOT_LEADER_OR_FOLLOWER because this
/// node is handing their leadership over in a planned move.
fn handing_over(state: &BrokerState, response: &ProduceResponse) -> Vec<(String, i32)> {
    let Some(link) = state.mode.replica() else {
        return Vec::new();
    };
    let refused = baton_protocol::ErrorCode::NotLeaderOrFollower.code();
    response
        .responses
        .iter()
        .flat_map(|t| {
            t.partition_responses
                .iter()
                .filter(|p| p.error_code == refused && link.handing_over(&t.name, p.index))
                .map(|p| (t.name.clone(), p.index))
        })
        .collect()
}

/// Produce: appends on the blocking pool; `acks=all` partitions in a cluster answer
/// later, when the high watermark covers them. A partition refused because this
/// node is handing its leadership over in a planned move is answered once the
/// successor is in this node's metadata, so the refusal names it (KIP-951) and the
/// client retries there at once; Apache Kafka's leader learns its successor before
/// it refuses writes, so its refusals always can.
async fn produce_request(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    listener: usize,
    frame: Bytes,
    version: i16,
) -> Result<Reply, DispatchError> {
    let (header, request) = decode::<ProduceRequest>(frame.clone(), version)?;
    let timeout_ms = request.timeout_ms;
    if let Some(link) = state.mode.replica().filter(|l| l.reconcile_pending()) {
        // The image just changed (perhaps making this node leader): take the
        // request with the roles it gives.
        link.await_reconciled(RECONCILE_WAIT).await;
    }
    // KIP-890: batches opening a transaction here must be in it at the coordinator.
    let refused = crate::txn::verify::verify(state, &request, version).await;
    let st = state.clone();
    let ctx = ctx.clone();
    let (response, waits) = baton_env::spawn_blocking(move || {
        produce::handle(&st, &ctx, request, frame, version, &refused)
    })
    .await
    .map_err(DispatchError::ProduceHandler)?;
    let Some(mut response) = response else {
        return Ok(Reply::Now(None));
    };
    let handing_over = handing_over(state, &response);
    if waits.is_empty() && handing_over.is_empty() {
        produce::add_leader_hints(state, &mut response, version, listener);
        return Ok(Reply::Now(Some(encode_counted::<ProduceRequest>(
            &state.metrics,
            header.correlation_id,
            version,
            &response,
        )?)));
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    let st = state.clone();
    tokio::spawn(async move {
        let mut response = produce::finish(response, waits, timeout_ms).await;
        if let Some(link) = st.mode.replica().filter(|_| !handing_over.is_empty()) {
            // Answer once the successor is known, so the refusal can name it.
            let max = Duration::from_millis(timeout_ms.clamp(0, MAX_HANDOVER_WAIT_MS) as u64);
            link.await_handover(&handing_over, max).await;
        }
        produce::add_leader_hints(&st, &mut response, version, listener);
        let bytes = encode_counted::<ProduceRequest>(
            &st.metrics,
            header.correlation_id,
            version,
            &response,
        )
        .map_err(|e| tracing::error!(error = %e, "encoding produce response failed"))
        .ok();
        let _ = tx.send(bytes);
    });
    Ok(Reply::Later(rx))
}

/// Logs a request answered with UNSUPPORTED_VERSION (a closed connection is logged
/// by the server with the [`DispatchError`]), so an operator sees what a client
/// asked for and was refused.
fn log_unsupported(
    ctx: &RequestContext,
    api_key: i16,
    version: i16,
    client_id: &ClientId,
    what: &str,
) {
    tracing::warn!(
        api_key,
        version,
        %client_id,
        peer = %ctx.host,
        principal = %ctx.principal,
        "answering UNSUPPORTED_VERSION: {what}"
    );
}

/// Handles one request frame; `Err` closes the connection with the given reason.
/// `listener` is the index of the listener the request arrived on (in
/// `BrokerState::listeners`): Metadata, FindCoordinator and DescribeCluster answer
/// with that listener's endpoints.
pub(crate) async fn dispatch(
    state: &Arc<BrokerState>,
    listener: usize,
    frame: Bytes,
    ctx: &RequestContext,
    stop: &watch::Receiver<bool>,
) -> Result<Reply, DispatchError> {
    let (api_key, version, _) = RequestHeader::peek(&frame).map_err(DispatchError::Peek)?;
    match api_key {
        ApiVersionsRequest::API_KEY => {
            if !ApiVersionsRequest::supports(version) {
                let client_id = ClientId::peek(&frame);
                let why = "a newer version than this broker's; the v0 answer lists its versions";
                log_unsupported(ctx, api_key, version, &client_id, why);
            }
            api_versions::handle(frame, version).map(|b| Reply::Now(Some(b)))
        }
        MetadataRequest::API_KEY => {
            run::<MetadataRequest, _>(state, ctx, frame, version, move |s, c, r, v| {
                Some(metadata::handle(s, c, r, v, listener))
            })
            .await
        }
        ProduceRequest::API_KEY => produce_request(state, ctx, listener, frame, version).await,
        baton_protocol::messages::DeleteRecordsRequest::API_KEY => {
            delete_records::request(state, ctx, frame, version).await
        }
        baton_protocol::messages::ElectLeadersRequest::API_KEY => {
            elect_leaders::request(state, ctx, frame, version).await
        }
        baton_protocol::messages::AlterPartitionReassignmentsRequest::API_KEY => {
            alter_partition_reassignments::request(state, ctx, frame, version).await
        }
        baton_protocol::messages::ListPartitionReassignmentsRequest::API_KEY => {
            run::<baton_protocol::messages::ListPartitionReassignmentsRequest, _>(
                state,
                ctx,
                frame,
                version,
                |s, c, r, v| Some(list_partition_reassignments::handle(s, c, r, v)),
            )
            .await
        }
        FetchRequest::API_KEY => {
            let (header, request) = decode::<FetchRequest>(frame, version)?;
            Ok(fetch::start(
                state.clone(),
                ctx,
                request,
                version,
                header.correlation_id,
                stop.clone(),
            ))
        }
        ListOffsetsRequest::API_KEY => {
            run::<ListOffsetsRequest, _>(state, ctx, frame, version, |s, c, r, v| {
                Some(list_offsets::handle(s, c, r, v))
            })
            .await
        }
        OffsetForLeaderEpochRequest::API_KEY => {
            run::<OffsetForLeaderEpochRequest, _>(state, ctx, frame, version, |s, c, r, v| {
                Some(offset_for_leader_epoch::handle(s, c, r, v))
            })
            .await
        }
        CreateTopicsRequest::API_KEY if state.mode.is_replica() => {
            forward::create_topics(state, ctx, frame, version).await
        }
        DeleteTopicsRequest::API_KEY if state.mode.is_replica() => {
            forward::delete_topics(state, ctx, frame, version).await
        }
        CreateTopicsRequest::API_KEY => {
            run::<CreateTopicsRequest, _>(state, ctx, frame, version, |s, c, r, v| {
                Some(create_topics::handle(s, c, r, v))
            })
            .await
        }
        DeleteTopicsRequest::API_KEY => {
            run::<DeleteTopicsRequest, _>(state, ctx, frame, version, |s, c, r, v| {
                Some(delete_topics::handle(s, c, r, v))
            })
            .await
        }
        InitProducerIdRequest::API_KEY => {
            run::<InitProducerIdRequest, _>(state, ctx, frame, version, |s, c, r, v| {
                Some(init_producer_id::handle(s, c, r, v))
            })
            .await
        }
        FindCoordinatorRequest::API_KEY => {
            run::<FindCoordinatorRequest, _>(state, ctx, frame, version, move |s, c, r, v| {
                Some(find_coordinator::handle(s, c, r, v, listener))
            })
            .await
        }
        JoinGroupRequest::API_KEY => join_group::start(state.clone(), ctx, frame, version, stop),
        SyncGroupRequest::API_KEY => sync_group::start(state.clone(), ctx, frame, version, stop),
        ConsumerGroupHeartbeatRequest::API_KEY => {
            state.groups.ensure_driver(state, stop);
            consumer_group_heartbeat_request(state, ctx, frame, version).await
        }
        ConsumerGroupDescribeRequest::API_KEY => {
            run::<ConsumerGroupDescribeRequest, _>(state, ctx, frame, version, |s, c, r, v| {
                Some(consumer_group_describe::handle(s, c, r, v))
            })
            .await
        }
        HeartbeatRequest::API_KEY => {
            run::<HeartbeatRequest, _>(state, ctx, frame, version, |s, c, r, v| {
                Some(heartbeat::handle(s, c, r, v))
            })
            .await
        }
        LeaveGroupRequest::API_KEY => {
            run::<LeaveGroupRequest, _>(state, ctx, frame, version, |s, c, r, v| {
                Some(leave_group::handle(s, c, r, v))
            })
            .await
        }
        OffsetCommitRequest::API_KEY => offset_commit_request(state, ctx, frame, version).await,
        TxnOffsetCommitRequest::API_KEY => {
            run::<TxnOffsetCommitRequest, _>(state, ctx, frame, version, |s, c, r, v| {
                Some(txn_offset_commit::handle(s, c, r, v))
            })
            .await
        }
        OffsetFetchRequest::API_KEY => {
            run::<OffsetFetchRequest, _>(state, ctx, frame, version, |s, c, r, v| {
                Some(offset_fetch::handle(s, c, r, v))
            })
            .await
        }
        DescribeGroupsRequest::API_KEY => {
            run::<DescribeGroupsRequest, _>(state, ctx, frame, version, |s, c, r, v| {
                Some(describe_groups::handle(s, c, r, v))
            })
            .await
        }
        ListGroupsRequest::API_KEY => {
            run::<ListGroupsRequest, _>(state, ctx, frame, version, |s, c, r, v| {
                Some(list_groups::handle(s, c, r, v))
            })
            .await
        }
        DeleteGroupsRequest::API_KEY => {
            run::<DeleteGroupsRequest, _>(state, ctx, frame, version, |s, c, r, v| {
                Some(delete_groups::handle(s, c, r, v))
            })
            .await
        }
        OffsetDeleteRequest::API_KEY => {
            run::<OffsetDeleteRequest, _>(state, ctx, frame, version, |s, c, r, v| {
                Some(offset_delete::handle(s, c, r, v))
            })
            .await
        }
        DescribeConfigsRequest::API_KEY => {
            run::<DescribeConfigsRequest, _>(state, ctx, frame, version, |s, c, r, v| {
                Some(describe_configs::handle(s, c, r, v))
            })
            .await
        }
        baton_protocol::messages::IncrementalAlterConfigsRequest::API_KEY
            if state.mode.is_replica() =>
        {
            forward::incremental_alter_configs(state, ctx, frame, version).await
        }
        baton_protocol::messages::IncrementalAlterConfigsRequest::API_KEY => {
            run::<baton_protocol::messages::IncrementalAlterConfigsRequest, _>(
                state,
                ctx,
                frame,
                version,
                |s, c, r, v| Some(incremental_alter_configs::handle(s, c, r, v)),
            )
            .await
        }
        baton_protocol::messages::CreatePartitionsRequest::API_KEY if state.mode.is_replica() => {
            forward::create_partitions(state, ctx, frame, version).await
        }
        baton_protocol::messages::CreatePartitionsRequest::API_KEY => {
            run::<baton_protocol::messages::CreatePartitionsRequest, _>(
                state,
                ctx,
                frame,
                version,
                |s, c, r, v| Some(create_partitions::handle(s, c, r, v)),
            )
            .await
        }
        baton_protocol::messages::DescribeLogDirsRequest::API_KEY => {
            run::<baton_protocol::messages::DescribeLogDirsRequest, _>(
                state,
                ctx,
                frame,
                version,
                |s, c, r, v| Some(describe_log_dirs::handle(s, c, r, v)),
            )
            .await
        }
        DescribeClusterRequest::API_KEY => {
            run::<DescribeClusterRequest, _>(state, ctx, frame, version, move |s, c, r, v| {
                Some(describe_cluster::handle(s, c, r, v, listener))
            })
            .await
        }
        DescribeAclsRequest::API_KEY => {
            run::<DescribeAclsRequest, _>(state, ctx, frame, version, |s, c, r, v| {
                Some(describe_acls::handle(s, c, r, v))
            })
            .await
        }
        CreateAclsRequest::API_KEY if state.mode.is_replica() => {
            forward::create_acls(state, ctx, frame, version).await
        }
        DeleteAclsRequest::API_KEY if state.mode.is_replica() => {
            forward::delete_acls(state, ctx, frame, version).await
        }
        CreateAclsRequest::API_KEY => {
            run::<CreateAclsRequest, _>(state, ctx, frame, version, |s, c, r, v| {
                Some(create_acls::handle(s, c, r, v))
            })
            .await
        }
        DeleteAclsRequest::API_KEY => {
            run::<DeleteAclsRequest, _>(state, ctx, frame, version, |s, c, r, v| {
                Some(delete_acls::handle(s, c, r, v))
            })
            .await
        }
        DescribeUserScramCredentialsRequest::API_KEY => {
            run::<DescribeUserScramCredentialsRequest, _>(
                state,
                ctx,
                frame,
                version,
                |s, c, r, v| Some(describe_user_scram_credentials::handle(s, c, r, v)),
            )
            .await
        }
        AlterUserScramCredentialsRequest::API_KEY if state.mode.is_replica() => {
            forward::alter_user_scram_credentials(state, ctx, frame, version).await
        }
        AlterUserScramCredentialsRequest::API_KEY => {
            run::<AlterUserScramCredentialsRequest, _>(state, ctx, frame, version, |s, c, r, v| {
                Some(alter_user_scram_credentials::handle(s, c, r, v))
            })
            .await
        }
        WriteTxnMarkersRequest::API_KEY => {
            let (header, request) = decode::<WriteTxnMarkersRequest>(frame, version)?;
            Ok(write_txn_markers::start(
                state.clone(),
                ctx,
                request,
                version,
                header.correlation_id,
            ))
        }
        DescribeProducersRequest::API_KEY => {
            run::<DescribeProducersRequest, _>(state, ctx, frame, version, |s, c, r, v| {
                Some(describe_producers::handle(s, c, r, v))
            })
            .await
        }
        AddPartitionsToTxnRequest::API_KEY => {
            run::<AddPartitionsToTxnRequest, _>(state, ctx, frame, version, |s, c, r, v| {
                Some(add_partitions_to_txn::handle(s, c, r, v))
            })
            .await
        }
        AddOffsetsToTxnRequest::API_KEY => {
            run::<AddOffsetsToTxnRequest, _>(state, ctx, frame, version, |s, c, r, v| {
                Some(add_offsets_to_txn::handle(s, c, r, v))
            })
            .await
        }
        EndTxnRequest::API_KEY => {
            run::<EndTxnRequest, _>(state, ctx, frame, version, |s, c, r, v| {
                Some(end_txn::handle(s, c, r, v))
            })
            .await
        }
        DescribeTransactionsRequest::API_KEY => {
            run::<DescribeTransactionsRequest, _>(state, ctx, frame, version, |s, c, r, v| {
                Some(describe_transactions::handle(s, c, r, v))
            })
            .await
        }
        ListTransactionsRequest::API_KEY => {
            run::<ListTransactionsRequest, _>(state, ctx, frame, version, |s, c, r, v| {
                Some(list_transactions::handle(s, c, r, v))
            })
            .await
        }
        api_key => Err(DispatchError::UnknownApiKey {
            api_key,
            version,
            client_id: ClientId::peek(&frame),
        }),
    }
}
