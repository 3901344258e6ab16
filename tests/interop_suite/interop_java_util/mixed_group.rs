//! One consumer group shared by Baton's `GroupConsumer`s and the Java client's
//! `KafkaConsumer` (the harness's `member` mode, classic protocol), proving that
//! the assignors and the consumer-protocol subscription/assignment encodings of
//! both clients interoperate, whichever of them leads the group.
//!
//! The scenario ([`run`]), on a 6-partition topic, in three phases of 300 records:
//! the first member to join (Java or Baton) is the group's leader, stays in the
//! group throughout and reads phase 0 alone; two more members join (three in all,
//! two Baton and one Java), taking partitions from it at its commits; once every
//! partition is assigned to exactly one member, phase 1 is produced and read by
//! all three; then a member that is not the leader leaves (the Java one when Baton
//! leads, a Baton one when Java leads), phase 2 is produced, and the remaining two
//! members must take over its partitions at its commits and read the rest. Every member commits
//! what it has processed (Baton: automatic commits, which include every
//! revocation and the close; Java: `commitSync` after each poll and on
//! revocation), so every record must be consumed exactly once across the members.
//! The harness prints `LED` when it runs the assignment, so the test checks who
//! led. [`Strategy::Consumer`] runs the same phases on the consumer rebalance
//! protocol (KIP-848), where the coordinator assigns and "leading" only means
//! joining first.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use baton_kafka::group::{CooperativeStickyAssignor, RangeAssignor};
use baton_kafka::{
    Admin, Client, GroupConsumer, GroupConsumerBuilder, GroupProtocol, Producer, ProducerRecord,
};

use super::{field, int, result, start_harness, Jvm};
use baton_testkit::topic_name;

/// Partitions of the shared topic: two per member while three are in.
const PARTITIONS: i32 = 6;
/// Records of each phase.
const PER_PHASE: usize = 300;
/// Upper bound for each phase to settle.
const PHASE_TIMEOUT: Duration = Duration::from_secs(90);

/// The assignor both sides use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Java's default list (`range`, then `cooperative-sticky`); Baton with range.
    Range,
    /// `cooperative-sticky` alone on both sides (KIP-429).
    CooperativeSticky,
    /// The consumer rebalance protocol (KIP-848) on both sides, with the
    /// coordinator's `uniform` assignor: nobody leads, the coordinator assigns.
    Consumer,
}

impl Strategy {
    fn harness_name(self) -> &'static str {
        match self {
            Strategy::Range => "range",
            Strategy::CooperativeSticky => "cooperative-sticky",
            Strategy::Consumer => "consumer",
        }
    }
}

/// A Baton group member with short timeouts, automatic commits every 200 ms.
pub fn baton_member(client: &Client, group: &str, topic: &str) -> GroupConsumerBuilder {
    GroupConsumer::builder(client, group)
        .subscribe([topic])
        .session_timeout(Duration::from_secs(10))
        .heartbeat_interval(Duration::from_millis(300))
        .rebalance_timeout(Duration::from_secs(20))
        .auto_commit_interval(Duration::from_millis(200))
        .max_wait(Duration::from_millis(50))
}

/// One consumed record: partition, offset, value.
type Read = (i32, i64, String);

/// The Java member's live state, from its output lines so far.
struct JavaLive {
    assigned: Option<BTreeSet<i32>>,
    consumed: usize,
    led: usize,
}

fn java_live(jvm: &Jvm) -> JavaLive {
    let mut live = JavaLive {
        assigned: None,
        consumed: 0,
        led: 0,
    };
    for line in jvm.lines() {
        if let Some(list) = line.strip_prefix("ASSIGNED") {
            live.assigned = Some(parse_partitions(list));
        } else if let Some(n) = line.strip_prefix("CONSUMED ") {
            live.consumed = n.trim().parse().unwrap_or(0);
        } else if line == "LED" {
            live.led += 1;
        }
    }
    live
}

fn parse_partitions(list: &str) -> BTreeSet<i32> {
    list.split(',')
        .filter_map(|p| p.trim().parse().ok())
        .collect()
}

fn baton_partitions(m: &GroupConsumer) -> BTreeSet<i32> {
    m.assignment().iter().map(|tp| tp.partition).collect()
}

/// Drives the Baton members (and watches the Java one, if still in) until
/// `total` records are in across them and every partition is assigned to exactly
/// one member, each member holding some and none more than one above another. Returns the member shapes at that point.
async fn settle(
    what: &str,
    batons: &mut [GroupConsumer],
    reads: &mut [Vec<Read>],
    java: Option<&Jvm>,
    java_before: usize,
    total: usize,
) -> Vec<BTreeSet<i32>> {
    let deadline = tokio::time::Instant::now() + PHASE_TIMEOUT;
    loop {
        for (m, got) in batons.iter_mut().zip(reads.iter_mut()) {
            if let Ok(r) = tokio::time::timeout(Duration::from_millis(20), m.recv()).await {
                let r = r.unwrap_or_else(|e| panic!("{what}: Baton member error: {e}"));
                let value = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default());
                got.push((r.partition, r.offset, value.into_owned()));
            }
        }
        let live = java.map(java_live);
        let mut shapes: Vec<BTreeSet<i32>> = batons.iter().map(baton_partitions).collect();
        if let Some(live) = &live {
            shapes.push(live.assigned.clone().unwrap_or_default());
        }
        let in_count = reads.iter().map(Vec::len).sum::<usize>()
            + live.as_ref().map_or(java_before, |l| l.consumed);
        let union: BTreeSet<i32> = shapes.iter().flatten().copied().collect();
        // Balanced too: an incremental (KIP-848) reconciliation passes through
        // states where every partition has one owner but not yet the final one.
        let sizes = shapes.iter().map(BTreeSet::len);
        let balanced = sizes.clone().max().unwrap_or(0) - sizes.min().unwrap_or(0) <= 1;
        let settled = shapes.iter().all(|s| !s.is_empty())
            && balanced
            && shapes.iter().map(BTreeSet::len).sum::<usize>() == PARTITIONS as usize
            && union.len() == PARTITIONS as usize;
        if settled && in_count >= total {
            return shapes;
        }
        if tokio::time::Instant::now() >= deadline {
            let java_out = java.map(Jvm::output).unwrap_or_default();
            panic!("{what}: {in_count} of {total} records; assignments {shapes:?}\n{java_out}");
        }
    }
}

/// Runs the scenario of this module's doc on the brokers at `bootstrap`, with
/// `strategy`, Java or Baton leading; returns a one-line summary.
pub async fn run(client: &Client, bootstrap: &str, strategy: Strategy, java_leads: bool) -> String {
    let started = std::time::Instant::now();
    let leader = if java_leads { "java" } else { "baton" };
    let what = format!("{} group, {leader} leads", strategy.harness_name());
    let topic = topic_name(&format!("mixed-{}-{leader}", strategy.harness_name()));
    let group = format!("{topic}-group");
    Admin::new(client)
        .create_topic(topic.clone(), PARTITIONS, 1)
        .await
        .unwrap_or_else(|e| panic!("{what}: creating {topic}: {e}"));
    let producer = Producer::builder(client).build();
    let produce = |phase: &'static str| {
        let producer = producer.clone();
        let topic = topic.clone();
        async move {
            let mut deliveries = Vec::with_capacity(PER_PHASE);
            for i in 0..PER_PHASE {
                let r = ProducerRecord::new(topic.clone())
                    .partition(i as i32 % PARTITIONS)
                    .value(format!("{phase}-{i}"));
                deliveries.push(producer.send(r).await.expect("send"));
            }
            for d in deliveries {
                d.await.expect("delivered");
            }
        }
    };
    produce("p0").await;

    let stop_file = std::env::temp_dir().join(format!("{topic}.stop"));
    let _ = std::fs::remove_file(&stop_file);
    let stop_path = stop_file.display().to_string();
    let start_java = || {
        start_harness(
            "member",
            &[
                bootstrap,
                &topic,
                &group,
                strategy.harness_name(),
                &stop_path,
            ],
        )
    };
    let build = || {
        let b = baton_member(client, &group, &topic);
        async move {
            match strategy {
                Strategy::Range => b.assignor(RangeAssignor),
                Strategy::CooperativeSticky => b.assignor(CooperativeStickyAssignor),
                Strategy::Consumer => b
                    .group_protocol(GroupProtocol::Consumer)
                    .server_assignor("uniform"),
            }
            .build()
            .await
            .expect("Baton member")
        }
    };

    // The first member alone takes every partition: it leads.
    let mut batons: Vec<GroupConsumer> = Vec::new();
    let mut reads: Vec<Vec<Read>> = Vec::new();
    let java = if java_leads {
        let jvm = start_java();
        settle(&what, &mut [], &mut [], Some(&jvm), 0, PER_PHASE).await;
        batons.push(build().await);
        jvm
    } else {
        batons.push(build().await);
        reads.push(Vec::new());
        settle(&what, &mut batons, &mut reads, None, 0, PER_PHASE).await;
        start_java()
    };
    batons.push(build().await);
    reads.resize_with(batons.len(), Vec::new);
    let shapes = settle(&what, &mut batons, &mut reads, Some(&java), 0, PER_PHASE).await;
    produce("p1").await;
    let shapes_after_p1 = settle(
        &what,
        &mut batons,
        &mut reads,
        Some(&java),
        0,
        2 * PER_PHASE,
    )
    .await;
    assert_eq!(
        shapes, shapes_after_p1,
        "{what}: no rebalance while reading phase 1"
    );
    assert!(
        shapes.iter().all(|s| s.len() == 2),
        "{what}: 6 partitions over 3 members: {shapes:?}"
    );
    if strategy == Strategy::Range {
        // Range hands each member one contiguous run of partitions.
        for s in &shapes {
            let (lo, hi) = (s.first().unwrap(), s.last().unwrap());
            assert_eq!(
                s.len() as i32,
                hi - lo + 1,
                "{what}: range shapes {shapes:?}"
            );
        }
    }

    // A member other than the leader leaves; the other two take its partitions.
    let (java_result, after) = if java_leads {
        let leaving = batons.pop().expect("two Baton members");
        leaving.close().await.expect("the Baton member leaves");
        produce("p2").await;
        let shapes = settle(
            &what,
            &mut batons,
            &mut reads,
            Some(&java),
            0,
            3 * PER_PHASE,
        )
        .await;
        std::fs::write(&stop_file, b"").unwrap();
        let json = tokio::task::spawn_blocking(move || result(java))
            .await
            .expect("join");
        (json, shapes)
    } else {
        std::fs::write(&stop_file, b"").unwrap();
        let json = tokio::task::spawn_blocking(move || result(java))
            .await
            .expect("join");
        let java_records = int(&json, "records").unwrap_or(0) as usize;
        produce("p2").await;
        let shapes = settle(
            &what,
            &mut batons,
            &mut reads,
            None,
            java_records,
            3 * PER_PHASE,
        )
        .await;
        (json, shapes)
    };
    let _ = std::fs::remove_file(&stop_file);
    producer.close().await;
    assert!(
        after.iter().all(|s| s.len() == 3),
        "{what}: 6 partitions over the 2 that stayed: {after:?}"
    );
    for m in batons {
        m.close().await.expect("close");
    }

    // Every record exactly once, at its partition, across all members.
    let java_reads: Vec<Read> = field(&java_result, "consumed")
        .unwrap_or_default()
        .split(' ')
        .filter(|s| !s.is_empty())
        .map(|s| {
            let mut it = s.splitn(3, ':');
            let p = it.next().and_then(|p| p.parse().ok()).expect("partition");
            let o = it.next().and_then(|o| o.parse().ok()).expect("offset");
            (p, o, it.next().unwrap_or_default().to_string())
        })
        .collect();
    let mut copies: BTreeMap<String, Vec<(i32, i64)>> = BTreeMap::new();
    for (p, o, v) in reads.iter().flatten().chain(&java_reads) {
        copies.entry(v.clone()).or_default().push((*p, *o));
    }
    let mut wrong = Vec::new();
    for phase in ["p0", "p1", "p2"] {
        for i in 0..PER_PHASE {
            let value = format!("{phase}-{i}");
            let want_partition = i as i32 % PARTITIONS;
            match copies.remove(&value).as_deref() {
                Some([(p, _)]) if *p == want_partition => {}
                other => wrong.push(format!("{value}: {other:?}")),
            }
        }
    }
    wrong.extend(copies.keys().map(|v| format!("{v}: never produced")));
    // With the consumer protocol the coordinator assigns: no member leads.
    let led = strategy != Strategy::Consumer && java_result_led(&java_result, java_leads);
    let summary = format!(
        "{what}: Java read {}, Baton read {:?}; shapes before the leave {shapes:?}, after \
         {after:?}; Java ran the assignment: {led}; wrong {}; {:.1?}",
        java_reads.len(),
        reads.iter().map(Vec::len).collect::<Vec<_>>(),
        wrong.len(),
        started.elapsed()
    );
    assert!(
        wrong.is_empty(),
        "{summary}; first: {:?}",
        &wrong[..wrong.len().min(10)]
    );
    summary
}

/// Whether the Java member ran the assignment (its `LED` count travels in the
/// RESULT); panics unless that matches who should lead.
fn java_result_led(json: &str, java_leads: bool) -> bool {
    let led = int(json, "led").unwrap_or(0) > 0;
    assert_eq!(
        led, java_leads,
        "the first member to join leads the group: {json}"
    );
    led
}
