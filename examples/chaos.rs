//! Soak runner: random fault schedules against an in-process 3-node cluster while
//! Baton's idempotent `acks=all` producer writes, each round ending in a history
//! check.
//!
//! ```text
//! cargo run --release --example chaos -- --minutes 20 --seed 42
//! ```
//!
//! Without `--seed` the seed comes from the clock (or `BATON_SEED`); it is
//! printed, and the same seed replays the same schedule of faults.

use std::time::{Duration, Instant};

use baton_broker::faults::{Endpoint, RequestFault};
use baton_protocol::ErrorCode;
use baton_testkit::chaos::{
    finish, leader, setup, start_producing, wait_healthy, Setup, PARTITIONS,
};
use baton_testkit::{Rng, RngExt};

/// How long one round produces under faults before it is checked.
const ROUND: Duration = Duration::from_secs(40);

fn usage() -> ! {
    eprintln!("usage: chaos [--minutes N] [--seed S]");
    std::process::exit(2);
}

fn main() {
    let mut minutes = 1.0f64;
    let mut seed = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--minutes" => {
                minutes = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| usage())
            }
            "--seed" => {
                seed = Some(
                    args.next()
                        .and_then(|v| v.parse().ok())
                        .unwrap_or_else(|| usage()),
                )
            }
            _ => usage(),
        }
    }
    let seed = seed.unwrap_or_else(baton_testkit::seed);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let ok = rt.block_on(soak(Duration::from_secs_f64(minutes * 60.0), seed));
    std::process::exit(if ok { 0 } else { 1 });
}

async fn soak(total: Duration, seed: u64) -> bool {
    println!(
        "chaos soak: seed {seed}, {:.1} minutes",
        total.as_secs_f64() / 60.0
    );
    let started = Instant::now();
    let mut rng = Rng::new(seed);
    let (mut rounds, mut faults, mut failed_rounds) = (0u64, 0u64, 0u64);
    let mut sum = baton_broker::history::HistoryReport::default();
    while started.elapsed() < total {
        rounds += 1;
        let round_seed = rng.next_u64();
        let mut s = setup(&format!("soak{rounds}"), round_seed).await;
        let w = start_producing(&s.client, &s.topic, Duration::from_millis(3));
        let mut r = Rng::new(round_seed);
        let round_start = Instant::now();
        while round_start.elapsed() < ROUND && started.elapsed() < total {
            let what = one_fault(&mut s, &mut r).await;
            println!(
                "[{:>6.1}s] round {rounds}: {what}",
                started.elapsed().as_secs_f64()
            );
            tokio::time::sleep(r.millis(200, 1_000)).await;
        }
        let applied = s.cluster.faults_applied();
        let (report, _) = finish(&format!("round {rounds}"), round_seed, s, w).await;
        faults += applied;
        println!("round {rounds} (seed {round_seed}): {applied} faults: {report}");
        if !report.passed() {
            failed_rounds += 1;
        }
        sum.acknowledged += report.acknowledged;
        sum.failed += report.failed;
        sum.unknown += report.unknown;
        sum.consumed += report.consumed;
        sum.lost += report.lost;
        sum.duplicated += report.duplicated;
        sum.reordered += report.reordered;
        sum.corrupted += report.corrupted;
        sum.unacknowledged_present += report.unacknowledged_present;
        sum.moved += report.moved;
    }
    println!(
        "TOTAL seed {seed}: {:.1} min, {rounds} rounds ({failed_rounds} failed), {faults} faults applied, records: {sum}",
        started.elapsed().as_secs_f64() / 60.0
    );
    failed_rounds == 0
}

/// Applies one random fault, waits, undoes it and waits for the cluster to be
/// healthy again; returns what it did.
async fn one_fault(s: &mut Setup, r: &mut Rng) -> String {
    let p = r.below(PARTITIONS as u64) as i32;
    let l = leader(&s.cluster, &s.topic, p);
    let other = s
        .cluster
        .node_ids()
        .into_iter()
        .filter(|&n| n != l)
        .nth(r.below(2) as usize)
        .unwrap_or(1);
    let hold = r.millis(300, 2_500);
    let what = match r.below(12) {
        0 => {
            s.cluster.node(l).kill();
            tokio::time::sleep(hold).await;
            s.cluster.node(l).restart().await.expect("restart");
            format!("hard bounce of leader {l} ({hold:?})")
        }
        1 => {
            s.cluster.node(l).stop().await;
            tokio::time::sleep(hold).await;
            s.cluster.node(l).restart().await.expect("restart");
            format!("graceful restart of node {l}")
        }
        2 => {
            s.cluster.pause_node(l);
            tokio::time::sleep(hold).await;
            s.cluster.resume_node(l);
            format!("pause of node {l} ({hold:?})")
        }
        3 => {
            for f in s.cluster.node_ids().into_iter().filter(|&n| n != l) {
                s.cluster.partition(Endpoint::Node(l), Endpoint::Node(f));
            }
            tokio::time::sleep(hold * 2).await;
            s.cluster.heal();
            format!("leader {l} partitioned from its followers ({:?})", hold * 2)
        }
        4 => {
            s.cluster
                .partition_one_way(Endpoint::Node(other), Endpoint::Node(l));
            tokio::time::sleep(hold * 2).await;
            s.cluster.heal();
            format!("one-way partition {other} -> {l}")
        }
        5 => {
            s.cluster.partition(Endpoint::Controller, Endpoint::Node(l));
            tokio::time::sleep(hold).await;
            s.cluster.heal();
            format!("controller partitioned from node {l}")
        }
        6 => {
            s.cluster.partition(Endpoint::Clients, Endpoint::Node(l));
            tokio::time::sleep(hold).await;
            s.cluster.heal();
            format!("clients partitioned from node {l}")
        }
        7 => {
            let d = r.millis(20, 200);
            s.cluster
                .add_latency(Endpoint::Node(l), Endpoint::Node(other), d);
            s.cluster
                .add_latency(Endpoint::Clients, Endpoint::Node(l), d);
            tokio::time::sleep(hold * 2).await;
            s.cluster.heal();
            format!("latency {d:?} around node {l}")
        }
        8 => {
            s.cluster.kill_controller();
            tokio::time::sleep(hold).await;
            s.cluster
                .restart_controller()
                .await
                .expect("controller restarts");
            "controller restart".to_owned()
        }
        9 => {
            let n = 1 + r.below(4) as u32;
            s.cluster
                .inject(Some(l), RequestFault::drop_response(0).times(n));
            tokio::time::sleep(hold).await;
            format!("{n} produce responses dropped at node {l}")
        }
        10 => {
            let hw = s
                .cluster
                .partition_state(&s.topic, p)
                .and_then(|v| v.high_watermark())
                .unwrap_or(0);
            // One damaged replica per round: damaging every copy of a batch would
            // lose it by design.
            let done = s
                .cluster
                .timeline()
                .iter()
                .any(|e| e.what.contains("flipped a byte"));
            if hw < 1 || done {
                return "no corruption (empty partition or done this round)".to_owned();
            }
            let at = r.below(hw as u64) as i64;
            match s.cluster.node(l).corrupt(&s.topic, p, at) {
                Ok(()) => format!("flipped a byte of leader {l}'s batch at {p}@{at}"),
                Err(e) => format!("corruption not applied: {e}"),
            }
        }
        _ => {
            let n = 1 + r.below(4) as u32;
            s.cluster.inject(
                Some(l),
                RequestFault::error(0, ErrorCode::NotLeaderOrFollower).times(n),
            );
            s.cluster.inject(
                Some(l),
                RequestFault::delay_response(0, r.millis(100, 1_500)),
            );
            tokio::time::sleep(hold).await;
            format!("{n} produce errors and a delayed response at node {l}")
        }
    };
    s.cluster.clear_request_faults();
    wait_healthy(&s.cluster, &s.topic).await;
    what
}
