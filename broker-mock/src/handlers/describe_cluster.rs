//! DescribeCluster (key 60), versions 0–1.
//!
//! The cluster id, the controller id and the brokers, as Metadata reports them: on a
//! single node the node itself (its own controller), on a cluster node every
//! unfenced broker of the metadata image and this node as the controller id (the
//! same id Metadata gives, since clients cannot reach the controller's own
//! listener). Endpoint type 2 (controllers, KIP-919) is
//! `UNSUPPORTED_ENDPOINT_TYPE`, as Kafka answers it on a broker listener.
//!
//! With an authorizer, Describe on the cluster is needed (else
//! `CLUSTER_AUTHORIZATION_FAILED`), as in Kafka.
//!
//! Each broker's rack (`broker.rack`) is reported.
//!
//! Deviations from Apache Kafka: the cluster's authorized operations are never
//! reported.

use baton_protocol::messages::{
    DescribeClusterBroker, DescribeClusterRequest, DescribeClusterResponse,
};
use baton_protocol::ErrorCode;

use baton_protocol::acl::AclOperation;

use crate::acl::RequestContext;
use crate::state::BrokerState;

/// `endpoint_type` of brokers.
const BROKERS: i8 = 1;

fn brokers(state: &BrokerState, listener: usize) -> Vec<DescribeClusterBroker> {
    match state.mode.replica() {
        Some(link) => link
            .image()
            .brokers()
            .filter(|b| !b.fenced)
            .filter_map(|b| {
                let (host, port) = b.endpoint(state.listener_name(listener))?;
                Some(DescribeClusterBroker {
                    broker_id: b.broker_id,
                    host: host.to_owned(),
                    port: i32::from(port),
                    rack: b.rack.clone(),
                })
            })
            .collect(),
        None => vec![DescribeClusterBroker {
            broker_id: state.config.node_id,
            host: state.endpoint(listener).host.clone(),
            port: state.endpoint(listener).port,
            rack: state.config.rack.clone(),
        }],
    }
}

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: DescribeClusterRequest,
    _version: i16,
    listener: usize,
) -> DescribeClusterResponse {
    let cluster_id = match state.mode.replica() {
        Some(link) => link.options.cluster_id.clone(),
        None => state.cluster_id.clone(),
    };
    let mut response = DescribeClusterResponse {
        endpoint_type: req.endpoint_type,
        cluster_id,
        controller_id: state.config.node_id,
        ..Default::default()
    };
    if !state.allowed_on_cluster(ctx, AclOperation::Describe) {
        response.error_code = ErrorCode::ClusterAuthorizationFailed.code();
        response.error_message = Some("Cluster authorization failed.".into());
        return response;
    }
    if req.endpoint_type != BROKERS {
        response.error_code = ErrorCode::UnsupportedEndpointType.code();
        response.error_message = Some(format!(
            "endpoint type {} is not supported by a broker listener",
            req.endpoint_type
        ));
        return response;
    }
    response.brokers = brokers(state, listener);
    response
}
