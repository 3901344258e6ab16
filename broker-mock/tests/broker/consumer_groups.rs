//! Consumer-protocol groups (KIP-848, ConsumerGroupHeartbeat and
//! ConsumerGroupDescribe) over real TCP with raw frames: incremental
//! reconciliation between two members, commits validated by member epoch, the
//! group admin APIs, Kafka's errors, session expiry, regex subscriptions that
//! follow topic creation, and members and epochs kept across a restart and a
//! coordinator failover.

use std::collections::BTreeSet;
use std::time::Duration;

use baton_broker::group::GroupConfig;
use baton_broker::{Broker, BrokerConfig, BrokerHandle};
use baton_protocol::messages::*;
use baton_protocol::primitives::Uuid;
use baton_protocol::ErrorCode;
use baton_testkit::wire::*;

use super::groups::{find_coordinator, kill_and_connect_to_a_survivor};

type Owned = Vec<(Uuid, Vec<i32>)>;

fn join(group: &str, member: &str, topics: &[&str]) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest {
        group_id: group.into(),
        member_id: member.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(topics.iter().map(|t| t.to_string()).collect()),
        topic_partitions: Some(Vec::new()),
        ..Default::default()
    }
}

fn beat(group: &str, member: &str, epoch: i32, owned: &Owned) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest {
        group_id: group.into(),
        member_id: member.into(),
        member_epoch: epoch,
        topic_partitions: Some(
            owned
                .iter()
                .map(|(t, ps)| ConsumerGroupHeartbeatTopicPartitions {
                    topic_id: *t,
                    partitions: ps.clone(),
                })
                .collect(),
        ),
        ..Default::default()
    }
}

fn owned_of(r: &ConsumerGroupHeartbeatResponse) -> Option<Owned> {
    r.assignment.as_ref().map(|a| {
        a.topic_partitions
            .iter()
            .map(|t| (t.topic_id, t.partitions.clone()))
            .collect()
    })
}

fn count(o: &Owned) -> usize {
    o.iter().map(|(_, p)| p.len()).sum()
}

fn set(o: &Owned) -> BTreeSet<(Uuid, i32)> {
    o.iter()
        .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
        .collect()
}

/// A member as a client keeps it: id, epoch, and what it owns.
struct Member {
    id: String,
    epoch: i32,
    owned: Owned,
}

impl Member {
    async fn join(c: &mut Client, group: &str, id: &str, topics: &[&str]) -> Member {
        let r = c.call(&join(group, id, topics), 1).await;
        assert_eq!(r.error_code, 0, "{r:?}");
        assert_eq!(r.member_id.as_deref(), Some(id));
        assert!(r.heartbeat_interval_ms > 0);
        Member {
            id: id.into(),
            epoch: r.member_epoch,
            owned: owned_of(&r).expect("a join is answered with an assignment"),
        }
    }

    async fn beat(&mut self, c: &mut Client, group: &str) -> ConsumerGroupHeartbeatResponse {
        let r = c
            .call(&beat(group, &self.id, self.epoch, &self.owned), 1)
            .await;
        assert_eq!(r.error_code, 0, "{r:?}");
        self.epoch = r.member_epoch;
        if let Some(o) = owned_of(&r) {
            self.owned = o;
        }
        r
    }
}

async fn start(config: BrokerConfig) -> BrokerHandle {
    Broker::start(config).await.unwrap()
}

fn commit(
    group: &str,
    epoch: i32,
    member: &str,
    topic: &str,
    p: i32,
    o: i64,
) -> OffsetCommitRequest {
    OffsetCommitRequest {
        group_id: group.into(),
        generation_id_or_member_epoch: epoch,
        member_id: member.into(),
        topics: vec![OffsetCommitRequestTopic {
            name: topic.into(),
            partitions: vec![OffsetCommitRequestPartition {
                partition_index: p,
                committed_offset: o,
                committed_leader_epoch: -1,
                ..Default::default()
            }],
        }],
        ..Default::default()
    }
}

fn commit_error(r: &OffsetCommitResponse) -> i16 {
    r.topics[0].partitions[0].error_code
}

#[tokio::test]
async fn two_members_reconcile_commit_and_leave() {
    let broker = start(BrokerConfig::in_memory()).await;
    let mut a = Client::connect(broker.local_addr()).await;
    let mut b = Client::connect(broker.local_addr()).await;
    create_topic(&mut a, "t", 4).await;

    let versions = a.call(&ApiVersionsRequest::default(), 3).await;
    let find = |k: i16| {
        versions
            .api_keys
            .iter()
            .find(|v| v.api_key == k)
            .map(|v| (v.min_version, v.max_version))
    };
    assert_eq!(find(68), Some((0, 1)));
    assert_eq!(find(69), Some((0, 0)));

    let mut ma = Member::join(&mut a, "g", "member-a", &["t"]).await;
    assert_eq!((ma.epoch, count(&ma.owned)), (1, 4));
    // b joins at epoch 2 but gets nothing until a has revoked.
    let mut mb = Member::join(&mut b, "g", "member-b", &["t"]).await;
    assert_eq!((mb.epoch, count(&mb.owned)), (2, 0));
    let r = ma.beat(&mut a, "g").await;
    assert_eq!(r.member_epoch, 1, "a keeps its epoch until it revokes");
    assert_eq!(count(&ma.owned), 2);
    let d = a
        .call(
            &ConsumerGroupDescribeRequest {
                group_ids: vec!["g".into()],
                include_authorized_operations: false,
            },
            0,
        )
        .await;
    let g = &d.groups[0];
    assert_eq!(
        (
            g.error_code,
            g.group_state.as_str(),
            g.group_epoch,
            g.assignment_epoch
        ),
        (0, "Reconciling", 2, 2)
    );
    assert_eq!(g.assignor_name, "uniform");
    assert_eq!(g.members.len(), 2);
    // a acknowledges; b then gets the released partitions.
    ma.beat(&mut a, "g").await;
    assert_eq!(ma.epoch, 2);
    mb.beat(&mut b, "g").await;
    assert_eq!(count(&mb.owned), 2);
    assert!(set(&ma.owned).is_disjoint(&set(&mb.owned)));
    let d = a
        .call(
            &ConsumerGroupDescribeRequest {
                group_ids: vec!["g".into(), "nope".into()],
                include_authorized_operations: false,
            },
            0,
        )
        .await;
    assert_eq!(d.groups[0].group_state, "Stable");
    let m = d.groups[0]
        .members
        .iter()
        .find(|m| m.member_id == "member-b")
        .unwrap();
    assert_eq!(m.assignment.topic_partitions[0].topic_name, "t");
    assert_eq!(m.subscribed_topic_names, vec!["t".to_string()]);
    assert_eq!(d.groups[1].error_code, ErrorCode::GroupIdNotFound.code());

    // Listed as a consumer group.
    let list = a.call(&ListGroupsRequest::default(), 5).await;
    let listed: Vec<_> = list
        .groups
        .iter()
        .map(|g| {
            (
                g.group_id.as_str(),
                g.group_state.as_str(),
                g.group_type.as_str(),
            )
        })
        .collect();
    assert_eq!(listed, vec![("g", "Stable", "consumer")]);

    // Commits carry the member epoch.
    let p = ma.owned[0].1[0];
    let ok = a.call(&commit("g", 2, "member-a", "t", p, 10), 9).await;
    assert_eq!(commit_error(&ok), 0);
    let stale = a.call(&commit("g", 1, "member-a", "t", p, 11), 9).await;
    assert_eq!(commit_error(&stale), ErrorCode::StaleMemberEpoch.code());
    let unknown = a.call(&commit("g", 2, "zz", "t", p, 11), 9).await;
    assert_eq!(commit_error(&unknown), ErrorCode::UnknownMemberId.code());
    let simple = a.call(&commit("g", -1, "", "t", p, 11), 9).await;
    assert_eq!(commit_error(&simple), ErrorCode::UnknownMemberId.code());
    let fetched = a
        .call(
            &OffsetFetchRequest {
                group_id: "g".into(),
                topics: Some(vec![OffsetFetchRequestTopic {
                    name: "t".into(),
                    partition_indexes: vec![p],
                }]),
                ..Default::default()
            },
            5,
        )
        .await;
    assert_eq!(fetched.topics[0].partitions[0].committed_offset, 10);
    // OffsetFetch v9 checks the member id and epoch of a consumer group's member.
    let fetch_v9 = |member: &str, epoch: i32| OffsetFetchRequest {
        groups: vec![OffsetFetchRequestGroup {
            group_id: "g".into(),
            member_id: Some(member.into()),
            member_epoch: epoch,
            topics: None,
        }],
        ..Default::default()
    };
    let codes = |r: OffsetFetchResponse| r.groups[0].error_code;
    assert_eq!(codes(a.call(&fetch_v9("member-a", 2), 9).await), 0);
    assert_eq!(
        codes(a.call(&fetch_v9("member-a", 1), 9).await),
        ErrorCode::StaleMemberEpoch.code()
    );
    assert_eq!(
        codes(a.call(&fetch_v9("zz", 2), 9).await),
        ErrorCode::UnknownMemberId.code()
    );
    assert_eq!(codes(a.call(&fetch_v9("", -1), 9).await), 0);

    // a leaves; b takes everything.
    let left = a.call(&beat("g", "member-a", -1, &Vec::new()), 1).await;
    assert_eq!((left.error_code, left.member_epoch), (0, -1));
    mb.beat(&mut b, "g").await;
    assert_eq!(count(&mb.owned), 4);
    assert_eq!(mb.epoch, 3);
    let del = |id: &str| DeleteGroupsRequest {
        groups_names: vec![id.into()],
    };
    let d = a.call(&del("g"), 2).await;
    assert_eq!(d.results[0].error_code, ErrorCode::NonEmptyGroup.code());
    let left = b.call(&beat("g", "member-b", -1, &Vec::new()), 1).await;
    assert_eq!(left.error_code, 0);
    // An empty consumer group takes commits without a member.
    let simple = a.call(&commit("g", -1, "", "t", p, 12), 9).await;
    assert_eq!(commit_error(&simple), 0);
    let d = a.call(&del("g"), 2).await;
    assert_eq!(d.results[0].error_code, 0);
    let list = a.call(&ListGroupsRequest::default(), 5).await;
    assert!(list.groups.is_empty(), "{list:?}");
    broker.shutdown().await;
}

#[tokio::test]
async fn errors_as_kafka_returns_them() {
    let broker = start(BrokerConfig::in_memory()).await;
    let mut c = Client::connect(broker.local_addr()).await;
    create_topic(&mut c, "t", 2).await;
    // v1 needs a client-chosen member id (KIP-1082); v0 gets one from the
    // coordinator.
    let r = c.call(&join("g", "", &["t"]), 1).await;
    assert_eq!(r.error_code, ErrorCode::InvalidRequest.code());
    assert!(r.error_message.is_some());
    let r = c.call(&join("g", "", &["t"]), 0).await;
    assert_eq!(r.error_code, 0);
    let chosen = r.member_id.unwrap();
    assert!(!chosen.is_empty());
    let mut bad = join("g", "x", &["t"]);
    bad.server_assignor = Some("sticky".into());
    assert_eq!(
        c.call(&bad, 1).await.error_code,
        ErrorCode::UnsupportedAssignor.code()
    );
    let mut bad = join("g", "x", &[]);
    bad.subscribed_topic_names = None;
    bad.subscribed_topic_regex = Some("t[".into());
    assert_eq!(
        c.call(&bad, 1).await.error_code,
        ErrorCode::InvalidRegularExpression.code()
    );
    let mut bad = join("g", "x", &["t"]);
    bad.rebalance_timeout_ms = -1;
    assert_eq!(
        c.call(&bad, 1).await.error_code,
        ErrorCode::InvalidRequest.code()
    );
    assert_eq!(
        c.call(&beat("g", &chosen, 7, &Vec::new()), 0)
            .await
            .error_code,
        ErrorCode::FencedMemberEpoch.code()
    );
    assert_eq!(
        c.call(&beat("g", "ghost", 1, &Vec::new()), 1)
            .await
            .error_code,
        ErrorCode::UnknownMemberId.code()
    );
    // Static members: the instance id is taken until its member leaves with -2.
    let mut s1 = join("s", "s1", &["t"]);
    s1.instance_id = Some("inst".into());
    let first = c.call(&s1, 1).await;
    assert_eq!(first.error_code, 0);
    let mut s2 = join("s", "s2", &["t"]);
    s2.instance_id = Some("inst".into());
    assert_eq!(
        c.call(&s2, 1).await.error_code,
        ErrorCode::UnreleasedInstanceId.code()
    );
    let mut leave = beat("s", "s1", -2, &Vec::new());
    leave.instance_id = Some("inst".into());
    let left = c.call(&leave, 1).await;
    assert_eq!((left.error_code, left.member_epoch), (0, -2));
    let second = c.call(&s2, 1).await;
    assert_eq!(second.error_code, 0);
    assert_eq!(owned_of(&second), owned_of(&first));

    // DescribeGroups shows a consumer group as Kafka does: its state, protocol
    // type `consumer` and members (it used to say `Dead`).
    let d = c
        .call(
            &DescribeGroupsRequest {
                groups: vec!["g".into()],
                include_authorized_operations: false,
            },
            5,
        )
        .await;
    let g = &d.groups[0];
    assert_eq!((g.error_code, g.protocol_type.as_str()), (0, "consumer"));
    assert!(
        ["Stable", "Reconciling", "Assigning"].contains(&g.group_state.as_str()),
        "{g:?}"
    );
    assert!(!g.members.is_empty());

    // Classic members may join a consumer group and consumer-protocol members a
    // classic one (KIP-848 mixed groups), but only with a consumer subscription
    // as their protocol metadata: an empty one is refused both ways.
    let classic = JoinGroupRequest {
        group_id: "g".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        member_id: String::new(),
        protocol_type: "consumer".into(),
        protocols: vec![JoinGroupRequestProtocol {
            name: "range".into(),
            metadata: Default::default(),
        }],
        ..Default::default()
    };
    assert_eq!(
        c.call(&classic, 9).await.error_code,
        ErrorCode::InconsistentGroupProtocol.code()
    );
    let mut classic = classic;
    classic.group_id = "cl".into();
    let j = c.call(&classic, 3).await;
    assert_eq!(j.error_code, 0);
    assert_eq!(
        c.call(&join("cl", "m", &["t"]), 1).await.error_code,
        ErrorCode::GroupIdNotFound.code()
    );
    let d = c
        .call(
            &ConsumerGroupDescribeRequest {
                group_ids: vec!["cl".into()],
                include_authorized_operations: false,
            },
            0,
        )
        .await;
    assert_eq!(d.groups[0].error_code, ErrorCode::GroupIdNotFound.code());
    broker.shutdown().await;
}

#[tokio::test]
async fn silent_member_is_fenced_after_the_session_timeout() {
    let config = BrokerConfig {
        groups: GroupConfig {
            consumer_session_timeout_ms: 400,
            consumer_heartbeat_interval_ms: 100,
            ..GroupConfig::default()
        },
        ..BrokerConfig::in_memory()
    };
    let broker = start(config).await;
    let mut a = Client::connect(broker.local_addr()).await;
    let mut b = Client::connect(broker.local_addr()).await;
    create_topic(&mut a, "t", 4).await;
    let mut ma = Member::join(&mut a, "g", "a", &["t"]).await;
    let mb = Member::join(&mut b, "g", "b", &["t"]).await;
    assert_eq!(mb.epoch, 2);
    // b never heartbeats again; a keeps going and ends up with everything.
    let mut rounds = 0;
    while count(&ma.owned) != 4 || rounds < 3 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        ma.beat(&mut a, "g").await;
        rounds += 1;
        assert!(rounds < 100, "b was never fenced");
    }
    assert!(ma.epoch >= 3);
    let r = b.call(&beat("g", "b", mb.epoch, &mb.owned), 1).await;
    assert_eq!(r.error_code, ErrorCode::UnknownMemberId.code());
    broker.shutdown().await;
}

#[tokio::test]
async fn a_member_that_keeps_revoked_partitions_is_fenced_after_its_rebalance_timeout() {
    let broker = start(BrokerConfig::in_memory()).await;
    let mut a = Client::connect(broker.local_addr()).await;
    let mut b = Client::connect(broker.local_addr()).await;
    create_topic(&mut a, "t", 4).await;
    let mut j = join("g", "a", &["t"]);
    j.rebalance_timeout_ms = 300;
    let r = a.call(&j, 1).await;
    let all = owned_of(&r).unwrap();
    let mut mb = Member::join(&mut b, "g", "b", &["t"]).await;
    // a is asked to give two partitions up but keeps reporting all four.
    let r = a.call(&beat("g", "a", 1, &all), 1).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 1));
    assert_eq!(count(&owned_of(&r).unwrap()), 2);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let r = a.call(&beat("g", "a", 1, &all), 1).await;
    assert_eq!(r.error_code, 0, "still within its rebalance timeout");
    let mut rounds = 0;
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let r = a.call(&beat("g", "a", 1, &all), 1).await;
        if r.error_code == ErrorCode::UnknownMemberId.code() {
            break;
        }
        rounds += 1;
        assert!(rounds < 50, "a was never fenced: {r:?}");
    }
    // b gets everything.
    mb.beat(&mut b, "g").await;
    mb.beat(&mut b, "g").await;
    assert_eq!(count(&mb.owned), 4);
    broker.shutdown().await;
}

#[tokio::test]
async fn regex_subscription_follows_new_topics() {
    let broker = start(BrokerConfig::in_memory()).await;
    let mut c = Client::connect(broker.local_addr()).await;
    create_topic(&mut c, "orders-eu", 2).await;
    create_topic(&mut c, "payments", 2).await;
    let mut j = join("g", "m", &[]);
    j.subscribed_topic_names = None;
    j.subscribed_topic_regex = Some("orders-.*".into());
    let r = c.call(&j, 1).await;
    assert_eq!(r.error_code, 0);
    let mut m = Member {
        id: "m".into(),
        epoch: r.member_epoch,
        owned: owned_of(&r).unwrap(),
    };
    assert_eq!(count(&m.owned), 2);
    create_topic(&mut c, "orders-us", 3).await;
    let before = m.epoch;
    m.beat(&mut c, "g").await;
    assert_eq!(m.epoch, before + 1);
    assert_eq!(count(&m.owned), 5);
    broker.shutdown().await;
}

#[tokio::test]
async fn members_and_epochs_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = BrokerConfig::on_disk(dir.path());
    let broker = start(cfg.clone()).await;
    let mut c = Client::connect(broker.local_addr()).await;
    create_topic(&mut c, "t", 4).await;
    let mut a = Member::join(&mut c, "g", "a", &["t"]).await;
    let mut b = Member::join(&mut c, "g", "b", &["t"]).await;
    a.beat(&mut c, "g").await;
    a.beat(&mut c, "g").await;
    b.beat(&mut c, "g").await;
    assert_eq!((a.epoch, b.epoch, count(&b.owned)), (2, 2, 2));
    let commit_ok = c
        .call(&commit("g", 2, "a", "t", a.owned[0].1[0], 5), 9)
        .await;
    assert_eq!(commit_error(&commit_ok), 0);
    broker.shutdown().await;

    let broker = start(cfg).await;
    let mut c = Client::connect(broker.local_addr()).await;
    // Both continue at their epochs with their partitions, no rebalance.
    let ra = a.beat(&mut c, "g").await;
    let rb = b.beat(&mut c, "g").await;
    assert_eq!((ra.member_epoch, rb.member_epoch), (2, 2));
    assert_eq!(count(&a.owned) + count(&b.owned), 4);
    let d = c
        .call(
            &ConsumerGroupDescribeRequest {
                group_ids: vec!["g".into()],
                include_authorized_operations: false,
            },
            0,
        )
        .await;
    assert_eq!(
        (d.groups[0].group_state.as_str(), d.groups[0].group_epoch),
        ("Stable", 2)
    );
    assert_eq!(
        commit_error(
            &c.call(&commit("g", 2, "b", "t", b.owned[0].1[0], 6), 9)
                .await
        ),
        0
    );
    broker.shutdown().await;
}

/// Heartbeats until the coordinator answers without a coordinator error (the
/// partition may still be forming its ISR, or moving).
async fn beat_retrying(
    c: &mut Client,
    req: &ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    for _ in 0..300 {
        let r = c.call(req, 1).await;
        if r.error_code != ErrorCode::CoordinatorNotAvailable.code()
            && r.error_code != ErrorCode::NotCoordinator.code()
        {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the coordinator never answered");
}

#[tokio::test]
async fn members_keep_heartbeating_through_a_coordinator_failover() {
    use baton_broker::Cluster;
    let mut cluster = Cluster::builder()
        .brokers(3)
        .session_timeout(Duration::from_secs(2))
        .start()
        .await
        .unwrap();
    let first = cluster.node_ids()[0];
    let mut c = Client::connect(cluster.node(first).addr()).await;
    create_topic(&mut c, "t", 4).await;
    let (coordinator, addr) = find_coordinator(&mut c, "fg", None).await;
    let mut cc = Client::connect(addr.parse().unwrap()).await;
    let r = beat_retrying(&mut cc, &join("fg", "a", &["t"])).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    let mut a = Member {
        id: "a".into(),
        epoch: r.member_epoch,
        owned: owned_of(&r).unwrap(),
    };
    let mut b = Member::join(&mut cc, "fg", "b", &["t"]).await;
    a.beat(&mut cc, "fg").await;
    a.beat(&mut cc, "fg").await;
    b.beat(&mut cc, "fg").await;
    assert_eq!((a.epoch, b.epoch), (2, 2));
    assert_eq!(count(&a.owned) + count(&b.owned), 4);

    let mut c = kill_and_connect_to_a_survivor(&mut cluster, coordinator).await;
    let (node, addr) = find_coordinator(&mut c, "fg", Some(coordinator)).await;
    assert_ne!(node, coordinator);
    let mut nc = Client::connect(addr.parse().unwrap()).await;
    // Both members re-heartbeat to the new coordinator with their epochs and
    // continue: not fenced, no rebalance.
    let ra = beat_retrying(&mut nc, &beat("fg", "a", a.epoch, &a.owned)).await;
    assert_eq!((ra.error_code, ra.member_epoch), (0, 2), "{ra:?}");
    let rb = beat_retrying(&mut nc, &beat("fg", "b", b.epoch, &b.owned)).await;
    assert_eq!((rb.error_code, rb.member_epoch), (0, 2), "{rb:?}");
    // The group goes on: a third member joins and the three reconcile.
    let mut m3 = Member::join(&mut nc, "fg", "c", &["t"]).await;
    assert_eq!(m3.epoch, 3);
    for _ in 0..4 {
        a.beat(&mut nc, "fg").await;
        b.beat(&mut nc, "fg").await;
        m3.beat(&mut nc, "fg").await;
    }
    assert_eq!((a.epoch, b.epoch, m3.epoch), (3, 3, 3));
    assert_eq!(count(&a.owned) + count(&b.owned) + count(&m3.owned), 4);
    let all: BTreeSet<_> = [&a, &b, &m3].iter().flat_map(|m| set(&m.owned)).collect();
    assert_eq!(all.len(), 4);
    cluster.shutdown().await;
}

#[tokio::test]
async fn consumer_groups_are_bounded_by_the_group_limits() {
    let config = BrokerConfig {
        groups: GroupConfig {
            consumer_max_size: 1,
            ..GroupConfig::default()
        },
        limits: baton_broker::BrokerLimits {
            max_groups: 1,
            ..Default::default()
        },
        ..BrokerConfig::in_memory()
    };
    let broker = start(config).await;
    let mut c = Client::connect(broker.local_addr()).await;
    create_topic(&mut c, "t", 2).await;
    Member::join(&mut c, "g", "a", &["t"]).await;
    // group.consumer.max.size: a second member is refused.
    let r = c.call(&join("g", "b", &["t"]), 1).await;
    assert_eq!(r.error_code, ErrorCode::GroupMaxSizeReached.code());
    // max_groups: a second group is refused.
    let r = c.call(&join("other", "b", &["t"]), 1).await;
    assert_eq!(r.error_code, ErrorCode::PolicyViolation.code());
    // Once the member leaves, the group stays (empty) and takes a member again.
    let left = c.call(&beat("g", "a", -1, &Vec::new()), 1).await;
    assert_eq!(left.error_code, 0);
    Member::join(&mut c, "g", "b", &["t"]).await;
    broker.shutdown().await;
}
