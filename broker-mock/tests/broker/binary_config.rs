//! The binary with `--config FILE`: a Kafka-style properties file with a
//! PLAINTEXT and a SASL_SSL listener (SCRAM-SHA-512 users from `scram.users`, PLAIN
//! users from a JAAS entry, PEM key material), and Baton clients on both
//! listeners sharing one topic; flags override the file; a malformed file stops
//! the binary at start-up with the key and line; the transaction settings
//! (`transaction.max.timeout.ms`, `--max-transactional-ids`) take effect.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, ChildStdout, Command, Stdio};

use baton_kafka::{Client, Producer, ProducerRecord, SaslCredentials, SecurityProtocol, TlsConfig};
use baton_testkit::client::{consume_from_start, create_topic};
use baton_testkit::seed;
use bytes::Bytes;

/// Kills the child when the test ends, however it ends.
pub(super) struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the binary with `args` and reads the listener lines it prints
/// (`baton-broker listener NAME on ADDR`) until `listeners` were named.
fn start(args: &[&str], listeners: usize) -> (Proc, HashMap<String, SocketAddr>) {
    let (child, mut out) = spawn_broker(args);
    let mut addrs = HashMap::new();
    while addrs.len() < listeners {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "the binary exited");
        if let Some(rest) = line.trim().strip_prefix("baton-broker listener ") {
            let (name, addr) = rest.split_once(" on ").expect("NAME on ADDR");
            addrs.insert(name.to_owned(), addr.parse().expect("an address"));
        }
    }
    (child, addrs)
}

/// Starts the binary with `args` (logging at warn), its stdout piped for the
/// lines it prints; the process is killed when the returned `Proc` drops.
pub(super) fn spawn_broker(args: &[&str]) -> (Proc, BufReader<ChildStdout>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_baton-broker"))
        .args(args)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("baton-broker starts");
    let out = BufReader::new(child.stdout.take().unwrap());
    (Proc(child), out)
}

fn properties(dir: &std::path::Path) -> (String, std::path::PathBuf) {
    let cert =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let pem_file = dir.join("broker.pem");
    std::fs::write(
        &pem_file,
        format!("{}{}", cert.signing_key.serialize_pem(), cert.cert.pem()),
    )
    .unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, cert.cert.pem()).unwrap();
    let text = format!(
        "# Apache Kafka's names
node.id=3
listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\
    user_alice=\"alice-secret\";
scram.users=SCRAM-SHA-512:carol=carol-secret
ssl.keystore.type=PEM
ssl.keystore.location={}
num.partitions=2
log.dirs={}
",
        pem_file.display(),
        dir.join("data").display(),
    );
    (text, ca)
}

async fn produce(client: &Client, topic: &str, values: &[String]) {
    let producer = Producer::builder(client).build();
    let mut deliveries = Vec::new();
    for v in values {
        let record = ProducerRecord::new(topic.to_owned())
            .partition(0)
            .value(Bytes::from(v.clone()));
        deliveries.push(producer.send(record).await.expect("accepted"));
    }
    producer.flush().await;
    for d in deliveries {
        d.await.expect("delivered");
    }
}

#[tokio::test]
async fn a_config_file_with_plaintext_and_sasl_ssl_listeners_serves_baton_on_both() {
    let seed = seed();
    let dir = tempfile::tempdir().unwrap();
    let (text, ca) = properties(dir.path());
    let file = dir.path().join("server.properties");
    std::fs::write(&file, text).unwrap();
    let (_broker, addrs) = start(&["--config", file.to_str().unwrap()], 2);

    let plain = Client::builder([addrs["PLAINTEXT"].to_string()])
        .build()
        .await
        .expect("PLAINTEXT client");
    let secured = |credentials: SaslCredentials| {
        Client::builder([addrs["SASL_SSL"].to_string()])
            .security_protocol(SecurityProtocol::SaslSsl)
            .tls(TlsConfig::with_ca_pem_file(&ca).unwrap())
            .sasl(credentials)
            .build()
    };
    let scram = secured(SaslCredentials::scram_sha512("carol", "carol-secret"))
        .await
        .expect("SASL_SSL client with SCRAM-SHA-512");
    let plain_sasl = secured(SaslCredentials::plain("alice", "alice-secret"))
        .await
        .expect("SASL_SSL client with PLAIN");
    assert!(
        secured(SaslCredentials::scram_sha512("carol", "wrong"))
            .await
            .is_err(),
        "a wrong password is refused"
    );

    let topic = create_topic(&plain, "binary-config", 1).await;
    let first: Vec<String> = (0..20).map(|i| format!("plain-{i}")).collect();
    produce(&plain, &topic, &first).await;
    let second: Vec<String> = (0..20).map(|i| format!("scram-{i}")).collect();
    produce(&scram, &topic, &second).await;
    let wanted: Vec<String> = first.iter().chain(&second).cloned().collect();
    for client in [&plain, &scram, &plain_sasl] {
        let got = consume_from_start(client, &topic, 1, wanted.len(), seed).await;
        let values: Vec<String> = got
            .iter()
            .map(|r| String::from_utf8(r.value.clone().unwrap().to_vec()).unwrap())
            .collect();
        assert_eq!(values, wanted, "seed {seed}");
    }
}

#[tokio::test]
async fn flags_override_the_file_and_bad_files_stop_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("server.properties");
    std::fs::write(
        &file,
        "listeners=PLAINTEXT://127.0.0.1:1\nnum.partitions=2\n",
    )
    .unwrap();
    // --listen overrides the first listener's address (port 1 would not bind).
    let (_broker, addrs) = start(
        &[
            "--config",
            file.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ],
        1,
    );
    assert_ne!(addrs["PLAINTEXT"].port(), 1);

    std::fs::write(
        &file,
        "num.partitions=2\nlisteners=PLAINTEXT://127.0.0.1:0\nsome.unknown.key=1\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_baton-broker"))
        .args(["--config", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("line 3: unknown property some.unknown.key"),
        "{err}"
    );
}

#[tokio::test]
async fn transaction_settings_from_the_file_and_the_flags_take_effect() {
    use baton_protocol::ErrorCode;
    use baton_testkit::wire::Client as Wire;

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("server.properties");
    std::fs::write(
        &file,
        "listeners=PLAINTEXT://127.0.0.1:0\ntransaction.max.timeout.ms=2000\n\
         transaction.state.log.num.partitions=2\n",
    )
    .unwrap();
    let (_proc, addrs) = start(
        &[
            "--config",
            file.to_str().unwrap(),
            "--max-transactional-ids",
            "1",
        ],
        1,
    );
    let mut c = Wire::connect(addrs["PLAINTEXT"]).await;
    let init = super::transactions::init;
    // transaction.max.timeout.ms bounds the producer's timeout.
    assert_eq!(
        init(&mut c, "first", 5_000).await.0,
        ErrorCode::InvalidTransactionTimeout.code()
    );
    assert_eq!(init(&mut c, "first", 2_000).await.0, 0);
    // --max-transactional-ids 1: a second id is refused.
    assert_eq!(
        init(&mut c, "second", 1_000).await.0,
        ErrorCode::PolicyViolation.code()
    );
    // transaction.state.log.num.partitions sized __transaction_state.
    let resp = c
        .call(
            &baton_protocol::messages::MetadataRequest {
                topics: Some(vec![baton_protocol::messages::MetadataRequestTopic {
                    name: Some("__transaction_state".into()),
                    ..Default::default()
                }]),
                allow_auto_topic_creation: false,
                ..Default::default()
            },
            12,
        )
        .await;
    assert_eq!(resp.topics[0].error_code, 0, "{resp:?}");
    assert_eq!(resp.topics[0].partitions.len(), 2);
}
