//! No request of n bytes makes the broker hold more than c·n + C bytes beyond its
//! configured limits, for every API it serves.
//!
//! A counting global allocator tracks the process's live heap bytes and their peak.
//! The broker runs in this process on the test's own single-threaded runtime, so
//! every byte it allocates is counted. For each API the broker lists in ApiVersions,
//! and each version, seeded random requests are sent; then hostile requests that
//! each buy as much as one request can: the 36-byte CreateTopics of 10,000
//! partitions, many topics in one CreateTopics, Metadata naming many (auto-created)
//! topics, JoinGroup with large member metadata and floods of new members and groups,
//! OffsetCommit with large metadata, InitProducerId floods, idempotent producers
//! without end, and more connections than the broker admits.
//!
//! Two figures are checked per case: the peak of the live heap while the broker
//! handles the request(s), and what is still held once they are answered. Both must
//! stay within `PER_BYTE · n + FIXED + allowance`, where `allowance` is what the
//! configured limits let the case buy (partitions, groups, producers, connections),
//! each priced generously. The limits are configured small so that an unbounded
//! resource shows at once.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use baton_broker::group::GroupConfig;
use baton_broker::{AuthorizerConfig, Broker, BrokerConfig, BrokerHandle, BrokerLimits};
use baton_protocol::messages::*;
use baton_protocol::record::RecordBatchBuilder;
use baton_protocol::testing::{Random, Rng};
use baton_protocol::{ErrorCode, Message, Request};
use baton_testkit::wire::{seed, Client};
use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

fn grew(by: isize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size() as isize);
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        grew(layout.size() as isize);
        System.alloc_zeroed(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        grew(new_size as isize - layout.size() as isize);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The tests of this file run one at a time: they measure one process-wide heap.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Heap bytes one request byte may justify holding (decoded structure, stored
/// records and their indexes, the response).
const PER_BYTE: isize = 16;
/// Fixed heap a case may use: read buffers (64 KiB per connection), the response
/// being read, maps growing by doubling.
const FIXED: isize = 2 << 20;
/// What a case that stores nothing per request may still hold afterwards: maps
/// and buffers grown once.
const HELD_FIXED: isize = 256 << 10;

/// Generous prices of the resources the limits admit.
const PARTITION_COST: isize = 4096;
const GROUP_COST: isize = 4096;
const MEMBER_COST: isize = 2048;
const PRODUCER_COST: isize = 1024;
const CONNECTION_COST: isize = 256 << 10;
const ACL_COST: isize = 1024;
/// A transactional id's state (its name and partitions are paid by request bytes).
const TXN_COST: isize = 1024;
/// A pending transactional offset: its key, metadata and map entries.
const PENDING_OFFSET_COST: isize = 1024;
/// A partition cached by a fetch session (its key, cached values, map entries).
const SESSION_PARTITION_COST: isize = 512;
/// A fetch session beyond its partitions.
const SESSION_COST: isize = 2048;

fn limits() -> BrokerLimits {
    BrokerLimits {
        max_partitions: 2_000,
        max_topics: 200,
        max_partitions_per_request: 500,
        max_groups: 50,
        max_producers_per_partition: 100,
        max_aborted_txns_per_partition: 1_000,
        max_connections: 40,
        max_connections_per_ip: 40,
        max_acls: 100,
        max_transactional_ids: 50,
        max_partitions_per_transaction: 100,
        max_pending_txn_offsets: 200,
        cleaner_dedupe_buffer_bytes: 1 << 20,
        max_fetch_sessions: 20,
        max_fetch_session_partitions: 2_000,
    }
}

async fn start(auto_create: bool) -> BrokerHandle {
    let config = BrokerConfig {
        auto_create_topics: auto_create,
        limits: limits(),
        groups: GroupConfig {
            initial_rebalance_delay_ms: 0,
            max_group_size: 20,
            ..GroupConfig::default()
        },
        // Authorization on, with the test's anonymous connections as super user,
        // so that random CreateAcls requests store ACLs (up to `max_acls`).
        authorizer: Some(AuthorizerConfig {
            super_users: vec!["User:ANONYMOUS".into()],
            allow_everyone_if_no_acl_found: false,
        }),
        ..BrokerConfig::in_memory()
    };
    Broker::start(config).await.expect("broker starts")
}

/// One measured case: the live heap when it began.
struct Measure {
    name: String,
    base: isize,
    started: std::time::Instant,
}

impl Measure {
    fn begin(name: impl Into<String>) -> Measure {
        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        Measure {
            name: name.into(),
            base,
            started: std::time::Instant::now(),
        }
    }

    /// Checks peak and held growth against `PER_BYTE * sent + FIXED + allowance`.
    async fn end(self, sent: usize, allowance: isize) -> (isize, isize) {
        self.check(sent, allowance, false).await
    }

    /// As [`Measure::end`], and what is held afterwards must be bought by the limits
    /// alone (`HELD_FIXED + allowance`, no share per request byte): for requests
    /// that store nothing in proportion to their size, so that a flood of them
    /// shows any resource they buy without a limit.
    async fn end_held_by_limits(self, sent: usize, allowance: isize) -> (isize, isize) {
        self.check(sent, allowance, true).await
    }

    async fn check(self, sent: usize, allowance: isize, strict: bool) -> (isize, isize) {
        // Let the broker finish whatever the last answers set in motion.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let held = LIVE.load(Ordering::Relaxed) - self.base;
        let peak = PEAK.load(Ordering::Relaxed) - self.base;
        let bound = PER_BYTE * sent as isize + FIXED + allowance;
        println!(
            "{:<52} sent {sent:>9} B  peak {peak:>10} B  held {held:>10} B  bound {bound:>10} B  ({:?})",
            self.name,
            self.started.elapsed()
        );
        assert!(
            peak <= bound,
            "{}: peak heap growth {peak} B for {sent} request bytes (bound {bound} B)",
            self.name
        );
        let held_bound = if strict {
            HELD_FIXED + allowance
        } else {
            bound
        };
        assert!(
            held <= held_bound,
            "{}: held heap growth {held} B for {sent} request bytes (bound {held_bound} B)",
            self.name
        );
        (peak, held)
    }
}

/// A connection that sends requests and waits for each answer, reconnecting when
/// the broker closes it (a request it could not decode closes only that connection).
struct Conn {
    addr: std::net::SocketAddr,
    client: Client,
    corr: i32,
}

impl Conn {
    async fn open(addr: std::net::SocketAddr) -> Conn {
        Conn {
            addr,
            client: Client::connect(addr).await,
            corr: 0,
        }
    }

    /// Sends one frame; returns the response frame, or `None` if the connection was
    /// closed or no answer came within the deadline (the connection is then replaced).
    async fn exchange(&mut self, frame: &[u8]) -> Option<Bytes> {
        let sent = self.client.send_raw(frame).await;
        let answer = match sent {
            Ok(()) => tokio::time::timeout(Duration::from_secs(5), self.client.recv_frame())
                .await
                .ok()
                .flatten(),
            Err(_) => None,
        };
        if answer.is_none() {
            self.client = Client::connect(self.addr).await;
        }
        answer
    }

    fn frame<R: Request>(&mut self, req: &R, version: i16) -> Bytes {
        self.corr += 1;
        Client::encode(self.corr, req, version)
    }

    /// Sends `req`; returns the request's size and the decoded response (if any).
    async fn call<R: Request + Sync>(
        &mut self,
        req: &R,
        version: i16,
    ) -> (usize, Option<R::Response>) {
        let frame = self.frame(req, version);
        let answer = self.exchange(&frame).await;
        let response = answer.and_then(|f| {
            baton_protocol::envelope::decode_response::<R>(f, version)
                .ok()
                .map(|(_, r)| r)
        });
        (frame.len(), response)
    }
}

/// Sends `count` seeded random requests of type `R` in every version it supports.
async fn random_requests<R>(conn: &mut Conn, rng: &mut Rng, count: usize) -> usize
where
    R: Request + Random + 'static,
{
    let mut sent = 0;
    for version in R::MIN_VERSION..=R::MAX_VERSION {
        for _ in 0..count {
            let mut req = R::random(rng, version);
            tame(&mut req);
            let frame = conn.frame(&req, version);
            sent += frame.len();
            conn.exchange(&frame).await;
        }
    }
    sent
}

/// Keeps random requests from parking for their random (possibly huge) timeouts:
/// the point is what they make the broker hold, not how long they wait.
fn tame<R: 'static>(req: &mut R) {
    let any = req as &mut dyn std::any::Any;
    if let Some(f) = any.downcast_mut::<FetchRequest>() {
        f.max_wait_ms = 0;
        f.replica_id = -1;
    } else if let Some(j) = any.downcast_mut::<JoinGroupRequest>() {
        j.rebalance_timeout_ms = 10;
        j.session_timeout_ms = 200;
    } else if let Some(d) = any.downcast_mut::<DeleteRecordsRequest>() {
        d.timeout_ms = 10;
    } else if let Some(p) = any.downcast_mut::<ProduceRequest>() {
        // acks=0 has no answer to wait for.
        p.acks = 1;
        p.timeout_ms = 10;
    }
}

macro_rules! every_api {
    ($conn:expr, $rng:expr, $count:expr; $($m:ty),* $(,)?) => {{
        let mut covered = Vec::new();
        $(
            let m = Measure::begin(format!("random {}", stringify!($m)));
            let sent = random_requests::<$m>($conn, $rng, $count).await;
            // Random requests may create topics, groups and producers up to the
            // limits; they never need more than that.
            m.end(sent, all_limits_allowance()).await;
            covered.push(<$m as Message>::API_KEY);
        )*
        covered
    }};
}

fn all_limits_allowance() -> isize {
    let l = limits();
    l.max_partitions as isize * (PARTITION_COST + PRODUCER_COST)
        + l.max_groups as isize * (GROUP_COST + 20 * MEMBER_COST)
        + l.max_acls as isize * ACL_COST
        + l.max_transactional_ids as isize * TXN_COST
        + l.max_pending_txn_offsets as isize * PENDING_OFFSET_COST
}

#[tokio::test]
async fn every_api_stays_within_its_bound() {
    let _serial = SERIAL.lock().await;
    let seed = seed();
    let mut rng = Rng::new(seed);
    let broker = start(false).await;
    let mut conn = Conn::open(broker.local_addr()).await;
    // Warm up lazily created state (the first connection's buffers, the topic table).
    let _ = conn.call(&MetadataRequest::default(), 12).await;

    let covered = every_api!(&mut conn, &mut rng, 12;
        ProduceRequest, FetchRequest, ListOffsetsRequest, MetadataRequest,
        OffsetCommitRequest, OffsetFetchRequest, FindCoordinatorRequest,
        JoinGroupRequest, HeartbeatRequest, LeaveGroupRequest, SyncGroupRequest,
        DescribeGroupsRequest, ListGroupsRequest, ApiVersionsRequest,
        CreateTopicsRequest, DeleteTopicsRequest, InitProducerIdRequest,
        OffsetForLeaderEpochRequest, DeleteGroupsRequest, DescribeConfigsRequest,
        DescribeClusterRequest, SaslHandshakeRequest, SaslAuthenticateRequest,
        DescribeAclsRequest, CreateAclsRequest, DeleteAclsRequest,
        DescribeUserScramCredentialsRequest, AlterUserScramCredentialsRequest,
        TxnOffsetCommitRequest,
        WriteTxnMarkersRequest, DescribeProducersRequest,
        AddPartitionsToTxnRequest, AddOffsetsToTxnRequest, EndTxnRequest,
        DescribeTransactionsRequest, ListTransactionsRequest,
        ConsumerGroupHeartbeatRequest, ConsumerGroupDescribeRequest,
        DeleteRecordsRequest, ElectLeadersRequest, AlterPartitionReassignmentsRequest,
        ListPartitionReassignmentsRequest, IncrementalAlterConfigsRequest,
        CreatePartitionsRequest, DescribeLogDirsRequest, OffsetDeleteRequest,
    );
    // Every API the broker advertises is covered.
    let (_, versions) = conn.call(&ApiVersionsRequest::default(), 3).await;
    let advertised: Vec<i16> = versions
        .expect("ApiVersions answers")
        .api_keys
        .iter()
        .map(|k| k.api_key)
        .collect();
    for key in advertised {
        assert!(
            covered.contains(&key),
            "API key {key} is served but not covered (seed {seed})"
        );
    }
    broker.shutdown().await;
}

/// The request body of the field report: CreateTopics v2 for one topic "x" of
/// 10,000 partitions (header v1 included, no size prefix).
const CREATE_10K: &str = "0013000200000000ffff0000000100017800002710000100000000000000000000000000";

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[tokio::test]
async fn create_topics_buys_no_more_than_the_limits() {
    let _serial = SERIAL.lock().await;
    let broker = start(false).await;
    let mut conn = Conn::open(broker.local_addr()).await;
    let _ = conn.call(&MetadataRequest::default(), 12).await;
    let l = limits();

    // The 36-byte body of the report, verbatim.
    let body = unhex(CREATE_10K);
    assert_eq!(body.len(), 36);
    let mut frame = BytesMut::new();
    frame.put_u32(body.len() as u32);
    frame.put_slice(&body);
    let m = Measure::begin("CreateTopics: 36 bytes asking for 10,000 partitions");
    let answer = conn.exchange(&frame).await.expect("answered");
    drop(answer);
    m.end_held_by_limits(frame.len(), 0).await;

    // 100 and 1,000 topics of 10,000 partitions each.
    for topics in [100, 1000] {
        let req = CreateTopicsRequest {
            topics: (0..topics)
                .map(|i| CreatableTopic {
                    name: format!("t{topics}-{i}"),
                    num_partitions: 10_000,
                    replication_factor: 1,
                    ..Default::default()
                })
                .collect(),
            timeout_ms: 1000,
            ..Default::default()
        };
        let m = Measure::begin(format!(
            "CreateTopics: {topics} topics of 10,000 partitions"
        ));
        let (sent, resp) = conn.call(&req, 7).await;
        let resp = resp.expect("answered");
        assert!(resp.topics.iter().all(|t| t.error_code != 0));
        drop(resp);
        m.end_held_by_limits(sent, 0).await;
    }

    // Many small topics: at most the limits are created, each costing its price.
    let req = CreateTopicsRequest {
        topics: (0..1000)
            .map(|i| CreatableTopic {
                name: format!("small-{i}"),
                num_partitions: 100,
                replication_factor: 1,
                ..Default::default()
            })
            .collect(),
        timeout_ms: 1000,
        ..Default::default()
    };
    let m = Measure::begin("CreateTopics: 1,000 topics of 100 partitions");
    let (sent, resp) = conn.call(&req, 7).await;
    let resp = resp.expect("answered");
    let created: usize = resp
        .topics
        .iter()
        .filter(|t| t.error_code == 0)
        .map(|t| t.num_partitions as usize)
        .sum();
    assert!(created <= l.max_partitions_per_request, "created {created}");
    let refused = resp
        .topics
        .iter()
        .find(|t| t.error_code != 0)
        .expect("some topics refused");
    assert_eq!(
        ErrorCode::from_code(refused.error_code),
        ErrorCode::PolicyViolation
    );
    drop(resp);
    m.end_held_by_limits(sent, l.max_partitions_per_request as isize * PARTITION_COST)
        .await;

    // Requests until the broker-wide limit: the total never passes it.
    let m = Measure::begin("CreateTopics: up to the broker-wide limits");
    let mut sent = 0;
    for round in 0..20 {
        let req = CreateTopicsRequest {
            topics: (0..10)
                .map(|i| CreatableTopic {
                    name: format!("r{round}-{i}"),
                    num_partitions: 50,
                    replication_factor: 1,
                    ..Default::default()
                })
                .collect(),
            timeout_ms: 1000,
            ..Default::default()
        };
        sent += conn.call(&req, 7).await.0;
    }
    m.end_held_by_limits(sent, l.max_partitions as isize * PARTITION_COST)
        .await;
    let (_, meta) = conn.call(&MetadataRequest::default(), 12).await;
    let meta = meta.expect("metadata");
    let partitions: usize = meta.topics.iter().map(|t| t.partitions.len()).sum();
    assert!(partitions <= l.max_partitions, "{partitions} partitions");
    assert!(
        meta.topics.len() <= l.max_topics,
        "{} topics",
        meta.topics.len()
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn metadata_auto_creation_stays_within_the_limits() {
    let _serial = SERIAL.lock().await;
    let broker = start(true).await;
    let mut conn = Conn::open(broker.local_addr()).await;
    let _ = conn.call(&MetadataRequest::default(), 12).await;
    let l = limits();
    let m = Measure::begin("Metadata: 5,000 auto-created topic names");
    let req = MetadataRequest {
        topics: Some(
            (0..5000)
                .map(|i| MetadataRequestTopic {
                    name: Some(format!("auto-{i}")),
                    ..Default::default()
                })
                .collect(),
        ),
        allow_auto_topic_creation: true,
        ..Default::default()
    };
    let (sent, resp) = conn.call(&req, 12).await;
    drop(resp.expect("answered"));
    m.end_held_by_limits(sent, l.max_topics as isize * PARTITION_COST)
        .await;
    broker.shutdown().await;
}

fn join(group: &str, member: &str, metadata_len: usize) -> JoinGroupRequest {
    JoinGroupRequest {
        group_id: group.into(),
        session_timeout_ms: 30_000,
        rebalance_timeout_ms: 100,
        member_id: member.into(),
        group_instance_id: None,
        protocol_type: "consumer".into(),
        protocols: vec![JoinGroupRequestProtocol {
            name: "range".into(),
            metadata: Bytes::from(vec![7u8; metadata_len]),
        }],
        reason: None,
    }
}

#[tokio::test]
async fn groups_stay_within_the_limits() {
    let _serial = SERIAL.lock().await;
    let broker = start(false).await;
    let mut conn = Conn::open(broker.local_addr()).await;
    let _ = conn.call(&FindCoordinatorRequest::default(), 3).await;
    let l = limits();
    // The topic the commits name (commits to unknown topics are refused).
    let (_, created) = conn
        .call(&baton_testkit::wire::create_req("t", 100, &[]), 7)
        .await;
    assert_eq!(created.expect("created").topics[0].error_code, 0);

    // One member with 512 KiB of metadata: held in proportion.
    let m = Measure::begin("JoinGroup: 512 KiB member metadata");
    let (sent, resp) = conn.call(&join("big", "", 512 << 10), 5).await;
    drop(resp);
    m.end(sent, GROUP_COST + MEMBER_COST).await;

    // OffsetCommit with metadata past offset.metadata.max.bytes: nothing stored.
    let commit = |group: &str, metadata_len: usize, partitions: i32| OffsetCommitRequest {
        group_id: group.into(),
        generation_id_or_member_epoch: -1,
        member_id: String::new(),
        topics: vec![OffsetCommitRequestTopic {
            name: "t".into(),
            partitions: (0..partitions)
                .map(|p| OffsetCommitRequestPartition {
                    partition_index: p,
                    committed_offset: 1,
                    committed_metadata: Some("m".repeat(metadata_len)),
                    ..Default::default()
                })
                .collect(),
        }],
        ..Default::default()
    };
    let m = Measure::begin("OffsetCommit: 100 x 64 KiB metadata");
    let (sent, resp) = conn.call(&commit("meta", 64 << 10, 100), 8).await;
    let resp = resp.expect("answered");
    let codes: Vec<i16> = resp.topics[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect();
    assert!(
        codes
            .iter()
            .all(|c| *c == ErrorCode::OffsetMetadataTooLarge.code()),
        "{codes:?}"
    );
    drop(resp);
    m.end_held_by_limits(sent, 0).await;

    // A flood of new members into one group (empty member ids, v4+: pending
    // members), then of new groups: bounded by group.max.size and max_groups.
    let m = Measure::begin("JoinGroup: 5,000 new members of one group");
    let mut sent = 0;
    for _ in 0..5000 {
        let frame = conn.frame(&join("flooded", "", 16), 5);
        sent += frame.len();
        // Pending members are answered MEMBER_ID_REQUIRED at once.
        let _ = conn.exchange(&frame).await;
    }
    m.end_held_by_limits(sent, GROUP_COST + 20 * MEMBER_COST)
        .await;

    let m = Measure::begin("JoinGroup: 1,000 new groups");
    let mut sent = 0;
    let mut refused = 0;
    for g in 0..1000 {
        // Each first join is answered MEMBER_ID_REQUIRED at once, and leaves a
        // pending member in a new group.
        let req = join(&format!("g{g}"), "", 16);
        let (n, resp) = conn.call(&req, 5).await;
        sent += n;
        if let Some(r) = resp {
            if r.error_code == ErrorCode::PolicyViolation.code() {
                refused += 1;
            }
        }
    }
    assert!(refused > 0, "no group creation was refused");
    m.end_held_by_limits(
        sent,
        l.max_groups as isize * (GROUP_COST + 20 * MEMBER_COST),
    )
    .await;

    let m = Measure::begin("OffsetCommit: 1,000 new groups");
    let mut sent = 0;
    for g in 0..1000 {
        sent += conn.call(&commit(&format!("c{g}"), 8, 1), 8).await.0;
    }
    m.end_held_by_limits(sent, l.max_groups as isize * (GROUP_COST + PARTITION_COST))
        .await;
    broker.shutdown().await;
}

#[tokio::test]
async fn producers_stay_within_the_limits() {
    let _serial = SERIAL.lock().await;
    let broker = start(false).await;
    let mut conn = Conn::open(broker.local_addr()).await;
    let l = limits();
    let (_, created) = conn
        .call(&baton_testkit::wire::create_req("p", 1, &[]), 7)
        .await;
    assert_eq!(created.expect("created").topics[0].error_code, 0);

    let m = Measure::begin("InitProducerId: 5,000 requests");
    let mut sent = 0;
    let mut ids = Vec::new();
    for _ in 0..5000 {
        let (n, resp) = conn.call(&InitProducerIdRequest::default(), 4).await;
        sent += n;
        ids.push(resp.expect("answered").producer_id);
    }
    // The ids themselves are the test's; the broker holds nothing per id.
    let ids_bytes = (ids.capacity() * 8) as isize;
    m.end_held_by_limits(sent, ids_bytes).await;

    // 1,000 idempotent producers write one record each to one partition: the
    // partition remembers at most max_producers_per_partition of them (the records
    // themselves are stored, in proportion to the bytes sent).
    let m = Measure::begin("Produce: 1,000 idempotent producers, one partition");
    let mut sent = 0;
    for (k, pid) in ids.iter().take(1000).enumerate() {
        let mut b = RecordBatchBuilder::new(0).producer(*pid, 0, 0);
        b.push(0, None, Some(b"v"), &[]);
        let records = b.finish();
        let req = baton_testkit::wire::produce_req("p", 0, 1, records);
        let (n, resp) = conn.call(&req, 9).await;
        sent += n;
        let resp = resp.expect("answered");
        assert_eq!(
            resp.responses[0].partition_responses[0].error_code, 0,
            "producer {k}"
        );
    }
    m.end(sent, l.max_producers_per_partition as isize * PRODUCER_COST)
        .await;
    broker.shutdown().await;
}

/// A full Fetch that asks for a session over `topics` topics of `per_topic`
/// partitions each, named `{prefix}-{i}` padded to 200 bytes (the broker caches
/// partitions of unknown topics too, as Kafka does).
fn session_fetch(prefix: &str, topics: usize, per_topic: i32, session: (i32, i32)) -> FetchRequest {
    FetchRequest {
        replica_id: -1,
        max_bytes: 1 << 20,
        session_id: session.0,
        session_epoch: session.1,
        topics: (0..topics)
            .map(|i| FetchTopic {
                topic: format!("{prefix}-{i:0>190}"),
                partitions: (0..per_topic)
                    .map(|partition| FetchPartition {
                        partition,
                        partition_max_bytes: 1 << 20,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

#[tokio::test]
async fn fetch_sessions_stay_within_the_limits() {
    let _serial = SERIAL.lock().await;
    let broker = start(false).await;
    let mut conn = Conn::open(broker.local_addr()).await;
    let l = limits();
    let allowance = l.max_fetch_session_partitions as isize * SESSION_PARTITION_COST
        + l.max_fetch_sessions as isize * SESSION_COST;

    // Full fetches that each ask for a session: at most max_fetch_sessions are
    // opened, holding at most max_fetch_session_partitions partitions together.
    let m = Measure::begin("Fetch: 200 session openings of 100 partitions");
    let mut sent = 0;
    let mut sessions = Vec::new();
    for k in 0..200 {
        let (n, resp) = conn
            .call(&session_fetch(&format!("s{k}"), 2, 50, (0, 0)), 12)
            .await;
        sent += n;
        let id = resp.expect("answered").session_id;
        if id != 0 {
            sessions.push(id);
        }
    }
    assert!(!sessions.is_empty(), "sessions were opened");
    assert!(sessions.len() <= l.max_fetch_sessions);
    m.end_held_by_limits(sent, allowance).await;

    // Incremental fetches that keep adding partitions to the open sessions.
    let m = Measure::begin("Fetch: sessions grown by incremental fetches");
    let mut sent = 0;
    for (k, id) in sessions.iter().enumerate() {
        for epoch in 1..20 {
            let req = session_fetch(&format!("g{k}-{epoch}"), 1, 100, (*id, epoch));
            let (n, resp) = conn.call(&req, 12).await;
            sent += n;
            if resp.expect("answered").error_code != 0 {
                break;
            }
        }
    }
    m.end_held_by_limits(sent, allowance).await;
    broker.shutdown().await;
}

/// One WriteTxnMarkers marker for `producer_id` on `partitions` of topic `topic`.
fn txn_marker(producer_id: i64, topic: &str, partitions: Vec<i32>) -> WritableTxnMarker {
    WritableTxnMarker {
        producer_id,
        producer_epoch: 0,
        transaction_result: false,
        topics: vec![WritableTxnMarkerTopic {
            name: topic.into(),
            partition_indexes: partitions,
        }],
        coordinator_epoch: 0,
    }
}

#[tokio::test]
async fn transaction_markers_stay_within_their_bound() {
    let _serial = SERIAL.lock().await;
    let broker = start(false).await;
    let mut conn = Conn::open(broker.local_addr()).await;
    let l = limits();
    let (_, created) = conn
        .call(&baton_testkit::wire::create_req("m", 1, &[]), 7)
        .await;
    assert_eq!(created.expect("created").topics[0].error_code, 0);

    // One marker naming the one partition 50,000 times and 50,000 partitions that
    // do not exist: one marker is written, the rest is answered and let go.
    let partitions: Vec<i32> = std::iter::repeat_n(0, 50_000).chain(1..50_001).collect();
    let req = WriteTxnMarkersRequest {
        markers: vec![txn_marker(1, "m", partitions)],
    };
    let m = Measure::begin("WriteTxnMarkers: one partition 50,000 times");
    let (sent, resp) = conn.call(&req, 1).await;
    let resp = resp.expect("answered");
    let codes = &resp.markers[0].topics[0].partitions;
    assert_eq!(codes.len(), 100_000);
    assert!(codes[..50_000].iter().all(|p| p.error_code == 0));
    assert!(codes[50_000..]
        .iter()
        .all(|p| ErrorCode::from_code(p.error_code) == ErrorCode::UnknownTopicOrPartition));
    drop(resp);
    m.end(sent, PRODUCER_COST).await;

    // 5,000 markers of as many producers: each is stored (in proportion to the
    // bytes sent); the partition remembers at most max_producers_per_partition.
    let req = WriteTxnMarkersRequest {
        markers: (0..5_000)
            .map(|pid| txn_marker(100 + pid, "m", vec![0]))
            .collect(),
    };
    let m = Measure::begin("WriteTxnMarkers: 5,000 producers, one partition");
    let (sent, resp) = conn.call(&req, 1).await;
    let resp = resp.expect("answered");
    assert!(resp
        .markers
        .iter()
        .all(|m| m.topics[0].partitions[0].error_code == 0));
    drop(resp);
    m.end(sent, l.max_producers_per_partition as isize * PRODUCER_COST)
        .await;
    broker.shutdown().await;
}

#[tokio::test]
async fn connections_stay_within_the_limits() {
    let _serial = SERIAL.lock().await;
    let broker = start(false).await;
    let addr = broker.local_addr();
    let l = limits();
    let m = Measure::begin("500 connections, each sending ApiVersions");
    let mut open = Vec::new();
    let frame = Client::encode(1, &ApiVersionsRequest::default(), 3);
    for _ in 0..500 {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        let _ = s.write_all(&frame).await;
        open.push(s);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let sent = 500 * frame.len();
    // The test's own sockets cost a little too.
    m.end_held_by_limits(
        sent,
        l.max_connections as isize * CONNECTION_COST + 500 * 1024,
    )
    .await;
    drop(open);
    broker.shutdown().await;
}
