//! ListGroups (key 16), versions 0–5.
//!
//! Every group this node coordinates, with its protocol type, state (v4+) and type
//! (v5+, always `classic`), filtered by the request's states (v4+, matched without
//! regard to case) and types (v5+).
//!
//! Deviations from Apache Kafka: none known (there are no KIP-848 `consumer` groups
//! to list).

use baton_protocol::messages::{ListGroupsRequest, ListGroupsResponse};

use crate::state::BrokerState;

pub(crate) fn handle(
    state: &BrokerState,
    req: ListGroupsRequest,
    _version: i16,
) -> ListGroupsResponse {
    ListGroupsResponse {
        throttle_time_ms: 0,
        error_code: 0,
        groups: state
            .groups
            .list(state, &req.states_filter, &req.types_filter),
    }
}
