//! A stable classic group across a coordinator failover (3-node `Cluster`, raw
//! frames): the node that takes over the group's `__consumer_offsets` partition
//! restores its members, generation and assignments from the group record, the
//! members carry on there at the same generation, and a member that is really
//! gone expires and the group rebalances into the next generation.

use std::time::Duration;

use baton_broker::group::GroupConfig;
use baton_broker::Cluster;
use baton_protocol::messages::*;
use baton_protocol::ErrorCode;
use baton_testkit::wire::*;

use super::groups::{
    assignment, commit_errors, commit_req, find_coordinator, heartbeat, join_req,
    kill_and_connect_to_a_survivor, sync,
};

const GROUP: &str = "g";
const SESSION_MS: i32 = 3_000;

/// The answers of a coordinator whose partition is moving: ask again.
fn moving(code: i16) -> bool {
    [
        ErrorCode::NotCoordinator,
        ErrorCode::CoordinatorNotAvailable,
        ErrorCode::CoordinatorLoadInProgress,
    ]
    .iter()
    .any(|c| c.code() == code)
}

/// Commits with generation -1 until the group's partition takes writes (its ISR
/// may still be forming).
async fn await_writable(c: &mut Client) {
    for _ in 0..300 {
        let errs = commit_errors(&c.call(&commit_req(GROUP, -1, "", &[(0, 0)]), 9).await);
        if errs == vec![0] {
            return;
        }
        assert!(errs.iter().all(|&e| moving(e)), "{errs:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the group's partition never took a commit");
}

/// Two members join together (generation 1) and the leader hands out
/// partition 0 and 1 of `t`. Returns the members (leader first).
async fn stable_group(a: &mut Client, b: &mut Client) -> (String, String) {
    let mut ids = Vec::new();
    for c in [&mut *a, &mut *b] {
        let r = c.call(&join_req("", SESSION_MS), 9).await;
        assert_eq!(r.error_code, ErrorCode::MemberIdRequired.code());
        ids.push(r.member_id);
    }
    a.send(&join_req(&ids[0], SESSION_MS), 9).await;
    b.send(&join_req(&ids[1], SESSION_MS), 9).await;
    let (_, ja) = a.recv::<JoinGroupRequest>(9).await;
    let (_, jb) = b.recv::<JoinGroupRequest>(9).await;
    assert_eq!((ja.error_code, ja.generation_id), (0, 1), "{ja:?}");
    assert_eq!((jb.error_code, jb.generation_id), (0, 1), "{jb:?}");
    assert_eq!(ja.leader, jb.leader);
    let (leader, follower) = if ja.leader == ja.member_id {
        (a, b)
    } else {
        (b, a)
    };
    let leader_id = ja.leader.clone();
    let follower_id = if ids[0] == leader_id {
        ids[1].clone()
    } else {
        ids[0].clone()
    };
    follower.send(&sync(&follower_id, 1, vec![]), 5).await;
    let assignments = vec![
        (leader_id.clone(), assignment("t", &[0])),
        (follower_id.clone(), assignment("t", &[1])),
    ];
    let s = leader.call(&sync(&leader_id, 1, assignments), 5).await;
    assert_eq!(s.error_code, 0);
    assert_eq!(s.assignment, assignment("t", &[0]));
    let (_, s) = follower.recv::<SyncGroupRequest>(5).await;
    assert_eq!(s.error_code, 0);
    assert_eq!(s.assignment, assignment("t", &[1]));
    (leader_id, follower_id)
}

#[tokio::test]
async fn a_stable_group_keeps_its_generation_across_coordinator_failover() {
    let mut cluster = Cluster::builder()
        .brokers(3)
        .session_timeout(Duration::from_secs(2))
        .groups(GroupConfig {
            initial_rebalance_delay_ms: 200,
            ..GroupConfig::default()
        })
        .start()
        .await
        .unwrap();
    let first = cluster.node_ids()[0];
    let mut c = Client::connect(cluster.node(first).addr()).await;
    create_topic(&mut c, "t", 2).await;
    let (coordinator, addr) = find_coordinator(&mut c, GROUP, None).await;
    let addr = addr.parse().unwrap();
    let mut a = Client::connect(addr).await;
    let mut b = Client::connect(addr).await;
    await_writable(&mut a).await;
    let (leader, follower) = stable_group(&mut a, &mut b).await;
    // A member's commit: once it is answered, the group records before it in the
    // partition are replicated too.
    let r = a.call(&commit_req(GROUP, 1, &leader, &[(0, 5)]), 9).await;
    assert_eq!(commit_errors(&r), vec![0]);

    // The coordinator's node dies. The members find the new coordinator and
    // heartbeat it at generation 1, as the Java client does after
    // NOT_COORDINATOR: they are still members there.
    let mut c = kill_and_connect_to_a_survivor(&mut cluster, coordinator).await;
    let mut served = None;
    for _ in 0..300 {
        let (node, addr) = find_coordinator(&mut c, GROUP, Some(coordinator)).await;
        let mut nc = Client::connect(addr.parse().unwrap()).await;
        let code = nc.call(&heartbeat(&leader, 1), 4).await.error_code;
        if !moving(code) {
            assert_eq!(code, 0, "the leader at generation 1 on node {node}: {code}");
            served = Some(nc);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut nc = served.expect("a new coordinator");
    assert_eq!(nc.call(&heartbeat(&follower, 1), 4).await.error_code, 0);
    assert_eq!(
        nc.call(&heartbeat(&follower, 0), 4).await.error_code,
        ErrorCode::IllegalGeneration.code()
    );
    // The follower syncs again and gets its assignment back; the group is
    // described as it was.
    let s = nc.call(&sync(&follower, 1, vec![]), 5).await;
    assert_eq!(s.error_code, 0);
    assert_eq!(s.assignment, assignment("t", &[1]));
    let d = nc
        .call(
            &DescribeGroupsRequest {
                groups: vec![GROUP.into()],
                include_authorized_operations: false,
            },
            5,
        )
        .await;
    let g = &d.groups[0];
    assert_eq!(
        (g.group_state.as_str(), g.protocol_data.as_str()),
        ("Stable", "range")
    );
    let mut members: Vec<&str> = g.members.iter().map(|m| m.member_id.as_str()).collect();
    members.sort_unstable();
    let mut want = vec![leader.as_str(), follower.as_str()];
    want.sort_unstable();
    assert_eq!(members, want);
    let r = nc
        .call(&commit_req(GROUP, 1, &follower, &[(1, 7)]), 9)
        .await;
    assert_eq!(commit_errors(&r), vec![0]);

    // The follower goes quiet. Its session, restarted by the new coordinator,
    // runs out; the leader hears of the rebalance and rejoins into generation 2.
    let mut rebalancing = false;
    for _ in 0..200 {
        let code = nc.call(&heartbeat(&leader, 1), 4).await.error_code;
        if code == ErrorCode::RebalanceInProgress.code() {
            rebalancing = true;
            break;
        }
        assert_eq!(code, 0);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(rebalancing, "the silent member never expired");
    let j = nc.call(&join_req(&leader, SESSION_MS), 9).await;
    assert_eq!((j.error_code, j.generation_id), (0, 2), "{j:?}");
    assert_eq!(j.leader, leader);
    assert_eq!(j.members.len(), 1);
    cluster.shutdown().await;
}
