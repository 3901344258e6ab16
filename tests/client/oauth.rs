//! OAUTHBEARER and KIP-368 re-authentication against the in-process broker:
//! round trips over SASL_PLAINTEXT and SASL_SSL with an application token
//! provider; produce and consume across several session lifetimes
//! (`connections.max.reauth.ms` 1.5 s, a 6 s run) with OAUTHBEARER and SCRAM,
//! checked for lost, duplicated and reordered records, with the broker's counters
//! proving the re-authentications; expired and malformed tokens and a failing
//! provider as typed, non-retriable errors; a long-poll Fetch in flight across a
//! re-authentication answered normally; a re-authentication that changes
//! principal breaking only its own connection.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_broker::history::{parse_payload, payload, History, ProduceOutcome};
use baton_broker::{
    Broker, BrokerConfig, BrokerHandle, ListenerSecurity, SaslSettings, TlsSettings,
};
use baton_kafka::connection::{BrokenCause, Connection, ConnectionConfig, ConnectionError};
use baton_kafka::{
    BoxError, Client, ClientError, Consumer, OAuthToken, OAuthTokenProvider, Producer,
    ProducerRecord, SaslCredentials, SaslMechanism, SecurityProtocol, StartOffset, TlsConfig,
};
use baton_protocol::messages::MetadataRequest;
use baton_testkit::client::create_topic;
use baton_testkit::seed;
use baton_testkit::wire::fetch_req;
use bytes::Bytes;

use super::security::{round_trip, sasl_client};

/// Hands out unsecured JWS tokens for the principals queued (the last one
/// repeats), or an error when told to; counts its calls.
#[derive(Clone)]
struct Tokens {
    principals: Arc<Mutex<Vec<&'static str>>>,
    lifetime: Duration,
    fail: bool,
    calls: Arc<AtomicUsize>,
}

impl Tokens {
    fn new(principal: &'static str, lifetime: Duration) -> Tokens {
        Tokens {
            principals: Arc::new(Mutex::new(vec![principal])),
            lifetime,
            fail: false,
            calls: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[baton_kafka::async_trait]
impl OAuthTokenProvider for Tokens {
    async fn token(&self) -> Result<OAuthToken, BoxError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.fail {
            return Err("identity provider unreachable".into());
        }
        let principal = {
            let mut queue = self.principals.lock().unwrap();
            if queue.len() > 1 {
                queue.remove(0)
            } else {
                queue[0]
            }
        };
        Ok(OAuthToken::unsecured(principal, self.lifetime).with_extension("traceId", "t1"))
    }
}

/// A fixed token, whatever it is.
struct Fixed(&'static str);

#[baton_kafka::async_trait]
impl OAuthTokenProvider for Fixed {
    async fn token(&self) -> Result<OAuthToken, BoxError> {
        Ok(OAuthToken::new(self.0))
    }
}

fn sasl(max_reauth: Duration) -> SaslSettings {
    SaslSettings::new([SaslMechanism::OAuthBearer, SaslMechanism::ScramSha512])
        .with_scram_user(SaslMechanism::ScramSha512, "carol", "carol-secret")
        .unwrap()
        .with_connections_max_reauth(max_reauth)
}

async fn broker(sasl: SaslSettings) -> BrokerHandle {
    let security = ListenerSecurity::new(SecurityProtocol::SaslPlaintext).with_sasl(sasl);
    Broker::start(BrokerConfig::in_memory().with_security(security))
        .await
        .expect("broker starts")
}

#[tokio::test]
async fn oauthbearer_round_trips_over_sasl_plaintext_and_sasl_ssl() {
    let settings = sasl(Duration::ZERO);
    let plain = broker(settings.clone()).await;
    let tokens = Tokens::new("alice", Duration::from_secs(3600));
    let c = sasl_client(&plain, SaslCredentials::oauthbearer(tokens.clone()))
        .await
        .unwrap();
    round_trip(&c, 50).await;
    assert!(tokens.calls() >= 1);
    assert!(settings.stats().authentications() >= 1);
    plain.shutdown().await;

    let pki = crate::security::pki();
    let tls = TlsSettings::from_pem_files(&pki.broker_cert, &pki.broker_key).unwrap();
    let security = ListenerSecurity::new(SecurityProtocol::SaslSsl)
        .with_sasl(sasl(Duration::ZERO))
        .with_tls(tls);
    let secure = Broker::start(BrokerConfig::in_memory().with_security(security))
        .await
        .unwrap();
    let c = Client::builder([secure.bootstrap()])
        .security_protocol(SecurityProtocol::SaslSsl)
        .tls(TlsConfig::with_ca_pem_file(&pki.ca).unwrap())
        .sasl(SaslCredentials::oauthbearer(Tokens::new(
            "alice",
            Duration::from_secs(3600),
        )))
        .build()
        .await
        .unwrap();
    round_trip(&c, 50).await;
    secure.shutdown().await;
}

/// Produces for `run` while a consumer reads along (its long-poll fetches in
/// flight across re-authentications), on a listener whose sessions last 1.5 s;
/// every acknowledged record must be read once, in order, and no connection may
/// have been closed for an expired session. Returns the re-authentications.
async fn produce_and_consume_across_sessions(credentials: SaslCredentials, run: Duration) -> u64 {
    let settings = sasl(Duration::from_millis(1_500));
    let broker = broker(settings.clone()).await;
    let c = sasl_client(&broker, credentials).await.unwrap();
    let topic = create_topic(&c, "reauth", 2).await;
    let (total_tx, total_rx) = tokio::sync::watch::channel(usize::MAX);
    let reader = {
        let c = c.clone();
        let topic = topic.clone();
        tokio::spawn(async move {
            let mut consumer = Consumer::builder(&c)
                .assign(topic.clone(), 0, StartOffset::Earliest)
                .assign(topic, 1, StartOffset::Earliest)
                .build()
                .await
                .unwrap();
            let mut got = Vec::new();
            while got.len() < *total_rx.borrow() {
                match tokio::time::timeout(Duration::from_millis(200), consumer.recv()).await {
                    Ok(record) => got.push(record.expect("consumer error")),
                    Err(_) if total_rx.has_changed().is_err() => break,
                    Err(_) => {}
                }
            }
            got
        })
    };
    let producer = Producer::builder(&c).build();
    let mut history = History::new();
    let mut deliveries = Vec::new();
    let started = tokio::time::Instant::now();
    let mut id = 0u64;
    while started.elapsed() < run {
        let value = payload(id, 64);
        let (_, sum) = parse_payload(&value).unwrap();
        let record = ProducerRecord::new(topic.clone())
            .key(Bytes::from(format!("k{}", id % 7)))
            .value(Bytes::from(value));
        deliveries.push((id, sum, producer.send(record).await.expect("accepted")));
        id += 1;
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    producer.flush().await;
    for (id, sum, d) in deliveries {
        let meta = d.await.expect("delivered");
        history.produced(
            id,
            sum,
            ProduceOutcome::Acked {
                partition: meta.partition,
                offset: meta.offset,
            },
        );
    }
    total_tx.send(id as usize).unwrap();
    let got = tokio::time::timeout(Duration::from_secs(30), reader)
        .await
        .unwrap_or_else(|_| panic!("seed {}: the consumer stalled", seed()))
        .unwrap();
    for r in got {
        let (rid, sum) = parse_payload(r.value.as_ref().unwrap()).unwrap();
        history.consumed(r.partition, r.offset, rid, sum);
    }
    let report = history.check();
    assert!(report.passed() && report.acknowledged == id, "{report}");
    assert_eq!(report.consumed, id, "{report}");
    let stats = settings.stats();
    assert_eq!(stats.expired_sessions_closed(), 0, "no session ran out");
    assert_eq!(stats.failures(), 0);
    let reauths = stats.reauthentications();
    broker.shutdown().await;
    reauths
}

#[tokio::test]
async fn oauthbearer_reauthenticates_across_many_sessions_without_losing_anything() {
    let tokens = Tokens::new("alice", Duration::from_secs(3600));
    let reauths = produce_and_consume_across_sessions(
        SaslCredentials::oauthbearer(tokens.clone()),
        Duration::from_secs(6),
    )
    .await;
    // 6 s of sessions of 1.5 s, renewed at 85-95 %: at least 3 rounds on the
    // connection that produced throughout.
    assert!(reauths >= 3, "{reauths} re-authentications");
    assert!(tokens.calls() as u64 > reauths, "a fresh token every time");
}

#[tokio::test]
async fn scram_reauthenticates_too() {
    let reauths = produce_and_consume_across_sessions(
        SaslCredentials::scram_sha512("carol", "carol-secret"),
        Duration::from_secs(4),
    )
    .await;
    assert!(reauths >= 2, "{reauths} re-authentications");
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
async fn refused_tokens_and_provider_failures_are_typed_and_not_retriable() {
    let settings = sasl(Duration::ZERO);
    let broker = broker(settings.clone()).await;
    let good = sasl_client(
        &broker,
        SaslCredentials::oauthbearer(Tokens::new("alice", Duration::from_secs(60))),
    )
    .await
    .unwrap();

    let expired = Fixed(Box::leak(
        OAuthToken::unsecured("alice", Duration::ZERO)
            .value
            .expose()
            .to_owned()
            .into_boxed_str(),
    ));
    for provider in [expired, Fixed("not-a-jws"), Fixed("e30.e30.")] {
        let result = sasl_client(&broker, SaslCredentials::oauthbearer(provider)).await;
        if let Err(e) = &result {
            assert!(!e.is_retriable(), "{e}");
        }
        let (mechanism, message) = authentication_error(result);
        assert_eq!(mechanism, "OAUTHBEARER");
        assert_eq!(message, r#"{"status":"invalid_token"}"#);
    }

    let mut failing = Tokens::new("alice", Duration::from_secs(60));
    failing.fail = true;
    let result = sasl_client(&broker, SaslCredentials::oauthbearer(failing.clone())).await;
    let (mechanism, message) = authentication_error(result);
    assert_eq!(mechanism, "OAUTHBEARER");
    assert!(
        message.contains("identity provider unreachable"),
        "{message}"
    );

    round_trip(&good, 5).await;
    broker.shutdown().await;
}

#[tokio::test]
async fn a_reauthentication_that_changes_principal_breaks_only_its_connection() {
    let settings = sasl(Duration::from_millis(1_500));
    let broker = broker(settings.clone()).await;
    let config = |provider: Tokens| ConnectionConfig {
        security_protocol: SecurityProtocol::SaslPlaintext,
        sasl: Some(SaslCredentials::oauthbearer(provider)),
        ..ConnectionConfig::default()
    };
    let turncoat = Tokens::new("alice", Duration::from_secs(3600));
    turncoat.principals.lock().unwrap().push("mallory");
    let addr = broker.bootstrap();
    let bad = Connection::connect(&addr, &config(turncoat)).await.unwrap();
    let good = Connection::connect(
        &addr,
        &config(Tokens::new("alice", Duration::from_secs(3600))),
    )
    .await
    .unwrap();

    tokio::time::sleep(Duration::from_millis(1_700)).await;
    let err = bad.send(&MetadataRequest::default()).await.unwrap_err();
    let ConnectionError::Broken { cause, .. } = &err else {
        panic!("{err}");
    };
    match &**cause {
        BrokenCause::Reauthentication { mechanism, message } => {
            assert_eq!(mechanism, "OAUTHBEARER");
            assert!(message.contains("Cannot change principals"), "{message}");
        }
        other => panic!("{other}"),
    }
    good.send(&MetadataRequest::default()).await.unwrap();
    assert_eq!(settings.stats().failures(), 1);
    assert!(settings.stats().reauthentications() >= 1);
    broker.shutdown().await;
}

#[tokio::test]
async fn a_request_in_flight_during_reauthentication_is_answered() {
    let settings = sasl(Duration::from_millis(1_500));
    let broker = broker(settings.clone()).await;
    let tokens = Tokens::new("alice", Duration::from_secs(3600));
    let admin = sasl_client(&broker, SaslCredentials::oauthbearer(tokens.clone()))
        .await
        .unwrap();
    let topic = create_topic(&admin, "in-flight", 1).await;
    let mine = Tokens::new("alice", Duration::from_secs(3600));
    let config = ConnectionConfig {
        security_protocol: SecurityProtocol::SaslPlaintext,
        sasl: Some(SaslCredentials::oauthbearer(mine.clone())),
        ..ConnectionConfig::default()
    };
    let conn = Connection::connect(&broker.bootstrap(), &config)
        .await
        .unwrap();
    assert_eq!(mine.calls(), 1);
    // Fetch v13+ names topics by id.
    let metadata = conn.send(&MetadataRequest::default()).await.unwrap();
    let topic_id = metadata
        .topics
        .iter()
        .find(|t| t.name.as_deref() == Some(topic.as_str()))
        .expect("topic listed")
        .topic_id;
    let mut fetch = fetch_req(&topic, 0, 0, 800, 1);
    fetch.topics[0].topic_id = topic_id;

    // Re-authentication falls 1.275-1.425 s after login; this long poll (nothing
    // to read, 800 ms wait) is in flight from about 1.0 s to 1.8 s.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let started = tokio::time::Instant::now();
    let resp = conn
        .send_with_timeout(&fetch, Duration::from_secs(10))
        .await
        .expect("the fetch in flight is answered");
    assert_eq!(resp.error_code, 0);
    assert_eq!(resp.responses[0].partitions[0].error_code, 0);
    assert!(
        started.elapsed() >= Duration::from_millis(700),
        "the fetch waited out its long poll: {:?}",
        started.elapsed()
    );

    // The renewal (a second token) completed on this connection, which goes on
    // serving.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(mine.calls(), 2);
    assert!(settings.stats().reauthentications() >= 1);
    conn.send(&MetadataRequest::default()).await.unwrap();
    assert!(!conn.is_poisoned());
    assert_eq!(settings.stats().expired_sessions_closed(), 0);
    broker.shutdown().await;
}
