//! SCRAM user administration end to end: a user created through the admin API on
//! a node's PLAINTEXT listener logs in with SCRAM on a SASL listener of the same
//! node, is described with its mechanism and iteration count, and after its
//! deletion can no longer log in.

use baton_broker::{
    Broker, BrokerConfig, BrokerHandle, ListenerConfig, ListenerSecurity, SaslSettings,
};
use baton_kafka::{
    Admin, AdminError, Client, ClientError, SaslCredentials, SaslMechanism, ScramChange,
    SecurityProtocol,
};
use baton_protocol::ErrorCode;

/// A node with a PLAINTEXT listener and a SASL_PLAINTEXT one named SASL that
/// enables both SCRAM mechanisms and has no users yet.
async fn broker() -> BrokerHandle {
    let sasl = SaslSettings::new([SaslMechanism::ScramSha256, SaslMechanism::ScramSha512]);
    let listener = ListenerConfig::new(
        "SASL",
        ListenerSecurity::new(SecurityProtocol::SaslPlaintext).with_sasl(sasl),
    );
    Broker::start(BrokerConfig::in_memory().with_listener(listener))
        .await
        .expect("broker starts")
}

async fn login(broker: &BrokerHandle, credentials: SaslCredentials) -> Result<Client, ClientError> {
    Client::builder([broker.listener_addr("SASL").unwrap().to_string()])
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .sasl(credentials)
        .build()
        .await
}

fn user_errors(result: Result<impl std::fmt::Debug, AdminError>) -> Vec<(String, ErrorCode)> {
    match result {
        Err(AdminError::Users(errors)) => errors.into_iter().map(|e| (e.user, e.code)).collect(),
        other => panic!("expected user errors, got {other:?}"),
    }
}

#[tokio::test]
async fn a_user_created_by_the_admin_api_logs_in_until_deleted() {
    let broker = broker().await;
    let plain = Client::builder([broker.bootstrap()]).build().await.unwrap();
    let admin = Admin::new(&plain);

    assert!(
        login(&broker, SaslCredentials::scram_sha512("bob", "bob-secret"))
            .await
            .is_err(),
        "no such user yet"
    );
    admin
        .alter_user_scram_credentials([
            ScramChange::upsert("bob", SaslMechanism::ScramSha512, "bob-secret"),
            ScramChange::upsert("bob", SaslMechanism::ScramSha256, "bob-256").iterations(8192),
        ])
        .await
        .expect("credentials created");
    let described = admin
        .describe_user_scram_credentials(["bob"])
        .await
        .unwrap();
    assert_eq!(described.len(), 1);
    assert_eq!(
        described[0].credentials,
        [
            (SaslMechanism::ScramSha256, 8192),
            (SaslMechanism::ScramSha512, 4096)
        ]
    );
    let all = admin
        .describe_user_scram_credentials(Vec::<String>::new())
        .await
        .unwrap();
    assert_eq!(
        all.iter().map(|u| u.user.as_str()).collect::<Vec<_>>(),
        ["bob"]
    );

    let bob = login(&broker, SaslCredentials::scram_sha512("bob", "bob-secret"))
        .await
        .expect("bob logs in with SCRAM-SHA-512");
    Admin::new(&bob)
        .describe_cluster()
        .await
        .expect("served once authenticated");
    login(&broker, SaslCredentials::scram_sha256("bob", "bob-256"))
        .await
        .expect("bob logs in with SCRAM-SHA-256");
    assert!(
        login(&broker, SaslCredentials::scram_sha512("bob", "wrong"))
            .await
            .is_err()
    );

    // Refusals carry Kafka's codes; nothing of a refused user is applied.
    let refused = admin
        .alter_user_scram_credentials([ScramChange::delete("nobody", SaslMechanism::ScramSha512)])
        .await;
    assert_eq!(
        user_errors(refused),
        [("nobody".to_owned(), ErrorCode::ResourceNotFound)]
    );
    let refused = admin
        .alter_user_scram_credentials([ScramChange::upsert("x", SaslMechanism::Plain, "pw")])
        .await;
    assert_eq!(
        user_errors(refused),
        [("x".to_owned(), ErrorCode::UnsupportedSaslMechanism)]
    );
    let refused = admin.describe_user_scram_credentials(["nobody"]).await;
    assert_eq!(
        user_errors(refused),
        [("nobody".to_owned(), ErrorCode::ResourceNotFound)]
    );

    admin
        .alter_user_scram_credentials([
            ScramChange::delete("bob", SaslMechanism::ScramSha512),
            ScramChange::delete("bob", SaslMechanism::ScramSha256),
        ])
        .await
        .expect("credentials deleted");
    assert!(
        login(&broker, SaslCredentials::scram_sha512("bob", "bob-secret"))
            .await
            .is_err(),
        "a deleted user cannot log in"
    );
    let refused = admin.describe_user_scram_credentials(["bob"]).await;
    assert_eq!(
        user_errors(refused),
        [("bob".to_owned(), ErrorCode::ResourceNotFound)]
    );
    broker.shutdown().await;
}
