//! The security options against a SASL_SSL listener: TLS with `--ca-file`, SCRAM
//! with the password from a file; a wrong password exits 4 without echoing it.

use baton_broker::{Broker, BrokerConfig};
use baton_testkit::security::{Pki, SCRAM_SHA512_LOGIN};

use crate::harness::run;

/// `v` as `&str`s.
fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_ssl_with_scram_connects_and_a_wrong_password_exits_4() {
    let pki = Pki::generate();
    let config = BrokerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        security: pki.sasl_ssl_listener(),
        ..BrokerConfig::in_memory()
    };
    let broker = Broker::start(config).await.expect("the broker starts");
    let bootstrap = broker.bootstrap();
    let login = SCRAM_SHA512_LOGIN;
    let good = pki.dir().join("password");
    std::fs::write(&good, format!("{}\n", login.password)).unwrap();
    let bad = pki.dir().join("wrong-password");
    std::fs::write(&bad, "not-the-password-42\n").unwrap();
    let ca = pki.ca.to_str().unwrap();
    let args = |password: &std::path::Path| -> Vec<String> {
        [
            "cluster",
            "describe",
            "--security-protocol",
            "SASL_SSL",
            "--sasl-mechanism",
            "SCRAM-SHA-512",
            "--sasl-username",
            login.username,
            "--sasl-password-file",
            password.to_str().unwrap(),
            "--ca-file",
            ca,
        ]
        .map(str::to_owned)
        .to_vec()
    };

    let ok = run(Some(&bootstrap), &strs(&args(&good)), b"").await.ok();
    assert!(
        ok.stdout.contains(&format!("Broker: 0\t{bootstrap}")),
        "{ok:?}"
    );

    let refused = run(Some(&bootstrap), &strs(&args(&bad)), b"")
        .await
        .status(4);
    assert!(
        !refused.stderr.contains("not-the-password-42"),
        "{refused:?}"
    );
    assert!(refused.stderr.contains("authentication"), "{refused:?}");

    // Plaintext to a TLS listener does not get through either.
    run(
        Some(&bootstrap),
        &["cluster", "describe", "--timeout", "5"],
        b"",
    )
    .await
    .status(4);
    broker.shutdown().await;
}
