//! CreateTopics cannot buy more partitions or topics than the broker's limits
//! (`BrokerLimits::max_partitions`, `max_topics`, `max_partitions_per_request`), on
//! a standalone broker and on a cluster, over real TCP.
//!
//! A counting global allocator tracks the process's live heap bytes, so the tests
//! also check what a hostile request costs: no more than the partitions the limits
//! allow (times a per-partition bound) plus a constant. The allocator is process
//! wide, so every test here takes [`SERIAL`] and they run one at a time.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use baton_broker::{Broker, BrokerConfig, BrokerLimits, Cluster};
use baton_protocol::messages::*;
use baton_protocol::{ErrorCode, Message};
use baton_testkit::wire::*;
use bytes::Bytes;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        System.alloc_zeroed(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        let p = System.realloc(ptr, layout, new_size);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Live heap bytes of the whole process.
fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// Heap measurements are process wide: one test at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `test` alone, on a runtime of `workers` threads (0: current thread) that is
/// dropped, with everything the test started, before the next test runs.
fn serial<F: std::future::Future<Output = ()>>(workers: usize, test: impl FnOnce() -> F) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let rt = if workers == 0 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(workers);
        b
    }
    .enable_all()
    .build()
    .unwrap();
    rt.block_on(test());
}

/// Upper bound on the heap one created, empty in-memory partition may hold (the
/// measured cost is printed by `regression_body_of_36_bytes`).
const PARTITION_COST: usize = 1024;
/// Heap a request may leave behind besides its partitions (connection buffers,
/// topic entries, allocator noise of the runtime).
const SLACK: usize = 1 << 20;

/// The regression input: a CreateTopics v2 request (header and body) of 36
/// bytes asking for one topic "x" of 10,000 partitions.
const REGRESSION_HEX: &str =
    "0013000200000000ffff0000000100017800002710000100000000000000000000000000";

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn limits(max_partitions: usize, max_topics: usize, per_request: usize) -> BrokerLimits {
    BrokerLimits {
        max_partitions,
        max_topics,
        max_partitions_per_request: per_request,
        ..BrokerLimits::default()
    }
}

async fn start(limits: BrokerLimits) -> baton_broker::BrokerHandle {
    Broker::start(BrokerConfig::in_memory().with_limits(limits))
        .await
        .unwrap()
}

/// Sends the regression frame and decodes the v2 response.
async fn send_regression(c: &mut Client) -> CreatableTopicResult {
    let body = unhex(REGRESSION_HEX);
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    c.send_raw(&frame).await.unwrap();
    let (corr, mut resp) = c.recv::<CreateTopicsRequest>(2).await;
    assert_eq!(corr, 0);
    assert_eq!(resp.topics.len(), 1);
    resp.topics.remove(0)
}

/// A request for `n` topics `<prefix>0..` of `partitions` partitions each.
fn many(prefix: &str, n: usize, partitions: i32, validate_only: bool) -> CreateTopicsRequest {
    CreateTopicsRequest {
        topics: (0..n)
            .map(|i| CreatableTopic {
                name: format!("{prefix}{i}"),
                num_partitions: partitions,
                replication_factor: -1,
                ..Default::default()
            })
            .collect(),
        timeout_ms: 0,
        validate_only,
    }
}

/// (error code, message) per topic, in request order.
fn outcomes(resp: CreateTopicsResponse) -> Vec<(i16, String)> {
    resp.topics
        .into_iter()
        .map(|t| (t.error_code, t.error_message.unwrap_or_default()))
        .collect()
}

/// Topics and partitions the broker reports in Metadata (all topics).
async fn totals(c: &mut Client) -> (usize, usize) {
    let meta = c
        .call(
            &MetadataRequest {
                topics: None,
                ..Default::default()
            },
            12,
        )
        .await;
    let partitions = meta.topics.iter().map(|t| t.partitions.len()).sum();
    (meta.topics.len(), partitions)
}

fn assert_limit(got: &(i16, String), code: ErrorCode, needles: &[&str]) {
    assert_eq!(got.0, code.code(), "expected {code:?}, got {got:?}");
    for n in needles {
        assert!(got.1.contains(n), "message {:?} lacks {n:?}", got.1);
    }
}

#[test]
fn regression_body_of_36_bytes() {
    serial(0, || async {
        let body = unhex(REGRESSION_HEX);
        assert_eq!(body.len(), 36);
        // What it is: CreateTopics (19) v2, correlation 0, null client id; one topic "x"
        // of 10,000 partitions, replication factor 1.
        assert_eq!(&body[..4], &[0, 19, 0, 2]);
        let req = CreateTopicsRequest::decode_body(Bytes::copy_from_slice(&body[10..]), 2).unwrap();
        assert_eq!(req.topics.len(), 1);
        assert_eq!(
            (req.topics[0].name.as_str(), req.topics[0].num_partitions),
            ("x", 10_000)
        );

        // Default limits: 10,000 partitions is exactly the per-request limit, so the topic
        // is created, and costs at most PARTITION_COST per partition.
        let broker = start(BrokerLimits::default()).await;
        let mut c = Client::connect(broker.local_addr()).await;
        let before = live();
        let got = send_regression(&mut c).await;
        assert_eq!(got.error_code, 0, "{:?}", got.error_message);
        drop(got);
        let grown = live().saturating_sub(before);
        println!(
            "heap per empty in-memory partition: {} bytes ({grown} for 10,000)",
            grown / 10_000
        );
        assert!(
            grown < 10_000 * PARTITION_COST + SLACK,
            "{grown} bytes for 10,000 partitions"
        );
        broker.shutdown().await;

        // One topic above the per-request limit: INVALID_PARTITIONS, nothing held.
        let broker = start(limits(100_000, 10_000, 9_999)).await;
        let mut c = Client::connect(broker.local_addr()).await;
        let before = live();
        let got = send_regression(&mut c).await;
        assert_limit(
            &(got.error_code, got.error_message.unwrap_or_default()),
            ErrorCode::InvalidPartitions,
            &["max_partitions_per_request", "9999"],
        );
        let grown = live().saturating_sub(before);
        assert!(grown < SLACK, "{grown} bytes for a refused topic");
        assert_eq!(totals(&mut c).await, (0, 0));
        broker.shutdown().await;

        // Above the broker-wide partition limit: POLICY_VIOLATION, nothing held.
        let broker = start(limits(5_000, 10_000, 10_000)).await;
        let mut c = Client::connect(broker.local_addr()).await;
        let got = send_regression(&mut c).await;
        assert_limit(
            &(got.error_code, got.error_message.unwrap_or_default()),
            ErrorCode::PolicyViolation,
            &["(max_partitions)", "5000", "0 exist"],
        );
        assert_eq!(totals(&mut c).await, (0, 0));
        broker.shutdown().await;
    });
}

#[test]
fn hundred_topics_of_ten_thousand_create_at_most_the_limit() {
    serial(0, || async {
        let req = many("t", 100, 10_000, false);
        let encoded = Client::encode(1, &req, 2);
        println!("request frame: {} bytes", encoded.len());

        // Default limits: the first topic uses the whole per-request sum.
        let broker = start(BrokerLimits::default()).await;
        let mut c = Client::connect(broker.local_addr()).await;
        let before = live();
        let got = outcomes(c.call(&req, 2).await);
        let grown = live().saturating_sub(before);
        assert_eq!(got[0].0, 0, "{:?}", got[0]);
        for o in &got[1..] {
            assert_limit(
                o,
                ErrorCode::PolicyViolation,
                &["max_partitions_per_request", "10000"],
            );
        }
        assert!(
            grown < 10_000 * PARTITION_COST + SLACK,
            "{grown} bytes for a request allowed 10,000 partitions"
        );
        assert_eq!(totals(&mut c).await, (1, 10_000));
        broker.shutdown().await;

        // A small broker-wide limit bounds the heap by that limit, not by the request.
        let broker = start(limits(2_000, 10_000, 10_000)).await;
        let mut c = Client::connect(broker.local_addr()).await;
        let before = live();
        let got = outcomes(c.call(&req, 2).await);
        for o in &got {
            assert_limit(o, ErrorCode::PolicyViolation, &["(max_partitions)", "2000"]);
        }
        let small = outcomes(c.call(&many("s", 100, 1_000, false), 2).await);
        let grown = live().saturating_sub(before);
        assert_eq!((small[0].0, small[1].0), (0, 0), "{small:?}");
        for o in &small[2..] {
            assert_limit(
                o,
                ErrorCode::PolicyViolation,
                &["(max_partitions)", "2000", "2000 exist"],
            );
        }
        assert!(
            grown < 2_000 * PARTITION_COST + SLACK,
            "{grown} bytes with max_partitions 2,000"
        );
        assert_eq!(totals(&mut c).await, (2, 2_000));
        broker.shutdown().await;
    });
}

#[test]
fn broker_totals_hold_across_requests() {
    serial(0, || async {
        let broker = start(limits(100, 5, 1_000)).await;
        let mut c = Client::connect(broker.local_addr()).await;
        for i in 0..3 {
            let got = outcomes(c.call(&many(&format!("a{i}-"), 1, 30, false), 7).await);
            assert_eq!(got[0].0, 0, "{got:?}");
        }
        let got = outcomes(c.call(&many("b", 1, 30, false), 7).await);
        assert_limit(
            &got[0],
            ErrorCode::PolicyViolation,
            &["(max_partitions)", "100", "90 exist"],
        );
        let got = outcomes(c.call(&many("c", 3, 1, false), 7).await);
        assert_eq!((got[0].0, got[1].0), (0, 0), "{got:?}");
        assert_limit(
            &got[2],
            ErrorCode::PolicyViolation,
            &["(max_topics)", "5", "5 exist"],
        );
        assert_eq!(totals(&mut c).await, (5, 92));

        // Auto-creation past the limit fails cleanly and creates nothing.
        let meta = c
            .call(
                &MetadataRequest {
                    topics: Some(vec![MetadataRequestTopic {
                        name: Some("auto".into()),
                        ..Default::default()
                    }]),
                    allow_auto_topic_creation: true,
                    ..Default::default()
                },
                12,
            )
            .await;
        assert_eq!(
            meta.topics[0].error_code,
            ErrorCode::UnknownTopicOrPartition.code()
        );
        assert_eq!(totals(&mut c).await, (5, 92));

        // Deleting a topic gives its room back.
        let del = c
            .call(
                &DeleteTopicsRequest {
                    topic_names: vec!["a0-0".into()],
                    timeout_ms: 1000,
                    ..Default::default()
                },
                5,
            )
            .await;
        assert_eq!(del.responses[0].error_code, 0);
        let got = outcomes(c.call(&many("d", 1, 38, false), 7).await);
        assert_eq!(got[0].0, 0, "{got:?}");
        assert_eq!(totals(&mut c).await, (5, 100));
        broker.shutdown().await;
    });
}

#[test]
fn validate_only_counts_the_same_and_creates_nothing() {
    serial(0, || async {
        let broker = start(limits(150, 10, 100)).await;
        let mut c = Client::connect(broker.local_addr()).await;
        let got = outcomes(c.call(&many("v", 3, 60, true), 7).await);
        assert_eq!(got[0].0, 0, "{got:?}");
        for o in &got[1..] {
            assert_limit(
                o,
                ErrorCode::PolicyViolation,
                &["max_partitions_per_request", "100"],
            );
        }
        let got = outcomes(c.call(&many("w", 1, 101, true), 7).await);
        assert_limit(
            &got[0],
            ErrorCode::InvalidPartitions,
            &["max_partitions_per_request", "100"],
        );
        assert_eq!(totals(&mut c).await, (0, 0));

        // With 100 partitions in place, validating 60 more passes the broker total.
        let got = outcomes(c.call(&many("x", 1, 100, false), 7).await);
        assert_eq!(got[0].0, 0, "{got:?}");
        let got = outcomes(c.call(&many("y", 1, 60, true), 7).await);
        assert_limit(
            &got[0],
            ErrorCode::PolicyViolation,
            &["(max_partitions)", "150", "100 exist"],
        );
        assert_eq!(totals(&mut c).await, (1, 100));
        broker.shutdown().await;
    });
}

#[test]
fn racing_requests_cannot_overshoot() {
    serial(4, || async {
        let broker = start(limits(1_000, 10_000, 10_000)).await;
        let addr = broker.local_addr();
        let mut clients = Vec::new();
        for _ in 0..4 {
            clients.push(Client::connect(addr).await);
        }
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(4));
        let tasks: Vec<_> = clients
            .into_iter()
            .enumerate()
            .map(|(i, mut c)| {
                let barrier = barrier.clone();
                tokio::spawn(async move {
                    let req = many(&format!("r{i}-"), 10, 100, false);
                    barrier.wait().await;
                    outcomes(c.call(&req, 7).await)
                })
            })
            .collect();
        let mut created = 0;
        for t in tasks {
            for o in t.await.unwrap() {
                if o.0 == 0 {
                    created += 1;
                } else {
                    assert_limit(&o, ErrorCode::PolicyViolation, &["(max_partitions)"]);
                }
            }
        }
        assert_eq!(
            created, 10,
            "topics of 100 partitions under a limit of 1,000"
        );
        let mut c = Client::connect(addr).await;
        assert_eq!(totals(&mut c).await, (10, 1_000));
        broker.shutdown().await;
    });
}

#[test]
fn cluster_controller_enforces_the_same_limits() {
    serial(2, || async {
        let cluster = Cluster::builder()
            .brokers(1)
            .limits(limits(2_000, 4, 1_000))
            .start()
            .await
            .expect("cluster starts");
        let addr: std::net::SocketAddr = cluster.bootstrap_servers()[0].parse().unwrap();
        let mut c = Client::connect(addr).await;

        let got = send_regression(&mut c).await;
        assert_limit(
            &(got.error_code, got.error_message.unwrap_or_default()),
            ErrorCode::InvalidPartitions,
            &["max_partitions_per_request", "1000"],
        );
        let got = outcomes(c.call(&many("a", 2, 600, false), 7).await);
        assert_eq!(got[0].0, 0, "{got:?}");
        assert_limit(
            &got[1],
            ErrorCode::PolicyViolation,
            &["max_partitions_per_request", "1000"],
        );
        // Validated, not created: the count below stays at three topics of 600.
        let got = outcomes(c.call(&many("v", 1, 600, true), 7).await);
        assert_eq!(got[0].0, 0, "{got:?}");
        for prefix in ["b", "c"] {
            let got = outcomes(c.call(&many(prefix, 1, 600, false), 7).await);
            assert_eq!(got[0].0, 0, "{got:?}");
        }
        let got = outcomes(c.call(&many("d", 1, 600, false), 7).await);
        assert_limit(
            &got[0],
            ErrorCode::PolicyViolation,
            &["(max_partitions)", "2000", "1800 exist"],
        );
        let got = outcomes(c.call(&many("e", 2, 1, false), 7).await);
        assert_eq!(got[0].0, 0, "{got:?}");
        assert_limit(
            &got[1],
            ErrorCode::PolicyViolation,
            &["(max_topics)", "4", "4 exist"],
        );
        cluster.shutdown().await;
    });
}
