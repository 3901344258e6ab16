//! AlterUserScramCredentials (key 51), version 0 (KIP-554): deletes and upserts
//! SCRAM credentials in the node's store, which every SASL listener of the node
//! checks from the next login on.
//!
//! An upsertion carries the salt, the iteration count and the salted password
//! (RFC 5802's SaltedPassword); the broker derives StoredKey and ServerKey from it
//! and keeps only those, with the salt and the count. One result per user named,
//! in request order, with Kafka's errors: an empty user name (or one over 4 KiB, or
//! a salt over 1 KiB) or an iteration count
//! outside 4096–16384 (or a salted password of the wrong length, an empty salt)
//! UNACCEPTABLE_CREDENTIAL, an unknown mechanism UNSUPPORTED_SASL_MECHANISM, the
//! deletion of a credential that does not exist RESOURCE_NOT_FOUND, the same user
//! and mechanism twice in one request DUPLICATE_RESOURCE. A user with any error
//! has none of its changes applied.
//!
//! With an authorizer, the requester needs Alter on the cluster, else every user
//! named gets CLUSTER_AUTHORIZATION_FAILED and nothing changes, as in Kafka.
//!
//! On a cluster node the request goes to the controller (`forward.rs`), which
//! checks it the same way and writes the changes to the metadata log as
//! UserScramCredential records, so every node logs the user in; the node answers
//! once its own copy shows them.
//!
//! Deviations from Apache Kafka: the store (a node's, or the cluster's) holds at
//! most `MAX_SCRAM_CREDENTIALS` credentials, an upsertion past it is
//! POLICY_VIOLATION.

use baton_protocol::acl::AclOperation;
use baton_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
};
use baton_protocol::sasl::{ScramCredential, ScramHash, MAX_ITERATIONS, MIN_ITERATIONS};
use baton_protocol::ErrorCode;

use crate::acl::RequestContext;
use crate::security::{ScramStore, MAX_SCRAM_CREDENTIALS};
use crate::state::BrokerState;

/// One change to one user's credentials.
enum Change {
    Delete(ScramHash),
    Upsert(ScramCredential),
}

type Refusal = (ErrorCode, String);

/// One user's checked changes (with the mechanism number each names), or the
/// first refusal among them.
type UserChanges = Result<Vec<(i8, Change)>, Refusal>;

fn hash_of(mechanism: i8) -> Result<ScramHash, Refusal> {
    ScramHash::from_kafka_type(mechanism).ok_or_else(|| {
        (
            ErrorCode::UnsupportedSaslMechanism,
            format!("Unknown SCRAM mechanism {mechanism}"),
        )
    })
}

fn check_user(name: &str) -> Result<(), Refusal> {
    if name.is_empty() {
        return Err((
            ErrorCode::UnacceptableCredential,
            "Username must not be empty".into(),
        ));
    }
    if name.len() > MAX_USER_BYTES {
        return Err((
            ErrorCode::UnacceptableCredential,
            format!("Username longer than {MAX_USER_BYTES} bytes"),
        ));
    }
    Ok(())
}

/// Longest user name accepted, in bytes (it is a metadata-log string on a
/// cluster).
const MAX_USER_BYTES: usize = 4096;

/// Longest salt accepted, in bytes (Kafka's clients send 64).
const MAX_SALT_BYTES: usize = 1024;

/// Where checked changes apply: a standalone node's store, or the cluster's
/// metadata log (the controller).
pub(crate) trait ScramTarget {
    /// Whether `user` has a credential for `hash`.
    fn has(&self, user: &str, hash: ScramHash) -> bool;
    /// Removes `user`'s credential for `hash` (known to exist).
    fn delete(&mut self, user: &str, hash: ScramHash);
    /// Sets `user`'s credential for its hash; `false` when the store is full.
    fn upsert(&mut self, user: &str, credential: ScramCredential) -> bool;
}

impl ScramTarget for &ScramStore {
    fn has(&self, user: &str, hash: ScramHash) -> bool {
        ScramStore::has(self, user, hash)
    }

    fn delete(&mut self, user: &str, hash: ScramHash) {
        ScramStore::delete(self, user, hash);
    }

    fn upsert(&mut self, user: &str, credential: ScramCredential) -> bool {
        ScramStore::upsert(self, user, credential).is_ok()
    }
}

pub(crate) fn handle(
    state: &BrokerState,
    ctx: &RequestContext,
    req: AlterUserScramCredentialsRequest,
    _version: i16,
) -> AlterUserScramCredentialsResponse {
    let authorized = state.allowed_on_cluster(ctx, AclOperation::Alter);
    alter(&req, authorized, &mut &*state.scram)
}

/// Checks `req` and applies each user's changes to `target`; with `authorized`
/// false, every user named is refused and nothing changes.
pub(crate) fn alter(
    req: &AlterUserScramCredentialsRequest,
    authorized: bool,
    target: &mut dyn ScramTarget,
) -> AlterUserScramCredentialsResponse {
    // Users in request order, each with its changes or its first refusal.
    let mut users: Vec<(String, UserChanges)> = Vec::new();
    let mut add = |name: &str, mechanism: i8, change: Result<Change, Refusal>| {
        let at = match users.iter().position(|(u, _)| u == name) {
            Some(at) => at,
            None => {
                users.push((name.to_owned(), Ok(Vec::new())));
                users.len() - 1
            }
        };
        let entry = &mut users[at].1;
        let Ok(changes) = entry else {
            return;
        };
        if changes.iter().any(|(m, _)| *m == mechanism) {
            *entry = Err((
                ErrorCode::DuplicateResource,
                "A user credential cannot be altered twice in the same request".into(),
            ));
            return;
        }
        match change {
            Ok(c) => changes.push((mechanism, c)),
            Err(refusal) => *entry = Err(refusal),
        }
    };
    for d in &req.deletions {
        let change = check_user(&d.name).and_then(|()| {
            let hash = hash_of(d.mechanism)?;
            if !target.has(&d.name, hash) {
                return Err((
                    ErrorCode::ResourceNotFound,
                    "Attempt to delete a user credential that does not exist".into(),
                ));
            }
            Ok(Change::Delete(hash))
        });
        add(&d.name, d.mechanism, change);
    }
    for u in &req.upsertions {
        let change = check_user(&u.name).and_then(|()| {
            let hash = hash_of(u.mechanism)?;
            let iterations = u32::try_from(u.iterations).unwrap_or(0);
            if iterations < MIN_ITERATIONS {
                return Err((
                    ErrorCode::UnacceptableCredential,
                    format!("Too few iterations: at least {MIN_ITERATIONS}"),
                ));
            }
            if iterations > MAX_ITERATIONS {
                return Err((
                    ErrorCode::UnacceptableCredential,
                    format!("Too many iterations: at most {MAX_ITERATIONS}"),
                ));
            }
            if u.salt.len() > MAX_SALT_BYTES {
                return Err((
                    ErrorCode::UnacceptableCredential,
                    format!("Salt longer than {MAX_SALT_BYTES} bytes"),
                ));
            }
            ScramCredential::from_salted_password(
                hash,
                u.salt.to_vec(),
                iterations,
                &u.salted_password.0,
            )
            .map(Change::Upsert)
            .map_err(|e| (ErrorCode::UnacceptableCredential, e.to_string()))
        });
        add(&u.name, u.mechanism, change);
    }
    let results = users
        .into_iter()
        .map(|(user, outcome)| {
            let outcome = if authorized {
                outcome.and_then(|changes| apply(target, &user, changes))
            } else {
                Err((
                    ErrorCode::ClusterAuthorizationFailed,
                    "Cluster authorization failed.".into(),
                ))
            };
            let (code, message) = match outcome {
                Ok(()) => (ErrorCode::None, None),
                Err((code, message)) => (code, Some(message)),
            };
            if code == ErrorCode::None {
                tracing::info!(%user, "SCRAM credentials altered");
            }
            AlterUserScramCredentialsResult {
                user,
                error_code: code.code(),
                error_message: message,
            }
        })
        .collect();
    AlterUserScramCredentialsResponse {
        throttle_time_ms: 0,
        results,
    }
}

/// Applies one user's checked changes.
fn apply(
    target: &mut dyn ScramTarget,
    user: &str,
    changes: Vec<(i8, Change)>,
) -> Result<(), Refusal> {
    for (_, change) in changes {
        match change {
            Change::Delete(hash) => target.delete(user, hash),
            Change::Upsert(credential) => {
                if !target.upsert(user, credential) {
                    return Err((
                        ErrorCode::PolicyViolation,
                        format!(
                            "this broker holds at most {MAX_SCRAM_CREDENTIALS} SCRAM credentials"
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}
