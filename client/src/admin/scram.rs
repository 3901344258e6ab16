//! SCRAM user administration (KIP-554): [`Admin::alter_user_scram_credentials`]
//! and [`Admin::describe_user_scram_credentials`].
//!
//! The password never leaves the client: it is salted with fresh random bytes and
//! iterated (PBKDF2, off the async workers) into RFC 5802's SaltedPassword, and
//! only the salt, the iteration count and the salted password are sent.

use baton_protocol::messages::{
    AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest, RedactedBytes,
    ScramCredentialDeletion, ScramCredentialUpsertion, UserName,
};
use baton_protocol::sasl::{random_salt, Mechanism, ScramHash, Secret};
use baton_protocol::ErrorCode;
use bytes::Bytes;

use super::{Admin, AdminError, UserError};

/// Kafka's default SCRAM iteration count (`kafka-configs --add-config
/// 'SCRAM-SHA-512=[password=...]'`).
pub const DEFAULT_SCRAM_ITERATIONS: u32 = 4096;

/// One change to a user's SCRAM credentials. `Debug` never shows the password.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ScramChange {
    /// Creates or replaces the user's credential for `mechanism`.
    Upsert {
        /// The user name.
        user: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512.
        mechanism: Mechanism,
        /// The password; only its salted, iterated form is sent.
        password: Secret,
        /// The iteration count, 4096 to 16384.
        iterations: u32,
    },
    /// Deletes the user's credential for `mechanism`.
    Delete {
        /// The user name.
        user: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512.
        mechanism: Mechanism,
    },
}

impl ScramChange {
    /// Creates or replaces `user`'s `mechanism` credential, iterated
    /// [`DEFAULT_SCRAM_ITERATIONS`] times.
    pub fn upsert(
        user: impl Into<String>,
        mechanism: Mechanism,
        password: impl Into<Secret>,
    ) -> ScramChange {
        ScramChange::Upsert {
            user: user.into(),
            mechanism,
            password: password.into(),
            iterations: DEFAULT_SCRAM_ITERATIONS,
        }
    }

    /// Deletes `user`'s `mechanism` credential.
    pub fn delete(user: impl Into<String>, mechanism: Mechanism) -> ScramChange {
        ScramChange::Delete {
            user: user.into(),
            mechanism,
        }
    }

    /// Sets the iteration count of an upsert (ignored for a delete).
    pub fn iterations(mut self, n: u32) -> ScramChange {
        if let ScramChange::Upsert { iterations, .. } = &mut self {
            *iterations = n;
        }
        self
    }

    fn user(&self) -> &str {
        match self {
            ScramChange::Upsert { user, .. } | ScramChange::Delete { user, .. } => user,
        }
    }
}

/// One user's SCRAM credentials, as DescribeUserScramCredentials reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UserScramCredentials {
    /// The user name.
    pub user: String,
    /// Each credential's mechanism and iteration count.
    pub credentials: Vec<(Mechanism, i32)>,
}

/// The SCRAM hash of `mechanism`, or the error a broker would give for it.
fn hash_of(user: &str, mechanism: Mechanism) -> Result<ScramHash, UserError> {
    mechanism.scram_hash().ok_or_else(|| UserError {
        user: user.to_owned(),
        code: ErrorCode::UnsupportedSaslMechanism,
        message: Some(format!("{mechanism} is not a SCRAM mechanism")),
    })
}

impl Admin {
    /// Creates, replaces and deletes users' SCRAM credentials. Each upsert's
    /// password is salted with fresh random bytes and iterated into a salted
    /// password on the blocking pool, and only that is sent. Errors name each
    /// refused user with Kafka's code ([`AdminError::Users`]); the changes of the
    /// other users are applied.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in effect: if the future is dropped after the request was
    /// sent, the changes may or may not be applied.
    pub async fn alter_user_scram_credentials(
        &self,
        changes: impl IntoIterator<Item = ScramChange>,
    ) -> Result<(), AdminError> {
        let changes: Vec<ScramChange> = changes.into_iter().collect();
        let mut refused = Vec::new();
        let mut checked = Vec::new();
        for change in changes {
            let mechanism = match &change {
                ScramChange::Upsert { mechanism, .. } | ScramChange::Delete { mechanism, .. } => {
                    *mechanism
                }
            };
            match hash_of(change.user(), mechanism) {
                Ok(hash) => checked.push((hash, change)),
                Err(e) => refused.push(e),
            }
        }
        if !refused.is_empty() {
            return Err(AdminError::Users(refused));
        }
        if checked.is_empty() {
            return Ok(());
        }
        // SCRAM's PBKDF2 (thousands of HMACs per upsert) runs off the async workers.
        let salted = tokio::task::spawn_blocking(move || salt_all(checked))
            .await
            .map_err(|e| {
                AdminError::Users(vec![UserError {
                    user: String::new(),
                    code: ErrorCode::UnknownServerError,
                    message: Some(format!("salting the passwords failed: {e}")),
                }])
            })??;
        let resp = self.to_controller(&salted).await?;
        let errors: Vec<UserError> = resp
            .results
            .into_iter()
            .filter(|r| r.error_code != 0)
            .map(|r| UserError {
                user: r.user,
                code: ErrorCode::from_code(r.error_code),
                message: r.error_message,
            })
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(AdminError::Users(errors))
        }
    }

    /// Describes users' SCRAM credentials (mechanisms and iteration counts, never
    /// the credentials); no users describes every user that has one. A named user
    /// without credentials is an [`AdminError::Users`] error with
    /// RESOURCE_NOT_FOUND.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: this only reads.
    pub async fn describe_user_scram_credentials(
        &self,
        users: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Vec<UserScramCredentials>, AdminError> {
        let users: Vec<UserName> = users
            .into_iter()
            .map(|u| UserName { name: u.into() })
            .collect();
        let req = DescribeUserScramCredentialsRequest { users: Some(users) };
        let resp = self.to_controller(&req).await?;
        if resp.error_code != 0 {
            return Err(AdminError::Users(vec![UserError {
                user: String::new(),
                code: ErrorCode::from_code(resp.error_code),
                message: resp.error_message,
            }]));
        }
        let mut errors = Vec::new();
        let mut described = Vec::new();
        for r in resp.results {
            if r.error_code != 0 {
                errors.push(UserError {
                    user: r.user,
                    code: ErrorCode::from_code(r.error_code),
                    message: r.error_message,
                });
                continue;
            }
            let credentials = r
                .credential_infos
                .iter()
                .filter_map(|c| {
                    ScramHash::from_kafka_type(c.mechanism).map(|h| (h.mechanism(), c.iterations))
                })
                .collect();
            described.push(UserScramCredentials {
                user: r.user,
                credentials,
            });
        }
        if errors.is_empty() {
            Ok(described)
        } else {
            Err(AdminError::Users(errors))
        }
    }
}

/// The request for `changes`: deletions as they are, upserts salted and iterated.
fn salt_all(
    changes: Vec<(ScramHash, ScramChange)>,
) -> Result<AlterUserScramCredentialsRequest, AdminError> {
    let mut req = AlterUserScramCredentialsRequest::default();
    for (hash, change) in changes {
        match change {
            ScramChange::Delete { user, .. } => req.deletions.push(ScramCredentialDeletion {
                name: user,
                mechanism: hash.kafka_type(),
            }),
            ScramChange::Upsert {
                user,
                password,
                iterations,
                ..
            } => {
                let refuse = |e: baton_protocol::sasl::SaslError| {
                    AdminError::Users(vec![UserError {
                        user: user.clone(),
                        code: ErrorCode::UnacceptableCredential,
                        message: Some(e.to_string()),
                    }])
                };
                let salt = random_salt().map_err(refuse)?;
                let salted = hash
                    .salt_password(password.expose().as_bytes(), &salt, iterations)
                    .map_err(refuse)?;
                req.upsertions.push(ScramCredentialUpsertion {
                    name: user,
                    mechanism: hash.kafka_type(),
                    iterations: i32::try_from(iterations).unwrap_or(i32::MAX),
                    salt: Bytes::from(salt),
                    salted_password: RedactedBytes(Bytes::from(salted)),
                });
            }
        }
    }
    Ok(req)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_password_and_iterations_are_checked() {
        let change = ScramChange::upsert("bob", Mechanism::ScramSha512, "hunter2");
        assert!(!format!("{change:?}").contains("hunter2"));
        let too_few = ScramChange::upsert("bob", Mechanism::ScramSha256, "pw").iterations(10);
        let err = salt_all(vec![(ScramHash::Sha256, too_few)]).unwrap_err();
        assert!(err.to_string().contains("iteration"), "{err}");
        let ok = salt_all(vec![
            (
                ScramHash::Sha512,
                ScramChange::upsert("bob", Mechanism::ScramSha512, "pw"),
            ),
            (
                ScramHash::Sha256,
                ScramChange::delete("carol", Mechanism::ScramSha256),
            ),
        ])
        .unwrap();
        assert_eq!(ok.upsertions[0].salted_password.0.len(), 64);
        assert_eq!(ok.upsertions[0].iterations, 4096);
        assert_eq!(ok.deletions[0].mechanism, 1);
        assert!(!format!("{ok:?}").contains("hunter2"));
    }

    #[test]
    fn plain_is_refused_before_sending() {
        let err = hash_of("bob", Mechanism::Plain).unwrap_err();
        assert_eq!(err.code, ErrorCode::UnsupportedSaslMechanism);
    }
}
