//! Deterministic simulation: a whole cluster (controller and three broker nodes)
//! and SDK clients as turmoil hosts in one thread, a seed driving every fault.
//!
//! ```text
//! cargo run --release --example simulate -- --seeds 1000
//! cargo run --release --example simulate -- --seed 42          # replay one seed
//! cargo run --release --example simulate -- --seeds 100000 --soak
//! ```
//!
//! The process installs a simulated [`baton_kafka::env::Env`] (turmoil's TCP, the
//! simulated wall clock, a seeded generator, blocking work run in place), so the
//! broker, the controller and the SDK reach nothing real but their logs (files
//! under a temporary directory, on tmpfs where there is one). Each seed:
//!
//! - starts a controller and nodes 1-3 (logs on disk, so a crashed node comes
//!   back with what it wrote), creates a topic of [`PARTITIONS`] partitions,
//!   replication factor 3, `min.insync.replicas=2`;
//! - runs an idempotent `acks=all` producer of [`RECORDS`] records while the
//!   seed injects faults: link partitions and repairs, held links, node crashes
//!   and restarts (one node down at a time), wall-clock steps; message latency
//!   is drawn per seed;
//! - heals everything, reads every partition back with a consumer, and checks
//!   the history (`baton_broker::history`: nothing acknowledged lost,
//!   duplicated, reordered or corrupted) and the invariants a probe watched on
//!   every node and the controller: the high watermark never moves backwards on
//!   a leader; the leader epoch never decreases; an offset once committed stays
//!   (every partition ends with a high watermark at least the largest seen).
//!
//! It ends with one line, `N seeds, V violations, F faults injected, R records
//! checked`, and exits 1 on a violation after printing, for each failing seed, the
//! command that replays it. `--seed S` prints the seed's trace hash: the same seed
//! gives the same hash in every process.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use baton_broker::cluster::{ControllerOptions, ControllerServer, Node, NodeOptions};
use baton_broker::controller::ControllerConfig;
use baton_broker::history::{parse_payload, payload, History, ProduceOutcome};
use baton_kafka::env::{
    Blocking, Clock, Env, Listener, ListenerImpl, Net, NetFuture, Random, Socket,
};
use baton_kafka::{Acks, Admin, Client, Consumer, NewTopic, Producer, ProducerRecord, StartOffset};

/// The topic every seed writes.
const TOPIC: &str = "sim";
/// Its partitions.
const PARTITIONS: i32 = 2;
/// Records produced per seed.
const RECORDS: u64 = 100;
/// The controller's port (on its own host).
const CONTROLLER_PORT: u16 = 9093;
/// Each node's port (on its own host).
const NODE_PORT: u16 = 9092;
/// The simulated wall clock starts here (ms since the Unix epoch).
const EPOCH_MS: u64 = 1_700_000_000_000;

/// Seeds that once failed, replayed first by every multi-seed run.
const REGRESSION_SEEDS: &[u64] = &[];

fn usage() -> ! {
    eprintln!("usage: simulate [--seeds N] [--seed S] [--first S] [--soak]");
    std::process::exit(2);
}

fn main() {
    let mut seeds = 100u64;
    let mut first = 1u64;
    let mut only = None;
    let mut soak = false;
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
            "--soak" => soak = true,
            _ => usage(),
        }
    }
    let world = World::install();
    let list: Vec<u64> = match only {
        Some(s) => vec![s],
        None => REGRESSION_SEEDS
            .iter()
            .copied()
            .chain(first..first + seeds)
            .collect(),
    };
    let started = std::time::Instant::now();
    let (mut violations, mut faults, mut records) = (0u64, 0u64, 0u64);
    let mut failing = Vec::new();
    let mut all = std::collections::hash_map::DefaultHasher::new();
    for (i, &seed) in list.iter().enumerate() {
        let run = run_seed(seed, &world);
        faults += run.faults;
        records += run.records;
        run.trace.hash(&mut all);
        if only.is_some() {
            println!("seed {seed}: trace hash {:016x}", run.trace);
            for f in &run.timeline {
                println!("  {f}");
            }
        }
        if !run.violations.is_empty() {
            violations += run.violations.len() as u64;
            eprintln!("seed {seed}: {} violation(s)", run.violations.len());
            for v in &run.violations {
                eprintln!("  {v}");
            }
            eprintln!("  replay: cargo run --release --example simulate -- --seed {seed}");
            failing.push(seed);
        }
        if soak && (i + 1) % 1000 == 0 {
            let minutes = started.elapsed().as_secs_f64() / 60.0;
            eprintln!(
                "{} seeds, {violations} violations, {:.0} seeds/minute",
                i + 1,
                (i + 1) as f64 / minutes
            );
        }
    }
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    eprintln!(
        "{:.0} seeds/minute; trace hash of the run {:016x}",
        list.len() as f64 / minutes.max(1e-9),
        all.finish()
    );
    for seed in &failing {
        eprintln!("replay: cargo run --release --example simulate -- --seed {seed}");
    }
    println!(
        "{} seeds, {violations} violations, {faults} faults injected, {records} records checked",
        list.len()
    );
    std::process::exit(if violations > 0 { 1 } else { 0 });
}

/// The simulated environment, installed once per process and reset per seed.
struct World {
    clock: Arc<SimClock>,
    random: Arc<SimRandom>,
}

impl World {
    fn install() -> World {
        let clock = Arc::new(SimClock::default());
        let random = Arc::new(SimRandom::default());
        let env = Env {
            net: Arc::new(SimNet),
            clock: clock.clone(),
            random: random.clone(),
            blocking: Arc::new(InPlace),
        };
        if baton_kafka::env::install(env).is_err() {
            panic!("the process environment was read before the simulation installed its own");
        }
        World { clock, random }
    }
}

/// turmoil's TCP.
#[derive(Debug)]
struct SimNet;

impl Net for SimNet {
    fn connect<'a>(&'a self, addr: &'a str) -> NetFuture<'a, Socket> {
        Box::pin(async move {
            let s = turmoil::net::TcpStream::connect(addr).await?;
            Ok(Socket::Other(Box::new(SimStream(s))))
        })
    }

    fn bind(&self, addr: SocketAddr) -> NetFuture<'_, Listener> {
        // turmoil binds the unspecified address only; the listener reports the
        // host's own address, which is what the broker advertises.
        Box::pin(async move {
            let any = SocketAddr::new(std::net::Ipv4Addr::UNSPECIFIED.into(), addr.port());
            let l = turmoil::net::TcpListener::bind(any).await?;
            let port = l.local_addr()?.port();
            Ok(Listener::Other(Box::new(SimListener(
                l,
                SocketAddr::new(addr.ip(), port),
            ))))
        })
    }
}

/// A turmoil stream (its type has no `Debug`).
struct SimStream(turmoil::net::TcpStream);

impl std::fmt::Debug for SimStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SimStream")
    }
}

impl tokio::io::AsyncRead for SimStream {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for SimStream {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// A turmoil listener.
struct SimListener(turmoil::net::TcpListener, SocketAddr);

impl std::fmt::Debug for SimListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SimListener")
    }
}

impl ListenerImpl for SimListener {
    fn accept(&self) -> NetFuture<'_, (Socket, SocketAddr)> {
        Box::pin(async move {
            let (s, peer) = self.0.accept().await?;
            Ok((Socket::Other(Box::new(SimStream(s))), peer))
        })
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.1)
    }
}

/// turmoil's per-host time since its epoch, plus the seed's wall-clock steps.
#[derive(Debug, Default)]
struct SimClock {
    /// The sum of the clock steps injected so far (ms).
    offset: AtomicI64,
    /// The last reading, for callers outside any host.
    last: AtomicI64,
}

impl Clock for SimClock {
    fn now_ms(&self) -> i64 {
        match turmoil::since_epoch() {
            Some(d) => {
                let now = d.as_millis() as i64 + self.offset.load(Ordering::Relaxed);
                self.last.store(now, Ordering::Relaxed);
                now
            }
            None => self.last.load(Ordering::Relaxed),
        }
    }
}

/// SplitMix64 over a counter, reseeded per seed.
#[derive(Debug, Default)]
struct SimRandom {
    state: AtomicU64,
}

impl Random for SimRandom {
    fn next_u64(&self) -> u64 {
        splitmix(
            self.state
                .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed),
        )
    }
}

/// Blocking work runs where it is handed over, in the simulation's one thread.
#[derive(Debug)]
struct InPlace;

impl Blocking for InPlace {
    fn run(&self, work: Box<dyn FnOnce() + Send>) {
        work()
    }
}

fn splitmix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seed's own generator for the fault schedule.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        splitmix(self.0)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn ms(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi - lo + 1))
    }
}

/// What the probes and the clients share with the driver (one thread).
#[derive(Default)]
struct Shared {
    violations: Vec<String>,
    /// Per (node, partition, leader epoch, incarnation): the highest HW seen.
    leader_hw: BTreeMap<(i32, i32, i32, u64), i64>,
    /// Per partition: the controller's highest leader epoch.
    epochs: BTreeMap<i32, i32>,
    /// Per partition: the highest HW any leader reported.
    committed: BTreeMap<i32, i64>,
    /// Per partition: the HW each running node's replica reports now.
    last_hw: BTreeMap<(i32, i32), i64>,
    /// Node incarnations (restarts).
    incarnation: BTreeMap<i32, u64>,
    produced: bool,
    healed: bool,
}

struct SeedRun {
    violations: Vec<String>,
    faults: u64,
    records: u64,
    trace: u64,
    timeline: Vec<String>,
}

fn run_seed(seed: u64, world: &World) -> SeedRun {
    world.random.state.store(splitmix(seed), Ordering::Relaxed);
    world.clock.offset.store(0, Ordering::Relaxed);
    world.clock.last.store(EPOCH_MS as i64, Ordering::Relaxed);
    let mut rng = Rng(seed);
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        tempfile::tempdir_in("/dev/shm")
    } else {
        tempfile::tempdir()
    }
    .expect("temporary directory");
    let dir = base.path().to_path_buf();
    let mut sim = turmoil::Builder::new()
        .simulation_duration(Duration::from_secs(300))
        .tick_duration(Duration::from_millis(1))
        .min_message_latency(Duration::from_millis(0))
        .max_message_latency(rng.ms(1, 25))
        .epoch(UNIX_EPOCH + Duration::from_millis(EPOCH_MS))
        .rng_seed(seed)
        .build();
    let shared = Rc::new(RefCell::new(Shared::default()));
    let history = Arc::new(Mutex::new(History::new()));

    let probe = shared.clone();
    sim.host("controller", move || {
        let probe = probe.clone();
        async move {
            let options = ControllerOptions {
                listen: SocketAddr::new(turmoil::lookup("controller"), CONTROLLER_PORT),
                config: ControllerConfig {
                    session_timeout_ms: 3_000,
                    ..ControllerConfig::default()
                },
                ..ControllerOptions::default()
            };
            let controller = ControllerServer::start(options).await?;
            loop {
                tokio::time::sleep(Duration::from_millis(10)).await;
                let state = controller.state();
                let mut p = probe.borrow_mut();
                if let Some(t) = state.topic_by_name(TOPIC) {
                    for part in 0..PARTITIONS {
                        let Some(info) = state.partition(t.topic_id, part) else {
                            continue;
                        };
                        let seen = *p.epochs.get(&part).unwrap_or(&-1);
                        if info.leader_epoch < seen {
                            let msg = format!(
                                "partition {part}: leader epoch went from {seen} to {}",
                                info.leader_epoch
                            );
                            p.violations.push(msg);
                        }
                        p.epochs.insert(part, info.leader_epoch.max(seen));
                    }
                }
            }
        }
    });

    for id in 1..=3i32 {
        let probe = shared.clone();
        let dir = dir.clone();
        sim.host(format!("node{id}"), move || {
            let probe = probe.clone();
            let dir = dir.clone();
            async move {
                let incarnation = {
                    let mut p = probe.borrow_mut();
                    let n = p.incarnation.entry(id).or_insert(0);
                    *n += 1;
                    *n
                };
                let controller = SocketAddr::new(turmoil::lookup("controller"), CONTROLLER_PORT);
                let mut options = NodeOptions::new(id, controller);
                options.broker.listen =
                    SocketAddr::new(turmoil::lookup(format!("node{id}")), NODE_PORT);
                options.broker.data_dir = Some(dir.join(format!("node{id}")));
                options.heartbeat_interval = Duration::from_millis(200);
                options.replica_lag_time_max_ms = 3_000;
                options.replica_fetch_wait_ms = 100;
                let node = loop {
                    match Node::start(options.clone()).await {
                        Ok(n) => break n,
                        Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                    }
                };
                loop {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    let mut p = probe.borrow_mut();
                    for part in 0..PARTITIONS {
                        let Some(v) = node.replica_view(TOPIC, part) else {
                            continue;
                        };
                        p.last_hw.insert((id, part), v.high_watermark);
                        if v.role != "leader" {
                            continue;
                        }
                        let key = (id, part, v.leader_epoch, incarnation);
                        let seen = *p.leader_hw.get(&key).unwrap_or(&-1);
                        if v.high_watermark < seen {
                            let msg = format!(
                                "node {id} partition {part} epoch {}: HW went back from {seen} to {}",
                                v.leader_epoch, v.high_watermark
                            );
                            p.violations.push(msg);
                        }
                        p.leader_hw.insert(key, v.high_watermark.max(seen));
                        let c = p.committed.entry(part).or_insert(-1);
                        *c = (*c).max(v.high_watermark);
                    }
                }
            }
        });
    }

    let flags = shared.clone();
    let h = history.clone();
    sim.client("clients", async move {
        let client = Client::builder(["node1:9092", "node2:9092", "node3:9092"])
            .client_id("sim")
            .request_timeout(Duration::from_secs(5))
            .connect_timeout(Duration::from_secs(2))
            .build()
            .await?;
        loop {
            let created = Admin::new(&client)
                .create_topics([
                    NewTopic::new(TOPIC, PARTITIONS, 3).config("min.insync.replicas", "2")
                ])
                .await;
            if created.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        produce(&client, &h).await;
        flags.borrow_mut().produced = true;
        while !flags.borrow().healed {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut consumed = h.lock().expect("history").clone();
        consume(&client, &mut consumed).await;
        *h.lock().expect("history") = consumed;
        Ok(())
    });

    let mut timeline = Vec::new();
    let mut faults = 0u64;
    let nodes = ["node1", "node2", "node3"];
    let mut next_fault = rng.ms(300, 800);
    let mut down: Option<(usize, Duration)> = None;
    let mut cuts: Vec<(String, String, bool, Duration)> = Vec::new();
    let mut stuck = None;
    loop {
        match sim.step() {
            Ok(true) => break,
            Ok(false) => {}
            Err(e) => {
                stuck = Some(e.to_string());
                break;
            }
        }
        let now = sim.elapsed();
        let produced = shared.borrow().produced;
        if produced && !shared.borrow().healed {
            for (a, b, held, _) in cuts.drain(..) {
                if held {
                    sim.release(a.as_str(), b.as_str());
                } else {
                    sim.repair(a.as_str(), b.as_str());
                }
            }
            if let Some((n, _)) = down.take() {
                sim.bounce(nodes[n]);
                timeline.push(format!("{now:?} heal: {} restarted", nodes[n]));
            }
            shared.borrow_mut().healed = true;
            continue;
        }
        if produced {
            continue;
        }
        let mut i = 0;
        while i < cuts.len() {
            if cuts[i].3 <= now {
                let (a, b, held, _) = cuts.swap_remove(i);
                if held {
                    sim.release(a.as_str(), b.as_str());
                } else {
                    sim.repair(a.as_str(), b.as_str());
                }
                timeline.push(format!("{now:?} {a} <-> {b} repaired"));
            } else {
                i += 1;
            }
        }
        if let Some((n, until)) = down {
            if until <= now {
                sim.bounce(nodes[n]);
                timeline.push(format!("{now:?} {} restarted", nodes[n]));
                down = None;
            }
        }
        if now < next_fault {
            continue;
        }
        next_fault = now + rng.ms(200, 900);
        faults += 1;
        match rng.below(4) {
            0 | 1 => {
                let a = nodes[rng.below(3) as usize].to_owned();
                let b = if rng.below(4) == 0 {
                    "controller".to_owned()
                } else {
                    nodes[rng.below(3) as usize].to_owned()
                };
                if a == b {
                    faults -= 1;
                    continue;
                }
                let held = rng.below(3) == 0;
                if held {
                    sim.hold(a.as_str(), b.as_str());
                } else {
                    sim.partition(a.as_str(), b.as_str());
                }
                let until = now + rng.ms(100, 2_000);
                timeline.push(format!(
                    "{now:?} {a} <-> {b} {} until {until:?}",
                    if held { "held" } else { "partitioned" }
                ));
                cuts.push((a, b, held, until));
            }
            2 => {
                if down.is_some() {
                    faults -= 1;
                    continue;
                }
                let n = rng.below(3) as usize;
                sim.crash(nodes[n]);
                let until = now + rng.ms(200, 3_000);
                timeline.push(format!("{now:?} {} crashed until {until:?}", nodes[n]));
                down = Some((n, until));
            }
            _ => {
                let step = rng.below(6_001) as i64 - 3_000;
                world.clock.offset.fetch_add(step, Ordering::Relaxed);
                timeline.push(format!("{now:?} wall clock stepped {step} ms"));
            }
        }
    }

    let mut shared = shared.take();
    drop(sim);
    let history = history.lock().expect("history").clone();
    let report = history.check();
    let mut violations = std::mem::take(&mut shared.violations);
    if let Some(e) = stuck {
        violations.push(format!("the run did not finish: {e}"));
    }
    if !report.passed() {
        violations.push(format!("history: {report}"));
    }
    for (part, committed) in &shared.committed {
        let best = (1..=3)
            .filter_map(|n| shared.last_hw.get(&(n, *part)))
            .max()
            .copied()
            .unwrap_or(-1);
        if best < *committed {
            violations.push(format!(
                "partition {part}: committed up to {committed}, but the replicas end at HW {best}"
            ));
        }
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    timeline.hash(&mut hasher);
    format!("{report}").hash(&mut hasher);
    shared.committed.hash(&mut hasher);
    shared.epochs.hash(&mut hasher);
    SeedRun {
        violations,
        faults,
        records: report.consumed,
        trace: hasher.finish(),
        timeline,
    }
}

/// Produces [`RECORDS`] records round-robin over the partitions with the
/// idempotent `acks=all` producer, recording every outcome.
async fn produce(client: &Client, history: &Arc<Mutex<History>>) {
    let producer = Producer::builder(client)
        .acks(Acks::All)
        .idempotence(true)
        .request_timeout(Duration::from_secs(5))
        .delivery_timeout(Duration::from_secs(60))
        .linger(Duration::from_millis(2))
        .build();
    let mut deliveries = tokio::task::JoinSet::new();
    for id in 0..RECORDS {
        let bytes = payload(id, 16 + (id % 32) as usize);
        let (_, sum) = parse_payload(&bytes).expect("own payload");
        let record = ProducerRecord::new(TOPIC)
            .partition((id % PARTITIONS as u64) as i32)
            .value(bytes);
        history
            .lock()
            .expect("history")
            .produced(id, sum, ProduceOutcome::Unknown);
        match producer.send(record).await {
            Ok(d) => {
                let history = history.clone();
                deliveries.spawn(async move {
                    let outcome = match d.await {
                        Ok(m) => ProduceOutcome::Acked {
                            partition: m.partition,
                            offset: m.offset,
                        },
                        Err(_) => ProduceOutcome::Failed,
                    };
                    history.lock().expect("history").produced(id, sum, outcome);
                });
            }
            Err(_) => history
                .lock()
                .expect("history")
                .produced(id, sum, ProduceOutcome::Failed),
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    while deliveries.join_next().await.is_some() {}
    producer.close().await;
}

/// Reads every partition from the start until it holds at least as many records
/// as were acknowledged and nothing more arrives for a while.
async fn consume(client: &Client, history: &mut History) {
    let acked = history.check().acknowledged as usize;
    let mut builder = Consumer::builder(client).max_wait(Duration::from_millis(100));
    for p in 0..PARTITIONS {
        builder = builder.assign(TOPIC.to_owned(), p, StartOffset::Earliest);
    }
    let mut consumer = match builder.build().await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("consumer: {e}");
            return;
        }
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let idle = if history.consumed_count() < acked {
            Duration::from_secs(20)
        } else {
            Duration::from_secs(1)
        };
        let wait = idle.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
        match tokio::time::timeout(wait, consumer.recv()).await {
            Ok(Ok(r)) => match r.value.as_deref().and_then(parse_payload) {
                Some((id, sum)) => history.consumed(r.partition, r.offset, id, sum),
                None => history.consumed(r.partition, r.offset, u64::MAX, 0),
            },
            Ok(Err(e)) => {
                eprintln!("consumer: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(_) => break,
        }
    }
}
