//! LeaveGroup; SyncGroup and Heartbeat are exercised by the join and rebalance tests.

use super::*;

#[test]
fn leave_group_rebalances_the_rest() {
    let mut h = Harness::new(0);
    let (a, b, gen) = two_member_group_no_delay(&mut h);
    let (res, out) = h.groups.leave(
        "g",
        &[
            LeavingMember {
                member_id: b.clone(),
                group_instance_id: None,
            },
            LeavingMember {
                member_id: "ghost".into(),
                group_instance_id: None,
            },
        ],
        h.now,
    );
    assert!(out.is_empty());
    assert_eq!(res, Ok(vec![ErrorCode::None, ErrorCode::UnknownMemberId]));
    assert_eq!(h.heartbeat(&a, gen), ErrorCode::RebalanceInProgress);
    let (wa, out) = h.join(Harness::join_req(&a, None, b"m"));
    assert_eq!(join_of(&out, wa).unwrap().members.len(), 1);
    let (res, _) = h.groups.leave(
        "g",
        &[LeavingMember {
            member_id: a.clone(),
            group_instance_id: None,
        }],
        h.now,
    );
    assert_eq!(res, Ok(vec![ErrorCode::None]));
    assert_eq!(
        h.groups.state_of("g"),
        None,
        "an empty group without offsets goes"
    );
    let (res, _) = h.groups.leave("nope", &[LeavingMember::default()], h.now);
    assert_eq!(res, Ok(vec![ErrorCode::UnknownMemberId]));
}

#[test]
fn leaving_while_others_wait_completes_the_join() {
    let mut h = Harness::new(0);
    let (a, b, _) = two_member_group_no_delay(&mut h);
    let (wa, out) = h.join(Harness::join_req(&a, None, b"changed"));
    assert!(out.is_empty());
    let (_, out) = h.groups.leave(
        "g",
        &[LeavingMember {
            member_id: b,
            group_instance_id: None,
        }],
        h.now,
    );
    assert_eq!(join_of(&out, wa).unwrap().members.len(), 1);
}
