//! Group consumer against the in-process broker's group coordinator: cooperative
//! rebalancing with a history check, eager assignors, manual commits that resume
//! where they stopped, static membership fencing, offset reset policies, seek and
//! pause.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_kafka::group::{RangeAssignor, RoundRobinAssignor};
use baton_kafka::{
    async_trait, Admin, Client, GroupConsumer, GroupError, OffsetReset, Producer, ProducerRecord,
    RebalanceContext, RebalanceListener, TopicPartition,
};
use baton_testkit::client::{broker_and_client, create_topic};
use baton_testkit::topic_name;
use tokio::sync::mpsc;

/// Produces `per_partition` records to each of `partitions` partitions; values
/// name their partition and sequence number.
async fn produce(client: &Client, topic: &str, partitions: i32, per_partition: usize, tag: &str) {
    let producer = Producer::builder(client).build();
    let mut deliveries = Vec::new();
    for i in 0..per_partition {
        for p in 0..partitions {
            let r = ProducerRecord::new(topic)
                .partition(p)
                .value(format!("{tag}-{p}-{i}"));
            deliveries.push(producer.send(r).await.expect("send"));
        }
    }
    for d in deliveries {
        d.await.expect("delivered");
    }
    producer.close().await;
}

/// One consumption: global order, member, partition, offset.
#[derive(Debug, Clone, Copy)]
struct Seen {
    seq: u64,
    member: usize,
    partition: i32,
    offset: i64,
}

#[derive(Debug, Default)]
struct History {
    seen: Vec<Seen>,
    /// (member, revoked partitions) per on_revoked call.
    revoked: Vec<(usize, Vec<TopicPartition>)>,
    /// (member, assigned partitions) per on_assigned call.
    assigned: Vec<(usize, Vec<TopicPartition>)>,
    lost: Vec<(usize, Vec<TopicPartition>)>,
}

type SharedHistory = Arc<Mutex<History>>;

struct Recorder {
    member: usize,
    history: SharedHistory,
}

#[async_trait]
impl RebalanceListener for Recorder {
    async fn on_assigned(&mut self, _ctx: &mut RebalanceContext, partitions: &[TopicPartition]) {
        self.history
            .lock()
            .unwrap()
            .assigned
            .push((self.member, partitions.to_vec()));
    }

    async fn on_revoked(&mut self, _ctx: &mut RebalanceContext, partitions: &[TopicPartition]) {
        self.history
            .lock()
            .unwrap()
            .revoked
            .push((self.member, partitions.to_vec()));
    }

    async fn on_lost(&mut self, _ctx: &mut RebalanceContext, partitions: &[TopicPartition]) {
        self.history
            .lock()
            .unwrap()
            .lost
            .push((self.member, partitions.to_vec()));
    }
}

enum Control {
    /// Drop the consumer without closing (a crash); answers with the committed
    /// offsets it knew of.
    Kill(tokio::sync::oneshot::Sender<BTreeMap<TopicPartition, i64>>),
    /// Close cleanly.
    Close(tokio::sync::oneshot::Sender<Result<(), GroupError>>),
    /// Report the current assignment.
    Assignment(tokio::sync::oneshot::Sender<Vec<TopicPartition>>),
    /// Report the committed offsets the member knows of.
    Committed(tokio::sync::oneshot::Sender<BTreeMap<TopicPartition, i64>>),
}

static SEQ: AtomicU64 = AtomicU64::new(0);

/// Runs a member in a task, recording what it consumes.
fn spawn_member(
    client: &Client,
    group: &str,
    topic: &str,
    member: usize,
    history: SharedHistory,
    eager: bool,
) -> mpsc::UnboundedSender<Control> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Control>();
    let mut builder = GroupConsumer::builder(client, group)
        .subscribe([topic])
        .session_timeout(Duration::from_secs(3))
        .heartbeat_interval(Duration::from_millis(100))
        .rebalance_timeout(Duration::from_secs(10))
        .auto_commit_interval(Duration::from_millis(200))
        .max_wait(Duration::from_millis(50))
        .listener(Recorder {
            member,
            history: history.clone(),
        });
    if eager {
        builder = builder.assignor(RangeAssignor);
    }
    tokio::spawn(async move {
        let mut consumer = builder.build().await.expect("builds");
        loop {
            tokio::select! {
                r = consumer.recv() => match r {
                    Ok(rec) => {
                        let seq = SEQ.fetch_add(1, Ordering::SeqCst);
                        history.lock().unwrap().seen.push(Seen {
                            seq,
                            member,
                            partition: rec.partition,
                            offset: rec.offset,
                        });
                    }
                    Err(e) => panic!("member {member}: {e}"),
                },
                c = rx.recv() => match c {
                    Some(Control::Kill(reply)) => {
                        let committed = consumer
                            .assignment()
                            .into_iter()
                            .filter_map(|tp| consumer.committed(&tp).map(|c| (tp, c)))
                            .collect();
                        drop(consumer);
                        let _ = reply.send(committed);
                        return;
                    }
                    Some(Control::Close(reply)) => {
                        let _ = reply.send(consumer.close().await);
                        return;
                    }
                    Some(Control::Assignment(reply)) => {
                        let _ = reply.send(consumer.assignment());
                    }
                    Some(Control::Committed(reply)) => {
                        let committed = consumer
                            .assignment()
                            .into_iter()
                            .filter_map(|tp| consumer.committed(&tp).map(|c| (tp, c)))
                            .collect();
                        let _ = reply.send(committed);
                    }
                    None => return,
                },
            }
        }
    });
    tx
}

async fn assignment_of(member: &mpsc::UnboundedSender<Control>) -> Vec<TopicPartition> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    member.send(Control::Assignment(tx)).expect("member alive");
    rx.await.expect("member answers")
}

/// Waits until the live members' assignments cover all `partitions` exactly once
/// with the given sizes (sorted).
async fn wait_for_assignment(
    members: &[&mpsc::UnboundedSender<Control>],
    partitions: usize,
    sizes: &[usize],
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut all = BTreeSet::new();
        let mut got = Vec::new();
        let mut total = 0;
        for m in members {
            let a = assignment_of(m).await;
            total += a.len();
            got.push(a.len());
            all.extend(a);
        }
        got.sort();
        if all.len() == partitions && total == partitions && got == sizes {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "assignment did not settle: sizes {got:?}, {} distinct of {partitions}",
            all.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until every offset below `ends[p]` of every partition has been seen.
async fn wait_consumed(history: &SharedHistory, ends: &BTreeMap<i32, i64>) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let missing: usize = {
            let h = history.lock().unwrap();
            let seen: BTreeSet<(i32, i64)> =
                h.seen.iter().map(|s| (s.partition, s.offset)).collect();
            ends.iter()
                .map(|(&p, &end)| (0..end).filter(|o| !seen.contains(&(p, *o))).count())
                .sum()
        };
        if missing == 0 {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{missing} records not consumed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cooperative_group_survives_a_kill_and_a_join_without_loss() {
    kill_and_join(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eager_group_survives_a_kill_and_a_join_without_loss() {
    kill_and_join(true).await;
}

/// 3 members share a 12-partition topic; one is killed mid-traffic, then one is
/// added. The history check: every record consumed, a partition's successor starts
/// no lower than its predecessor's last commit and re-reads only what that
/// predecessor consumed after it (the killed member's uncommitted tail; nothing on
/// a clean handover). Cooperative: nothing is revoked when a member dies, and only
/// the partitions that move are revoked when one joins.
async fn kill_and_join(eager: bool) {
    baton_testkit::init_tracing();
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "group-kill-join", 12).await;
    let group = topic_name("group");
    let history: SharedHistory = Arc::default();
    let per_phase = 50;
    let mut ends: BTreeMap<i32, i64> = (0..12).map(|p| (p, 0)).collect();
    let advance = |ends: &mut BTreeMap<i32, i64>| {
        for e in ends.values_mut() {
            *e += per_phase as i64;
        }
    };

    produce(&client, &topic, 12, per_phase, "a").await;
    advance(&mut ends);
    let m0 = spawn_member(&client, &group, &topic, 0, history.clone(), eager);
    let m1 = spawn_member(&client, &group, &topic, 1, history.clone(), eager);
    let m2 = spawn_member(&client, &group, &topic, 2, history.clone(), eager);
    wait_for_assignment(&[&m0, &m1, &m2], 12, &[4, 4, 4]).await;
    wait_consumed(&history, &ends).await;

    // Kill member 2 mid-traffic.
    let before_kill: BTreeMap<usize, Vec<TopicPartition>> =
        [(0, assignment_of(&m0).await), (1, assignment_of(&m1).await)]
            .into_iter()
            .collect();
    // Member 2 commits what it has (auto-commit), so its death costs only the tail.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (tx, rx) = tokio::sync::oneshot::channel();
        m2.send(Control::Committed(tx)).unwrap();
        let committed = rx.await.unwrap();
        if committed.len() == 4 && committed.values().all(|&c| c == per_phase as i64) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "member 2 auto-commits: {committed:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let traffic = {
        let client = client.clone();
        let topic = topic.clone();
        tokio::spawn(async move { produce(&client, &topic, 12, per_phase, "b").await })
    };
    // Let member 2 commit part of the new traffic, then consume more: it dies with
    // an uncommitted tail.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let fresh = history
            .lock()
            .unwrap()
            .seen
            .iter()
            .filter(|s| s.member == 2 && s.offset >= per_phase as i64)
            .count();
        if fresh >= 40 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "member 2 consumes");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    m2.send(Control::Kill(tx)).unwrap();
    let killed_commits = rx.await.unwrap();
    traffic.await.unwrap();
    advance(&mut ends);
    wait_for_assignment(&[&m0, &m1], 12, &[6, 6]).await;
    wait_consumed(&history, &ends).await;
    // Survivors kept what they had.
    for (m, before) in before_kill.iter().filter(|_| !eager) {
        let now = assignment_of(if *m == 0 { &m0 } else { &m1 }).await;
        for tp in before {
            assert!(
                now.contains(tp),
                "member {m} lost {tp} it did not have to give up"
            );
        }
    }

    // Add member 3.
    let before_join: BTreeMap<usize, Vec<TopicPartition>> =
        [(0, assignment_of(&m0).await), (1, assignment_of(&m1).await)]
            .into_iter()
            .collect();
    let revoked_before_join = history.lock().unwrap().revoked.len();
    let m3 = spawn_member(&client, &group, &topic, 3, history.clone(), eager);
    produce(&client, &topic, 12, per_phase, "c").await;
    advance(&mut ends);
    wait_for_assignment(&[&m0, &m1, &m3], 12, &[4, 4, 4]).await;
    produce(&client, &topic, 12, per_phase, "d").await;
    advance(&mut ends);
    wait_consumed(&history, &ends).await;
    let after_join: BTreeMap<usize, Vec<TopicPartition>> =
        [(0, assignment_of(&m0).await), (1, assignment_of(&m1).await)]
            .into_iter()
            .collect();

    let revoked_before_close = history.lock().unwrap().revoked.len();
    for m in [&m0, &m1, &m3] {
        let (tx, rx) = tokio::sync::oneshot::channel();
        m.send(Control::Close(tx)).unwrap();
        rx.await.unwrap().expect("clean close");
    }

    let h = std::mem::take(&mut *history.lock().unwrap());
    assert!(h.lost.is_empty(), "no partition lost: {:?}", h.lost);
    if !eager {
        check_cooperative_revocations(
            &h,
            revoked_before_join,
            revoked_before_close,
            &before_join,
            &after_join,
        );
    }
    check_history(&h, &topic, &ends, &killed_commits);
    broker.shutdown().await;
}

/// Nothing was revoked before member 3 joined (member 2's death only added
/// partitions), and the revocations when it joined named exactly the partitions
/// that moved to it.
fn check_cooperative_revocations(
    h: &History,
    revoked_before_join: usize,
    revoked_before_close: usize,
    before_join: &BTreeMap<usize, Vec<TopicPartition>>,
    after_join: &BTreeMap<usize, Vec<TopicPartition>>,
) {
    assert_eq!(
        revoked_before_join, 0,
        "revocations before the join: {:?}",
        h.revoked
    );
    let join_revocations = &h.revoked[revoked_before_join..revoked_before_close];
    for (m, revoked) in join_revocations {
        for tp in revoked {
            let had = before_join[m].contains(tp);
            let kept = after_join[m].contains(tp);
            assert!(
                !kept || !had,
                "member {m} revoked {tp} although it kept it (revocations: {:?})",
                h.revoked
            );
        }
    }
    let moved: usize = before_join
        .iter()
        .map(|(m, before)| {
            before
                .iter()
                .filter(|tp| !after_join[m].contains(tp))
                .count()
        })
        .sum();
    let revoked_on_join: usize = join_revocations.iter().map(|(_, l)| l.len()).sum();
    println!("moved on join: {moved}; revoked on join: {revoked_on_join}");
    assert_eq!(
        moved, revoked_on_join,
        "exactly the moving partitions were revoked"
    );
}

/// Per partition: consumption runs by member in global order; no gap between
/// runs, every offset up to the end consumed, and overlaps (re-deliveries) only
/// after the killed member (2), within what it had not committed.
fn check_history(
    h: &History,
    topic: &str,
    ends: &BTreeMap<i32, i64>,
    killed_commits: &BTreeMap<TopicPartition, i64>,
) {
    // History check per partition.
    let mut seen = h.seen.clone();
    seen.sort_by_key(|s| s.seq);
    let mut duplicates = 0usize;
    let mut kill_tail_allowed = 0usize;
    for p in 0..12 {
        let events: Vec<&Seen> = seen.iter().filter(|s| s.partition == p).collect();
        // Runs of consecutive consumption by one member.
        let mut runs: Vec<(usize, i64, i64)> = Vec::new(); // member, first, last
        for s in &events {
            match runs.last_mut() {
                Some(r) if r.0 == s.member => {
                    assert_eq!(
                        s.offset,
                        r.2 + 1,
                        "partition {p}: member {} skipped or repeated within its run",
                        s.member
                    );
                    r.2 = s.offset;
                }
                _ => runs.push((s.member, s.offset, s.offset)),
            }
        }
        assert_eq!(
            runs.first().map(|r| r.1),
            Some(0),
            "partition {p} starts at 0"
        );
        for w in runs.windows(2) {
            let (prev, next) = (w[0], w[1]);
            assert!(
                next.1 <= prev.2 + 1,
                "partition {p}: gap between {prev:?} and {next:?}"
            );
            let overlap = (prev.2 + 1 - next.1) as usize;
            if prev.0 == 2 {
                // The killed member: duplicates only within what it had not committed.
                let tp = TopicPartition::new(topic, p);
                let committed = killed_commits.get(&tp).copied().unwrap_or(0);
                assert!(
                    next.1 >= committed,
                    "partition {p}: restarted below a commit"
                );
                kill_tail_allowed += (prev.2 + 1 - committed) as usize;
                println!(
                    "partition {p}: killed member read to {}, had committed {committed}, successor started at {}",
                    prev.2, next.1
                );
            } else {
                assert_eq!(
                    overlap, 0,
                    "partition {p}: a clean handover re-delivered {overlap} records"
                );
            }
            duplicates += overlap;
        }
        let last = runs.last().unwrap().2;
        assert_eq!(last + 1, ends[&p], "partition {p} consumed to its end");
    }
    println!(
        "history: {} consumed, {} produced, 0 lost, {duplicates} duplicates (uncommitted tail of the killed member: {kill_tail_allowed})",
        seen.len(),
        ends.values().sum::<i64>()
    );
    assert!(duplicates <= kill_tail_allowed);
}

/// Reads records until `n` arrive, returning (partition, offset) pairs.
async fn take(consumer: &mut GroupConsumer, n: usize) -> Vec<(i32, i64)> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let r = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
            .await
            .expect("a record arrives")
            .expect("no error");
        out.push((r.partition, r.offset));
    }
    out
}

#[tokio::test]
async fn eager_assignors_share_and_manual_commits_resume() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "group-eager", 4).await;
    produce(&client, &topic, 4, 10, "x").await;
    for (name, range) in [("range", true), ("roundrobin", false)] {
        let group = topic_name(name);
        let build = || {
            let b = GroupConsumer::builder(&client, group.clone())
                .subscribe([topic.clone()])
                .manual_commit()
                .heartbeat_interval(Duration::from_millis(100))
                .session_timeout(Duration::from_secs(3))
                .rebalance_timeout(Duration::from_secs(5))
                .max_wait(Duration::from_millis(50));
            if range {
                b.assignor(RangeAssignor)
            } else {
                b.assignor(RoundRobinAssignor)
            }
        };
        let mut c = build().build().await.unwrap();
        assert_eq!(
            c.rebalance_protocol(),
            baton_kafka::group::RebalanceProtocol::Eager
        );
        // Read 15 of 40, commit, close.
        let first = take(&mut c, 15).await;
        c.commit().await.unwrap();
        let committed: BTreeMap<i32, i64> = first.iter().fold(BTreeMap::new(), |mut m, &(p, o)| {
            let e = m.entry(p).or_insert(0);
            *e = (*e).max(o + 1);
            m
        });
        for (&p, &o) in &committed {
            assert_eq!(
                c.committed(&TopicPartition::new(topic.as_str(), p)),
                Some(o)
            );
        }
        c.close().await.unwrap();
        // A new member resumes exactly at the commits: the rest, nothing twice.
        let mut c = build().build().await.unwrap();
        let rest = take(&mut c, 25).await;
        let all: BTreeSet<(i32, i64)> = first.iter().chain(rest.iter()).copied().collect();
        assert_eq!(all.len(), 40, "{name}: nothing skipped or repeated");
        c.close().await.unwrap();
    }
    broker.shutdown().await;
}

#[tokio::test]
async fn static_member_with_a_taken_instance_id_fences_the_old_one() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "group-static", 2).await;
    produce(&client, &topic, 2, 5, "s").await;
    let group = topic_name("static");
    let build = || {
        GroupConsumer::builder(&client, group.clone())
            .subscribe([topic.clone()])
            .group_instance_id("instance-a")
            .heartbeat_interval(Duration::from_millis(100))
            .session_timeout(Duration::from_secs(3))
            .max_wait(Duration::from_millis(50))
    };
    let mut old = build().build().await.unwrap();
    take(&mut old, 10).await;
    let mut new = build().build().await.unwrap();
    take(&mut new, 1).await.len();
    let err = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match old.recv().await {
                Ok(_) => continue,
                Err(e) => return e,
            }
        }
    })
    .await
    .expect("the old member hears it is fenced");
    assert!(matches!(err, GroupError::FencedInstanceId { .. }), "{err}");
    // It stays fenced.
    assert!(matches!(
        old.recv().await,
        Err(GroupError::FencedInstanceId { .. })
    ));
    new.close().await.unwrap();
    broker.shutdown().await;
}

#[tokio::test]
async fn reset_policy_seek_and_pause() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "group-reset", 1).await;
    produce(&client, &topic, 1, 10, "r").await;
    let tp = TopicPartition::new(topic.as_str(), 0);
    let base = |group: &str| {
        GroupConsumer::builder(&client, group)
            .subscribe([topic.clone()])
            .manual_commit()
            .heartbeat_interval(Duration::from_millis(100))
            .session_timeout(Duration::from_secs(3))
            .max_wait(Duration::from_millis(50))
    };

    // Fail: no committed offset is an error until a seek.
    let mut c = base(&topic_name("fail"))
        .offset_reset(OffsetReset::Fail)
        .build()
        .await
        .unwrap();
    let err = tokio::time::timeout(Duration::from_secs(30), c.recv())
        .await
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, GroupError::NoCommittedOffset { .. }), "{err}");
    c.seek(&tp, 7).unwrap();
    assert_eq!(take(&mut c, 1).await, vec![(0, 7)]);
    c.close().await.unwrap();

    // Latest: only new records.
    let mut c = base(&topic_name("latest"))
        .offset_reset(OffsetReset::Latest)
        .build()
        .await
        .unwrap();
    // Wait for the assignment and its start offset before producing more.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while c.position(&tp).is_none() {
        assert!(tokio::time::Instant::now() < deadline);
        let _ = tokio::time::timeout(Duration::from_millis(100), c.recv()).await;
    }
    produce(&client, &topic, 1, 2, "late").await;
    assert_eq!(take(&mut c, 2).await, vec![(0, 10), (0, 11)]);

    // Seek back, pause, resume.
    c.seek(&tp, 3).unwrap();
    assert_eq!(take(&mut c, 1).await, vec![(0, 3)]);
    c.pause(std::slice::from_ref(&tp));
    assert_eq!(c.paused(), vec![tp.clone()]);
    assert!(
        tokio::time::timeout(Duration::from_millis(300), c.recv())
            .await
            .is_err(),
        "nothing while paused"
    );
    c.resume(std::slice::from_ref(&tp));
    assert_eq!(take(&mut c, 2).await, vec![(0, 4), (0, 5)]);
    // Commits never go backwards: commit 6, seek to 1, commit again.
    c.commit().await.unwrap();
    assert_eq!(c.committed(&tp), Some(6));
    c.seek(&tp, 1).unwrap();
    c.commit().await.unwrap();
    assert_eq!(c.committed(&tp), Some(6));
    c.close().await.unwrap();
    broker.shutdown().await;
}

/// A position past the log end (a seek, or a committed offset beyond a log that
/// was emptied) gets OFFSET_OUT_OF_RANGE; with `OffsetReset::Earliest` the fetch
/// starts again below the old position, and those records are returned.
#[tokio::test]
async fn a_reset_below_the_position_returns_the_records_from_there() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "group-reset-back", 1).await;
    produce(&client, &topic, 1, 10, "b").await;
    let tp = TopicPartition::new(topic.as_str(), 0);
    let mut c = GroupConsumer::builder(&client, topic_name("reset-back"))
        .subscribe([topic.clone()])
        .manual_commit()
        .offset_reset(OffsetReset::Earliest)
        .heartbeat_interval(Duration::from_millis(100))
        .session_timeout(Duration::from_secs(3))
        .max_wait(Duration::from_millis(50))
        .build()
        .await
        .unwrap();
    assert_eq!(take(&mut c, 2).await, vec![(0, 0), (0, 1)]);
    c.seek(&tp, 50).unwrap();
    assert_eq!(
        take(&mut c, 3).await,
        vec![(0, 0), (0, 1), (0, 2)],
        "the reset to the log start is followed"
    );
    assert_eq!(c.position(&tp), Some(3));
    c.close().await.unwrap();
    broker.shutdown().await;
}

/// Commits from the listener: with manual commits only, a member that commits in
/// `on_revoked` hands its partitions over without a single re-delivery.
struct CommitOnRevoke {
    commits: Arc<Mutex<usize>>,
}

#[async_trait]
impl RebalanceListener for CommitOnRevoke {
    async fn on_revoked(&mut self, ctx: &mut RebalanceContext, partitions: &[TopicPartition]) {
        ctx.commit().await.expect("commit before revocation");
        for tp in partitions {
            assert_eq!(
                ctx.committed(tp),
                ctx.position(tp),
                "{tp} committed at its position"
            );
        }
        *self.commits.lock().unwrap() += 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_commits_from_the_listener_hand_over_cleanly() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "group-listener", 4).await;
    let group = topic_name("listener");
    produce(&client, &topic, 4, 25, "m").await;
    let commits = Arc::new(Mutex::new(0));
    let build = |commits: &Arc<Mutex<usize>>| {
        GroupConsumer::builder(&client, group.clone())
            .subscribe([topic.clone()])
            .manual_commit()
            .heartbeat_interval(Duration::from_millis(100))
            .session_timeout(Duration::from_secs(3))
            .rebalance_timeout(Duration::from_secs(10))
            .max_wait(Duration::from_millis(50))
            .listener(CommitOnRevoke {
                commits: commits.clone(),
            })
    };
    let mut a = build(&commits).build().await.unwrap();
    let mut seen = take(&mut a, 100).await;
    // An async commit in flight while the second member joins.
    let pending = a.commit_async();
    let mut b = build(&commits).build().await.unwrap();
    produce(&client, &topic, 4, 25, "n").await;
    // Drive both until every record is in and each holds two partitions.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        for c in [&mut a, &mut b] {
            if let Ok(r) = tokio::time::timeout(Duration::from_millis(20), c.recv()).await {
                let r = r.expect("no error");
                seen.push((r.partition, r.offset));
            }
        }
        let distinct: BTreeSet<(i32, i64)> = seen.iter().copied().collect();
        if distinct.len() == 200 && a.assignment().len() == 2 && b.assignment().len() == 2 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of 200",
            distinct.len()
        );
    }
    pending.await.expect("async commit");
    assert_eq!(seen.len(), 200, "no record delivered twice");
    assert!(*commits.lock().unwrap() >= 1, "the listener committed");
    a.close().await.unwrap();
    b.close().await.unwrap();
    broker.shutdown().await;
}

fn quick(client: &Client, group: &str, topic: &str) -> baton_kafka::GroupConsumerBuilder {
    GroupConsumer::builder(client, group)
        .subscribe([topic])
        .heartbeat_interval(Duration::from_millis(100))
        .session_timeout(Duration::from_secs(3))
        .rebalance_timeout(Duration::from_secs(10))
        .auto_commit_interval(Duration::from_millis(100))
        .max_wait(Duration::from_millis(50))
}

/// Asserts that `seen` holds `total` distinct records, none twice (`why` says
/// what a second copy would mean).
fn assert_each_once(seen: &[(i32, i64)], total: usize, why: &str) {
    let distinct: BTreeSet<(i32, i64)> = seen.iter().copied().collect();
    assert_eq!(distinct.len(), total);
    assert_eq!(seen.len(), total, "{why}");
}

/// Drives `consumers` round-robin until `total` distinct records are in.
async fn drain(consumers: &mut [&mut GroupConsumer], seen: &mut Vec<(i32, i64)>, total: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        for c in consumers.iter_mut() {
            if let Ok(r) = tokio::time::timeout(Duration::from_millis(20), c.recv()).await {
                let r = r.expect("no error");
                seen.push((r.partition, r.offset));
            }
        }
        let distinct: BTreeSet<(i32, i64)> = seen.iter().copied().collect();
        if distinct.len() >= total {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of {total}",
            distinct.len()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_member_restart_gets_its_partitions_back_without_a_rebalance() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "group-static-restart", 4).await;
    let group = topic_name("static-restart");
    produce(&client, &topic, 4, 10, "s").await;
    let mut a = quick(&client, &group, &topic)
        .group_instance_id("a")
        .build()
        .await
        .unwrap();
    let mut b = quick(&client, &group, &topic)
        .group_instance_id("b")
        .build()
        .await
        .unwrap();
    let mut seen = Vec::new();
    drain(&mut [&mut a, &mut b], &mut seen, 40).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while a.assignment().len() != 2 || b.assignment().len() != 2 {
        assert!(tokio::time::Instant::now() < deadline, "2 + 2");
        for c in [&mut a, &mut b] {
            let _ = tokio::time::timeout(Duration::from_millis(20), c.recv()).await;
        }
    }
    let (mine, generation) = (a.assignment(), b.generation());
    // A static member's close commits but does not leave.
    a.close().await.unwrap();
    let mut a = quick(&client, &group, &topic)
        .group_instance_id("a")
        .build()
        .await
        .unwrap();
    produce(&client, &topic, 4, 10, "t").await;
    drain(&mut [&mut a, &mut b], &mut seen, 80).await;
    assert_eq!(a.assignment(), mine, "the same partitions came back");
    assert_eq!(
        b.generation(),
        generation,
        "the other member saw no rebalance"
    );
    assert_eq!(seen.len(), 80, "nothing re-delivered");
    a.close().await.unwrap();
    b.close().await.unwrap();
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_continue_while_the_application_is_busy() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "group-busy", 2).await;
    let group = topic_name("busy");
    produce(&client, &topic, 2, 5, "b").await;
    let mut c = quick(&client, &group, &topic)
        .session_timeout(Duration::from_secs(1))
        .build()
        .await
        .unwrap();
    let mut seen = Vec::new();
    drain(&mut [&mut c], &mut seen, 10).await;
    let generation = c.generation();
    // Three session timeouts without calling recv.
    tokio::time::sleep(Duration::from_secs(3)).await;
    produce(&client, &topic, 2, 5, "c").await;
    drain(&mut [&mut c], &mut seen, 20).await;
    assert_eq!(c.generation(), generation, "still the same membership");
    assert_eq!(seen.len(), 20);
    c.close().await.unwrap();
    broker.shutdown().await;
}

/// Sleeps in `on_revoked`, long enough for the caller's `recv` to be cancelled.
struct SlowRevoke;

#[async_trait]
impl RebalanceListener for SlowRevoke {
    async fn on_revoked(&mut self, _ctx: &mut RebalanceContext, _partitions: &[TopicPartition]) {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recv_cancelled_during_revocation_completes_it_on_the_next_call() {
    baton_testkit::init_tracing();
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "group-cancel", 4).await;
    let group = topic_name("cancel");
    produce(&client, &topic, 4, 10, "x").await;
    let mut a = quick(&client, &group, &topic)
        .listener(SlowRevoke)
        .build()
        .await
        .unwrap();
    let mut seen = Vec::new();
    drain(&mut [&mut a], &mut seen, 40).await;
    let mut b = quick(&client, &group, &topic).build().await.unwrap();
    // Every recv of `a` gives up after 20 ms, so the revocation's listener is
    // always cancelled; the revocation must still complete.
    produce(&client, &topic, 4, 10, "y").await;
    drain(&mut [&mut a, &mut b], &mut seen, 80).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while b.assignment().len() != 2 {
        assert!(tokio::time::Instant::now() < deadline, "b gets its share");
        for c in [&mut a, &mut b] {
            if let Ok(r) = tokio::time::timeout(Duration::from_millis(20), c.recv()).await {
                let r = r.unwrap();
                seen.push((r.partition, r.offset));
            }
        }
    }
    assert_eq!(a.assignment().len(), 2);
    assert_each_once(
        &seen,
        80,
        "the auto-commit before revocation left nothing to re-deliver",
    );
    a.close().await.unwrap();
    b.close().await.unwrap();
    broker.shutdown().await;
}

/// `recv` takes records out of the fetch task's channel many at a time; those
/// still waiting in the consumer when their partition is sought, paused or
/// revoked must be dropped, and positions and commits must cover only returned
/// records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_taken_ahead_are_dropped_after_seek_pause_and_revocation() {
    baton_testkit::init_tracing();
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "group-ahead", 2).await;
    let group = topic_name("ahead");
    produce(&client, &topic, 2, 300, "a").await;
    let tp0 = TopicPartition::new(topic.as_str(), 0);
    let mut a = quick(&client, &group, &topic)
        .manual_commit()
        .build()
        .await
        .unwrap();
    // Read partition 0 only: partition 1's records keep waiting in the consumer.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while a.assignment().len() != 2 || a.position(&tp0).is_none() {
        assert!(tokio::time::Instant::now() < deadline, "a is assigned");
        let _ = tokio::time::timeout(Duration::from_millis(20), a.recv()).await;
    }
    let tp1 = TopicPartition::new(topic.as_str(), 1);
    a.pause(std::slice::from_ref(&tp1));
    a.seek(&tp0, 0).unwrap();
    assert_eq!(take(&mut a, 3).await, vec![(0, 0), (0, 1), (0, 2)]);
    // Records 3.. of partition 0 were fetched ahead; a seek skips them.
    a.seek(&tp0, 100).unwrap();
    assert_eq!(take(&mut a, 2).await, vec![(0, 100), (0, 101)]);
    a.seek(&tp0, 5).unwrap();
    assert_eq!(take(&mut a, 1).await, vec![(0, 5)]);
    // Pausing partition 0 with its next records taken ahead returns none of them.
    a.pause(std::slice::from_ref(&tp0));
    assert!(
        tokio::time::timeout(Duration::from_millis(300), a.recv())
            .await
            .is_err(),
        "nothing while both partitions are paused"
    );
    assert_eq!(a.position(&tp0), Some(6));
    // A commit covers the returned records only.
    a.commit().await.unwrap();
    assert_eq!(a.committed(&tp0), Some(6));
    a.resume(&[tp0.clone(), tp1.clone()]);
    let first: Vec<(i32, i64)> = take(&mut a, 2).await;
    assert!(
        first.contains(&(0, 6)) || first.iter().all(|&(p, _)| p == 1),
        "{first:?}"
    );
    a.close().await.unwrap();

    // Revocation: `a` holds records of both partitions taken ahead when `b` joins;
    // what `a` returned (and committed before the revocation) and what `b` reads
    // from the commit must not overlap.
    let group = topic_name("ahead-revoke");
    let mut a = quick(&client, &group, &topic).build().await.unwrap();
    let mut seen = Vec::new();
    for (p, o) in take(&mut a, 5).await {
        seen.push((p, o));
    }
    let mut b = quick(&client, &group, &topic).build().await.unwrap();
    drain(&mut [&mut a, &mut b], &mut seen, 600).await;
    assert_eq!(a.assignment().len(), 1, "a gave a partition up");
    assert_eq!(b.assignment().len(), 1, "b took it");
    assert_each_once(
        &seen,
        600,
        "no record of the revoked partition was returned after the revocation",
    );
    a.close().await.unwrap();
    b.close().await.unwrap();
    broker.shutdown().await;
}

/// The background automatic commit commits the finished position exactly: the
/// records returned before the last `recv` call (not the one it returned), with
/// the leader epoch of the last of them, while the rest of the chunk taken from
/// the fetch task still waits in the consumer. `close` then commits the record
/// returned last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn automatic_commits_cover_exactly_the_finished_records() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "group-autocommit", 1).await;
    let group = topic_name("autocommit");
    produce(&client, &topic, 1, 300, "a").await;
    let tp0 = TopicPartition::new(topic.as_str(), 0);
    let mut a = quick(&client, &group, &topic).build().await.unwrap();
    let mut epochs = Vec::new();
    for expected in 0..10i64 {
        let r = tokio::time::timeout(Duration::from_secs(30), a.recv())
            .await
            .expect("a record arrives")
            .expect("no error");
        assert_eq!((r.partition, r.offset), (0, expected));
        epochs.push(r.leader_epoch);
    }
    // Records 0..=8 are finished; record 9 is only consumed.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let c = a.committed(&tp0);
        assert!(
            c.is_none_or(|c| c <= 9),
            "only finished records are committed: {c:?}"
        );
        if c == Some(9) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "an automatic commit covers the finished records: {c:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let admin = Admin::new(&client);
    let offsets = admin.group_offsets(group.as_str()).await.unwrap();
    assert_eq!(offsets[&tp0].offset, 9);
    assert_eq!(
        offsets[&tp0].leader_epoch,
        Some(epochs[8]).filter(|e| *e >= 0),
        "committed with the leader epoch of record 8"
    );
    a.close().await.unwrap();
    let offsets = admin.group_offsets(group.as_str()).await.unwrap();
    assert_eq!(
        offsets[&tp0].offset, 10,
        "close commits the record returned last"
    );
    broker.shutdown().await;
}
