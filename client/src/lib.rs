//! Baton: an async Kafka client.

pub mod admin;
pub mod client;
pub mod connection;
pub mod consumer;
pub mod metadata;
mod pool;
pub mod producer;

pub use admin::{Admin, AdminError, ListedOffset, NewTopic, OffsetSpec};
pub use baton_protocol::record::RecordHeader;
pub use client::{Client, ClientBuilder, ClientError};
pub use consumer::{Consumer, ConsumerBuilder, ConsumerError, ConsumerRecord, OffsetReset, StartOffset};
pub use producer::{Acks, DeliveryFuture, ProduceError, Producer, ProducerBuilder, ProducerRecord, RecordMetadata};
