//! AlterUserScramCredentials (API key 51, KIP-554): creates, replaces and deletes
//! users' SCRAM credentials. The client salts and iterates the password itself and
//! sends only the salt, the iteration count and the salted password (RFC 5802's
//! SaltedPassword); the broker derives and keeps StoredKey and ServerKey.
//!
//! Supported version 0, flexible from 0 (the only version in Apache Kafka's spec).

use bytes::{Bytes, BytesMut};

use crate::error::DecodeError;
use crate::primitives::{Decoder, Encoder, Wire};
use crate::{impl_message, wire_struct};

/// Bytes whose `Debug` output shows only their length: an upsertion's salted
/// password lets whoever holds it log in as the user, so it never appears in
/// logs.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RedactedBytes(pub Bytes);

impl std::fmt::Debug for RedactedBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RedactedBytes(<{} bytes>)", self.0.len())
    }
}

impl Wire for RedactedBytes {
    fn encode(&self, buf: &mut BytesMut, version: i16, flexible: bool) {
        self.0.encode(buf, version, flexible);
    }
    fn decode(d: &mut Decoder, version: i16, flexible: bool) -> Result<Self, DecodeError> {
        Bytes::decode(d, version, flexible).map(RedactedBytes)
    }
    fn encode_to(&self, out: &mut Encoder, version: i16, flexible: bool) {
        self.0.encode_to(out, version, flexible);
    }
}

#[cfg(any(test, feature = "testing"))]
impl crate::testing::Random for RedactedBytes {
    fn random(rng: &mut crate::testing::Rng, version: i16) -> Self {
        RedactedBytes(Bytes::random(rng, version))
    }
}

wire_struct! {
    /// One credential to delete.
    pub struct ScramCredentialDeletion {
        /// The user name.
        pub name: String [0..],
        /// The SCRAM mechanism: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512.
        pub mechanism: i8 [0..],
    }
}

wire_struct! {
    /// One credential to create or replace. `Debug` shows the salted password's
    /// length only.
    pub struct ScramCredentialUpsertion {
        /// The user name.
        pub name: String [0..],
        /// The SCRAM mechanism: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512.
        pub mechanism: i8 [0..],
        /// The iteration count the salted password was derived with.
        pub iterations: i32 [0..],
        /// The random salt the client chose.
        pub salt: Bytes [0..],
        /// Hi(password, salt, iterations), RFC 5802's SaltedPassword.
        pub salted_password: RedactedBytes [0..],
    }
}

wire_struct! {
    /// Credentials to delete and to upsert. Version 0; flexible.
    pub struct AlterUserScramCredentialsRequest {
        /// The credentials to delete.
        pub deletions: Vec<ScramCredentialDeletion> [0..],
        /// The credentials to create or replace.
        pub upsertions: Vec<ScramCredentialUpsertion> [0..],
    }
}

wire_struct! {
    /// The outcome for one user.
    pub struct AlterUserScramCredentialsResult {
        /// The user name.
        pub user: String [0..],
        /// The error code, or 0.
        pub error_code: i16 [0..],
        /// The error message, if any.
        pub error_message: Option<String> [0..],
    }
}

wire_struct! {
    /// The outcomes. Version 0; flexible.
    pub struct AlterUserScramCredentialsResponse {
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [0..],
        /// One result per user named in the request.
        pub results: Vec<AlterUserScramCredentialsResult> [0..],
    }
}

impl_message!(
    AlterUserScramCredentialsRequest,
    key = 51,
    versions = 0..=0,
    flexible = 0,
    response = AlterUserScramCredentialsResponse
);
impl_message!(
    AlterUserScramCredentialsResponse,
    key = 51,
    versions = 0..=0,
    flexible = 0
);
