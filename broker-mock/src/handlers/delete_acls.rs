//! DeleteAcls (key 31), versions 1–3.
//!
//! Removes the node's ACL bindings that each filter selects (the same matching as
//! DescribeAcls) and answers, per filter in request order, the bindings it
//! removed. The requester needs Alter on the cluster (else
//! `CLUSTER_AUTHORIZATION_FAILED` for every filter); a filter with an unknown code
//! is `INVALID_REQUEST`; without an authorizer every filter is
//! `SECURITY_DISABLED`, as in Kafka.
//!
//! Deviations from Apache Kafka: none beyond CreateAcls' (memory only, no
//! authorizer on a cluster node).

use baton_protocol::acl::{AclBindingFilter, AclOperation};
use baton_protocol::messages::{DeleteAclsFilterResult, DeleteAclsRequest, DeleteAclsResponse};
use baton_protocol::ErrorCode;

use crate::acl::RequestContext;
use crate::state::BrokerState;

fn failed(code: ErrorCode, message: String) -> DeleteAclsFilterResult {
    DeleteAclsFilterResult {
        error_code: code.code(),
        error_message: Some(message),
        matching_acls: Vec::new(),
    }
}

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: DeleteAclsRequest,
    _version: i16,
) -> DeleteAclsResponse {
    let allowed = state.allowed_on_cluster(ctx, AclOperation::Alter);
    let filter_results = req
        .filters
        .iter()
        .map(|f| {
            let Some(authorizer) = &state.authorizer else {
                return failed(
                    ErrorCode::SecurityDisabled,
                    "No Authorizer is configured.".into(),
                );
            };
            if !allowed {
                return failed(
                    ErrorCode::ClusterAuthorizationFailed,
                    "Cluster authorization failed.".into(),
                );
            }
            match AclBindingFilter::from_delete(f) {
                Err(e) => failed(ErrorCode::InvalidRequest, e.to_string()),
                Ok(filter) => DeleteAclsFilterResult {
                    error_code: 0,
                    error_message: None,
                    matching_acls: authorizer
                        .remove_matching(&filter)
                        .iter()
                        .map(|b| b.to_matching_acl())
                        .collect(),
                },
            }
        })
        .collect();
    DeleteAclsResponse {
        throttle_time_ms: 0,
        filter_results,
    }
}
