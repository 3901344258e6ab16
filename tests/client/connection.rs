//! The connection layer against peers that misbehave on purpose (a raw
//! `TcpListener`, or an in-memory stream, speaking just enough Kafka) and against
//! the real broker. Timeouts are checked on an in-memory stream with tokio's clock
//! paused, so they fire at their exact moment and take no real time.

use std::sync::Arc;
use std::time::Duration;

use baton_kafka::connection::{BrokenCause, Connection, ConnectionConfig, ConnectionError};
use baton_protocol::envelope;
use baton_protocol::messages::{
    ApiVersion, ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, ProduceRequest,
};
use baton_protocol::{ErrorCode, Message, RequestHeader};
use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Reads one request frame; returns (api key, version, correlation id).
async fn read_request<S: AsyncRead + Unpin>(s: &mut S) -> Option<(i16, i16, i32)> {
    let len = s.read_u32().await.ok()?;
    let mut body = vec![0u8; len as usize];
    s.read_exact(&mut body).await.ok()?;
    RequestHeader::peek(&body).ok()
}

/// An ApiVersions response frame (header v0) in `version`, announcing `apis`.
fn api_versions_frame(
    correlation_id: i32,
    version: i16,
    code: ErrorCode,
    apis: &[(i16, i16, i16)],
    throttle: i32,
) -> Bytes {
    let resp = ApiVersionsResponse {
        error_code: code.code(),
        api_keys: apis
            .iter()
            .map(|&(api_key, min_version, max_version)| ApiVersion {
                api_key,
                min_version,
                max_version,
            })
            .collect(),
        throttle_time_ms: throttle,
        ..Default::default()
    };
    envelope::encode_response::<ApiVersionsRequest>(correlation_id, version, &resp).unwrap()
}

const APIS: &[(i16, i16, i16)] = &[(18, 0, 3), (3, 0, 12), (0, 0, 2)];

/// Answers the connect-time ApiVersions on `s`, then runs `then` with it.
async fn answer_then<S, F, Fut>(mut s: S, then: F)
where
    S: AsyncRead + AsyncWrite + Unpin,
    F: FnOnce(S) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let (_, version, id) = read_request(&mut s).await.unwrap();
    s.write_all(&api_versions_frame(id, version, ErrorCode::None, APIS, 0))
        .await
        .unwrap();
    then(s).await;
}

/// A TCP peer that answers the connect-time ApiVersions and then runs `then`.
async fn peer<F, Fut>(then: F) -> String
where
    F: FnOnce(TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let (s, _) = listener.accept().await.unwrap();
        answer_then(s, then).await;
    });
    addr
}

/// A connection to an in-memory peer that answers the connect-time ApiVersions
/// and then runs `then`. Nothing here waits on the OS, so with tokio's clock
/// paused time moves only when every task waits on a timer.
async fn in_memory_peer<F, Fut>(then: F) -> Connection
where
    F: FnOnce(tokio::io::DuplexStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (client_end, peer_end) = tokio::io::duplex(64 * 1024);
    tokio::spawn(answer_then(peer_end, then));
    Connection::from_stream(client_end, "in-memory", &ConnectionConfig::default())
        .await
        .unwrap()
}

fn probe() -> ApiVersionsRequest {
    ApiVersionsRequest {
        client_software_name: "probe".into(),
        client_software_version: "1".into(),
    }
}

fn broken_cause(e: &ConnectionError) -> Arc<BrokenCause> {
    match e {
        ConnectionError::Broken { cause, .. } => cause.clone(),
        other => panic!("expected a broken connection, got {other:?}"),
    }
}

#[tokio::test]
async fn a_closing_peer_fails_every_in_flight_request_with_one_root_cause() {
    let (got_three_tx, got_three_rx) = tokio::sync::oneshot::channel();
    let addr = peer(|mut s| async move {
        for _ in 0..3 {
            read_request(&mut s).await.unwrap();
        }
        let _ = got_three_tx.send(());
        drop(s); // close without answering
    })
    .await;
    let conn = Connection::connect(&addr, &ConnectionConfig::default())
        .await
        .unwrap();
    let req = probe();
    let (a, b, c, ()) = tokio::join!(conn.send(&req), conn.send(&req), conn.send(&req), async {
        got_three_rx.await.unwrap();
    });
    let causes: Vec<Arc<BrokenCause>> = [a, b, c]
        .iter()
        .map(|r| broken_cause(r.as_ref().unwrap_err()))
        .collect();
    assert!(matches!(*causes[0], BrokenCause::Closed), "{:?}", causes[0]);
    assert!(Arc::ptr_eq(&causes[0], &causes[1]) && Arc::ptr_eq(&causes[1], &causes[2]));
    // Poisoned: later calls fail at once with the same cause.
    assert!(conn.is_poisoned());
    let later = conn.send(&req).await.unwrap_err();
    assert!(Arc::ptr_eq(&broken_cause(&later), &causes[0]));
}

#[tokio::test]
async fn a_dropped_request_does_not_desync_the_connection() {
    let addr = peer(|mut s| async move {
        // Collect two requests, then answer both in order; each answer carries its
        // own correlation id in throttle_time_ms so the client can tell them apart.
        let (_, v1, id1) = read_request(&mut s).await.unwrap();
        let (_, v2, id2) = read_request(&mut s).await.unwrap();
        s.write_all(&api_versions_frame(id1, v1, ErrorCode::None, APIS, id1))
            .await
            .unwrap();
        s.write_all(&api_versions_frame(id2, v2, ErrorCode::None, APIS, id2))
            .await
            .unwrap();
        let (_, v3, id3) = read_request(&mut s).await.unwrap();
        s.write_all(&api_versions_frame(id3, v3, ErrorCode::None, APIS, id3))
            .await
            .unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest).await;
    })
    .await;
    let conn = Connection::connect(&addr, &ConnectionConfig::default())
        .await
        .unwrap();
    let req = probe();
    {
        // Queue the first request, then drop its future before any answer.
        let first = conn.send(&req);
        tokio::pin!(first);
        tokio::select! {
            biased;
            _ = &mut first => panic!("no answer can have come yet"),
            _ = tokio::task::yield_now() => {}
        }
    }
    let second = conn.send(&req).await.unwrap();
    let third = conn.send(&req).await.unwrap();
    // The first answer was discarded; each later call got its own.
    assert_eq!(third.throttle_time_ms, second.throttle_time_ms + 1);
    assert!(!conn.is_poisoned());
}

#[tokio::test(start_paused = true)]
async fn request_timeout_keeps_the_connection_usable() {
    let (ids_tx, ids_rx) = tokio::sync::oneshot::channel();
    let conn = in_memory_peer(|mut s| async move {
        let (_, v1, id1) = read_request(&mut s).await.unwrap();
        // Answer the first request at 45 s, after its 30 s timeout.
        tokio::time::sleep(Duration::from_secs(45)).await;
        s.write_all(&api_versions_frame(id1, v1, ErrorCode::None, APIS, id1))
            .await
            .unwrap();
        let (_, v2, id2) = read_request(&mut s).await.unwrap();
        s.write_all(&api_versions_frame(id2, v2, ErrorCode::None, APIS, id2))
            .await
            .unwrap();
        let _ = ids_tx.send((id1, id2));
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest).await;
    })
    .await;
    let req = probe();
    let started = tokio::time::Instant::now();
    match conn.send(&req).await {
        Err(ConnectionError::Timeout {
            api_key: 18,
            timeout,
            ..
        }) => assert_eq!(
            timeout,
            Duration::from_secs(30),
            "the default request timeout"
        ),
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert_eq!(started.elapsed(), Duration::from_secs(30));
    assert!(
        !conn.is_poisoned(),
        "a timeout leaves the connection usable"
    );
    // The second request is answered once the peer wakes at 45 s; the late answer
    // to the first one, which comes before it, is discarded.
    let ok = conn.send(&req).await.unwrap();
    assert_eq!(started.elapsed(), Duration::from_secs(45));
    let (id1, id2) = ids_rx.await.unwrap();
    assert_ne!(id1, id2);
    assert_eq!(
        ok.throttle_time_ms, id2,
        "the second request got its own answer"
    );
}

#[tokio::test(start_paused = true)]
async fn an_answer_just_inside_the_request_timeout_is_taken() {
    let just_inside = Duration::from_secs(30) - Duration::from_millis(1);
    let conn = in_memory_peer(move |mut s| async move {
        let (_, version, id) = read_request(&mut s).await.unwrap();
        tokio::time::sleep(just_inside).await;
        s.write_all(&api_versions_frame(id, version, ErrorCode::None, APIS, id))
            .await
            .unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest).await;
    })
    .await;
    let started = tokio::time::Instant::now();
    let answer = conn.send(&probe()).await.expect("answered in time");
    assert!(answer.throttle_time_ms > 0);
    assert_eq!(started.elapsed(), just_inside);
}

#[tokio::test]
async fn falls_back_to_api_versions_v0_and_checks_overlap() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        // An old broker: v3 is answered in v0 with UNSUPPORTED_VERSION.
        let (_, v, id) = read_request(&mut s).await.unwrap();
        assert_eq!(v, 3);
        s.write_all(&api_versions_frame(
            id,
            0,
            ErrorCode::UnsupportedVersion,
            &[(18, 0, 2)],
            0,
        ))
        .await
        .unwrap();
        let (_, v, id) = read_request(&mut s).await.unwrap();
        assert_eq!(v, 0);
        s.write_all(&api_versions_frame(
            id,
            0,
            ErrorCode::None,
            &[(18, 0, 2), (3, 1, 7), (0, 0, 2)],
            0,
        ))
        .await
        .unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest).await;
    });
    let conn = Connection::connect(&addr, &ConnectionConfig::default())
        .await
        .unwrap();
    assert_eq!(conn.version_for::<MetadataRequest>().unwrap(), 7);
    assert_eq!(conn.version_for::<ApiVersionsRequest>().unwrap(), 2);
    match conn.version_for::<ProduceRequest>() {
        Err(ConnectionError::NoCommonVersion {
            broker_max: 2,
            client_min,
            ..
        }) => {
            assert_eq!(client_min, ProduceRequest::MIN_VERSION)
        }
        other => panic!("expected NoCommonVersion, got {other:?}"),
    }
}

#[tokio::test]
async fn an_oversized_frame_poisons_the_connection() {
    let addr = peer(|mut s| async move {
        read_request(&mut s).await.unwrap();
        s.write_all(&(200 * 1024 * 1024i32).to_be_bytes())
            .await
            .unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest).await;
    })
    .await;
    let config = ConnectionConfig {
        max_frame_size: 1024 * 1024,
        ..ConnectionConfig::default()
    };
    let conn = Connection::connect(&addr, &config).await.unwrap();
    let err = conn.send(&probe()).await.unwrap_err();
    assert!(
        matches!(*broken_cause(&err), BrokenCause::Frame(_)),
        "{err:?}"
    );
    assert!(conn.is_poisoned());
}

#[tokio::test]
async fn pipelines_against_the_real_broker_and_fails_after_shutdown() {
    let broker = baton_broker::Broker::start(baton_broker::BrokerConfig::in_memory())
        .await
        .unwrap();
    let conn = Connection::connect(&broker.bootstrap(), &ConnectionConfig::default())
        .await
        .unwrap();
    let req = MetadataRequest::default();
    // 32 requests in flight on one connection at once.
    let many: Vec<_> = (0..32)
        .map(|_| {
            let conn = conn.clone();
            let req = req.clone();
            tokio::spawn(async move { conn.send(&req).await })
        })
        .collect();
    for f in many {
        let resp = f.await.unwrap().unwrap();
        assert_eq!(resp.brokers.len(), 1);
    }
    broker.shutdown().await;
    let err = conn.send(&req).await.unwrap_err();
    assert!(matches!(err, ConnectionError::Broken { .. }), "{err:?}");
    assert!(conn.is_poisoned());
    // Reconnecting is the pool's job; a fresh connect now fails to connect.
    let err = Connection::connect(conn.addr(), &ConnectionConfig::default())
        .await
        .unwrap_err();
    assert!(matches!(err, ConnectionError::Connect { .. }), "{err:?}");
}
