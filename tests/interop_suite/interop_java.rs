//! The Java client (`kafka-clients`) and Kafka's own tools (`kafka-tools`) against
//! baton-broker: a single in-process `Broker` and the in-process 3-node `Cluster`.
//!
//! The release is the one `tests/apache-kafka/pom.xml` pins (installed by
//! `apache_kafka_util`). The harness `tests/interop/java/BatonJava.java` prints one
//! `RESULT {json}` line per run; the Verifiable tools print one JSON event per line.
//! Apache Kafka's clients are the referee: a failure here is a broker bug to fix in
//! `broker-mock/`, never something to work around in the test. At most two JVMs run
//! at once, each with a 256 MiB heap.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::apache_kafka_util::kafka_version;
use crate::interop::leaders_and_a_follower;
use crate::interop_java_util::mixed_group::{self, Strategy};
use crate::interop_java_util::{
    field, harness, harness_secured, int, java, result, start_harness, Jvm,
};
use baton_broker::{Broker, BrokerConfig, Cluster};
use baton_kafka::{Admin, Client, NewTopic};
use baton_testkit::security::{ClientSecurity, Pki, PLAIN_LOGIN, SCRAM_SHA512_LOGIN};
use baton_testkit::topic_name;
use tokio::runtime::Runtime;

/// Records per codec in the client tests.
const PER_CODEC: usize = 2_000;
/// The codecs of the producer test, `none` first.
const CODECS: &str = "none,gzip,snappy,lz4,zstd";
/// Partitions of the client tests' topic.
const PARTITIONS: i32 = 3;
/// Records per codec in the SASL_SSL test.
const SECURED_PER_CODEC: usize = 1_000;

/// The multi-threaded runtime (2 workers) the synchronous interop tests drive
/// the broker and Baton's client on.
pub(crate) fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

async fn create_topic(bootstrap: Vec<String>, topic: &str, partitions: i32, rf: i16) {
    let client = Client::builder(bootstrap).build().await.expect("client");
    Admin::new(&client)
        .create_topics([NewTopic::new(topic, partitions, rf)])
        .await
        .expect("topic created");
}

/// Produces with every codec, reads everything back with `assign` and with a
/// classic group (which commits), then runs every AdminClient call; asserts on
/// the results. `brokers` is how many brokers the Java client must see.
fn java_client_round(bootstrap: &str, topic: &str, brokers: i64) {
    let codecs = CODECS.split(',').count();
    let total = (PER_CODEC * codecs) as i64;
    let produced = harness(
        "produce",
        &[bootstrap, topic, CODECS, &PER_CODEC.to_string()],
    );
    assert_eq!(int(&produced, "acked"), Some(total), "{produced}");
    assert_eq!(int(&produced, "partitions"), Some(PARTITIONS as i64));

    let assigned = harness("assign", &[bootstrap, topic, &total.to_string()]);
    assert_eq!(
        int(&assigned, "distinct"),
        Some(total),
        "assign: {assigned}"
    );
    assert_eq!(int(&assigned, "mismatched"), Some(0), "assign: {assigned}");

    let group = format!("{topic}-group");
    let subscribed = harness("subscribe", &[bootstrap, topic, &group, &total.to_string()]);
    assert_eq!(int(&subscribed, "distinct"), Some(total), "{subscribed}");
    assert_eq!(int(&subscribed, "mismatched"), Some(0), "{subscribed}");

    let admin = harness("admin", &[bootstrap, topic, &group]);
    let yes = |k: &str| assert_eq!(field(&admin, k), Some("true"), "{k}: {admin}");
    yes("listed_created");
    yes("listed_existing");
    yes("group_listed");
    yes("deleted");
    assert_eq!(int(&admin, "described_partitions"), Some(PARTITIONS as i64));
    assert_eq!(int(&admin, "described_replicas"), Some(brokers), "{admin}");
    assert_eq!(int(&admin, "cluster_nodes"), Some(brokers), "{admin}");
    assert_eq!(field(&admin, "group_state"), Some("Empty"), "{admin}");
    assert_eq!(int(&admin, "group_members"), Some(0), "{admin}");
    assert_eq!(int(&admin, "committed_sum"), Some(total), "{admin}");
    assert_eq!(int(&admin, "latest_sum"), Some(total), "{admin}");
    assert_eq!(int(&admin, "earliest_sum"), Some(0), "{admin}");
    // deleteRecords to one below each partition's end (every partition has records).
    let deleted_to = total - PARTITIONS as i64;
    assert_eq!(
        int(&admin, "delete_records_low_sum"),
        Some(deleted_to),
        "{admin}"
    );
    assert_eq!(
        int(&admin, "earliest_after_delete_sum"),
        Some(deleted_to),
        "{admin}"
    );
    assert_eq!(field(&admin, "retention_ms"), Some("3600000"), "{admin}");
    assert_eq!(
        field(&admin, "retention_source"),
        Some("DYNAMIC_TOPIC_CONFIG"),
        "{admin}"
    );
    assert_eq!(field(&admin, "cleanup_policy"), Some("delete"), "{admin}");
    assert_eq!(
        field(&admin, "cleanup_source"),
        Some("DEFAULT_CONFIG"),
        "{admin}"
    );
    assert_eq!(
        field(&admin, "broker_node_id"),
        field(&admin, "controller"),
        "{admin}"
    );
    println!(
        "Java client {}: produce ({CODECS}, idempotent, acks=all), assign, subscribe \
         (classic), admin: {admin}",
        kafka_version()
    );
}

#[test]
fn java_client_against_a_single_broker() {
    let rt = runtime();
    let broker = rt
        .block_on(Broker::start(BrokerConfig::in_memory()))
        .expect("broker starts");
    let topic = topic_name("java-single");
    rt.block_on(create_topic(
        vec![broker.bootstrap()],
        &topic,
        PARTITIONS,
        1,
    ));
    java_client_round(&broker.bootstrap(), &topic, 1);
    rt.block_on(broker.shutdown());
}

/// Issue 16: the Java client against a broker whose only listener is
/// `SASL_SSL` (PEM truststore with the test CA, host name verification on).
/// It produces idempotently with SCRAM-SHA-512 and reads everything back with
/// `assign` logged in with PLAIN and with a classic group logged in with
/// SCRAM-SHA-512: every record once, in order per partition, value matching
/// key. A wrong password is reported as an authentication failure, and the
/// broker still serves the right one.
#[test]
fn java_client_over_sasl_ssl() {
    let pki = Pki::generate();
    let rt = runtime();
    let broker = rt
        .block_on(Broker::start(
            BrokerConfig::in_memory().with_security(pki.sasl_ssl_listener()),
        ))
        .expect("broker starts");
    let bootstrap = broker.bootstrap();
    let scram = ClientSecurity::sasl_ssl(&pki, SCRAM_SHA512_LOGIN);
    let plain = ClientSecurity::sasl_ssl(&pki, PLAIN_LOGIN);
    let topic = topic_name("java-sasl-ssl");
    rt.block_on(async {
        let client = scram
            .apply(Client::builder([bootstrap.clone()]))
            .build()
            .await
            .expect("Baton connects over SASL_SSL");
        Admin::new(&client)
            .create_topics([NewTopic::new(&topic, PARTITIONS, 1)])
            .await
            .expect("topic created");
    });

    let codecs = "none,lz4";
    let total = (SECURED_PER_CODEC * codecs.split(',').count()) as i64;
    let produced = harness_secured(
        "produce",
        &[&bootstrap, &topic, codecs, &SECURED_PER_CODEC.to_string()],
        &scram,
    );
    assert_eq!(int(&produced, "acked"), Some(total), "{produced}");
    let group = format!("{topic}-group");
    for (mode, security, args) in [
        ("assign", &plain, vec![bootstrap.as_str(), &topic]),
        (
            "subscribe",
            &scram,
            vec![bootstrap.as_str(), &topic, &group],
        ),
    ] {
        let expected = total.to_string();
        let args = [&args[..], &[expected.as_str()]].concat();
        let consumed = harness_secured(mode, &args, security);
        for (key, want) in [
            ("distinct", total),
            ("records", total),
            ("mismatched", 0),
            ("reordered", 0),
        ] {
            assert_eq!(int(&consumed, key), Some(want), "{mode} {key}: {consumed}");
        }
    }

    let wrong = ClientSecurity::sasl_ssl(&pki, SCRAM_SHA512_LOGIN.with_password("not-it"));
    let refused = harness_secured("auth-check", &[&bootstrap], &wrong);
    assert_eq!(field(&refused, "authenticated"), Some("false"), "{refused}");
    assert!(
        field(&refused, "auth_error").is_some_and(|e| e.contains("SaslAuthenticationException")),
        "{refused}"
    );
    let accepted = harness_secured("auth-check", &[&bootstrap], &scram);
    assert_eq!(
        field(&accepted, "authenticated"),
        Some("true"),
        "{accepted}"
    );
    rt.block_on(broker.shutdown());
}

#[test]
fn java_client_against_a_cluster() {
    let rt = runtime();
    let cluster = rt
        .block_on(Cluster::builder().brokers(3).in_memory().start())
        .expect("cluster starts");
    let topic = topic_name("java-cluster");
    rt.block_on(create_topic(
        cluster.bootstrap_servers(),
        &topic,
        PARTITIONS,
        3,
    ));
    java_client_round(&cluster.bootstrap_servers().join(","), &topic, 3);
    rt.block_on(cluster.shutdown());
}

/// A group shared by Baton's `GroupConsumer`s and the Java client's
/// `KafkaConsumer` on baton-broker, as `apache_kafka.rs` runs it on Apache Kafka:
/// cooperative-sticky and range, each with a Baton and then a Java leader (see
/// `mixed_group::run`).
#[test]
fn group_shared_by_baton_and_java_consumers_on_a_single_broker() {
    let rt = runtime();
    let broker = rt
        .block_on(Broker::start(BrokerConfig::in_memory()))
        .expect("broker starts");
    let client = rt
        .block_on(Client::builder(vec![broker.bootstrap()]).build())
        .expect("client");
    for strategy in [Strategy::CooperativeSticky, Strategy::Range] {
        for java_leads in [false, true] {
            let summary = rt.block_on(mixed_group::run(
                &client,
                &broker.bootstrap(),
                strategy,
                java_leads,
            ));
            println!("baton-broker: {summary}");
        }
    }
    rt.block_on(broker.shutdown());
}

/// One acknowledged or consumed record of the Verifiable tools: partition, offset.
type At = (i64, i64);

/// `producer_send_success` events: where each acknowledged value landed.
fn acked(lines: &[String]) -> BTreeMap<At, String> {
    lines
        .iter()
        .filter(|l| field(l, "name") == Some("producer_send_success"))
        .map(|l| {
            let at = (int(l, "partition").unwrap(), int(l, "offset").unwrap());
            (at, field(l, "value").unwrap_or_default().to_string())
        })
        .collect()
}

/// `record_data` events (`--verbose`): every consumed record, with repeats.
fn consumed(lines: &[String]) -> Vec<(At, String)> {
    lines
        .iter()
        .filter(|l| field(l, "name") == Some("record_data"))
        .map(|l| {
            let at = (int(l, "partition").unwrap(), int(l, "offset").unwrap());
            (at, field(l, "value").unwrap_or_default().to_string())
        })
        .collect()
}

fn count(lines: &[String], name: &str) -> usize {
    lines
        .iter()
        .filter(|l| field(l, "name") == Some(name))
        .count()
}

/// Waits (up to `timeout`) until `done` holds for `jvm`'s lines.
fn wait_lines(jvm: &Jvm, timeout: Duration, done: impl Fn(&[String]) -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if done(&jvm.lines()) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    done(&jvm.lines())
}

/// Waits until `producer` has `n` more acknowledgements than now.
fn acked_at_least(producer: &Jvm, cluster: &Cluster, n: usize) {
    let base = acked(&producer.lines()).len();
    assert!(
        wait_lines(producer, Duration::from_secs(90), |l| acked(l).len()
            >= base + n),
        "the producer stalled at {base} acks\n{}\n{}",
        producer.output(),
        cluster.timeline_text()
    );
}

/// Kafka's replication system tests in miniature: VerifiableProducer (acks=all) and
/// VerifiableConsumer (classic group, `--verbose`) run while every node of a 3-node
/// cluster (on disk, `min.insync.replicas=2`) is stopped and restarted in turn, then
/// one is killed and restarted; every acknowledged record must be consumed, with its
/// value. VerifiableProducer sets `retries=0` (which also turns idempotence off), so
/// sends refused while a leader moves are reported as `producer_send_error` and are
/// expected, as in Kafka's own system tests; only acknowledged records count.
#[test]
fn verifiable_tools_lose_nothing_through_rolling_restart_and_kill() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = rt
        .block_on(
            Cluster::builder()
                .brokers(3)
                .data_dir(dir.path())
                .default_min_insync_replicas(2)
                .start(),
        )
        .expect("cluster starts");
    let topic = topic_name("verifiable");
    rt.block_on(create_topic(
        cluster.bootstrap_servers(),
        &topic,
        PARTITIONS,
        3,
    ));
    let bootstrap = cluster.bootstrap_servers().join(",");
    let tool = |class: &str, args: &[&str]| {
        let mut cmd = java(&format!("org.apache.kafka.tools.{class}"));
        cmd.args(["--bootstrap-server", &bootstrap, "--topic", &topic])
            .args(args);
        Jvm::spawn(class, cmd)
    };
    let group = format!("{topic}-group");
    let consumer = tool(
        "VerifiableConsumer",
        &[
            "--group-id",
            &group,
            "--group-protocol",
            "classic",
            "--verbose",
        ],
    );
    let producer = tool(
        "VerifiableProducer",
        &["--throughput", "300", "--acks", "-1"],
    );
    acked_at_least(&producer, &cluster, 300);
    let wait_replicated = |cluster: &Cluster| {
        rt.block_on(cluster.wait_fully_replicated(&topic, Duration::from_secs(60)))
            .unwrap_or_else(|e| panic!("{e:?}\n{}", cluster.timeline_text()));
    };
    for id in cluster.node_ids() {
        rt.block_on(cluster.node(id).stop());
        acked_at_least(&producer, &cluster, 100);
        rt.block_on(cluster.node(id).restart()).expect("restart");
        wait_replicated(&cluster);
    }
    let victim = cluster.node_ids()[0];
    cluster.node(victim).kill();
    acked_at_least(&producer, &cluster, 100);
    rt.block_on(cluster.node(victim).restart())
        .expect("restart");
    wait_replicated(&cluster);
    acked_at_least(&producer, &cluster, 100);
    producer.terminate();
    let produced = producer.wait(false);
    let acks = acked(&produced);
    let all_consumed = wait_lines(&consumer, Duration::from_secs(60), |l| {
        let got: BTreeMap<At, String> = consumed(l).into_iter().collect();
        acks.keys().all(|at| got.contains_key(at))
    });
    consumer.terminate();
    let consumer_lines = consumer.wait(false);
    let records = consumed(&consumer_lines);
    let got: BTreeMap<At, String> = records.iter().cloned().collect();
    let lost: Vec<&At> = acks.keys().filter(|at| !got.contains_key(at)).collect();
    let changed = acks
        .iter()
        .filter(|(at, v)| got.get(at).is_some_and(|g| g != *v))
        .count();
    let report = format!(
        "Kafka tools {}: acked {}, send errors {}, consumed {} ({} distinct), lost {}, \
         changed {changed}, rebalances {}",
        kafka_version(),
        acks.len(),
        count(&produced, "producer_send_error"),
        records.len(),
        got.len(),
        lost.len(),
        count(&consumer_lines, "partitions_assigned"),
    );
    println!("{report}");
    for error in produced
        .iter()
        .filter(|l| field(l, "name") == Some("producer_send_error"))
    {
        println!("{error}");
    }
    assert!(
        all_consumed && lost.is_empty() && changed == 0,
        "{report}; first lost {:?}\n{}",
        lost.first(),
        cluster.timeline_text()
    );
    rt.block_on(cluster.shutdown());
}

/// ProducerPerformance and ConsumerPerformance run to completion on a single node.
#[test]
fn perf_tools_run_to_completion() {
    const RECORDS: &str = "50000";
    let rt = runtime();
    let broker = rt
        .block_on(Broker::start(BrokerConfig::in_memory()))
        .expect("broker starts");
    let topic = topic_name("perf");
    rt.block_on(create_topic(
        vec![broker.bootstrap()],
        &topic,
        PARTITIONS,
        1,
    ));
    let bootstrap = broker.bootstrap();
    let mut cmd = java("org.apache.kafka.tools.ProducerPerformance");
    cmd.args(["--topic", &topic, "--num-records", RECORDS])
        .args([
            "--record-size",
            "100",
            "--throughput",
            "-1",
            "--producer-props",
        ])
        .arg(format!("bootstrap.servers={bootstrap}"))
        .arg("acks=all");
    let produced = Jvm::spawn("ProducerPerformance", cmd).wait(true);
    let summary = produced
        .iter()
        .find(|l| l.starts_with(&format!("{RECORDS} records sent")))
        .unwrap_or_else(|| panic!("no summary line in {produced:?}"));
    println!("ProducerPerformance {}: {summary}", kafka_version());

    let mut cmd = java("org.apache.kafka.tools.ConsumerPerformance");
    cmd.args(["--bootstrap-server", &bootstrap, "--topic", &topic])
        .args(["--messages", RECORDS, "--timeout", "30000"]);
    let consumed = Jvm::spawn("ConsumerPerformance", cmd).wait(true);
    // The header names the columns; the next line holds the figures.
    let header = consumed
        .iter()
        .position(|l| l.contains("data.consumed.in.nMsg"))
        .unwrap_or_else(|| panic!("no header in {consumed:?}"));
    let column = consumed[header]
        .split(',')
        .position(|c| c.trim() == "data.consumed.in.nMsg")
        .unwrap();
    let figures = &consumed[header + 1];
    let n = figures.split(',').nth(column).map(str::trim);
    assert_eq!(n, Some(RECORDS), "{consumed:?}");
    println!("ConsumerPerformance {}: {figures}", kafka_version());
    rt.block_on(broker.shutdown());
}

/// Apache Kafka's TransactionalMessageCopier against Apache Kafka, which proves the
/// scenario of `interop_txn_util::copier_copies_exactly_once`.
#[test]
fn transactional_message_copier_copies_exactly_once_on_apache_kafka() {
    let kafka = crate::apache_kafka_util::single_node();
    let _logs = kafka.logs_on_failure();
    crate::interop_txn_util::copier_copies_exactly_once(kafka.bootstrap());
}

/// Apache Kafka's TransactionalMessageCopier against baton-broker.
#[test]
fn transactional_message_copier_copies_exactly_once_on_baton_broker() {
    let broker = crate::interop_txn_util::BatonBroker::start();
    crate::interop_txn_util::copier_copies_exactly_once(broker.bootstrap());
}

/// The Java harness's transactional producer and isolation-level readers against
/// `bootstrap`, as `apache_kafka::java_transactional_producer_and_read_committed_consumer`
/// runs them on Apache Kafka: four transactions of 100 records (commit, abort,
/// commit, abort), each sending its group offset with `sendOffsetsToTransaction`;
/// a `read_committed` consumer reads exactly the 200 committed records, a
/// `read_uncommitted` one all 400, and the group's stable offset is the last
/// committed transaction's (300), not the aborted one's (400).
fn java_transactions(bootstrap: Vec<String>, rf: i16, rt: &Runtime) {
    let topic = topic_name("java-txn");
    let group = topic_name("java-txn-group");
    let txn_id = topic_name("java-txn-id");
    rt.block_on(create_topic(bootstrap.clone(), &topic, PARTITIONS, rf));
    let bootstrap = bootstrap.join(",");
    let produced = harness(
        "txn-produce",
        &[
            &bootstrap,
            &topic,
            &group,
            &txn_id,
            "100",
            "commit,abort,commit,abort",
        ],
    );
    assert_eq!(int(&produced, "committed"), Some(200), "{produced}");
    assert_eq!(int(&produced, "aborted"), Some(200), "{produced}");
    let committed = harness(
        "read-isolated",
        &[&bootstrap, &topic, "read_committed", &group],
    );
    assert_eq!(
        field(&committed, "reached_end"),
        Some("true"),
        "{committed}"
    );
    assert_eq!(int(&committed, "records"), Some(200), "{committed}");
    assert_eq!(
        int(&committed, "committed_records"),
        Some(200),
        "{committed}"
    );
    assert_eq!(int(&committed, "aborted_records"), Some(0), "{committed}");
    assert_eq!(int(&committed, "group_offset"), Some(300), "{committed}");
    let all = harness(
        "read-isolated",
        &[&bootstrap, &topic, "read_uncommitted", &group],
    );
    assert_eq!(int(&all, "records"), Some(400), "{all}");
    assert_eq!(int(&all, "aborted_records"), Some(200), "{all}");
    assert_eq!(int(&all, "mismatched"), Some(0), "{all}");
}

#[test]
fn java_transactional_producer_and_read_committed_consumer_on_a_single_broker() {
    let rt = runtime();
    let broker = rt
        .block_on(Broker::start(BrokerConfig::in_memory()))
        .expect("broker starts");
    java_transactions(vec![broker.bootstrap()], 1, &rt);
    rt.block_on(broker.shutdown());
}

#[test]
fn java_transactional_producer_and_read_committed_consumer_on_a_cluster() {
    let rt = runtime();
    let cluster = rt
        .block_on(Cluster::builder().brokers(3).in_memory().start())
        .expect("cluster starts");
    java_transactions(cluster.bootstrap_servers(), 3, &rt);
    rt.block_on(cluster.shutdown());
}

/// What a running `member` harness has printed: its cumulative record count
/// (`CONSUMED n`) and its latest assignment (`ASSIGNED p,...`).
fn member_state(jvm: &Jvm) -> (i64, std::collections::BTreeSet<i64>) {
    let lines = jvm.lines();
    let consumed = lines
        .iter()
        .rev()
        .find_map(|l| l.strip_prefix("CONSUMED ")?.trim().parse().ok())
        .unwrap_or(0);
    let assigned = lines
        .iter()
        .rev()
        .find_map(|l| l.strip_prefix("ASSIGNED "))
        .map(|s| s.split(',').filter_map(|p| p.trim().parse().ok()).collect())
        .unwrap_or_default();
    (consumed, assigned)
}

/// Polls `done` every 200 ms for up to 90 s.
fn wait_until(what: &str, jvms: &[&Jvm], mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > Duration::from_secs(90) {
            let out: Vec<String> = jvms.iter().map(|j| j.output()).collect();
            panic!(
                "{what}: not done after 90 s; members:\n{}",
                out.join("\n---\n")
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Java `KafkaConsumer`s on the consumer group protocol (KIP-848,
/// `group.protocol=consumer`, the broker's `uniform` assignor) on baton-broker: a
/// first member reads 400 records alone; a second joins and the two split the
/// four partitions (incremental reconciliation); 400 more are read by both; the
/// first leaves (its partitions move to the second at its commits) and 400 more
/// are read. Both commit after each poll and on revocation, so every record must
/// be read exactly once across the two.
#[test]
fn java_consumer_protocol_group_on_a_single_broker() {
    let rt = runtime();
    let broker = rt
        .block_on(Broker::start(BrokerConfig::in_memory()))
        .expect("broker starts");
    java_consumer_protocol_group(&rt, vec![broker.bootstrap()], 1);
    rt.block_on(broker.shutdown());
}

/// The same on the 3-node cluster (topic replicated 3 times; the group's
/// coordinator is the leader of its `__consumer_offsets` partition).
#[test]
fn java_consumer_protocol_group_on_a_cluster() {
    let rt = runtime();
    let cluster = rt
        .block_on(Cluster::builder().brokers(3).in_memory().start())
        .expect("cluster starts");
    java_consumer_protocol_group(&rt, cluster.bootstrap_servers(), 3);
    rt.block_on(cluster.shutdown());
}

/// The scenario of [`java_consumer_protocol_group_on_a_single_broker`] on the
/// brokers at `servers`, the topic replicated `rf` times.
fn java_consumer_protocol_group(rt: &Runtime, servers: Vec<String>, rf: i16) {
    const PARTS: i32 = 4;
    const PER_PHASE: i64 = 400;
    let bootstrap = servers.join(",");
    let topic = topic_name("java-kip848");
    let group = format!("{topic}-group");
    rt.block_on(create_topic(servers, &topic, PARTS, rf));
    let dir = tempfile::tempdir().expect("temp dir");
    let stop_a = dir.path().join("stop-a").to_string_lossy().into_owned();
    let stop_b = dir.path().join("stop-b").to_string_lossy().into_owned();
    let produce = || {
        let r = harness(
            "produce",
            &[&bootstrap, &topic, "none", &PER_PHASE.to_string()],
        );
        assert_eq!(int(&r, "acked"), Some(PER_PHASE), "{r}");
    };
    let member = |stop: &str| {
        start_harness(
            "member",
            &[&bootstrap, &topic, &group, "consumer-uniform", stop],
        )
    };

    produce();
    let a = member(&stop_a);
    wait_until("a reads the first records", &[&a], || {
        member_state(&a).0 >= PER_PHASE
    });
    let b = member(&stop_b);
    wait_until("a and b split the partitions", &[&a, &b], || {
        let (sa, sb) = (member_state(&a).1, member_state(&b).1);
        !sa.is_empty()
            && !sb.is_empty()
            && sa.is_disjoint(&sb)
            && sa.len() + sb.len() == PARTS as usize
    });
    produce();
    wait_until("a and b read the second records", &[&a, &b], || {
        member_state(&a).0 + member_state(&b).0 >= 2 * PER_PHASE
    });
    std::fs::write(&stop_a, b"").expect("stop file");
    let ra = result(a);
    wait_until("b takes every partition", &[&b], || {
        member_state(&b).1.len() == PARTS as usize
    });
    produce();
    let read_by_a = int(&ra, "records").expect("records");
    wait_until("b reads the rest", &[&b], || {
        read_by_a + member_state(&b).0 >= 3 * PER_PHASE
    });
    std::fs::write(&stop_b, b"").expect("stop file");
    let rb = result(b);

    let mut seen = std::collections::BTreeMap::new();
    for r in [&ra, &rb] {
        for rec in field(r, "consumed").unwrap_or_default().split_whitespace() {
            let mut it = rec.splitn(3, ':');
            let p: i32 = it.next().and_then(|x| x.parse().ok()).expect("partition");
            let o: i64 = it.next().and_then(|x| x.parse().ok()).expect("offset");
            *seen.entry((p, o)).or_insert(0u32) += 1;
        }
    }
    let duplicated: u32 = seen.values().map(|n| n - 1).sum();
    let read = seen.len() as i64;
    println!(
        "java consumer protocol: {read} distinct records read, {duplicated} duplicated, a read {read_by_a}"
    );
    assert_eq!(read, 3 * PER_PHASE, "lost records");
    assert_eq!(duplicated, 0, "records read twice");
}

/// KIP-392 and KIP-227 with the Java client: `KafkaConsumer` (which uses fetch
/// sessions by default) with `client.rack` on a 3-node baton-broker cluster whose
/// nodes sit in racks `rack-1`..`rack-3`, with the rack-aware replica selector.
/// The consumer, in the rack of a node that follows at least one partition, reads
/// every record once and in order; at the end its `preferred-read-replica`
/// metric names that node for every partition it only follows, and -1 (the
/// leader) for those it leads.
#[test]
fn java_consumer_fetches_from_the_follower_in_its_rack() {
    use baton_broker::ReplicaSelector;
    let rt = runtime();
    let racked = (1..=3).fold(Cluster::builder().brokers(3).in_memory(), |b, id| {
        b.rack(id, format!("rack-{id}"))
    });
    let cluster = rt
        .block_on(racked.replica_selector(ReplicaSelector::RackAware).start())
        .expect("cluster starts");
    let topic = topic_name("java-rack");
    rt.block_on(create_topic(
        cluster.bootstrap_servers(),
        &topic,
        PARTITIONS,
        3,
    ));
    let bootstrap = cluster.bootstrap_servers().join(",");
    let produced = harness(
        "produce",
        &[&bootstrap, &topic, "none", &PER_CODEC.to_string()],
    );
    assert_eq!(
        int(&produced, "acked"),
        Some(PER_CODEC as i64),
        "{produced}"
    );
    let (leaders, node) = leaders_and_a_follower(&cluster, &topic, PARTITIONS);
    let consumed = harness(
        "assign-rack",
        &[
            &bootstrap,
            &topic,
            &PER_CODEC.to_string(),
            &format!("rack-{node}"),
        ],
    );
    assert_eq!(
        int(&consumed, "distinct"),
        Some(PER_CODEC as i64),
        "{consumed}"
    );
    assert_eq!(
        int(&consumed, "records"),
        Some(PER_CODEC as i64),
        "{consumed}"
    );
    assert_eq!(int(&consumed, "mismatched"), Some(0), "{consumed}");
    assert_eq!(int(&consumed, "reordered"), Some(0), "{consumed}");
    let expected: Vec<String> = leaders
        .iter()
        .enumerate()
        .map(|(p, l)| format!("{p}:{}", if *l == node { -1 } else { node }))
        .collect();
    assert_eq!(
        field(&consumed, "preferred"),
        Some(expected.join(",").as_str()),
        "consumer in rack-{node}, leaders {leaders:?}: {consumed}"
    );
    rt.block_on(cluster.shutdown());
}

/// What a [`SessionTap`] saw of the Fetch exchanges through its proxy.
#[derive(Debug, Default)]
struct SessionCounts {
    /// Full fetches that asked for a session (epoch 0).
    opening: usize,
    /// Incremental fetches (a session id and an epoch above 0).
    incremental: usize,
    /// Partitions named by the incremental fetches.
    incremental_partitions: usize,
    /// Responses that opened a session (a non-zero session id for a full fetch).
    opened: usize,
    /// Responses with a top-level (session) error.
    session_errors: usize,
}

/// Counts the fetch sessions (KIP-227) of the traffic through a proxy.
#[derive(Debug, Default)]
struct SessionTap(std::sync::Mutex<SessionCounts>);

impl baton_broker::faults::proxy::Tap for SessionTap {
    fn request(
        &self,
        request: &baton_broker::faults::proxy::RequestFrame,
    ) -> baton_broker::faults::proxy::Verdict {
        use baton_protocol::messages::FetchRequest;
        use baton_protocol::Message;
        let mut tag = None;
        if request.api_key == FetchRequest::API_KEY {
            if let Ok((_, f)) = baton_protocol::envelope::decode_request::<FetchRequest>(
                request.frame.clone(),
                request.version,
            ) {
                let mut c = self.0.lock().unwrap();
                if f.session_epoch == 0 {
                    c.opening += 1;
                    tag = Some(1);
                } else if f.session_id != 0 && f.session_epoch > 0 {
                    c.incremental += 1;
                    c.incremental_partitions +=
                        f.topics.iter().map(|t| t.partitions.len()).sum::<usize>();
                }
            }
        }
        baton_broker::faults::proxy::Verdict {
            lose_response: false,
            tag,
        }
    }

    fn response(
        &self,
        exchange: baton_broker::faults::proxy::Exchange,
        frame: bytes::Bytes,
    ) -> baton_broker::faults::proxy::Reply {
        use baton_protocol::messages::FetchRequest;
        use baton_protocol::Message;
        if exchange.api_key == FetchRequest::API_KEY {
            if let Ok((_, r)) = baton_protocol::envelope::decode_response::<FetchRequest>(
                frame.clone(),
                exchange.version,
            ) {
                let mut c = self.0.lock().unwrap();
                if r.error_code != 0 {
                    c.session_errors += 1;
                }
                if exchange.tag == Some(1) && r.session_id != 0 {
                    c.opened += 1;
                }
            }
        }
        baton_broker::faults::proxy::Reply::now(frame)
    }
}

/// KIP-227 with the Java client: `KafkaConsumer` reads 10,000 records of 12
/// partitions from a single baton-broker, one batch per fetch, through a proxy
/// that decodes every Fetch. Its one full fetch opens a session; it goes on with
/// incremental fetches that name only the partitions whose position moved (less
/// than half the topic on average), reads every record once and in order, and no
/// response carries a session error nor makes it reset its session (the Java
/// client answers an error, or a response inconsistent with its session, with a
/// new full fetch).
#[test]
fn java_consumer_uses_incremental_fetch_sessions() {
    use baton_broker::faults::proxy::{Proxy, ProxyOptions};
    let rt = runtime();
    let tap = std::sync::Arc::new(SessionTap::default());
    let (broker, proxy) = rt.block_on(async {
        // The proxy first: the broker advertises its port.
        let proxy = Proxy::start_with(
            "127.0.0.1:0".parse().unwrap(),
            "127.0.0.1:9".parse().unwrap(),
            ProxyOptions::default().tap(tap.clone()),
        )
        .await
        .expect("proxy starts");
        let config = BrokerConfig {
            advertised_port: Some(proxy.local_addr().port()),
            ..BrokerConfig::in_memory()
        };
        let broker = Broker::start(config).await.expect("broker starts");
        proxy.set_target(broker.local_addr());
        (broker, proxy)
    });
    let bootstrap = proxy.local_addr().to_string();
    let topic = topic_name("java-sessions");
    let partitions = 12;
    rt.block_on(create_topic(vec![bootstrap.clone()], &topic, partitions, 1));
    let total = 10_000usize;
    let produced = harness("produce", &[&bootstrap, &topic, "none", &total.to_string()]);
    assert_eq!(int(&produced, "acked"), Some(total as i64), "{produced}");
    // fetch.max.bytes=1: one batch per response, so many fetches, each of which
    // moves one partition.
    let consumed = harness(
        "assign-one-batch",
        &[&bootstrap, &topic, &total.to_string()],
    );
    assert_eq!(int(&consumed, "distinct"), Some(total as i64), "{consumed}");
    assert_eq!(int(&consumed, "mismatched"), Some(0), "{consumed}");
    assert_eq!(int(&consumed, "reordered"), Some(0), "{consumed}");
    let c = tap.0.lock().unwrap();
    assert_eq!(c.opening, 1, "no session was reset: {c:?}");
    assert_eq!(c.opened, 1, "the full fetch opened a session: {c:?}");
    assert!(c.incremental >= partitions as usize, "{c:?}");
    assert_eq!(c.session_errors, 0, "{c:?}");
    assert!(
        c.incremental_partitions * 2 < c.incremental * partitions as usize,
        "incremental fetches name only the partitions that moved: {c:?}"
    );
    println!("Java consumer's fetch sessions: {c:?}");
    drop(c);
    rt.block_on(broker.shutdown());
}
