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
//! On a cluster node the request is forwarded to the controller
//! (`handlers/forward.rs`), which checks each creation the same way
//! ([`checked`]) and writes it to the metadata log; every node applies it from
//! there.
//!
//! Deviations from Apache Kafka: a node (or the cluster) holds at most
//! `BrokerLimits::max_acls` bindings, and a binding's name, principal and host
//! at most `MAX_ACL_FIELD_BYTES` bytes each; past either, a creation is
//! `POLICY_VIOLATION` or `INVALID_REQUEST`, naming the limit. A standalone node
//! stores its ACLs in `<data_dir>/acls.meta` (in memory without a data
//! directory); failing to store them is `UNKNOWN_SERVER_ERROR`, nothing changed.

use baton_protocol::acl::{AclBinding, AclOperation};
use baton_protocol::messages::{
    AclCreation, AclCreationResult, CreateAclsRequest, CreateAclsResponse,
};
use baton_protocol::ErrorCode;

use crate::acl::{RequestContext, StoreError};
use crate::controller::records::MAX_ACL_FIELD_BYTES;
use crate::state::BrokerState;

const NO_AUTHORIZER: &str = "No Authorizer is configured.";

/// Why `ctx` may not change ACLs here, if it may not (CreateAcls and DeleteAcls):
/// no authorizer, or no Alter on the cluster.
pub(crate) fn refusal(
    state: &BrokerState,
    ctx: &RequestContext,
) -> Option<(ErrorCode, &'static str)> {
    if state.authorizer.is_none() {
        Some((ErrorCode::SecurityDisabled, NO_AUTHORIZER))
    } else if !state.allowed_on_cluster(ctx, AclOperation::Alter) {
        Some((
            ErrorCode::ClusterAuthorizationFailed,
            "Cluster authorization failed.",
        ))
    } else {
        None
    }
}

/// The response refusing every creation of `req` with `refused`.
pub(crate) fn refused(
    req: &CreateAclsRequest,
    (code, message): (ErrorCode, &str),
) -> CreateAclsResponse {
    CreateAclsResponse {
        throttle_time_ms: 0,
        results: req
            .creations
            .iter()
            .map(|_| result(code, Some(message.into())))
            .collect(),
    }
}

/// The binding `c` asks for, checked as Kafka checks a new ACL and against the
/// field length limit; a refusal is INVALID_REQUEST with the reason.
pub(crate) fn checked(c: &AclCreation) -> Result<AclBinding, AclCreationResult> {
    let binding = AclBinding::from_creation(c)
        .map_err(|e| result(ErrorCode::InvalidRequest, Some(e.to_string())))?;
    let longest = [&c.resource_name, &c.principal, &c.host]
        .iter()
        .map(|s| s.len())
        .max()
        .unwrap_or(0);
    if longest > MAX_ACL_FIELD_BYTES {
        return Err(result(
            ErrorCode::InvalidRequest,
            Some(format!(
                "an ACL's name, principal and host are limited to {MAX_ACL_FIELD_BYTES} bytes"
            )),
        ));
    }
    Ok(binding)
}

/// A creation's result.
pub(crate) fn result(code: ErrorCode, message: Option<String>) -> AclCreationResult {
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
    let authorizer = match (refusal(state, ctx), &state.authorizer) {
        (Some(refused), _) => Err(refused),
        (None, Some(a)) => Ok(a),
        (None, None) => Err((ErrorCode::SecurityDisabled, NO_AUTHORIZER)),
    };
    let results = req
        .creations
        .iter()
        .map(|c| {
            let authorizer = match authorizer {
                Ok(a) => a,
                Err((code, message)) => return result(code, Some(message.into())),
            };
            match checked(c) {
                Err(refused) => refused,
                Ok(binding) => match authorizer.add(binding) {
                    Ok(()) => result(ErrorCode::None, None),
                    Err(e @ StoreError::Full(_)) => {
                        result(ErrorCode::PolicyViolation, Some(e.to_string()))
                    }
                    Err(e @ StoreError::Persist(_)) => {
                        tracing::error!(error = %e, "CreateAcls");
                        result(ErrorCode::UnknownServerError, Some(e.to_string()))
                    }
                },
            }
        })
        .collect();
    CreateAclsResponse {
        throttle_time_ms: 0,
        results,
    }
}
