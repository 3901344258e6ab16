//! Resource limits over real TCP with raw protocol frames: connections past
//! `max_connections` / `max_connections_per_ip` are closed while open ones keep
//! working; groups past `max_groups` are refused with POLICY_VIOLATION; a flood of
//! first joins is bounded by `group.max.size`; idempotent producers past
//! `max_producers_per_partition` are forgotten; oversized commit metadata is
//! refused and not stored.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use baton_broker::group::GroupConfig;
use baton_broker::{Broker, BrokerConfig, BrokerHandle, BrokerLimits};
use baton_protocol::messages::*;
use baton_protocol::record::RecordBatchBuilder;
use baton_protocol::ErrorCode;
use baton_testkit::wire::*;
use bytes::Bytes;
use tokio::net::TcpSocket;

async fn start(limits: BrokerLimits, groups: GroupConfig) -> BrokerHandle {
    let mut config = BrokerConfig::in_memory().with_limits(limits);
    config.groups = groups;
    Broker::start(config).await.unwrap()
}

/// A connection from `from` (any 127/8 address is loopback on Linux).
async fn connect_from(to: SocketAddr, from: Ipv4Addr) -> Client {
    let socket = TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::new(IpAddr::V4(from), 0))
        .expect("bind a loopback source address");
    let stream = socket.connect(to).await.expect("connect");
    stream.set_nodelay(true).unwrap();
    Client::from_stream(stream)
}

/// Whether the broker serves this connection: an ApiVersions gets an answer,
/// rather than the connection being closed.
async fn served(c: &mut Client) -> bool {
    let frame = Client::encode(1, &ApiVersionsRequest::default(), 3);
    if c.send_raw(&frame).await.is_err() {
        return false;
    }
    c.recv_frame().await.is_some()
}

/// Whether the broker closed this connection: a request sent on it gets no
/// answer, the read ending (or being reset) instead.
async fn closed(c: &mut Client) -> bool {
    !served(c).await
}

/// Connects from `from` until the broker serves the connection: a closed
/// connection's slot is given back when its task ends, just after the close.
async fn connect_when_free(to: SocketAddr, from: Ipv4Addr) -> Client {
    for _ in 0..500 {
        let mut c = connect_from(to, from).await;
        if served(&mut c).await {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the slot of a closed connection never came back");
}

const LOCAL: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);
const OTHER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

#[tokio::test]
async fn connections_past_the_total_limit_are_closed() {
    let limits = BrokerLimits {
        max_connections: 3,
        ..BrokerLimits::default()
    };
    let broker = start(limits, GroupConfig::default()).await;
    let addr = broker.local_addr();
    let mut open = Vec::new();
    for _ in 0..3 {
        let mut c = connect_from(addr, LOCAL).await;
        assert!(served(&mut c).await);
        open.push(c);
    }
    // The fourth, from any address, is closed at once.
    for from in [LOCAL, OTHER] {
        let mut extra = connect_from(addr, from).await;
        assert!(
            closed(&mut extra).await,
            "connection from {from} past the limit"
        );
    }
    // The open ones keep working.
    for c in &mut open {
        assert!(served(c).await);
    }
    // Closing one gives its place back, to any address.
    drop(open.pop());
    let mut again = connect_when_free(addr, OTHER).await;
    assert!(served(&mut again).await);
    let mut extra = connect_from(addr, LOCAL).await;
    assert!(closed(&mut extra).await);
    broker.shutdown().await;
}

#[tokio::test]
async fn connections_past_the_per_ip_limit_are_closed() {
    let limits = BrokerLimits {
        max_connections_per_ip: 2,
        ..BrokerLimits::default()
    };
    let broker = start(limits, GroupConfig::default()).await;
    let addr = broker.local_addr();
    let mut local = Vec::new();
    for _ in 0..2 {
        let mut c = connect_from(addr, LOCAL).await;
        assert!(served(&mut c).await);
        local.push(c);
    }
    let mut extra = connect_from(addr, LOCAL).await;
    assert!(
        closed(&mut extra).await,
        "a third connection from one address"
    );
    // Another address has its own count.
    let mut other = connect_from(addr, OTHER).await;
    assert!(served(&mut other).await);
    for c in &mut local {
        assert!(served(c).await);
    }
    // Cycling through closes and reconnects never leaks a place.
    for _ in 0..5 {
        drop(local.pop());
        local.push(connect_when_free(addr, LOCAL).await);
    }
    let mut extra = connect_from(addr, LOCAL).await;
    assert!(closed(&mut extra).await);
    broker.shutdown().await;
}

fn join_req(group: &str, member_id: &str) -> JoinGroupRequest {
    JoinGroupRequest {
        group_id: group.into(),
        session_timeout_ms: 30_000,
        rebalance_timeout_ms: 10_000,
        member_id: member_id.into(),
        group_instance_id: None,
        protocol_type: "consumer".into(),
        protocols: vec![JoinGroupRequestProtocol {
            name: "range".into(),
            metadata: Bytes::from_static(b"subscription"),
        }],
        reason: None,
    }
}

fn commit_req(group: &str, topic: &str, metadata: String) -> OffsetCommitRequest {
    OffsetCommitRequest {
        group_id: group.into(),
        generation_id_or_member_epoch: -1,
        member_id: String::new(),
        topics: vec![OffsetCommitRequestTopic {
            name: topic.into(),
            partitions: (0..2)
                .map(|p| OffsetCommitRequestPartition {
                    partition_index: p,
                    committed_offset: 10 + p as i64,
                    committed_leader_epoch: -1,
                    committed_metadata: Some(metadata.clone()),
                    ..Default::default()
                })
                .collect(),
        }],
        ..Default::default()
    }
}

fn commit_errors(r: &OffsetCommitResponse) -> Vec<i16> {
    r.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

fn fetch_req(group: &str) -> OffsetFetchRequest {
    OffsetFetchRequest {
        groups: vec![OffsetFetchRequestGroup {
            group_id: group.into(),
            topics: None,
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[tokio::test]
async fn groups_past_the_limit_are_refused() {
    let limits = BrokerLimits {
        max_groups: 2,
        ..BrokerLimits::default()
    };
    let groups = GroupConfig {
        initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    };
    let broker = start(limits, groups).await;
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("limits");
    create_topic(&mut c, &topic, 2).await;
    // One group by JoinGroup, one by OffsetCommit.
    let j = c.call(&join_req("joined", ""), 9).await;
    assert_eq!(j.error_code, ErrorCode::MemberIdRequired.code());
    let member = j.member_id;
    let r = c
        .call(&commit_req("committed", &topic, String::new()), 9)
        .await;
    assert_eq!(commit_errors(&r), vec![0, 0]);
    // A third group is refused either way, every partition of the commit.
    let j = c.call(&join_req("third", ""), 9).await;
    assert_eq!(j.error_code, ErrorCode::PolicyViolation.code());
    let r = c.call(&commit_req("third", &topic, String::new()), 9).await;
    let policy = ErrorCode::PolicyViolation.code();
    assert_eq!(commit_errors(&r), vec![policy, policy]);
    // DescribeGroups creates nothing.
    let d = c
        .call(
            &DescribeGroupsRequest {
                groups: vec!["third".into(), "fourth".into()],
                ..Default::default()
            },
            5,
        )
        .await;
    assert!(d.groups.iter().all(|g| g.group_state == "Dead"));
    let j = c.call(&join_req("third", ""), 9).await;
    assert_eq!(j.error_code, ErrorCode::PolicyViolation.code());
    // The existing groups keep working.
    let j = c.call(&join_req("joined", &member), 9).await;
    assert_eq!((j.error_code, j.generation_id), (0, 1));
    let r = c
        .call(&commit_req("committed", &topic, String::new()), 9)
        .await;
    assert_eq!(commit_errors(&r), vec![0, 0]);
    // A group left with nothing in it is removed and makes room.
    let leave = LeaveGroupRequest {
        group_id: "joined".into(),
        members: vec![MemberIdentity {
            member_id: member,
            ..Default::default()
        }],
        ..Default::default()
    };
    assert_eq!(c.call(&leave, 5).await.error_code, 0);
    let j = c.call(&join_req("third", ""), 9).await;
    assert_eq!(j.error_code, ErrorCode::MemberIdRequired.code());
    broker.shutdown().await;
}

#[tokio::test]
async fn a_flood_of_first_joins_is_bounded_by_the_group_size() {
    let groups = GroupConfig {
        max_group_size: 5,
        ..GroupConfig::default()
    };
    let broker = start(BrokerLimits::default(), groups).await;
    let mut c = Client::connect(broker.local_addr()).await;
    let mut pending = Vec::new();
    let mut refused = 0;
    for _ in 0..50 {
        let j = c.call(&join_req("flooded", ""), 9).await;
        if j.error_code == ErrorCode::MemberIdRequired.code() {
            pending.push(j.member_id);
        } else {
            assert_eq!(j.error_code, ErrorCode::GroupMaxSizeReached.code());
            refused += 1;
        }
    }
    assert_eq!((pending.len(), refused), (5, 45));
    // A member id handed out still joins (answered when the initial delay ends).
    let j = c.call(&join_req("flooded", &pending[0]), 9).await;
    assert_eq!((j.error_code, j.generation_id), (0, 1));
    let d = c
        .call(
            &DescribeGroupsRequest {
                groups: vec!["flooded".into()],
                ..Default::default()
            },
            5,
        )
        .await;
    assert_eq!(d.groups[0].group_state, "CompletingRebalance");
    assert_eq!(d.groups[0].members.len(), 1);
    broker.shutdown().await;
}

#[tokio::test]
async fn commit_metadata_past_the_limit_is_refused_and_not_stored() {
    let broker = start(BrokerLimits::default(), GroupConfig::default()).await;
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("metadata");
    create_topic(&mut c, &topic, 2).await;
    let mut rng = Rng::new(seed());
    let text = |rng: &mut Rng, n: usize| -> String {
        rng.bytes(n)
            .iter()
            .map(|b| (b'a' + b % 26) as char)
            .collect()
    };
    let too_large = ErrorCode::OffsetMetadataTooLarge.code();
    for version in [2, 9] {
        let group = format!("meta-v{version}");
        let r = c
            .call(&commit_req(&group, &topic, text(&mut rng, 5000)), version)
            .await;
        assert_eq!(commit_errors(&r), vec![too_large, too_large], "v{version}");
        let f = c.call(&fetch_req(&group), 9).await;
        assert!(f.groups[0].topics.is_empty(), "v{version}: nothing stored");
        // At the limit it is stored.
        let fits = text(&mut rng, 4096);
        let r = c
            .call(&commit_req(&group, &topic, fits.clone()), version)
            .await;
        assert_eq!(commit_errors(&r), vec![0, 0], "v{version}");
        let f = c.call(&fetch_req(&group), 9).await;
        let stored: Vec<Option<&str>> = f.groups[0].topics[0]
            .partitions
            .iter()
            .map(|p| p.metadata.as_deref())
            .collect();
        assert_eq!(stored, vec![Some(fits.as_str()); 2]);
    }
    broker.shutdown().await;
}

/// A batch of one record from producer `pid`, epoch 0, first sequence `seq`.
fn idempotent(pid: i64, seq: i32) -> Bytes {
    let mut b = RecordBatchBuilder::new(1_000).producer(pid, 0, seq);
    b.push(1_000, None, Some(b"v"), &[]);
    b.finish()
}

/// Produces (acks=all) one record from `pid` at `seq`; returns the error code.
async fn produce(c: &mut Client, topic: &str, pid: i64, seq: i32) -> i16 {
    let resp = c
        .call(&produce_req(topic, 0, -1, idempotent(pid, seq)), 9)
        .await;
    resp.responses[0].partition_responses[0].error_code
}

#[tokio::test]
async fn producers_past_the_partition_limit_are_forgotten_oldest_first() {
    let limits = BrokerLimits {
        max_producers_per_partition: 2,
        ..BrokerLimits::default()
    };
    let broker = start(limits, GroupConfig::default()).await;
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("producers");
    create_topic(&mut c, &topic, 1).await;
    for pid in [1, 2, 3] {
        assert_eq!(produce(&mut c, &topic, pid, 0).await, 0, "producer {pid}");
    }
    // Producer 1 wrote first, so it was forgotten when producer 3 came: its next
    // sequence is a gap for a producer the partition does not know.
    assert_eq!(
        produce(&mut c, &topic, 1, 1).await,
        ErrorCode::OutOfOrderSequenceNumber.code()
    );
    // Producers 2 and 3 are remembered.
    assert_eq!(produce(&mut c, &topic, 2, 1).await, 0);
    assert_eq!(produce(&mut c, &topic, 3, 1).await, 0);
    broker.shutdown().await;
}

#[tokio::test]
async fn open_transactions_past_the_partition_limit_are_refused() {
    let limits = BrokerLimits {
        max_producers_per_partition: 2,
        ..BrokerLimits::default()
    };
    let broker = start(limits, GroupConfig::default()).await;
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("open-txns");
    create_topic(&mut c, &topic, 1).await;
    let txn = |pid: i64| {
        let mut b = RecordBatchBuilder::new(1_000)
            .producer(pid, 0, 0)
            .transactional(true);
        b.push(1_000, None, Some(b"v"), &[]);
        b.finish()
    };
    for pid in [1, 2, 3] {
        let resp = c.call(&produce_req(&topic, 0, -1, txn(pid)), 9).await;
        let p = &resp.responses[0].partition_responses[0];
        if pid < 3 {
            assert_eq!(p.error_code, 0, "producer {pid}");
        } else {
            assert_eq!(
                ErrorCode::from_code(p.error_code),
                ErrorCode::PolicyViolation
            );
            assert!(p
                .error_message
                .as_deref()
                .is_some_and(|m| m.contains("max_producers_per_partition")));
        }
    }
    // Producers with an open transaction are not forgotten for idle ones.
    assert_eq!(produce(&mut c, &topic, 4, 0).await, 0);
    assert_eq!(produce(&mut c, &topic, 5, 0).await, 0);
    let again = c.call(&produce_req(&topic, 0, -1, txn(1)), 9).await;
    assert_eq!(again.responses[0].partition_responses[0].base_offset, 0);
    broker.shutdown().await;
}
