//! A broker's configuration from a Kafka `server.properties` file (the binary's
//! `--config FILE`), under Apache Kafka's own property names so that a Kafka user's
//! settings carry over. I/O-free: [`parse`] reads the text, [`broker_config`]
//! maps the entries onto a [`BrokerConfig`](crate::BrokerConfig), reading PEM
//! files named by `*.location` keys through a function the caller passes.
//!
//! - `error.rs`: [`PropertiesError`].
//! - `syntax.rs`: the Java properties syntax ([`parse`], [`Property`]).
//! - `listeners.rs`: `NAME://host:port` lists and `NAME:PROTOCOL` maps.
//! - `users.rs`: PLAIN users in a JAAS entry, SCRAM users in `scram.users`.
//! - `mapping.rs`: the supported keys and how each sets the configuration.
//!
//! An unknown key, a malformed value or a setting this broker cannot honour is an
//! error naming the key and its line, never silently ignored. The supported keys,
//! and the few accepted without effect, are listed in `mapping.rs`'s docs and in
//! the binary's `--help`.

mod error;
mod listeners;
mod mapping;
mod syntax;
mod users;

pub use error::PropertiesError;
pub use mapping::{broker_config, ACCEPTED_WITHOUT_EFFECT, SUPPORTED_KEYS};
pub use syntax::{parse, Property, MAX_PROPERTIES_BYTES};
