//! Moving one member towards its target assignment, as Kafka's
//! `CurrentAssignmentBuilder` does (KIP-848 "member reconciliation").
//!
//! - A `Stable` member behind the target epoch computes its next assignment.
//! - An `UnrevokedPartitions` member waits until its heartbeat no longer reports
//!   any partition pending revocation, then moves to `min(epoch + 1, target)` and
//!   computes again.
//! - An `UnreleasedPartitions` member computes again (partitions may have been
//!   released meanwhile).
//!
//! Computing: kept = owned ∩ target; to revoke = owned − kept; to assign = target −
//! kept − partitions another member still owns (those are "unreleased"). With
//! something to revoke (that the member still reports owning) the member keeps its
//! epoch and waits in `UnrevokedPartitions`; otherwise it moves to the target epoch
//! with kept + assignable partitions, `UnreleasedPartitions` while some target
//! partitions are still owned elsewhere, else `Stable`.

use baton_protocol::primitives::Uuid;

use super::member::{Assignment, Current, MemberState};

/// The partitions a heartbeat reports as owned: `None` when the field was null
/// (unchanged since the last heartbeat).
pub type Owned<'a> = Option<&'a Assignment>;

/// Whether the member still owns any of `revoking` (a null owned list counts as
/// owning: nothing says it let them go).
fn owns_any(owned: Owned<'_>, revoking: &Assignment) -> bool {
    let Some(owned) = owned else { return true };
    owned.iter().any(|(t, ps)| {
        revoking
            .get(t)
            .is_some_and(|r| ps.iter().any(|p| r.contains(p)))
    })
}

/// The member's next `Current` towards `target` (its target assignment at
/// `target_epoch`). `owned_elsewhere(topic, partition)` tells whether another
/// member still owns (assigned or pending revocation) a partition.
pub fn reconcile(
    current: &Current,
    target: &Assignment,
    target_epoch: i32,
    owned: Owned<'_>,
    owned_elsewhere: impl Fn(&Uuid, i32) -> bool,
) -> Current {
    match current.state {
        MemberState::Stable if current.epoch == target_epoch => current.clone(),
        MemberState::Stable | MemberState::UnreleasedPartitions => next(
            current,
            current.epoch,
            target,
            target_epoch,
            owned,
            owned_elsewhere,
        ),
        MemberState::UnrevokedPartitions => {
            if owns_any(owned, &current.pending_revocation) {
                return current.clone();
            }
            let epoch = (current.epoch + 1).min(target_epoch);
            next(current, epoch, target, target_epoch, owned, owned_elsewhere)
        }
    }
}

fn next(
    current: &Current,
    epoch: i32,
    target: &Assignment,
    target_epoch: i32,
    owned: Owned<'_>,
    owned_elsewhere: impl Fn(&Uuid, i32) -> bool,
) -> Current {
    let mut assigned = Assignment::new();
    let mut revoking = Assignment::new();
    let mut assigning = Assignment::new();
    let mut unreleased = false;
    let topics: std::collections::BTreeSet<&Uuid> =
        target.keys().chain(current.assigned.keys()).collect();
    for t in topics {
        let empty = Default::default();
        let want = target.get(t).unwrap_or(&empty);
        let have = current.assigned.get(t).unwrap_or(&empty);
        let kept: std::collections::BTreeSet<i32> = have.intersection(want).copied().collect();
        let revoke: std::collections::BTreeSet<i32> = have.difference(&kept).copied().collect();
        let mut assign: std::collections::BTreeSet<i32> = want.difference(&kept).copied().collect();
        let before = assign.len();
        assign.retain(|&p| !owned_elsewhere(t, p));
        unreleased |= assign.len() != before;
        if !kept.is_empty() {
            assigned.insert(*t, kept);
        }
        if !revoke.is_empty() {
            revoking.insert(*t, revoke);
        }
        if !assign.is_empty() {
            assigning.insert(*t, assign);
        }
    }
    let previous_epoch = |new_epoch: i32| {
        if new_epoch != current.epoch {
            current.epoch
        } else {
            current.previous_epoch
        }
    };
    if !revoking.is_empty() && owns_any(owned, &revoking) {
        return Current {
            epoch,
            previous_epoch: previous_epoch(epoch),
            state: MemberState::UnrevokedPartitions,
            assigned,
            pending_revocation: revoking,
        };
    }
    for (t, ps) in assigning {
        assigned.entry(t).or_default().extend(ps);
    }
    Current {
        epoch: target_epoch,
        previous_epoch: previous_epoch(target_epoch),
        state: if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        },
        assigned,
        pending_revocation: Assignment::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::member::from_pairs;
    use super::*;

    fn t(n: u8) -> Uuid {
        Uuid([n; 16])
    }

    fn stable(epoch: i32, a: Assignment) -> Current {
        Current {
            epoch,
            previous_epoch: epoch - 1,
            state: MemberState::Stable,
            assigned: a,
            pending_revocation: Assignment::new(),
        }
    }

    #[test]
    fn stable_at_target_is_unchanged() {
        let c = stable(3, from_pairs([(t(1), vec![0, 1])]));
        assert_eq!(reconcile(&c, &c.assigned.clone(), 3, None, |_, _| false), c);
    }

    #[test]
    fn growing_assignment_moves_to_target_epoch_at_once() {
        let c = stable(3, from_pairs([(t(1), vec![0])]));
        let target = from_pairs([(t(1), vec![0, 1])]);
        let n = reconcile(&c, &target, 5, None, |_, _| false);
        assert_eq!(n.epoch, 5);
        assert_eq!(n.previous_epoch, 3);
        assert_eq!(n.state, MemberState::Stable);
        assert_eq!(n.assigned, target);
    }

    #[test]
    fn revocation_first_then_next_epoch() {
        let c = stable(3, from_pairs([(t(1), vec![0, 1])]));
        let target = from_pairs([(t(1), vec![0])]);
        let owned = c.assigned.clone();
        let n = reconcile(&c, &target, 4, Some(&owned), |_, _| false);
        assert_eq!(n.state, MemberState::UnrevokedPartitions);
        assert_eq!(n.epoch, 3, "keeps its epoch until it revokes");
        assert_eq!(n.assigned, from_pairs([(t(1), vec![0])]));
        assert_eq!(n.pending_revocation, from_pairs([(t(1), vec![1])]));
        // Still reporting partition 1: no progress.
        assert_eq!(reconcile(&n, &target, 4, Some(&owned), |_, _| false), n);
        // Null owned list: no progress either.
        assert_eq!(reconcile(&n, &target, 4, None, |_, _| false), n);
        // Revoked: moves to the target epoch.
        let now_owned = from_pairs([(t(1), vec![0])]);
        let m = reconcile(&n, &target, 4, Some(&now_owned), |_, _| false);
        assert_eq!(m.state, MemberState::Stable);
        assert_eq!(m.epoch, 4);
        assert_eq!(m.previous_epoch, 3);
        assert!(m.pending_revocation.is_empty());
    }

    #[test]
    fn partitions_owned_elsewhere_wait_until_released() {
        let c = stable(1, Assignment::new());
        let target = from_pairs([(t(1), vec![0, 1])]);
        let n = reconcile(&c, &target, 2, Some(&Assignment::new()), |_, p| p == 1);
        assert_eq!(n.state, MemberState::UnreleasedPartitions);
        assert_eq!(n.epoch, 2);
        assert_eq!(n.assigned, from_pairs([(t(1), vec![0])]));
        let m = reconcile(&n, &target, 2, None, |_, _| false);
        assert_eq!(m.state, MemberState::Stable);
        assert_eq!(m.assigned, target);
    }

    #[test]
    fn revoking_steps_one_epoch_at_a_time() {
        let mut c = stable(1, from_pairs([(t(1), vec![0, 1, 2])]));
        c.state = MemberState::UnrevokedPartitions;
        c.assigned = from_pairs([(t(1), vec![0])]);
        c.pending_revocation = from_pairs([(t(1), vec![1, 2])]);
        let target = from_pairs([(t(1), vec![0])]);
        let owned = from_pairs([(t(1), vec![0])]);
        let n = reconcile(&c, &target, 5, Some(&owned), |_, _| false);
        // min(epoch + 1, target) is only the base of the next computation, which
        // has nothing left to revoke and so lands on the target epoch.
        assert_eq!(n.epoch, 5);
        assert_eq!(n.state, MemberState::Stable);
    }
}
