//! Consumer groups over real TCP with raw protocol frames: a two-member rebalance
//! with the embedded consumer protocol, session expiry, offsets that survive
//! restarts and crashes, and the group admin APIs.

use baton_broker::group::GroupConfig;
use baton_broker::{Broker, BrokerConfig, BrokerHandle, Cluster};
use baton_protocol::messages::*;
use baton_protocol::ErrorCode;
use baton_testkit::wire::*;
use bytes::Bytes;

const GROUP: &str = "g";

pub(super) fn subscription(topics: &[&str]) -> Bytes {
    ConsumerProtocolSubscription {
        topics: topics.iter().map(|t| t.to_string()).collect(),
        ..Default::default()
    }
    .encode_versioned(3)
    .unwrap()
}

pub(super) fn assignment(topic: &str, partitions: &[i32]) -> Bytes {
    ConsumerProtocolAssignment {
        assigned_partitions: vec![ConsumerProtocolTopicPartition {
            topic: topic.into(),
            partitions: partitions.to_vec(),
        }],
        user_data: None,
    }
    .encode_versioned(0)
    .unwrap()
}

pub(super) fn join_req(member_id: &str, session_timeout_ms: i32) -> JoinGroupRequest {
    JoinGroupRequest {
        group_id: GROUP.into(),
        session_timeout_ms,
        rebalance_timeout_ms: 10_000,
        member_id: member_id.into(),
        group_instance_id: None,
        protocol_type: "consumer".into(),
        protocols: vec![JoinGroupRequestProtocol {
            name: "range".into(),
            metadata: subscription(&["t"]),
        }],
        reason: None,
    }
}

/// The KIP-394 round trip: a first join gets MEMBER_ID_REQUIRED and an id.
async fn member_id(c: &mut Client, session_timeout_ms: i32) -> String {
    let r = c.call(&join_req("", session_timeout_ms), 9).await;
    assert_eq!(r.error_code, ErrorCode::MemberIdRequired.code());
    assert!(!r.member_id.is_empty());
    r.member_id
}

async fn start(config: BrokerConfig) -> BrokerHandle {
    Broker::start(config).await.unwrap()
}

pub(super) fn heartbeat(member: &str, generation_id: i32) -> HeartbeatRequest {
    HeartbeatRequest {
        group_id: GROUP.into(),
        generation_id,
        member_id: member.into(),
        group_instance_id: None,
    }
}

pub(super) fn sync(
    member: &str,
    generation_id: i32,
    assignments: Vec<(String, Bytes)>,
) -> SyncGroupRequest {
    SyncGroupRequest {
        group_id: GROUP.into(),
        generation_id,
        member_id: member.into(),
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        assignments: assignments
            .into_iter()
            .map(|(member_id, assignment)| SyncGroupRequestAssignment {
                member_id,
                assignment,
            })
            .collect(),
        ..Default::default()
    }
}

pub(super) fn commit_req(
    group: &str,
    generation: i32,
    member: &str,
    offsets: &[(i32, i64)],
) -> OffsetCommitRequest {
    OffsetCommitRequest {
        group_id: group.into(),
        generation_id_or_member_epoch: generation,
        member_id: member.into(),
        topics: vec![OffsetCommitRequestTopic {
            name: "t".into(),
            partitions: offsets
                .iter()
                .map(|&(p, o)| OffsetCommitRequestPartition {
                    partition_index: p,
                    committed_offset: o,
                    committed_leader_epoch: 0,
                    committed_metadata: Some(format!("m{p}")),
                    ..Default::default()
                })
                .collect(),
        }],
        ..Default::default()
    }
}

pub(super) fn commit_errors(r: &OffsetCommitResponse) -> Vec<i16> {
    r.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

#[tokio::test]
async fn two_member_rebalance() {
    let broker = start(BrokerConfig::in_memory()).await;
    let mut a = Client::connect(broker.local_addr()).await;
    let mut b = Client::connect(broker.local_addr()).await;
    create_topic(&mut a, "t", 4).await;

    let versions = a.call(&ApiVersionsRequest::default(), 3).await;
    for (key, min, max) in [
        (8, 2, 9),
        (9, 1, 9),
        (10, 0, 5),
        (11, 0, 9),
        (14, 0, 5),
        (42, 0, 2),
    ] {
        let v = versions.api_keys.iter().find(|v| v.api_key == key).unwrap();
        assert_eq!((v.min_version, v.max_version), (min, max), "api {key}");
    }

    // Both ask for the coordinator: this node, in the old and the batched form.
    let port = broker.local_addr().port() as i32;
    let fc = a
        .call(
            &FindCoordinatorRequest {
                key: GROUP.into(),
                ..Default::default()
            },
            3,
        )
        .await;
    assert_eq!((fc.error_code, fc.node_id, fc.port), (0, 0, port));
    let fc = b
        .call(
            &FindCoordinatorRequest {
                coordinator_keys: vec![GROUP.into(), "other".into()],
                ..Default::default()
            },
            4,
        )
        .await;
    assert_eq!(fc.coordinators.len(), 2);
    assert!(fc
        .coordinators
        .iter()
        .all(|c| c.error_code == 0 && c.port == port));

    // Both join; the initial rebalance delay puts them in one generation.
    let id_a = member_id(&mut a, 10_000).await;
    let id_b = member_id(&mut b, 10_000).await;
    a.send(&join_req(&id_a, 10_000), 9).await;
    b.send(&join_req(&id_b, 10_000), 7).await;
    let (_, ja) = a.recv::<JoinGroupRequest>(9).await;
    let (_, jb) = b.recv::<JoinGroupRequest>(7).await;
    assert_eq!((ja.error_code, jb.error_code), (0, 0));
    assert_eq!(ja.generation_id, 1);
    assert_eq!(jb.generation_id, 1);
    assert_eq!(ja.leader, jb.leader);
    assert_eq!(ja.protocol_name.as_deref(), Some("range"));
    assert_eq!(jb.protocol_type.as_deref(), Some("consumer"));
    let (leader, leader_join, mut lc, mut fcl, follower) = if ja.leader == id_a {
        (id_a.clone(), ja, a, b, id_b.clone())
    } else {
        (id_b.clone(), jb, b, a, id_a.clone())
    };
    assert_eq!(leader_join.members.len(), 2);
    for m in &leader_join.members {
        let (v, s) = ConsumerProtocolSubscription::decode_versioned(m.metadata.clone()).unwrap();
        assert_eq!((v, s.topics), (3, vec!["t".to_string()]));
    }

    // The follower's sync waits for the leader's assignments.
    let gen = leader_join.generation_id;
    fcl.send(&sync(&follower, gen, vec![]), 5).await;
    let sl = lc
        .call(
            &sync(
                &leader,
                gen,
                vec![
                    (leader.clone(), assignment("t", &[0, 1])),
                    (follower.clone(), assignment("t", &[2, 3])),
                ],
            ),
            5,
        )
        .await;
    let (_, sf) = fcl.recv::<SyncGroupRequest>(5).await;
    assert_eq!((sl.error_code, sf.error_code), (0, 0));
    let (_, got) = ConsumerProtocolAssignment::decode_versioned(sf.assignment).unwrap();
    assert_eq!(got.assigned_partitions[0].partitions, vec![2, 3]);
    assert_eq!(sf.protocol_name.as_deref(), Some("range"));

    // Stable: heartbeats pass, commits from members of this generation are stored.
    assert_eq!(lc.call(&heartbeat(&leader, gen), 4).await.error_code, 0);
    assert_eq!(
        fcl.call(&heartbeat(&follower, gen + 1), 0).await.error_code,
        ErrorCode::IllegalGeneration.code()
    );
    let r = lc
        .call(&commit_req(GROUP, gen, &leader, &[(0, 10), (1, 11)]), 9)
        .await;
    assert_eq!(commit_errors(&r), vec![0, 0]);
    let r = fcl
        .call(&commit_req(GROUP, gen - 1, &follower, &[(2, 5)]), 7)
        .await;
    assert_eq!(commit_errors(&r), vec![ErrorCode::IllegalGeneration.code()]);
    let r = fcl
        .call(&commit_req(GROUP, gen, &follower, &[(2, 12), (9, 1)]), 2)
        .await;
    assert_eq!(
        commit_errors(&r),
        vec![0, ErrorCode::UnknownTopicOrPartition.code()]
    );

    let d = lc
        .call(
            &DescribeGroupsRequest {
                groups: vec![GROUP.into(), "nope".into()],
                include_authorized_operations: false,
            },
            5,
        )
        .await;
    assert_eq!(d.groups[0].group_state, "Stable");
    assert_eq!(d.groups[0].members.len(), 2);
    assert_eq!(d.groups[0].members[0].client_id, "broker-test");
    assert_eq!(d.groups[0].members[0].client_host, "/127.0.0.1");
    assert_eq!(d.groups[1].group_state, "Dead");

    // The follower leaves (v3+ batch form); the leader learns of the rebalance from
    // its heartbeat and rejoins alone.
    let leave = fcl
        .call(
            &LeaveGroupRequest {
                group_id: GROUP.into(),
                members: vec![MemberIdentity {
                    member_id: follower.clone(),
                    group_instance_id: None,
                    reason: Some("test".into()),
                }],
                ..Default::default()
            },
            5,
        )
        .await;
    assert_eq!(leave.members[0].error_code, 0);
    assert_eq!(
        lc.call(&heartbeat(&leader, gen), 4).await.error_code,
        ErrorCode::RebalanceInProgress.code()
    );
    let j = lc.call(&join_req(&leader, 10_000), 6).await;
    assert_eq!(
        (j.error_code, j.generation_id, j.members.len()),
        (0, gen + 1, 1)
    );

    let fetched = fcl
        .call(
            &OffsetFetchRequest {
                groups: vec![OffsetFetchRequestGroup {
                    group_id: GROUP.into(),
                    topics: None,
                    ..Default::default()
                }],
                ..Default::default()
            },
            8,
        )
        .await;
    let parts: Vec<(i32, i64)> = fetched.groups[0].topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.committed_offset))
        .collect();
    assert_eq!(parts, vec![(0, 10), (1, 11), (2, 12)]);

    let list = fcl
        .call(
            &ListGroupsRequest {
                states_filter: vec!["completingrebalance".into()],
                ..Default::default()
            },
            5,
        )
        .await;
    assert_eq!(list.groups.len(), 1);
    assert_eq!(list.groups[0].group_type, "classic");
    let del = fcl
        .call(
            &DeleteGroupsRequest {
                groups_names: vec![GROUP.into(), "nope".into()],
            },
            2,
        )
        .await;
    assert_eq!(
        del.results.iter().map(|r| r.error_code).collect::<Vec<_>>(),
        vec![
            ErrorCode::NonEmptyGroup.code(),
            ErrorCode::GroupIdNotFound.code()
        ]
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn silent_member_expires_and_the_rest_rebalances() {
    let config = BrokerConfig {
        groups: GroupConfig {
            initial_rebalance_delay_ms: 0,
            ..GroupConfig::default()
        },
        ..BrokerConfig::in_memory()
    };
    let broker = start(config).await;
    let mut a = Client::connect(broker.local_addr()).await;
    let mut b = Client::connect(broker.local_addr()).await;
    create_topic(&mut a, "t", 1).await;
    // v3: no MEMBER_ID_REQUIRED round trip; alone, a completes at once.
    let ja = a.call(&join_req("", 300), 3).await;
    assert_eq!((ja.error_code, ja.generation_id), (0, 1));
    assert_eq!(ja.leader, ja.member_id);
    let s = a
        .call(
            &sync(
                &ja.member_id,
                1,
                vec![(ja.member_id.clone(), assignment("t", &[0]))],
            ),
            3,
        )
        .await;
    assert_eq!(s.error_code, 0);
    // b joins with a long session; a never heartbeats again, so the rebalance
    // completes when a's 300 ms session ends, without a.
    let id_b = member_id(&mut b, 30_000).await;
    let jb = b.call(&join_req(&id_b, 30_000), 9).await;
    assert_eq!(jb.error_code, 0);
    // 2, or 3 if a's session already ended before b joined (a slow machine).
    assert!(jb.generation_id == 2 || jb.generation_id == 3, "{jb:?}");
    assert_eq!(jb.leader, id_b);
    assert_eq!(jb.members.len(), 1);
    assert_eq!(
        a.call(&heartbeat(&ja.member_id, 1), 1).await.error_code,
        ErrorCode::UnknownMemberId.code()
    );
    broker.shutdown().await;
}

fn fetch_v5(group: &str) -> OffsetFetchRequest {
    OffsetFetchRequest {
        group_id: group.into(),
        topics: Some(vec![OffsetFetchRequestTopic {
            name: "t".into(),
            partition_indexes: vec![0, 1, 2],
        }]),
        ..Default::default()
    }
}

fn offsets_v5(r: &OffsetFetchResponse) -> Vec<(i64, i32, Option<String>)> {
    assert_eq!(r.error_code, 0);
    r.topics[0]
        .partitions
        .iter()
        .map(|p| {
            (
                p.committed_offset,
                p.committed_leader_epoch,
                p.metadata.clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn committed_offsets_survive_restart_and_crash() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = BrokerConfig::on_disk(dir.path());
    let broker = start(cfg.clone()).await;
    let mut c = Client::connect(broker.local_addr()).await;
    create_topic(&mut c, "t", 3).await;
    // Simple commits: no members, generation -1.
    let r = c
        .call(&commit_req("s", -1, "", &[(0, 100), (1, 200)]), 8)
        .await;
    assert_eq!(commit_errors(&r), vec![0, 0]);
    let r = c.call(&commit_req("s", -1, "", &[(1, 201)]), 2).await;
    assert_eq!(commit_errors(&r), vec![0]);
    let r = c.call(&commit_req("other", -1, "", &[(2, 7)]), 9).await;
    assert_eq!(commit_errors(&r), vec![0]);
    let r = c.call(&commit_req("s", 5, "m", &[(0, 1)]), 9).await;
    assert_eq!(commit_errors(&r), vec![ErrorCode::UnknownMemberId.code()]);
    let expected = vec![
        (100, 0, Some("m0".to_string())),
        // Committed with v2, which has no leader epoch.
        (201, -1, Some("m1".to_string())),
        (-1, -1, Some(String::new())),
    ];
    assert_eq!(offsets_v5(&c.call(&fetch_v5("s"), 5).await), expected);
    // A member joins group `g` (generation 1) and leaves (generation 2, empty; kept
    // for its committed offset, as an empty group without offsets is removed).
    let r = c.call(&commit_req(GROUP, -1, "", &[(0, 5)]), 9).await;
    assert_eq!(commit_errors(&r), vec![0]);
    let j = c.call(&join_req("", 10_000), 3).await;
    assert_eq!((j.error_code, j.generation_id), (0, 1));
    let leave = LeaveGroupRequest {
        group_id: GROUP.into(),
        member_id: j.member_id.clone(),
        ..Default::default()
    };
    assert_eq!(c.call(&leave, 0).await.error_code, 0);
    broker.shutdown().await;

    let broker = start(cfg.clone()).await;
    let mut c = Client::connect(broker.local_addr()).await;
    assert_eq!(offsets_v5(&c.call(&fetch_v5("s"), 5).await), expected);
    let list = c.call(&ListGroupsRequest::default(), 4).await;
    let names: Vec<(&str, &str)> = list
        .groups
        .iter()
        .map(|g| (g.group_id.as_str(), g.group_state.as_str()))
        .collect();
    assert_eq!(
        names,
        vec![("g", "Empty"), ("other", "Empty"), ("s", "Empty")]
    );
    // Generations go on where they stopped.
    let j = c.call(&join_req("", 10_000), 3).await;
    assert_eq!((j.error_code, j.generation_id), (0, 3));
    // Commit more, then crash without a shutdown.
    let r = c.call(&commit_req("s", -1, "", &[(2, 300)]), 9).await;
    assert_eq!(commit_errors(&r), vec![0]);
    let del = c
        .call(
            &DeleteGroupsRequest {
                groups_names: vec!["other".into()],
            },
            1,
        )
        .await;
    assert_eq!(del.results[0].error_code, 0);
    drop(broker);

    let broker = start(cfg).await;
    let mut c = Client::connect(broker.local_addr()).await;
    let r = c.call(&fetch_v5("s"), 1).await;
    let got: Vec<i64> = r.topics[0]
        .partitions
        .iter()
        .map(|p| p.committed_offset)
        .collect();
    assert_eq!(got, vec![100, 201, 300]);
    // The deleted group stays deleted.
    let r = c
        .call(
            &OffsetFetchRequest {
                groups: vec![OffsetFetchRequestGroup {
                    group_id: "other".into(),
                    topics: None,
                    ..Default::default()
                }],
                ..Default::default()
            },
            9,
        )
        .await;
    assert_eq!(r.groups[0].error_code, 0);
    assert!(r.groups[0].topics.is_empty());
    let d = c
        .call(
            &DescribeGroupsRequest {
                groups: vec!["other".into(), "s".into()],
                ..Default::default()
            },
            0,
        )
        .await;
    assert_eq!(d.groups[0].group_state, "Dead");
    assert_eq!(d.groups[1].group_state, "Empty");
    broker.shutdown().await;
}

/// Kills node `node` of `cluster` and connects to another one.
pub(super) async fn kill_and_connect_to_a_survivor(cluster: &mut Cluster, node: i32) -> Client {
    cluster.node(node).kill();
    let survivor = cluster
        .node_ids()
        .into_iter()
        .find(|&id| id != node)
        .expect("a node other than the killed one");
    Client::connect(cluster.node(survivor).addr()).await
}

/// Asks `c` for the coordinator of `group` until one is named (the first lookup in a
/// cluster creates `__consumer_offsets`), optionally one other than `not`.
pub(super) async fn find_coordinator(
    c: &mut Client,
    group: &str,
    not: Option<i32>,
) -> (i32, String) {
    for _ in 0..300 {
        let fc = c
            .call(
                &FindCoordinatorRequest {
                    key: group.into(),
                    ..Default::default()
                },
                3,
            )
            .await;
        if fc.error_code == 0 && Some(fc.node_id) != not {
            return (fc.node_id, format!("{}:{}", fc.host, fc.port));
        }
        assert!(
            fc.error_code == 0 || fc.error_code == ErrorCode::CoordinatorNotAvailable.code(),
            "FindCoordinator: {fc:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("no coordinator for {group}");
}

#[tokio::test]
async fn committed_offsets_survive_coordinator_failover() {
    let mut cluster = Cluster::builder()
        .brokers(3)
        .session_timeout(std::time::Duration::from_secs(2))
        .start()
        .await
        .unwrap();
    let first = cluster.node_ids()[0];
    let mut c = Client::connect(cluster.node(first).addr()).await;
    create_topic(&mut c, "t", 3).await;
    let (coordinator, addr) = find_coordinator(&mut c, "fg", None).await;
    let mut cc = Client::connect(addr.parse().unwrap()).await;
    // The partition's ISR may still be forming: retry retriable coordinator errors.
    let mut committed = false;
    for _ in 0..300 {
        let r = cc
            .call(&commit_req("fg", -1, "", &[(0, 42), (1, 43)]), 9)
            .await;
        let errs = commit_errors(&r);
        if errs == vec![0, 0] {
            committed = true;
            break;
        }
        assert!(
            errs.iter()
                .all(|&e| e == ErrorCode::CoordinatorNotAvailable.code()
                    || e == ErrorCode::NotCoordinator.code()),
            "{errs:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(committed);
    // A member joins (generation 1) and commits as a member.
    let mut req = join_req("", 10_000);
    req.group_id = "fg".into();
    let j = cc.call(&req, 9).await;
    assert_eq!(j.error_code, ErrorCode::MemberIdRequired.code());
    req.member_id = j.member_id;
    let j = cc.call(&req, 9).await;
    assert_eq!((j.error_code, j.generation_id), (0, 1));
    let mut s = sync(
        &j.member_id,
        1,
        vec![(j.member_id.clone(), assignment("t", &[2]))],
    );
    s.group_id = "fg".into();
    assert_eq!(cc.call(&s, 5).await.error_code, 0);
    let r = cc
        .call(&commit_req("fg", 1, &j.member_id, &[(2, 44)]), 9)
        .await;
    assert_eq!(commit_errors(&r), vec![0]);
    let member = j.member_id.clone();

    // The coordinator's node dies; another node takes over its partition and serves
    // the same offsets.
    let mut c = kill_and_connect_to_a_survivor(&mut cluster, coordinator).await;
    let mut got = None;
    for _ in 0..300 {
        let (node, addr) = find_coordinator(&mut c, "fg", Some(coordinator)).await;
        assert_ne!(node, coordinator);
        let mut nc = Client::connect(addr.parse().unwrap()).await;
        let r = nc.call(&fetch_v5("fg"), 5).await;
        if r.error_code == 0 {
            got = Some(offsets_v5(&r));
            break;
        }
        assert_eq!(r.error_code, ErrorCode::NotCoordinator.code(), "{r:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let got: Vec<i64> = got
        .expect("a new coordinator")
        .iter()
        .map(|o| o.0)
        .collect();
    assert_eq!(got, vec![42, 43, 44]);
    // The member is still one at the new coordinator (the group record restored
    // it); it leaves, and a new member's generation goes on from the old one's.
    let (_, addr) = find_coordinator(&mut c, "fg", Some(coordinator)).await;
    let mut nc = Client::connect(addr.parse().unwrap()).await;
    let leave = LeaveGroupRequest {
        group_id: "fg".into(),
        member_id: member.clone(),
        ..Default::default()
    };
    assert_eq!(nc.call(&leave, 0).await.error_code, 0);
    let mut req = join_req("", 10_000);
    req.group_id = "fg".into();
    let j = nc.call(&req, 5).await;
    assert_eq!(j.error_code, ErrorCode::MemberIdRequired.code());
    req.member_id = j.member_id;
    let j = nc.call(&req, 5).await;
    assert_eq!(j.error_code, 0);
    assert!(j.generation_id >= 2, "{j:?}");
    cluster.shutdown().await;
}

#[tokio::test]
async fn shutdown_answers_parked_joins() {
    let config = BrokerConfig {
        groups: GroupConfig {
            initial_rebalance_delay_ms: 0,
            ..GroupConfig::default()
        },
        ..BrokerConfig::in_memory()
    };
    let broker = start(config).await;
    let mut a = Client::connect(broker.local_addr()).await;
    let mut b = Client::connect(broker.local_addr()).await;
    let ja = a.call(&join_req("", 10_000), 3).await;
    assert_eq!(ja.generation_id, 1);
    // b's join waits for a to rejoin, which it never does.
    b.send(&join_req("", 10_000), 3).await;
    // Make sure b's join reached the coordinator before stopping.
    let mut parked = false;
    for _ in 0..500 {
        let code = a.call(&heartbeat(&ja.member_id, 1), 4).await.error_code;
        if code == ErrorCode::RebalanceInProgress.code() {
            parked = true;
            break;
        }
        assert_eq!(code, 0);
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(parked);
    let stopping = tokio::spawn(broker.shutdown());
    let (_, jb) = b.recv::<JoinGroupRequest>(3).await;
    assert_eq!(jb.error_code, ErrorCode::CoordinatorNotAvailable.code());
    stopping.await.unwrap();
}
