//! OAUTHBEARER and re-authentication (KIP-368) over TCP with raw frames:
//! unsecured JWS tokens accepted with their lifetime as the session lifetime;
//! expired and malformed tokens refused through Kafka's error flow (JSON
//! challenge, `\x01`, failure) and closed; an in-process validation hook;
//! `connections.max.reauth.ms` sessions that expire and close a connection that
//! did not re-authenticate, and that renew in place when it does; re-authentication
//! that changes the principal or the mechanism refused. Other connections are
//! unharmed throughout.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use baton_broker::security::TokenValidator;
use baton_broker::{
    Broker, BrokerConfig, BrokerHandle, ListenerSecurity, SaslSettings, SecurityProtocol,
};
use baton_protocol::messages::*;
use baton_protocol::sasl::oauthbearer::unsecured_jws;
use baton_protocol::sasl::{ClientSession, Mechanism, Secret, TokenRejection, ValidatedToken};
use baton_protocol::ErrorCode;
use baton_testkit::wire::*;
use bytes::Bytes;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A token for `principal` valid for `lifetime_ms` from now (negative: expired).
fn token(principal: &str, lifetime_ms: i64) -> String {
    let now = now_ms();
    unsecured_jws(principal, now - 60_000, now + lifetime_ms, &[])
}

async fn broker_with(sasl: SaslSettings) -> BrokerHandle {
    let security = ListenerSecurity::new(SecurityProtocol::SaslPlaintext).with_sasl(sasl);
    Broker::start(BrokerConfig::in_memory().with_security(security))
        .await
        .unwrap()
}

fn settings() -> SaslSettings {
    SaslSettings::new([
        Mechanism::OAuthBearer,
        Mechanism::Plain,
        Mechanism::ScramSha512,
    ])
    .with_plain_user("alice", "alice-secret")
    .with_plain_user("mallory", "mallory-secret")
    .with_scram_user(Mechanism::ScramSha512, "alice", "alice-secret")
    .unwrap()
}

/// Runs a handshake and the exchange with `session`; the last response.
async fn exchange(c: &mut Client, mut session: ClientSession) -> SaslAuthenticateResponse {
    let handshake = SaslHandshakeRequest {
        mechanism: session.mechanism().name().into(),
    };
    assert_eq!(c.call(&handshake, 1).await.error_code, 0);
    let mut out = session.initial_response();
    loop {
        let req = SaslAuthenticateRequest {
            auth_bytes: Bytes::from(out),
        };
        let resp = c.call(&req, 2).await;
        if resp.error_code != 0 {
            return resp;
        }
        match session.step(&resp.auth_bytes).unwrap() {
            Some(next) => out = next,
            None => return resp,
        }
    }
}

fn bearer(token: &str) -> ClientSession {
    ClientSession::oauthbearer(&Secret::new(token), &[]).unwrap()
}

fn plain(user: &str, password: &str) -> ClientSession {
    ClientSession::new(Mechanism::Plain, user, Secret::new(password)).unwrap()
}

async fn metadata_works(c: &mut Client) -> bool {
    let frame = Client::encode(77, &MetadataRequest::default(), 12);
    c.send_raw(&frame).await.is_ok() && c.recv_frame().await.is_some()
}

#[tokio::test]
async fn an_unsecured_jws_logs_in_for_the_tokens_lifetime() {
    let sasl = settings();
    let broker = broker_with(sasl.clone()).await;
    let mut c = Client::connect(broker.local_addr()).await;
    let resp = exchange(&mut c, bearer(&token("alice", 60_000))).await;
    assert_eq!(resp.error_code, 0, "{:?}", resp.error_message);
    // connections.max.reauth.ms is 0: the token's expiry alone bounds the session,
    // as in Kafka.
    assert!(
        (50_000..=60_000).contains(&resp.session_lifetime_ms),
        "{}",
        resp.session_lifetime_ms
    );
    assert!(metadata_works(&mut c).await);
    assert_eq!(sasl.stats().authentications(), 1);
    broker.shutdown().await;
}

#[tokio::test]
async fn expired_and_malformed_tokens_fail_through_kafkas_error_flow() {
    let sasl = settings();
    let broker = broker_with(sasl.clone()).await;
    let mut good = Client::connect(broker.local_addr()).await;
    assert_eq!(
        exchange(&mut good, bearer(&token("alice", 60_000)))
            .await
            .error_code,
        0
    );

    for bad in [
        token("alice", -1_000),
        "not-a-jws".to_string(),
        "a.b.".to_string(),
    ] {
        let mut c = Client::connect(broker.local_addr()).await;
        let handshake = SaslHandshakeRequest {
            mechanism: "OAUTHBEARER".into(),
        };
        assert_eq!(c.call(&handshake, 1).await.error_code, 0);
        let mut session = bearer(&bad);
        let first = SaslAuthenticateRequest {
            auth_bytes: Bytes::from(session.initial_response()),
        };
        let challenge = c.call(&first, 2).await;
        assert_eq!(challenge.error_code, 0, "the refusal comes as a challenge");
        assert_eq!(&challenge.auth_bytes[..], br#"{"status":"invalid_token"}"#);
        let ack = session.step(&challenge.auth_bytes).unwrap().unwrap();
        assert_eq!(ack, [0x01]);
        let failed = c
            .call(
                &SaslAuthenticateRequest {
                    auth_bytes: Bytes::from(ack),
                },
                2,
            )
            .await;
        assert_eq!(
            failed.error_code,
            ErrorCode::SaslAuthenticationFailed.code()
        );
        assert_eq!(
            failed.error_message.as_deref(),
            Some(r#"{"status":"invalid_token"}"#)
        );
        assert!(c.recv_frame().await.is_none(), "closed after the failure");
    }

    // A first message that is not OAUTHBEARER's grammar fails at once.
    let mut c = Client::connect(broker.local_addr()).await;
    let handshake = SaslHandshakeRequest {
        mechanism: "OAUTHBEARER".into(),
    };
    assert_eq!(c.call(&handshake, 1).await.error_code, 0);
    let garbage = SaslAuthenticateRequest {
        auth_bytes: Bytes::from_static(b"n,,auth=Bearer x"),
    };
    let resp = c.call(&garbage, 2).await;
    assert_eq!(resp.error_code, ErrorCode::SaslAuthenticationFailed.code());
    assert!(resp.error_message.unwrap().contains("OAUTHBEARER"));
    assert!(c.recv_frame().await.is_none());

    assert!(
        metadata_works(&mut good).await,
        "the good connection is unharmed"
    );
    assert_eq!(sasl.stats().failures(), 4);
    let counted =
        super::listeners::refusals_reach(&broker, "SASL_PLAINTEXT", |r| r.sasl_authentication == 4)
            .await;
    assert_eq!(counted.total(), 4, "{counted:?}");
    broker.shutdown().await;
}

#[tokio::test]
async fn a_validation_hook_replaces_the_unsecured_validator() {
    let hook = TokenValidator::from_fn(|token| match token {
        "opaque-service-token" => Ok(ValidatedToken {
            principal: "svc".into(),
            expires_at_ms: i64::MAX,
            issued_at_ms: None,
            scope: Vec::new(),
        }),
        _ => Err(TokenRejection::invalid("unknown token")),
    });
    let broker = broker_with(settings().with_token_validator(hook)).await;
    let mut c = Client::connect(broker.local_addr()).await;
    let resp = exchange(&mut c, bearer("opaque-service-token")).await;
    assert_eq!(resp.error_code, 0);
    assert!(metadata_works(&mut c).await);
    // An unsecured JWS is no longer accepted.
    let mut c = Client::connect(broker.local_addr()).await;
    let resp = exchange(&mut c, bearer(&token("alice", 60_000))).await;
    assert_eq!(resp.error_code, ErrorCode::SaslAuthenticationFailed.code());
    broker.shutdown().await;
}

#[tokio::test]
async fn an_expired_session_closes_a_connection_that_did_not_reauthenticate() {
    let sasl = settings().with_connections_max_reauth(Duration::from_millis(300));
    let broker = broker_with(sasl.clone()).await;
    let mut lazy = Client::connect(broker.local_addr()).await;
    let resp = exchange(&mut lazy, plain("alice", "alice-secret")).await;
    assert_eq!((resp.error_code, resp.session_lifetime_ms), (0, 300));
    assert!(metadata_works(&mut lazy).await);

    // A v0 SaslAuthenticate client is not told the lifetime, but it applies.
    let mut old = Client::connect(broker.local_addr()).await;
    assert_eq!(
        old.call(
            &SaslHandshakeRequest {
                mechanism: "PLAIN".into()
            },
            1
        )
        .await
        .error_code,
        0
    );
    let mut session = plain("alice", "alice-secret");
    let req = SaslAuthenticateRequest {
        auth_bytes: Bytes::from(session.initial_response()),
    };
    assert_eq!(old.call(&req, 0).await.error_code, 0);

    tokio::time::sleep(Duration::from_millis(400)).await;
    // ApiVersions is still answered; anything else closes the connection.
    assert!(!old
        .call(&ApiVersionsRequest::default(), 3)
        .await
        .api_keys
        .is_empty());
    assert!(!metadata_works(&mut lazy).await, "closed: session expired");
    assert!(!metadata_works(&mut old).await, "closed: session expired");
    assert_eq!(sasl.stats().expired_sessions_closed(), 2);
    broker.shutdown().await;
}

#[tokio::test]
async fn reauthentication_renews_the_session_in_place() {
    let sasl = settings().with_connections_max_reauth(Duration::from_millis(1_200));
    let broker = broker_with(sasl.clone()).await;
    let mut c = Client::connect(broker.local_addr()).await;
    assert_eq!(
        exchange(&mut c, plain("alice", "alice-secret"))
            .await
            .error_code,
        0
    );
    let mut o = Client::connect(broker.local_addr()).await;
    let first = exchange(&mut o, bearer(&token("alice", 60_000))).await;
    assert_eq!((first.error_code, first.session_lifetime_ms), (0, 1_200));

    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let renewed = exchange(&mut c, plain("alice", "alice-secret")).await;
    assert_eq!(
        (renewed.error_code, renewed.session_lifetime_ms),
        (0, 1_200)
    );
    let renewed = exchange(&mut o, bearer(&token("alice", 60_000))).await;
    assert_eq!(renewed.error_code, 0);
    // Within a second of the last re-authentication, a handshake is refused
    // without closing (as Kafka refuses it).
    let again = SaslHandshakeRequest {
        mechanism: "PLAIN".into(),
    };
    assert_eq!(
        c.call(&again, 1).await.error_code,
        ErrorCode::IllegalSaslState.code()
    );

    // Past the first session's end, the renewed sessions still serve.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(metadata_works(&mut c).await);
    assert!(metadata_works(&mut o).await);
    assert_eq!(sasl.stats().reauthentications(), 2);
    assert_eq!(sasl.stats().expired_sessions_closed(), 0);
    broker.shutdown().await;
}

#[tokio::test]
async fn reauthentication_cannot_change_principal_or_mechanism() {
    let sasl = settings().with_connections_max_reauth(Duration::from_secs(60));
    let broker = broker_with(sasl.clone()).await;
    let mut bystander = Client::connect(broker.local_addr()).await;
    assert_eq!(
        exchange(&mut bystander, plain("alice", "alice-secret"))
            .await
            .error_code,
        0
    );

    let mut c = Client::connect(broker.local_addr()).await;
    assert_eq!(
        exchange(&mut c, bearer(&token("alice", 60_000)))
            .await
            .error_code,
        0
    );
    let resp = exchange(&mut c, bearer(&token("mallory", 60_000))).await;
    assert_eq!(resp.error_code, ErrorCode::SaslAuthenticationFailed.code());
    let message = resp.error_message.unwrap();
    assert!(message.contains("Cannot change principals"), "{message}");
    assert!(c.recv_frame().await.is_none(), "closed after the refusal");

    let mut c = Client::connect(broker.local_addr()).await;
    assert_eq!(
        exchange(&mut c, plain("alice", "alice-secret"))
            .await
            .error_code,
        0
    );
    let scram =
        ClientSession::new(Mechanism::ScramSha512, "alice", Secret::new("alice-secret")).unwrap();
    let resp = exchange(&mut c, scram).await;
    assert_eq!(resp.error_code, ErrorCode::SaslAuthenticationFailed.code());
    assert!(resp
        .error_message
        .unwrap()
        .contains("re-authentication of mechanism 'PLAIN'"));
    assert!(c.recv_frame().await.is_none());

    assert!(metadata_works(&mut bystander).await);
    assert_eq!(sasl.stats().failures(), 2);
    broker.shutdown().await;
}
