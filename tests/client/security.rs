//! Security against the in-process broker: SASL_PLAINTEXT with PLAIN,
//! SCRAM-SHA-256 and SCRAM-SHA-512 (produce and consume round trips); wrong
//! password, unknown user and unknown mechanism as typed, non-retriable errors;
//! a raw connection sending Produce before authenticating is closed while an
//! authenticated client keeps working.

use baton::connection::ConnectionError;
use baton::{
    Client, ClientError, Producer, ProducerRecord, SaslCredentials, SaslMechanism, SecurityProtocol,
};
use baton_broker::{Broker, BrokerConfig, BrokerHandle, ListenerSecurity, SaslSettings};
use baton_testkit::client::{consume_from_start, create_topic};
use baton_testkit::seed;
use baton_testkit::wire::{produce_req, records, Client as RawClient};
use bytes::Bytes;

const RECORDS: usize = 50;

fn users(mechanisms: &[SaslMechanism]) -> SaslSettings {
    SaslSettings::new(mechanisms.iter().copied())
        .with_plain_user("alice", "alice-secret")
        .with_scram_user(SaslMechanism::ScramSha256, "bob", "bob-secret")
        .unwrap()
        .with_scram_user(SaslMechanism::ScramSha512, "carol", "carol-secret")
        .unwrap()
}

async fn sasl_broker(mechanisms: &[SaslMechanism]) -> BrokerHandle {
    let security =
        ListenerSecurity::new(SecurityProtocol::SaslPlaintext).with_sasl(users(mechanisms));
    Broker::start(BrokerConfig::in_memory().with_security(security))
        .await
        .expect("broker starts")
}

async fn sasl_client(
    broker: &BrokerHandle,
    credentials: SaslCredentials,
) -> Result<Client, ClientError> {
    Client::builder([broker.bootstrap()])
        .client_id("baton-security-tests")
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .sasl(credentials)
        .build()
        .await
}

/// Produces `RECORDS` records to a new topic and reads them back.
async fn round_trip(client: &Client) {
    let seed = seed();
    let topic = create_topic(client, "security", 1).await;
    let producer = Producer::builder(client).build();
    let mut deliveries = Vec::new();
    for i in 0..RECORDS {
        let record = ProducerRecord::new(topic.clone()).value(Bytes::from(format!("v{i}")));
        deliveries.push(producer.send(record).await.expect("accepted"));
    }
    producer.flush().await;
    for d in deliveries {
        d.await.expect("delivered");
    }
    let got = consume_from_start(client, &topic, 1, RECORDS, seed).await;
    let values: Vec<_> = got.iter().map(|r| r.value.clone().unwrap()).collect();
    let expected: Vec<_> = (0..RECORDS).map(|i| Bytes::from(format!("v{i}"))).collect();
    assert_eq!(values, expected);
}

fn authentication_error(result: Result<Client, ClientError>) -> (String, String) {
    match result {
        Err(ClientError::Connection(ConnectionError::Authentication {
            mechanism,
            message,
            ..
        })) => (mechanism, message),
        Err(other) => panic!("expected an authentication error, got {other:?}"),
        Ok(_) => panic!("expected an authentication error, the client connected"),
    }
}

#[tokio::test]
async fn sasl_plaintext_round_trips_with_every_mechanism() {
    let broker = sasl_broker(&SaslMechanism::ALL).await;
    for credentials in [
        SaslCredentials::plain("alice", "alice-secret"),
        SaslCredentials::scram_sha256("bob", "bob-secret"),
        SaslCredentials::scram_sha512("carol", "carol-secret"),
    ] {
        let client = sasl_client(&broker, credentials.clone())
            .await
            .unwrap_or_else(|e| panic!("{credentials:?}: {e}"));
        round_trip(&client).await;
    }
    broker.shutdown().await;
}

#[tokio::test]
async fn refused_logins_are_typed_and_not_retriable() {
    let broker = sasl_broker(&[SaslMechanism::ScramSha512, SaslMechanism::ScramSha256]).await;
    for credentials in [
        SaslCredentials::scram_sha512("carol", "wrong"),
        SaslCredentials::scram_sha512("nobody", "carol-secret"),
        SaslCredentials::scram_sha256("bob", "wrong"),
    ] {
        let result = sasl_client(&broker, credentials.clone()).await;
        if let Err(e) = &result {
            assert!(!e.is_retriable(), "{e}");
            assert!(!e.to_string().contains("wrong"), "no password in {e}");
        }
        let (mechanism, message) = authentication_error(result);
        assert_eq!(mechanism, credentials.mechanism().name());
        assert!(message.contains("invalid credentials"), "{message}");
    }
    // PLAIN is not enabled on this listener.
    let (mechanism, message) = authentication_error(
        sasl_client(&broker, SaslCredentials::plain("alice", "alice-secret")).await,
    );
    assert_eq!(mechanism, "PLAIN");
    assert!(
        message.contains("UNSUPPORTED_SASL_MECHANISM") || message.contains("SCRAM-SHA-512"),
        "{message}"
    );

    // SASL credentials missing for a SASL protocol.
    let result = Client::builder([broker.bootstrap()])
        .security_protocol(SecurityProtocol::SaslPlaintext)
        .build()
        .await;
    assert!(matches!(
        result,
        Err(ClientError::Connection(ConnectionError::SecurityConfig(_)))
    ));
    broker.shutdown().await;
}

#[tokio::test]
async fn produce_before_authentication_closes_only_that_connection() {
    let broker = sasl_broker(&[SaslMechanism::ScramSha512]).await;
    let client = sasl_client(
        &broker,
        SaslCredentials::scram_sha512("carol", "carol-secret"),
    )
    .await
    .unwrap();
    let topic = create_topic(&client, "before-auth", 1).await;

    let mut raw = RawClient::connect(broker.local_addr()).await;
    raw.send(&produce_req(&topic, 0, 1, records(0, &["sneaky"])), 9)
        .await;
    assert!(raw.recv_frame().await.is_none(), "closed without an answer");

    round_trip(&client).await;
    let got = consume_from_start(&client, &topic, 1, 0, seed()).await;
    assert!(got.is_empty());
    broker.shutdown().await;
}
