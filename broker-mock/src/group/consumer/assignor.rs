//! The server-side assignors of consumer groups (KIP-848): `uniform` (Kafka's
//! default) and `range`.
//!
//! Both take every member's subscribed topic ids and the partition counts, and
//! return a target assignment for every member; every partition of a subscribed
//! topic is assigned to exactly one member subscribed to it.
//!
//! - `uniform` spreads partitions so that member sizes differ by at most one where
//!   subscriptions allow, and keeps partitions where they are (sticky: the
//!   previous target is the starting point, then only surplus moves).
//! - `range` gives each topic's members (ordered by member id) contiguous ranges:
//!   `partitions / members` each, the first `partitions % members` one more.
//!
//! Deviation from Kafka: neither assignor is rack-aware, and `range` is not sticky.

use std::collections::{BTreeMap, BTreeSet};

use baton_protocol::primitives::Uuid;

use super::member::Assignment;

/// The assignor used when no member asks for one (`group.consumer.assignors`'
/// first entry in Kafka).
pub const DEFAULT_ASSIGNOR: &str = "uniform";
/// The assignors this coordinator has.
pub const ASSIGNORS: [&str; 2] = ["uniform", "range"];

/// One member's input.
#[derive(Debug, Clone, Default)]
pub struct AssignorMember {
    /// Topic ids it subscribes to (resolved).
    pub topics: BTreeSet<Uuid>,
    /// Its previous target assignment (stickiness).
    pub previous: Assignment,
}

/// Runs the assignor `name` (`uniform` for anything unknown).
pub fn assign(
    name: &str,
    members: &BTreeMap<String, AssignorMember>,
    partitions: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    match name {
        "range" => range(members, partitions),
        _ => uniform(members, partitions),
    }
}

/// Kafka's range assignment, topic by topic.
pub fn range(
    members: &BTreeMap<String, AssignorMember>,
    partitions: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    for (topic, &n) in partitions {
        let subs: Vec<&String> = members
            .iter()
            .filter(|(_, m)| m.topics.contains(topic))
            .map(|(id, _)| id)
            .collect();
        if subs.is_empty() || n <= 0 {
            continue;
        }
        let per = n / subs.len() as i32;
        let extra = n % subs.len() as i32;
        let mut next = 0;
        for (i, id) in subs.into_iter().enumerate() {
            let take = per + i32::from((i as i32) < extra);
            if take > 0 {
                if let Some(a) = out.get_mut(id) {
                    a.entry(*topic).or_default().extend(next..next + take);
                }
            }
            next += take;
        }
    }
    out
}

/// A balanced, sticky assignment.
pub fn uniform(
    members: &BTreeMap<String, AssignorMember>,
    partitions: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    let ids: Vec<&String> = members.keys().collect();
    let index: BTreeMap<&String, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let mut owned: Vec<BTreeSet<(Uuid, i32)>> = vec![BTreeSet::new(); ids.len()];
    let mut owner: BTreeMap<(Uuid, i32), usize> = BTreeMap::new();
    let eligible = |m: usize, t: &Uuid| members[ids[m]].topics.contains(t);
    // Every partition some member can take.
    let mut all: Vec<(Uuid, i32)> = Vec::new();
    for (t, &n) in partitions {
        if members.values().any(|m| m.topics.contains(t)) {
            all.extend((0..n.max(0)).map(|p| (*t, p)));
        }
    }
    // Keep previous targets that are still valid.
    for (id, m) in members {
        let i = index[id];
        for (t, ps) in &m.previous {
            let Some(&n) = partitions.get(t) else {
                continue;
            };
            if !m.topics.contains(t) {
                continue;
            }
            for &p in ps {
                if p < n && !owner.contains_key(&(*t, p)) {
                    owner.insert((*t, p), i);
                    owned[i].insert((*t, p));
                }
            }
        }
    }
    // Unowned partitions, those with the fewest candidates first, each to the
    // eligible member holding the fewest.
    let candidates = |t: &Uuid| (0..ids.len()).filter(|&m| eligible(m, t)).count();
    let mut free: Vec<(usize, Uuid, i32)> = all
        .iter()
        .filter(|tp| !owner.contains_key(tp))
        .map(|&(t, p)| (candidates(&t), t, p))
        .collect();
    free.sort();
    for (_, t, p) in free {
        let best = (0..ids.len())
            .filter(|&m| eligible(m, &t))
            .min_by_key(|&m| (owned[m].len(), m));
        if let Some(m) = best {
            owner.insert((t, p), m);
            owned[m].insert((t, p));
        }
    }
    // Balance: move partitions from a fuller member to an eligible emptier one
    // (more than one apart) until none can move. Every move lowers the sum of
    // squared sizes, so this ends; the bound is a safety net.
    let mut budget = all.len().saturating_mul(2) + 16;
    loop {
        let mut moved = false;
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&m| std::cmp::Reverse((owned[m].len(), std::cmp::Reverse(m))));
        'outer: for &from in &order {
            // Prefer moving the highest partitions, keeping low ones stable.
            let parts: Vec<(Uuid, i32)> = owned[from].iter().rev().copied().collect();
            for (t, p) in parts {
                let to = (0..ids.len())
                    .filter(|&m| m != from && eligible(m, &t))
                    .filter(|&m| owned[m].len() + 1 < owned[from].len())
                    .min_by_key(|&m| (owned[m].len(), m));
                if let Some(to) = to {
                    owned[from].remove(&(t, p));
                    owned[to].insert((t, p));
                    moved = true;
                    break 'outer;
                }
            }
        }
        budget = budget.saturating_sub(1);
        if !moved || budget == 0 {
            break;
        }
    }
    ids.iter()
        .enumerate()
        .map(|(i, id)| {
            let mut a = Assignment::new();
            for &(t, p) in &owned[i] {
                a.entry(t).or_default().insert(p);
            }
            ((*id).clone(), a)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::member::{count, from_pairs};
    use super::*;

    fn t(n: u8) -> Uuid {
        Uuid([n; 16])
    }

    fn members(spec: &[(&str, &[u8])]) -> BTreeMap<String, AssignorMember> {
        spec.iter()
            .map(|(id, ts)| {
                (
                    id.to_string(),
                    AssignorMember {
                        topics: ts.iter().map(|&n| t(n)).collect(),
                        previous: Assignment::new(),
                    },
                )
            })
            .collect()
    }

    /// Every partition of a subscribed topic exactly once, to a subscriber.
    fn check_complete(
        ms: &BTreeMap<String, AssignorMember>,
        parts: &BTreeMap<Uuid, i32>,
        out: &BTreeMap<String, Assignment>,
    ) {
        let mut seen = BTreeSet::new();
        for (id, a) in out {
            for (topic, ps) in a {
                assert!(ms[id].topics.contains(topic), "{id} not subscribed");
                for &p in ps {
                    assert!(seen.insert((*topic, p)), "{p} twice");
                }
            }
        }
        let want: usize = parts
            .iter()
            .filter(|(tp, _)| ms.values().any(|m| m.topics.contains(tp)))
            .map(|(_, &n)| n as usize)
            .sum();
        assert_eq!(seen.len(), want);
    }

    #[test]
    fn range_gives_contiguous_ranges() {
        let ms = members(&[("a", &[1]), ("b", &[1]), ("c", &[1])]);
        let parts = BTreeMap::from([(t(1), 7)]);
        let out = range(&ms, &parts);
        assert_eq!(out["a"], from_pairs([(t(1), vec![0, 1, 2])]));
        assert_eq!(out["b"], from_pairs([(t(1), vec![3, 4])]));
        assert_eq!(out["c"], from_pairs([(t(1), vec![5, 6])]));
        check_complete(&ms, &parts, &out);
    }

    #[test]
    fn uniform_balances_and_sticks() {
        let mut ms = members(&[("a", &[1, 2]), ("b", &[1, 2])]);
        let parts = BTreeMap::from([(t(1), 3), (t(2), 3)]);
        let first = uniform(&ms, &parts);
        check_complete(&ms, &parts, &first);
        assert_eq!(count(&first["a"]), 3);
        assert_eq!(count(&first["b"]), 3);
        // A third member joins: it takes two, the others each keep two of theirs.
        for (id, a) in &first {
            ms.get_mut(id).unwrap().previous = a.clone();
        }
        ms.insert(
            "c".into(),
            AssignorMember {
                topics: [t(1), t(2)].into(),
                previous: Assignment::new(),
            },
        );
        let second = uniform(&ms, &parts);
        check_complete(&ms, &parts, &second);
        for id in ["a", "b", "c"] {
            assert_eq!(count(&second[id]), 2, "{id}");
        }
        for id in ["a", "b"] {
            for (topic, ps) in &second[id] {
                assert!(ps.is_subset(&first[id][topic]), "{id} got new partitions");
            }
        }
    }

    #[test]
    fn uniform_with_different_subscriptions() {
        let ms = members(&[("a", &[1]), ("b", &[1, 2]), ("c", &[2])]);
        let parts = BTreeMap::from([(t(1), 4), (t(2), 2), (t(3), 5)]);
        let out = uniform(&ms, &parts);
        check_complete(&ms, &parts, &out);
        assert_eq!(count(&out["a"]) + count(&out["b"]) + count(&out["c"]), 6);
        assert!(out.values().all(|a| count(a) == 2));
    }

    #[test]
    fn seeded_random_inputs_are_complete_and_balanced() {
        let mut rng = baton_protocol::testing::Rng::new(baton_testkit::seed());
        for _ in 0..200 {
            let nm = 1 + rng.below(6) as usize;
            let nt = 1 + rng.below(4) as u8;
            let parts: BTreeMap<Uuid, i32> =
                (1..=nt).map(|n| (t(n), rng.below(9) as i32)).collect();
            let mut ms = BTreeMap::new();
            for i in 0..nm {
                ms.insert(
                    format!("m{i}"),
                    AssignorMember {
                        topics: (1..=nt).map(t).collect(),
                        previous: Assignment::new(),
                    },
                );
            }
            for name in ASSIGNORS {
                let out = assign(name, &ms, &parts);
                check_complete(&ms, &parts, &out);
            }
            let out = uniform(&ms, &parts);
            let sizes: Vec<usize> = out.values().map(count).collect();
            let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            assert!(hi - lo <= 1, "{sizes:?}");
        }
    }
}
