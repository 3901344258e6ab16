//! Security against the in-process broker: SASL_PLAINTEXT and SASL_SSL each with
//! PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER, SSL, and mTLS
//! (produce and consume round trips); wrong password, unknown user and unknown
//! mechanism as typed, non-retriable errors; TLS failures (unknown CA, wrong host
//! name, missing client certificate) naming the certificate problem; a raw
//! connection sending Produce before authenticating is closed while an
//! authenticated client keeps working. Certificates are generated in-process
//! (rcgen) into a temporary directory.

use std::path::PathBuf;

use baton_broker::{
    Broker, BrokerConfig, BrokerHandle, ClientAuth, ListenerSecurity, SaslSettings, TlsSettings,
};
use baton_kafka::connection::ConnectionError;
use baton_kafka::{
    BoxError, Client, ClientError, OAuthToken, OAuthTokenProvider, Producer, ProducerRecord,
    SaslCredentials, SaslMechanism, SecurityProtocol, TlsConfig,
};
use baton_testkit::client::{consume_from_start, create_topic};
use baton_testkit::seed;
use baton_testkit::wire::{produce_req, records, Client as RawClient};
use bytes::Bytes;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};

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

/// A client of `broker`'s SASL_PLAINTEXT listener (also used by `oauth.rs`).
pub(crate) async fn sasl_client(
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

/// Produces `n` records to a new topic and reads them back in order (also used
/// by `oauth.rs`).
pub(crate) async fn round_trip(client: &Client, n: usize) {
    let seed = seed();
    let topic = create_topic(client, "security", 1).await;
    let producer = Producer::builder(client).build();
    let mut deliveries = Vec::new();
    for i in 0..n {
        let record = ProducerRecord::new(topic.clone()).value(Bytes::from(format!("v{i}")));
        deliveries.push(producer.send(record).await.expect("accepted"));
    }
    producer.flush().await;
    for d in deliveries {
        d.await.expect("delivered");
    }
    let got = consume_from_start(client, &topic, 1, n, seed).await;
    let values: Vec<_> = got.iter().map(|r| r.value.clone().unwrap()).collect();
    let expected: Vec<_> = (0..n).map(|i| Bytes::from(format!("v{i}"))).collect();
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

/// Unsecured JWS tokens for `dave`, an hour long (the broker's default
/// OAUTHBEARER validator accepts them).
struct DaveTokens;

#[baton_kafka::async_trait]
impl OAuthTokenProvider for DaveTokens {
    async fn token(&self) -> Result<OAuthToken, BoxError> {
        Ok(OAuthToken::unsecured(
            "dave",
            std::time::Duration::from_secs(3600),
        ))
    }
}

/// One login per mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER.
fn every_mechanism() -> [SaslCredentials; 4] {
    [
        SaslCredentials::plain("alice", "alice-secret"),
        SaslCredentials::scram_sha256("bob", "bob-secret"),
        SaslCredentials::scram_sha512("carol", "carol-secret"),
        SaslCredentials::oauthbearer(DaveTokens),
    ]
}

#[tokio::test]
async fn sasl_plaintext_round_trips_with_every_mechanism() {
    let broker = sasl_broker(&SaslMechanism::ALL).await;
    for credentials in every_mechanism() {
        let client = sasl_client(&broker, credentials.clone())
            .await
            .unwrap_or_else(|e| panic!("{credentials:?}: {e}"));
        round_trip(&client, RECORDS).await;
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

    round_trip(&client, RECORDS).await;
    let got = consume_from_start(&client, &topic, 1, 0, seed()).await;
    assert!(got.is_empty());
    broker.shutdown().await;
}

/// PEM files of a test PKI in a temporary directory: a CA, a broker certificate
/// for `localhost` and `127.0.0.1`, a client certificate, and a second CA that
/// signed nothing the broker presents. Also used by `oauth.rs`.
pub(crate) struct Pki {
    _dir: tempfile::TempDir,
    pub(crate) ca: PathBuf,
    other_ca: PathBuf,
    pub(crate) broker_cert: PathBuf,
    pub(crate) broker_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
}

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

pub(crate) fn pki() -> Pki {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let issuer = ca("baton test CA");
    let other = ca("another CA");
    let leaf = |sans: Vec<String>, usage: ExtendedKeyUsagePurpose, cn: &str| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(sans).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    };
    let (broker_cert, broker_key) = leaf(
        vec!["localhost".into(), "127.0.0.1".into()],
        ExtendedKeyUsagePurpose::ServerAuth,
        "broker",
    );
    let (client_cert, client_key) = leaf(Vec::new(), ExtendedKeyUsagePurpose::ClientAuth, "app");
    Pki {
        ca: write("ca.pem", issuer.pem()),
        other_ca: write("other-ca.pem", other.pem()),
        broker_cert: write("broker.pem", broker_cert),
        broker_key: write("broker.key", broker_key),
        client_cert: write("client.pem", client_cert),
        client_key: write("client.key", client_key),
        _dir: dir,
    }
}

async fn tls_broker(
    pki: &Pki,
    protocol: SecurityProtocol,
    client_auth: ClientAuth,
) -> BrokerHandle {
    let mut tls = TlsSettings::from_pem_files(&pki.broker_cert, &pki.broker_key).unwrap();
    if client_auth != ClientAuth::None {
        tls = tls
            .with_client_auth(client_auth, &std::fs::read(&pki.ca).unwrap())
            .unwrap();
    }
    let security = ListenerSecurity::new(protocol)
        .with_sasl(users(&[SaslMechanism::ScramSha512]))
        .with_tls(tls);
    Broker::start(BrokerConfig::in_memory().with_security(security))
        .await
        .expect("broker starts")
}

async fn tls_client(
    broker: &BrokerHandle,
    protocol: SecurityProtocol,
    tls: TlsConfig,
) -> Result<Client, ClientError> {
    Client::builder([broker.bootstrap()])
        .client_id("baton-security-tests")
        .security_protocol(protocol)
        .tls(tls)
        .sasl(SaslCredentials::scram_sha512("carol", "carol-secret"))
        .build()
        .await
}

fn tls_error(result: Result<Client, ClientError>) -> String {
    match result {
        Err(ClientError::Connection(ConnectionError::Tls { message, .. })) => message,
        Err(other) => panic!("expected a TLS error, got {other:?}"),
        Ok(_) => panic!("expected a TLS error, the client connected"),
    }
}

#[tokio::test]
async fn ssl_round_trips() {
    let pki = pki();
    let broker = tls_broker(&pki, SecurityProtocol::Ssl, ClientAuth::None).await;
    let tls = TlsConfig::with_ca_pem_file(&pki.ca).unwrap();
    let client = tls_client(&broker, SecurityProtocol::Ssl, tls)
        .await
        .unwrap();
    round_trip(&client, RECORDS).await;
    broker.shutdown().await;
}

#[tokio::test]
async fn sasl_ssl_with_scram_sha512_round_trips() {
    let pki = pki();
    let broker = tls_broker(&pki, SecurityProtocol::SaslSsl, ClientAuth::None).await;
    let tls = TlsConfig::with_ca_pem_file(&pki.ca).unwrap();
    let client = tls_client(&broker, SecurityProtocol::SaslSsl, tls)
        .await
        .unwrap();
    round_trip(&client, RECORDS).await;

    // Wrong password over TLS: the same typed error as over plain TCP.
    let result = Client::builder([broker.bootstrap()])
        .security_protocol(SecurityProtocol::SaslSsl)
        .tls(TlsConfig::with_ca_pem_file(&pki.ca).unwrap())
        .sasl(SaslCredentials::scram_sha512("carol", "wrong"))
        .build()
        .await;
    authentication_error(result);
    broker.shutdown().await;
}

#[tokio::test]
async fn sasl_ssl_round_trips_with_every_mechanism() {
    let pki = pki();
    let tls = TlsSettings::from_pem_files(&pki.broker_cert, &pki.broker_key).unwrap();
    let security = ListenerSecurity::new(SecurityProtocol::SaslSsl)
        .with_sasl(users(&SaslMechanism::ALL))
        .with_tls(tls);
    let broker = Broker::start(BrokerConfig::in_memory().with_security(security))
        .await
        .expect("broker starts");
    for credentials in every_mechanism() {
        let client = Client::builder([broker.bootstrap()])
            .client_id("baton-security-tests")
            .security_protocol(SecurityProtocol::SaslSsl)
            .tls(TlsConfig::with_ca_pem_file(&pki.ca).unwrap())
            .sasl(credentials.clone())
            .build()
            .await
            .unwrap_or_else(|e| panic!("{credentials:?}: {e}"));
        round_trip(&client, RECORDS).await;
    }
    broker.shutdown().await;
}

#[tokio::test]
async fn mutual_tls_round_trips_and_requires_a_client_certificate() {
    let pki = pki();
    let broker = tls_broker(&pki, SecurityProtocol::Ssl, ClientAuth::Required).await;
    let with_cert = TlsConfig::with_ca_pem_file(&pki.ca)
        .unwrap()
        .client_cert_pem_files(&pki.client_cert, &pki.client_key)
        .unwrap();
    let client = tls_client(&broker, SecurityProtocol::Ssl, with_cert)
        .await
        .unwrap();
    round_trip(&client, RECORDS).await;

    let without = TlsConfig::with_ca_pem_file(&pki.ca).unwrap();
    let message = tls_error(tls_client(&broker, SecurityProtocol::Ssl, without).await);
    assert!(message.to_lowercase().contains("certificate"), "{message}");
    round_trip(&client, RECORDS).await;
    broker.shutdown().await;
}

#[tokio::test]
async fn tls_failures_name_the_certificate_problem() {
    let pki = pki();
    let broker = tls_broker(&pki, SecurityProtocol::Ssl, ClientAuth::None).await;

    let untrusted = TlsConfig::with_ca_pem_file(&pki.other_ca).unwrap();
    let message = tls_error(tls_client(&broker, SecurityProtocol::Ssl, untrusted).await);
    assert!(message.contains("UnknownIssuer"), "{message}");

    let wrong_name = TlsConfig::with_ca_pem_file(&pki.ca)
        .unwrap()
        .server_name("kafka.example.com");
    let message = tls_error(tls_client(&broker, SecurityProtocol::Ssl, wrong_name).await);
    assert!(
        message.contains("not valid for name \"kafka.example.com\""),
        "{message}"
    );
    // With host name verification off the same name is accepted, the chain still
    // verified: an untrusted CA is refused all the same.
    let any_name = TlsConfig::with_ca_pem_file(&pki.ca)
        .unwrap()
        .server_name("kafka.example.com")
        .verify_hostname(false);
    tls_client(&broker, SecurityProtocol::Ssl, any_name)
        .await
        .unwrap();
    let untrusted = TlsConfig::with_ca_pem_file(&pki.other_ca)
        .unwrap()
        .verify_hostname(false);
    let message = tls_error(tls_client(&broker, SecurityProtocol::Ssl, untrusted).await);
    assert!(message.contains("UnknownIssuer"), "{message}");

    // A plaintext client on the TLS port gets no Kafka answer; the broker stays up.
    let result = Client::builder([broker.bootstrap()])
        .connect_timeout(std::time::Duration::from_secs(2))
        .build()
        .await;
    assert!(result.is_err());
    let tls = TlsConfig::with_ca_pem_file(&pki.ca).unwrap();
    let client = tls_client(&broker, SecurityProtocol::Ssl, tls)
        .await
        .unwrap();
    round_trip(&client, RECORDS).await;
    broker.shutdown().await;
}
