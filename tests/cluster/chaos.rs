//! The chaos suite: Baton's idempotent `acks=all` producer writes self-checking
//! records to an in-process 3-node cluster while a seeded fault schedule runs, then
//! a consumer reads everything back and the history check must count zero lost,
//! duplicated, reordered and corrupted records.
//!
//! Every scenario prints its seed; `BATON_SEED=<seed>` replays the schedule.

use std::time::Duration;

use baton_broker::faults::{Endpoint, RequestFault};
use baton_testkit::chaos::{finish, leader, setup, start_producing, wait_healthy, PARTITIONS};
use baton_testkit::{seed, Rng, RngExt};

const PACE: Duration = Duration::from_millis(3);

fn assert_passed(scenario: &str, seed: u64, r: baton_broker::history::HistoryReport) {
    assert!(r.passed(), "[{scenario}] seed {seed}: {r}");
    assert!(
        r.acknowledged > 0,
        "[{scenario}] seed {seed}: nothing acknowledged: {r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_restart() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    let mut s = setup("rolling", seed).await;
    let w = start_producing(&s.client, &s.topic, PACE);
    for id in s.cluster.node_ids() {
        tokio::time::sleep(rng.millis(300, 1_500)).await;
        s.cluster.node(id).stop().await;
        tokio::time::sleep(rng.millis(200, 1_000)).await;
        s.cluster.node(id).restart().await.expect("restart");
        wait_healthy(&s.cluster, &s.topic).await;
    }
    let (r, _) = finish("rolling_restart", seed, s, w).await;
    assert_passed("rolling_restart", seed, r);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hard_bounce_of_leaders() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    let mut s = setup("bounce", seed).await;
    let w = start_producing(&s.client, &s.topic, PACE);
    for _ in 0..4 {
        tokio::time::sleep(rng.millis(300, 1_200)).await;
        let p = rng.below(PARTITIONS as u64) as i32;
        let l = leader(&s.cluster, &s.topic, p);
        s.cluster.node(l).kill();
        tokio::time::sleep(rng.millis(500, 2_500)).await;
        s.cluster.node(l).restart().await.expect("restart");
        wait_healthy(&s.cluster, &s.topic).await;
    }
    let (r, _) = finish("leader_bounces", seed, s, w).await;
    assert_passed("leader_bounces", seed, r);
}

/// The leader of partition 0 loses both followers: its ISR shrinks to itself, so
/// `acks=all` with `min.insync.replicas=2` stops acknowledging there; after the heal
/// the followers catch up and acknowledgements resume.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_partitioned_from_followers() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    let mut s = setup("isolated", seed).await;
    let w = start_producing(&s.client, &s.topic, PACE);
    tokio::time::sleep(rng.millis(500, 1_500)).await;
    let l = leader(&s.cluster, &s.topic, 0);
    for f in s.cluster.node_ids().into_iter().filter(|&n| n != l) {
        s.cluster.partition(Endpoint::Node(l), Endpoint::Node(f));
    }
    let topic = s.topic.clone();
    s.cluster
        .wait_for(Duration::from_secs(60), |c| {
            c.partition_state(&topic, 0)
                .is_some_and(|v| v.leader == l && v.isr == vec![l])
        })
        .await
        .expect("the leader's ISR shrinks to itself");
    s.cluster
        .record(format!("ISR of partition 0 shrank to [{l}]"));
    let acked_p0 = |w: &baton_testkit::chaos::Workload| {
        let h = w.history.lock().unwrap().clone();
        let r = h.check();
        r.acknowledged
    };
    let before = acked_p0(&w);
    tokio::time::sleep(rng.millis(1_000, 2_000)).await;
    s.cluster.heal();
    wait_healthy(&s.cluster, &s.topic).await;
    let ok = s
        .cluster
        .wait_for(Duration::from_secs(60), |_| acked_p0(&w) > before)
        .await;
    assert!(
        ok.is_ok(),
        "seed {seed}: acknowledgements resume after the heal"
    );
    let (r, _) = finish("leader_partitioned", seed, s, w).await;
    assert_passed("leader_partitioned", seed, r);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_restart_mid_traffic() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    let mut s = setup("controller", seed).await;
    let w = start_producing(&s.client, &s.topic, PACE);
    for _ in 0..2 {
        tokio::time::sleep(rng.millis(500, 1_500)).await;
        s.cluster.kill_controller();
        tokio::time::sleep(rng.millis(200, 1_500)).await;
        s.cluster
            .restart_controller()
            .await
            .expect("controller restarts");
        // A leader bounce right after, so the new controller has work to do.
        let l = leader(&s.cluster, &s.topic, rng.below(PARTITIONS as u64) as i32);
        s.cluster.node(l).kill();
        tokio::time::sleep(rng.millis(300, 1_000)).await;
        s.cluster.node(l).restart().await.expect("restart");
        wait_healthy(&s.cluster, &s.topic).await;
    }
    let (r, _) = finish("controller_restart", seed, s, w).await;
    assert_passed("controller_restart", seed, r);
}

/// Produce requests are applied but their responses are lost (the connection
/// closes); the idempotent producer retries and the broker deduplicates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_responses() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    let mut s = setup("lost", seed).await;
    let w = start_producing(&s.client, &s.topic, PACE);
    for _ in 0..6 {
        tokio::time::sleep(rng.millis(200, 800)).await;
        let node = 1 + rng.below(3) as i32;
        let n = 1 + rng.below(3) as u32;
        s.cluster
            .inject(Some(node), RequestFault::drop_response(0).times(n));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    s.cluster.clear_request_faults();
    let (r, _) = finish("lost_responses", seed, s, w).await;
    assert_passed("lost_responses", seed, r);
}

/// A byte of a stored batch in the leader's log flips while traffic runs; reads
/// detect it, the leader resigns, a follower with a healthy copy leads, and the
/// damaged replica is repaired. Nothing acknowledged is lost or corrupted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupted_leader() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    let mut s = setup("corrupt", seed).await;
    let w = start_producing(&s.client, &s.topic, PACE);
    tokio::time::sleep(rng.millis(1_500, 3_000)).await;
    let p = rng.below(PARTITIONS as u64) as i32;
    let l = leader(&s.cluster, &s.topic, p);
    let hw = s
        .cluster
        .partition_state(&s.topic, p)
        .and_then(|v| v.high_watermark())
        .unwrap_or(0);
    let at = (rng.below(hw.max(1) as u64) as i64).min(hw - 1).max(0);
    s.cluster
        .node(l)
        .corrupt(&s.topic, p, at)
        .expect("corrupt a stored batch of the leader");
    tokio::time::sleep(rng.millis(1_000, 2_000)).await;
    let (r, corruption_events) = finish("corrupted_leader", seed, s, w).await;
    assert_passed("corrupted_leader", seed, r);
    assert!(
        corruption_events > 0,
        "seed {seed}: the damaged batch was detected"
    );
}
