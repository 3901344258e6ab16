//! A node's wall clock is its own `BrokerConfig::env` clock, not the process's:
//! a broker whose clock runs ten years behind stamps `LogAppendTime` records and
//! checks OAUTHBEARER token expiry and starts transactions with that clock.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use baton_broker::{
    Broker, BrokerConfig, BrokerHandle, ListenerSecurity, SaslSettings, SecurityProtocol,
};
use baton_env::{Clock, Env};
use baton_protocol::messages::*;
use baton_protocol::record::{RecordBatch, TimestampType};
use baton_protocol::sasl::oauthbearer::unsecured_jws;
use baton_protocol::sasl::{ClientSession, Mechanism, Secret};
use baton_testkit::wire::*;
use bytes::Bytes;

/// How far the node's clock is behind the process's: ten years.
const SKEW_MS: i64 = -10 * 365 * 24 * 3_600_000;

/// The process's wall clock, in ms since the Unix epoch.
fn process_now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The system clock shifted by a fixed offset.
#[derive(Debug)]
struct SkewedClock(i64);

impl Clock for SkewedClock {
    fn now_ms(&self) -> i64 {
        process_now_ms() + self.0
    }
}

/// The real environment with the wall clock [`SKEW_MS`] off.
fn skewed_env() -> Env {
    Env {
        clock: Arc::new(SkewedClock(SKEW_MS)),
        ..Env::real()
    }
}

async fn skewed_broker(mut config: BrokerConfig) -> BrokerHandle {
    config.env = skewed_env();
    Broker::start(config).await.unwrap()
}

#[tokio::test]
async fn log_append_time_is_the_node_clock() {
    let broker = skewed_broker(BrokerConfig::in_memory()).await;
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("node-clock");
    let r = c
        .call(
            &create_req(&topic, 1, &[("message.timestamp.type", "LogAppendTime")]),
            7,
        )
        .await;
    assert_eq!(r.topics[0].error_code, 0);
    let before = process_now_ms() + SKEW_MS;
    let resp = c
        .call(&produce_req(&topic, 0, 1, records(1, &["a", "b"])), 9)
        .await;
    let after = process_now_ms() + SKEW_MS;
    let p = &resp.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 0);
    assert!(
        (before..=after).contains(&p.log_append_time_ms),
        "log append time {} is not on the node's clock [{before}, {after}] \
         (the process's clock reads about {})",
        p.log_append_time_ms,
        process_now_ms()
    );
    let resp = c.call(&fetch_req(&topic, 0, 0, 0, 0), 12).await;
    let recs = resp.responses[0].partitions[0].records.clone().unwrap();
    let batch = RecordBatch::parse(recs).unwrap();
    batch.verify_crc().unwrap();
    assert_eq!(batch.timestamp_type(), TimestampType::LogAppendTime);
    assert_eq!(batch.max_timestamp(), p.log_append_time_ms);
    broker.shutdown().await;
}

/// Runs an OAUTHBEARER handshake and exchange with `token` (a refusal comes as
/// a challenge the client acknowledges, then the failure); the last response.
async fn oauth_login(c: &mut Client, token: &str) -> SaslAuthenticateResponse {
    let mut session = ClientSession::oauthbearer(&Secret::new(token), &[]).unwrap();
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

#[tokio::test]
async fn oauth_tokens_are_checked_on_the_node_clock() {
    let security = ListenerSecurity::new(SecurityProtocol::SaslPlaintext)
        .with_sasl(SaslSettings::new([Mechanism::OAuthBearer]));
    let broker = skewed_broker(BrokerConfig::in_memory().with_security(security)).await;
    const HOUR_MS: i64 = 3_600_000;

    // Issued a minute ago and valid for an hour on the node's clock: accepted,
    // and the session lasts what is left of it on that clock.
    let node_now = process_now_ms() + SKEW_MS;
    let token = unsecured_jws("alice", node_now - 60_000, node_now + HOUR_MS, &[]);
    let mut c = Client::connect(broker.local_addr()).await;
    let resp = oauth_login(&mut c, &token).await;
    assert_eq!(resp.error_code, 0, "{:?}", resp.error_message);
    assert!(
        resp.session_lifetime_ms > 0 && resp.session_lifetime_ms <= HOUR_MS,
        "session lifetime {} ms is not counted on the node's clock",
        resp.session_lifetime_ms
    );

    // Issued a minute ago on the process's clock: ten years in the node's
    // future, so refused.
    let now = process_now_ms();
    let token = unsecured_jws("alice", now - 60_000, now + HOUR_MS, &[]);
    let mut c = Client::connect(broker.local_addr()).await;
    let resp = oauth_login(&mut c, &token).await;
    assert_ne!(
        resp.error_code, 0,
        "a token issued in the node's future was accepted"
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn transaction_start_time_is_the_node_clock() {
    use crate::transactions::{add, describe, init};
    let broker = skewed_broker(BrokerConfig::in_memory()).await;
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("node-clock-txn");
    create_topic(&mut c, &topic, 1).await;
    let (code, pid, epoch) = init(&mut c, "node-clock-txn", 60_000).await;
    assert_eq!(code, 0);
    let before = process_now_ms() + SKEW_MS;
    assert_eq!(
        add(&mut c, "node-clock-txn", pid, epoch, &topic, &[0]).await,
        [0]
    );
    let after = process_now_ms() + SKEW_MS;
    let d = describe(&mut c, "node-clock-txn").await;
    assert_eq!(d.transaction_state, "Ongoing");
    assert!(
        (before..=after).contains(&d.transaction_start_time_ms),
        "transaction start {} is not on the node's clock [{before}, {after}]",
        d.transaction_start_time_ms
    );
    broker.shutdown().await;
}
