//! DescribeUserScramCredentials (API key 50, KIP-554): the SCRAM mechanisms and
//! iteration counts each user has credentials for (never the credentials).
//!
//! Supported version 0, flexible from 0 (the only version in Apache Kafka's spec).

use crate::{impl_message, wire_struct};

wire_struct! {
    /// One user to describe.
    pub struct UserName {
        /// The user name.
        pub name: String [0..],
    }
}

wire_struct! {
    /// Which users to describe. Version 0; flexible.
    pub struct DescribeUserScramCredentialsRequest {
        /// The users to describe; null or empty describes every user.
        pub users: Option<Vec<UserName>> [0..],
    }
}

wire_struct! {
    /// One SCRAM credential of a user: its mechanism and iteration count.
    pub struct CredentialInfo {
        /// The SCRAM mechanism: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512.
        pub mechanism: i8 [0..],
        /// The iteration count of the credential.
        pub iterations: i32 [0..],
    }
}

wire_struct! {
    /// The credentials of one user.
    pub struct DescribeUserScramCredentialsResult {
        /// The user name.
        pub user: String [0..],
        /// The user-level error code (RESOURCE_NOT_FOUND for a user without
        /// credentials, DUPLICATE_RESOURCE for a user named twice), or 0.
        pub error_code: i16 [0..],
        /// The user-level error message, if any.
        pub error_message: Option<String> [0..],
        /// The user's credentials.
        pub credential_infos: Vec<CredentialInfo> [0..],
    }
}

wire_struct! {
    /// The descriptions. Version 0; flexible.
    pub struct DescribeUserScramCredentialsResponse {
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [0..],
        /// The request-level error code, or 0.
        pub error_code: i16 [0..],
        /// The request-level error message, if any.
        pub error_message: Option<String> [0..],
        /// One result per user.
        pub results: Vec<DescribeUserScramCredentialsResult> [0..],
    }
}

impl_message!(
    DescribeUserScramCredentialsRequest,
    key = 50,
    versions = 0..=0,
    flexible = 0,
    response = DescribeUserScramCredentialsResponse
);
impl_message!(
    DescribeUserScramCredentialsResponse,
    key = 50,
    versions = 0..=0,
    flexible = 0
);
