//! Controller scenarios for ElectLeaders and partition reassignments, replayed
//! from their log as a restarted controller would.

use baton_protocol::{ErrorCode, Uuid};

use super::*;

fn config() -> ControllerConfig {
    ControllerConfig {
        session_timeout_ms: 1_000,
        move_timeout_ms: 5_000,
        auto_preferred_leader: false,
    }
}

fn topic() -> Uuid {
    Uuid::from_u64_pair(0xabc, 7)
}

/// Brokers 1..=n registered and unfenced; one partition on replicas {1, 2}.
fn cluster(n: i32) -> (Controller, Vec<MetadataLogEntry>) {
    let mut c = Controller::new(1, config());
    let mut log = Vec::new();
    let epochs: Vec<i64> = (1..=n)
        .map(|id| {
            c.register_broker(id, 100 + id as u64, "127.0.0.1", 9000, 0)
                .unwrap()
        })
        .collect();
    for (i, &e) in epochs.iter().enumerate() {
        let hb = Heartbeat {
            broker_id: i as i32 + 1,
            broker_epoch: e,
            metadata_offset: c.state().next_offset(),
            want_shutdown: false,
        };
        c.heartbeat(hb, 0).unwrap();
    }
    c.create_topic("t", topic(), 1, 2, vec![]).unwrap();
    log.extend(c.take_entries());
    assert_eq!(part(&c).replicas, vec![1, 2]);
    (c, log)
}

fn part(c: &Controller) -> PartitionInfo {
    c.state().partition(topic(), 0).unwrap().clone()
}

/// The leader proposes `isr` at the partition's current epochs.
fn set_isr(c: &mut Controller, isr: Vec<i32>) -> Result<PartitionInfo, ControllerError> {
    let p = part(c);
    c.alter_partition(&AlterPartition {
        broker_id: p.leader,
        topic_id: topic(),
        partition: 0,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr: isr,
        broker_epochs: Vec::new(),
    })
}

fn code<R: std::fmt::Debug>(r: Result<R, ControllerError>) -> ErrorCode {
    r.unwrap_err().error_code()
}

#[test]
fn reassignment_shows_the_union_until_the_target_is_in_sync_then_switches() {
    let (mut c, mut log) = cluster(3);
    c.alter_reassignment(topic(), 0, Some(vec![2, 3])).unwrap();
    let p = part(&c);
    assert_eq!(p.replicas, vec![2, 3, 1], "target first, then the removed");
    assert_eq!(
        (p.adding_replicas.clone(), p.removing_replicas.clone()),
        (vec![3], vec![1])
    );
    assert_eq!((p.leader, p.isr.clone()), (1, vec![1, 2]));
    // Replayed, a restarted controller sees the same reassignment.
    log.extend(c.take_entries());
    let replayed = Controller::recover(log.clone(), config(), 0).unwrap();
    assert_eq!(replayed.state(), c.state());

    // The new replica joins the ISR: the target is in sync, so the replicas become
    // the target and the removed leader hands over to the first in-sync target.
    let after = set_isr(&mut c, vec![1, 2, 3]).unwrap();
    assert_eq!(after.replicas, vec![2, 3]);
    assert!(!after.is_reassigning());
    assert_eq!(after.isr, vec![2, 3]);
    assert_eq!(after.leader, 2);
    assert_eq!(after.leader_epoch, p.leader_epoch + 1);
    log.extend(c.take_entries());
    assert_eq!(
        Controller::recover(log, config(), 0).unwrap().state(),
        c.state()
    );
}

#[test]
fn reassignment_cancelled_restores_the_original_replicas() {
    let (mut c, _) = cluster(3);
    assert_eq!(
        code(c.alter_reassignment(topic(), 0, None)),
        ErrorCode::NoReassignmentInProgress
    );
    c.alter_reassignment(topic(), 0, Some(vec![1, 3])).unwrap();
    assert_eq!(part(&c).replicas, vec![1, 3, 2]);
    c.alter_reassignment(topic(), 0, None).unwrap();
    let p = part(&c);
    assert_eq!(
        (p.replicas.clone(), p.isr.clone(), p.leader),
        (vec![1, 2], vec![1, 2], 1)
    );
    assert!(!p.is_reassigning());
}

#[test]
fn reassignment_errors_follow_kafka() {
    let (mut c, _) = cluster(3);
    let bad = |c: &mut Controller, r: Vec<i32>| code(c.alter_reassignment(topic(), 0, Some(r)));
    assert_eq!(bad(&mut c, vec![]), ErrorCode::InvalidReplicaAssignment);
    assert_eq!(bad(&mut c, vec![2, 2]), ErrorCode::InvalidReplicaAssignment);
    assert_eq!(bad(&mut c, vec![1, 9]), ErrorCode::InvalidReplicaAssignment);
    assert_eq!(
        code(c.alter_reassignment(Uuid::from_u64_pair(1, 1), 0, Some(vec![1]))),
        ErrorCode::UnknownTopicOrPartition
    );
    assert_eq!(
        code(c.alter_reassignment(topic(), 5, Some(vec![1]))),
        ErrorCode::UnknownTopicOrPartition
    );
    // The replicas in place: nothing to write.
    let before = c.state().next_offset();
    c.alter_reassignment(topic(), 0, Some(vec![1, 2])).unwrap();
    assert_eq!(c.state().next_offset(), before);
    // A smaller target already in sync completes at once.
    c.alter_reassignment(topic(), 0, Some(vec![2])).unwrap();
    let p = part(&c);
    assert_eq!((p.replicas.clone(), p.leader), (vec![2], 2));
}

#[test]
fn preferred_and_unclean_elections() {
    let (mut c, _) = cluster(3);
    assert_eq!(
        code(c.elect_leader(topic(), 0, ElectionType::Preferred)),
        ErrorCode::ElectionNotNeeded
    );
    assert_eq!(
        code(c.elect_leader(topic(), 0, ElectionType::Unclean)),
        ErrorCode::ElectionNotNeeded
    );
    // Broker 1's session expires: 2 leads; 1 is not available as preferred.
    let e2 = c.state().broker(2).unwrap().broker_epoch;
    let beat2 = |c: &mut Controller, now| {
        let hb = Heartbeat {
            broker_id: 2,
            broker_epoch: e2,
            metadata_offset: c.state().next_offset(),
            want_shutdown: false,
        };
        c.heartbeat(hb, now).unwrap();
    };
    beat2(&mut c, 900);
    c.tick(1_500);
    assert_eq!(part(&c).leader, 2);
    assert_eq!(
        code(c.elect_leader(topic(), 0, ElectionType::Preferred)),
        ErrorCode::PreferredLeaderNotAvailable
    );
    // Broker 1 returns and catches up: preferred election moves leadership back.
    let e1 = c.register_broker(1, 555, "127.0.0.1", 9000, 1_500).unwrap();
    let hb1 = Heartbeat {
        broker_id: 1,
        broker_epoch: e1,
        metadata_offset: c.state().next_offset(),
        want_shutdown: false,
    };
    c.heartbeat(hb1, 1_500).unwrap();
    set_isr(&mut c, vec![2, 1]).unwrap();
    assert_eq!(
        c.elect_leader(topic(), 0, ElectionType::Preferred).unwrap(),
        1
    );
    assert_eq!(part(&c).leader, 1);

    // Only 1 in sync, and it dies: offline (unclean not enabled on the topic).
    set_isr(&mut c, vec![1]).unwrap();
    beat2(&mut c, 2_600);
    c.tick(2_600);
    assert!(part(&c).is_offline());
    assert_eq!(part(&c).isr, vec![1]);
    // Unclean election picks live, out-of-sync 2 and restarts the ISR with it.
    assert_eq!(
        c.elect_leader(topic(), 0, ElectionType::Unclean).unwrap(),
        2
    );
    assert_eq!((part(&c).leader, part(&c).isr), (2, vec![2]));
    // With every replica gone, no leader is eligible.
    c.tick(10_000);
    assert!(part(&c).is_offline());
    assert_eq!(
        code(c.elect_leader(topic(), 0, ElectionType::Unclean)),
        ErrorCode::EligibleLeadersNotAvailable
    );
}
