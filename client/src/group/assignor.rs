//! Partition assignors: the pure functions the group leader runs to split the
//! subscribed partitions among the members.
//!
//! The three built-in assignors carry the names Apache Kafka's consumers use, so a
//! Baton member can share a group with Java or librdkafka members that speak the
//! same assignor:
//!
//! | assignor | name | rebalance protocol |
//! |---|---|---|
//! | [`RangeAssignor`] | `range` | eager |
//! | [`RoundRobinAssignor`] | `roundrobin` | eager |
//! | [`CooperativeStickyAssignor`] | `cooperative-sticky` | cooperative (KIP-429) |
//!
//! Members are ordered as Kafka orders them: static members (those with a
//! `group.instance.id`) first, by instance id, then dynamic members by member id.
//! That makes an assignment a function of the subscriptions alone, whichever member
//! happens to lead.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

/// One partition of one topic.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// The topic.
    pub topic: Arc<str>,
    /// The partition index.
    pub partition: i32,
}

impl TopicPartition {
    /// `topic`/`partition`.
    pub fn new(topic: impl Into<Arc<str>>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.topic, self.partition)
    }
}

/// How a group moves partitions between members during a rebalance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RebalanceProtocol {
    /// Every member gives up all its partitions before joining, then takes its new
    /// assignment ("stop the world").
    Eager,
    /// KIP-429: members keep their partitions while rejoining; only partitions that
    /// move are revoked, and they are handed to their new owner in a second
    /// rebalance once revoked.
    Cooperative,
}

/// One member's subscription, as the group leader sees it in JoinGroup.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberSubscription {
    /// The member id the coordinator gave the member.
    pub member_id: String,
    /// The member's static `group.instance.id`, if any.
    pub group_instance_id: Option<String>,
    /// The topics the member subscribes to.
    pub topics: Vec<String>,
    /// The partitions the member says it owns (subscription v1+; empty for eager
    /// members, which give up everything before joining).
    pub owned_partitions: Vec<TopicPartition>,
    /// The generation of `owned_partitions` (subscription v2+), `None` if the member
    /// wrote an older subscription.
    pub generation: Option<i32>,
    /// The member's rack (subscription v3+).
    pub rack_id: Option<String>,
    /// Assignor-specific bytes.
    pub user_data: Option<Bytes>,
}

/// What the leader hands each member: member id → its partitions, sorted. Every
/// member of the input has an entry, possibly empty.
pub type GroupAssignment = BTreeMap<String, Vec<TopicPartition>>;

/// A partition assignment strategy.
///
/// Implementations must be deterministic: the same input gives the same output,
/// whichever member runs it.
pub trait Assignor: Send + Sync + fmt::Debug {
    /// The protocol name announced in JoinGroup (what other clients call the
    /// assignor).
    fn name(&self) -> &str;

    /// The rebalance protocol the assignor supports. A cooperative assignor must
    /// never hand a partition to a member while another member still owns it.
    fn protocol(&self) -> RebalanceProtocol {
        RebalanceProtocol::Eager
    }

    /// The user data this member attaches to its subscription, given the generation
    /// of the partitions it owns (-1 if none).
    fn user_data(&self, generation: i32) -> Option<Bytes> {
        let _ = generation;
        None
    }

    /// Assigns the partitions of `partitions_per_topic` (topic → partition count;
    /// topics nobody subscribes to are ignored) to `members`.
    fn assign(
        &self,
        partitions_per_topic: &BTreeMap<String, i32>,
        members: &[MemberSubscription],
    ) -> GroupAssignment;
}

/// Kafka's member order: static members first (by instance id), then dynamic ones by
/// member id. Returns indexes into `members`.
fn member_order(members: &[MemberSubscription]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (&members[a], &members[b]);
        match (&a.group_instance_id, &b.group_instance_id) {
            (Some(x), Some(y)) => x.cmp(y).then_with(|| a.member_id.cmp(&b.member_id)),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => a.member_id.cmp(&b.member_id),
        }
    });
    order
}

fn empty_assignment(members: &[MemberSubscription]) -> GroupAssignment {
    members
        .iter()
        .map(|m| (m.member_id.clone(), Vec::new()))
        .collect()
}

/// Topic names as shared `Arc<str>`s, one allocation per topic.
fn topic_arcs(partitions_per_topic: &BTreeMap<String, i32>) -> BTreeMap<&str, Arc<str>> {
    partitions_per_topic
        .keys()
        .map(|t| (t.as_str(), Arc::from(t.as_str())))
        .collect()
}

/// Kafka's `range` assignor: per topic, the subscribed members in order each take a
/// contiguous range of partitions; the first `count % members` take one extra.
#[derive(Debug, Clone, Copy, Default)]
pub struct RangeAssignor;

impl Assignor for RangeAssignor {
    fn name(&self) -> &str {
        "range"
    }

    fn assign(
        &self,
        partitions_per_topic: &BTreeMap<String, i32>,
        members: &[MemberSubscription],
    ) -> GroupAssignment {
        let mut out = empty_assignment(members);
        let order = member_order(members);
        let arcs = topic_arcs(partitions_per_topic);
        for (topic, &count) in partitions_per_topic {
            let subscribed: Vec<usize> = order
                .iter()
                .copied()
                .filter(|&i| members[i].topics.iter().any(|t| t == topic))
                .collect();
            if subscribed.is_empty() || count <= 0 {
                continue;
            }
            let n = subscribed.len() as i32;
            let (per, extra) = (count / n, count % n);
            for (k, &i) in subscribed.iter().enumerate() {
                let k = k as i32;
                let start = k * per + k.min(extra);
                let len = per + i32::from(k < extra);
                let list = out.get_mut(&members[i].member_id).expect("every member");
                list.extend((start..start + len).map(|p| TopicPartition {
                    topic: arcs[topic.as_str()].clone(),
                    partition: p,
                }));
            }
        }
        for list in out.values_mut() {
            list.sort();
        }
        out
    }
}

/// Kafka's `roundrobin` assignor: every subscribed partition, sorted by topic then
/// partition, goes to the next member in a circular order that skips members not
/// subscribed to its topic.
#[derive(Debug, Clone, Copy, Default)]
pub struct RoundRobinAssignor;

impl Assignor for RoundRobinAssignor {
    fn name(&self) -> &str {
        "roundrobin"
    }

    fn assign(
        &self,
        partitions_per_topic: &BTreeMap<String, i32>,
        members: &[MemberSubscription],
    ) -> GroupAssignment {
        let mut out = empty_assignment(members);
        let order = member_order(members);
        if order.is_empty() {
            return out;
        }
        let arcs = topic_arcs(partitions_per_topic);
        let mut cursor = 0usize;
        for (topic, &count) in partitions_per_topic {
            if !members.iter().any(|m| m.topics.iter().any(|t| t == topic)) {
                continue;
            }
            for p in 0..count.max(0) {
                // Some member is subscribed, so this finds one within a full turn.
                while !members[order[cursor]].topics.iter().any(|t| t == topic) {
                    cursor = (cursor + 1) % order.len();
                }
                out.get_mut(&members[order[cursor]].member_id)
                    .expect("every member")
                    .push(TopicPartition {
                        topic: arcs[topic.as_str()].clone(),
                        partition: p,
                    });
                cursor = (cursor + 1) % order.len();
            }
        }
        out
    }
}

/// Kafka's `cooperative-sticky` assignor (KIP-429): a balanced assignment that
/// keeps as many partitions as possible with their current owner, adjusted for
/// cooperative rebalancing.
///
/// Balance: when every member subscribes to the same topics, partition counts
/// differ by at most one, and the members that already own the most keep the larger
/// shares, so the fewest partitions move. With differing subscriptions the
/// assignment is balanced greedily (each partition to the least-loaded eligible
/// member, then moves from members holding two or more than an eligible peer).
///
/// Ownership claims come from each member's owned partitions; if two members claim
/// a partition, the claim with the higher generation wins and equal claims cancel.
///
/// Cooperative adjustment: a partition whose new owner differs from a member that
/// claims it now is left out of this round's assignment. The claimant revokes it and
/// rejoins, and the next rebalance hands it over, so no partition is ever consumed by
/// two members at once.
///
/// The member's user data is its generation as a big-endian `int32`, as Kafka's
/// assignor writes for readers of subscription v0/v1.
#[derive(Debug, Clone, Copy, Default)]
pub struct CooperativeStickyAssignor;

impl CooperativeStickyAssignor {
    fn generation_of(m: &MemberSubscription) -> i32 {
        if let Some(g) = m.generation {
            return g;
        }
        match m.user_data.as_deref() {
            Some(&[a, b, c, d, ..]) => i32::from_be_bytes([a, b, c, d]),
            _ => -1,
        }
    }
}

impl Assignor for CooperativeStickyAssignor {
    fn name(&self) -> &str {
        "cooperative-sticky"
    }

    fn protocol(&self) -> RebalanceProtocol {
        RebalanceProtocol::Cooperative
    }

    fn user_data(&self, generation: i32) -> Option<Bytes> {
        Some(Bytes::copy_from_slice(&generation.to_be_bytes()))
    }

    fn assign(
        &self,
        partitions_per_topic: &BTreeMap<String, i32>,
        members: &[MemberSubscription],
    ) -> GroupAssignment {
        let sticky = sticky_assign(partitions_per_topic, members, Self::generation_of);
        // Claimants other than the new owner: hold the partition back this round.
        let mut claimants: BTreeMap<(&str, i32), Vec<usize>> = BTreeMap::new();
        for (i, m) in members.iter().enumerate() {
            for tp in &m.owned_partitions {
                claimants
                    .entry((&*tp.topic, tp.partition))
                    .or_default()
                    .push(i);
            }
        }
        let mut out = empty_assignment(members);
        for (i, parts) in sticky.into_iter().enumerate() {
            let list = out.get_mut(&members[i].member_id).expect("every member");
            for tp in parts {
                let held_back = claimants
                    .get(&(&*tp.topic, tp.partition))
                    .is_some_and(|c| c.iter().any(|&j| j != i));
                if !held_back {
                    list.push(tp);
                }
            }
        }
        out
    }
}

/// The sticky assignment before the cooperative adjustment, indexed like `members`.
fn sticky_assign(
    partitions_per_topic: &BTreeMap<String, i32>,
    members: &[MemberSubscription],
    generation_of: fn(&MemberSubscription) -> i32,
) -> Vec<BTreeSet<TopicPartition>> {
    let order = member_order(members);
    let arcs = topic_arcs(partitions_per_topic);
    let subscribed: Vec<BTreeSet<&str>> = members
        .iter()
        .map(|m| {
            m.topics
                .iter()
                .map(String::as_str)
                .filter(|t| partitions_per_topic.contains_key(*t))
                .collect()
        })
        .collect();
    // Every partition someone subscribes to.
    let mut all: Vec<TopicPartition> = Vec::new();
    for (topic, &count) in partitions_per_topic {
        if subscribed.iter().any(|s| s.contains(topic.as_str())) {
            all.extend((0..count.max(0)).map(|p| TopicPartition {
                topic: arcs[topic.as_str()].clone(),
                partition: p,
            }));
        }
    }
    // Valid claims: the partition exists, the claimant still subscribes to its topic,
    // and its generation is the highest among claimants (ties cancel).
    let mut best: BTreeMap<TopicPartition, (i32, Option<usize>)> = BTreeMap::new();
    for &i in &order {
        let m = &members[i];
        let generation = generation_of(m);
        for tp in &m.owned_partitions {
            let exists = partitions_per_topic
                .get(&*tp.topic)
                .is_some_and(|&n| (0..n).contains(&tp.partition));
            if !exists || !subscribed[i].contains(&*tp.topic) {
                continue;
            }
            let tp = TopicPartition {
                topic: arcs[&*tp.topic].clone(),
                partition: tp.partition,
            };
            match best.get_mut(&tp) {
                None => {
                    best.insert(tp, (generation, Some(i)));
                }
                Some(entry) if generation > entry.0 => *entry = (generation, Some(i)),
                Some(entry) if generation == entry.0 && entry.1 != Some(i) => entry.1 = None,
                Some(_) => {}
            }
        }
    }
    let mut owned: Vec<BTreeSet<TopicPartition>> = vec![BTreeSet::new(); members.len()];
    for (tp, (_, owner)) in best {
        if let Some(i) = owner {
            owned[i].insert(tp);
        }
    }

    let homogeneous = subscribed.windows(2).all(|w| w[0] == w[1]);
    if homogeneous {
        sticky_homogeneous(
            &order,
            &all,
            owned,
            subscribed.first().is_some_and(|s| !s.is_empty()),
        )
    } else {
        sticky_general(&order, &all, &subscribed, owned)
    }
}

/// Every member subscribes to the same topics: quotas `floor` / `floor + 1`, the
/// larger ones to the members owning the most.
fn sticky_homogeneous(
    order: &[usize],
    all: &[TopicPartition],
    owned: Vec<BTreeSet<TopicPartition>>,
    any_topic: bool,
) -> Vec<BTreeSet<TopicPartition>> {
    let n = owned.len();
    if n == 0 || !any_topic {
        return vec![BTreeSet::new(); n];
    }
    let floor = all.len() / n;
    let extra = all.len() % n;
    // Members by owned count (desc), then Kafka order: the first `extra` get floor+1.
    let mut by_owned: Vec<usize> = order.to_vec();
    by_owned.sort_by_key(|&i| std::cmp::Reverse(owned[i].len()));
    let mut quota = vec![floor; n];
    for &i in by_owned.iter().take(extra) {
        quota[i] = floor + 1;
    }
    let mut result: Vec<BTreeSet<TopicPartition>> = vec![BTreeSet::new(); n];
    for &i in order {
        for tp in owned[i].iter().take(quota[i]) {
            result[i].insert(tp.clone());
        }
    }
    let taken: BTreeSet<TopicPartition> = result.iter().flatten().cloned().collect();
    let mut free = all.iter().filter(|tp| !taken.contains(*tp));
    for &i in order {
        while result[i].len() < quota[i] {
            match free.next() {
                Some(tp) => {
                    result[i].insert(tp.clone());
                }
                None => break,
            }
        }
    }
    result
}

/// Members subscribe to different topics: keep valid claims, place the rest on the
/// least-loaded eligible member (most constrained partitions first), then move
/// partitions from a member to an eligible one holding at least two fewer until no
/// such move remains. Each move lowers the sum of squared loads, so this ends.
fn sticky_general(
    order: &[usize],
    all: &[TopicPartition],
    subscribed: &[BTreeSet<&str>],
    owned: Vec<BTreeSet<TopicPartition>>,
) -> Vec<BTreeSet<TopicPartition>> {
    let mut result = owned.clone();
    let taken: BTreeSet<&TopicPartition> = owned.iter().flatten().collect();
    let eligible = |tp: &TopicPartition| -> Vec<usize> {
        order
            .iter()
            .copied()
            .filter(|&i| subscribed[i].contains(&*tp.topic))
            .collect()
    };
    let mut free: Vec<(usize, &TopicPartition)> = all
        .iter()
        .filter(|tp| !taken.contains(tp))
        .map(|tp| (eligible(tp).len(), tp))
        .collect();
    free.sort();
    for (_, tp) in free {
        let best = eligible(tp).into_iter().min_by_key(|&i| result[i].len());
        if let Some(i) = best {
            result[i].insert(tp.clone());
        }
    }
    loop {
        let mut by_load: Vec<usize> = order.to_vec();
        by_load.sort_by_key(|&i| std::cmp::Reverse(result[i].len()));
        let mut moved = false;
        'search: for &donor in &by_load {
            for &receiver in by_load.iter().rev() {
                if result[donor].len() < result[receiver].len() + 2 {
                    break;
                }
                // Prefer giving away a partition the donor did not own before.
                let pick = result[donor]
                    .iter()
                    .filter(|tp| subscribed[receiver].contains(&*tp.topic))
                    .min_by_key(|tp| owned[donor].contains(*tp))
                    .cloned();
                if let Some(tp) = pick {
                    result[donor].remove(&tp);
                    result[receiver].insert(tp);
                    moved = true;
                    break 'search;
                }
            }
        }
        if !moved {
            return result;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// splitmix64: a small seeded generator for reproducible cases.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }
    }

    fn seed() -> u64 {
        let seed = std::env::var("BATON_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        println!("seed {seed} (BATON_SEED={seed} replays it)");
        seed
    }

    fn member(id: &str, topics: &[&str]) -> MemberSubscription {
        MemberSubscription {
            member_id: id.to_string(),
            topics: topics.iter().map(|t| t.to_string()).collect(),
            ..Default::default()
        }
    }

    fn tps(list: &[(&str, i32)]) -> Vec<TopicPartition> {
        list.iter()
            .map(|&(t, p)| TopicPartition::new(t, p))
            .collect()
    }

    fn counts(topics: &[(&str, i32)]) -> BTreeMap<String, i32> {
        topics.iter().map(|&(t, n)| (t.to_string(), n)).collect()
    }

    /// Every subscribed partition is assigned exactly once, only to a subscriber.
    fn check_complete(
        partitions: &BTreeMap<String, i32>,
        members: &[MemberSubscription],
        a: &GroupAssignment,
    ) {
        let mut seen = BTreeSet::new();
        for m in members {
            for tp in &a[&m.member_id] {
                assert!(
                    m.topics.iter().any(|t| **t == *tp.topic),
                    "{tp} to non-subscriber {}",
                    m.member_id
                );
                assert!(seen.insert(tp.clone()), "{tp} assigned twice");
            }
        }
        for (t, &n) in partitions {
            if members.iter().any(|m| m.topics.contains(t)) {
                for p in 0..n {
                    assert!(
                        seen.contains(&TopicPartition::new(t.as_str(), p)),
                        "{t}/{p} unassigned"
                    );
                }
            }
        }
    }

    #[test]
    fn range_matches_kafka_layout() {
        let partitions = counts(&[("t0", 3), ("t1", 3)]);
        let members = [member("c0", &["t0", "t1"]), member("c1", &["t0", "t1"])];
        let a = RangeAssignor.assign(&partitions, &members);
        assert_eq!(a["c0"], tps(&[("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)]));
        assert_eq!(a["c1"], tps(&[("t0", 2), ("t1", 2)]));
    }

    #[test]
    fn range_orders_static_members_first() {
        let partitions = counts(&[("t", 4)]);
        let mut a = member("a", &["t"]);
        let mut z = member("z", &["t"]);
        z.group_instance_id = Some("instance-1".into());
        a.group_instance_id = None;
        let out = RangeAssignor.assign(&partitions, &[a, z]);
        assert_eq!(out["z"], tps(&[("t", 0), ("t", 1)]));
        assert_eq!(out["a"], tps(&[("t", 2), ("t", 3)]));
    }

    #[test]
    fn roundrobin_matches_kafka_layout() {
        // Kafka's documented example: C0 on t0, C1 on t0+t1, C2 on t0+t1+t2.
        let partitions = counts(&[("t0", 1), ("t1", 2), ("t2", 3)]);
        let members = [
            member("c0", &["t0"]),
            member("c1", &["t0", "t1"]),
            member("c2", &["t0", "t1", "t2"]),
        ];
        let a = RoundRobinAssignor.assign(&partitions, &members);
        assert_eq!(a["c0"], tps(&[("t0", 0)]));
        assert_eq!(a["c1"], tps(&[("t1", 0)]));
        assert_eq!(a["c2"], tps(&[("t1", 1), ("t2", 0), ("t2", 1), ("t2", 2)]));
    }

    fn random_case(rng: &mut Rng) -> (BTreeMap<String, i32>, Vec<MemberSubscription>) {
        let topics = 1 + rng.below(4) as usize;
        let partitions: BTreeMap<String, i32> = (0..topics)
            .map(|t| (format!("t{t}"), 1 + rng.below(16) as i32))
            .collect();
        let names: Vec<&String> = partitions.keys().collect();
        let n = 1 + rng.below(8) as usize;
        let members = (0..n)
            .map(|i| {
                let mut topics: Vec<String> = names
                    .iter()
                    .filter(|_| rng.below(3) > 0)
                    .map(|t| t.to_string())
                    .collect();
                if topics.is_empty() {
                    topics.push(names[rng.below(names.len() as u64) as usize].clone());
                }
                let mut m = member(&format!("m{:02}-{}", i, rng.below(1000)), &[]);
                m.topics = topics;
                if rng.below(4) == 0 {
                    m.group_instance_id = Some(format!("static-{}", rng.below(100)));
                }
                m
            })
            .collect();
        (partitions, members)
    }

    #[test]
    fn eager_assignors_are_complete_and_independent_of_member_order() {
        let seed = seed();
        let mut rng = Rng(seed);
        for case in 0..300 {
            let (partitions, mut members) = random_case(&mut rng);
            for assignor in [&RangeAssignor as &dyn Assignor, &RoundRobinAssignor] {
                let a = assignor.assign(&partitions, &members);
                check_complete(&partitions, &members, &a);
                // Shuffle the input: the output must not change.
                let mut shuffled = members.clone();
                for i in (1..shuffled.len()).rev() {
                    shuffled.swap(i, rng.below(i as u64 + 1) as usize);
                }
                assert_eq!(
                    assignor.assign(&partitions, &shuffled),
                    a,
                    "seed {seed} case {case} {}",
                    assignor.name()
                );
            }
            members.clear();
        }
    }

    #[test]
    fn roundrobin_balances_equal_subscriptions() {
        let seed = seed();
        let mut rng = Rng(seed);
        for case in 0..200 {
            let partitions =
                counts(&[("a", 1 + rng.below(20) as i32), ("b", rng.below(20) as i32)]);
            let n = 1 + rng.below(7) as usize;
            let members: Vec<_> = (0..n)
                .map(|i| member(&format!("m{i}"), &["a", "b"]))
                .collect();
            let a = RoundRobinAssignor.assign(&partitions, &members);
            let loads: Vec<usize> = a.values().map(Vec::len).collect();
            let (min, max) = (loads.iter().min().unwrap(), loads.iter().max().unwrap());
            assert!(max - min <= 1, "seed {seed} case {case}: {loads:?}");
        }
    }

    /// Runs the cooperative protocol to a fixed point: each round, members own what
    /// they were assigned; a round that held partitions back is followed by another.
    /// Returns the final ownership and checks the invariants of every round.
    fn cooperative_rounds(
        seed: u64,
        partitions: &BTreeMap<String, i32>,
        members: &mut [MemberSubscription],
        generation: &mut i32,
    ) -> GroupAssignment {
        for round in 0..4 {
            let before: BTreeMap<String, Vec<TopicPartition>> = members
                .iter()
                .map(|m| (m.member_id.clone(), m.owned_partitions.clone()))
                .collect();
            let a = CooperativeStickyAssignor.assign(partitions, members);
            // Never give a member a partition another member still owns.
            for (id, list) in &a {
                for tp in list {
                    for (other, owned) in &before {
                        assert!(
                            other == id || !owned.contains(tp),
                            "seed {seed} round {round}: {tp} given to {id} while {other} owns it"
                        );
                    }
                }
            }
            *generation += 1;
            let mut revoked_any = false;
            for m in members.iter_mut() {
                let new = &a[&m.member_id];
                revoked_any |= m.owned_partitions.iter().any(|tp| !new.contains(tp));
                m.owned_partitions = new.clone();
                m.generation = Some(*generation);
            }
            let assigned: usize = a.values().map(Vec::len).sum();
            let total: i32 = partitions
                .iter()
                .filter(|(t, _)| members.iter().any(|m| m.topics.contains(t)))
                .map(|(_, n)| n)
                .sum();
            if !revoked_any && assigned == total as usize {
                return a;
            }
        }
        panic!("seed {seed}: cooperative rebalancing did not settle in 4 rounds");
    }

    #[test]
    fn cooperative_sticky_is_balanced_and_moves_the_minimum() {
        let seed = seed();
        let mut rng = Rng(seed);
        for case in 0..200 {
            let partitions =
                counts(&[("x", 1 + rng.below(40) as i32), ("y", rng.below(10) as i32)]);
            let total: i32 = partitions.values().sum();
            let mut members: Vec<MemberSubscription> = (0..1 + rng.below(6))
                .map(|i| member(&format!("m{i}"), &["x", "y"]))
                .collect();
            let mut generation = 0;
            cooperative_rounds(seed, &partitions, &mut members, &mut generation);
            for step in 0..6 {
                // Remove or add a member.
                if members.len() > 1 && rng.below(2) == 0 {
                    members.remove(rng.below(members.len() as u64) as usize);
                } else {
                    members.push(member(&format!("n{case}-{step}"), &["x", "y"]));
                }
                let owned_before: Vec<usize> =
                    members.iter().map(|m| m.owned_partitions.len()).collect();
                let kept_before: Vec<Vec<TopicPartition>> =
                    members.iter().map(|m| m.owned_partitions.clone()).collect();
                let a = cooperative_rounds(seed, &partitions, &mut members, &mut generation);
                let loads: Vec<usize> = members.iter().map(|m| a[&m.member_id].len()).collect();
                let (min, max) = (*loads.iter().min().unwrap(), *loads.iter().max().unwrap());
                assert!(
                    max - min <= 1,
                    "seed {seed} case {case}: unbalanced {loads:?}"
                );
                assert_eq!(loads.iter().sum::<usize>(), total as usize);
                // Minimal movement: the members owning most keep the larger quotas, and
                // nobody loses a partition while staying at or under its new load.
                let n = members.len();
                let (floor, extra) = (total as usize / n, total as usize % n);
                let mut sorted = owned_before.clone();
                sorted.sort_by(|a, b| b.cmp(a));
                let optimum: usize = sorted
                    .iter()
                    .enumerate()
                    .map(|(k, &o)| o.saturating_sub(floor + usize::from(k < extra)))
                    .sum();
                let mut lost = 0;
                for (k, m) in members.iter().enumerate() {
                    let now = &a[&m.member_id];
                    let kept = kept_before[k].iter().filter(|tp| now.contains(tp)).count();
                    assert_eq!(
                        kept,
                        kept_before[k].len().min(now.len()),
                        "seed {seed} case {case}: {} lost partitions it could keep",
                        m.member_id
                    );
                    lost += kept_before[k].len() - kept;
                }
                assert_eq!(
                    lost, optimum,
                    "seed {seed} case {case}: moved more than needed"
                );
            }
        }
    }

    #[test]
    fn cooperative_sticky_holds_back_moving_partitions() {
        let partitions = counts(&[("t", 4)]);
        let mut a = member("a", &["t"]);
        a.owned_partitions = tps(&[("t", 0), ("t", 1), ("t", 2), ("t", 3)]);
        a.generation = Some(1);
        let b = member("b", &["t"]);
        let out = CooperativeStickyAssignor.assign(&partitions, &[a.clone(), b.clone()]);
        // a keeps two; the two it gives up go to nobody this round.
        assert_eq!(out["a"].len(), 2);
        assert!(out["b"].is_empty());
        // Next round: a owns two, b gets the other two.
        a.owned_partitions = out["a"].clone();
        a.generation = Some(2);
        let out2 = CooperativeStickyAssignor.assign(&partitions, &[a.clone(), b]);
        assert_eq!(out2["a"], out["a"]);
        assert_eq!(out2["b"].len(), 2);
    }

    #[test]
    fn cooperative_sticky_resolves_claims_by_generation() {
        let partitions = counts(&[("t", 2)]);
        let mut old = member("old", &["t"]);
        old.owned_partitions = tps(&[("t", 0), ("t", 1)]);
        old.user_data = CooperativeStickyAssignor.user_data(3);
        let mut new = member("new", &["t"]);
        new.owned_partitions = tps(&[("t", 0)]);
        new.generation = Some(5);
        let sticky = sticky_assign(
            &partitions,
            &[old.clone(), new.clone()],
            CooperativeStickyAssignor::generation_of,
        );
        // The newer claim on t/0 wins; old keeps t/1.
        assert!(sticky[1].contains(&TopicPartition::new("t", 0)));
        assert!(sticky[0].contains(&TopicPartition::new("t", 1)));
        // And the cooperative step holds t/0 back from nobody but "old" claims it too.
        let out = CooperativeStickyAssignor.assign(&partitions, &[old, new]);
        assert!(out["new"].is_empty() || !out["new"].contains(&TopicPartition::new("t", 0)));
    }

    #[test]
    fn cooperative_sticky_general_subscriptions() {
        let seed = seed();
        let mut rng = Rng(seed);
        for case in 0..200 {
            let (partitions, mut members) = random_case(&mut rng);
            let mut generation = 0;
            let a = cooperative_rounds(seed, &partitions, &mut members, &mut generation);
            check_complete(&partitions, &members, &a);
            // Stable: running again with the result owned moves nothing.
            let again = CooperativeStickyAssignor.assign(&partitions, &members);
            assert_eq!(again, a, "seed {seed} case {case}: not a fixed point");
            // Locally balanced: no member holds two more than an eligible peer could take.
            for m in &members {
                for o in &members {
                    let can_take = a[&m.member_id]
                        .iter()
                        .any(|tp| o.topics.iter().any(|t| **t == *tp.topic));
                    assert!(
                        !can_take || a[&m.member_id].len() < a[&o.member_id].len() + 2,
                        "seed {seed} case {case}: {} could give {} a partition",
                        m.member_id,
                        o.member_id
                    );
                }
            }
        }
    }
}
