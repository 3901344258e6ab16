//! Deterministic simulation: a whole cluster (controller and three broker nodes)
//! and SDK clients as turmoil hosts in one thread, a seed driving every fault.
//!
//! ```text
//! cargo run --release --example simulate -- --seeds 1000
//! cargo run --release --example simulate -- --seed 42          # replay one seed
//! cargo run --release --example simulate -- --seeds 100000 --soak
//! ```
//!
//! Each seed runs in a process of its own (a multi-seed run starts this program
//! once per seed, `--jobs` at a time), and that process installs a simulated
//! [`baton_kafka::env::Env`] (turmoil's TCP, the simulated wall clock, a seeded
//! generator, blocking work run in place) and replaces the operating system's
//! randomness with the seed's, so `HashMap` order and tokio's `select!` choices
//! are the seed's too. The broker, the controller and the SDK reach nothing real
//! but their logs (files under a temporary directory, on tmpfs where there is
//! one). A seed therefore runs the same in a multi-seed run and in its replay:
//! `--seed S` prints the seed's trace hash, the same in every process.
//!
//! Each seed:
//!
//! - starts a controller and nodes 1-3 (logs on disk, so a crashed node comes
//!   back with what it wrote), creates a topic of [`scenario::PARTITIONS`]
//!   partitions, replication factor 3, `min.insync.replicas=2`;
//! - runs an idempotent `acks=all` producer while the seed injects faults (see
//!   [`scenario`]), then heals everything and reads every partition back;
//! - checks the history (`baton_broker::history`: nothing acknowledged lost,
//!   duplicated, reordered or corrupted) and the invariants the probes watched.
//!
//! `--groups` adds two members of a consumer group consuming while the faults run,
//! checked for at-least-once delivery and for a generation that never goes
//! backwards (see docs/RELIABILITY.md: it finds an open bug, so CI does not run it
//! yet).
//!
//! It ends with one line, `N seeds, V violations, F faults injected, R records
//! checked`, and exits 1 on a violation after printing, for each failing seed,
//! the command that replays it. `SIMULATE_LOG=<filter>` (a `tracing` filter such
//! as `baton_broker=debug`) logs a replayed seed in simulated time.

mod faults;
mod scenario;
mod sim_env;
mod workload;

use std::collections::VecDeque;
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// Seeds that once failed, replayed first by every multi-seed run. A seed's
/// schedule depends on the code it runs (any change of timing moves it), so each
/// of these found its bug on the code of its day; each fix also has a test of its
/// own where one could be written.
/// - 103: the consumer's fetch loop spun (simulated time stood still) while a
///   partition's backoff had ended and its broker had a fetch in flight;
/// - 116, 193: a node waited 5-10 s for a heartbeat or metadata fetch lost in a
///   partition and its session expired; the client took an older leader epoch
///   from a lagging broker;
/// - 124: a restarted node that could not reach the controller for a second
///   reconciled an empty image and deleted its partitions' data;
/// - 392: stored data damaged while the controller had not yet seen a quick
///   restart (the schedule's single-failure rule, fixed in the schedule);
/// - 630: the workload retried creating its topic forever after a lost answer;
/// - 278, 433 (`--groups`): a coordinator failover replayed a group record
///   without members, and the group started again at generation 1;
/// - 64, 388, 664 (`--groups`): a broker that had not replayed the topic yet
///   answered a member's metadata request, and the member's fetcher stopped the
///   partition for good;
/// - 2929 (with slow disks and 2 KiB segments in the schedule): a leader put a
///   restarted follower whose torn log had lost its tail back into the ISR on
///   what its previous process had fetched, and the follower was then elected
///   with an empty log;
/// - 5486: the check of the high watermark read it the instant the run ended,
///   100 ms after an election, while the new leader's HW waited for a follower
///   cut off from the controller (the run now waits for the HW to recover);
/// - 8641 (`--groups`): a new generation's group record still carried the
///   previous generation's assignments; the coordinator failed before the
///   leader's SyncGroup, and the next one restored the group Stable with them,
///   so a partition the leader had given to the other member reached no one.
const REGRESSION_SEEDS: &[u64] = &[
    103, 116, 124, 193, 392, 630, 278, 433, 64, 388, 664, 2929, 5486, 8641,
];

fn usage() -> ! {
    eprintln!(
        "usage: simulate [--seeds N] [--first S] [--jobs J] [--soak] [--groups] | --seed S [--quiet] [--groups]"
    );
    std::process::exit(2);
}

fn main() {
    let mut seeds = 100u64;
    let mut first = 1u64;
    let mut only = None;
    let mut soak = false;
    let mut quiet = false;
    let mut groups = false;
    let mut jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut args = std::env::args().skip(1);
    let number = |args: &mut dyn Iterator<Item = String>| -> u64 {
        args.next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| usage())
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            "--seeds" => seeds = number(&mut args),
            "--seed" => only = Some(number(&mut args)),
            "--first" => first = number(&mut args),
            "--jobs" => jobs = number(&mut args).max(1) as usize,
            "--soak" => soak = true,
            "--quiet" => quiet = true,
            "--groups" => groups = true,
            _ => usage(),
        }
    }
    match only {
        Some(seed) => replay(seed, quiet, groups),
        None => {
            let list: Vec<u64> = REGRESSION_SEEDS
                .iter()
                .copied()
                .chain(first..first + seeds)
                .collect();
            run_many(&list, jobs, soak, groups)
        }
    }
}

/// Runs one seed in this process. With `quiet` (how a multi-seed run calls it)
/// it prints one machine-readable line; otherwise the timeline and the trace
/// hash. Exits 1 on a violation.
fn replay(seed: u64, quiet: bool, groups: bool) -> ! {
    let world = sim_env::World::install(seed);
    if let Ok(filter) = std::env::var("SIMULATE_LOG") {
        // Logs stamped with simulated time, e.g. SIMULATE_LOG=baton_broker=debug.
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_timer(SimTime)
            .with_writer(std::io::stderr)
            .init();
    }
    let run = scenario::run_seed(seed, &world, groups);
    if quiet {
        println!(
            "result {seed} {} {} {:016x} {} {}",
            run.faults,
            run.records,
            run.trace,
            run.violations.len(),
            run.stalled_fsyncs
        );
        for v in &run.violations {
            println!("violation {v}");
        }
    } else {
        println!("seed {seed}: trace hash {:016x}", run.trace);
        for f in &run.timeline {
            println!("  {f}");
        }
        for v in &run.violations {
            println!("violation: {v}");
        }
        if !run.violations.is_empty() {
            println!("last state seen:");
            for line in &run.end_state {
                println!("  {line}");
            }
        }
        println!(
            "1 seeds, {} violations, {} faults injected, {} records checked",
            run.violations.len(),
            run.faults,
            run.records
        );
    }
    std::process::exit(if run.violations.is_empty() { 0 } else { 1 })
}

/// Stamps log lines with the simulation's elapsed time.
struct SimTime;

impl tracing_subscriber::fmt::time::FormatTime for SimTime {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        match turmoil::sim_elapsed() {
            Some(t) => write!(w, "{:>9.3}s", t.as_secs_f64()),
            None => write!(w, "        -"),
        }
    }
}

/// What one seed's process reported.
struct Outcome {
    faults: u64,
    records: u64,
    stalled_fsyncs: u64,
    violations: Vec<String>,
}

/// Runs every seed in `list`, each in a child process, `jobs` at a time, and
/// prints the summary line. Exits 1 on a violation.
fn run_many(list: &[u64], jobs: usize, soak: bool, groups: bool) -> ! {
    let flag = if groups { " --groups" } else { "" };
    let exe = std::env::current_exe().expect("the simulation's own path");
    let started = Instant::now();
    let mut queue: VecDeque<u64> = list.iter().copied().collect();
    let mut running: VecDeque<(u64, Child)> = VecDeque::new();
    let (mut done, mut violations, mut faults, mut records) = (0u64, 0u64, 0u64, 0u64);
    let mut stalled_fsyncs = 0u64;
    let mut failing = Vec::new();
    while !queue.is_empty() || !running.is_empty() {
        while running.len() < jobs {
            let Some(seed) = queue.pop_front() else { break };
            let mut command = Command::new(&exe);
            command.args(["--seed", &seed.to_string(), "--quiet"]);
            if groups {
                command.arg("--groups");
            }
            let child = command
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start a seed's process");
            running.push_back((seed, child));
        }
        let Some((seed, child)) = running.pop_front() else {
            break;
        };
        let out = child.wait_with_output().expect("a seed's process");
        let outcome = parse(&out.stdout).unwrap_or_else(|| {
            let err = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = err.lines().rev().take(5).collect();
            Outcome {
                faults: 0,
                records: 0,
                stalled_fsyncs: 0,
                violations: vec![format!(
                    "its process ended without a result ({}): {}",
                    out.status,
                    tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
                )],
            }
        });
        done += 1;
        faults += outcome.faults;
        records += outcome.records;
        stalled_fsyncs += outcome.stalled_fsyncs;
        if !outcome.violations.is_empty() {
            violations += outcome.violations.len() as u64;
            eprintln!("seed {seed}: {} violation(s)", outcome.violations.len());
            for v in &outcome.violations {
                eprintln!("  {v}");
            }
            eprintln!("  replay: cargo run --release --example simulate -- --seed {seed}{flag}");
            failing.push(seed);
        }
        if soak && done % 1000 == 0 {
            let minutes = started.elapsed().as_secs_f64() / 60.0;
            eprintln!(
                "{done} seeds, {violations} violations, {:.0} seeds/minute",
                done as f64 / minutes
            );
            let _ = std::io::stderr().flush();
        }
    }
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    eprintln!(
        "{:.0} seeds/minute ({} jobs); slow disks stalled {stalled_fsyncs} fsyncs",
        list.len() as f64 / minutes.max(1e-9),
        jobs
    );
    for seed in &failing {
        eprintln!("replay: cargo run --release --example simulate -- --seed {seed}{flag}");
    }
    println!(
        "{} seeds, {violations} violations, {faults} faults injected, {records} records checked",
        list.len()
    );
    std::process::exit(if violations > 0 { 1 } else { 0 })
}

/// Reads a `--quiet` run's output.
fn parse(stdout: &[u8]) -> Option<Outcome> {
    let text = String::from_utf8_lossy(stdout);
    let mut outcome = None;
    let mut violations = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("result ") {
            let f: Vec<&str> = rest.split(' ').collect();
            outcome = Some((
                f.get(1)?.parse().ok()?,
                f.get(2)?.parse().ok()?,
                f.get(5)?.parse().ok()?,
            ));
        } else if let Some(v) = line.strip_prefix("violation ") {
            violations.push(v.to_owned());
        }
    }
    let (faults, records, stalled_fsyncs) = outcome?;
    Some(Outcome {
        faults,
        records,
        stalled_fsyncs,
        violations,
    })
}
