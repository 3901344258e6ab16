//! A hostile broker cannot make the client allocate beyond its bounds, nor panic it.
//!
//! The real broker runs behind the recording proxy of [`baton_testkit::proxy`], on a
//! runtime of its own; the proxy replaces the responses to chosen API keys with
//! hostile ones (seeded random bytes, and honest responses whose array counts,
//! string and bytes lengths lie, cut short or with bytes flipped; for Fetch, record
//! batches that lie about their length and record count, and compressed batches
//! that inflate a thousandfold). The client runs on the test thread alone, where a
//! counting allocator tracks the bytes it holds and their peak. Every public call
//! that makes the client decode one of those responses must return (a typed error,
//! a timeout, or a value) within its configured timeouts, without a panic anywhere
//! in the client, and with a peak heap growth of at most
//! `PER_BYTE * n + FIXED` for the `n` hostile bytes received during the call.
//!
//! A second test speaks raw Kafka framing from a listener of its own, because the
//! proxy always frames honestly: frames that announce more than the configured
//! maximum, or announce the maximum and then stall, must not be buffered ahead of
//! the bytes that actually arrive.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_kafka::{
    Acks, AclBinding, AclBindingFilter, AclOperation, AclPermissionType, Admin, Client, Consumer,
    GroupConsumer, OffsetSpec, PatternType, Producer, ProducerRecord, ResourcePattern,
    ResourceType, StartOffset, TopicPartition,
};
use baton_protocol::envelope;
use baton_protocol::messages::*;
use baton_protocol::record::{Compression, RecordBatchBuilder};
use baton_protocol::testing::Rng;
use baton_testkit::proxy::{Exchange, Proxied, ProxyState};
use baton_testkit::seed;
use bytes::{BufMut, Bytes, BytesMut};

// ---------------------------------------------------------------------------------
// Counting allocator: bytes held by the current thread, and their peak.

struct Counting;

thread_local! {
    static CURRENT: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn add(n: usize) {
    let _ = CURRENT.try_with(|c| {
        let now = c.get() + n;
        c.set(now);
        let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
    });
}

fn sub(n: usize) {
    let _ = CURRENT.try_with(|c| c.set(c.get().saturating_sub(n)));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        add(layout.size());
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        add(layout.size());
        System.alloc_zeroed(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        sub(layout.size());
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Both blocks exist while the contents move.
        add(new_size);
        sub(layout.size());
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Starts a measurement on this thread; returns the bytes held now.
fn reset_peak() -> usize {
    let now = CURRENT.with(Cell::get);
    PEAK.with(|p| p.set(now));
    now
}

fn peak() -> usize {
    PEAK.with(Cell::get)
}

/// Heap growth allowed per hostile byte received: the read buffer may double
/// while a frame arrives (2), the frame is then decoded into structures the
/// protocol crate bounds at a small multiple of its size, and a compressed record
/// batch may inflate up to its decompression limit (see `FIXED`).
const PER_BYTE: usize = 16;

/// Heap growth allowed whatever the bytes: the 64 KiB read buffer of each
/// connection a call opens, and task, timer and metadata state (under 100 KiB
/// measured).
const FIXED: usize = 1 << 20;

/// The consumers' bound on record data held between fetch task and `recv`
/// (`max_buffered_bytes`), with the default record-count bound left as it is.
const BUFFERED: usize = 2 << 20;

/// Further growth allowed while consuming crafted Fetch responses: each carries up
/// to 5 compressed batches that inflate to 1 MiB, the decompression allowance
/// (`DEFAULT_RATIO_ALLOWANCE`) every batch gets whatever its ratio. The consumer
/// holds at most [`BUFFERED`] of them between its fetch task and `recv`, plus the
/// batch being decoded (and the decoder's window) and the one waiting for budget.
const INFLATED: usize = BUFFERED + (4 << 20);

/// The largest frame the test clients accept.
const MAX_FRAME: usize = 1 << 20;

/// Records whether any thread panicked (the client's background tasks run in
/// spawned tasks, whose panics would otherwise go unnoticed).
static PANICKED: AtomicBool = AtomicBool::new(false);

/// Serialises the tests of this file, so that a failing assertion in one does not
/// count as a client panic in the other; returns the guard.
fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let guard = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    PANICKED.store(false, Ordering::SeqCst);
    watch_panics();
    guard
}

fn watch_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICKED.store(true, Ordering::SeqCst);
            default(info);
        }));
    });
}

// ---------------------------------------------------------------------------------
// Hostile responses.

/// What the proxy's rewrite shares with the test.
struct Plan {
    /// API keys whose responses are replaced.
    hostile: Vec<i16>,
    rng: Rng,
    /// Hostile responses sent per API key.
    answered: BTreeMap<i16, usize>,
}

struct Hostile {
    plan: Mutex<Plan>,
    /// Bytes of hostile response frames written so far.
    sent: AtomicUsize,
}

impl Hostile {
    fn set(&self, keys: &[i16]) {
        self.plan.lock().unwrap().hostile = keys.to_vec();
    }

    fn rewrite(&self, ex: Exchange, frame: Vec<u8>) -> Vec<u8> {
        let mut plan = self.plan.lock().unwrap();
        if !plan.hostile.contains(&ex.api_key) {
            return frame;
        }
        *plan.answered.entry(ex.api_key).or_default() += 1;
        let out = hostile_frame(&mut plan.rng, ex, frame);
        self.sent.fetch_add(out.len() + 4, Ordering::SeqCst);
        out
    }
}

/// The length of the response header at the start of the honest `frame`, a
/// response to `api_key` at `version`.
fn header_len(api_key: i16, version: i16, frame: &[u8]) -> usize {
    macro_rules! by_key {
        ($($r:ty),*) => {
            $(if api_key == <$r>::API_KEY {
                let frame = Bytes::copy_from_slice(frame);
                let (_, body) = envelope::split_response::<$r>(frame.clone(), version)
                    .expect("the broker's response header");
                return frame.len() - body.len();
            })*
        };
    }
    by_key!(
        ApiVersionsRequest,
        MetadataRequest,
        ProduceRequest,
        FetchRequest,
        ListOffsetsRequest,
        CreateTopicsRequest,
        DeleteTopicsRequest,
        InitProducerIdRequest,
        FindCoordinatorRequest,
        JoinGroupRequest,
        SyncGroupRequest,
        HeartbeatRequest,
        LeaveGroupRequest,
        OffsetCommitRequest,
        OffsetFetchRequest,
        DescribeAclsRequest,
        CreateAclsRequest,
        DeleteAclsRequest,
        DeleteRecordsRequest,
        ListGroupsRequest,
        DescribeGroupsRequest,
        ConsumerGroupDescribeRequest,
        DeleteGroupsRequest,
        OffsetDeleteRequest
    );
    panic!("the client sent api key {api_key}, which this test does not cover");
}

/// A hostile response frame (header and body) in place of the honest `frame`.
fn hostile_frame(rng: &mut Rng, ex: Exchange, frame: Vec<u8>) -> Vec<u8> {
    let at = header_len(ex.api_key, ex.version, &frame);
    let (head, honest) = frame.split_at(at);
    let mut body = honest.to_vec();
    match rng.below(if ex.api_key == FetchRequest::API_KEY {
        8
    } else {
        6
    }) {
        // Seeded random bytes.
        0 => {
            let len = rng.below(4096) as usize;
            body = rng.bytes(len);
        }
        // Lying 32-bit counts and lengths (arrays, strings, bytes, batch lengths).
        1 => {
            for _ in 0..=rng.below(3) {
                if body.len() >= 4 {
                    let i = rng.below(body.len() as u64 - 3) as usize;
                    let lie: u32 = [0x7fff_fff0, 0xffff_fffe, 0x0100_0000][rng.below(3) as usize];
                    body[i..i + 4].copy_from_slice(&lie.to_be_bytes());
                }
            }
        }
        // A lying compact (unsigned varint) length.
        2 => {
            let i = rng.below(body.len() as u64 + 1) as usize;
            let tail = body.split_off(i);
            body.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x07]);
            body.extend_from_slice(&tail[tail.len().min(5)..]);
        }
        // Cut short.
        3 => body.truncate(rng.below(body.len() as u64 + 1) as usize),
        // Bytes flipped.
        4 => {
            for _ in 0..=rng.below(8) {
                if !body.is_empty() {
                    let i = rng.below(body.len() as u64) as usize;
                    body[i] ^= 1 << rng.below(8);
                }
            }
        }
        // The honest body followed by garbage.
        5 => {
            let len = rng.below(64) as usize + 1;
            body.extend(rng.bytes(len));
        }
        // Fetch: records that lie, or inflate.
        _ => {
            if let Some(crafted) = hostile_fetch(rng, ex.version, honest) {
                body = crafted;
            }
        }
    }
    let mut out = head.to_vec();
    out.extend_from_slice(&body);
    out
}

/// The honest Fetch response with every partition's records replaced by crafted
/// batches: compressed ones that inflate to 1 MiB each, or ones whose length and
/// record count lie.
fn hostile_fetch(rng: &mut Rng, version: i16, honest: &[u8]) -> Option<Vec<u8>> {
    let mut resp = FetchResponse::decode_body(Bytes::copy_from_slice(honest), version).ok()?;
    for topic in &mut resp.responses {
        for p in &mut topic.partitions {
            let mut records = BytesMut::new();
            for i in 0..=rng.below(4) as i64 {
                let codec =
                    [Compression::Gzip, Compression::Zstd, Compression::Lz4][rng.below(3) as usize];
                let mut b = RecordBatchBuilder::new(0).base_offset(i).compression(codec);
                b.push(0, None, Some(&vec![0u8; 1 << 20]), &[]);
                let mut batch = b.finish().to_vec();
                match rng.below(3) {
                    // batch_length (bytes 8..12) lies.
                    0 => batch[8..12].copy_from_slice(&0x7fff_fff0u32.to_be_bytes()),
                    // record count (bytes 57..61) lies; the CRC then fails too.
                    1 => batch[57..61].copy_from_slice(&0x7fff_fff0u32.to_be_bytes()),
                    _ => {}
                }
                records.put_slice(&batch);
            }
            p.records = Some(records.freeze());
            p.high_watermark = p.high_watermark.max(5);
        }
    }
    let mut out = BytesMut::new();
    resp.encode_body(&mut out, version).ok()?;
    Some(out.to_vec())
}

// ---------------------------------------------------------------------------------
// Measurement.

/// One measured call: what it was, hostile bytes received, peak heap growth.
struct Figure {
    what: String,
    received: usize,
    growth: usize,
}

struct Run {
    hostile: Arc<Hostile>,
    seed: u64,
    figures: Vec<Figure>,
}

impl Run {
    /// Runs `call` with `keys` answered hostilely, bounding its time and its peak
    /// heap growth on this thread (by `allowance` more than the common bound).
    async fn measure<T>(
        &mut self,
        what: &str,
        keys: &[i16],
        allowance: usize,
        limit: Duration,
        call: impl Future<Output = T>,
    ) -> Option<T> {
        self.hostile.set(keys);
        let sent = self.hostile.sent.load(Ordering::SeqCst);
        let base = reset_peak();
        let out = tokio::time::timeout(limit, call).await.ok();
        let growth = peak().saturating_sub(base);
        let received = self.hostile.sent.load(Ordering::SeqCst) - sent;
        self.hostile.set(&[]);
        let bound = PER_BYTE * received + FIXED + allowance;
        assert!(
            growth <= bound,
            "seed {}: {what}: peak heap growth {growth} bytes after {received} hostile bytes \
             (bound {bound})",
            self.seed
        );
        assert!(
            !PANICKED.load(Ordering::SeqCst),
            "seed {}: {what}: a thread panicked",
            self.seed
        );
        self.figures.push(Figure {
            what: what.to_string(),
            received,
            growth,
        });
        out
    }
}

const K_PRODUCE: i16 = ProduceRequest::API_KEY;
const K_FETCH: i16 = FetchRequest::API_KEY;
const K_LIST_OFFSETS: i16 = ListOffsetsRequest::API_KEY;
const K_METADATA: i16 = MetadataRequest::API_KEY;
const K_OFFSET_COMMIT: i16 = OffsetCommitRequest::API_KEY;
const K_OFFSET_FETCH: i16 = OffsetFetchRequest::API_KEY;
const K_FIND_COORDINATOR: i16 = FindCoordinatorRequest::API_KEY;
const K_JOIN_GROUP: i16 = JoinGroupRequest::API_KEY;
const K_HEARTBEAT: i16 = HeartbeatRequest::API_KEY;
const K_LEAVE_GROUP: i16 = LeaveGroupRequest::API_KEY;
const K_SYNC_GROUP: i16 = SyncGroupRequest::API_KEY;
const K_API_VERSIONS: i16 = ApiVersionsRequest::API_KEY;
const K_CREATE_TOPICS: i16 = CreateTopicsRequest::API_KEY;
const K_DELETE_TOPICS: i16 = DeleteTopicsRequest::API_KEY;
const K_INIT_PRODUCER_ID: i16 = InitProducerIdRequest::API_KEY;
const K_DESCRIBE_ACLS: i16 = DescribeAclsRequest::API_KEY;
const K_CREATE_ACLS: i16 = CreateAclsRequest::API_KEY;
const K_DELETE_ACLS: i16 = DeleteAclsRequest::API_KEY;
const K_DELETE_RECORDS: i16 = DeleteRecordsRequest::API_KEY;
const K_LIST_GROUPS: i16 = ListGroupsRequest::API_KEY;
const K_DESCRIBE_GROUPS: i16 = DescribeGroupsRequest::API_KEY;
const K_CONSUMER_GROUP_DESCRIBE: i16 = ConsumerGroupDescribeRequest::API_KEY;
const K_DELETE_GROUPS: i16 = DeleteGroupsRequest::API_KEY;
const K_OFFSET_DELETE: i16 = OffsetDeleteRequest::API_KEY;

/// Every API key the client sends; the test fails if one of them never got a
/// hostile answer.
const CLIENT_KEYS: [i16; 24] = [
    K_PRODUCE,
    K_FETCH,
    K_LIST_OFFSETS,
    K_METADATA,
    K_OFFSET_COMMIT,
    K_OFFSET_FETCH,
    K_FIND_COORDINATOR,
    K_JOIN_GROUP,
    K_HEARTBEAT,
    K_LEAVE_GROUP,
    K_SYNC_GROUP,
    K_API_VERSIONS,
    K_CREATE_TOPICS,
    K_DELETE_TOPICS,
    K_INIT_PRODUCER_ID,
    K_DESCRIBE_ACLS,
    K_CREATE_ACLS,
    K_DELETE_ACLS,
    K_DELETE_RECORDS,
    K_LIST_GROUPS,
    K_DESCRIBE_GROUPS,
    K_CONSUMER_GROUP_DESCRIBE,
    K_DELETE_GROUPS,
    K_OFFSET_DELETE,
];

fn client_for(addr: &str) -> baton_kafka::ClientBuilder {
    Client::builder([addr.to_string()])
        .client_id("hostile-test")
        .request_timeout(Duration::from_millis(250))
        .connect_timeout(Duration::from_millis(500))
        .max_frame_size(MAX_FRAME)
}

/// One round: every public call, each with the responses it depends on hostile.
async fn round(run: &mut Run, addr: &str, client: &Client, topic: &str, n: usize) {
    let limit = Duration::from_secs(3);
    for keys in [&[K_API_VERSIONS][..], &[K_METADATA]] {
        run.measure(&format!("build, hostile {keys:?}"), keys, 0, limit, async {
            let _ = client_for(addr).build().await;
        })
        .await;
    }
    let admin = Admin::new(client).with_operation_timeout(Duration::from_millis(200));
    run.measure("create_topic", &[K_CREATE_TOPICS], 0, limit, async {
        let _ = admin.create_topic(format!("{topic}-new{n}"), 1, 1).await;
    })
    .await;
    run.measure("delete_topics", &[K_DELETE_TOPICS], 0, limit, async {
        let _ = admin.delete_topics([format!("{topic}-gone{n}")]).await;
    })
    .await;
    run.measure("list_offsets", &[K_LIST_OFFSETS], 0, limit, async {
        let _ = admin.list_offsets([(topic, 0, OffsetSpec::Latest)]).await;
    })
    .await;
    run.measure("delete_records", &[K_DELETE_RECORDS], 0, limit, async {
        let _ = admin
            .delete_records([baton_kafka::RecordsToDelete::new(topic, 0, 0)])
            .await;
    })
    .await;
    run.measure("describe_cluster", &[K_METADATA], 0, limit, async {
        let _ = admin.describe_cluster().await;
    })
    .await;
    let binding = AclBinding {
        pattern: ResourcePattern {
            resource_type: ResourceType::Topic,
            name: topic.to_string(),
            pattern_type: PatternType::Literal,
        },
        entry: baton_kafka::AccessControlEntry {
            principal: "User:alice".into(),
            host: "*".into(),
            operation: AclOperation::Read,
            permission_type: AclPermissionType::Allow,
        },
    };
    run.measure("create_acls", &[K_CREATE_ACLS], 0, limit, async {
        let _ = admin.create_acls([binding]).await;
    })
    .await;
    run.measure("describe_acls", &[K_DESCRIBE_ACLS], 0, limit, async {
        let _ = admin.describe_acls(&AclBindingFilter::any()).await;
    })
    .await;
    run.measure("delete_acls", &[K_DELETE_ACLS], 0, limit, async {
        let _ = admin.delete_acls([AclBindingFilter::any()]).await;
    })
    .await;
    let group = format!("{topic}-admin-group");
    let group_calls: [(&str, i16); 7] = [
        ("list_groups", K_LIST_GROUPS),
        ("describe_groups", K_CONSUMER_GROUP_DESCRIBE),
        ("describe_groups", K_DESCRIBE_GROUPS),
        ("describe_groups", K_FIND_COORDINATOR),
        ("delete_groups", K_DELETE_GROUPS),
        ("list_consumer_group_offsets", K_OFFSET_FETCH),
        ("delete_consumer_group_offsets", K_OFFSET_DELETE),
    ];
    for (call, key) in group_calls {
        let group = group.as_str();
        run.measure(&format!("{call}, hostile {key}"), &[key], 0, limit, async {
            match call {
                "list_groups" => drop(admin.list_groups(&Default::default()).await),
                "describe_groups" => drop(admin.describe_groups([group]).await),
                "delete_groups" => drop(admin.delete_groups([group]).await),
                "list_consumer_group_offsets" => drop(admin.group_offsets(group).await),
                _ => drop(
                    admin
                        .delete_consumer_group_offsets(group, [TopicPartition::new(topic, 0)])
                        .await,
                ),
            }
        })
        .await;
    }
    for (idempotent, keys) in [(true, K_INIT_PRODUCER_ID), (false, K_PRODUCE)] {
        run.measure(
            &format!("produce, hostile {keys}"),
            &[keys],
            0,
            limit,
            async {
                let producer = Producer::builder(client)
                    .idempotence(idempotent)
                    .acks(if idempotent { Acks::All } else { Acks::Leader })
                    .linger(Duration::ZERO)
                    .request_timeout(Duration::from_millis(250))
                    .delivery_timeout(Duration::from_millis(600))
                    .build();
                if let Ok(delivery) = producer.send(ProducerRecord::new(topic).value("v")).await {
                    let _ = delivery.await;
                }
                let _ = producer.close_timeout(Duration::from_millis(300)).await;
            },
        )
        .await;
    }
    for (start, keys) in [
        (StartOffset::Earliest, K_LIST_OFFSETS),
        (StartOffset::Offset(0), K_FETCH),
        (StartOffset::Offset(0), K_FETCH),
    ] {
        let allowance = if keys == K_FETCH { INFLATED } else { 0 };
        let what = format!("consume, hostile {keys}");
        run.measure(&what, &[keys], allowance, limit, async {
            let consumer = Consumer::builder(client)
                .assign(topic, 0, start)
                .max_wait(Duration::from_millis(50))
                .max_buffered_bytes(BUFFERED)
                .build()
                .await;
            if let Ok(mut consumer) = consumer {
                for _ in 0..4 {
                    match tokio::time::timeout(Duration::from_millis(300), consumer.recv()).await {
                        Ok(Ok(_)) => {}
                        _ => break,
                    }
                }
            }
        })
        .await;
    }
    for key in [
        K_FIND_COORDINATOR,
        K_JOIN_GROUP,
        K_SYNC_GROUP,
        K_OFFSET_FETCH,
        K_HEARTBEAT,
        K_OFFSET_COMMIT,
        K_LEAVE_GROUP,
    ] {
        run.measure(&format!("group, hostile {key}"), &[key], 0, limit, async {
            let group = GroupConsumer::builder(client, format!("{topic}-g{n}-{key}"))
                .subscribe([topic])
                .session_timeout(Duration::from_millis(600))
                .heartbeat_interval(Duration::from_millis(50))
                .rebalance_timeout(Duration::from_millis(600))
                .max_wait(Duration::from_millis(50))
                .max_buffered_bytes(BUFFERED)
                .build()
                .await;
            if let Ok(mut group) = group {
                let _ = tokio::time::timeout(Duration::from_millis(400), group.recv()).await;
                let committed = [(TopicPartition::new(topic, 0), 0)];
                let _ = tokio::time::timeout(
                    Duration::from_millis(300),
                    group.commit_offsets(committed),
                )
                .await;
                let _ = tokio::time::timeout(Duration::from_millis(300), group.close()).await;
            }
        })
        .await;
    }
}

#[test]
fn hostile_responses_never_panic_and_stay_within_the_allocation_bound() {
    let _one = exclusive();
    let seed = seed();
    let hostile = Arc::new(Hostile {
        plan: Mutex::new(Plan {
            hostile: Vec::new(),
            rng: Rng::new(seed),
            answered: BTreeMap::new(),
        }),
        sent: AtomicUsize::new(0),
    });
    // The broker and proxy run on their own threads, so the client's thread
    // counts only the client's allocations.
    let broker_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let rewrite = hostile.clone();
    let proxied = broker_rt.block_on(async move {
        tokio::spawn(Proxied::start(
            "hostile-proxy",
            ProxyState {
                rewrite: Some(Box::new(move |ex, frame| rewrite.rewrite(ex, frame))),
                ..ProxyState::default()
            },
        ))
        .await
        .unwrap()
    });
    let addr = format!("127.0.0.1:{}", proxied.broker.local_addr().port());
    let topic = baton_testkit::topic_name("hostile");
    let client_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut run = Run {
        hostile: hostile.clone(),
        seed,
        figures: Vec::new(),
    };
    client_rt.block_on(async {
        let client = client_for(&addr).build().await.expect("honest bootstrap");
        Admin::new(&client)
            .create_topic(topic.clone(), 1, 1)
            .await
            .expect("topic created");
        for n in 0..3 {
            round(&mut run, &addr, &client, &topic, n).await;
        }
    });
    drop(client_rt);
    let answered = hostile.plan.lock().unwrap().answered.clone();
    for f in &run.figures {
        eprintln!(
            "{:<32} {:>9} hostile bytes  {:>9} bytes peak growth",
            f.what, f.received, f.growth
        );
    }
    eprintln!("hostile responses per api key: {answered:?}");
    for key in CLIENT_KEYS {
        assert!(
            answered.contains_key(&key),
            "seed {seed}: api key {key} never got a hostile response"
        );
    }
    broker_rt.block_on(proxied.shutdown());
}

// ---------------------------------------------------------------------------------
// Lying frame sizes, from a listener that speaks raw framing.

/// Accepts connections; answers each ApiVersions request with a frame header that
/// announces `announced` bytes, then `sent` bytes of it, then stalls.
async fn lying_frames(listener: tokio::net::TcpListener, announced: u32, sent: usize) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    loop {
        let Ok((mut sock, _)) = listener.accept().await else {
            return;
        };
        tokio::spawn(async move {
            let Ok(len) = sock.read_u32().await else {
                return;
            };
            let mut request = vec![0; len as usize];
            if sock.read_exact(&mut request).await.is_err() {
                return;
            }
            let mut out = announced.to_be_bytes().to_vec();
            out.extend_from_slice(&request[4..8]); // the correlation id
            out.resize(4 + sent.max(4), 0);
            let _ = sock.write_all(&out).await;
            // Hold the connection open until the client gives up.
            let mut sink = Vec::new();
            let _ = sock.read_to_end(&mut sink).await;
        });
    }
}

#[test]
fn frames_that_lie_about_their_size_are_not_buffered_ahead() {
    let _one = exclusive();
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let client_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Announced sizes: over the maximum (refused unread), the maximum itself, and
    // just under it; each followed by a few bytes, then silence.
    for (announced, sent) in [
        (u32::MAX, 16),
        (0x7fff_ffff, 16),
        (MAX_FRAME as u32 + 1, 16),
        (MAX_FRAME as u32, 16),
        (MAX_FRAME as u32 - 1, 4096),
    ] {
        let listener = server_rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let server = server_rt.spawn(lying_frames(listener, announced, sent));
        let base = reset_peak();
        let result = client_rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(3), client_for(&addr).build())
                .await
                .expect("the connect timeout bounds the build")
        });
        let growth = peak().saturating_sub(base);
        eprintln!("frame announcing {announced} bytes, {sent} sent: {growth} bytes peak growth");
        assert!(result.is_err(), "a stalled frame cannot bootstrap a client");
        // Stated tightly on purpose: a partial frame may cost its bytes and a
        // fixed read reserve, not the size it announces.
        let bound = 4 * sent + (64 << 10) + (16 << 10);
        assert!(
            growth <= bound,
            "frame announcing {announced} bytes, {sent} sent: peak heap growth {growth} \
             (bound {bound})"
        );
        assert!(!PANICKED.load(Ordering::SeqCst), "a thread panicked");
        server.abort();
    }
}
