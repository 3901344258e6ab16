//! ListTransactions (key 66), versions 0–1 (KIP-664; v1's duration filter is
//! KIP-994).
//!
//! Lists the transactional ids this node coordinates (the `__transaction_state`
//! partitions it leads), filtered by state names (names that are no state are
//! returned in `unknown_state_filters`), by producer ids, and (v1) to transactions
//! running for longer than the duration filter. With an authorizer, as in Kafka,
//! ids the principal may not Describe are left out.
//!
//! Deviations from Apache Kafka: none known.

use baton_protocol::acl::{AclOperation, ResourceType};
use baton_protocol::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ListedTransaction,
};

use crate::acl::RequestContext;
use crate::state::BrokerState;
use crate::txn::TxnState;

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: ListTransactionsRequest,
    _version: i16,
) -> ListTransactionsResponse {
    let mut states = Vec::new();
    let mut unknown_state_filters = Vec::new();
    for name in &req.state_filters {
        match TxnState::from_name(name) {
            Some(s) => states.push(s),
            None => unknown_state_filters.push(name.clone()),
        }
    }
    let now = state.clock.now_ms();
    let transaction_states = state
        .txn
        .list(state)
        .into_iter()
        .filter(|(_, m)| states.is_empty() || states.contains(&m.state))
        .filter(|(_, m)| {
            req.producer_id_filters.is_empty() || req.producer_id_filters.contains(&m.producer_id)
        })
        .filter(|(_, m)| {
            req.duration_filter < 0
                || (m.start_ms >= 0 && now.saturating_sub(m.start_ms) > req.duration_filter)
        })
        .filter(|(id, _)| {
            state.allowed(
                ctx,
                AclOperation::Describe,
                ResourceType::TransactionalId,
                id,
            )
        })
        .map(|(id, m)| ListedTransaction {
            transactional_id: id,
            producer_id: m.producer_id,
            transaction_state: m.state.name().to_owned(),
        })
        .collect();
    ListTransactionsResponse {
        throttle_time_ms: 0,
        error_code: 0,
        unknown_state_filters,
        transaction_states,
    }
}
