//! FindCoordinator (key 10), versions 0–6 (advertised 0–5).
//!
//! Group keys (key type 0) and transactional ids (key type 1) are answered with this
//! node; v4+ answers every key of the batch. Share-group keys (type 2, v6) and
//! unknown types are INVALID_REQUEST.
//!
//! Deviations from Apache Kafka: a single node coordinates everything, so the
//! answer never depends on the key and there is no COORDINATOR_NOT_AVAILABLE while
//! `__consumer_offsets` is created (it is created on the first commit instead).
//! In a cluster, [`coordinator_for`] must name the leader of the key's
//! `__consumer_offsets` partition (`group::records::partition_for`).

use baton_protocol::messages::{Coordinator, FindCoordinatorRequest, FindCoordinatorResponse};
use baton_protocol::ErrorCode;

use crate::state::BrokerState;

/// The coordinator node for `key`: node id, host and port.
///
/// Cluster hook: look up the leader of the key's `__consumer_offsets` partition (or
/// the transaction log's) and answer COORDINATOR_NOT_AVAILABLE when it has none.
fn coordinator_for(
    state: &BrokerState,
    key_type: i8,
    _key: &str,
) -> Result<(i32, String, i32), ErrorCode> {
    match key_type {
        0 | 1 => Ok((
            state.config.node_id,
            state.advertised_host.clone(),
            state.advertised_port,
        )),
        _ => Err(ErrorCode::InvalidRequest),
    }
}

pub(crate) fn handle(
    state: &BrokerState,
    req: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    if version >= 4 {
        let coordinators = req
            .coordinator_keys
            .iter()
            .map(|key| match coordinator_for(state, req.key_type, key) {
                Ok((node_id, host, port)) => Coordinator {
                    key: key.clone(),
                    node_id,
                    host,
                    port,
                    error_code: 0,
                    error_message: None,
                },
                Err(code) => Coordinator {
                    key: key.clone(),
                    node_id: -1,
                    host: String::new(),
                    port: -1,
                    error_code: code.code(),
                    error_message: Some(format!(
                        "cannot find a coordinator for key type {}",
                        req.key_type
                    )),
                },
            })
            .collect();
        return FindCoordinatorResponse {
            coordinators,
            ..Default::default()
        };
    }
    match coordinator_for(state, req.key_type, &req.key) {
        Ok((node_id, host, port)) => FindCoordinatorResponse {
            error_code: 0,
            node_id,
            host,
            port,
            ..Default::default()
        },
        Err(code) => FindCoordinatorResponse {
            error_code: code.code(),
            error_message: Some(format!(
                "cannot find a coordinator for key type {}",
                req.key_type
            )),
            node_id: -1,
            port: -1,
            ..Default::default()
        },
    }
}
