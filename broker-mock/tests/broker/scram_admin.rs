//! DescribeUserScramCredentials and AlterUserScramCredentials with raw frames:
//! Kafka's error codes for each refusal, credentials stored from a salted
//! password and usable for SCRAM logins on every SASL listener of the node,
//! deletions taking effect at the next login.

use baton_broker::{
    Broker, BrokerConfig, BrokerHandle, ListenerConfig, ListenerSecurity, SaslSettings,
    SecurityProtocol,
};
use baton_protocol::messages::*;
use baton_protocol::sasl::{Mechanism, ScramHash};
use baton_protocol::ErrorCode;
use baton_testkit::wire::*;
use bytes::Bytes;

use super::sasl::login;

/// A node with a PLAINTEXT listener and two SASL ones (each enabling both SCRAM
/// mechanisms); carol is configured on the first SASL listener only.
async fn broker() -> BrokerHandle {
    let sasl = || SaslSettings::new([Mechanism::ScramSha256, Mechanism::ScramSha512]);
    let a = ListenerConfig::new(
        "SASL_A",
        ListenerSecurity::new(SecurityProtocol::SaslPlaintext).with_sasl(
            sasl()
                .with_scram_user(Mechanism::ScramSha512, "carol", "carol-secret")
                .unwrap(),
        ),
    );
    let b = ListenerConfig::new(
        "SASL_B",
        ListenerSecurity::new(SecurityProtocol::SaslPlaintext).with_sasl(sasl()),
    );
    Broker::start(BrokerConfig::in_memory().with_listener(a).with_listener(b))
        .await
        .unwrap()
}

fn upsert(
    name: &str,
    hash: ScramHash,
    password: &str,
    iterations: i32,
) -> ScramCredentialUpsertion {
    let salt = b"a fixed test salt".to_vec();
    let salted = hash
        .salt_password(
            password.as_bytes(),
            &salt,
            iterations.clamp(4096, 16384) as u32,
        )
        .unwrap();
    ScramCredentialUpsertion {
        name: name.into(),
        mechanism: hash.kafka_type(),
        iterations,
        salt: Bytes::from(salt),
        salted_password: RedactedBytes(Bytes::from(salted)),
    }
}

fn codes(resp: &AlterUserScramCredentialsResponse) -> Vec<(&str, i16)> {
    resp.results
        .iter()
        .map(|r| (r.user.as_str(), r.error_code))
        .collect()
}

async fn logs_in(
    broker: &BrokerHandle,
    listener: &str,
    m: Mechanism,
    user: &str,
    pw: &str,
) -> bool {
    let mut c = Client::connect(broker.listener_addr(listener).unwrap()).await;
    login(&mut c, m, user, pw).await.is_none()
}

#[tokio::test]
async fn credentials_are_altered_with_kafkas_error_codes() {
    let broker = broker().await;
    let mut admin = Client::connect(broker.local_addr()).await;
    // carol, configured on one listener, is a user of the whole node.
    assert!(
        logs_in(
            &broker,
            "SASL_B",
            Mechanism::ScramSha512,
            "carol",
            "carol-secret"
        )
        .await
    );

    let mut bad_mechanism = upsert("m", ScramHash::Sha256, "pw", 4096);
    bad_mechanism.mechanism = 0;
    let mut bad_salted = upsert("s", ScramHash::Sha256, "pw", 4096);
    bad_salted.salted_password = RedactedBytes(Bytes::from_static(b"short"));
    let req = AlterUserScramCredentialsRequest {
        deletions: vec![
            ScramCredentialDeletion {
                name: "nobody".into(),
                mechanism: 2,
            },
            ScramCredentialDeletion {
                name: "twice".into(),
                mechanism: 2,
            },
        ],
        upsertions: vec![
            upsert("few", ScramHash::Sha512, "pw", 4095),
            upsert("many", ScramHash::Sha512, "pw", 16385),
            upsert("", ScramHash::Sha512, "pw", 4096),
            bad_mechanism,
            bad_salted,
            upsert("twice", ScramHash::Sha512, "pw", 4096),
            upsert(&"u".repeat(4097), ScramHash::Sha512, "pw", 4096),
            ScramCredentialUpsertion {
                name: "salty".into(),
                salt: Bytes::from(vec![7u8; 1025]),
                ..upsert("salty", ScramHash::Sha512, "pw", 4096)
            },
            upsert("bob", ScramHash::Sha512, "bob-secret", 8192),
        ],
    };
    let resp = admin.call(&req, 0).await;
    let long_name = "u".repeat(4097);
    assert_eq!(
        codes(&resp),
        [
            ("nobody", ErrorCode::ResourceNotFound.code()),
            ("twice", ErrorCode::ResourceNotFound.code()),
            ("few", ErrorCode::UnacceptableCredential.code()),
            ("many", ErrorCode::UnacceptableCredential.code()),
            ("", ErrorCode::UnacceptableCredential.code()),
            ("m", ErrorCode::UnsupportedSaslMechanism.code()),
            ("s", ErrorCode::UnacceptableCredential.code()),
            (long_name.as_str(), ErrorCode::UnacceptableCredential.code()),
            ("salty", ErrorCode::UnacceptableCredential.code()),
            ("bob", 0),
        ]
    );
    // The same user and mechanism twice in one request.
    let req = AlterUserScramCredentialsRequest {
        deletions: vec![ScramCredentialDeletion {
            name: "bob".into(),
            mechanism: 2,
        }],
        upsertions: vec![upsert("bob", ScramHash::Sha512, "other", 4096)],
    };
    let resp = admin.call(&req, 0).await;
    assert_eq!(codes(&resp), [("bob", ErrorCode::DuplicateResource.code())]);

    for listener in ["SASL_A", "SASL_B"] {
        assert!(
            logs_in(
                &broker,
                listener,
                Mechanism::ScramSha512,
                "bob",
                "bob-secret"
            )
            .await
        );
    }
    assert!(
        !logs_in(
            &broker,
            "SASL_A",
            Mechanism::ScramSha256,
            "bob",
            "bob-secret"
        )
        .await
    );

    let describe = |users: Option<Vec<&str>>| DescribeUserScramCredentialsRequest {
        users: users.map(|u| u.into_iter().map(|n| UserName { name: n.into() }).collect()),
    };
    let all = admin.call(&describe(None), 0).await;
    let users: Vec<_> = all.results.iter().map(|r| r.user.as_str()).collect();
    assert_eq!(users, ["bob", "carol"]);
    assert_eq!(
        all.results[0].credential_infos,
        [CredentialInfo {
            mechanism: 2,
            iterations: 8192
        }]
    );
    let named = admin
        .call(&describe(Some(vec!["carol", "nobody", "bob", "carol"])), 0)
        .await;
    let got: Vec<_> = named
        .results
        .iter()
        .map(|r| (r.user.as_str(), r.error_code))
        .collect();
    assert_eq!(
        got,
        [
            ("carol", ErrorCode::DuplicateResource.code()),
            ("nobody", ErrorCode::ResourceNotFound.code()),
            ("bob", 0),
        ]
    );

    let delete = AlterUserScramCredentialsRequest {
        deletions: vec![ScramCredentialDeletion {
            name: "bob".into(),
            mechanism: 2,
        }],
        upsertions: Vec::new(),
    };
    assert_eq!(codes(&admin.call(&delete, 0).await), [("bob", 0)]);
    assert!(
        !logs_in(
            &broker,
            "SASL_B",
            Mechanism::ScramSha512,
            "bob",
            "bob-secret"
        )
        .await
    );
    broker.shutdown().await;
}
