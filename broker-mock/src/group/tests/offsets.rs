//! OffsetCommit validation.

use super::*;

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
    h.groups.apply_offset("s", "t", 0, Some(o.clone()), 0);
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
