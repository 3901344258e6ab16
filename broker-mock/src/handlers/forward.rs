//! CreateTopics and DeleteTopics on a cluster node: forwarded to the controller (as
//! KRaft brokers forward them), then answered once this node's metadata image shows
//! the outcome, so that a client that asks this node for metadata next sees it.

use std::sync::Arc;
use std::time::Duration;

use baton_protocol::messages::{CreateTopicsRequest, DeleteTopicsRequest};
use baton_protocol::{Request, RequestHeader};
use bytes::Bytes;

use crate::node_mode::ClusterLink;
use crate::state::BrokerState;
use crate::wire::{decode, encode, DispatchError, Reply};

/// Longest wait for the local image to show a forwarded change.
const APPLY_WAIT: Duration = Duration::from_secs(15);

async fn wait_until(state: &Arc<BrokerState>, done: impl Fn(&BrokerState) -> bool) {
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

/// Decodes `frame` as an `R` and sends it to the controller in this node's name;
/// gives back the link, the request's header and the controller's response.
async fn to_controller<R: Request + Sync>(
    state: &Arc<BrokerState>,
    frame: Bytes,
    version: i16,
    api: &'static str,
) -> Result<(Arc<ClusterLink>, RequestHeader, R, R::Response), DispatchError> {
    let Some(link) = state.mode.replica().cloned() else {
        return Err(DispatchError::NotAClusterNode);
    };
    let (header, req) = decode::<R>(frame, version)?;
    let mut rpc = link.rpc(
        link.options.controller,
        format!("node-{}-admin", link.node_id),
    );
    let resp = rpc
        .call(&req, version, Duration::from_secs(30))
        .await
        .map_err(|source| DispatchError::Forward { api, source })?;
    Ok((link, header, req, resp))
}

pub(crate) async fn create_topics(
    state: &Arc<BrokerState>,
    frame: Bytes,
    version: i16,
) -> Result<Reply, DispatchError> {
    let (link, header, req, resp) =
        to_controller::<CreateTopicsRequest>(state, frame, version, "CreateTopics").await?;
    let created: Vec<String> = resp
        .topics
        .iter()
        .filter(|t| t.error_code == 0 && !req.validate_only)
        .map(|t| t.name.clone())
        .collect();
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
    Ok(Reply::Now(Some(encode::<CreateTopicsRequest>(
        header.correlation_id,
        version,
        &resp,
    )?)))
}

pub(crate) async fn delete_topics(
    state: &Arc<BrokerState>,
    frame: Bytes,
    version: i16,
) -> Result<Reply, DispatchError> {
    let (link, header, _req, resp) =
        to_controller::<DeleteTopicsRequest>(state, frame, version, "DeleteTopics").await?;
    let deleted: Vec<String> = resp
        .responses
        .iter()
        .filter(|t| t.error_code == 0)
        .filter_map(|t| t.name.clone())
        .collect();
    wait_until(state, |s| {
        deleted
            .iter()
            .all(|n| s.topic(n).is_none() && link.image().topic_by_name(n).is_none())
    })
    .await;
    Ok(Reply::Now(Some(encode::<DeleteTopicsRequest>(
        header.correlation_id,
        version,
        &resp,
    )?)))
}
