//! A request the broker does not support is answered or refused at once, never left
//! hanging, and the binary logs each refusal at warn with the API key, the version,
//! the client id and the peer: an unknown API key and a version below the supported
//! range close the connection; a too-new ApiVersions gets the v0 answer (KIP-511).
//! The binary keeps serving when whoever started it closes its stdout.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use baton_protocol::messages::{ApiVersionsRequest, ProduceRequest};
use baton_protocol::{ErrorCode, Message, RequestHeader};
use baton_testkit::wire::Client;
use bytes::BytesMut;

/// Longest a refusal may take to be answered or to close the connection.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// The client id every request of this test names.
const CLIENT_ID: &str = "refusal-probe";

/// Kills the child when the test ends, however it ends.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The binary on port 0 logging at `log_level`, with `stdout`, and its log lines
/// (stderr) as they come.
fn spawn(stdout: Stdio, log_level: &str) -> (Child, mpsc::Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_baton-broker"))
        .args(["--listen", "127.0.0.1:0"])
        .env("RUST_LOG", log_level)
        .env("NO_COLOR", "1")
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .expect("baton-broker starts");
    let stderr = child.stderr.take().unwrap();
    let (tx, logs) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    (child, logs)
}

/// The binary on port 0, its address (the first line it prints; the rest of its
/// stdout is not read), and its log lines (stderr) as they come.
fn start() -> (Proc, SocketAddr, mpsc::Receiver<String>) {
    let (mut child, logs) = spawn(Stdio::piped(), "warn");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let child = Proc(child);
    loop {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "the binary exited");
        if let Some((_, addr)) = line.trim().split_once(" on ") {
            if let Ok(addr) = addr.parse() {
                return (child, addr, logs);
            }
        }
    }
}

/// Waits for a log line that contains every one of `parts`.
fn expect_log(logs: &mpsc::Receiver<String>, parts: &[&str]) -> String {
    let deadline = Instant::now() + ANSWER_TIMEOUT;
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match logs.recv_timeout(left) {
            Ok(line) if parts.iter().all(|p| line.contains(p)) => return line,
            Ok(line) => seen.push(line),
            Err(_) => break,
        }
    }
    panic!("no log line with {parts:?}; lines seen: {seen:#?}");
}

/// A request frame with a header (v1) and `body`, built by hand so that any API
/// key and version can be sent.
fn raw_frame(api_key: i16, version: i16, body: &[u8]) -> Vec<u8> {
    let mut frame = BytesMut::new();
    let at = baton_protocol::frame::begin_frame(&mut frame);
    RequestHeader {
        api_key,
        api_version: version,
        correlation_id: 7,
        client_id: Some(CLIENT_ID.into()),
    }
    .encode(&mut frame, 1);
    frame.extend_from_slice(body);
    baton_protocol::frame::finish_frame(&mut frame, at);
    frame.to_vec()
}

/// Sends `frame` on a new connection and expects the broker to close it.
async fn expect_closed(addr: SocketAddr, frame: &[u8]) {
    let mut c = Client::connect(addr).await;
    c.send_raw(frame).await.unwrap();
    let answer = tokio::time::timeout(ANSWER_TIMEOUT, c.recv_frame())
        .await
        .expect("the broker closes the connection at once");
    assert!(answer.is_none(), "closed without an answer");
}

#[tokio::test]
async fn refused_requests_are_answered_at_once_and_logged_with_client_and_peer() {
    let (_broker, addr, logs) = start();

    // An API key the broker has no handler for.
    expect_closed(addr, &raw_frame(1000, 3, &[])).await;
    let line = expect_log(&logs, &["unknown api key 1000 v3", CLIENT_ID]);
    assert!(
        line.contains("WARN") && line.contains("127.0.0.1:"),
        "{line}"
    );

    // Produce v2, below the supported range (Kafka 4.0 dropped it, KIP-896).
    assert!(!ProduceRequest::supports(2));
    expect_closed(addr, &raw_frame(ProduceRequest::API_KEY, 2, &[0; 16])).await;
    let line = expect_log(&logs, &["unsupported version 2 of api key 0", CLIENT_ID]);
    assert!(
        line.contains("WARN") && line.contains("127.0.0.1:"),
        "{line}"
    );

    // A too-new ApiVersions is answered with v0 and UNSUPPORTED_VERSION (KIP-511).
    let mut c = Client::connect(addr).await;
    c.send_raw(&raw_frame(ApiVersionsRequest::API_KEY, 99, &[]))
        .await
        .unwrap();
    let (corr, resp) = tokio::time::timeout(ANSWER_TIMEOUT, c.recv::<ApiVersionsRequest>(0))
        .await
        .expect("answered at once");
    assert_eq!(corr, 7);
    assert_eq!(resp.error_code, ErrorCode::UnsupportedVersion.code());
    let line = expect_log(&logs, &["UNSUPPORTED_VERSION", "api_key=18", "version=99"]);
    assert!(
        line.contains(CLIENT_ID) && line.contains("127.0.0.1"),
        "{line}"
    );
}

/// Whoever starts the binary may stop reading its stdout once it has the address
/// (as `start` does, or `| head -1`): the binary then keeps serving. It used to
/// panic on the broken pipe at its next line, so a test that connected after
/// reading the first line was refused whenever the second line came too late to
/// share the first's read.
#[tokio::test]
async fn the_binary_keeps_serving_when_its_stdout_is_closed() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let (child, logs) = spawn(writer.into(), "info");
    let mut child = Proc(child);
    let line = expect_log(&logs, &["broker listening", "addr="]);
    let addr: SocketAddr = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("addr="))
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line}"));
    // Logged after the failed write: the binary got past it.
    expect_log(&logs, &["stdout is closed", "not announced"]);

    let mut c = Client::connect(addr).await;
    let req = ApiVersionsRequest {
        client_software_name: CLIENT_ID.into(),
        client_software_version: "1".into(),
    };
    let resp = tokio::time::timeout(ANSWER_TIMEOUT, c.call(&req, 3))
        .await
        .expect("answered");
    assert_eq!(resp.error_code, ErrorCode::None.code());
    assert!(
        child.0.try_wait().unwrap().is_none(),
        "the binary still runs"
    );
}
