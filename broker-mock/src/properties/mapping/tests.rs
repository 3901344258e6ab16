use std::collections::HashMap;
use std::path::PathBuf;

use baton_protocol::sasl::{CredentialStore, ScramHash};

use super::*;
use crate::properties::parse;

/// A self-signed certificate and key, as PEM.
fn pem() -> (String, String) {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    (cert.cert.pem(), cert.signing_key.serialize_pem())
}

/// Maps `text` with `files` as the file system.
fn map(text: &str, files: &HashMap<PathBuf, Vec<u8>>) -> Result<BrokerConfig, PropertiesError> {
    let props = parse(text)?;
    broker_config(&props, BrokerConfig::default(), &mut |path: &Path| {
        files
            .get(path)
            .cloned()
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
    })
}

fn map_ok(text: &str) -> BrokerConfig {
    map(text, &HashMap::new()).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn map_err(text: &str) -> String {
    match map(text, &HashMap::new()) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

/// PEM as a properties value: one continuation line per PEM line, with `\n`
/// escapes, as Kafka's docs write it.
fn escaped(pem: &str) -> String {
    pem.lines()
        .map(|l| format!("{l}\\n"))
        .collect::<Vec<_>>()
        .join("\\\n    ")
}

#[test]
fn a_secured_multi_listener_node() {
    let (cert, key) = pem();
    let mut files = HashMap::new();
    files.insert(
        PathBuf::from("/pki/internal.pem"),
        format!("{key}{cert}").into_bytes(),
    );
    files.insert(PathBuf::from("/pki/ca.pem"), cert.clone().into_bytes());
    let text = format!(
        "# a Kafka-style file
process.roles=broker,controller
node.id=7
listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,INTERNAL://127.0.0.1:0,CONTROLLER://127.0.0.1:0
advertised.listeners=SASL_SSL://kafka.example:9094,PLAINTEXT://:0
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,INTERNAL:SSL,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=INTERNAL
log.dirs=/var/lib/baton
num.partitions=3
auto.create.topics.enable=true
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\
    username=\"admin\" password=\"admin-secret\" user_alice=\"alice-secret\";
scram.users=SCRAM-SHA-512:carol=carol-secret,SCRAM-SHA-256:bob=bob-secret
ssl.keystore.type=PEM
ssl.keystore.certificate.chain={chain}
ssl.keystore.key={key_value}
listener.name.internal.ssl.keystore.location=/pki/internal.pem
listener.name.internal.ssl.client.auth=required
listener.name.internal.ssl.truststore.type=PEM
listener.name.internal.ssl.truststore.location=/pki/ca.pem
socket.request.max.bytes=2097152
connections.max.reauth.ms=60000
message.max.bytes=4194304
max.connections=100
max.connections.per.ip=10
baton.max.topics=50
baton.max.aborted.txns.per.partition=7
baton.max.transactional.ids=8
baton.max.partitions.per.transaction=9
baton.max.pending.txn.offsets=11
transaction.max.timeout.ms=60000
transaction.state.log.num.partitions=6
offsets.topic.replication.factor=1
num.network.threads=3
",
        chain = escaped(&cert),
        key_value = escaped(&key),
    );
    let config = map(&text, &files).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.node_id, 7);
    assert_eq!(config.data_dir, Some(PathBuf::from("/var/lib/baton")));
    assert_eq!(config.default_num_partitions, 3);
    assert!(config.auto_create_topics);
    assert_eq!(
        config.max_frame_bytes, 4_194_304,
        "message.max.bytes raised it"
    );
    assert_eq!(config.limits.max_connections, 100);
    assert_eq!(config.limits.max_connections_per_ip, 10);
    assert_eq!(config.limits.max_topics, 50);
    assert_eq!(config.limits.max_aborted_txns_per_partition, 7);
    assert_eq!(config.limits.max_transactional_ids, 8);
    assert_eq!(config.limits.max_partitions_per_transaction, 9);
    assert_eq!(config.limits.max_pending_txn_offsets, 11);
    assert_eq!(config.transaction_max_timeout_ms, 60_000);
    assert_eq!(config.transaction_state_partitions, Some(6));

    let listeners = config.listeners();
    let names: Vec<_> = listeners.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(
        names,
        ["PLAINTEXT", "SASL_SSL", "INTERNAL"],
        "CONTROLLER is not bound"
    );
    assert_eq!(listeners[0].security.protocol, SecurityProtocol::Plaintext);
    assert_eq!(listeners[0].advertised_host, None);
    assert_eq!(listeners[0].advertised_port, None);

    let sasl_ssl = &listeners[1];
    assert_eq!(sasl_ssl.security.protocol, SecurityProtocol::SaslSsl);
    assert_eq!(sasl_ssl.advertised_host.as_deref(), Some("kafka.example"));
    assert_eq!(sasl_ssl.advertised_port, Some(9094));
    assert_eq!(
        sasl_ssl.security.sasl.mechanisms(),
        [
            Mechanism::Plain,
            Mechanism::ScramSha256,
            Mechanism::ScramSha512
        ]
    );
    assert_eq!(
        sasl_ssl.security.sasl.connections_max_reauth(),
        std::time::Duration::from_secs(60)
    );
    let users = &sasl_ssl.security.sasl;
    assert!(users.plain_password("alice").is_some());
    assert!(
        users.plain_password("admin").is_none(),
        "username/password are not users"
    );
    let scram: Vec<_> = sasl_ssl
        .security
        .sasl
        .scram_users()
        .iter()
        .map(|(u, c)| (u.as_str(), c.hash()))
        .collect();
    assert_eq!(
        scram,
        [("carol", ScramHash::Sha512), ("bob", ScramHash::Sha256)]
    );
    sasl_ssl
        .security
        .validate()
        .unwrap()
        .expect("TLS from inline PEM");

    let internal = &listeners[2];
    assert_eq!(internal.security.protocol, SecurityProtocol::Ssl);
    let tls = internal.security.tls.as_ref().unwrap();
    assert!(format!("{tls:?}").contains("Required"));
    internal
        .security
        .validate()
        .unwrap()
        .expect("TLS from PEM files");
    assert!(!format!("{config:?}").contains("secret"));
}

#[test]
fn pem_joined_without_line_breaks_is_accepted() {
    let (cert, key) = pem();
    let joined = |p: &str| p.lines().collect::<Vec<_>>().join("\\\n  ");
    let text = format!(
        "listeners=SSL://127.0.0.1:0\nssl.keystore.certificate.chain={}\nssl.keystore.key={}\n",
        joined(&cert),
        joined(&key)
    );
    let config = map_ok(&text);
    config.security.validate().unwrap().expect("TLS");
}

#[test]
fn without_listeners_the_base_listener_stays_and_keys_apply_to_it() {
    let config = map_ok("node.id=1\nlog.dir=/d\nlog.segment.bytes=1048576\n");
    assert_eq!(config.listeners().len(), 1);
    assert_eq!(config.listen, BrokerConfig::default().listen);
    assert_eq!(config.segment_bytes, 1_048_576);
    let config = map_ok("listeners=PLAINTEXT://127.0.0.1:0\n");
    assert_eq!(config.listener_name.as_deref(), Some("PLAINTEXT"));
}

#[test]
fn unknown_and_malformed_properties_name_key_and_line() {
    for (text, wanted) in [
        (
            "num.partitions=1\nlog.flush.mystery=1\n",
            "line 2: unknown property log.flush.mystery",
        ),
        (
            "num.partitions=zero\n",
            "line 1: num.partitions: expected an integer",
        ),
        ("num.partitions=0\n", "line 1: num.partitions"),
        ("auto.create.topics.enable=yes\n", "expected true or false"),
        ("listeners=PLAINTEXT:/127.0.0.1:1\n", "line 1: listeners"),
        (
            "listeners=PLAINTEXT://kafka.example:9092\n",
            "not an IP address",
        ),
        (
            "node.id=1\nbroker.id=2\n",
            "line 2: broker.id: 2 differs from node.id",
        ),
        ("log.dirs=/a,/b\n", "one log directory only"),
        (
            "listener.name.x.unknown.key=1\n",
            "unknown property listener.name.x.unknown.key",
        ),
        ("listener.name.nolistener=1\n", "unknown property"),
        ("process.roles=controller\n", "must include broker"),
        ("offsets.topic.replication.factor=3\n", "one replica"),
        (
            "transaction.max.timeout.ms=0\n",
            "line 1: transaction.max.timeout.ms: expected an integer",
        ),
        (
            "baton.max.transactional.ids=0\n",
            "line 1: baton.max.transactional.ids: expected an integer",
        ),
        (
            "transactional.id.expiration.ms=1000\n",
            "unknown property transactional.id.expiration.ms",
        ),
        ("bad=\\u00zz\n", "line 1: malformed \\u escape"),
        ("a=1\na=2\n", "line 2: a is already set on line 1"),
    ] {
        let err = map_err(text);
        assert!(err.contains(wanted), "{text:?}: {err}");
    }
}

#[test]
fn listener_and_security_combinations_are_checked() {
    for (text, wanted) in [
        ("listeners=INTERNAL://127.0.0.1:0\n", "listener INTERNAL has no security protocol"),
        (
            "listeners=PLAINTEXT://127.0.0.1:0\nadvertised.listeners=OTHER://h:1\n",
            "OTHER is not a broker listener",
        ),
        ("listeners=SASL_PLAINTEXT://127.0.0.1:0\n", "needs sasl.enabled.mechanisms"),
        (
            "listeners=SASL_PLAINTEXT://127.0.0.1:0\nsasl.enabled.mechanisms=GSSAPI\n",
            "sasl.enabled.mechanisms is not supported by this build: mechanism GSSAPI",
        ),
        ("listeners=SSL://127.0.0.1:0\n", "listener SSL uses TLS and needs ssl.keystore.location"),
        (
            "listeners=SSL://127.0.0.1:0\nssl.keystore.type=JKS\nssl.keystore.location=/k.jks\n",
            "only PEM stores",
        ),
        (
            "listeners=SSL://127.0.0.1:0\nssl.keystore.location=/missing.pem\n",
            "reading /missing.pem",
        ),
        ("ssl.key.password=pw\n", "encrypted private keys are not supported"),
        (
            "listener.name.plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"s3cret\";\n",
            "does not use SASL",
        ),
        (
            "listeners=SASL_PLAINTEXT://127.0.0.1:0\nsasl.enabled.mechanisms=SCRAM-SHA-512\nlistener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"s3cret\";\n",
            "does not enable PLAIN",
        ),
        (
            "listeners=SASL_PLAINTEXT://127.0.0.1:0\nsasl.enabled.mechanisms=PLAIN\nlistener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"s3cret;\n",
            "unclosed quote",
        ),
        ("listener.name.other.sasl.enabled.mechanisms=PLAIN\n", "there is no listener OTHER"),
        ("inter.broker.listener.name=REPLICATION\n", "there is no listener REPLICATION"),
        ("security.inter.broker.protocol=SSL\n", "no listener uses SSL"),
    ] {
        let err = map_err(text);
        assert!(err.contains(wanted), "{text:?}: {err}");
        assert!(!err.contains("s3cret"), "{err}");
    }
}

#[test]
fn standard_authorizer_with_super_users_and_fallback() {
    let config = map_ok(concat!(
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n",
        "super.users=User:admin; User:ops\n",
        "allow.everyone.if.no.acl.found=true\n",
    ));
    let authorizer = config.authorizer.expect("authorizer on");
    assert_eq!(authorizer.super_users, ["User:admin", "User:ops"]);
    assert!(authorizer.allow_everyone_if_no_acl_found);

    let config =
        map_ok("authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n");
    let authorizer = config.authorizer.expect("authorizer on");
    assert!(authorizer.super_users.is_empty());
    assert!(!authorizer.allow_everyone_if_no_acl_found);

    assert!(map_ok("authorizer.class.name=\n").authorizer.is_none());
}

#[test]
fn authorizer_keys_are_checked() {
    for (text, wanted) in [
        (
            "super.users=User:admin;User:ops\n",
            "line 1: super.users needs authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        ),
        (
            "allow.everyone.if.no.acl.found=true\n",
            "allow.everyone.if.no.acl.found needs authorizer.class.name",
        ),
        (
            "authorizer.class.name=kafka.security.authorizer.AclAuthorizer\n",
            "only org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        ),
        ("super.users=admin\n", "not a principal"),
        ("connections.max.reauth.ms=-1\n", "expected an integer"),
    ] {
        let err = map_err(text);
        assert!(err.contains(wanted), "{text:?}: {err}");
    }
}

#[test]
fn normalize_pem_restores_markers() {
    let joined = "-----BEGIN CERTIFICATE-----QUJD-----END CERTIFICATE----------BEGIN CERTIFICATE-----REVG-----END CERTIFICATE-----";
    assert_eq!(
        normalize_pem(joined),
        "-----BEGIN CERTIFICATE-----\nQUJD\n-----END CERTIFICATE-----\n-----BEGIN CERTIFICATE-----\nREVG\n-----END CERTIFICATE-----\n"
    );
    assert_eq!(normalize_pem("a\nb"), "a\nb");
}

#[test]
fn log_cleaner_settings_apply() {
    let config = map_ok(
        "log.cleaner.enable=false\nlog.cleaner.backoff.ms=250\nlog.cleaner.min.cleanable.ratio=0.25\n\
         log.cleaner.delete.retention.ms=1000\nlog.cleaner.dedupe.buffer.size=1048576\n",
    );
    assert!(!config.cleaner.enable);
    assert_eq!(config.cleaner.backoff_ms, 250);
    assert_eq!(config.cleaner.min_cleanable_ratio, 0.25);
    assert_eq!(config.cleaner.delete_retention_ms, 1000);
    assert_eq!(config.limits.cleaner_dedupe_buffer_bytes, 1 << 20);
    let defaults = map_ok("node.id=1\n");
    assert!(defaults.cleaner.enable);
    assert_eq!(defaults.cleaner, crate::CleanerConfig::default());
    assert!(map_err("log.cleaner.min.cleanable.ratio=1.5\n")
        .contains("log.cleaner.min.cleanable.ratio"));
    assert!(map_err("log.cleaner.enable=maybe\n").contains("log.cleaner.enable"));
    assert!(
        map_err("log.cleaner.dedupe.buffer.size=10\n").contains("log.cleaner.dedupe.buffer.size")
    );
}

#[test]
fn retention_keys_set_the_retention_defaults_with_kafkas_precedence() {
    use std::time::Duration;
    let config = map_ok("log.retention.hours=2\n");
    assert_eq!(config.retention.retention_ms, Some(2 * 3_600_000));
    // ms over minutes over hours, whatever the order in the file.
    let config = map_ok("log.retention.ms=1500\nlog.retention.minutes=3\nlog.retention.hours=1\n");
    assert_eq!(config.retention.retention_ms, Some(1_500));
    let config = map_ok("log.retention.hours=1\nlog.retention.minutes=3\n");
    assert_eq!(config.retention.retention_ms, Some(180_000));
    // -1 keeps data forever, as in Kafka.
    let config = map_ok("log.retention.ms=-1\nlog.retention.hours=5\n");
    assert_eq!(config.retention.retention_ms, None);
    let config = map_ok(
        "log.retention.bytes=1048576\nlog.roll.hours=1\nlog.roll.ms=250\n\
         log.retention.check.interval.ms=50\n",
    );
    assert_eq!(config.retention.retention_bytes, Some(1_048_576));
    assert_eq!(config.retention.roll_ms, Some(250));
    assert_eq!(config.retention.check_interval, Duration::from_millis(50));
    let config = map_ok("log.retention.bytes=-1\nlog.roll.hours=3\n");
    assert_eq!(config.retention.retention_bytes, None);
    assert_eq!(config.retention.roll_ms, Some(3 * 3_600_000));
    // Nothing set: Kafka's defaults, 7 days and no size limit, checked every 5 minutes.
    let config = map_ok("node.id=1\n");
    assert_eq!(config.retention, crate::LogRetention::default());
    assert_eq!(config.retention.retention_ms, Some(604_800_000));
    assert_eq!(config.retention.retention_bytes, None);
    assert_eq!(config.retention.check_interval, Duration::from_secs(300));
    for bad in [
        "log.retention.ms=-2\n",
        "log.retention.hours=x\n",
        "log.roll.ms=0\n",
        "log.retention.check.interval.ms=0\n",
    ] {
        let e = map_err(bad);
        assert!(e.contains(bad.split('=').next().unwrap()), "{e}");
    }
}

#[test]
fn consumer_group_protocol_keys() {
    let c = map_ok(
        "group.consumer.session.timeout.ms=3000\n\
         group.consumer.heartbeat.interval.ms=250\n\
         group.consumer.max.size=7\n\
         group.consumer.migration.policy=UPGRADE\n",
    );
    assert_eq!(
        c.groups.consumer_migration_policy,
        crate::group::MigrationPolicy::Upgrade
    );
    let e = map_err("group.consumer.migration.policy=sideways\n");
    assert!(e.contains("group.consumer.migration.policy"), "{e}");
    assert_eq!(c.groups.consumer_session_timeout_ms, 3000);
    assert_eq!(c.groups.consumer_heartbeat_interval_ms, 250);
    assert_eq!(c.groups.consumer_max_size, 7);
    let e = map_err("group.consumer.max.size=0\n");
    assert!(e.contains("group.consumer.max.size"), "{e}");
}

#[test]
fn rack_replica_selector_and_fetch_session_slots() {
    let config = map_ok(
        "broker.rack=eu-west-1a\n\
         replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector\n\
         max.incremental.fetch.session.cache.slots=10\n\
         baton.max.fetch.session.partitions=500\n",
    );
    assert_eq!(config.rack.as_deref(), Some("eu-west-1a"));
    assert_eq!(
        config.replica_selector,
        crate::replica_selector::ReplicaSelector::RackAware
    );
    assert_eq!(config.limits.max_fetch_sessions, 10);
    assert_eq!(config.limits.max_fetch_session_partitions, 500);
    let config = map_ok(
        "broker.rack=\nreplica.selector.class=\nmax.incremental.fetch.session.cache.slots=0\n",
    );
    assert_eq!(config.rack, None);
    assert_eq!(
        config.replica_selector,
        crate::replica_selector::ReplicaSelector::LeaderOnly
    );
    assert_eq!(config.limits.max_fetch_sessions, 0, "0 turns sessions off");
    let err = map_err("replica.selector.class=com.example.Nearest\n");
    assert!(err.contains("RackAwareReplicaSelector"), "{err}");
    let err = map_err(&format!("broker.rack={}\n", "r".repeat(2000)));
    assert!(err.contains("broker.rack"), "{err}");
}
