//! Baton: an async Kafka client that owns its buffers.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use baton_kafka::{Admin, Client, Consumer, Producer, ProducerRecord, StartOffset};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::builder(["127.0.0.1:9092"])
//!     .client_id("example")
//!     .request_timeout(Duration::from_secs(10))
//!     .build()
//!     .await?;
//!
//! Admin::new(&client).create_topic("greetings", 3, 1).await?;
//!
//! let producer = Producer::builder(&client).build();
//! let delivery = producer
//!     .send(ProducerRecord::new("greetings").key("k").value("hello"))
//!     .await?;
//! let meta = delivery.await?;
//! println!("delivered to {}/{} at offset {}", meta.topic, meta.partition, meta.offset);
//! producer.close().await;
//!
//! let mut consumer = Consumer::builder(&client)
//!     .assign("greetings", meta.partition, StartOffset::Earliest)
//!     .build()
//!     .await?;
//! let record = consumer.recv().await?;
//! assert_eq!(record.value.as_deref(), Some(&b"hello"[..]));
//! # Ok(())
//! # }
//! ```
//!
//! # Layers
//!
//! From the wire up, each with its own error type wrapping the one below:
//!
//! | module | what | error |
//! |---|---|---|
//! | [`connection`] | one connection (TCP, or any byte stream): pipelining by correlation id, version negotiation, poisoning on failure | [`ConnectionError`](connection::ConnectionError) |
//! | [`client`], [`metadata`] | broker pool (one lazy connection per broker, replaced when poisoned) and the generation-numbered metadata cache | [`ClientError`] |
//! | [`producer`], [`consumer`], [`group`], [`admin`] | what applications use | [`ProduceError`], [`ConsumerError`], [`GroupError`], [`AdminError`] |
//!
//! # Ownership and cancellation
//!
//! The producer takes [`bytes::Bytes`] by value and holds a record until its outcome
//! is final, then hands it back. Every async method documents what happens if its
//! future is dropped ("Cancel safety").
//!
//! # Features
//!
//! All on by default:
//!
//! - `gzip`, `snappy`, `lz4`, `zstd`: the record batch codecs. A codec left out
//!   cannot be chosen for producing ([`Compression::is_supported`]), and batches
//!   compressed with it fail to decode with a typed error. `zstd` binds the C
//!   library; the others are pure Rust.
//! - `tls`: `SSL` and `SASL_SSL` (rustls with the ring provider, which compiles
//!   C and assembly). Without it there is no `TlsConfig` and no
//!   `ClientBuilder::tls`, and a TLS security protocol fails to connect with
//!   [`ConnectionError::SecurityConfig`](connection::ConnectionError::SecurityConfig).
//!
//! With `default-features = false` the crate links no C code. SASL (PLAIN,
//! SCRAM, OAUTHBEARER) is always available.

pub mod admin;
mod backoff;
pub mod client;
pub mod connection;
pub mod consumer;
pub mod group;
pub mod metadata;
pub mod metrics;
mod offsets;
mod pool;
pub mod producer;
mod request_span;
mod sasl;
#[cfg(feature = "tls")]
mod tls;
pub mod trace_context;

pub use crate::metrics::{
    ConnectionStats, ConsumerLag, ConsumerStats, LatencySummary, ProducerStats,
};
pub use admin::{
    AclFailure, Admin, AdminError, DeletedRecords, GroupDescription, GroupFailure, GroupListing,
    GroupOffsetFailure, GroupOffsetReset, GroupOffsets, GroupOffsetsQuery, GroupState, GroupType,
    ListGroupsFilter, ListedOffset, MemberDescription, NewTopic, OffsetAndMetadata, OffsetSpec,
    PartitionLag, RecordsError, RecordsToDelete, ScramChange, TopicError, UserError,
    UserScramCredentials,
};
pub use admin::{
    AlterConfigOp, ClusterDescription, ConfigEntry, ConfigError, ConfigResource, ConfigSource,
    ConfigSynonym, DescribeConfigsOptions, LogDirDescription, NewPartitions, ReplicaLogInfo,
    ResourceConfig,
};
pub use admin::{ElectionResult, ElectionType, OngoingReassignment, PartitionError, Reassignment};
/// The attribute that implements the SDK's async extension points,
/// [`OAuthTokenProvider`] and [`RebalanceListener`] (their `async fn`s).
pub use async_trait::async_trait;
/// The environment seam (network, wall clock, randomness, blocking work) a
/// [`ClientBuilder::env`] takes.
pub use baton_env as env;
pub use baton_protocol::acl::{
    AccessControlEntry, AclBinding, AclBindingFilter, AclError, AclOperation, AclPermissionType,
    PatternType, ResourcePattern, ResourceType,
};
pub use baton_protocol::record::RecordHeader;
pub use baton_protocol::sasl::{Mechanism as SaslMechanism, Secret};
pub use baton_protocol::security::SecurityProtocol;
pub use client::{Client, ClientBuilder, ClientError};
pub use consumer::{
    Consumer, ConsumerBuilder, ConsumerError, ConsumerRecord, IsolationLevel, OffsetReset,
    StartOffset,
};
pub use group::{
    ConsumerGroupMetadata, GroupConsumer, GroupConsumerBuilder, GroupError, GroupProtocol,
    GroupStream, PendingCommit, RebalanceContext, RebalanceListener, TopicPartition,
};
pub use producer::{
    Acks, AttemptError, CancelOutcome, Compression, DeliveryFuture, FlushTimeout, InFlight,
    ProduceError, Producer, ProducerBuilder, ProducerConfigError, ProducerRecord, RecordMetadata,
    TransactionError, TransactionOutcome,
};
pub use sasl::{BoxError, OAuthToken, OAuthTokenProvider, SaslCredentials};
#[cfg(feature = "tls")]
pub use tls::TlsConfig;
pub use tokio_util::sync::CancellationToken;
pub use trace_context::{TraceContext, TraceContextError};

/// The README's code examples, compiled as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeExamples;
