//! SASL listeners over TCP with raw frames: PLAIN and SCRAM exchanges, requests
//! before authentication closing only their connection, failed logins answered
//! then closed, and SASL requests on a plaintext listener. Every refused
//! connection is counted on its listener.

use baton_broker::{
    Broker, BrokerConfig, BrokerHandle, ListenerSecurity, SaslSettings, SecurityProtocol,
};
use baton_protocol::messages::*;
use baton_protocol::sasl::{ClientSession, Mechanism, Secret};
use baton_protocol::ErrorCode;
use baton_testkit::wire::*;
use bytes::Bytes;

use super::listeners::refusals_reach;

async fn sasl_broker() -> BrokerHandle {
    let sasl = SaslSettings::new(Mechanism::ALL)
        .with_plain_user("alice", "alice-secret")
        .with_scram_user(Mechanism::ScramSha256, "bob", "bob-secret")
        .unwrap()
        .with_scram_user(Mechanism::ScramSha512, "carol", "carol-secret")
        .unwrap();
    let security = ListenerSecurity::new(SecurityProtocol::SaslPlaintext).with_sasl(sasl);
    Broker::start(BrokerConfig::in_memory().with_security(security))
        .await
        .unwrap()
}

/// Runs a whole exchange; returns the failing SaslAuthenticate response, if any.
pub(crate) async fn login(
    c: &mut Client,
    mechanism: Mechanism,
    user: &str,
    password: &str,
) -> Option<SaslAuthenticateResponse> {
    let handshake = SaslHandshakeRequest {
        mechanism: mechanism.name().into(),
    };
    assert_eq!(c.call(&handshake, 1).await.error_code, 0);
    let mut session = ClientSession::new(mechanism, user, Secret::new(password)).unwrap();
    let mut out = session.initial_response();
    loop {
        let req = SaslAuthenticateRequest {
            auth_bytes: Bytes::from(out),
        };
        let resp = c.call(&req, 2).await;
        if resp.error_code != 0 {
            return Some(resp);
        }
        match session.step(&resp.auth_bytes).unwrap() {
            Some(next) => out = next,
            None => return None,
        }
    }
}

async fn metadata_works(c: &mut Client) -> bool {
    let frame = Client::encode(77, &MetadataRequest::default(), 12);
    c.send_raw(&frame).await.is_ok() && c.recv_frame().await.is_some()
}

#[tokio::test]
async fn every_mechanism_authenticates_then_serves() {
    let broker = sasl_broker().await;
    for (mechanism, user, password) in [
        (Mechanism::Plain, "alice", "alice-secret"),
        (Mechanism::ScramSha256, "bob", "bob-secret"),
        (Mechanism::ScramSha512, "carol", "carol-secret"),
    ] {
        let mut c = Client::connect(broker.local_addr()).await;
        let versions = c.call(&ApiVersionsRequest::default(), 3).await;
        for key in [17, 36] {
            assert!(
                versions.api_keys.iter().any(|k| k.api_key == key),
                "key {key} advertised"
            );
        }
        assert_eq!(
            login(&mut c, mechanism, user, password).await,
            None,
            "{mechanism}"
        );
        assert!(metadata_works(&mut c).await, "{mechanism}");
        // A second handshake once authenticated is refused without closing.
        let again = SaslHandshakeRequest {
            mechanism: "PLAIN".into(),
        };
        assert_eq!(
            c.call(&again, 1).await.error_code,
            ErrorCode::IllegalSaslState.code()
        );
        assert!(metadata_works(&mut c).await);
    }
    broker.shutdown().await;
}

#[tokio::test]
async fn produce_before_authentication_closes_only_that_connection() {
    let broker = sasl_broker().await;
    let mut good = Client::connect(broker.local_addr()).await;
    assert_eq!(
        login(&mut good, Mechanism::ScramSha512, "carol", "carol-secret").await,
        None
    );

    let mut bad = Client::connect(broker.local_addr()).await;
    let produce = produce_req("t", 0, 1, records(0, &["x"]));
    bad.send(&produce, 9).await;
    assert!(bad.recv_frame().await.is_none(), "closed without an answer");

    // Metadata before authentication is refused the same way.
    let mut early = Client::connect(broker.local_addr()).await;
    assert!(!metadata_works(&mut early).await);

    assert!(
        metadata_works(&mut good).await,
        "the authenticated connection is unharmed"
    );
    let counted = refusals_reach(&broker, "SASL_PLAINTEXT", |r| {
        r.unauthenticated_request == 2
    })
    .await;
    assert_eq!(counted.total(), 2, "{counted:?}");
    broker.shutdown().await;
}

#[tokio::test]
async fn failed_logins_are_answered_then_closed() {
    let broker = sasl_broker().await;
    for (mechanism, user, password) in [
        (Mechanism::Plain, "alice", "wrong"),
        (Mechanism::Plain, "nobody", "alice-secret"),
        (Mechanism::ScramSha256, "bob", "wrong"),
        (Mechanism::ScramSha512, "nobody", "x"),
        // carol has a SHA-512 credential only.
        (Mechanism::ScramSha256, "carol", "carol-secret"),
    ] {
        let mut c = Client::connect(broker.local_addr()).await;
        let failed = login(&mut c, mechanism, user, password)
            .await
            .expect("refused");
        assert_eq!(
            failed.error_code,
            ErrorCode::SaslAuthenticationFailed.code()
        );
        let message = failed.error_message.unwrap();
        assert!(message.contains(mechanism.name()), "{message}");
        assert!(!message.contains(password), "{message}");
        assert!(c.recv_frame().await.is_none(), "closed after the answer");
    }

    let mut c = Client::connect(broker.local_addr()).await;
    let handshake = SaslHandshakeRequest {
        mechanism: "GSSAPI".into(),
    };
    let resp = c.call(&handshake, 1).await;
    assert_eq!(resp.error_code, ErrorCode::UnsupportedSaslMechanism.code());
    assert_eq!(
        resp.mechanisms,
        ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
    );
    assert!(c.recv_frame().await.is_none(), "closed after the answer");

    // Malformed SASL bytes, and SaslAuthenticate before any handshake.
    let mut c = Client::connect(broker.local_addr()).await;
    let handshake = SaslHandshakeRequest {
        mechanism: "SCRAM-SHA-512".into(),
    };
    assert_eq!(c.call(&handshake, 1).await.error_code, 0);
    let garbage = SaslAuthenticateRequest {
        auth_bytes: Bytes::from_static(b"y,,n=carol,r=\xff"),
    };
    assert_eq!(
        c.call(&garbage, 2).await.error_code,
        ErrorCode::SaslAuthenticationFailed.code()
    );
    assert!(c.recv_frame().await.is_none());
    let mut c = Client::connect(broker.local_addr()).await;
    let resp = c.call(&garbage, 2).await;
    assert_eq!(resp.error_code, ErrorCode::IllegalSaslState.code());
    assert!(c.recv_frame().await.is_none());
    // Five wrong logins, the unknown mechanism and the malformed SCRAM message;
    // SaslAuthenticate before the handshake.
    let counted = refusals_reach(&broker, "SASL_PLAINTEXT", |r| {
        r.sasl_authentication == 7 && r.sasl_state == 1
    })
    .await;
    assert_eq!(counted.total(), 8, "{counted:?}");
    broker.shutdown().await;
}

#[tokio::test]
async fn plaintext_listener_answers_sasl_requests_with_illegal_state() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let handshake = SaslHandshakeRequest {
        mechanism: "PLAIN".into(),
    };
    assert_eq!(
        c.call(&handshake, 1).await.error_code,
        ErrorCode::IllegalSaslState.code()
    );
    assert!(metadata_works(&mut c).await);
    broker.shutdown().await;
}

#[tokio::test]
async fn sasl_listener_needs_a_mechanism() {
    let security = ListenerSecurity::new(SecurityProtocol::SaslPlaintext);
    assert!(
        Broker::start(BrokerConfig::in_memory().with_security(security))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn oversized_and_unframed_sasl_bytes_close_only_their_connection() {
    let sasl = SaslSettings::new([Mechanism::ScramSha512])
        .with_scram_user(Mechanism::ScramSha512, "carol", "carol-secret")
        .unwrap();
    let security = ListenerSecurity::new(SecurityProtocol::SaslPlaintext).with_sasl(sasl);
    let config = BrokerConfig::in_memory()
        .with_security(security)
        .with_max_frame_bytes(64 * 1024);
    let broker = Broker::start(config).await.unwrap();
    let mut good = Client::connect(broker.local_addr()).await;
    assert_eq!(
        login(&mut good, Mechanism::ScramSha512, "carol", "carol-secret").await,
        None
    );

    // A SaslAuthenticate over the frame limit, after a valid handshake.
    let mut big = Client::connect(broker.local_addr()).await;
    let handshake = SaslHandshakeRequest {
        mechanism: "SCRAM-SHA-512".into(),
    };
    assert_eq!(big.call(&handshake, 1).await.error_code, 0);
    let oversized = SaslAuthenticateRequest {
        auth_bytes: Bytes::from(vec![b'n'; 1 << 20]),
    };
    let _ = big.send_raw(&Client::encode(9, &oversized, 2)).await;
    assert!(big.recv_frame().await.is_none());

    // SASL bytes with no Kafka framing and no handshake (as a v0 client would send).
    let mut raw = Client::connect(broker.local_addr()).await;
    raw.send_raw(b"n,,n=carol,r=abcdef").await.unwrap();
    assert!(raw.recv_frame().await.is_none());

    assert!(
        metadata_works(&mut good).await,
        "the authenticated connection is unharmed"
    );
    refusals_reach(&broker, "SASL_PLAINTEXT", |r| r.bad_request == 2).await;
    broker.shutdown().await;
}
