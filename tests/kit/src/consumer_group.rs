//! Scenarios of Baton's `GroupConsumer` on the consumer rebalance protocol
//! (KIP-848, `GroupProtocol::Consumer`), shared by the suites that run them
//! against Apache Kafka (`tests/interop_suite/apache_kafka/consumer_group.rs`) and
//! against `baton-broker` (`tests/client/`).
//!
//! Every member runs in a task of its own that calls `recv` until told to stop and
//! then closes the consumer (commit, `on_revoked`, leave). A [`RebalanceListener`]
//! records each member's assignment changes in one shared [`History`], in the order
//! they happen; the history check then finds:
//! - partitions owned twice: a partition assigned to a member while another still
//!   owned it (its `on_revoked` not run yet);
//! - partitions lost (`on_lost`), which a clean join or leave must not cause;
//! - records lost (produced, never read) and records read twice.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_kafka::connection::ConnectionError;
use baton_kafka::{
    async_trait, CancellationToken, Client, GroupConsumer, GroupConsumerBuilder, GroupError,
    GroupProtocol, Producer, ProducerRecord, RebalanceContext, RebalanceListener, TopicPartition,
};
use baton_protocol::messages::FindCoordinatorRequest;
use baton_protocol::ErrorCode;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::topic_name;

/// A group member on the consumer protocol, with the test settings: fast automatic
/// commits and short fetch waits.
pub fn member_builder(client: &Client, group: &str, topic: &str) -> GroupConsumerBuilder {
    GroupConsumer::builder(client, group)
        .group_protocol(GroupProtocol::Consumer)
        .subscribe([topic])
        .heartbeat_interval(Duration::from_millis(300))
        .rebalance_timeout(Duration::from_secs(30))
        .auto_commit_interval(Duration::from_millis(200))
        .max_wait(Duration::from_millis(50))
}

/// A partition: topic and index.
pub type Tp = (String, i32);

fn key(tp: &TopicPartition) -> Tp {
    (tp.topic.to_string(), tp.partition)
}

/// What happened to the group, in order.
#[derive(Debug, Default)]
pub struct History {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// The member owning each partition now.
    owner: BTreeMap<Tp, usize>,
    /// Partitions assigned while another member owned them.
    owned_twice: Vec<String>,
    lost: usize,
    lost_by: BTreeMap<usize, usize>,
    assigned: usize,
    revoked: usize,
    /// Every record read: (partition, offset) and who read it.
    reads: Vec<(Tp, i64, usize)>,
}

impl Inner {
    /// `member` gives up `tp` (revoked or lost), if it still owns it.
    fn release(&mut self, tp: &TopicPartition, member: usize) {
        if self.owner.get(&key(tp)) == Some(&member) {
            self.owner.remove(&key(tp));
        }
    }
}

impl History {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Distinct records read.
    pub fn distinct(&self) -> usize {
        let st = self.lock();
        st.reads
            .iter()
            .map(|(tp, o, _)| (tp, *o))
            .collect::<BTreeSet<_>>()
            .len()
    }

    /// The partitions each member owns now.
    pub fn owners(&self) -> BTreeMap<usize, BTreeSet<Tp>> {
        let st = self.lock();
        let mut out: BTreeMap<usize, BTreeSet<Tp>> = BTreeMap::new();
        for (tp, &m) in &st.owner {
            out.entry(m).or_default().insert(tp.clone());
        }
        out
    }

    /// Partitions lost so far (`on_lost`).
    pub fn lost_partitions(&self) -> usize {
        self.lock().lost
    }

    /// The partitions member `member` lost so far (`on_lost`).
    pub fn lost_by(&self, member: usize) -> usize {
        self.lock().lost_by.get(&member).copied().unwrap_or(0)
    }

    /// Revocations so far (partitions).
    pub fn revoked(&self) -> usize {
        self.lock().revoked
    }

    /// The check: `expected` records per partition were produced (offsets
    /// `0..expected[p]`).
    pub fn check(&self, expected: &BTreeMap<Tp, i64>) -> Report {
        let st = self.lock();
        let mut seen: BTreeMap<(Tp, i64), usize> = BTreeMap::new();
        for (tp, o, _) in &st.reads {
            *seen.entry((tp.clone(), *o)).or_default() += 1;
        }
        let mut lost = 0;
        for (tp, &n) in expected {
            lost += (0..n)
                .filter(|o| !seen.contains_key(&(tp.clone(), *o)))
                .count();
        }
        let unexpected = seen
            .keys()
            .filter(|(tp, o)| expected.get(tp).is_none_or(|&n| *o >= n))
            .count();
        Report {
            read: st.reads.len(),
            lost,
            duplicated: seen.values().map(|&n| n - 1).sum(),
            unexpected,
            owned_twice: st.owned_twice.clone(),
            partitions_lost: st.lost,
            assigned: st.assigned,
            revoked: st.revoked,
        }
    }
}

/// The outcome of [`History::check`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Records read, duplicates included.
    pub read: usize,
    /// Produced records never read.
    pub lost: usize,
    /// Extra reads of records read before.
    pub duplicated: usize,
    /// Records read that were not produced by the scenario.
    pub unexpected: usize,
    /// Partitions assigned while another member owned them.
    pub owned_twice: Vec<String>,
    /// Partitions lost (`on_lost`).
    pub partitions_lost: usize,
    /// Partition assignments (`on_assigned`), in total.
    pub assigned: usize,
    /// Partition revocations (`on_revoked`), in total.
    pub revoked: usize,
}

impl Report {
    /// Panics (naming `what`) unless the scenario lost, read twice, read
    /// unexpectedly and lost as partitions nothing, and no partition was owned
    /// by two members at once.
    #[track_caller]
    pub fn assert_clean(&self, what: &str) {
        assert_eq!(
            (
                self.lost,
                self.duplicated,
                self.unexpected,
                self.partitions_lost
            ),
            (0, 0, 0, 0),
            "{what}: {self}"
        );
        assert!(self.owned_twice.is_empty(), "{what}: {self:?}");
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} read: {} lost, {} duplicated, {} unexpected, {} owned twice, {} partitions lost; {} assigned, {} revoked",
            self.read,
            self.lost,
            self.duplicated,
            self.unexpected,
            self.owned_twice.len(),
            self.partitions_lost,
            self.assigned,
            self.revoked
        )
    }
}

/// Records a member's assignment changes in the [`History`].
struct Recorder {
    member: usize,
    history: Arc<History>,
}

#[async_trait]
impl RebalanceListener for Recorder {
    async fn on_assigned(&mut self, _ctx: &mut RebalanceContext, partitions: &[TopicPartition]) {
        let mut st = self.history.lock();
        for tp in partitions {
            st.assigned += 1;
            if let Some(other) = st.owner.insert(key(tp), self.member) {
                if other != self.member {
                    let line = format!(
                        "{tp:?} assigned to member {} while member {other} owned it",
                        self.member
                    );
                    st.owned_twice.push(line);
                }
            }
        }
    }

    async fn on_revoked(&mut self, _ctx: &mut RebalanceContext, partitions: &[TopicPartition]) {
        let mut st = self.history.lock();
        for tp in partitions {
            st.revoked += 1;
            st.release(tp, self.member);
        }
    }

    async fn on_lost(&mut self, _ctx: &mut RebalanceContext, partitions: &[TopicPartition]) {
        let mut st = self.history.lock();
        for tp in partitions {
            st.lost += 1;
            *st.lost_by.entry(self.member).or_default() += 1;
            st.release(tp, self.member);
        }
    }
}

/// A member running in its own task.
#[derive(Debug)]
pub struct Member {
    stop: CancellationToken,
    /// While `true`, the member does not call `recv` (an application that
    /// stopped polling).
    pause: watch::Sender<bool>,
    task: JoinHandle<Result<(), GroupError>>,
}

impl Member {
    /// Builds the consumer from `builder` (with a `Recorder` as listener) and
    /// starts its task.
    pub async fn start(
        builder: GroupConsumerBuilder,
        member: usize,
        history: &Arc<History>,
    ) -> Self {
        let mut consumer = builder
            .listener(Recorder {
                member,
                history: history.clone(),
            })
            .build()
            .await
            .expect("group consumer");
        let stop = CancellationToken::new();
        let (pause, mut paused) = watch::channel(false);
        let (token, history) = (stop.clone(), history.clone());
        let task = tokio::spawn(async move {
            loop {
                if *paused.borrow_and_update() {
                    tokio::select! {
                        biased;
                        _ = token.cancelled() => break,
                        _ = paused.changed() => continue,
                    }
                }
                tokio::select! {
                    biased;
                    _ = token.cancelled() => break,
                    _ = paused.changed() => {}
                    r = consumer.recv() => {
                        let r = r?;
                        let tp = (r.topic.to_string(), r.partition);
                        history.lock().reads.push((tp, r.offset, member));
                    }
                }
            }
            consumer.close().await
        });
        Member { stop, pause, task }
    }

    /// Stops (`true`) or resumes (`false`) calling `recv`.
    pub fn pause(&self, paused: bool) {
        self.pause.send_replace(paused);
    }

    /// Stops receiving and closes the consumer (commit, `on_revoked`, leave).
    pub async fn stop(self) {
        self.stop.cancel();
        self.task
            .await
            .expect("member task")
            .unwrap_or_else(|e| panic!("member failed or did not close cleanly: {e}"));
    }
}

/// Produces `count` records round-robin over `partitions` of a topic only this
/// scenario writes, and records each partition's end offset in `expected`.
pub async fn produce(
    producer: &Producer,
    topic: &str,
    partitions: i32,
    count: usize,
    expected: &mut BTreeMap<Tp, i64>,
) {
    let mut deliveries = Vec::with_capacity(count);
    for i in 0..count {
        let p = i as i32 % partitions;
        let r = ProducerRecord::new(topic)
            .partition(p)
            .value(format!("{p}-{i}"));
        deliveries.push(producer.send(r).await.expect("send"));
    }
    for d in deliveries {
        let m = d
            .await
            .unwrap_or_else(|e| panic!("{topic}: not delivered: {e}"));
        let n = expected
            .entry((topic.to_string(), m.partition))
            .or_default();
        *n = (*n).max(m.offset + 1);
    }
}

/// Polls `done` every 50 ms until it holds; panics with `what` and the history
/// after `within`.
pub async fn wait_until(
    history: &History,
    within: Duration,
    what: &str,
    mut done: impl FnMut(&History) -> bool,
) {
    let deadline = tokio::time::Instant::now() + within;
    while !done(history) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "waited {within:?} for {what}: {} distinct records read, owners {:?}, {} partitions lost",
            history.distinct(),
            history.owners(),
            history.lost_partitions()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether `members` members together own exactly `partitions` partitions, each
/// at least one.
fn spread(h: &History, members: usize, partitions: i32) -> bool {
    let owners = h.owners();
    owners.len() == members
        && owners.values().map(BTreeSet::len).sum::<usize>() == partitions as usize
}

/// Members join one by one and one leaves while records keep arriving: member 0
/// alone, then 1, then 2 join, then 0 closes (leaving the group); each step waits
/// until the group has settled (every member owns partitions, all partitions are
/// owned) and every record so far has been read. No partition may be owned twice
/// or lost, and, as every hand-over commits first, no record is lost or read
/// twice. Then a new member of the group (after the others closed) must start
/// exactly at the committed offsets. `server_assignor` is passed to the builder.
/// Returns the report.
pub async fn members_join_and_leave(
    client: &Client,
    topic: &str,
    partitions: i32,
    server_assignor: Option<&str>,
) -> Report {
    let group = topic_name("k848-join-leave");
    let history = Arc::new(History::default());
    let producer = Producer::builder(client).build();
    let mut expected = BTreeMap::new();
    let builder = || {
        let b = member_builder(client, &group, topic);
        match server_assignor {
            Some(a) => b.server_assignor(a),
            None => b,
        }
    };
    let within = Duration::from_secs(90);

    let m0 = Member::start(builder(), 0, &history).await;
    produce(&producer, topic, partitions, 100, &mut expected).await;
    wait_until(&history, within, "member 0 alone to read 100", |h| {
        h.distinct() >= 100 && spread(h, 1, partitions)
    })
    .await;

    let m1 = Member::start(builder(), 1, &history).await;
    produce(&producer, topic, partitions, 100, &mut expected).await;
    wait_until(&history, within, "two members settled, 200 read", |h| {
        h.distinct() >= 200 && spread(h, 2, partitions)
    })
    .await;

    let m2 = Member::start(builder(), 2, &history).await;
    produce(&producer, topic, partitions, 100, &mut expected).await;
    wait_until(&history, within, "three members settled, 300 read", |h| {
        h.distinct() >= 300 && spread(h, 3, partitions)
    })
    .await;

    m0.stop().await;
    produce(&producer, topic, partitions, 100, &mut expected).await;
    wait_until(&history, within, "members 1 and 2 settled, 400 read", |h| {
        h.distinct() >= 400 && spread(h, 2, partitions)
    })
    .await;
    m1.stop().await;
    m2.stop().await;

    // A later member resumes at the commits: it reads exactly the new records.
    produce(
        &producer,
        topic,
        partitions,
        2 * partitions as usize,
        &mut expected,
    )
    .await;
    producer.close().await;
    let m3 = Member::start(builder(), 3, &history).await;
    let total = 400 + 2 * partitions as usize;
    wait_until(&history, within, "member 3 to read the new records", |h| {
        h.distinct() >= total
    })
    .await;
    // Give a re-delivery the chance to show.
    tokio::time::sleep(Duration::from_millis(500)).await;
    m3.stop().await;
    history.check(&expected)
}

/// The group's coordinator, found with FindCoordinator on any broker.
pub async fn find_coordinator(client: &Client, group: &str) -> i32 {
    try_find_coordinator(client, group)
        .await
        .unwrap_or_else(|| panic!("no coordinator found for {group}"))
}

/// The group's coordinator as named by FindCoordinator on the first broker (on
/// fresh metadata) that answers without an error; `None` if none does.
pub async fn try_find_coordinator(client: &Client, group: &str) -> Option<i32> {
    let meta = client.refresh_metadata().await.expect("metadata");
    for &node in meta.brokers.keys() {
        let Ok(conn) = client.broker_connection(node).await else {
            continue;
        };
        let req = FindCoordinatorRequest {
            key: group.to_string(),
            key_type: 0,
            coordinator_keys: vec![group.to_string()],
        };
        let resp: Result<_, ConnectionError> = conn.send(&req).await;
        let Ok(resp) = resp else { continue };
        let found = resp
            .coordinators
            .iter()
            .find(|c| c.key == group)
            .map(|c| (c.error_code, c.node_id))
            .unwrap_or((resp.error_code, resp.node_id));
        if ErrorCode::from_code(found.0) == ErrorCode::None {
            return Some(found.1);
        }
    }
    None
}

/// Two members consume while the group's coordinator node is made to fail by
/// `fail` (given its node id; e.g. a hard kill): the members must find the new
/// coordinator and keep their membership (no partition lost, no rebalance), and
/// every record produced before and after the failure is read exactly once. The
/// caller restores the node afterwards. Returns the report and the failed node.
pub async fn coordinator_failover<F, Fut>(
    client: &Client,
    topic: &str,
    partitions: i32,
    fail: F,
) -> (Report, i32)
where
    F: FnOnce(i32) -> Fut,
    Fut: Future<Output = ()>,
{
    let group = topic_name("k848-failover");
    let history = Arc::new(History::default());
    let producer = Producer::builder(client).build();
    let mut expected = BTreeMap::new();
    let within = Duration::from_secs(120);
    let m0 = Member::start(member_builder(client, &group, topic), 0, &history).await;
    let m1 = Member::start(member_builder(client, &group, topic), 1, &history).await;
    produce(&producer, topic, partitions, 100, &mut expected).await;
    wait_until(&history, within, "two members settled, 100 read", |h| {
        h.distinct() >= 100 && spread(h, 2, partitions)
    })
    .await;
    // Let the commits of what was read land.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let revoked_before = history.revoked();
    let coordinator = find_coordinator(client, &group).await;
    fail(coordinator).await;
    produce(&producer, topic, partitions, 100, &mut expected).await;
    producer.close().await;
    wait_until(
        &history,
        within,
        "200 read after the coordinator failed",
        |h| h.distinct() >= 200,
    )
    .await;
    // Several heartbeats to the new coordinator.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let owners = history.owners();
    let rebalanced = history.revoked() - revoked_before;
    m0.stop().await;
    m1.stop().await;
    let report = history.check(&expected);
    assert_eq!(
        (owners.len(), rebalanced),
        (2, 0),
        "membership kept through the coordinator move (owners {owners:?}): {report}"
    );
    (report, coordinator)
}

/// A member that stops calling `recv` while a rebalance needs it to revoke
/// partitions is removed by the coordinator after its rebalance timeout (3 s
/// here): its partitions go to the other member, and when it calls `recv` again it
/// learns they were lost (`on_lost`, no commit), rejoins with epoch 0 and gets a
/// share again. No record is lost (records it read but did not commit are read
/// again by the new owner, which is what "lost" allows). Returns the report.
pub async fn fenced_member_loses_its_partitions_and_rejoins(
    client: &Client,
    topic: &str,
    partitions: i32,
) -> Report {
    let group = topic_name("k848-fenced");
    let history = Arc::new(History::default());
    let producer = Producer::builder(client).build();
    let mut expected = BTreeMap::new();
    let within = Duration::from_secs(90);
    let slow = member_builder(client, &group, topic)
        .rebalance_timeout(Duration::from_secs(3))
        .manual_commit();
    let m0 = Member::start(slow, 0, &history).await;
    produce(&producer, topic, partitions, 60, &mut expected).await;
    wait_until(&history, within, "member 0 alone to read 60", |h| {
        h.distinct() >= 60 && spread(h, 1, partitions)
    })
    .await;
    m0.pause(true);
    let m1 = Member::start(member_builder(client, &group, topic), 1, &history).await;
    // Member 0 cannot revoke: after its rebalance timeout member 1 gets everything.
    wait_until(&history, within, "member 1 to own every partition", |h| {
        h.owners().get(&1).map(BTreeSet::len) == Some(partitions as usize)
    })
    .await;
    produce(&producer, topic, partitions, 60, &mut expected).await;
    wait_until(&history, within, "member 1 to read the new records", |h| {
        h.distinct() >= 120
    })
    .await;
    m0.pause(false);
    wait_until(
        &history,
        within,
        "member 0 to lose its partitions and rejoin",
        |h| h.lost_by(0) > 0 && spread(h, 2, partitions),
    )
    .await;
    produce(&producer, topic, partitions, 60, &mut expected).await;
    producer.close().await;
    wait_until(&history, within, "180 read", |h| h.distinct() >= 180).await;
    m0.stop().await;
    m1.stop().await;
    history.check(&expected)
}

/// Two members subscribed by a regular expression (evaluated by the coordinator,
/// KIP-848) that matches `topics` (created by the caller, each with `partitions`
/// partitions, and only these): together they own every partition of them, each
/// some, and read every record once. Returns the report.
pub async fn regex_subscription(
    client: &Client,
    regex: &str,
    topics: &[String],
    partitions: i32,
) -> Report {
    let group = topic_name("k848-regex");
    let history = Arc::new(History::default());
    let producer = Producer::builder(client).build();
    let mut expected = BTreeMap::new();
    let within = Duration::from_secs(90);
    let builder = || {
        GroupConsumer::builder(client, &group)
            .group_protocol(GroupProtocol::Consumer)
            .subscribe_regex(regex)
            .heartbeat_interval(Duration::from_millis(300))
            .auto_commit_interval(Duration::from_millis(200))
            .max_wait(Duration::from_millis(50))
    };
    let m0 = Member::start(builder(), 0, &history).await;
    let m1 = Member::start(builder(), 1, &history).await;
    for topic in topics {
        produce(&producer, topic, partitions, 40, &mut expected).await;
    }
    producer.close().await;
    let total = 40 * topics.len();
    let all = partitions * topics.len() as i32;
    wait_until(
        &history,
        within,
        "both members reading every matched topic",
        |h| h.distinct() >= total && spread(h, 2, all),
    )
    .await;
    let owned: BTreeSet<String> = history
        .owners()
        .values()
        .flatten()
        .map(|(t, _)| t.clone())
        .collect();
    assert_eq!(
        owned,
        topics.iter().cloned().collect(),
        "exactly the matching topics are assigned"
    );
    m0.stop().await;
    m1.stop().await;
    history.check(&expected)
}

/// Two static members (KIP-848 with `group.instance.id`): member 0 closes, which
/// leaves with epoch -2 (it will come back), and a new consumer with its instance
/// id takes its place before the session times out: it gets the same partitions
/// back and member 1 sees no rebalance; nothing is lost or read twice. Returns the
/// report.
pub async fn static_member_returns(client: &Client, topic: &str, partitions: i32) -> Report {
    let group = topic_name("k848-static");
    let history = Arc::new(History::default());
    let producer = Producer::builder(client).build();
    let mut expected = BTreeMap::new();
    let within = Duration::from_secs(90);
    let builder = |id: &str| member_builder(client, &group, topic).group_instance_id(id);
    let a = Member::start(builder("a"), 0, &history).await;
    let b = Member::start(builder("b"), 1, &history).await;
    produce(&producer, topic, partitions, 40, &mut expected).await;
    wait_until(
        &history,
        within,
        "two static members settled, 40 read",
        |h| h.distinct() >= 40 && spread(h, 2, partitions),
    )
    .await;
    let before = history.owners();
    let revoked = history.revoked();
    a.stop().await;
    let a_again = Member::start(builder("a"), 0, &history).await;
    produce(&producer, topic, partitions, 40, &mut expected).await;
    producer.close().await;
    wait_until(&history, within, "member 0 back, 80 read", |h| {
        h.distinct() >= 80 && spread(h, 2, partitions)
    })
    .await;
    let after = history.owners();
    let revoked_by_close = history.revoked() - revoked;
    a_again.stop().await;
    b.stop().await;
    assert_eq!(
        after, before,
        "the same partitions came back to the same members"
    );
    assert_eq!(
        revoked_by_close,
        before[&0].len(),
        "only member 0's close revoked anything"
    );
    history.check(&expected)
}

/// A classic-protocol member (JoinGroup/SyncGroup/Heartbeat, Baton's default
/// cooperative-sticky assignor) with the test settings of [`member_builder`].
pub fn classic_member_builder(client: &Client, group: &str, topic: &str) -> GroupConsumerBuilder {
    GroupConsumer::builder(client, group)
        .group_protocol(GroupProtocol::Classic)
        .subscribe([topic])
        .session_timeout(Duration::from_secs(10))
        .heartbeat_interval(Duration::from_millis(300))
        .rebalance_timeout(Duration::from_secs(30))
        .auto_commit_interval(Duration::from_millis(200))
        .max_wait(Duration::from_millis(50))
}

/// Whether exactly the members `who` own partitions, every one of them some,
/// `partitions` in all (each by one member: `owners` maps a partition to one).
fn owned_by(h: &History, who: &[usize], partitions: i32) -> bool {
    let owners = h.owners();
    owners.keys().copied().eq(who.iter().copied())
        && owners.values().all(|s| !s.is_empty())
        && owners.values().map(BTreeSet::len).sum::<usize>() == partitions as usize
}

/// A group with members of both protocols (KIP-848's mixed groups) through a
/// coordinator failure. Classic members 0 and 1 form a classic group;
/// consumer-protocol member 2 joins (the group becomes a consumer group of all
/// three); the coordinator node is made to fail by `fail` (given its node id);
/// consumer-protocol member 3 joins and classic member 0 leaves; then members 2
/// and 3 leave (the group is classic again) and member 1 reads on alone. After
/// each step, once the group settles, every partition is owned by exactly one
/// of the expected members (each owning some, so both protocols receive
/// partitions) and every record produced so far has been read. Returns the
/// report (no partition owned twice; records lost, read twice or lost as
/// partitions are for the caller to judge) and the failed node.
pub async fn mixed_protocols_through_failover<F, Fut>(
    client: &Client,
    topic: &str,
    partitions: i32,
    fail: F,
) -> (Report, i32)
where
    F: FnOnce(i32) -> Fut,
    Fut: Future<Output = ()>,
{
    let group = topic_name("k848-mixed");
    let history = Arc::new(History::default());
    let producer = Producer::builder(client).build();
    let mut expected = BTreeMap::new();
    let within = Duration::from_secs(120);
    let classic = || classic_member_builder(client, &group, topic);
    let consumer = || member_builder(client, &group, topic);
    let mut read = 0;
    let mut step = |n: usize| {
        read += n;
        read
    };

    let m0 = Member::start(classic(), 0, &history).await;
    let m1 = Member::start(classic(), 1, &history).await;
    produce(&producer, topic, partitions, 100, &mut expected).await;
    let n = step(100);
    wait_until(&history, within, "classic members 0 and 1 settled", |h| {
        h.distinct() >= n && owned_by(h, &[0, 1], partitions)
    })
    .await;

    let m2 = Member::start(consumer(), 2, &history).await;
    produce(&producer, topic, partitions, 100, &mut expected).await;
    let n = step(100);
    wait_until(
        &history,
        within,
        "classic 0, 1 and consumer 2 settled",
        |h| h.distinct() >= n && owned_by(h, &[0, 1, 2], partitions),
    )
    .await;
    // Let the commits of what was read land.
    tokio::time::sleep(Duration::from_millis(600)).await;

    let coordinator = find_coordinator(client, &group).await;
    fail(coordinator).await;
    produce(&producer, topic, partitions, 100, &mut expected).await;
    let n = step(100);
    wait_until(
        &history,
        within,
        "all read after the coordinator failed",
        |h| h.distinct() >= n && owned_by(h, &[0, 1, 2], partitions),
    )
    .await;

    let m3 = Member::start(consumer(), 3, &history).await;
    m0.stop().await;
    produce(&producer, topic, partitions, 100, &mut expected).await;
    let n = step(100);
    wait_until(
        &history,
        within,
        "classic 1, consumer 2 and 3 settled",
        |h| h.distinct() >= n && owned_by(h, &[1, 2, 3], partitions),
    )
    .await;

    m2.stop().await;
    m3.stop().await;
    produce(&producer, topic, partitions, 100, &mut expected).await;
    producer.close().await;
    let n = step(100);
    wait_until(&history, within, "classic member 1 alone again", |h| {
        h.distinct() >= n && owned_by(h, &[1], partitions)
    })
    .await;
    m1.stop().await;
    (history.check(&expected), coordinator)
}
