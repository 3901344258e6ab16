//! A group member whose join takes long is never silent: a JoinGroup the
//! coordinator holds (tansu 0.6 holds every join for half the session timeout) is
//! reported while it waits and completes when answered, and a join that keeps
//! failing logs every retry with its reason, warns once it outlasts the rebalance
//! timeout, and still joins once the coordinator lets it.
//!
//! The broker sits behind the recording proxy (`baton_testkit::proxy`), which holds
//! or rewrites the coordinator's JoinGroup responses. Log lines are captured per
//! test with a `tracing` subscriber set as the default on the test's (single)
//! runtime thread, so every task of the test logs into it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_kafka::{Client, GroupConsumer, Producer, ProducerRecord};
use baton_protocol::messages::{JoinGroupRequest, JoinGroupResponse};
use baton_protocol::{envelope, ErrorCode, Message};
use baton_testkit::client::create_topic;
use baton_testkit::proxy::{Exchange, Proxied, ProxyState};
use bytes::Bytes;
use tokio::sync::watch;

/// Log output of one test.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    /// Captures `baton_kafka`'s log lines (debug and up) on this thread until the guard
    /// drops.
    fn capture() -> (Logs, tracing::subscriber::DefaultGuard) {
        let logs = Logs::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_env_filter(tracing_subscriber::EnvFilter::new("baton_kafka=debug"))
            .with_writer(move || writer.clone())
            .finish();
        (logs, tracing::subscriber::set_default(subscriber))
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// Lines containing every one of `needles`.
    fn lines_with(&self, needles: &[&str]) -> usize {
        self.text()
            .lines()
            .filter(|l| needles.iter().all(|n| l.contains(n)))
            .count()
    }

    /// Waits until `count` lines contain all of `needles`; 20 s without them fails
    /// the test, printing what was logged.
    async fn wait_for(&self, needles: &[&str], count: usize) {
        let found = tokio::time::timeout(Duration::from_secs(20), async {
            while self.lines_with(needles) < count {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        if found.is_err() {
            panic!(
                "{count} log lines with {needles:?} never came; logged:\n{}",
                self.text()
            );
        }
    }
}

/// The JoinGroup response in `frame` (header and body) at `version`, with its
/// correlation id.
fn join_response(frame: &[u8], version: i16) -> (i32, JoinGroupResponse) {
    let (header, resp) =
        envelope::decode_response::<JoinGroupRequest>(Bytes::copy_from_slice(frame), version)
            .expect("JoinGroup response");
    (header.correlation_id, resp)
}

/// `resp` as a response frame (without size prefix) to request `correlation_id`
/// at `version`.
fn join_frame(correlation_id: i32, resp: &JoinGroupResponse, version: i16) -> Vec<u8> {
    envelope::encode_response::<JoinGroupRequest>(correlation_id, version, resp).expect("encodes")
        [4..]
        .to_vec()
}

/// Whether the frame is a successful JoinGroup response (not MEMBER_ID_REQUIRED
/// nor another error).
fn is_joined(ex: Exchange, frame: &[u8]) -> bool {
    ex.api_key == JoinGroupRequest::API_KEY
        && join_response(frame, ex.version).1.error_code == ErrorCode::None.code()
}

async fn produce(client: &Client, topic: &str, count: usize) {
    let producer = Producer::builder(client).build();
    let mut deliveries = Vec::with_capacity(count);
    for i in 0..count {
        let r = ProducerRecord::new(topic)
            .partition(0)
            .value(format!("r{i}"));
        deliveries.push(producer.send(r).await.expect("send"));
    }
    for d in deliveries {
        d.await.expect("delivered");
    }
    producer.close().await;
}

/// Reads `count` records; a 20 s stall or an error fails the test.
async fn read(consumer: &mut GroupConsumer, count: usize) {
    for n in 0..count {
        tokio::time::timeout(Duration::from_secs(20), consumer.recv())
            .await
            .unwrap_or_else(|_| panic!("stalled after {n} records"))
            .unwrap_or_else(|e| panic!("after {n} records: {e}"));
    }
}

fn consumer(client: &Client, group: &str, topic: &str) -> baton_kafka::GroupConsumerBuilder {
    GroupConsumer::builder(client, group)
        .subscribe([topic])
        .session_timeout(Duration::from_secs(3))
        .heartbeat_interval(Duration::from_millis(100))
        .max_wait(Duration::from_millis(50))
}

/// tansu 0.6 answers MEMBER_ID_REQUIRED at once, then holds the member's second
/// JoinGroup for half the session timeout. Before the fix the member waited in
/// silence (nothing logged, not even at debug); now the wait is reported at info
/// while the coordinator holds the response, and the member syncs and reads once
/// it is answered.
#[tokio::test]
async fn a_join_held_by_the_coordinator_is_reported_while_it_waits() {
    let (logs, _guard) = Logs::capture();
    let (release, released) = watch::channel(false);
    let held = Arc::new(AtomicUsize::new(0));
    let counter = held.clone();
    let setup = Proxied::start(
        "baton-join-tests",
        ProxyState {
            hold: Some(Box::new(move |ex, frame| {
                if !is_joined(ex, frame) {
                    return None;
                }
                counter.fetch_add(1, Ordering::SeqCst);
                let mut released = released.clone();
                Some(Box::pin(async move {
                    let _ = released.wait_for(|r| *r).await;
                }))
            })),
            ..ProxyState::default()
        },
    )
    .await;
    let topic = create_topic(&setup.client, "join-held", 1).await;
    produce(&setup.client, &topic, 10).await;
    let mut consumer = consumer(&setup.client, &format!("g-{topic}"), &topic)
        .rebalance_timeout(Duration::from_secs(10))
        .build()
        .await
        .expect("builds");

    logs.wait_for(&["INFO", "JoinGroup held by the coordinator"], 2)
        .await;
    assert_eq!(held.load(Ordering::SeqCst), 1, "one JoinGroup is held");
    assert_eq!(
        logs.lines_with(&["SyncGroup"]),
        0,
        "no SyncGroup before the join is answered"
    );

    release.send(true).unwrap();
    read(&mut consumer, 10).await;
    assert!(
        logs.lines_with(&["assignment received"]) >= 1,
        "{}",
        logs.text()
    );
    consumer.close().await.expect("closes");
    setup.shutdown().await;
}

/// A coordinator that answers every JoinGroup with REBALANCE_IN_PROGRESS: the
/// member keeps retrying, logs each retry at info with the error, warns once the
/// join has outlasted the rebalance timeout, and joins and reads once the
/// coordinator stops refusing. Before the fix these retries logged nothing.
#[tokio::test]
async fn a_join_that_keeps_failing_logs_each_retry_and_warns() {
    let (logs, _guard) = Logs::capture();
    let refuse = Arc::new(Mutex::new(true));
    let refusing = refuse.clone();
    let setup = Proxied::start(
        "baton-join-tests",
        ProxyState {
            rewrite: Some(Box::new(move |ex, frame| {
                if !*refusing.lock().unwrap() || !is_joined(ex, &frame) {
                    return frame;
                }
                let (correlation_id, mut resp) = join_response(&frame, ex.version);
                resp.error_code = ErrorCode::RebalanceInProgress.code();
                join_frame(correlation_id, &resp, ex.version)
            })),
            ..ProxyState::default()
        },
    )
    .await;
    let topic = create_topic(&setup.client, "join-refused", 1).await;
    produce(&setup.client, &topic, 10).await;
    let mut consumer = consumer(&setup.client, &format!("g-{topic}"), &topic)
        .rebalance_timeout(Duration::from_millis(300))
        .build()
        .await
        .expect("builds");

    let reason = "JoinGroup answered RebalanceInProgress";
    logs.wait_for(&["INFO", "join round repeated", reason], 3)
        .await;
    logs.wait_for(
        &[
            "WARN",
            "join has not completed within the rebalance timeout",
            reason,
        ],
        1,
    )
    .await;
    let joins = setup
        .state
        .lock()
        .unwrap()
        .api_keys
        .iter()
        .filter(|&&k| k == JoinGroupRequest::API_KEY)
        .count();
    assert!(joins >= 4, "the member keeps sending JoinGroup: {joins}");

    *refuse.lock().unwrap() = false;
    read(&mut consumer, 10).await;
    consumer.close().await.expect("closes");
    setup.shutdown().await;
}
