//! Controller scenarios: placement, fencing and elections, AlterPartition, controlled
//! shutdown, preferred-leader restore, corruption reports, and replay determinism.

use std::collections::BTreeMap;

use baton_protocol::{ErrorCode, Uuid};

use super::*;
use crate::replication::test_rng::Rng;

const SESSION: u64 = 1_000;

fn config() -> ControllerConfig {
    ControllerConfig {
        session_timeout_ms: SESSION,
        move_timeout_ms: 5_000,
        auto_preferred_leader: false,
    }
}

fn tid(n: u64) -> Uuid {
    Uuid::from_u64_pair(0xabc, n)
}

/// A controller with brokers `ids` registered and unfenced at time 0; returns the
/// broker epochs too.
fn cluster(ids: &[i32]) -> (Controller, Vec<i64>) {
    let mut c = Controller::new(1, config());
    let mut epochs = Vec::new();
    for &id in ids {
        epochs.push(
            c.register_broker(id, 100 + id as u64, "127.0.0.1", 9000, 0)
                .unwrap(),
        );
    }
    for (i, &id) in ids.iter().enumerate() {
        let r = c.heartbeat(hb(id, epochs[i], &c), 0).unwrap();
        assert!(!r.fenced);
    }
    (c, epochs)
}

fn hb(broker_id: i32, broker_epoch: i64, c: &Controller) -> Heartbeat {
    Heartbeat {
        broker_id,
        broker_epoch,
        metadata_offset: c.state().next_offset(),
        want_shutdown: false,
    }
}

/// Heartbeats every unfenced broker in `alive` at `now`.
fn beat(c: &mut Controller, alive: &[(i32, i64)], now: u64) {
    for &(id, epoch) in alive {
        let h = hb(id, epoch, c);
        c.heartbeat(h, now).unwrap();
    }
}

fn part(c: &Controller, t: Uuid, p: i32) -> PartitionInfo {
    c.state().partition(t, p).unwrap().clone()
}

#[test]
fn registration_starts_fenced_until_caught_up() {
    let mut c = Controller::new(1, config());
    let e = c.register_broker(1, 7, "h", 1, 0).unwrap();
    assert!(c.state().broker(1).unwrap().fenced);
    assert_eq!(c.register_broker(1, 7, "h", 1, 0).unwrap(), e, "idempotent");
    let behind = Heartbeat {
        broker_id: 1,
        broker_epoch: e,
        metadata_offset: e,
        want_shutdown: false,
    };
    assert!(c.heartbeat(behind, 1).unwrap().fenced, "not caught up yet");
    let caught_up = Heartbeat {
        metadata_offset: e + 1,
        ..behind
    };
    assert!(!c.heartbeat(caught_up, 2).unwrap().fenced);
    let stale = Heartbeat {
        broker_epoch: e + 5,
        ..caught_up
    };
    assert_eq!(
        c.heartbeat(stale, 3).unwrap_err().error_code(),
        ErrorCode::StaleBrokerEpoch
    );
    assert_eq!(
        c.heartbeat(
            Heartbeat {
                broker_id: 9,
                ..caught_up
            },
            3
        )
        .unwrap_err()
        .error_code(),
        ErrorCode::BrokerIdNotRegistered
    );
}

#[test]
fn topic_creation_places_round_robin_over_live_brokers() {
    let (mut c, _) = cluster(&[1, 2, 3]);
    c.create_topic("t", tid(1), 4, 2, vec![]).unwrap();
    let reps: Vec<Vec<i32>> = (0..4).map(|p| part(&c, tid(1), p).replicas).collect();
    assert_eq!(reps, vec![vec![1, 2], vec![2, 3], vec![3, 1], vec![1, 2]]);
    for p in 0..4 {
        let pi = part(&c, tid(1), p);
        assert_eq!(pi.leader, pi.replicas[0]);
        assert_eq!(pi.isr, pi.replicas);
    }
    // The next topic starts one broker further.
    c.create_topic("u", tid(2), 1, 3, vec![]).unwrap();
    assert_eq!(part(&c, tid(2), 0).replicas, vec![2, 3, 1]);
    let err = |r: Result<(), ControllerError>| r.unwrap_err().error_code();
    assert_eq!(
        err(c.create_topic("v", tid(3), 1, 4, vec![])),
        ErrorCode::InvalidReplicationFactor
    );
    assert_eq!(
        err(c.create_topic("v", tid(3), 1, 0, vec![])),
        ErrorCode::InvalidReplicationFactor
    );
    assert_eq!(
        err(c.create_topic("v", tid(3), 0, 1, vec![])),
        ErrorCode::InvalidPartitions
    );
    assert_eq!(
        err(c.create_topic("t", tid(3), 1, 1, vec![])),
        ErrorCode::TopicAlreadyExists
    );
    assert_eq!(
        err(c.create_topic("bad/name", tid(3), 1, 1, vec![])),
        ErrorCode::InvalidTopicException
    );
    assert_eq!(
        err(c.create_topic("v", tid(1), 1, 1, vec![])),
        ErrorCode::InvalidRequest
    );
    // Fenced brokers are not placement targets.
    c.tick(SESSION + 1);
    assert_eq!(
        err(c.create_topic("v", tid(3), 1, 1, vec![])),
        ErrorCode::InvalidReplicationFactor
    );
    assert_eq!(c.delete_topic("t").unwrap(), tid(1));
    assert!(c.state().partition(tid(1), 0).is_none());
}

#[test]
fn fenced_broker_moves_leaderships_cleanly() {
    let (mut c, e) = cluster(&[1, 2, 3]);
    c.create_topic("t", tid(1), 3, 3, vec![]).unwrap();
    let before: Vec<PartitionInfo> = (0..3).map(|p| part(&c, tid(1), p)).collect();
    // Broker 1 stops heartbeating.
    beat(&mut c, &[(2, e[1]), (3, e[2])], 900);
    c.tick(1_001);
    assert!(c.state().broker(1).unwrap().fenced);
    for (p, b) in before.iter().enumerate() {
        let now = part(&c, tid(1), p as i32);
        assert!(!now.isr.contains(&1), "fenced broker leaves every ISR");
        assert_ne!(now.leader, 1);
        assert!(now.isr.contains(&now.leader));
        if b.leader == 1 {
            assert_eq!(now.leader_epoch, b.leader_epoch + 1);
            // Next in replica order that is in the ISR.
            let expected = b.replicas.iter().copied().find(|r| *r != 1).unwrap();
            assert_eq!(now.leader, expected);
        } else {
            assert_eq!(now.leader_epoch, b.leader_epoch, "ISR-only change");
        }
        assert!(now.partition_epoch > b.partition_epoch);
    }
}

#[test]
fn offline_without_isr_successor_then_clean_or_unclean_recovery() {
    let (mut c, e) = cluster(&[1, 2]);
    c.create_topic("clean", tid(1), 1, 2, vec![]).unwrap();
    c.create_topic(
        "dirty",
        tid(2),
        1,
        2,
        vec![(UNCLEAN_LEADER_ELECTION.into(), "true".into())],
    )
    .unwrap();
    let lead_clean = part(&c, tid(1), 0).leader;
    let lead_dirty = part(&c, tid(2), 0).leader;
    assert_eq!((lead_clean, lead_dirty), (1, 2));
    // Shrink both ISRs to their leader only.
    for (t, l) in [(tid(1), 1), (tid(2), 2)] {
        let p = part(&c, t, 0);
        c.alter_partition(&AlterPartition {
            broker_id: l,
            topic_id: t,
            partition: 0,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            new_isr: vec![l],
            broker_epochs: Vec::new(),
        })
        .unwrap();
    }
    // Both leaders die in turn; the other broker survives.
    beat(&mut c, &[(2, e[1])], 900);
    c.tick(1_001);
    let p = part(&c, tid(1), 0);
    assert_eq!(p.leader, NO_LEADER, "clean topic goes offline");
    assert_eq!(p.isr, vec![1], "last ISR member kept so it can return");
    // Broker 1 comes back (same incarnation would re-use; this is a restart).
    let e1 = c.register_broker(1, 555, "h", 1, 1_100).unwrap();
    beat(&mut c, &[(2, e[1])], 1_100);
    let h = hb(1, e1, &c);
    c.heartbeat(h, 1_100).unwrap();
    let p = part(&c, tid(1), 0);
    assert_eq!(p.leader, 1, "elected again once unfenced");
    // Now broker 2 dies: the unclean topic elects out-of-sync broker 1.
    beat(&mut c, &[(1, e1)], 2_000);
    c.tick(2_200);
    let d = part(&c, tid(2), 0);
    assert_eq!(d.leader, 1, "unclean election");
    assert_eq!(d.isr, vec![1]);
}

#[test]
fn alter_partition_semantics() {
    let (mut c, _) = cluster(&[1, 2, 3]);
    c.create_topic("t", tid(1), 1, 3, vec![]).unwrap();
    let p = part(&c, tid(1), 0);
    let req = |isr: Vec<i32>, pe: i32, le: i32, from: i32| AlterPartition {
        broker_id: from,
        topic_id: tid(1),
        partition: 0,
        leader_epoch: le,
        partition_epoch: pe,
        new_isr: isr,
        broker_epochs: Vec::new(),
    };
    let code = |r: Result<PartitionInfo, ControllerError>| r.unwrap_err().error_code();
    let (pe, le) = (p.partition_epoch, p.leader_epoch);
    assert_eq!(
        code(c.alter_partition(&req(vec![1, 2], pe, le, 2))),
        ErrorCode::NotLeaderOrFollower
    );
    assert_eq!(
        code(c.alter_partition(&req(vec![2, 3], pe, le, 1))),
        ErrorCode::InvalidRequest,
        "never remove the leader"
    );
    assert_eq!(
        code(c.alter_partition(&req(vec![1, 9], pe, le, 1))),
        ErrorCode::InvalidRequest
    );
    assert_eq!(
        code(c.alter_partition(&req(vec![1, 2], pe + 1, le, 1))),
        ErrorCode::InvalidUpdateVersion
    );
    assert_eq!(
        code(c.alter_partition(&req(vec![1, 2], pe, le + 1, 1))),
        ErrorCode::UnknownLeaderEpoch
    );
    let after = c.alter_partition(&req(vec![1, 2], pe, le, 1)).unwrap();
    assert_eq!(after.isr, vec![1, 2]);
    assert_eq!(after.partition_epoch, pe + 1);
    assert_eq!(after.leader_epoch, le);
    // The same request again is now stale.
    assert_eq!(
        code(c.alter_partition(&req(vec![1, 2], pe, le, 1))),
        ErrorCode::InvalidUpdateVersion
    );
    // Adding a fenced replica is refused.
    c.tick(SESSION + 1); // everyone fenced; leaderships go offline
    let (mut c, e) = cluster(&[1, 2, 3]);
    c.create_topic("t", tid(1), 1, 3, vec![]).unwrap();
    let p = c.alter_partition(&req(vec![1, 2], 0, 0, 1)).unwrap();
    beat(&mut c, &[(1, e[0]), (2, e[1])], 900);
    c.tick(1_001);
    assert!(c.state().broker(3).unwrap().fenced);
    assert_eq!(
        code(c.alter_partition(&req(vec![1, 2, 3], p.partition_epoch, 0, 1))),
        ErrorCode::IneligibleReplica
    );
    // A leader epoch older than the current one is fenced.
    beat(&mut c, &[(2, e[1])], 1_500);
    c.tick(2_002);
    let p = part(&c, tid(1), 0);
    assert_eq!(p.leader, 2);
    assert_eq!(
        code(c.alter_partition(&req(vec![2], p.partition_epoch, 0, 2))),
        ErrorCode::FencedLeaderEpoch
    );
}

#[test]
fn a_member_proposed_under_a_registration_it_has_since_replaced_is_refused() {
    let (mut c, e) = cluster(&[1, 2, 3]);
    c.create_topic("t", tid(1), 1, 3, vec![]).unwrap();
    // Broker 3 restarts: the new process registers (fencing the old one out of
    // the ISR) and is unfenced as soon as it has caught up with the metadata.
    let e3 = c.register_broker(3, 999, "127.0.0.1", 9000, 10).unwrap();
    assert_ne!(e3, e[2]);
    let h = hb(3, e3, &c);
    assert!(!c.heartbeat(h, 10).unwrap().fenced);
    let p = part(&c, tid(1), 0);
    assert_eq!(p.isr, vec![1, 2]);
    let ask = |epoch: i64| AlterPartition {
        broker_id: 1,
        topic_id: tid(1),
        partition: 0,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr: vec![1, 2, 3],
        broker_epochs: vec![(1, e[0]), (2, e[1]), (3, epoch)],
    };
    // The leader still credits broker 3 with what its old process fetched.
    let refused = c.alter_partition(&ask(e[2])).unwrap_err();
    assert_eq!(refused.error_code(), ErrorCode::IneligibleReplica);
    assert_eq!(part(&c, tid(1), 0).isr, vec![1, 2]);
    // Proposed for the new process's own fetches, it joins.
    let after = c.alter_partition(&ask(e3)).unwrap();
    assert_eq!(after.isr, vec![1, 2, 3]);
}

/// Drives a planned move through the protocol the drivers use.
fn complete_move(c: &mut Controller, t: Uuid, p: i32, leo: i64) {
    let m = *c.state().leader_move(t, p).unwrap();
    assert_eq!(m.state, MoveState::Requested);
    c.report_drain_started(m.from, t, p, leo).unwrap();
    assert_eq!(
        c.state().leader_move(t, p).unwrap().state,
        MoveState::Draining {
            target_log_end_offset: leo
        }
    );
    assert!(!c
        .report_successor_caught_up(m.from, t, p, m.to, leo - 1)
        .unwrap());
    assert!(c
        .report_successor_caught_up(m.from, t, p, m.to, leo)
        .unwrap());
    assert!(c.state().leader_move(t, p).is_none());
    assert_eq!(part(c, t, p).leader, m.to);
}

#[test]
fn controlled_shutdown_moves_leaderships_before_leaving() {
    let (mut c, e) = cluster(&[1, 2, 3]);
    c.create_topic("t", tid(1), 3, 3, vec![]).unwrap();
    let led: Vec<i32> = (0..3)
        .filter(|p| part(&c, tid(1), *p).leader == 1)
        .collect();
    assert_eq!(led, vec![0]);
    let before = part(&c, tid(1), 0);
    let want = Heartbeat {
        want_shutdown: true,
        ..hb(1, e[0], &c)
    };
    let r = c.heartbeat(want, 10).unwrap();
    assert!(r.in_controlled_shutdown && !r.should_shut_down);
    // Its leadership is being moved, not yet changed; it left the ISRs it follows in.
    assert_eq!(part(&c, tid(1), 0).leader, 1);
    assert_eq!(
        c.state().leader_move(tid(1), 0).copied(),
        Some(LeaderMove {
            from: 1,
            to: 2,
            state: MoveState::Requested
        })
    );
    for p in 1..3 {
        assert!(!part(&c, tid(1), p).isr.contains(&1));
    }
    // Not eligible for new work.
    assert!(!c.state().is_eligible(1));
    assert!(!c.heartbeat(want, 20).unwrap().should_shut_down);
    complete_move(&mut c, tid(1), 0, 500);
    let after = part(&c, tid(1), 0);
    assert_eq!(after.leader_epoch, before.leader_epoch + 1);
    assert!(!after.isr.contains(&1), "the leaving broker leaves the ISR");
    let r = c.heartbeat(want, 30).unwrap();
    assert!(r.should_shut_down && r.fenced);
    assert!(c.state().broker(1).unwrap().fenced);
    // Restart: register, catch up, rejoin ISR, preferred leader restored by a move.
    let e1 = c.register_broker(1, 999, "h", 1, 40).unwrap();
    beat(&mut c, &[(1, e1), (2, e[1]), (3, e[2])], 40);
    assert!(!c.state().broker(1).unwrap().fenced);
    assert_eq!(c.restore_preferred_leaders(50), 0, "not in the ISR yet");
    let p = part(&c, tid(1), 0);
    c.alter_partition(&AlterPartition {
        broker_id: 2,
        topic_id: tid(1),
        partition: 0,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr: vec![1, 2, 3],
        broker_epochs: Vec::new(),
    })
    .unwrap();
    assert_eq!(c.restore_preferred_leaders(60), 1);
    complete_move(&mut c, tid(1), 0, 800);
    assert_eq!(part(&c, tid(1), 0).leader, 1);
    assert_eq!(
        part(&c, tid(1), 0).isr,
        vec![1, 2, 3],
        "restore keeps the ISR"
    );
}

#[test]
fn moves_abort_on_failure_timeout_or_isr_removal() {
    let (mut c, e) = cluster(&[1, 2, 3]);
    c.create_topic("t", tid(1), 1, 3, vec![]).unwrap();
    c.request_leader_move(tid(1), 0, 2, 0).unwrap();
    assert!(
        c.request_leader_move(tid(1), 0, 3, 0).is_err(),
        "one at a time"
    );
    // The leader drops the target from the ISR: the move is aborted.
    c.alter_partition(&AlterPartition {
        broker_id: 1,
        topic_id: tid(1),
        partition: 0,
        leader_epoch: 0,
        partition_epoch: 0,
        new_isr: vec![1, 3],
        broker_epochs: Vec::new(),
    })
    .unwrap();
    assert!(c.state().leader_move(tid(1), 0).is_none());
    // Timeout.
    c.request_leader_move(tid(1), 0, 3, 100).unwrap();
    c.report_drain_started(1, tid(1), 0, 10).unwrap();
    beat(&mut c, &[(1, e[0]), (2, e[1]), (3, e[2])], 5_000);
    c.tick(5_200);
    assert!(c.state().leader_move(tid(1), 0).is_none());
    assert_eq!(part(&c, tid(1), 0).leader, 1);
    // The successor dies mid-drain: aborted, leadership stays.
    c.request_leader_move(tid(1), 0, 3, 5_200).unwrap();
    c.report_drain_started(1, tid(1), 0, 10).unwrap();
    beat(&mut c, &[(1, e[0]), (2, e[1])], 6_000);
    c.tick(6_150);
    assert!(c.state().broker(3).unwrap().fenced);
    assert!(c.state().leader_move(tid(1), 0).is_none());
    assert_eq!(part(&c, tid(1), 0).leader, 1);
    assert_eq!(
        c.report_successor_caught_up(1, tid(1), 0, 3, 10),
        Err(ControllerError::NoMoveInProgress)
    );
}

#[test]
fn corrupt_replica_report() {
    let (mut c, _) = cluster(&[1, 2, 3]);
    c.create_topic("t", tid(1), 1, 3, vec![]).unwrap();
    // A corrupt follower leaves the ISR.
    let p = c.report_corrupt_replica(tid(1), 0, 3).unwrap();
    assert_eq!((p.leader, p.isr.clone()), (1, vec![1, 2]));
    // A corrupt leader is replaced by a healthy ISR member.
    let p = c.report_corrupt_replica(tid(1), 0, 1).unwrap();
    assert_eq!((p.leader, p.isr.clone(), p.leader_epoch), (2, vec![2], 1));
    // The last healthy member corrupt: offline with an empty ISR.
    let p = c.report_corrupt_replica(tid(1), 0, 2).unwrap();
    assert_eq!(p.leader, NO_LEADER);
    assert!(p.isr.is_empty());
    assert!(c.report_corrupt_replica(tid(1), 0, 9).is_err());
}

/// A seeded random workload: after every step, replaying the entries written so far
/// (directly, and through their bytes) reproduces the live state exactly.
#[test]
fn replay_reproduces_state() {
    let mut kinds: std::collections::BTreeMap<String, usize> = Default::default();
    for seed in 0..25u64 {
        let mut rng = Rng::new(seed);
        let mut c = Controller::new(1, config());
        let mut log: Vec<MetadataLogEntry> = Vec::new();
        let mut epochs: std::collections::BTreeMap<i32, i64> = Default::default();
        let mut now = 0u64;
        let mut topics = 0u64;
        for step in 0..200 {
            now += rng.below(400);
            let b = 1 + rng.below(4) as i32;
            match rng.below(9) {
                0 => {
                    let inc = rng.below(3);
                    if let Ok(e) = c.register_broker(b, inc, "h", 1, now) {
                        epochs.insert(b, e);
                    }
                }
                1..=3 => {
                    if let Some(&e) = epochs.get(&b) {
                        let mut h = hb(b, e, &c);
                        h.want_shutdown = rng.below(10) == 0;
                        let _ = c.heartbeat(h, now);
                    }
                }
                4 => c.tick(now),
                5 => {
                    topics += 1;
                    let cfg = if rng.below(2) == 0 {
                        vec![(UNCLEAN_LEADER_ELECTION.to_string(), "true".to_string())]
                    } else {
                        vec![]
                    };
                    let _ = c.create_topic(
                        &format!("t{topics}"),
                        tid(topics),
                        1 + rng.below(3) as i32,
                        1 + rng.below(3) as i32,
                        cfg,
                    );
                }
                6 => {
                    // A leader shrinks or expands its ISR.
                    let ps: Vec<PartitionInfo> = c.state().partitions().cloned().collect();
                    if let Some(p) = ps.get(rng.below(ps.len().max(1) as u64) as usize) {
                        let mut isr: Vec<i32> = p
                            .replicas
                            .iter()
                            .copied()
                            .filter(|r| *r == p.leader || rng.below(2) == 0)
                            .collect();
                        isr.dedup();
                        let _ = c.alter_partition(&AlterPartition {
                            broker_id: p.leader,
                            topic_id: p.topic_id,
                            partition: p.partition,
                            leader_epoch: p.leader_epoch,
                            partition_epoch: p.partition_epoch,
                            new_isr: isr,
                            broker_epochs: Vec::new(),
                        });
                    }
                }
                7 => {
                    // Advance planned moves.
                    let moves: Vec<((Uuid, i32), LeaderMove)> =
                        c.state().leader_moves().map(|(k, m)| (k, *m)).collect();
                    for ((t, p), m) in moves {
                        match m.state {
                            MoveState::Requested => {
                                let _ = c.report_drain_started(m.from, t, p, 100);
                            }
                            _ => {
                                let _ = c.report_successor_caught_up(m.from, t, p, m.to, 100);
                            }
                        }
                    }
                    c.restore_preferred_leaders(now);
                }
                _ => {
                    let ps: Vec<PartitionInfo> = c.state().partitions().cloned().collect();
                    if let Some(p) = ps.get(rng.below(ps.len().max(1) as u64) as usize) {
                        let r = p.replicas[rng.below(p.replicas.len() as u64) as usize];
                        let _ = c.report_corrupt_replica(p.topic_id, p.partition, r);
                    }
                }
            }
            log.extend(c.take_entries());
            let replayed = Controller::recover(log.clone(), config(), now)
                .unwrap_or_else(|e| panic!("seed {seed} step {step}: replay failed: {e}"));
            assert_eq!(replayed.state(), c.state(), "seed {seed} step {step}");
            // Invariants seen from outside.
            for p in c.state().partitions() {
                assert!(p.leader == NO_LEADER || p.isr.contains(&p.leader));
                if p.leader != NO_LEADER {
                    assert!(
                        !c.state().broker(p.leader).unwrap().fenced,
                        "seed {seed} step {step}: fenced leader {p:?}"
                    );
                }
            }
        }
        for e in &log {
            let kind = match &e.record {
                MetadataRecord::LeaderMove(m) => format!("LeaderMove::{:?}", m.state)
                    .split(' ')
                    .next()
                    .unwrap_or_default()
                    .to_string(),
                other => format!("{other:?}")
                    .split(['(', ' '])
                    .next()
                    .unwrap_or_default()
                    .to_string(),
            };
            *kinds.entry(kind).or_default() += 1;
        }
        // Through bytes, and a restarted controller writes with a newer epoch.
        let mut bytes = Vec::new();
        for e in &log {
            e.encode(&mut bytes);
        }
        let decoded = decode_log(&bytes).unwrap();
        assert_eq!(decoded.entries, log);
        let mut restarted = Controller::recover(decoded.entries, config(), now).unwrap();
        assert_eq!(restarted.state(), c.state());
        assert_eq!(restarted.controller_epoch(), 2);
        restarted.tick(now + 10 * SESSION);
        for e in restarted.take_entries() {
            assert_eq!(e.controller_epoch, 2);
        }
    }
    // The workload reached every kind of record.
    println!("record counts over all seeds: {kinds:?}");
    for kind in [
        "RegisterBroker",
        "FenceBroker",
        "UnfenceBroker",
        "BrokerShutdownRequested",
        "Topic",
        "Partition",
        "PartitionChange",
        "LeaderMove::Requested",
        "LeaderMove::Draining",
        "LeaderMove::HandedOver",
        "LeaderMove::Aborted",
    ] {
        assert!(
            kinds.get(kind).copied().unwrap_or(0) > 0,
            "no {kind} in {kinds:?}"
        );
    }
}

#[test]
fn replay_rejects_gaps_and_inconsistent_records() {
    let (mut c, _) = cluster(&[1, 2]);
    c.create_topic("t", tid(1), 1, 2, vec![]).unwrap();
    let log = c.take_entries();
    let mut gap = log.clone();
    gap.remove(1);
    assert!(matches!(
        Controller::recover(gap, config(), 0),
        Err(ApplyError::OffsetGap { .. })
    ));
    let mut bad = log.clone();
    let next = bad.len() as i64;
    bad.push(MetadataLogEntry {
        offset: next,
        controller_epoch: 1,
        record: MetadataRecord::PartitionChange(PartitionChangeRecord {
            topic_id: tid(1),
            partition: 0,
            isr: Some(vec![2]),
            leader: None, // leader 1 would not be in the ISR
        }),
    });
    assert!(matches!(
        Controller::recover(bad, config(), 0),
        Err(ApplyError::Inconsistent { .. })
    ));
    let mut old = log;
    let next = old.len() as i64;
    old.push(MetadataLogEntry {
        offset: next,
        controller_epoch: 0,
        record: MetadataRecord::FenceBroker { broker_id: 2 },
    });
    assert!(matches!(
        Controller::recover(old, config(), 0),
        Err(ApplyError::StaleControllerEpoch { .. })
    ));
}

#[test]
fn create_partitions_checks_counts_and_assignments_then_places_new_partitions() {
    let (mut c, _) = cluster(&[1, 2, 3]);
    c.create_topic("t", tid(1), 2, 2, vec![]).unwrap();
    let code = |r: Result<(), (ErrorCode, String)>| r.unwrap_err().0;
    assert_eq!(
        code(c.create_partitions("t", 2, None, false)),
        ErrorCode::InvalidPartitions
    );
    assert_eq!(
        code(c.create_partitions("t", 1, None, false)),
        ErrorCode::InvalidPartitions
    );
    assert_eq!(
        code(c.create_partitions("nope", 3, None, false)),
        ErrorCode::UnknownTopicOrPartition
    );
    let bad: [&[Vec<i32>]; 4] = [
        &[vec![1, 2], vec![2, 3]], // two lists for one new partition
        &[vec![1]],                // shorter than the replication factor
        &[vec![1, 1]],             // a broker twice
        &[vec![1, 9]],             // not a live broker
    ];
    for a in bad {
        assert_eq!(
            code(c.create_partitions("t", 3, Some(a), false)),
            ErrorCode::InvalidReplicaAssignment,
            "{a:?}"
        );
    }
    // validate_only writes nothing.
    let before = c.state().next_offset();
    c.create_partitions("t", 4, None, true).unwrap();
    assert_eq!(c.state().next_offset(), before);
    assert_eq!(c.state().topic(tid(1)).unwrap().partitions, 2);
    // Placed by the controller, then as the caller asks.
    c.create_partitions("t", 3, None, false).unwrap();
    c.create_partitions("t", 4, Some(&[vec![3, 1]]), false)
        .unwrap();
    assert_eq!(c.state().topic(tid(1)).unwrap().partitions, 4);
    let p3 = part(&c, tid(1), 3);
    assert_eq!((p3.replicas.clone(), p3.leader), (vec![3, 1], 3));
    assert_eq!(p3.isr, vec![3, 1]);
    assert_eq!(part(&c, tid(1), 2).replicas.len(), 2);
}

#[test]
fn topic_configs_and_broker_defaults_are_records_replayed_per_key() {
    let (mut c, _) = cluster(&[1]);
    c.create_topic("t", tid(1), 1, 1, vec![("retention.ms".into(), "5".into())])
        .unwrap();
    let mut want: BTreeMap<String, String> = BTreeMap::new();
    want.insert("max.message.bytes".into(), "2048".into());
    let before = c.state().next_offset();
    c.set_topic_configs("t", &want).unwrap();
    // One record removes retention.ms, one sets max.message.bytes.
    assert_eq!(c.state().next_offset(), before + 2);
    assert_eq!(
        c.state().topic(tid(1)).unwrap().configs,
        vec![("max.message.bytes".to_owned(), "2048".to_owned())]
    );
    c.set_topic_configs("t", &want).unwrap();
    assert_eq!(c.state().next_offset(), before + 2, "no change, no record");
    let mut defaults = BTreeMap::new();
    defaults.insert("log.retention.ms".to_owned(), "1000".to_owned());
    c.set_broker_defaults(&defaults).unwrap();
    assert_eq!(c.state().broker_defaults(), &defaults);
    c.set_broker_defaults(&BTreeMap::new()).unwrap();
    assert!(c.state().broker_defaults().is_empty());
}
