//! Rebalances and timers: rejoining, rebalance and session timeouts, pending member ids.

use super::*;

#[test]
fn new_member_triggers_rebalance_and_old_members_rejoin() {
    let mut h = Harness::new(100);
    let (a, b, gen) = two_member_group(&mut h);
    let (c, wc, out) = h.join_new();
    assert!(out.is_empty());
    assert_eq!(h.state().0, GroupState::PreparingRebalance);
    assert_eq!(h.heartbeat(&a, gen), ErrorCode::RebalanceInProgress);
    // Commits from current members are allowed while preparing.
    assert_eq!(h.groups.validate_commit("g", gen, &a, None, h.now), Ok(()));
    let (wa, out) = h.join(Harness::join_req(&a, None, b"m"));
    assert!(out.is_empty());
    let (wb, out) = h.join(Harness::join_req(&b, None, b"m"));
    // Everyone rejoined: no waiting for the timeout.
    assert_eq!(join_of(&out, wa).unwrap().generation_id, gen + 1);
    assert_eq!(join_of(&out, wb).unwrap().generation_id, gen + 1);
    let rc = join_of(&out, wc).unwrap();
    assert_eq!(rc.leader, a, "the leader is kept when it rejoins");
    assert_eq!(join_of(&out, wa).unwrap().members.len(), 3);
    assert_eq!(h.state(), (GroupState::CompletingRebalance, gen + 1));
    // Commits between join and sync are refused.
    assert_eq!(
        h.groups.validate_commit("g", gen + 1, &c, None, h.now),
        Err(ErrorCode::RebalanceInProgress)
    );
    // An old-generation sync is illegal.
    let (w, out) = h.sync(&b, gen, vec![]);
    assert_eq!(
        sync_of(&out, w).unwrap().error_code,
        ErrorCode::IllegalGeneration.code()
    );
}

#[test]
fn members_that_do_not_rejoin_are_dropped_at_the_rebalance_timeout() {
    let mut h = Harness::new(0);
    let (a, b, gen) = two_member_group_no_delay(&mut h);
    // b leaves the picture: a rejoins with new metadata, forcing a rebalance.
    let (wa, out) = h.join(Harness::join_req(&a, None, b"changed"));
    assert!(out.is_empty());
    // b keeps heartbeating but never rejoins.
    h.now += 10_000;
    assert_eq!(h.heartbeat(&b, gen), ErrorCode::RebalanceInProgress);
    let out = h.advance(REBALANCE as i64 - 10_000);
    let r = join_of(&out, wa).unwrap();
    assert_eq!(r.generation_id, gen + 1);
    assert_eq!(r.members.len(), 1);
    assert_eq!(h.heartbeat(&b, gen + 1), ErrorCode::UnknownMemberId);
}

#[test]
fn session_timeout_expires_a_silent_member() {
    let mut h = Harness::new(0);
    let (a, b, gen) = two_member_group_no_delay(&mut h);
    h.now += SESSION as i64 / 2;
    assert_eq!(h.heartbeat(&a, gen), ErrorCode::None);
    let out = h.advance(SESSION as i64 / 2 + 1);
    assert!(out.is_empty());
    // b expired: the group prepares a rebalance; a learns it from its heartbeat.
    assert_eq!(h.state().0, GroupState::PreparingRebalance);
    assert_eq!(h.heartbeat(&b, gen), ErrorCode::UnknownMemberId);
    assert_eq!(h.heartbeat(&a, gen), ErrorCode::RebalanceInProgress);
    let (wa, out) = h.join(Harness::join_req(&a, None, b"m"));
    let r = join_of(&out, wa).unwrap();
    assert_eq!((r.generation_id, r.members.len()), (gen + 1, 1));
    // Then a goes silent too: the group ends up empty.
    let (_, out) = h.sync(&a, gen + 1, vec![]);
    assert_eq!(out.len(), 1);
    let _ = h.advance(SESSION as i64 + 1);
    // Empty without offsets: removed, and its generation record is to be tombstoned.
    assert_eq!(h.groups.state_of("g"), None);
    assert_eq!(h.groups.take_removed(), vec!["g".to_string()]);
    assert_eq!(h.groups.next_deadline(), None);
}

#[test]
fn pending_member_id_lapses_and_unblocks_the_rebalance() {
    let mut h = Harness::new(0);
    let (a, _b, gen) = two_member_group_no_delay(&mut h);
    // A third member gets its id but never comes back.
    let (w, out) = h.join(Harness::join_req("", None, b"m"));
    let pending = join_of(&out, w).unwrap().member_id.clone();
    // Leave of a pending id is fine too, but here it just lapses.
    let (wa, out) = h.join(Harness::join_req(&a, None, b"changed"));
    assert!(out.is_empty());
    assert_eq!(
        h.groups.heartbeat("g", gen, &pending, None, h.now),
        ErrorCode::UnknownMemberId
    );
    let out = h.advance(SESSION as i64 + 1);
    // The pending id lapsed; b (no rejoin, session expired too) is gone.
    let r = join_of(&out, wa).expect("answered once nothing is outstanding");
    assert_eq!(r.generation_id, gen + 1);
}

#[test]
fn rebalance_during_completing_fails_parked_syncs() {
    let mut h = Harness::new(0);
    let (a, b, gen) = two_member_group_no_delay(&mut h);
    let (wa, _) = h.join(Harness::join_req(&a, None, b"changed"));
    let (wb, out) = h.join(Harness::join_req(&b, None, b"m"));
    assert_eq!(join_of(&out, wa).unwrap().generation_id, gen + 1);
    assert!(join_of(&out, wb).is_some());
    let (ws, out) = h.sync(&b, gen + 1, vec![]);
    assert!(out.is_empty());
    // A third member arrives before the leader syncs: b's parked sync must rejoin.
    let (_, _, out) = h.join_new();
    assert_eq!(
        sync_of(&out, ws).unwrap().error_code,
        ErrorCode::RebalanceInProgress.code()
    );
    assert_eq!(h.state().0, GroupState::PreparingRebalance);
    let (w, out) = h.sync(&a, gen + 1, vec![]);
    assert_eq!(
        sync_of(&out, w).unwrap().error_code,
        ErrorCode::RebalanceInProgress.code()
    );
}
