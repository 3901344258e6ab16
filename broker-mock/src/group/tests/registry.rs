//! The set of groups: DescribeGroups, ListGroups, DeleteGroups, the group limit, removal.

use super::*;

#[test]
fn delete_describe_and_list() {
    let mut h = Harness::new(0);
    let (a, _b, _gen) = two_member_group_no_delay(&mut h);
    assert_eq!(h.groups.check_delete("g"), Err(ErrorCode::NonEmptyGroup));
    assert_eq!(
        h.groups.check_delete("zzz"),
        Err(ErrorCode::GroupIdNotFound)
    );
    let d = h.groups.describe("g");
    assert_eq!(d.group_state, "Stable");
    assert_eq!(d.protocol_type, "consumer");
    assert_eq!(d.protocol_data, "range");
    assert_eq!(d.members.len(), 2);
    assert_eq!(d.members[0].member_id, a);
    assert_eq!(
        d.members[0].member_assignment,
        Bytes::new(),
        "a got nothing"
    );
    assert_eq!(d.members[1].member_assignment, Bytes::from_static(b"B"));
    assert_eq!(h.groups.describe("zzz").group_state, "Dead");

    h.groups.apply_offset(
        "e",
        "t",
        1,
        Some(CommittedOffset {
            offset: 1,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 0,
        }),
        0,
    );
    let all = h.groups.list(&[], &[]);
    let ids: Vec<&str> = all.iter().map(|g| g.group_id.as_str()).collect();
    assert_eq!(ids, vec!["e", "g"]);
    let empty = h.groups.list(&["empty".into()], &[]);
    assert_eq!(empty.len(), 1);
    assert!(h.groups.list(&[], &["consumer".into()]).is_empty());
    assert_eq!(h.groups.check_delete("e"), Ok(vec![("t".into(), 1)]));
    h.groups.delete("e");
    assert_eq!(h.groups.state_of("e"), None);
    // A tombstone for the last offset of an empty group removes it.
    h.groups.apply_offset(
        "f",
        "t",
        0,
        Some(CommittedOffset {
            offset: 1,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 0,
        }),
        0,
    );
    h.groups.apply_offset("f", "t", 0, None, -1);
    assert_eq!(h.groups.state_of("f"), None);
}

#[test]
fn group_limit_refuses_new_groups_and_frees_room_when_groups_go() {
    let mut h = Harness::new(0);
    h.groups = Groups::new(
        GroupConfig {
            initial_rebalance_delay_ms: 0,
            ..GroupConfig::default()
        },
        7,
    )
    .with_max_groups(2);
    // Group "g" by JoinGroup, "s" by a commit.
    let (a, _b, gen) = two_member_group_no_delay(&mut h);
    assert_eq!(h.groups.admit_group("s"), Ok(()));
    h.groups.apply_offset("s", "t", 0, Some(offset(1)), 0);
    assert_eq!(h.groups.len(), 2);
    // A third group, by either way, is refused and not created.
    let r = join_group(&mut h, "x").unwrap();
    assert_eq!(r.error_code, ErrorCode::PolicyViolation.code());
    assert_eq!(h.groups.admit_group("x"), Err(ErrorCode::PolicyViolation));
    assert_eq!(h.groups.state_of("x"), None);
    // Reading about a group creates nothing either.
    assert_eq!(h.groups.describe("x").group_state, "Dead");
    assert_eq!(h.groups.len(), 2);
    // Existing groups keep working.
    assert_eq!(h.groups.admit_group("s"), Ok(()));
    assert_eq!(h.heartbeat(&a, gen), ErrorCode::None);
    let (w, out) = h.join(Harness::join_req(&a, None, b"m2"));
    assert!(join_of(&out, w).is_none(), "a rebalance, not a refusal");
    // When "s" loses its last offset it goes, and makes room.
    h.groups.apply_offset("s", "t", 0, None, -1);
    assert_eq!(h.groups.len(), 1);
    let r = join_group(&mut h, "x").unwrap();
    assert_eq!(r.error_code, ErrorCode::MemberIdRequired.code());
}

#[test]
fn groups_left_with_nothing_are_removed() {
    let mut h = Harness::new(0);
    // A join that fails after creating its group leaves nothing behind.
    let mut req = Harness::join_req("", None, b"m");
    req.protocol_type = String::new();
    let (w, out) = h.join(req);
    assert_eq!(
        join_of(&out, w).unwrap().error_code,
        ErrorCode::InconsistentGroupProtocol.code()
    );
    assert!(h.groups.is_empty());
    // A pending member that never comes back: the group goes when it lapses.
    let r = join_group(&mut h, "g").unwrap();
    assert_eq!(r.error_code, ErrorCode::MemberIdRequired.code());
    let _ = h.advance(SESSION as i64 + 1);
    assert!(h.groups.is_empty());
    assert!(
        h.groups.take_removed().is_empty(),
        "it never had a generation"
    );
    // A group with offsets stays when its members leave.
    h.groups.apply_offset("g", "t", 0, Some(offset(3)), 0);
    let (a, b, _) = two_member_group_no_delay(&mut h);
    let leaving = [a, b].map(|member_id| LeavingMember {
        member_id,
        group_instance_id: None,
    });
    let (res, _) = h.groups.leave("g", &leaving, h.now);
    assert_eq!(res, Ok(vec![ErrorCode::None; 2]));
    assert_eq!(h.state().0, GroupState::Empty);
    // A replayed generation record alone brings nothing back.
    let record = GroupSnapshot {
        protocol_type: "consumer".into(),
        generation_id: 4,
        ..Default::default()
    };
    h.groups.restore("old", Some(record), h.now);
    h.groups.remove_unused();
    assert_eq!(h.groups.state_of("old"), None);
    assert_eq!(h.groups.take_removed(), vec!["old".to_string()]);
}
