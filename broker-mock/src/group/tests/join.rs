//! JoinGroup: first joins, validation, protocol choice, static members.

use super::*;

#[test]
fn two_members_join_and_sync() {
    let mut h = Harness::new(100);
    let (a, b, gen) = two_member_group(&mut h);
    assert_eq!(h.heartbeat(&a, gen), ErrorCode::None);
    assert_eq!(h.heartbeat(&b, gen), ErrorCode::None);
    assert_eq!(h.heartbeat(&b, gen + 1), ErrorCode::IllegalGeneration);
    assert_eq!(h.heartbeat("nobody", gen), ErrorCode::UnknownMemberId);
    // A stable follower rejoining unchanged gets the current generation back.
    let (w, out) = h.join(Harness::join_req(&b, None, b"m"));
    let r = join_of(&out, w).unwrap();
    assert_eq!((r.error_code, r.generation_id), (0, gen));
    assert_eq!(h.state().0, GroupState::Stable);
    // Syncing again in a stable group returns the same assignment.
    let (w, out) = h.sync(&b, gen, vec![]);
    assert_eq!(
        sync_of(&out, w).unwrap().assignment,
        Bytes::from_static(b"B")
    );
}

fn static_group(h: &mut Harness) -> (String, String, i32) {
    let (wa, out) = h.join(Harness::join_req("", Some("ia"), b"m"));
    let ra = join_of(&out, wa)
        .expect("static members get no MEMBER_ID_REQUIRED")
        .clone();
    assert_eq!(ra.error_code, 0);
    let a = ra.member_id.clone();
    let (_, _) = h.sync(
        &a,
        ra.generation_id,
        vec![(a.clone(), Bytes::from_static(b"A"))],
    );
    let (wb, _) = h.join(Harness::join_req("", Some("ib"), b"m"));
    let (wa, out) = h.join(Harness::join_req(&a, Some("ia"), b"m"));
    let b = join_of(&out, wb).unwrap().member_id.clone();
    let gen = join_of(&out, wa).unwrap().generation_id;
    let (wsb, _) = h.sync(&b, gen, vec![]);
    let (_, out) = h.sync(
        &a,
        gen,
        vec![
            (a.clone(), Bytes::from_static(b"A")),
            (b.clone(), Bytes::from_static(b"B")),
        ],
    );
    assert_eq!(
        sync_of(&out, wsb).unwrap().assignment,
        Bytes::from_static(b"B")
    );
    (a, b, gen)
}

#[test]
fn static_member_restart_needs_no_rebalance() {
    let mut h = Harness::new(0);
    let (a, b, gen) = static_group(&mut h);
    // b restarts: same instance id, empty member id, same protocols.
    let (w, out) = h.join(Harness::join_req("", Some("ib"), b"m"));
    let r = join_of(&out, w).unwrap().clone();
    assert_eq!(r.error_code, 0);
    assert_eq!(r.generation_id, gen);
    assert_ne!(r.member_id, b);
    assert_eq!(r.leader, a);
    assert_eq!(h.state(), (GroupState::Stable, gen));
    // The new id syncs to its old assignment; the old id is fenced.
    let (w, out) = h.sync(&r.member_id, gen, vec![]);
    assert_eq!(
        sync_of(&out, w).unwrap().assignment,
        Bytes::from_static(b"B")
    );
    assert_eq!(
        h.groups.heartbeat("g", gen, &b, Some("ib"), h.now),
        ErrorCode::FencedInstanceId
    );
    assert_eq!(
        h.groups.validate_commit("g", gen, &b, Some("ib"), h.now),
        Err(ErrorCode::FencedInstanceId)
    );
    assert_eq!(
        h.groups
            .heartbeat("g", gen, &r.member_id, Some("ib"), h.now),
        ErrorCode::None
    );
}

#[test]
fn static_leader_restart_is_told_to_skip_assignment_in_v9() {
    let mut h = Harness::new(0);
    let (a, _b, gen) = static_group(&mut h);
    let (w, out) = h.join(Harness::join_req("", Some("ia"), b"m"));
    let r = join_of(&out, w).unwrap();
    assert_eq!(r.generation_id, gen);
    assert!(r.skip_assignment);
    assert_eq!(r.leader, r.member_id);
    assert_eq!(r.members.len(), 2);
    assert_ne!(r.member_id, a);
    // Before v9 the old leader id comes back, so the member does not assign.
    let mut req = Harness::join_req("", Some("ia"), b"m");
    req.version = 5;
    let previous = r.member_id.clone();
    let (w, out) = h.join(req);
    let r = join_of(&out, w).unwrap();
    assert!(!r.skip_assignment);
    assert_eq!(r.leader, previous);
    assert!(r.members.is_empty());
}

#[test]
fn static_member_with_new_subscription_triggers_rebalance() {
    let mut h = Harness::new(0);
    let (a, _b, gen) = static_group(&mut h);
    // Another protocol that the group cannot select changes nothing.
    let mut req = Harness::join_req("", Some("ib"), b"m");
    req.protocols = vec![
        ("roundrobin".into(), Bytes::from_static(b"m")),
        ("range".into(), Bytes::from_static(b"m")),
    ];
    let (w, out) = h.join(req);
    assert_eq!(join_of(&out, w).unwrap().generation_id, gen);
    assert_eq!(h.state().0, GroupState::Stable);
    // A new subscription (metadata of the selected protocol) rebalances.
    let (w, out) = h.join(Harness::join_req("", Some("ib"), b"new topics"));
    assert!(join_of(&out, w).is_none());
    assert_eq!(h.state().0, GroupState::PreparingRebalance);
    assert_eq!(h.heartbeat(&a, gen), ErrorCode::RebalanceInProgress);
}

#[test]
fn static_member_that_does_not_rejoin_stays_until_its_session_ends() {
    let mut h = Harness::new(0);
    let (a, b, gen) = static_group(&mut h);
    let (wa, out) = h.join(Harness::join_req(&a, Some("ia"), b"changed"));
    assert!(out.is_empty());
    h.now += 5_000;
    assert_eq!(
        h.groups.heartbeat("g", gen, &b, Some("ib"), h.now),
        ErrorCode::RebalanceInProgress
    );
    let out = h.advance(REBALANCE as i64);
    // b's session (refreshed 5 s in) ended before the rebalance timeout.
    let r = join_of(&out, wa).unwrap();
    assert_eq!(r.members.len(), 1);
    assert_eq!(r.generation_id, gen + 1);
}

#[test]
fn join_validation() {
    let mut h = Harness::new(0);
    let mut req = Harness::join_req("", None, b"m");
    req.session_timeout_ms = 1;
    let (w, out) = h.join(req);
    assert_eq!(
        join_of(&out, w).unwrap().error_code,
        ErrorCode::InvalidSessionTimeout.code()
    );
    let (w, out) = h.join(Harness::join_req("someone", None, b"m"));
    assert_eq!(
        join_of(&out, w).unwrap().error_code,
        ErrorCode::UnknownMemberId.code()
    );
    let mut req = Harness::join_req("", None, b"m");
    req.group_id.clear();
    let (w, out) = h.join(req);
    assert_eq!(
        join_of(&out, w).unwrap().error_code,
        ErrorCode::InvalidGroupId.code()
    );
    // Before v4 there is no MEMBER_ID_REQUIRED round trip.
    let mut req = Harness::join_req("", None, b"m");
    req.version = 3;
    let (w, out) = h.join(req);
    let first = join_of(&out, w).unwrap().clone();
    assert_eq!((first.error_code, first.generation_id), (0, 1));
    // A member without a common protocol is refused.
    let mut req = Harness::join_req("", None, b"m");
    req.protocols = vec![("sticky".into(), Bytes::new())];
    let (w, out) = h.join(req);
    assert_eq!(
        join_of(&out, w).unwrap().error_code,
        ErrorCode::InconsistentGroupProtocol.code()
    );
    let mut req = Harness::join_req("", None, b"m");
    req.protocol_type = "connect".into();
    let (w, out) = h.join(req);
    assert_eq!(
        join_of(&out, w).unwrap().error_code,
        ErrorCode::InconsistentGroupProtocol.code()
    );
}

#[test]
fn protocol_selection_follows_votes() {
    let mut h = Harness::new(0);
    let mut a = Harness::join_req("", None, b"m");
    a.version = 3;
    a.protocols = vec![
        ("range".into(), Bytes::from_static(b"ra")),
        ("roundrobin".into(), Bytes::from_static(b"rra")),
    ];
    let (wa, out) = h.join(a.clone());
    let ida = join_of(&out, wa).unwrap().member_id.clone();
    let mut b = a.clone();
    b.protocols = vec![
        ("roundrobin".into(), Bytes::from_static(b"rrb")),
        ("range".into(), Bytes::from_static(b"rb")),
    ];
    let mut c = b.clone();
    c.protocols = vec![("roundrobin".into(), Bytes::from_static(b"rrc"))];
    let (_, _) = h.join(b);
    let (_, _) = h.join(c);
    a.member_id = ida;
    let (wa, out) = h.join(a);
    let r = join_of(&out, wa).unwrap();
    assert_eq!(r.protocol_name.as_deref(), Some("roundrobin"));
    let metas: Vec<&[u8]> = r.members.iter().map(|m| &m.metadata[..]).collect();
    assert_eq!(metas, vec![&b"rra"[..], b"rrb", b"rrc"]);
}

#[test]
fn second_join_while_parked_answers_the_first() {
    let mut h = Harness::new(0);
    let (a, _b, _) = two_member_group_no_delay(&mut h);
    let (w1, out) = h.join(Harness::join_req(&a, None, b"changed"));
    assert!(out.is_empty());
    let (_w2, out) = h.join(Harness::join_req(&a, None, b"changed"));
    assert_eq!(
        join_of(&out, w1).unwrap().error_code,
        ErrorCode::RebalanceInProgress.code()
    );
}

#[test]
fn pending_members_count_against_the_group_size() {
    let mut h = Harness::new(0);
    h.groups = Groups::new(
        GroupConfig {
            initial_rebalance_delay_ms: 0,
            max_group_size: 3,
            ..GroupConfig::default()
        },
        7,
    );
    let mut pending = Vec::new();
    for _ in 0..3 {
        let r = join_group(&mut h, "g").unwrap();
        assert_eq!(r.error_code, ErrorCode::MemberIdRequired.code());
        pending.push(r.member_id);
    }
    // A flood of first joins stops at the size limit.
    for _ in 0..10 {
        let r = join_group(&mut h, "g").unwrap();
        assert_eq!(r.error_code, ErrorCode::GroupMaxSizeReached.code());
        assert!(r.member_id.is_empty());
    }
    // The pending members themselves may still join; a v3 join (no pending step)
    // is refused too.
    let (w, out) = h.join(Harness::join_req(&pending[0], None, b"m"));
    assert!(join_of(&out, w).is_none(), "parked until the others join");
    let mut v3 = Harness::join_req("", None, b"m");
    v3.version = 3;
    let (w, out) = h.join(v3);
    assert_eq!(
        join_of(&out, w).unwrap().error_code,
        ErrorCode::GroupMaxSizeReached.code()
    );
    // When the other pending ids lapse, their places are free again.
    let _ = h.advance(SESSION as i64 + 1);
    let r = join_group(&mut h, "g").unwrap();
    assert_eq!(r.error_code, ErrorCode::MemberIdRequired.code());
}
