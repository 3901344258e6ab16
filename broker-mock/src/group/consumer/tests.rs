//! Consumer group machine tests: joining, incremental reconciliation across
//! members, fencing, static members, timers, errors and replay.

use baton_protocol::primitives::Uuid;
use baton_protocol::ErrorCode;

use super::member::{count, Assignment};
use super::registry::{ConsumerGroups, Heartbeat, HeartbeatAnswer};
use super::{Catalog, ConsumerGroupState, MemberState};
use crate::group::machine::GroupConfig;

const T1: Uuid = Uuid([1; 16]);
const T2: Uuid = Uuid([2; 16]);

fn catalog() -> Catalog {
    Catalog::from([
        ("orders".to_string(), (T1, 6)),
        ("payments".to_string(), (T2, 2)),
    ])
}

fn groups() -> ConsumerGroups {
    ConsumerGroups::new(
        GroupConfig {
            consumer_session_timeout_ms: 1000,
            consumer_max_size: 3,
            ..GroupConfig::default()
        },
        7,
    )
}

fn join(member: &str, topics: &[&str]) -> Heartbeat {
    Heartbeat {
        version: 1,
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 500,
        topic_names: Some(topics.iter().map(|t| t.to_string()).collect()),
        owned: Some(Vec::new()),
        ..Default::default()
    }
}

fn beat(member: &str, epoch: i32, owned: Option<&Assignment>) -> Heartbeat {
    Heartbeat {
        version: 1,
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        owned: owned.map(|a| {
            a.iter()
                .map(|(t, ps)| (*t, ps.iter().copied().collect()))
                .collect()
        }),
        ..Default::default()
    }
}

fn ok(a: HeartbeatAnswer) -> HeartbeatAnswer {
    assert_eq!(a.error, ErrorCode::None, "{:?}", a.message);
    a
}

/// A client: heartbeats with what it owns, takes the assignment it is given.
struct Client {
    id: String,
    epoch: i32,
    owned: Assignment,
}

impl Client {
    fn join(g: &mut ConsumerGroups, id: &str, now: i64) -> Client {
        let a = ok(g.heartbeat(&join(id, &["orders"]), &catalog(), Ok(()), now));
        Client {
            id: id.into(),
            epoch: a.member_epoch,
            owned: a.assignment.unwrap(),
        }
    }

    fn beat(&mut self, g: &mut ConsumerGroups, now: i64) -> HeartbeatAnswer {
        let a = ok(g.heartbeat(
            &beat(&self.id, self.epoch, Some(&self.owned)),
            &catalog(),
            Ok(()),
            now,
        ));
        self.epoch = a.member_epoch;
        if let Some(new) = &a.assignment {
            self.owned = new.clone();
        }
        a
    }
}

#[test]
fn first_member_gets_everything() {
    let mut g = groups();
    let c = Client::join(&mut g, "a", 0);
    assert_eq!(c.epoch, 1);
    assert_eq!(count(&c.owned), 6);
    assert_eq!(g.get("g").unwrap().state(), ConsumerGroupState::Stable);
    let recs = g.take_records();
    assert!(!recs.is_empty());
}

#[test]
fn second_member_waits_for_revocation() {
    let mut g = groups();
    let mut a = Client::join(&mut g, "a", 0);
    let mut b = Client::join(&mut g, "b", 1);
    // b is at epoch 2 but gets nothing: a still owns its share.
    assert_eq!(b.epoch, 2);
    assert_eq!(count(&b.owned), 0);
    let m = &g.get("g").unwrap().members["b"];
    assert_eq!(m.current.state, MemberState::UnreleasedPartitions);
    // a is asked to revoke three partitions and stays at epoch 1.
    let ans = a.beat(&mut g, 2);
    assert_eq!(ans.member_epoch, 1);
    assert_eq!(count(&a.owned), 3);
    assert_eq!(g.get("g").unwrap().state(), ConsumerGroupState::Reconciling);
    // a acknowledges (its owned set no longer has them): epoch 2.
    a.beat(&mut g, 3);
    assert_eq!(a.epoch, 2);
    // b now gets the released partitions.
    b.beat(&mut g, 4);
    assert_eq!(count(&b.owned), 3);
    assert_eq!(g.get("g").unwrap().state(), ConsumerGroupState::Stable);
    for (t, ps) in &a.owned {
        assert!(b.owned.get(t).is_none_or(|bs| bs.is_disjoint(ps)));
    }
}

#[test]
fn a_member_that_does_not_revoke_is_fenced_after_its_rebalance_timeout() {
    let mut g = groups();
    let mut a = Client::join(&mut g, "a", 0);
    let _b = Client::join(&mut g, "b", 0);
    // a is told to revoke but keeps reporting everything.
    let keep = a.owned.clone();
    a.beat(&mut g, 10);
    a.owned = keep;
    assert_eq!(g.next_deadline(), Some(510));
    g.tick(509);
    assert!(g.get("g").unwrap().members.contains_key("a"));
    g.tick(510);
    assert!(!g.get("g").unwrap().members.contains_key("a"));
    let ans = g.heartbeat(&beat("a", a.epoch, Some(&a.owned)), &catalog(), Ok(()), 511);
    assert_eq!(ans.error, ErrorCode::UnknownMemberId);
}

#[test]
fn session_timeout_fences_and_bumps_the_epoch() {
    let mut g = groups();
    let mut a = Client::join(&mut g, "a", 0);
    let _b = Client::join(&mut g, "b", 0);
    let epoch = g.get("g").unwrap().epoch;
    a.beat(&mut g, 600);
    g.tick(1000);
    let grp = g.get("g").unwrap();
    assert!(!grp.members.contains_key("b"));
    assert_eq!(grp.epoch, epoch + 1);
    assert_eq!(grp.state(), ConsumerGroupState::Assigning);
    // a gets everything back at the next heartbeat.
    a.beat(&mut g, 1001);
    a.beat(&mut g, 1002);
    assert_eq!(count(&a.owned), 6);
}

#[test]
fn epochs_are_validated() {
    let mut g = groups();
    let a = Client::join(&mut g, "a", 0);
    let too_new = g.heartbeat(&beat("a", a.epoch + 1, None), &catalog(), Ok(()), 1);
    assert_eq!(too_new.error, ErrorCode::FencedMemberEpoch);
    let _b = Client::join(&mut g, "b", 1);
    // a at epoch 1 with its full assignment: fine (it has partitions to revoke).
    let same = g.heartbeat(&beat("a", 1, Some(&a.owned)), &catalog(), Ok(()), 2);
    assert_eq!(same.error, ErrorCode::None);
    let unknown = g.heartbeat(&beat("zz", 1, None), &catalog(), Ok(()), 2);
    assert_eq!(unknown.error, ErrorCode::UnknownMemberId);
    let no_group = g.heartbeat(
        &Heartbeat {
            group_id: "other".into(),
            ..beat("a", 1, None)
        },
        &catalog(),
        Ok(()),
        2,
    );
    assert_eq!(no_group.error, ErrorCode::UnknownMemberId);
}

#[test]
fn previous_epoch_with_a_subset_is_accepted() {
    let mut g = groups();
    let a = Client::join(&mut g, "a", 0);
    // The epoch bump for payments is "lost": a retries with epoch 1.
    let mut sub = join("a", &["orders", "payments"]);
    sub.member_epoch = 1;
    sub.owned = Some(
        a.owned
            .iter()
            .map(|(t, p)| (*t, p.iter().copied().collect()))
            .collect(),
    );
    let ans = ok(g.heartbeat(&sub, &catalog(), Ok(()), 1));
    assert_eq!(ans.member_epoch, 2);
    let retry = g.heartbeat(&beat("a", 1, Some(&a.owned)), &catalog(), Ok(()), 2);
    assert_eq!(retry.error, ErrorCode::None);
    // The previous epoch owning more than the current assignment is fenced.
    let mut more = a.owned.clone();
    more.entry(Uuid([3; 16])).or_default().insert(0);
    let stale = g.heartbeat(&beat("a", 1, Some(&more)), &catalog(), Ok(()), 2);
    assert_eq!(stale.error, ErrorCode::FencedMemberEpoch);
}

#[test]
fn bad_requests() {
    let mut g = groups();
    let cases: Vec<(Heartbeat, ErrorCode)> = vec![
        (
            Heartbeat {
                group_id: String::new(),
                ..join("a", &["orders"])
            },
            ErrorCode::InvalidRequest,
        ),
        (
            Heartbeat {
                member_id: String::new(),
                ..join("a", &["orders"])
            },
            ErrorCode::InvalidRequest,
        ),
        (
            Heartbeat {
                rebalance_timeout_ms: -1,
                ..join("a", &["orders"])
            },
            ErrorCode::InvalidRequest,
        ),
        (
            Heartbeat {
                topic_names: None,
                ..join("a", &["orders"])
            },
            ErrorCode::InvalidRequest,
        ),
        (
            Heartbeat {
                owned: None,
                ..join("a", &["orders"])
            },
            ErrorCode::InvalidRequest,
        ),
        (
            Heartbeat {
                member_epoch: -3,
                ..join("a", &["orders"])
            },
            ErrorCode::InvalidRequest,
        ),
        (
            Heartbeat {
                member_epoch: -2,
                ..join("a", &["orders"])
            },
            ErrorCode::InvalidRequest,
        ),
        (
            Heartbeat {
                instance_id: Some(String::new()),
                ..join("a", &["orders"])
            },
            ErrorCode::InvalidRequest,
        ),
        (
            Heartbeat {
                server_assignor: Some("sticky".into()),
                ..join("a", &["orders"])
            },
            ErrorCode::UnsupportedAssignor,
        ),
        (
            Heartbeat {
                topic_regex: Some("(".into()),
                ..join("a", &["orders"])
            },
            ErrorCode::InvalidRegularExpression,
        ),
    ];
    for (hb, code) in cases {
        assert_eq!(
            g.heartbeat(&hb, &catalog(), Ok(()), 0).error,
            code,
            "{hb:?}"
        );
    }
    assert!(g.get("g").is_none());
    // v0 may join without an id: the coordinator picks one.
    let v0 = ok(g.heartbeat(
        &Heartbeat {
            version: 0,
            member_id: String::new(),
            ..join("", &["orders"])
        },
        &catalog(),
        Ok(()),
        0,
    ));
    assert_eq!(v0.member_id.unwrap().len(), 32);
}

#[test]
fn group_size_limit() {
    let mut g = groups();
    for m in ["a", "b", "c"] {
        Client::join(&mut g, m, 0);
    }
    let d = g.heartbeat(&join("d", &["orders"]), &catalog(), Ok(()), 0);
    assert_eq!(d.error, ErrorCode::GroupMaxSizeReached);
    let refused = g.heartbeat(
        &Heartbeat {
            group_id: "new".into(),
            ..join("a", &["orders"])
        },
        &catalog(),
        Err((ErrorCode::PolicyViolation, "limit".into())),
        0,
    );
    assert_eq!(refused.error, ErrorCode::PolicyViolation);
}

#[test]
fn leaving_hands_partitions_over() {
    let mut g = groups();
    let mut a = Client::join(&mut g, "a", 0);
    let mut b = Client::join(&mut g, "b", 0);
    a.beat(&mut g, 1);
    a.beat(&mut g, 2);
    b.beat(&mut g, 3);
    assert_eq!(count(&b.owned), 3);
    let left = ok(g.heartbeat(&beat("a", -1, None), &catalog(), Ok(()), 4));
    assert_eq!(left.member_epoch, -1);
    b.beat(&mut g, 5);
    assert_eq!(count(&b.owned), 6);
    let again = g.heartbeat(&beat("a", -1, None), &catalog(), Ok(()), 6);
    assert_eq!(again.error, ErrorCode::UnknownMemberId);
}

#[test]
fn static_member_rejoins_with_its_assignment() {
    let mut g = groups();
    let mut j = join("a1", &["orders"]);
    j.instance_id = Some("i".into());
    let first = ok(g.heartbeat(&j, &catalog(), Ok(()), 0));
    let epoch = g.get("g").unwrap().epoch;
    // Another process with the same instance id before the first left.
    let mut j2 = join("a2", &["orders"]);
    j2.instance_id = Some("i".into());
    assert_eq!(
        g.heartbeat(&j2, &catalog(), Ok(()), 1).error,
        ErrorCode::UnreleasedInstanceId
    );
    // Wrong member id for the instance.
    let mut hb = beat("a2", first.member_epoch, None);
    hb.instance_id = Some("i".into());
    assert_eq!(
        g.heartbeat(&hb, &catalog(), Ok(()), 1).error,
        ErrorCode::FencedInstanceId
    );
    // The first leaves temporarily (-2), the second takes over without a rebalance.
    let mut leave = beat("a1", -2, None);
    leave.instance_id = Some("i".into());
    assert_eq!(
        ok(g.heartbeat(&leave, &catalog(), Ok(()), 2)).member_epoch,
        -2
    );
    let second = ok(g.heartbeat(&j2, &catalog(), Ok(()), 3));
    assert_eq!(second.assignment, first.assignment);
    assert_eq!(g.get("g").unwrap().epoch, epoch);
    assert!(!g.get("g").unwrap().members.contains_key("a1"));
}

#[test]
fn topic_changes_bump_the_epoch() {
    let mut g = groups();
    let mut a = Client::join(&mut g, "a", 0);
    let epoch = g.get("g").unwrap().epoch;
    let mut more = catalog();
    more.insert("orders".into(), (T1, 8));
    let ans = ok(g.heartbeat(&beat("a", a.epoch, Some(&a.owned)), &more, Ok(()), 1));
    assert_eq!(ans.member_epoch, epoch + 1);
    a.owned = ans.assignment.unwrap();
    assert_eq!(count(&a.owned), 8);
}

#[test]
fn regex_subscriptions_follow_topics() {
    let mut g = groups();
    let mut j = join("a", &[]);
    j.topic_names = None;
    j.topic_regex = Some("pay.*|ord.rs".into());
    let ans = ok(g.heartbeat(&j, &catalog(), Ok(()), 0));
    assert_eq!(count(&ans.assignment.unwrap()), 8);
    // An empty regex beside names means no regex (librdkafka sends one).
    let mut j = join("b", &["payments"]);
    j.topic_regex = Some(String::new());
    ok(g.heartbeat(&j, &catalog(), Ok(()), 1));
    assert_eq!(g.get("g").unwrap().members["b"].sub.topic_regex, None);
}

#[test]
fn records_replay_into_the_same_state() {
    let mut g = groups();
    let mut a = Client::join(&mut g, "a", 0);
    let mut b = Client::join(&mut g, "b", 0);
    a.beat(&mut g, 1);
    let records = g.take_records();
    let mut other = groups();
    for r in records.clone() {
        let (k, v) = super::records::encode(&r);
        let back = super::records::decode(&k, v).unwrap().unwrap();
        other.replay(back, 100);
    }
    other.finish_replay(100);
    let (x, y) = (g.get("g").unwrap(), other.get("g").unwrap());
    assert_eq!(x.epoch, y.epoch);
    assert_eq!(x.assignment_epoch, y.assignment_epoch);
    assert_eq!(x.target, y.target);
    assert_eq!(x.owners, y.owners);
    for (id, m) in &x.members {
        assert_eq!(m.current, y.members[id].current);
        assert_eq!(m.sub, y.members[id].sub);
    }
    let epoch = y.epoch;
    // Members continue against the replayed state.
    a.beat(&mut other, 101);
    assert_eq!(a.epoch, epoch);
    b.beat(&mut other, 102);
    assert_eq!(count(&a.owned) + count(&b.owned), 6);
}
