//! BrokerRegistration (API key 62): a KRaft broker announces itself to the controller
//! and receives its broker epoch.
//!
//! Supported versions 0–4, all flexible. Version history, from Apache Kafka's spec:
//! v0 came with KRaft (KIP-631); v1 adds `is_migrating_zk_broker` (KIP-866); v2 adds
//! the log directories (KIP-858); v3 adds the previous broker epoch (KIP-966); v4
//! reports features whose minimum supported version is 0.

use crate::primitives::Uuid;
use crate::{impl_message, wire_struct};

wire_struct! {
    /// One listener of the registering broker.
    pub struct BrokerRegistrationRequestListener {
        /// The name of the endpoint.
        pub name: String [0..],
        /// The host name.
        pub host: String [0..],
        /// The port.
        pub port: u16 [0..],
        /// The security protocol (0 = PLAINTEXT).
        pub security_protocol: i16 [0..],
    }
}

wire_struct! {
    /// One feature the registering broker supports.
    pub struct BrokerRegistrationRequestFeature {
        /// The feature name.
        pub name: String [0..],
        /// The minimum supported feature level.
        pub min_supported_version: i16 [0..],
        /// The maximum supported feature level.
        pub max_supported_version: i16 [0..],
    }
}

wire_struct! {
    /// Registers a broker process with the controller. Versions 0–4; flexible from 0.
    pub struct BrokerRegistrationRequest {
        /// The broker id.
        pub broker_id: i32 [0..],
        /// The cluster id of the broker process.
        pub cluster_id: String [0..],
        /// The incarnation id of the broker process (random per process start).
        pub incarnation_id: Uuid [0..],
        /// The listeners of this broker.
        pub listeners: Vec<BrokerRegistrationRequestListener> [0..],
        /// The features on this broker.
        pub features: Vec<BrokerRegistrationRequestFeature> [0..],
        /// The rack of the broker, or null.
        pub rack: Option<String> [0..],
        /// Whether the broker is a ZooKeeper broker being migrated (v1+).
        pub is_migrating_zk_broker: bool [1..],
        /// The log directories available on this broker (v2+).
        pub log_dirs: Vec<Uuid> [2..],
        /// The epoch before a clean shutdown, or -1 (v3+).
        pub previous_broker_epoch: i64 [3..] default(-1),
    }
}

wire_struct! {
    /// The controller's answer to a registration. Versions 0–4; flexible from 0.
    pub struct BrokerRegistrationResponse {
        /// Throttle time in ms.
        pub throttle_time_ms: i32 [0..],
        /// The error code, or 0.
        pub error_code: i16 [0..],
        /// The broker's assigned epoch, or -1 if none was assigned.
        pub broker_epoch: i64 [0..] default(-1),
    }
}

impl_message!(
    BrokerRegistrationRequest,
    key = 62,
    versions = 0..=4,
    flexible = 0,
    response = BrokerRegistrationResponse
);
impl_message!(
    BrokerRegistrationResponse,
    key = 62,
    versions = 0..=4,
    flexible = 0
);
