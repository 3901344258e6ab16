//! DeleteAcls (key 31), versions 1–3.
//!
//! Removes the node's ACL bindings that each filter selects (the same matching as
//! DescribeAcls) and answers, per filter in request order, the bindings it
//! removed. The requester needs Alter on the cluster (else
//! `CLUSTER_AUTHORIZATION_FAILED` for every filter); a filter with an unknown code
//! is `INVALID_REQUEST`; without an authorizer every filter is
//! `SECURITY_DISABLED`, as in Kafka.
//!
//! On a cluster node the request is forwarded to the controller, which removes
//! the bindings with metadata records.
//!
//! Deviations from Apache Kafka: none beyond CreateAcls'.

use baton_protocol::acl::{AclBinding, AclBindingFilter};
use baton_protocol::messages::{
    DeleteAclsFilter, DeleteAclsFilterResult, DeleteAclsRequest, DeleteAclsResponse,
};
use baton_protocol::ErrorCode;

use super::create_acls::refusal;
use crate::acl::{RequestContext, StoreError};
use crate::state::BrokerState;

fn failed(code: ErrorCode, message: String) -> DeleteAclsFilterResult {
    DeleteAclsFilterResult {
        error_code: code.code(),
        error_message: Some(message),
        matching_acls: Vec::new(),
    }
}

/// The response refusing every filter of `req` with `refused`.
pub(crate) fn refused(
    req: &DeleteAclsRequest,
    (code, message): (ErrorCode, &str),
) -> DeleteAclsResponse {
    DeleteAclsResponse {
        throttle_time_ms: 0,
        filter_results: req
            .filters
            .iter()
            .map(|_| failed(code, message.into()))
            .collect(),
    }
}

/// One filter's result: the bindings `remove` took out, or INVALID_REQUEST for a
/// filter with an unknown code.
pub(crate) fn filter_result(
    f: &DeleteAclsFilter,
    remove: impl FnOnce(&AclBindingFilter) -> Result<Vec<AclBinding>, StoreError>,
) -> DeleteAclsFilterResult {
    let filter = match AclBindingFilter::from_delete(f) {
        Err(e) => return failed(ErrorCode::InvalidRequest, e.to_string()),
        Ok(filter) => filter,
    };
    match remove(&filter) {
        Ok(gone) => DeleteAclsFilterResult {
            error_code: 0,
            error_message: None,
            matching_acls: gone.iter().map(|b| b.to_matching_acl()).collect(),
        },
        Err(e) => {
            tracing::error!(error = %e, "DeleteAcls");
            failed(ErrorCode::UnknownServerError, e.to_string())
        }
    }
}

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: DeleteAclsRequest,
    _version: i16,
) -> DeleteAclsResponse {
    if let Some(refusal) = refusal(state, ctx) {
        return refused(&req, refusal);
    }
    let Some(authorizer) = &state.authorizer else {
        return refused(
            &req,
            (ErrorCode::SecurityDisabled, "No Authorizer is configured."),
        );
    };
    DeleteAclsResponse {
        throttle_time_ms: 0,
        filter_results: req
            .filters
            .iter()
            .map(|f| filter_result(f, |filter| authorizer.remove_matching(filter)))
            .collect(),
    }
}
