//! The classic group state machine driven with explicit time.

use baton_protocol::messages::{JoinGroupResponse, SyncGroupResponse};
use baton_protocol::ErrorCode;
use bytes::Bytes;

use super::machine::*;

const SESSION: i32 = 10_000;
const REBALANCE: i32 = 30_000;

struct Harness {
    groups: Groups,
    now: i64,
    next: Waiter,
}

impl Harness {
    fn new(initial_delay: i64) -> Self {
        Harness {
            groups: Groups::new(
                GroupConfig {
                    initial_rebalance_delay_ms: initial_delay,
                    ..GroupConfig::default()
                },
                7,
            ),
            now: 1_000_000,
            next: 0,
        }
    }

    fn waiter(&mut self) -> Waiter {
        self.next += 1;
        self.next
    }

    fn join_req(member: &str, instance: Option<&str>, meta: &'static [u8]) -> JoinRequest {
        JoinRequest {
            group_id: "g".into(),
            member_id: member.into(),
            group_instance_id: instance.map(str::to_owned),
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), Bytes::from_static(meta))],
            session_timeout_ms: SESSION,
            rebalance_timeout_ms: REBALANCE,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            version: 9,
        }
    }

    /// Sends a join; returns the waiter and whatever got delivered.
    fn join(&mut self, req: JoinRequest) -> (Waiter, Vec<Delivery>) {
        let w = self.waiter();
        let out = self.groups.join(req, w, self.now);
        (w, out)
    }

    /// A dynamic member's first join: MEMBER_ID_REQUIRED, then the join with the id.
    fn join_new(&mut self) -> (String, Waiter, Vec<Delivery>) {
        let (w, out) = self.join(Self::join_req("", None, b"m"));
        let r = join_of(&out, w).expect("MEMBER_ID_REQUIRED answered at once");
        assert_eq!(r.error_code, ErrorCode::MemberIdRequired.code());
        let id = r.member_id.clone();
        assert!(!id.is_empty());
        let (w, out) = self.join(Self::join_req(&id, None, b"m"));
        (id, w, out)
    }

    fn sync(
        &mut self,
        member: &str,
        generation: i32,
        assignments: Vec<(String, Bytes)>,
    ) -> (Waiter, Vec<Delivery>) {
        let w = self.waiter();
        let out = self.groups.sync(
            SyncRequest {
                group_id: "g".into(),
                generation_id: generation,
                member_id: member.into(),
                assignments,
                ..Default::default()
            },
            w,
            self.now,
        );
        (w, out)
    }

    fn advance(&mut self, ms: i64) -> Vec<Delivery> {
        self.now += ms;
        self.groups.tick(self.now)
    }

    fn state(&self) -> (GroupState, i32) {
        self.groups.state_of("g").expect("group exists")
    }

    fn heartbeat(&mut self, member: &str, generation: i32) -> ErrorCode {
        self.groups
            .heartbeat("g", generation, member, None, self.now)
    }
}

fn join_of(out: &[Delivery], w: Waiter) -> Option<&JoinGroupResponse> {
    out.iter().find_map(|d| match d {
        Delivery::Join(x, r) if *x == w => Some(r),
        _ => None,
    })
}

fn sync_of(out: &[Delivery], w: Waiter) -> Option<&SyncGroupResponse> {
    out.iter().find_map(|d| match d {
        Delivery::Sync(x, r) if *x == w => Some(r),
        _ => None,
    })
}

/// Two members form a group: one generation, one leader who sees both, assignments
/// handed out by SyncGroup.
fn two_member_group(h: &mut Harness) -> (String, String, i32) {
    let (a, wa, out) = h.join_new();
    assert!(out.is_empty(), "first join waits for the initial delay");
    let (b, wb, out) = h.join_new();
    assert!(out.is_empty());
    assert_eq!(h.state().0, GroupState::PreparingRebalance);
    let out = h.advance(100);
    // A member joined during the delay: it is extended once.
    assert!(out.is_empty(), "{out:?}");
    let out = h.advance(100);
    let ra = join_of(&out, wa).expect("a answered").clone();
    let rb = join_of(&out, wb).expect("b answered").clone();
    assert_eq!(ra.error_code, 0);
    assert_eq!(ra.generation_id, 1);
    assert_eq!(rb.generation_id, 1);
    assert_eq!(ra.leader, a);
    assert_eq!(rb.leader, a);
    assert_eq!(ra.members.len(), 2);
    assert!(rb.members.is_empty());
    assert_eq!(ra.protocol_name.as_deref(), Some("range"));
    assert_eq!(h.state(), (GroupState::CompletingRebalance, 1));

    let (wsb, out) = h.sync(&b, 1, vec![]);
    assert!(out.is_empty(), "follower waits for the leader");
    let (wsa, out) = h.sync(
        &a,
        1,
        vec![
            (a.clone(), Bytes::from_static(b"A")),
            (b.clone(), Bytes::from_static(b"B")),
        ],
    );
    assert_eq!(
        sync_of(&out, wsa).unwrap().assignment,
        Bytes::from_static(b"A")
    );
    assert_eq!(
        sync_of(&out, wsb).unwrap().assignment,
        Bytes::from_static(b"B")
    );
    assert_eq!(h.state(), (GroupState::Stable, 1));
    (a, b, 1)
}

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

fn two_member_group_no_delay(h: &mut Harness) -> (String, String, i32) {
    let (a, wa, out) = h.join_new();
    assert_eq!(
        join_of(&out, wa).unwrap().generation_id,
        1,
        "no delay: alone at once"
    );
    let (wsa, out) = h.sync(&a, 1, vec![(a.clone(), Bytes::from_static(b"A"))]);
    assert_eq!(sync_of(&out, wsa).unwrap().error_code, 0);
    let (b, wb, out) = h.join_new();
    assert!(join_of(&out, wb).is_none());
    assert_eq!(h.heartbeat(&a, 1), ErrorCode::RebalanceInProgress);
    let (wa, out) = h.join(Harness::join_req(&a, None, b"m"));
    assert_eq!(join_of(&out, wa).unwrap().generation_id, 2);
    assert_eq!(join_of(&out, wb).unwrap().leader, a);
    let (wsb, _) = h.sync(&b, 2, vec![]);
    let (_, out) = h.sync(&a, 2, vec![(b.clone(), Bytes::from_static(b"B"))]);
    assert_eq!(
        sync_of(&out, wsb).unwrap().assignment,
        Bytes::from_static(b"B")
    );
    assert_eq!(h.state(), (GroupState::Stable, 2));
    (a, b, 2)
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
fn offset_commit_validation() {
    let mut h = Harness::new(0);
    // No group: a simple commit (generation -1) is fine; a generation is not.
    assert_eq!(h.groups.validate_commit("s", -1, "", None, h.now), Ok(()));
    assert_eq!(
        h.groups.validate_commit("s", 3, "m", None, h.now),
        Err(ErrorCode::IllegalGeneration)
    );
    assert_eq!(
        h.groups.validate_commit("", -1, "", None, h.now),
        Err(ErrorCode::InvalidGroupId)
    );
    let o = CommittedOffset {
        offset: 5,
        leader_epoch: 1,
        metadata: String::new(),
        commit_timestamp: h.now,
    };
    h.groups.apply_offset("s", "t", 0, Some(o.clone()));
    assert_eq!(h.groups.state_of("s"), Some((GroupState::Empty, 0)));
    assert_eq!(h.groups.offset("s", "t", 0), Some(&o));
    assert_eq!(h.groups.validate_commit("s", -1, "", None, h.now), Ok(()));

    let (a, _b, gen) = two_member_group_no_delay(&mut h);
    assert_eq!(h.groups.validate_commit("g", gen, &a, None, h.now), Ok(()));
    assert_eq!(
        h.groups.validate_commit("g", gen - 1, &a, None, h.now),
        Err(ErrorCode::IllegalGeneration)
    );
    assert_eq!(
        h.groups.validate_commit("g", gen, "x", None, h.now),
        Err(ErrorCode::UnknownMemberId)
    );
    assert_eq!(
        h.groups.validate_commit("g", -1, "", None, h.now),
        Err(ErrorCode::UnknownMemberId),
        "simple commits are refused while the group has members"
    );
    // A commit counts as a heartbeat.
    h.now += SESSION as i64 - 1;
    assert_eq!(h.groups.validate_commit("g", gen, &a, None, h.now), Ok(()));
    h.now += 2;
    let _ = h.groups.tick(h.now);
    assert_eq!(
        h.heartbeat(&a, gen),
        ErrorCode::RebalanceInProgress,
        "b expired, a did not"
    );
}

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
    );
    h.groups.apply_offset("f", "t", 0, None);
    assert_eq!(h.groups.state_of("f"), None);
}

#[test]
fn generations_are_reported_once_and_replayed() {
    let mut h = Harness::new(0);
    let (_a, _b, gen) = two_member_group_no_delay(&mut h);
    let news = h.groups.take_new_generations();
    assert_eq!(news.len(), 1);
    assert_eq!(news[0].generation_id, gen);
    assert_eq!(news[0].protocol_name.as_deref(), Some("range"));
    assert!(h.groups.take_new_generations().is_empty());

    let mut fresh = Groups::new(
        GroupConfig {
            initial_rebalance_delay_ms: 0,
            ..GroupConfig::default()
        },
        1,
    );
    fresh.apply_generation("g", Some((5, "consumer".into())));
    fresh.apply_generation("g", Some((4, "consumer".into())));
    assert_eq!(fresh.state_of("g"), Some((GroupState::Empty, 5)));
    assert!(fresh.take_new_generations().is_empty(), "replayed, not new");
    let mut req = Harness::join_req("", None, b"m");
    req.version = 3;
    let out = fresh.join(req, 1, 0);
    assert!(matches!(&out[0], Delivery::Join(1, r) if r.generation_id == 6));
    fresh.apply_generation("x", Some((1, String::new())));
    fresh.apply_generation("x", None);
    assert_eq!(fresh.state_of("x"), None);
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

fn offset(n: i64) -> CommittedOffset {
    CommittedOffset {
        offset: n,
        leader_epoch: -1,
        metadata: String::new(),
        commit_timestamp: 0,
    }
}

fn join_group(h: &mut Harness, group: &str) -> Option<JoinGroupResponse> {
    let mut req = Harness::join_req("", None, b"m");
    req.group_id = group.into();
    let (w, out) = h.join(req);
    join_of(&out, w).cloned()
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
    h.groups.apply_offset("s", "t", 0, Some(offset(1)));
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
    h.groups.apply_offset("s", "t", 0, None);
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
    h.groups.apply_offset("g", "t", 0, Some(offset(3)));
    let (a, b, _) = two_member_group_no_delay(&mut h);
    let leaving = [a, b].map(|member_id| LeavingMember {
        member_id,
        group_instance_id: None,
    });
    let (res, _) = h.groups.leave("g", &leaving, h.now);
    assert_eq!(res, Ok(vec![ErrorCode::None; 2]));
    assert_eq!(h.state().0, GroupState::Empty);
    // A replayed generation record alone brings nothing back.
    h.groups
        .apply_generation("old", Some((4, "consumer".into())));
    h.groups.remove_unused();
    assert_eq!(h.groups.state_of("old"), None);
    assert_eq!(h.groups.take_removed(), vec!["old".to_string()]);
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
