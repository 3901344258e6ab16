//! Mixed groups on the I/O-free machines: a classic group upgraded to a
//! consumer group, classic members driven by JoinGroup/SyncGroup/Heartbeat
//! inside it, the downgrade when the last consumer-protocol member leaves, the
//! migration policy's refusals, and the replay of classic members.

use std::collections::BTreeMap;

use baton_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, ConsumerProtocolTopicPartition,
    JoinGroupResponse,
};
use baton_protocol::primitives::Uuid;
use baton_protocol::ErrorCode;
use bytes::Bytes;

use super::member::Assignment;
use super::registry::{ConsumerGroups, ConsumerRecord, Heartbeat};
use super::{Catalog, ConsumerGroupState};
use crate::group::machine::{
    GroupConfig, GroupState, Groups, JoinRequest, LeavingMember, MigratingGroup, MigratingMember,
    MigrationPolicy,
};

const T1: Uuid = Uuid([1; 16]);

fn catalog() -> Catalog {
    Catalog::from([("orders".to_string(), (T1, 6))])
}

fn groups(policy: MigrationPolicy) -> ConsumerGroups {
    ConsumerGroups::new(
        GroupConfig {
            consumer_migration_policy: policy,
            ..GroupConfig::default()
        },
        7,
    )
}

fn subscription(owned: &[i32]) -> Bytes {
    ConsumerProtocolSubscription {
        topics: vec!["orders".into()],
        owned_partitions: if owned.is_empty() {
            Vec::new()
        } else {
            vec![ConsumerProtocolTopicPartition {
                topic: "orders".into(),
                partitions: owned.to_vec(),
            }]
        },
        ..Default::default()
    }
    .encode_versioned(1)
    .unwrap()
}

fn assignment(parts: &[i32]) -> Bytes {
    ConsumerProtocolAssignment {
        assigned_partitions: vec![ConsumerProtocolTopicPartition {
            topic: "orders".into(),
            partitions: parts.to_vec(),
        }],
        user_data: None,
    }
    .encode_versioned(0)
    .unwrap()
}

fn decode_assignment(b: Bytes) -> Vec<i32> {
    let (_, a) = ConsumerProtocolAssignment::decode_versioned(b).unwrap();
    a.assigned_partitions
        .into_iter()
        .flat_map(|tp| tp.partitions)
        .collect()
}

fn classic_member(id: &str, parts: &[i32]) -> MigratingMember {
    MigratingMember {
        id: id.into(),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 5_000,
        protocols: vec![("range".into(), subscription(&[]))],
        assignment: assignment(parts),
        ..Default::default()
    }
}

/// A stable classic group at generation 5: `a` owns 0-2, `b` owns 3-5.
fn classic_group() -> MigratingGroup {
    MigratingGroup {
        generation_id: 5,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        members: vec![
            classic_member("a", &[0, 1, 2]),
            classic_member("b", &[3, 4, 5]),
        ],
    }
}

fn consumer_join(member: &str) -> Heartbeat {
    Heartbeat {
        version: 1,
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 5_000,
        topic_names: Some(vec!["orders".into()]),
        owned: Some(Vec::new()),
        ..Default::default()
    }
}

fn consumer_beat(member: &str, epoch: i32, owned: &Assignment) -> Heartbeat {
    Heartbeat {
        version: 1,
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        owned: Some(
            owned
                .iter()
                .map(|(t, ps)| (*t, ps.iter().copied().collect()))
                .collect(),
        ),
        ..Default::default()
    }
}

fn classic_join(member: &str, owned: &[i32]) -> JoinRequest {
    JoinRequest {
        group_id: "g".into(),
        member_id: member.into(),
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), subscription(owned))],
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 5_000,
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        version: 9,
        ..Default::default()
    }
}

fn joined(r: JoinGroupResponse) -> JoinGroupResponse {
    assert_eq!(r.error_code, 0, "{r:?}");
    r
}

/// Every partition of `orders` owned (assigned or pending revocation) by one
/// member at most, and by exactly one once the group is stable.
fn owners(g: &ConsumerGroups) -> BTreeMap<i32, Vec<String>> {
    let mut out: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for m in g.get("g").unwrap().members.values() {
        for ps in m
            .current
            .assigned
            .get(&T1)
            .into_iter()
            .chain(m.current.pending_revocation.get(&T1))
        {
            for p in ps {
                out.entry(*p).or_default().push(m.id.clone());
            }
        }
    }
    out
}

/// Upgrades the classic group, joins consumer member `c`, and drives all three
/// until the group is stable; returns the group machine and `c`'s epoch and
/// partitions.
fn mixed_and_stable() -> (ConsumerGroups, i32, Assignment) {
    let mut g = groups(MigrationPolicy::Bidirectional);
    g.adopt_classic("g", &classic_group(), &catalog(), 0)
        .unwrap();
    let group = g.get("g").unwrap();
    assert_eq!((group.epoch, group.assignment_epoch), (5, 5));
    assert_eq!(group.members["a"].current.epoch, 5);
    assert_eq!(group.state(), ConsumerGroupState::Stable);

    // A consumer-protocol member joins: new epoch, new target; it waits for
    // partitions the classic members still own.
    let c = g.heartbeat(&consumer_join("c"), &catalog(), Ok(()), 10);
    assert_eq!(c.error, ErrorCode::None, "{:?}", c.message);
    assert_eq!(c.member_epoch, 6);
    let mut c_owned = c.assignment.unwrap();
    let mut c_epoch = c.member_epoch;
    assert!(c_owned.is_empty(), "everything is still owned: {c_owned:?}");

    // The classic members learn through their heartbeat that they must rejoin.
    let cat = catalog();
    for m in ["a", "b"] {
        assert_eq!(
            g.classic_heartbeat("g", m, None, 5, &cat, 20),
            ErrorCode::RebalanceInProgress
        );
    }
    // They rejoin eagerly (owning nothing) and sync their new assignments.
    for m in ["a", "b"] {
        let r = joined(g.classic_join(&classic_join(m, &[]), &cat, 30));
        assert_eq!(r.generation_id, 6);
        assert_eq!(r.protocol_name.as_deref(), Some("range"));
        assert!(r.leader.is_empty() && r.members.is_empty(), "{r:?}");
        let s = g.classic_sync("g", m, None, 6, Some("range"), &cat, 31);
        assert_eq!(s.error_code, 0);
        assert_eq!(decode_assignment(s.assignment).len(), 2, "{m}");
        assert_eq!(
            g.classic_heartbeat("g", m, None, 6, &cat, 32),
            ErrorCode::None
        );
    }
    // The consumer member now gets the released partitions.
    for _ in 0..3 {
        let a = g.heartbeat(&consumer_beat("c", c_epoch, &c_owned), &cat, Ok(()), 40);
        assert_eq!(a.error, ErrorCode::None, "{:?}", a.message);
        c_epoch = a.member_epoch;
        if let Some(new) = a.assignment {
            c_owned = new;
        }
    }
    assert_eq!(c_owned.get(&T1).map(|s| s.len()), Some(2));
    assert_eq!(g.get("g").unwrap().state(), ConsumerGroupState::Stable);
    let owners = owners(&g);
    assert_eq!(owners.len(), 6, "{owners:?}");
    assert!(owners.values().all(|o| o.len() == 1), "{owners:?}");
    (g, c_epoch, c_owned)
}

#[test]
fn an_upgraded_group_rebalances_classic_and_consumer_members_together() {
    let (g, _, _) = mixed_and_stable();
    let group = g.get("g").unwrap();
    assert!(group.members["a"].sub.is_classic());
    assert!(!group.members["c"].sub.is_classic());
}

#[test]
fn classic_requests_are_checked_against_the_member_epoch() {
    let (mut g, _, _) = mixed_and_stable();
    let cat = catalog();
    assert_eq!(
        g.classic_heartbeat("g", "a", None, 5, &cat, 50),
        ErrorCode::IllegalGeneration
    );
    assert_eq!(
        g.classic_heartbeat("g", "zz", None, 6, &cat, 50),
        ErrorCode::UnknownMemberId
    );
    // A consumer-protocol member is not a classic one.
    assert_eq!(
        g.classic_heartbeat("g", "c", None, 6, &cat, 50),
        ErrorCode::UnknownMemberId
    );
    let s = g.classic_sync("g", "a", None, 4, None, &cat, 50);
    assert_eq!(s.error_code, ErrorCode::IllegalGeneration.code());
    let s = g.classic_sync("g", "a", None, 6, Some("roundrobin"), &cat, 50);
    assert_eq!(s.error_code, ErrorCode::InconsistentGroupProtocol.code());
    let mut other = classic_join("", &[]);
    other.protocol_type = "connect".into();
    assert_eq!(
        g.classic_join(&other, &cat, 50).error_code,
        ErrorCode::InconsistentGroupProtocol.code()
    );
    let mut other = classic_join("", &[]);
    other.protocols = vec![("roundrobin".into(), subscription(&[]))];
    assert_eq!(
        g.classic_join(&other, &cat, 50).error_code,
        ErrorCode::InconsistentGroupProtocol.code(),
        "no protocol in common with the classic members"
    );
}

#[test]
fn a_new_classic_member_joins_a_consumer_group_and_cooperative_members_revoke() {
    let (mut g, mut c_epoch, mut c_owned) = mixed_and_stable();
    let cat = catalog();
    // A fourth, classic member joins with a coordinator-chosen id.
    let d = joined(g.classic_join(&classic_join("", &[]), &cat, 60));
    assert!(!d.member_id.is_empty());
    // `a` is cooperative this time: it reports what it owns, keeps what stays
    // and gives up the rest before rejoining.
    assert_eq!(
        g.classic_heartbeat("g", "a", None, 6, &cat, 61),
        ErrorCode::RebalanceInProgress
    );
    let a_owned = g.get("g").unwrap().members["a"].current.assigned[&T1]
        .iter()
        .copied()
        .collect::<Vec<_>>();
    let r = joined(g.classic_join(&classic_join("a", &a_owned), &cat, 62));
    let s = g.classic_sync("g", "a", None, r.generation_id, None, &cat, 63);
    let kept = decode_assignment(s.assignment);
    assert!(kept.len() < a_owned.len(), "{kept:?} of {a_owned:?}");
    // Everyone converges; each partition has one owner.
    for round in 0..6 {
        let a = g.heartbeat(
            &consumer_beat("c", c_epoch, &c_owned),
            &cat,
            Ok(()),
            70 + round,
        );
        c_epoch = a.member_epoch;
        if let Some(new) = a.assignment {
            c_owned = new;
        }
        for m in ["a", "b", d.member_id.as_str()] {
            let epoch = g.get("g").unwrap().members[m].current.epoch;
            if g.classic_heartbeat("g", m, None, epoch, &cat, 70 + round)
                == ErrorCode::RebalanceInProgress
            {
                let owned: Vec<i32> = g.get("g").unwrap().members[m]
                    .current
                    .assigned
                    .get(&T1)
                    .map(|s| s.iter().copied().collect())
                    .unwrap_or_default();
                let r = joined(g.classic_join(&classic_join(m, &owned), &cat, 70 + round));
                let s = g.classic_sync("g", m, None, r.generation_id, None, &cat, 70 + round);
                assert_eq!(s.error_code, 0);
            }
        }
    }
    assert_eq!(g.get("g").unwrap().state(), ConsumerGroupState::Stable);
    let owners = owners(&g);
    assert_eq!(owners.len(), 6, "{owners:?}");
    assert!(owners.values().all(|o| o.len() == 1), "{owners:?}");
    let group = g.get("g").unwrap();
    assert!(group.members.values().all(|m| m
        .current
        .assigned
        .get(&T1)
        .is_some_and(|s| !s.is_empty())));
}

#[test]
fn the_last_consumer_member_leaving_downgrades_the_group() {
    let (mut g, c_epoch, _) = mixed_and_stable();
    g.take_records();
    let leave = Heartbeat {
        member_epoch: -1,
        ..consumer_beat("c", c_epoch, &Assignment::new())
    };
    assert_eq!(
        g.heartbeat(&leave, &catalog(), Ok(()), 80).error,
        ErrorCode::None
    );
    let down = g.take_downgrades(&catalog());
    assert_eq!(down.len(), 1);
    let (id, classic) = &down[0];
    assert_eq!(id, "g");
    assert!(g.get("g").is_none(), "no longer a consumer group");
    let epoch = classic.generation_id;
    assert_eq!(
        epoch, 6,
        "the members' epoch, not the group's (7 since c left)"
    );
    let ids: Vec<&str> = classic.members.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    assert_eq!(classic.protocol_name.as_deref(), Some("range"));
    assert_eq!(
        decode_assignment(classic.members[0].assignment.clone()).len(),
        2
    );
    let records = g.take_records();
    assert_eq!(
        records.last(),
        Some(&ConsumerRecord::Group {
            group: "g".into(),
            value: None
        }),
        "the consumer group's records end in its tombstone"
    );

    // The classic machine takes them in a rebalance they must rejoin.
    let mut classic_groups = Groups::new(GroupConfig::default(), 1);
    classic_groups.adopt_members("g", classic.clone(), 90);
    assert_eq!(
        classic_groups.state_of("g"),
        Some((GroupState::PreparingRebalance, epoch))
    );
    assert_eq!(
        classic_groups.heartbeat("g", epoch, "a", None, 91),
        ErrorCode::RebalanceInProgress
    );
    // And a later upgrade sees them again.
    let snapshot = classic_groups.migration_snapshot("g").unwrap();
    assert_eq!(snapshot.members.len(), 2);
    assert!(classic_groups.release_members("g").is_empty());
    assert!(classic_groups.migration_snapshot("g").is_none());
}

#[test]
fn the_migration_policy_refuses_conversions_it_does_not_allow() {
    for policy in [MigrationPolicy::Disabled, MigrationPolicy::Downgrade] {
        let mut g = groups(policy);
        assert_eq!(
            g.adopt_classic("g", &classic_group(), &catalog(), 0),
            Err(ErrorCode::GroupIdNotFound),
            "{policy:?}"
        );
        assert!(g.get("g").is_none());
        assert!(g.take_records().is_empty());
    }
    // Upgrade only: the group stays a consumer group of classic members when
    // the consumer member leaves.
    let mut g = groups(MigrationPolicy::Upgrade);
    g.adopt_classic("g", &classic_group(), &catalog(), 0)
        .unwrap();
    let c = g.heartbeat(&consumer_join("c"), &catalog(), Ok(()), 10);
    let leave = Heartbeat {
        member_epoch: -1,
        ..consumer_beat("c", c.member_epoch, &Assignment::new())
    };
    assert_eq!(
        g.heartbeat(&leave, &catalog(), Ok(()), 20).error,
        ErrorCode::None
    );
    assert!(g.take_downgrades(&catalog()).is_empty());
    assert_eq!(g.get("g").unwrap().members.len(), 2);
    // The classic members still rebalance inside it (nobody else assigns).
    let cat = catalog();
    assert_eq!(
        g.classic_heartbeat("g", "a", None, 5, &cat, 30),
        ErrorCode::RebalanceInProgress
    );
    let r = joined(g.classic_join(&classic_join("a", &[]), &cat, 31));
    assert_eq!(r.generation_id, g.get("g").unwrap().epoch);
    // A classic group refuses nothing else: a non-consumer protocol type is
    // never upgraded.
    let mut g = groups(MigrationPolicy::Bidirectional);
    let mut connect = classic_group();
    connect.protocol_type = Some("connect".into());
    assert_eq!(
        g.adopt_classic("g", &connect, &catalog(), 0),
        Err(ErrorCode::GroupIdNotFound)
    );
}

#[test]
fn classic_members_replay_from_their_records() {
    let (mut g, _, _) = mixed_and_stable();
    let records = g.take_records();
    let mut replayed = groups(MigrationPolicy::Bidirectional);
    for r in records {
        replayed.replay(r, 100);
    }
    replayed.finish_replay(100);
    let (a, b) = (g.get("g").unwrap(), replayed.get("g").unwrap());
    assert_eq!((a.epoch, a.assignment_epoch), (b.epoch, b.assignment_epoch));
    for (id, m) in &a.members {
        assert_eq!(b.members[id].sub, m.sub, "{id}");
        assert_eq!(b.members[id].current, m.current, "{id}");
    }
    assert!(b.members["a"].sub.is_classic());
    // The replayed classic member goes on with its generation.
    assert_eq!(
        replayed.classic_heartbeat("g", "a", None, 6, &catalog(), 101),
        ErrorCode::None
    );
    let left = replayed.classic_leave(
        "g",
        &[LeavingMember {
            member_id: "a".into(),
            group_instance_id: None,
        }],
    );
    assert_eq!(left, vec![ErrorCode::None]);
    assert!(!replayed.get("g").unwrap().members.contains_key("a"));
}

#[test]
fn describe_groups_shows_a_consumer_group_with_its_state_and_members() {
    let (g, _, _) = mixed_and_stable();
    let d = super::classic::describe(g.get("g").unwrap(), &catalog());
    assert_eq!(d.error_code, 0);
    assert_eq!(d.group_state, "Stable");
    assert_eq!(d.protocol_type, "consumer");
    assert_eq!(d.protocol_data, "range", "the classic members' protocol");
    let ids: Vec<&str> = d.members.iter().map(|m| m.member_id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "c"]);
    let a = &d.members[0];
    assert_eq!(a.member_metadata, subscription(&[]), "as it joined");
    assert_eq!(decode_assignment(a.member_assignment.clone()).len(), 2);
    let c = &d.members[2];
    let (_, sub) =
        ConsumerProtocolSubscription::decode_versioned(c.member_metadata.clone()).unwrap();
    assert_eq!(sub.topics, ["orders"]);
    assert_eq!(decode_assignment(c.member_assignment.clone()).len(), 2);
}

#[test]
fn a_consumer_member_fenced_by_its_session_timeout_downgrades_the_group_too() {
    let (mut g, _, _) = mixed_and_stable();
    let cat = catalog();
    // The classic members keep talking; the consumer-protocol member goes
    // silent past its session (45 s by default).
    for m in ["a", "b"] {
        assert_eq!(
            g.classic_heartbeat("g", m, None, 6, &cat, 40_000),
            ErrorCode::None
        );
    }
    g.tick(46_000);
    assert!(!g.get("g").unwrap().members.contains_key("c"), "fenced");
    let down = g.take_downgrades(&cat);
    assert_eq!(down.len(), 1);
    assert_eq!(down[0].1.generation_id, 6);
    assert!(g.get("g").is_none());
    // The classic members' sessions did not end with the conversion.
    assert!(g.take_downgrades(&cat).is_empty());
}

#[test]
fn a_static_classic_member_is_found_by_its_instance_id() {
    let (mut g, _, _) = mixed_and_stable();
    let cat = catalog();
    let mut s = classic_join("", &[]);
    s.group_instance_id = Some("inst".into());
    let first = joined(g.classic_join(&s, &cat, 50));
    // Rejoining with the instance id and no member id finds the same member.
    let again = joined(g.classic_join(&s, &cat, 51));
    assert_eq!(again.member_id, first.member_id);
    // Another member id for the instance is fenced.
    let mut other = s.clone();
    other.member_id = "someone-else".into();
    assert_eq!(
        g.classic_join(&other, &cat, 52).error_code,
        ErrorCode::FencedInstanceId.code()
    );
    assert_eq!(
        g.classic_heartbeat(
            "g",
            &first.member_id,
            Some("other"),
            again.generation_id,
            &cat,
            53
        ),
        ErrorCode::UnknownMemberId
    );
    let left = g.classic_leave(
        "g",
        &[LeavingMember {
            member_id: String::new(),
            group_instance_id: Some("inst".into()),
        }],
    );
    assert_eq!(left, vec![ErrorCode::None]);
    assert!(!g.get("g").unwrap().members.contains_key(&first.member_id));
}
