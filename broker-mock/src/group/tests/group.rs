//! Group records: written per generation and on assignment, restored on replay.

use super::*;

/// A group record of generation `generation` without members.
fn empty_record(generation: i32, protocol_type: &str) -> GroupSnapshot {
    GroupSnapshot {
        protocol_type: protocol_type.into(),
        generation_id: generation,
        ..Default::default()
    }
}

fn fresh() -> Groups {
    Groups::new(
        GroupConfig {
            initial_rebalance_delay_ms: 0,
            ..GroupConfig::default()
        },
        1,
    )
}

/// The record of a stable two-member group, taken from a live one.
fn stable_record() -> (String, String, GroupSnapshot) {
    let mut h = Harness::new(100);
    let (a, b, _) = two_member_group(&mut h);
    let mut records = h.groups.take_group_records();
    assert_eq!(records.len(), 1);
    (a, b, records.remove(0).snapshot)
}

#[test]
fn generations_are_reported_once_and_replayed() {
    let mut h = Harness::new(0);
    let (_a, _b, gen) = two_member_group_no_delay(&mut h);
    let news = h.groups.take_group_records();
    assert_eq!(news.len(), 1);
    assert!(news[0].new_generation);
    assert_eq!(news[0].snapshot.generation_id, gen);
    assert_eq!(news[0].snapshot.protocol_name.as_deref(), Some("range"));
    assert!(h.groups.take_group_records().is_empty());

    let mut fresh = fresh();
    fresh.restore("g", Some(empty_record(5, "consumer")), 0);
    fresh.restore("g", Some(empty_record(4, "consumer")), 0);
    assert_eq!(fresh.state_of("g"), Some((GroupState::Empty, 5)));
    assert!(fresh.take_group_records().is_empty(), "replayed, not new");
    let mut req = Harness::join_req("", None, b"m");
    req.version = 3;
    let out = fresh.join(req, 1, 0);
    assert!(matches!(&out[0], Delivery::Join(1, r) if r.generation_id == 6));
    fresh.restore("x", Some(empty_record(1, "")), 0);
    fresh.restore("x", None, 0);
    assert_eq!(fresh.state_of("x"), None);
}

#[test]
fn the_record_carries_members_and_the_leaders_assignments() {
    let mut h = Harness::new(0);
    let (a, wa, out) = h.join_new();
    assert_eq!(join_of(&out, wa).unwrap().generation_id, 1);
    // The join completion: members, no assignment yet.
    let r = h.groups.take_group_records();
    assert_eq!(r.len(), 1);
    assert!(r[0].new_generation);
    let s = &r[0].snapshot;
    assert_eq!(
        (s.generation_id, s.leader.as_deref()),
        (1, Some(a.as_str()))
    );
    assert_eq!(s.protocol_type, "consumer");
    assert_eq!(s.members.len(), 1);
    let m = &s.members[0];
    assert_eq!(m.member_id, a);
    assert_eq!(m.client_id, "c");
    assert_eq!(m.client_host, "/127.0.0.1");
    assert_eq!(
        (m.session_timeout_ms, m.rebalance_timeout_ms),
        (SESSION, REBALANCE)
    );
    assert_eq!(m.subscription, Bytes::from_static(b"m"));
    assert!(m.assignment.is_empty());
    // The leader's SyncGroup: the same generation again, with the assignment.
    h.sync(&a, 1, vec![(a.clone(), Bytes::from_static(b"A"))]);
    let r = h.groups.take_group_records();
    assert_eq!(r.len(), 1);
    assert!(!r[0].new_generation, "an update, not a rebalance");
    assert_eq!(r[0].snapshot.generation_id, 1);
    assert_eq!(
        r[0].snapshot.members[0].assignment,
        Bytes::from_static(b"A")
    );
    // A heartbeat or a repeated sync in a stable group writes nothing.
    assert_eq!(h.heartbeat(&a, 1), ErrorCode::None);
    h.sync(&a, 1, vec![]);
    assert!(h.groups.take_group_records().is_empty());
}

#[test]
fn a_new_generations_record_carries_none_of_the_old_assignments() {
    let mut h = Harness::new(0);
    let (a, b, _) = two_member_group_no_delay(&mut h);
    h.groups.take_group_records();
    // b rejoins with another subscription: generation 3 starts.
    let (wb, out) = h.join(Harness::join_req(&b, None, b"m2"));
    assert!(join_of(&out, wb).is_none());
    let (wa, out) = h.join(Harness::join_req(&a, None, b"m"));
    assert_eq!(join_of(&out, wa).unwrap().generation_id, 3);
    let r = h.groups.take_group_records();
    assert_eq!(r.len(), 1);
    assert!(r[0].new_generation);
    assert_eq!(r[0].snapshot.generation_id, 3);
    assert!(
        r[0].snapshot
            .members
            .iter()
            .all(|m| m.assignment.is_empty()),
        "generation 2's assignments are void in generation 3"
    );
    // Replayed by a new coordinator before the leader's SyncGroup, it is a
    // rebalance, not a stable group handing out generation 2's assignments.
    let mut next = Harness::new(0);
    next.groups
        .restore("g", Some(r[0].snapshot.clone()), next.now);
    next.groups.finish_restore(next.now, |_| true);
    assert_eq!(next.state(), (GroupState::PreparingRebalance, 3));
}

#[test]
fn a_restored_group_is_stable_and_its_members_carry_on() {
    let (a, b, record) = stable_record();
    let mut h = Harness::new(0);
    h.groups.restore("g", Some(record), h.now);
    h.groups.finish_restore(h.now, |_| true);
    assert_eq!(h.state(), (GroupState::Stable, 1));
    assert!(
        h.groups.take_group_records().is_empty(),
        "replayed, not new"
    );
    let d = h.groups.describe("g");
    assert_eq!(d.protocol_data, "range");
    assert_eq!(d.members.len(), 2);
    assert_eq!(d.members[0].member_id, a, "join order kept");
    assert_eq!(d.members[1].member_assignment, Bytes::from_static(b"B"));
    assert_eq!(h.heartbeat(&a, 1), ErrorCode::None);
    assert_eq!(h.heartbeat(&b, 0), ErrorCode::IllegalGeneration);
    let (w, out) = h.sync(&b, 1, vec![]);
    assert_eq!(
        sync_of(&out, w).unwrap().assignment,
        Bytes::from_static(b"B")
    );
    // b goes quiet: its session, started at the replay, runs out; a rejoins
    // into generation 2 alone.
    h.advance(i64::from(SESSION) / 2);
    assert_eq!(h.heartbeat(&a, 1), ErrorCode::None);
    h.advance(i64::from(SESSION) / 2);
    assert_eq!(h.state(), (GroupState::PreparingRebalance, 1));
    assert_eq!(h.heartbeat(&a, 1), ErrorCode::RebalanceInProgress);
    let (w, out) = h.join(Harness::join_req(&a, None, b"m"));
    let r = join_of(&out, w).unwrap();
    assert_eq!((r.generation_id, r.leader.as_str()), (2, a.as_str()));
    assert_eq!(r.members.len(), 1);
}

#[test]
fn a_record_without_assignments_restores_a_rebalance() {
    let (a, b, mut record) = stable_record();
    for m in &mut record.members {
        m.assignment = Bytes::new();
    }
    let mut h = Harness::new(0);
    h.groups.restore("g", Some(record), h.now);
    h.groups.finish_restore(h.now, |g| g != "g");
    assert_eq!(h.state(), (GroupState::Stable, 1), "other partitions only");
    h.groups.finish_restore(h.now, |_| true);
    assert_eq!(h.state(), (GroupState::PreparingRebalance, 1));
    assert_eq!(h.heartbeat(&b, 1), ErrorCode::RebalanceInProgress);
    let (wa, out) = h.join(Harness::join_req(&a, None, b"m"));
    assert!(out.is_empty(), "b is still expected");
    let (wb, out) = h.join(Harness::join_req(&b, None, b"m"));
    assert_eq!(join_of(&out, wa).unwrap().generation_id, 2);
    assert_eq!(join_of(&out, wb).unwrap().generation_id, 2);
}

#[test]
fn bad_records_keep_only_the_generation() {
    let (_a, b, good) = stable_record();
    let mut cases = Vec::new();
    let mut r = good.clone();
    r.leader = Some("nobody".into());
    cases.push(r);
    let mut r = good.clone();
    r.leader = None;
    cases.push(r);
    let mut r = good.clone();
    r.protocol_name = None;
    cases.push(r);
    let mut r = good.clone();
    r.members[1].member_id = r.members[0].member_id.clone();
    cases.push(r);
    let mut r = good.clone();
    r.members[0].group_instance_id = Some("i".into());
    r.members[1].group_instance_id = Some("i".into());
    cases.push(r);
    let mut r = good.clone();
    let extra = r.members[1].clone();
    r.members = vec![extra; GroupConfig::default().max_group_size + 1];
    cases.push(r);
    for (i, r) in cases.into_iter().enumerate() {
        let mut h = Harness::new(0);
        h.groups.apply_offset("g", "t", 0, Some(offset(1)), 0);
        h.groups.restore("g", Some(r), h.now);
        h.groups.finish_restore(h.now, |_| true);
        assert_eq!(h.state(), (GroupState::Empty, 1), "case {i}");
        assert_eq!(h.heartbeat(&b, 1), ErrorCode::UnknownMemberId, "case {i}");
    }
}

#[test]
fn replay_order_decides_membership() {
    let (a, _b, record) = stable_record();
    let mut h = Harness::new(0);
    // A later generation replaces the membership; an older one is ignored.
    h.groups.restore("g", Some(record.clone()), h.now);
    h.groups
        .restore("g", Some(empty_record(2, "consumer")), h.now);
    h.groups.restore("g", Some(record.clone()), h.now);
    h.groups.apply_offset("g", "t", 0, Some(offset(1)), 0);
    assert_eq!(h.state(), (GroupState::Empty, 2));
    // A tombstone clears members; a group with offsets stays, empty.
    let mut h = Harness::new(0);
    h.groups.apply_offset("g", "t", 0, Some(offset(1)), 0);
    h.groups.restore("g", Some(record.clone()), h.now);
    h.groups.restore("g", None, h.now);
    assert_eq!(h.state(), (GroupState::Empty, 1));
    assert_eq!(h.heartbeat(&a, 1), ErrorCode::UnknownMemberId);
    // Without offsets it is gone.
    let mut h = Harness::new(0);
    h.groups.restore("g", Some(record), h.now);
    h.groups.restore("g", None, h.now);
    assert_eq!(h.groups.state_of("g"), None);
}

#[test]
fn a_static_member_taking_a_new_id_rewrites_the_record() {
    let mut h = Harness::new(0);
    let (w, out) = h.join(Harness::join_req("", Some("i"), b"m"));
    let old = join_of(&out, w).unwrap().member_id.clone();
    h.sync(&old, 1, vec![(old.clone(), Bytes::from_static(b"A"))]);
    assert_eq!(h.groups.take_group_records().len(), 1);
    let (w, out) = h.join(Harness::join_req("", Some("i"), b"m"));
    let new = join_of(&out, w).unwrap().member_id.clone();
    assert_ne!(new, old);
    let r = h.groups.take_group_records();
    assert_eq!(r.len(), 1);
    assert!(!r[0].new_generation);
    assert_eq!(r[0].snapshot.members[0].member_id, new);
    assert_eq!(r[0].snapshot.leader.as_deref(), Some(new.as_str()));
    assert_eq!(
        r[0].snapshot.members[0].group_instance_id.as_deref(),
        Some("i")
    );
}
