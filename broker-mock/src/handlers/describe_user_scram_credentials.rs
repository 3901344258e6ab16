//! DescribeUserScramCredentials (key 50), version 0 (KIP-554): each user's SCRAM
//! mechanisms and iteration counts from the node's store, never the credentials.
//!
//! Null or empty `users` describes every user with a credential, in name order.
//! A named user without credentials is RESOURCE_NOT_FOUND, a user named twice is
//! DUPLICATE_RESOURCE (answered once), each in that user's result, as Kafka does.
//!
//! With an authorizer, the requester needs Describe on the cluster, else the
//! whole request is CLUSTER_AUTHORIZATION_FAILED, as in Kafka.
//!
//! On a cluster node the answer includes the cluster's credentials, from the
//! node's copy of the metadata log (see `alter_user_scram_credentials.rs`).

use baton_protocol::acl::AclOperation;
use baton_protocol::messages::{
    CredentialInfo, DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
};
use baton_protocol::ErrorCode;

use crate::acl::RequestContext;
use crate::state::BrokerState;

fn result(
    user: String,
    error: ErrorCode,
    message: Option<String>,
) -> DescribeUserScramCredentialsResult {
    DescribeUserScramCredentialsResult {
        user,
        error_code: error.code(),
        error_message: message,
        credential_infos: Vec::new(),
    }
}

fn described(state: &BrokerState, user: String) -> DescribeUserScramCredentialsResult {
    let infos: Vec<CredentialInfo> = state
        .scram
        .describe(&user)
        .into_iter()
        .map(|(hash, iterations)| CredentialInfo {
            mechanism: hash.kafka_type(),
            iterations: i32::try_from(iterations).unwrap_or(i32::MAX),
        })
        .collect();
    if infos.is_empty() {
        let message = format!("Attempt to describe a user credential that does not exist: {user}");
        return result(user, ErrorCode::ResourceNotFound, Some(message));
    }
    DescribeUserScramCredentialsResult {
        credential_infos: infos,
        ..result(user, ErrorCode::None, None)
    }
}

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: DescribeUserScramCredentialsRequest,
    _version: i16,
) -> DescribeUserScramCredentialsResponse {
    if !state.allowed_on_cluster(ctx, AclOperation::Describe) {
        return DescribeUserScramCredentialsResponse {
            error_code: ErrorCode::ClusterAuthorizationFailed.code(),
            error_message: Some("Cluster authorization failed.".into()),
            ..Default::default()
        };
    }
    let names: Vec<String> = req
        .users
        .unwrap_or_default()
        .into_iter()
        .map(|u| u.name)
        .collect();
    let results = if names.is_empty() {
        state
            .scram
            .user_names()
            .into_iter()
            .map(|user| described(state, user))
            .collect()
    } else {
        let mut out: Vec<DescribeUserScramCredentialsResult> = Vec::new();
        for (i, name) in names.iter().enumerate() {
            if names[..i].contains(name) {
                continue;
            }
            if names[i + 1..].contains(name) {
                let message = format!("Cannot describe SCRAM credentials for the same user twice in a single request: {name}");
                out.push(result(
                    name.clone(),
                    ErrorCode::DuplicateResource,
                    Some(message),
                ));
            } else {
                out.push(described(state, name.clone()));
            }
        }
        out
    };
    DescribeUserScramCredentialsResponse {
        results,
        ..Default::default()
    }
}
