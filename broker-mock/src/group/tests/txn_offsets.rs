//! Transactional offsets: TxnOffsetCommit validation, pending offsets kept apart
//! from committed ones until their marker, and their replay from the log.

use super::*;

use baton_protocol::record::RecordBatchBuilder;

use crate::group::coordinator::load_partition;
use crate::group::records::{self, OffsetKey};
use crate::log::Log;
use crate::partition::Partition;
use crate::producer_state::ProducerLimits;

#[test]
fn txn_commit_validation_follows_kafka() {
    let mut h = Harness::new(0);
    let g = &h.groups;
    // Unknown group: generation -1 is a simple commit, a generation is not.
    assert_eq!(g.validate_txn_commit("s", -1, "", None), Ok(()));
    assert_eq!(
        g.validate_txn_commit("s", 1, "m", None),
        Err(ErrorCode::IllegalGeneration)
    );
    assert_eq!(
        g.validate_txn_commit("", -1, "", None),
        Err(ErrorCode::InvalidGroupId)
    );
    let (a, _b, gen) = two_member_group_no_delay(&mut h);
    let g = &h.groups;
    assert_eq!(g.validate_txn_commit("g", gen, &a, None), Ok(()));
    assert_eq!(
        g.validate_txn_commit("g", gen - 1, &a, None),
        Err(ErrorCode::IllegalGeneration)
    );
    assert_eq!(
        g.validate_txn_commit("g", gen, "zombie", None),
        Err(ErrorCode::UnknownMemberId)
    );
    assert_eq!(
        g.validate_txn_commit("g", gen, &a, Some("i")),
        Err(ErrorCode::UnknownMemberId),
        "an instance id the group does not know"
    );
    // v0-2 clients send no membership: accepted even by a group with members.
    assert_eq!(g.validate_txn_commit("g", -1, "", None), Ok(()));
}

#[test]
fn pending_offsets_stay_apart_until_the_commit_marker() {
    let mut h = Harness::new(0);
    h.groups.apply_offset("g", "t", 0, Some(offset(5)), 0);
    h.groups.apply_txn_offset("g", 7, "t", 0, offset(9), 1);
    h.groups.apply_txn_offset("g", 7, "t", 1, offset(3), 2);
    assert_eq!(h.groups.offset("g", "t", 0), Some(&offset(5)));
    assert_eq!(h.groups.offset("g", "t", 1), None);
    assert!(h.groups.has_pending("g", "t", 0));
    assert!(h.groups.has_pending("g", "t", 1));
    assert!(!h.groups.has_pending("g", "t", 2));
    assert_eq!(h.groups.pending_offset("g", 7, "t", 0), Some(&offset(9)));
    assert_eq!(h.groups.pending_count(), 2);
    // A marker of another producer changes nothing.
    assert_eq!(h.groups.complete_transaction(8, true, |_| true), 0);
    assert_eq!(h.groups.offset("g", "t", 0), Some(&offset(5)));
    // Nor does one for another `__consumer_offsets` partition.
    assert_eq!(h.groups.complete_transaction(7, true, |g| g != "g"), 0);
    assert!(h.groups.has_pending("g", "t", 0));
    assert_eq!(h.groups.complete_transaction(7, true, |_| true), 2);
    assert_eq!(h.groups.offset("g", "t", 0), Some(&offset(9)));
    assert_eq!(h.groups.offset("g", "t", 1), Some(&offset(3)));
    assert!(!h.groups.has_pending("g", "t", 0));
    assert_eq!(h.groups.pending_count(), 0);
}

#[test]
fn abort_drops_pending_offsets_and_an_emptied_group() {
    let mut h = Harness::new(0);
    h.groups.apply_offset("g", "t", 0, Some(offset(5)), 0);
    h.groups.apply_txn_offset("g", 7, "t", 0, offset(9), 1);
    h.groups
        .apply_txn_offset("only-txn", 7, "t", 0, offset(1), 2);
    assert_eq!(h.groups.state_of("only-txn"), Some((GroupState::Empty, 0)));
    assert_eq!(h.groups.complete_transaction(7, false, |_| true), 2);
    assert_eq!(h.groups.offset("g", "t", 0), Some(&offset(5)));
    assert!(!h.groups.has_pending("g", "t", 0));
    assert_eq!(h.groups.state_of("only-txn"), None, "nothing left in it");
}

#[test]
fn a_deleted_group_loses_its_pending_offsets_in_memory_and_in_a_replay() {
    // In memory: DeleteGroups removes the group; its producer's marker finds nothing.
    let mut h = Harness::new(0);
    h.groups.apply_txn_offset("g", 7, "t", 0, offset(9), 1);
    h.groups.delete("g");
    h.groups.complete_transaction(7, true, |_| true);
    assert_eq!(h.groups.state_of("g"), None);
    // Replayed: the offset tombstones, then the group's tombstone, then the marker.
    let mut h = Harness::new(0);
    h.groups.apply_offset("g", "t", 1, Some(offset(3)), 0);
    h.groups.apply_txn_offset("g", 7, "t", 0, offset(9), 1);
    h.groups.apply_offset("g", "t", 1, None, 2);
    h.groups.restore("g", None, 0);
    h.groups.complete_transaction(7, true, |_| true);
    assert_eq!(h.groups.state_of("g"), None);
}

#[test]
fn a_later_plain_commit_wins_over_an_earlier_transaction() {
    let mut h = Harness::new(0);
    // Transactional offset at log offset 10, then a plain commit at 11.
    h.groups.apply_txn_offset("g", 7, "t", 0, offset(9), 10);
    h.groups.apply_offset("g", "t", 0, Some(offset(20)), 11);
    h.groups.complete_transaction(7, true, |_| true);
    assert_eq!(h.groups.offset("g", "t", 0), Some(&offset(20)));
    // The other way round the transaction's offset wins.
    h.groups.apply_offset("g", "t", 1, Some(offset(20)), 12);
    h.groups.apply_txn_offset("g", 7, "t", 1, offset(30), 13);
    h.groups.complete_transaction(7, true, |_| true);
    assert_eq!(h.groups.offset("g", "t", 1), Some(&offset(30)));
}

#[test]
fn pending_offsets_are_bounded() {
    let mut h = Harness::new(0);
    h.groups = Groups::new(GroupConfig::default(), 7).with_max_pending_offsets(2);
    assert_eq!(h.groups.admit_pending(2), Ok(()));
    assert_eq!(h.groups.admit_pending(3), Err(ErrorCode::PolicyViolation));
    h.groups.apply_txn_offset("g", 7, "t", 0, offset(1), 0);
    // The same partition again replaces the pending offset: still one.
    h.groups.apply_txn_offset("g", 7, "t", 0, offset(2), 1);
    assert_eq!(h.groups.pending_count(), 1);
    h.groups.apply_txn_offset("h", 8, "t", 0, offset(1), 2);
    assert_eq!(h.groups.admit_pending(1), Err(ErrorCode::PolicyViolation));
    h.groups.complete_transaction(8, false, |_| true);
    assert_eq!(h.groups.admit_pending(1), Ok(()));
    assert_eq!(h.groups.offset("g", "t", 0), None);
    h.groups.complete_transaction(7, true, |_| true);
    assert_eq!(h.groups.offset("g", "t", 0), Some(&offset(2)));
}

/// One batch of offset records for group `g`, topic `t` at `base`: transactional
/// when `producer` is set.
fn offsets_batch(base: i64, producer: Option<i64>, parts: &[(i32, i64)]) -> Bytes {
    let mut b = RecordBatchBuilder::new(0).base_offset(base);
    if let Some(pid) = producer {
        b = b.producer(pid, 0, 0).transactional(true);
    }
    for &(partition, o) in parts {
        let key = records::encode_key(&OffsetKey {
            group: "g".into(),
            topic: "t".into(),
            partition,
        });
        let value = records::encode_value(&offset(o));
        b.push(0, Some(&key), Some(&value), &[]);
    }
    b.finish()
}

/// A commit (or abort) marker of `producer` at `base`.
fn marker(base: i64, producer: i64, commit: bool) -> Bytes {
    let mut b = RecordBatchBuilder::new(0)
        .base_offset(base)
        .producer(producer, 0, -1)
        .transactional(true)
        .control(true);
    let key = [0u8, 0, 0, commit as u8];
    b.push(0, Some(&key), Some(&[0, 0, 0, 0, 0, 0][..]), &[]);
    b.finish()
}

#[test]
fn replay_keeps_open_transactions_pending_and_applies_finished_ones() {
    let mut log = Log::memory();
    let batches = [
        offsets_batch(0, None, &[(0, 1), (1, 1), (2, 1)]),
        // Producer 7 commits partition 0 = 10; producer 8 aborts partition 1 = 20;
        // producer 9 writes partition 2 = 30 and never ends its transaction.
        offsets_batch(3, Some(7), &[(0, 10)]),
        offsets_batch(4, Some(8), &[(1, 20)]),
        offsets_batch(5, Some(9), &[(2, 30)]),
        marker(6, 7, true),
        marker(7, 8, false),
        // A plain commit after producer 9's transactional one.
        offsets_batch(8, None, &[(3, 4)]),
    ];
    for b in batches {
        log.append(b).unwrap();
    }
    let p = Partition::new("__consumer_offsets", 0, 1, log, ProducerLimits::default());
    let mut groups = Groups::new(GroupConfig::default(), 1);
    load_partition(&p, 1, &mut groups);
    assert_eq!(groups.offset("g", "t", 0), Some(&offset(10)), "committed");
    assert_eq!(groups.offset("g", "t", 1), Some(&offset(1)), "aborted");
    assert_eq!(groups.offset("g", "t", 2), Some(&offset(1)), "still open");
    assert_eq!(groups.offset("g", "t", 3), Some(&offset(4)));
    assert!(groups.has_pending("g", "t", 2));
    assert!(!groups.has_pending("g", "t", 0));
    assert!(!groups.has_pending("g", "t", 1));
    assert_eq!(groups.pending_offset("g", 9, "t", 2), Some(&offset(30)));
    // The open transaction's marker arrives after the replay.
    groups.complete_transaction(9, true, |_| true);
    assert_eq!(groups.offset("g", "t", 2), Some(&offset(30)));
}
