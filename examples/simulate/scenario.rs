//! One seed's run: the hosts (a controller, three nodes, the clients), the
//! probes that watch the invariants, and the fault schedule the seed draws.
//!
//! While the producer runs, the seed injects faults (see [`crate::faults`]);
//! the maximum message latency (1-25 ms) is drawn per seed. Then everything is
//! healed and the records are read back. Each host has its own wall clock.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use baton_broker::cluster::{ControllerOptions, ControllerServer, Node, NodeOptions};
use baton_broker::controller::ControllerConfig;
use baton_broker::history::History;
use baton_kafka::{Admin, AdminError, Client, NewTopic};
use baton_protocol::ErrorCode;

use crate::faults::Faults;
use crate::sim_env::{Rng, World, EPOCH_MS};
use crate::workload::{consume, group_history, group_member, produce, GroupLog, MEMBERS};

/// The topic every seed writes.
pub const TOPIC: &str = "sim";
/// Its partitions.
pub const PARTITIONS: i32 = 2;

/// Each node's log segment size: a few batches, so segments roll, and fsync,
/// several times per seed.
const SEGMENT_BYTES: u64 = 2_048;
/// The controller's port (on its own host).
const CONTROLLER_PORT: u16 = 9093;
/// Each node's port (on its own host).
const NODE_PORT: u16 = 9092;

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
    /// The controller's last view of each partition and each node's of its
    /// replicas (printed when a replayed seed fails).
    end_state: BTreeMap<String, String>,
    /// Whether the controller saw every broker eligible and every partition
    /// led with its full ISR at its last look: only then may a node's stored
    /// data be damaged (a single failure).
    healthy: bool,
    /// Node incarnations (restarts).
    incarnation: BTreeMap<i32, u64>,
    produced: bool,
    healed: bool,
}

impl Shared {
    /// The highest HW a running replica of `part` reports now (-1 if none).
    fn best_hw(&self, part: i32) -> i64 {
        (1..=3)
            .filter_map(|n| self.last_hw.get(&(n, part)))
            .max()
            .copied()
            .unwrap_or(-1)
    }

    /// Every partition has a replica whose HW reached the largest one seen.
    fn hw_recovered(&self) -> bool {
        self.committed
            .iter()
            .all(|(part, committed)| self.best_hw(*part) >= *committed)
    }
}

/// What one seed's run found.
pub struct SeedRun {
    /// Each invariant broken, described.
    pub violations: Vec<String>,
    /// Faults injected.
    pub faults: u64,
    /// Fsyncs a slow disk stalled.
    pub stalled_fsyncs: u64,
    /// Records the consumer read and the history checked.
    pub records: u64,
    /// A hash of what happened (timeline, history report, end state).
    pub trace: u64,
    /// The injected faults, with their simulated times.
    pub timeline: Vec<String>,
    /// The last state the probes saw.
    pub end_state: Vec<String>,
}

/// Runs one seed (in a process of its own: see `main`).
/// `groups`: members of a consumer group consume while the faults run.
pub fn run_seed(seed: u64, world: &World, groups: bool) -> SeedRun {
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
    let env = world.clocks.env("controller");
    sim.host("controller", move || {
        let probe = probe.clone();
        let env = env.clone();
        async move {
            let options = ControllerOptions {
                env,
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
                p.healthy = state.brokers().count() == 3
                    && state.brokers().all(|b| b.is_eligible())
                    && state.topic_by_name(TOPIC).is_some_and(|t| {
                        (0..PARTITIONS).all(|part| {
                            state
                                .partition(t.topic_id, part)
                                .is_some_and(|i| i.isr.len() == 3 && i.leader >= 0)
                        })
                    });
                for b in state.brokers() {
                    p.end_state.insert(
                        format!("controller broker {}", b.broker_id),
                        format!(
                            "epoch {} fenced {} shutting down {}",
                            b.broker_epoch, b.fenced, b.in_controlled_shutdown
                        ),
                    );
                }
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
                        p.end_state.insert(
                            format!("controller p{part}"),
                            format!(
                                "leader {} epoch {} isr {:?} replicas {:?}",
                                info.leader, info.leader_epoch, info.isr, info.replicas
                            ),
                        );
                    }
                }
            }
        }
    });

    for id in 1..=3i32 {
        let probe = shared.clone();
        let dir = dir.clone();
        let env = world.clocks.env(&format!("node{id}"));
        sim.host(format!("node{id}"), move || {
            let probe = probe.clone();
            let dir = dir.clone();
            let env = env.clone();
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
                options.broker.env = env.clone();
                // Small segments: logs roll (and fsync) many times per seed.
                options.broker.segment_bytes = SEGMENT_BYTES;
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
                        p.end_state.insert(
                            format!("node{id} p{part}"),
                            format!(
                                "{} epoch {} leo {} hw {} offline {}",
                                v.role, v.leader_epoch, v.log_end_offset, v.high_watermark, v.log_offline
                            ),
                        );
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
    let group_log = Arc::new(Mutex::new(GroupLog::default()));
    let g = group_log.clone();
    let produced_only = Arc::new(Mutex::new(History::new()));
    let gp = produced_only.clone();
    let client_env = world.clocks.env("clients");
    sim.client("clients", async move {
        let client = Client::builder(["node1:9092", "node2:9092", "node3:9092"])
            .env(client_env)
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
            // An attempt whose answer was lost may have created it.
            let exists = |e: &AdminError| {
                matches!(e, AdminError::Topics(t)
                    if t.iter().all(|t| t.code == ErrorCode::TopicAlreadyExists))
            };
            if created.as_ref().map_or_else(exists, |_| true) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let mut members = tokio::task::JoinSet::new();
        for n in 0..if groups { MEMBERS } else { 0 } {
            members.spawn(group_member(client.clone(), n, g.clone(), stopped.clone()));
        }
        produce(&client, &h).await;
        flags.borrow_mut().produced = true;
        while !flags.borrow().healed {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let produced = h.lock().expect("history").clone();
        let mut consumed = produced.clone();
        consume(&client, &mut consumed).await;
        *h.lock().expect("history") = consumed;
        // The group goes on until it has received every acknowledged record
        // (at least once), or a minute passes.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while groups && tokio::time::Instant::now() < deadline {
            let lost = group_history(&produced, &g.lock().expect("group log"))
                .check()
                .lost;
            if lost == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // A new leader's HW may lag until its ISR has fetched from it (as in
        // Kafka): committed records must become visible again, so the run goes
        // on until some replica of each partition reaches the largest HW seen,
        // or a minute passes (then the check below reports it).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while !flags.borrow().hw_recovered() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = stop.send(true);
        while members.join_next().await.is_some() {}
        *gp.lock().expect("produced") = produced;
        Ok(())
    });

    let mut faults = Faults::new(&dir, &mut rng);
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
        let produced = shared.borrow().produced;
        if produced && !shared.borrow().healed {
            faults.heal(&mut sim);
            shared.borrow_mut().healed = true;
        }
        if !produced {
            let healthy = shared.borrow().healthy;
            faults.step(&mut sim, &mut rng, &world.clocks, healthy);
        }
    }

    let mut timeline = std::mem::take(&mut faults.timeline);
    timeline.push(format!("{:?} end", sim.elapsed()));
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
    let group = std::mem::take(&mut *group_log.lock().expect("group log"));
    let produced = produced_only.lock().expect("produced").clone();
    let group_report = group_history(&produced, &group).check();
    violations.extend(group.violations.iter().cloned());
    if groups && (group_report.lost > 0 || group_report.corrupted > 0) {
        violations.push(format!(
            "group: {group_report}; received offsets {}; max generation {}, members rebuilt {}; {}",
            offset_ranges(&group.consumed),
            group.max_generation,
            group.rebuilds,
            group.final_states.join("; ")
        ));
    }
    for (part, committed) in &shared.committed {
        let best = shared.best_hw(*part);
        if best < *committed {
            violations.push(format!(
                "partition {part}: committed up to {committed}, but the replicas end at HW {best}"
            ));
        }
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    timeline.hash(&mut hasher);
    format!("{report}").hash(&mut hasher);
    format!("{group_report}").hash(&mut hasher);
    group.max_generation.hash(&mut hasher);
    shared.committed.hash(&mut hasher);
    shared.epochs.hash(&mut hasher);
    SeedRun {
        violations,
        faults: faults.injected,
        stalled_fsyncs: faults.stalled,
        records: report.consumed + group_report.consumed,
        trace: hasher.finish(),
        timeline,
        end_state: shared
            .end_state
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect(),
    }
}

/// The offsets the group received, per partition, as ranges (`p0 0-41 45-90`),
/// so a failure shows where records went missing.
fn offset_ranges(consumed: &[(i32, i64, u64, u32)]) -> String {
    let mut by_partition: std::collections::BTreeMap<i32, std::collections::BTreeSet<i64>> =
        std::collections::BTreeMap::new();
    for &(p, o, _, _) in consumed {
        by_partition.entry(p).or_default().insert(o);
    }
    let mut out = Vec::new();
    for (p, offsets) in by_partition {
        let mut ranges: Vec<(i64, i64)> = Vec::new();
        for o in offsets {
            match ranges.last_mut() {
                Some((_, end)) if *end + 1 == o => *end = o,
                _ => ranges.push((o, o)),
            }
        }
        let r: Vec<String> = ranges.iter().map(|(a, b)| format!("{a}-{b}")).collect();
        out.push(format!("p{p} {}", r.join(" ")));
    }
    out.join(", ")
}
