//! CreateAcls (key 30), versions 1–3.
//!
//! Adds ACL bindings to the node's authorizer. Each creation is checked as Kafka
//! checks a new ACL (a concrete resource type, operation and permission, a literal
//! or prefixed pattern, a non-empty name, a `Type:name` principal; else
//! `INVALID_REQUEST` with the reason) and answered in request order; creating a
//! binding that exists already succeeds and changes nothing. The requester needs
//! Alter on the cluster (else `CLUSTER_AUTHORIZATION_FAILED` for every creation).
//! Without an authorizer every creation is `SECURITY_DISABLED`, as in Kafka.
//!
//! Deviations from Apache Kafka: a node holds at most `BrokerLimits::max_acls`
//! bindings; creations past it are `POLICY_VIOLATION`, naming the limit. ACLs are
//! kept in memory (Kafka keeps them in its metadata log), and a cluster node
//! has no authorizer.

use baton_protocol::acl::{AclBinding, AclOperation};
use baton_protocol::messages::{AclCreationResult, CreateAclsRequest, CreateAclsResponse};
use baton_protocol::ErrorCode;

use crate::acl::RequestContext;
use crate::state::BrokerState;

fn result(code: ErrorCode, message: Option<String>) -> AclCreationResult {
    AclCreationResult {
        error_code: code.code(),
        error_message: message,
    }
}

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: CreateAclsRequest,
    _version: i16,
) -> CreateAclsResponse {
    let authorizer = match &state.authorizer {
        None => Err((ErrorCode::SecurityDisabled, "No Authorizer is configured.")),
        Some(_) if !state.allowed_on_cluster(ctx, AclOperation::Alter) => Err((
            ErrorCode::ClusterAuthorizationFailed,
            "Cluster authorization failed.",
        )),
        Some(a) => Ok(a),
    };
    let results = req
        .creations
        .iter()
        .map(|c| {
            let authorizer = match authorizer {
                Ok(a) => a,
                Err((code, message)) => return result(code, Some(message.into())),
            };
            match AclBinding::from_creation(c) {
                Err(e) => result(ErrorCode::InvalidRequest, Some(e.to_string())),
                Ok(binding) => match authorizer.add(binding) {
                    Ok(()) => result(ErrorCode::None, None),
                    Err(e) => result(ErrorCode::PolicyViolation, Some(e.to_string())),
                },
            }
        })
        .collect();
    CreateAclsResponse {
        throttle_time_ms: 0,
        results,
    }
}
