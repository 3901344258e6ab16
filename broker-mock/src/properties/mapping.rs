//! The supported Kafka broker properties and how each sets a
//! [`BrokerConfig`].
//!
//! Node and storage: `node.id` (or `broker.id`; both must agree), `log.dirs` (or
//! `log.dir`; one directory), `num.partitions`, `auto.create.topics.enable`,
//! `log.segment.bytes`, `log.index.interval.bytes`,
//! the log cleaner's `log.cleaner.enable`, `log.cleaner.backoff.ms`,
//! `log.cleaner.min.cleanable.ratio`, `log.cleaner.delete.retention.ms` and
//! `log.cleaner.dedupe.buffer.size` (see [`CleanerConfig`](crate::CleanerConfig)),
//! `log.retention.ms` (over `.minutes`, over `.hours`; -1 keeps data forever; the
//! default is Kafka's 168 hours), `log.retention.bytes`, `log.roll.ms` (over `log.roll.hours`),
//! `log.retention.check.interval.ms` (see [`LogRetention`](crate::LogRetention)),
//! `group.initial.rebalance.delay.ms`, `offsets.topic.num.partitions`; consumer
//! groups of KIP-848: `group.consumer.session.timeout.ms`,
//! `group.consumer.heartbeat.interval.ms`, `group.consumer.max.size`,
//! `group.consumer.migration.policy` (`bidirectional`, `upgrade`, `downgrade`,
//! `disabled`).
//!
//! Transactions: `transaction.max.timeout.ms` (longer producer timeouts are
//! `INVALID_TRANSACTION_TIMEOUT`), `transaction.state.log.num.partitions`.
//! `transactional.id.expiration.ms` is unknown: ids never expire here, their
//! number is bounded by `baton.max.transactional.ids` instead.
//!
//! Listeners: `listeners` (`NAME://host:port,...`; the host an IP literal,
//! `localhost` or empty for every interface), `advertised.listeners` (each
//! naming a listener; port 0 or an empty host keeps the bound one),
//! `listener.security.protocol.map` (`NAME:PROTOCOL`; a listener missing from it
//! must be named after its protocol, as in Kafka's default map),
//! `controller.listener.names` (those listeners are not bound: a single node has
//! no separate KRaft controller listener), `inter.broker.listener.name` and
//! `security.inter.broker.protocol` (checked to name a listener / a protocol in
//! use; a single node has no other broker).
//!
//! Security, each also as `listener.name.<listener>.<key>` for one listener (the
//! listener name in any case): `sasl.enabled.mechanisms` (PLAIN, SCRAM-SHA-256,
//! SCRAM-SHA-512, OAUTHBEARER with Kafka's default unsecured JWS validator); `plain.sasl.jaas.config` (per listener only: a
//! `PlainLoginModule` entry whose `user_<name>="<password>"` options are the PLAIN
//! users); PEM key material as in KIP-651: `ssl.keystore.type=PEM`,
//! `ssl.keystore.certificate.chain` and `ssl.keystore.key` (inline PEM; a value
//! joined from continuation lines without `\n` escapes is accepted too) or
//! `ssl.keystore.location` (a PEM file with the key and the chain),
//! `ssl.truststore.type=PEM`, `ssl.truststore.certificates` or
//! `ssl.truststore.location`, `ssl.client.auth` (`none`, `requested`,
//! `required`; the trust store holds the client CAs). `scram.users` (Baton's
//! own, see `users.rs`) adds SCRAM users to the node, salted and iterated 4,096
//! times; they log in on every SASL listener that enables their mechanism. Encrypted keys
//! (`ssl.key.password`) and key store passwords are not supported.
//!
//! Limits: `socket.request.max.bytes` (the largest request frame),
//! `message.max.bytes` (there is no separate per-batch limit: a value above the
//! frame limit raises the frame limit to it, so such batches fit),
//! `max.connections`, `max.connections.per.ip`, and Baton's own
//! `baton.max.partitions`, `baton.max.topics`,
//! `baton.max.partitions.per.request`, `baton.max.aborted.txns.per.partition`,
//! `baton.max.transactional.ids`, `baton.max.partitions.per.transaction`,
//! `baton.max.pending.txn.offsets` (the `--max-*` flags; see
//! [`BrokerLimits`](crate::BrokerLimits)), `max.incremental.fetch.session.cache.slots`
//! and Baton's `baton.max.fetch.session.partitions` (KIP-227 fetch sessions).
//!
//! Fetching from followers (KIP-392): `broker.rack` (every node the binary runs
//! gets it) and `replica.selector.class`
//! (`org.apache.kafka.common.replica.RackAwareReplicaSelector`, or empty for the
//! leader only; other classes are refused).
//!
//! `connections.max.reauth.ms` bounds the SASL sessions of every SASL listener
//! (KIP-368).
//!
//! `authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer`
//! turns ACL authorization on (an empty value leaves it off, as in Kafka);
//! `super.users` (`User:a;User:b`) and `allow.everyone.if.no.acl.found` configure
//! it. Either of those without the authorizer is an error here, where Kafka
//! would silently ignore it.
//!
//! A single node has one replica of everything: `default.replication.factor`,
//! `offsets.topic.replication.factor`, `transaction.state.log.replication.factor`,
//! `transaction.state.log.min.isr`,
//! `share.coordinator.state.topic.replication.factor` and
//! `share.coordinator.state.topic.min.isr` are accepted with the value 1 only.
//! `process.roles` must include `broker`. The keys of
//! [`ACCEPTED_WITHOUT_EFFECT`] are accepted and have no effect.

use std::path::Path;

use baton_protocol::sasl::Mechanism;

use super::error::PropertiesError;
use super::listeners::{self, Endpoint};
use super::syntax::Property;
use super::users::{self, User};
use crate::acl::AuthorizerConfig;
use crate::config::BrokerConfig;
use crate::listener_config::ListenerConfig;
use crate::security::{ClientAuth, ListenerSecurity, SaslSettings, SecurityProtocol, TlsSettings};

/// The keys this broker sets from (`listener.name.<listener>.` forms aside).
pub const SUPPORTED_KEYS: &[&str] = &[
    "node.id",
    "broker.id",
    "listeners",
    "advertised.listeners",
    "listener.security.protocol.map",
    "controller.listener.names",
    "inter.broker.listener.name",
    "security.inter.broker.protocol",
    "process.roles",
    "log.dirs",
    "log.dir",
    "num.partitions",
    "auto.create.topics.enable",
    "log.segment.bytes",
    "log.cleaner.enable",
    "log.cleaner.backoff.ms",
    "log.cleaner.min.cleanable.ratio",
    "log.cleaner.delete.retention.ms",
    "log.cleaner.dedupe.buffer.size",
    "log.index.interval.bytes",
    "log.retention.ms",
    "log.retention.minutes",
    "log.retention.hours",
    "log.retention.bytes",
    "log.roll.ms",
    "log.roll.hours",
    "log.retention.check.interval.ms",
    "group.initial.rebalance.delay.ms",
    "group.consumer.session.timeout.ms",
    "group.consumer.heartbeat.interval.ms",
    "group.consumer.max.size",
    "offsets.topic.num.partitions",
    "transaction.max.timeout.ms",
    "transaction.state.log.num.partitions",
    "sasl.enabled.mechanisms",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.client.auth",
    "scram.users",
    "authorizer.class.name",
    "super.users",
    "allow.everyone.if.no.acl.found",
    "connections.max.reauth.ms",
    "socket.request.max.bytes",
    "message.max.bytes",
    "max.connections",
    "max.connections.per.ip",
    "baton.max.partitions",
    "baton.max.topics",
    "baton.max.partitions.per.request",
    "baton.max.aborted.txns.per.partition",
    "baton.max.transactional.ids",
    "baton.max.partitions.per.transaction",
    "baton.max.pending.txn.offsets",
    "max.incremental.fetch.session.cache.slots",
    "baton.max.fetch.session.partitions",
    "broker.rack",
    "replica.selector.class",
    "default.replication.factor",
    "offsets.topic.replication.factor",
    "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr",
    "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.min.isr",
];

/// Kafka keys accepted without effect: thread counts, socket buffers and
/// heartbeat tuning of a JVM broker, KRaft quorum addresses (a single node is its
/// own controller), the log cleaner.
pub const ACCEPTED_WITHOUT_EFFECT: &[&str] = &[
    "controller.quorum.voters",
    "controller.quorum.bootstrap.servers",
    "num.network.threads",
    "num.io.threads",
    "num.replica.fetchers",
    "background.threads",
    "num.recovery.threads.per.data.dir",
    "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes",
    "broker.heartbeat.interval.ms",
    "broker.session.timeout.ms",
];

/// The SSL keys of a listener.
const SSL_KEYS: &[&str] = &[
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.client.auth",
];

/// The keys that give a key store's certificate and key.
const KEYSTORE_SOURCES: &[&str] = &[
    "ssl.keystore.location",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
];

/// The keys that give a trust store's certificates.
const TRUSTSTORE_SOURCES: &[&str] = &["ssl.truststore.location", "ssl.truststore.certificates"];

/// Kafka SSL keys this build refuses, and why.
const UNSUPPORTED_SSL_KEYS: &[(&str, &str)] = &[
    (
        "ssl.key.password",
        "encrypted private keys are not supported; give the key unencrypted",
    ),
    (
        "ssl.keystore.password",
        "only PEM key stores without a password are supported",
    ),
    (
        "ssl.truststore.password",
        "only PEM trust stores without a password are supported",
    ),
];

/// Values that only a single replica can have.
const SINGLE_REPLICA_KEYS: &[&str] = &[
    "default.replication.factor",
    "offsets.topic.replication.factor",
    "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr",
    "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.min.isr",
];

/// Largest frame limit `socket.request.max.bytes` and `message.max.bytes` may
/// set (Kafka's own cap on a request is `i32::MAX`; a test broker stays smaller).
const MAX_FRAME_LIMIT: usize = 1 << 30;

#[derive(Debug, Clone, Copy)]
struct Entry<'a> {
    key: &'a str,
    value: &'a str,
    line: usize,
}

impl<'a> Entry<'a> {
    fn invalid(&self, reason: impl Into<String>) -> PropertiesError {
        PropertiesError::Invalid {
            key: self.key.to_owned(),
            line: self.line,
            reason: reason.into(),
        }
    }

    fn unsupported(&self, reason: impl Into<String>) -> PropertiesError {
        PropertiesError::Unsupported {
            key: self.key.to_owned(),
            line: self.line,
            reason: reason.into(),
        }
    }

    fn parse_in<T>(&self, min: T, max: T) -> Result<T, PropertiesError>
    where
        T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
    {
        self.value
            .trim()
            .parse::<T>()
            .ok()
            .filter(|v| *v >= min && *v <= max)
            .ok_or_else(|| self.invalid(format!("expected an integer in {min}..={max}")))
    }

    fn boolean(&self) -> Result<bool, PropertiesError> {
        match self.value.trim().to_ascii_lowercase().as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(self.invalid("expected true or false")),
        }
    }

    fn list(&self) -> Vec<&'a str> {
        self.value
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect()
    }
}

/// One listener's own `listener.name.<listener>.` keys.
#[derive(Debug, Default)]
struct ListenerKeys<'a> {
    mechanisms: Option<Entry<'a>>,
    plain_jaas: Option<Entry<'a>>,
    /// SSL keys by their name without the listener prefix.
    ssl: Vec<(&'a str, Entry<'a>)>,
}

/// Kafka's authorizer keys.
#[derive(Debug, Default)]
struct AuthorizerKeys {
    /// `authorizer.class.name` names StandardAuthorizer.
    enabled: bool,
    /// `super.users`: principals such as `User:alice`.
    super_users: Option<(Vec<String>, usize)>,
    /// `allow.everyone.if.no.acl.found`.
    allow_everyone_if_no_acl_found: Option<(bool, usize)>,
}

/// Everything read from the properties, before it is applied.
#[derive(Debug, Default)]
struct Parsed<'a> {
    node_id: Option<(i32, Entry<'a>)>,
    listeners: Option<(Vec<Endpoint>, Entry<'a>)>,
    advertised: Option<(Vec<Endpoint>, Entry<'a>)>,
    protocol_map: Vec<(String, SecurityProtocol)>,
    controller_listeners: Vec<String>,
    inter_broker_listener: Option<Entry<'a>>,
    inter_broker_protocol: Option<(SecurityProtocol, Entry<'a>)>,
    log_dirs: Option<Entry<'a>>,
    log_dir: Option<Entry<'a>>,
    mechanisms: Option<Entry<'a>>,
    ssl: Vec<Entry<'a>>,
    scram_users: Vec<(Mechanism, User)>,
    per_listener: Vec<(String, ListenerKeys<'a>)>,
    message_max_bytes: Option<usize>,
    /// `connections.max.reauth.ms`.
    max_reauth: Option<std::time::Duration>,
    authorizer: AuthorizerKeys,
    /// `log.retention.ms`, `.minutes`, `.hours`, as milliseconds, in that order of
    /// precedence (Kafka's).
    retention_ms: [Option<i64>; 3],
    /// `log.roll.ms`, `log.roll.hours`, as milliseconds.
    roll_ms: [Option<i64>; 2],
}

/// Maps properties onto `base` (the defaults, or the binary's), returning the
/// configuration they describe. `read_file` reads the PEM files named by
/// `ssl.keystore.location` and `ssl.truststore.location`. Where `listeners` is
/// absent, `base`'s listeners stay, and `listener.name.<l>.` keys apply to them.
pub fn broker_config(
    properties: &[Property],
    mut base: BrokerConfig,
    read_file: &mut dyn FnMut(&Path) -> std::io::Result<Vec<u8>>,
) -> Result<BrokerConfig, PropertiesError> {
    let mut parsed = Parsed::default();
    for p in properties {
        let e = Entry {
            key: &p.key,
            value: &p.value,
            line: p.line,
        };
        read_entry(e, &mut parsed, &mut base)?;
    }
    if let Some((id, _)) = parsed.node_id {
        base.node_id = id;
    }
    match (parsed.log_dirs, parsed.log_dir) {
        (Some(e), _) | (None, Some(e)) => {
            let dirs = e.list();
            match dirs.as_slice() {
                [one] => base.data_dir = Some((*one).into()),
                [] => return Err(e.invalid("no directory given")),
                _ => return Err(e.unsupported("one log directory only")),
            }
        }
        (None, None) => {}
    }
    if let Some(n) = parsed.message_max_bytes {
        base.max_frame_bytes = base.max_frame_bytes.max(n);
    }
    let listeners = build_listeners(&parsed, &base, read_file)?;
    check_inter_broker(&parsed, &listeners)?;
    let mut listeners = listeners.into_iter();
    let first = listeners.next().ok_or_else(|| {
        PropertiesError::Inconsistent("no listener is left to serve clients".into())
    })?;
    base.listen = first.listen;
    base.listener_name = Some(first.name);
    base.advertised_host = first.advertised_host;
    base.advertised_port = first.advertised_port;
    base.security = first.security;
    base.extra_listeners = listeners.collect();
    apply_authorizer(&parsed.authorizer, &mut base)?;
    if let Some(ms) = parsed.retention_ms.iter().flatten().next() {
        base.retention.retention_ms = (*ms >= 0).then_some(*ms);
    }
    if let Some(ms) = parsed.roll_ms.iter().flatten().next() {
        base.retention.roll_ms = Some(*ms);
    }
    Ok(base)
}

/// The authorizer `authorizer.class.name` turns on, with `super.users` and
/// `allow.everyone.if.no.acl.found`; those two without it are an error.
fn apply_authorizer(
    keys: &AuthorizerKeys,
    config: &mut BrokerConfig,
) -> Result<(), PropertiesError> {
    if !keys.enabled {
        let needs = |key: &str, line: usize| {
            PropertiesError::Inconsistent(format!(
                "line {line}: {key} needs authorizer.class.name={STANDARD_AUTHORIZER}"
            ))
        };
        if let Some((_, line)) = &keys.super_users {
            return Err(needs("super.users", *line));
        }
        if let Some((_, line)) = keys.allow_everyone_if_no_acl_found {
            return Err(needs("allow.everyone.if.no.acl.found", line));
        }
        return Ok(());
    }
    config.authorizer = Some(AuthorizerConfig {
        super_users: keys
            .super_users
            .as_ref()
            .map(|(users, _)| users.clone())
            .unwrap_or_default(),
        allow_everyone_if_no_acl_found: keys
            .allow_everyone_if_no_acl_found
            .is_some_and(|(allow, _)| allow),
    });
    Ok(())
}

/// Longest `broker.rack` accepted.
const MAX_RACK_BYTES: usize = 1024;

/// The authorizer class `authorizer.class.name` may name.
const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

fn read_entry<'a>(
    e: Entry<'a>,
    parsed: &mut Parsed<'a>,
    base: &mut BrokerConfig,
) -> Result<(), PropertiesError> {
    let limits = &mut base.limits;
    match e.key {
        "node.id" | "broker.id" => {
            let id = e.parse_in(0, i32::MAX)?;
            if let Some((other, first)) = parsed.node_id {
                if other != id {
                    return Err(e.invalid(format!(
                        "{id} differs from {} = {other} on line {}",
                        first.key, first.line
                    )));
                }
            }
            parsed.node_id = Some((id, e));
        }
        "listeners" => {
            let list = listeners::endpoints(e.value).map_err(|r| e.invalid(r))?;
            if list.is_empty() {
                return Err(e.invalid("no listener given"));
            }
            parsed.listeners = Some((list, e));
        }
        "advertised.listeners" => {
            let list = listeners::endpoints(e.value).map_err(|r| e.invalid(r))?;
            parsed.advertised = Some((list, e));
        }
        "listener.security.protocol.map" => {
            parsed.protocol_map = listeners::protocol_map(e.value).map_err(|r| e.invalid(r))?;
        }
        "controller.listener.names" => {
            parsed.controller_listeners = e.list().iter().map(|n| n.to_ascii_uppercase()).collect();
        }
        "inter.broker.listener.name" => parsed.inter_broker_listener = Some(e),
        "security.inter.broker.protocol" => {
            let p = listeners::protocol(e.value).map_err(|r| e.invalid(r))?;
            parsed.inter_broker_protocol = Some((p, e));
        }
        "process.roles" => {
            let roles = e.list();
            if let Some(bad) = roles
                .iter()
                .find(|r| !matches!(**r, "broker" | "controller"))
            {
                return Err(e.invalid(format!("unknown role {bad:?} (broker, controller)")));
            }
            if !roles.contains(&"broker") {
                return Err(
                    e.unsupported("this binary runs a broker; the roles must include broker")
                );
            }
        }
        "log.dirs" => parsed.log_dirs = Some(e),
        "log.dir" => parsed.log_dir = Some(e),
        "num.partitions" => base.default_num_partitions = e.parse_in(1, i32::MAX)?,
        "auto.create.topics.enable" => base.auto_create_topics = e.boolean()?,
        "log.segment.bytes" => base.segment_bytes = e.parse_in(1024, u64::from(u32::MAX))?,
        "log.index.interval.bytes" => base.index_interval_bytes = e.parse_in(0, u32::MAX)?,
        "log.cleaner.enable" => base.cleaner.enable = e.boolean()?,
        "log.cleaner.backoff.ms" => base.cleaner.backoff_ms = e.parse_in(0, i64::MAX as u64)?,
        "log.cleaner.delete.retention.ms" => {
            base.cleaner.delete_retention_ms = e.parse_in(0, i64::MAX)?
        }
        "log.cleaner.min.cleanable.ratio" => {
            base.cleaner.min_cleanable_ratio = e
                .value
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|r| (0.0..=1.0).contains(r))
                .ok_or_else(|| e.invalid("expected a ratio between 0 and 1"))?
        }
        "log.cleaner.dedupe.buffer.size" => {
            base.limits.cleaner_dedupe_buffer_bytes = e.parse_in(1 << 16, usize::MAX)?
        }
        "log.retention.ms" => parsed.retention_ms[0] = Some(e.parse_in(-1, i64::MAX)?),
        "log.retention.minutes" => {
            let m: i64 = e.parse_in(-1, i64::MAX / 60_000)?;
            parsed.retention_ms[1] = Some(if m < 0 { -1 } else { m * 60_000 });
        }
        "log.retention.hours" => {
            let h: i64 = e.parse_in(-1, i64::MAX / 3_600_000)?;
            parsed.retention_ms[2] = Some(if h < 0 { -1 } else { h * 3_600_000 });
        }
        "log.retention.bytes" => {
            let b: i64 = e.parse_in(-1, i64::MAX)?;
            base.retention.retention_bytes = u64::try_from(b).ok();
        }
        "log.roll.ms" => parsed.roll_ms[0] = Some(e.parse_in(1, i64::MAX)?),
        "log.roll.hours" => {
            parsed.roll_ms[1] = Some(e.parse_in(1, i64::MAX / 3_600_000)? * 3_600_000)
        }
        "log.retention.check.interval.ms" => {
            base.retention.check_interval =
                std::time::Duration::from_millis(e.parse_in(1, u64::MAX)?)
        }
        "group.initial.rebalance.delay.ms" => {
            base.groups.initial_rebalance_delay_ms = e.parse_in(0, i64::from(i32::MAX))?
        }
        "group.consumer.session.timeout.ms" => {
            base.groups.consumer_session_timeout_ms = e.parse_in(1, i32::MAX)?
        }
        "group.consumer.heartbeat.interval.ms" => {
            base.groups.consumer_heartbeat_interval_ms = e.parse_in(1, i32::MAX)?
        }
        "group.consumer.max.size" => base.groups.consumer_max_size = e.parse_in(1, 1_000_000)?,
        "group.consumer.migration.policy" => {
            base.groups.consumer_migration_policy = crate::group::MigrationPolicy::parse(e.value)
                .ok_or_else(|| {
                    e.invalid("expected bidirectional, upgrade, downgrade or disabled")
                })?
        }
        "offsets.topic.num.partitions" => {
            base.groups.offsets_topic_partitions = e.parse_in(1, 10_000)?
        }
        "transaction.max.timeout.ms" => {
            base.transaction_max_timeout_ms = e.parse_in(1, i32::MAX)?
        }
        "transaction.state.log.num.partitions" => {
            base.transaction_state_partitions = Some(e.parse_in(1, 10_000)?)
        }
        "sasl.enabled.mechanisms" => {
            mechanisms(e)?;
            parsed.mechanisms = Some(e);
        }
        "scram.users" => {
            parsed.scram_users = users::scram_users(e.value).map_err(|r| e.invalid(r))?;
        }
        "super.users" => {
            let principals: Vec<String> = e
                .value
                .split(';')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            if let Some(bad) = principals.iter().find(|p| {
                !p.split_once(':')
                    .is_some_and(|(t, n)| !t.is_empty() && !n.is_empty())
            }) {
                return Err(e.invalid(format!("{bad:?} is not a principal such as User:alice")));
            }
            parsed.authorizer.super_users = Some((principals, e.line));
        }
        "allow.everyone.if.no.acl.found" => {
            parsed.authorizer.allow_everyone_if_no_acl_found = Some((e.boolean()?, e.line));
        }
        "authorizer.class.name" => match e.value.trim() {
            "" => parsed.authorizer.enabled = false,
            STANDARD_AUTHORIZER => parsed.authorizer.enabled = true,
            other => {
                return Err(e.unsupported(format!(
                    "authorizer {other}: only {STANDARD_AUTHORIZER} (or empty, for none)"
                )))
            }
        },
        "connections.max.reauth.ms" => {
            let ms: u64 = e.parse_in(0, i64::MAX as u64)?;
            parsed.max_reauth = Some(std::time::Duration::from_millis(ms));
        }
        "max.incremental.fetch.session.cache.slots" => {
            limits.max_fetch_sessions = e.parse_in(0, i32::MAX as usize)?
        }
        "baton.max.fetch.session.partitions" => {
            limits.max_fetch_session_partitions = e.parse_in(0, usize::MAX)?
        }
        "broker.rack" => {
            let rack = e.value.trim();
            if rack.len() > MAX_RACK_BYTES {
                return Err(e.invalid(format!("longer than {MAX_RACK_BYTES} bytes")));
            }
            base.rack = (!rack.is_empty()).then(|| rack.to_owned());
        }
        "replica.selector.class" => {
            base.replica_selector = crate::replica_selector::ReplicaSelector::from_class_name(
                e.value,
            )
            .ok_or_else(|| {
                e.unsupported(format!(
                    "replica selector {}: only {} (or empty, for the leader only)",
                    e.value.trim(),
                    crate::replica_selector::RACK_AWARE_CLASS
                ))
            })?
        }
        "socket.request.max.bytes" => base.max_frame_bytes = e.parse_in(1024, MAX_FRAME_LIMIT)?,
        "message.max.bytes" => parsed.message_max_bytes = Some(e.parse_in(1, MAX_FRAME_LIMIT)?),
        "max.connections" => limits.max_connections = e.parse_in(1, usize::MAX)?,
        "max.connections.per.ip" => limits.max_connections_per_ip = e.parse_in(1, usize::MAX)?,
        "baton.max.partitions" => limits.max_partitions = e.parse_in(1, usize::MAX)?,
        "baton.max.topics" => limits.max_topics = e.parse_in(1, usize::MAX)?,
        "baton.max.partitions.per.request" => {
            limits.max_partitions_per_request = e.parse_in(1, usize::MAX)?
        }
        "baton.max.aborted.txns.per.partition" => {
            limits.max_aborted_txns_per_partition = e.parse_in(1, usize::MAX)?
        }
        "baton.max.transactional.ids" => {
            limits.max_transactional_ids = e.parse_in(1, usize::MAX)?
        }
        "baton.max.partitions.per.transaction" => {
            limits.max_partitions_per_transaction = e.parse_in(1, usize::MAX)?
        }
        "baton.max.pending.txn.offsets" => {
            limits.max_pending_txn_offsets = e.parse_in(1, usize::MAX)?
        }
        k if SINGLE_REPLICA_KEYS.contains(&k) => {
            if e.value.trim() != "1" {
                return Err(
                    e.unsupported("a single broker node has one replica; only 1 is possible")
                );
            }
        }
        k if ACCEPTED_WITHOUT_EFFECT.contains(&k) => {}
        k if SSL_KEYS.contains(&k) => parsed.ssl.push(e),
        k if UNSUPPORTED_SSL_KEYS.iter().any(|(u, _)| *u == k) => {
            return Err(unsupported_ssl(e));
        }
        k => match k.strip_prefix("listener.name.") {
            Some(rest) => listener_key(e, rest, parsed)?,
            None => {
                return Err(PropertiesError::Unknown {
                    key: k.to_owned(),
                    line: e.line,
                })
            }
        },
    }
    Ok(())
}

fn unsupported_ssl(e: Entry<'_>) -> PropertiesError {
    let reason = UNSUPPORTED_SSL_KEYS
        .iter()
        .find(|(k, _)| e.key.ends_with(k))
        .map_or("not supported", |(_, r)| r);
    e.unsupported(reason)
}

/// A `listener.name.<listener>.<key>` entry; `rest` is `<listener>.<key>`.
fn listener_key<'a>(
    e: Entry<'a>,
    rest: &'a str,
    parsed: &mut Parsed<'a>,
) -> Result<(), PropertiesError> {
    let unknown = || PropertiesError::Unknown {
        key: e.key.to_owned(),
        line: e.line,
    };
    let (name, key) = rest.split_once('.').ok_or_else(unknown)?;
    let name = name.to_ascii_uppercase();
    let index = match parsed.per_listener.iter().position(|(n, _)| *n == name) {
        Some(i) => i,
        None => {
            parsed.per_listener.push((name, ListenerKeys::default()));
            parsed.per_listener.len() - 1
        }
    };
    let keys = &mut parsed.per_listener[index].1;
    match key {
        "sasl.enabled.mechanisms" => {
            mechanisms(e)?;
            keys.mechanisms = Some(e);
        }
        "plain.sasl.jaas.config" => keys.plain_jaas = Some(e),
        k if SSL_KEYS.contains(&k) => keys.ssl.push((k, e)),
        k if UNSUPPORTED_SSL_KEYS.iter().any(|(u, _)| *u == k) => return Err(unsupported_ssl(e)),
        _ => return Err(unknown()),
    }
    Ok(())
}

/// The mechanisms of a `sasl.enabled.mechanisms` value.
fn mechanisms(e: Entry<'_>) -> Result<Vec<Mechanism>, PropertiesError> {
    let mut out = Vec::new();
    for name in e.list() {
        let m = Mechanism::from_name(&name.to_ascii_uppercase()).ok_or_else(|| {
            e.unsupported(format!(
                "mechanism {name} (this build has PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER)"
            ))
        })?;
        out.push(m);
    }
    if out.is_empty() {
        return Err(e.invalid("no mechanism given"));
    }
    Ok(out)
}

/// The node's listeners, the first one first, with their security.
fn build_listeners(
    parsed: &Parsed<'_>,
    base: &BrokerConfig,
    read_file: &mut dyn FnMut(&Path) -> std::io::Result<Vec<u8>>,
) -> Result<Vec<ListenerConfig>, PropertiesError> {
    let mut out: Vec<ListenerConfig> = match &parsed.listeners {
        None => base.listeners(),
        Some((endpoints, e)) => {
            let mut out = Vec::new();
            for ep in endpoints {
                if parsed.controller_listeners.contains(&ep.name) {
                    continue;
                }
                let protocol = match parsed.protocol_map.iter().find(|(n, _)| *n == ep.name) {
                    Some((_, p)) => *p,
                    None => listeners::protocol(&ep.name).map_err(|_| {
                        e.invalid(format!(
                            "listener {} has no security protocol; map it in listener.security.protocol.map",
                            ep.name
                        ))
                    })?,
                };
                let listen = ep.bind_addr().map_err(|r| e.invalid(r))?;
                out.push(
                    ListenerConfig::new(ep.name.clone(), ListenerSecurity::new(protocol))
                        .with_listen(listen),
                );
            }
            out
        }
    };
    if let Some((advertised, e)) = &parsed.advertised {
        for ad in advertised {
            let l = out
                .iter_mut()
                .find(|l| l.name.eq_ignore_ascii_case(&ad.name))
                .ok_or_else(|| e.invalid(format!("{} is not a broker listener", ad.name)))?;
            l.advertised_host = (!ad.host.is_empty()).then(|| ad.host.clone());
            l.advertised_port = (ad.port != 0).then_some(ad.port);
        }
    }
    for (name, keys) in &parsed.per_listener {
        if !out.iter().any(|l| l.name.eq_ignore_ascii_case(name)) {
            let first = keys
                .mechanisms
                .or(keys.plain_jaas)
                .or(keys.ssl.first().map(|(_, e)| *e));
            if let Some(e) = first {
                return Err(e.invalid(format!("there is no listener {name}")));
            }
        }
    }
    for l in &mut out {
        let own = parsed
            .per_listener
            .iter()
            .find(|(n, _)| l.name.eq_ignore_ascii_case(n))
            .map(|(_, k)| k);
        security(l, own, parsed, read_file)?;
    }
    Ok(out)
}

/// Sets a listener's SASL and TLS settings from its own keys and the global ones.
fn security(
    l: &mut ListenerConfig,
    own: Option<&ListenerKeys<'_>>,
    parsed: &Parsed<'_>,
    read_file: &mut dyn FnMut(&Path) -> std::io::Result<Vec<u8>>,
) -> Result<(), PropertiesError> {
    let protocol = l.security.protocol;
    let plain_jaas = own.and_then(|k| k.plain_jaas);
    if protocol.uses_sasl() {
        let entry = own.and_then(|k| k.mechanisms).or(parsed.mechanisms).ok_or_else(|| {
            PropertiesError::Inconsistent(format!(
                "listener {} ({protocol}) needs sasl.enabled.mechanisms or listener.name.{}.sasl.enabled.mechanisms",
                l.name,
                l.name.to_ascii_lowercase()
            ))
        })?;
        let enabled = mechanisms(entry)?;
        let mut sasl = SaslSettings::new(enabled.iter().copied());
        if let Some(e) = plain_jaas {
            if !enabled.contains(&Mechanism::Plain) {
                return Err(e.invalid(format!("listener {} does not enable PLAIN", l.name)));
            }
            for u in users::plain_jaas_users(e.value).map_err(|r| e.invalid(r))? {
                sasl = sasl.with_plain_user(u.name, u.password);
            }
        }
        for (m, u) in parsed
            .scram_users
            .iter()
            .filter(|(m, _)| enabled.contains(m))
        {
            sasl = sasl
                .with_scram_user(*m, u.name.clone(), &u.password)
                .map_err(|err| {
                    PropertiesError::Inconsistent(format!("scram.users: user {}: {err}", u.name))
                })?;
        }
        if let Some(max) = parsed.max_reauth {
            sasl = sasl.with_connections_max_reauth(max);
        }
        l.security.sasl = sasl;
    } else if let Some(e) = plain_jaas {
        return Err(e.invalid(format!(
            "listener {} ({protocol}) does not use SASL",
            l.name
        )));
    }
    if protocol.uses_tls() {
        let own_key =
            |key: &str| own.and_then(|k| k.ssl.iter().find(|(k, _)| *k == key).map(|(_, e)| *e));
        // A listener's own key wins over the global one; a store's source (file or
        // inline PEM) is taken whole from the listener if it gives any part of it.
        let ssl = |key: &str| -> Option<Entry<'_>> {
            let group = [KEYSTORE_SOURCES, TRUSTSTORE_SOURCES]
                .into_iter()
                .find(|g| g.contains(&key))
                .unwrap_or(std::slice::from_ref(&key));
            if group.iter().any(|k| own_key(k).is_some()) {
                own_key(key)
            } else {
                parsed.ssl.iter().find(|e| e.key == key).copied()
            }
        };
        l.security.tls = Some(tls(&l.name, &ssl, read_file)?);
    }
    Ok(())
}

/// A listener's TLS settings from its SSL keys (`ssl` looks one up, the
/// listener's own first).
fn tls<'a>(
    listener: &str,
    ssl: &dyn Fn(&str) -> Option<Entry<'a>>,
    read_file: &mut dyn FnMut(&Path) -> std::io::Result<Vec<u8>>,
) -> Result<TlsSettings, PropertiesError> {
    for key in ["ssl.keystore.type", "ssl.truststore.type"] {
        if let Some(e) = ssl(key) {
            if !e.value.trim().eq_ignore_ascii_case("PEM") {
                return Err(e.unsupported("only PEM stores (KIP-651) are supported"));
            }
        }
    }
    let mut read = |e: Entry<'_>| {
        read_file(Path::new(e.value.trim()))
            .map_err(|err| e.invalid(format!("reading {}: {err}", e.value.trim())))
    };
    let settings = match (
        ssl("ssl.keystore.location"),
        ssl("ssl.keystore.certificate.chain"),
        ssl("ssl.keystore.key"),
    ) {
        (Some(location), None, None) => {
            let pem = read(location)?;
            TlsSettings::from_pem(&pem, &pem).map_err(|err| location.invalid(err.to_string()))?
        }
        (None, Some(chain), Some(key)) => {
            let chain_pem = normalize_pem(chain.value);
            TlsSettings::from_pem(chain_pem.as_bytes(), normalize_pem(key.value).as_bytes())
                .map_err(|err| key.invalid(err.to_string()))?
        }
        (Some(location), _, _) => {
            return Err(location.invalid(
                "give either ssl.keystore.location or ssl.keystore.certificate.chain with ssl.keystore.key",
            ))
        }
        (None, Some(e), None) | (None, None, Some(e)) => {
            return Err(e.invalid(
                "ssl.keystore.certificate.chain and ssl.keystore.key go together",
            ))
        }
        (None, None, None) => {
            return Err(PropertiesError::Inconsistent(format!(
                "listener {listener} uses TLS and needs ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key"
            )))
        }
    };
    let auth = match ssl("ssl.client.auth") {
        None => ClientAuth::None,
        Some(e) => match e.value.trim().to_ascii_lowercase().as_str() {
            "none" => ClientAuth::None,
            "requested" => ClientAuth::Requested,
            "required" => ClientAuth::Required,
            _ => return Err(e.invalid("expected none, requested or required")),
        },
    };
    if auth == ClientAuth::None {
        return Ok(settings);
    }
    let cas = match (
        ssl("ssl.truststore.location"),
        ssl("ssl.truststore.certificates"),
    ) {
        (Some(location), None) => read(location)?,
        (None, Some(inline)) => normalize_pem(inline.value).into_bytes(),
        (Some(e), Some(_)) => {
            return Err(e.invalid(
                "give either ssl.truststore.location or ssl.truststore.certificates",
            ))
        }
        (None, None) => {
            return Err(PropertiesError::Inconsistent(format!(
                "listener {listener} asks clients for certificates and needs ssl.truststore.location or ssl.truststore.certificates"
            )))
        }
    };
    let e = ssl("ssl.client.auth").expect("client auth was given");
    settings
        .with_client_auth(auth, &cas)
        .map_err(|err| e.invalid(err.to_string()))
}

/// PEM text as a properties value often arrives: joined from continuation lines
/// into one line. Puts the `-----BEGIN ...-----` and `-----END ...-----` markers
/// back on lines of their own; text that has line breaks is kept as it is.
fn normalize_pem(value: &str) -> String {
    if value.contains('\n') {
        return value.to_owned();
    }
    let mut out = String::with_capacity(value.len() + 16);
    let mut rest = value;
    let marker = |s: &str| {
        [s.find("-----BEGIN "), s.find("-----END ")]
            .into_iter()
            .flatten()
            .min()
    };
    while let Some(start) = marker(rest) {
        let after_dashes = start + 5;
        let Some(close) = rest[after_dashes..].find("-----") else {
            break;
        };
        let end = after_dashes + close + 5;
        let body = rest[..start].trim();
        if !body.is_empty() {
            out.push_str(body);
            out.push('\n');
        }
        out.push_str(&rest[start..end]);
        out.push('\n');
        rest = &rest[end..];
    }
    out.push_str(rest.trim());
    out
}

/// `inter.broker.listener.name` must name a listener, and
/// `security.inter.broker.protocol` must be one a listener uses.
fn check_inter_broker(
    parsed: &Parsed<'_>,
    listeners: &[ListenerConfig],
) -> Result<(), PropertiesError> {
    if let Some(e) = parsed.inter_broker_listener {
        let name = e.value.trim();
        if !listeners.iter().any(|l| l.name.eq_ignore_ascii_case(name)) {
            return Err(e.invalid(format!("there is no listener {name}")));
        }
    }
    if let Some((p, e)) = parsed.inter_broker_protocol {
        if !listeners.iter().any(|l| l.security.protocol == p) {
            return Err(e.invalid(format!("no listener uses {p}")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
