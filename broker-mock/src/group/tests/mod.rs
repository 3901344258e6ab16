//! The classic group state machine driven with explicit time: the harness and
//! helpers shared by the tests, which are split like `machine/`.

use baton_protocol::messages::{JoinGroupResponse, SyncGroupResponse};
use baton_protocol::ErrorCode;
use bytes::Bytes;

use super::machine::*;

mod group;
mod join;
mod member_requests;
mod offset_delete;
mod offsets;
mod rebalance;
mod registry;
mod txn_offsets;

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
