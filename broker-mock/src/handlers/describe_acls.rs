//! DescribeAcls (key 29), versions 1–3.
//!
//! Lists the node's ACL bindings that the filter selects (Kafka's
//! `AclBindingFilter.matches`: a `MATCH` pattern filter with a name selects every
//! pattern that covers that name), grouped by resource pattern. The requester
//! needs Describe on the cluster (else `CLUSTER_AUTHORIZATION_FAILED`); a filter
//! with an unknown code is `INVALID_REQUEST`; without an authorizer the answer is
//! `SECURITY_DISABLED`, as in Kafka.
//!
//! A cluster node answers from its metadata image's ACLs.
//!
//! Deviations from Apache Kafka: none beyond CreateAcls'.

use baton_protocol::acl::{AclBindingFilter, AclOperation};
use baton_protocol::messages::{DescribeAclsRequest, DescribeAclsResource, DescribeAclsResponse};
use baton_protocol::ErrorCode;

use crate::acl::RequestContext;
use crate::state::BrokerState;

fn failed(code: ErrorCode, message: String) -> DescribeAclsResponse {
    DescribeAclsResponse {
        error_code: code.code(),
        error_message: Some(message),
        ..Default::default()
    }
}

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: DescribeAclsRequest,
    _version: i16,
) -> DescribeAclsResponse {
    if state.authorizer.is_none() {
        return failed(
            ErrorCode::SecurityDisabled,
            "No Authorizer is configured.".into(),
        );
    }
    if !state.allowed_on_cluster(ctx, AclOperation::Describe) {
        return failed(
            ErrorCode::ClusterAuthorizationFailed,
            "Cluster authorization failed.".into(),
        );
    }
    let filter = match AclBindingFilter::from_describe(&req) {
        Ok(f) => f,
        Err(e) => return failed(ErrorCode::InvalidRequest, e.to_string()),
    };
    let mut resources: Vec<DescribeAclsResource> = Vec::new();
    // The bindings come sorted by pattern, so each pattern's ACLs are adjacent.
    for b in state.describe_acls(&filter) {
        let p = &b.pattern;
        let same = resources.last().is_some_and(|r| {
            r.resource_type == p.resource_type.code()
                && r.resource_name == p.name
                && r.pattern_type == p.pattern_type.code()
        });
        if !same {
            resources.push(DescribeAclsResource {
                resource_type: p.resource_type.code(),
                resource_name: p.name.clone(),
                pattern_type: p.pattern_type.code(),
                acls: Vec::new(),
            });
        }
        if let Some(r) = resources.last_mut() {
            r.acls.push(b.to_description());
        }
    }
    DescribeAclsResponse {
        throttle_time_ms: 0,
        error_code: 0,
        error_message: None,
        resources,
    }
}
