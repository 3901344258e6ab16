//! SCRAM users on a cluster: a user created through the admin API on one node's
//! PLAINTEXT listener is written to the controller's metadata log, so it logs in
//! on every node's SASL listener (and survives the controller's restart); once
//! deleted through another node, it soon logs in nowhere.

use std::time::Duration;

use baton_broker::{Cluster, ListenerConfig, ListenerSecurity, SaslSettings};
use baton_kafka::SecurityProtocol;
use baton_kafka::{Admin, Client, ClientError, SaslCredentials, SaslMechanism, ScramChange};

async fn login(addr: &str, password: &str) -> Result<Client, ClientError> {
    Client::builder([addr.to_owned()])
        .client_id("scram-cluster-test")
        .request_timeout(Duration::from_secs(10))
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .sasl(SaslCredentials::scram_sha512("bob", password))
        .build()
        .await
}

/// Logs in as bob on every node's SASL listener and is served there. Nodes
/// apply the metadata log on their own, a moment apart (as Kafka's brokers do),
/// so each gets a few seconds.
async fn logs_in_everywhere(sasl_addrs: &[String], password: &str) {
    for addr in sasl_addrs {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let client = loop {
            match login(addr, password).await {
                Ok(c) => break c,
                Err(e) if tokio::time::Instant::now() >= deadline => {
                    panic!("bob logs in on {addr} (of {sasl_addrs:?}): {e}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        Admin::new(&client)
            .describe_cluster()
            .await
            .unwrap_or_else(|e| panic!("bob is served on {addr}: {e}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scram_user_created_through_one_node_logs_in_on_every_node() {
    baton_testkit::init_tracing();
    let listener = ListenerConfig::new(
        "SASL",
        ListenerSecurity::new(SecurityProtocol::SaslPlaintext)
            .with_sasl(SaslSettings::new([SaslMechanism::ScramSha512])),
    );
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::builder()
        .brokers(3)
        .data_dir(dir.path())
        .client_listener(listener)
        .start()
        .await
        .expect("cluster starts");
    let plain = cluster.bootstrap_servers();
    let sasl: Vec<String> = cluster
        .listener_bootstrap("SASL")
        .split(',')
        .map(str::to_owned)
        .collect();
    assert_eq!(sasl.len(), 3);
    assert!(login(&sasl[2], "bob-secret").await.is_err(), "no bob yet");

    let admin_on = |i: usize| {
        let addr = plain[i].clone();
        async move { Admin::new(&Client::builder([addr]).build().await.unwrap()) }
    };
    admin_on(0)
        .await
        .alter_user_scram_credentials([ScramChange::upsert(
            "bob",
            SaslMechanism::ScramSha512,
            "bob-secret",
        )])
        .await
        .expect("bob created through node 1");
    logs_in_everywhere(&sasl, "bob-secret").await;
    let described = admin_on(2)
        .await
        .describe_user_scram_credentials(["bob"])
        .await
        .expect("node 3 describes bob");
    assert_eq!(
        described[0].credentials,
        [(SaslMechanism::ScramSha512, 4096)]
    );

    // The credentials live in the metadata log: a restarted controller keeps them.
    cluster.kill_controller();
    cluster
        .restart_controller()
        .await
        .expect("controller restarts");
    admin_on(1)
        .await
        .alter_user_scram_credentials([ScramChange::upsert(
            "bob",
            SaslMechanism::ScramSha512,
            "new-secret",
        )])
        .await
        .expect("bob's password changed through node 2 after the restart");
    logs_in_everywhere(&sasl, "new-secret").await;
    assert!(login(&sasl[0], "bob-secret").await.is_err(), "old password");

    admin_on(2)
        .await
        .alter_user_scram_credentials([ScramChange::delete("bob", SaslMechanism::ScramSha512)])
        .await
        .expect("bob deleted through node 3");
    // Each node applies the deletion from the metadata log a moment apart too.
    for addr in &sasl {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while login(addr, "new-secret").await.is_ok() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "bob still logs in on {addr} 10 s after his deletion"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    cluster.shutdown().await;
}
