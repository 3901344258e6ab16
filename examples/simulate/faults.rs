//! The fault schedule a seed draws, and healing.
//!
//! Every 200-900 simulated ms while the producer runs, one of:
//! - a link between two nodes (or a node and the controller) partitioned or held
//!   for 0.1-2 s;
//! - a node crashed and restarted after 0.2-3 s; while it is down, the seed may
//!   tear the tail of its partition logs (a crash in the middle of a write) or flip
//!   a byte inside a stored batch (a bad sector);
//! - a node's disk failing for 0.2-2 s (ENOSPC or EIO on write, a short write, a
//!   failing fsync), after which it is restarted, as an operator would;
//! - a node's disk slow for 0.5-4 s: every fsync (segments roll every 2 KiB here,
//!   and each roll syncs) takes 20-1,500 ms longer in simulated time, which the
//!   blocking append's caller waits out;
//! - one host's wall clock stepped by up to ±3 s (each host has its own clock).
//!
//! At most one node is down or has a failing disk at a time (one slow disk may
//! come on top: it loses nothing), and a node's stored
//! data is damaged (torn, flipped, failing writes) only while the cluster is
//! healthy: every node up and in every partition's ISR, and no node restarted in
//! the last 5 s (the controller learns of a quick restart only when the node
//! registers again). That is the single
//! failure the replication factor 3 and `min.insync.replicas` 2 tolerate;
//! crashes and network faults need no such care (a crash loses no written byte
//! here: logs are files that survive the host).

use std::path::{Path, PathBuf};
use std::time::Duration;

use baton_broker::faults::{disk, DiskFault};

use crate::sim_env::{Clocks, Rng};

/// The broker nodes' host names.
pub const NODES: [&str; 3] = ["node1", "node2", "node3"];

/// How long after a restart no stored data is damaged: the simulation's session
/// timeout (3 s) and then some, so the controller has seen the restart.
const CALM: Duration = Duration::from_secs(5);

/// A node that is down or whose disk fails, until when.
enum Down {
    /// Crashed; restarted at the deadline.
    Crashed,
    /// Its disk fails; the fault is cleared and the node restarted at the deadline.
    Disk,
}

/// The faults in force and the counts so far.
pub struct Faults {
    data: PathBuf,
    down: Option<(usize, Down, Duration)>,
    /// A node whose fsyncs are slow, until when, and the stall count then.
    slow: Option<(usize, Duration, u64)>,
    /// Fsyncs the slow disks stalled.
    pub stalled: u64,
    cuts: Vec<(&'static str, &'static str, bool, Duration)>,
    next: Duration,
    /// No stored data is damaged before this: a restarted node needs a session
    /// timeout before the controller's view (which `healthy` reads) is current.
    calm_until: Duration,
    /// Faults injected.
    pub injected: u64,
    /// What happened when, for the replay's output and the trace hash.
    pub timeline: Vec<String>,
}

impl Faults {
    /// No faults yet; `data` holds each node's data directory (`nodeN`).
    pub fn new(data: &Path, rng: &mut Rng) -> Faults {
        Faults {
            data: data.to_path_buf(),
            down: None,
            slow: None,
            stalled: 0,
            cuts: Vec::new(),
            next: rng.ms(300, 800),
            calm_until: Duration::ZERO,
            injected: 0,
            timeline: Vec::new(),
        }
    }

    /// Ends the faults whose time is up and injects the next one when due.
    /// `healthy`: every node is up and in every partition's ISR, so one node's
    /// stored data may be damaged now without a second failure.
    pub fn step(
        &mut self,
        sim: &mut turmoil::Sim<'_>,
        rng: &mut Rng,
        clocks: &Clocks,
        healthy: bool,
    ) {
        let now = sim.elapsed();
        let mut i = 0;
        while i < self.cuts.len() {
            if self.cuts[i].3 <= now {
                let (a, b, held, _) = self.cuts.swap_remove(i);
                reconnect(sim, a, b, held);
                self.timeline.push(format!("{now:?} {a} <-> {b} repaired"));
            } else {
                i += 1;
            }
        }
        if self.down.as_ref().is_some_and(|d| d.2 <= now) {
            self.restart(sim, "");
        }
        if self.slow.is_some_and(|s| s.1 <= now) {
            self.end_slow(now, "");
        }
        if now < self.next {
            return;
        }
        self.next = now + rng.ms(200, 900);
        self.injected += 1;
        let healthy = healthy && now >= self.calm_until;
        match rng.below(8) {
            0..=2 => self.cut(sim, rng, now),
            3 | 4 => self.crash(sim, rng, now, healthy),
            5 if healthy && rng.below(5) < 4 => self.fail_disk(rng, now),
            5 => self.slow_fsync(rng, now),
            _ => {
                let hosts = ["controller", "node1", "node2", "node3", "clients"];
                let host = hosts[rng.below(hosts.len() as u64) as usize];
                let step = rng.below(6_001) as i64 - 3_000;
                clocks.step(host, step);
                self.timeline
                    .push(format!("{now:?} {host}'s wall clock stepped {step} ms"));
            }
        }
    }

    /// Repairs every link and restarts the node that is down.
    pub fn heal(&mut self, sim: &mut turmoil::Sim<'_>) {
        for (a, b, held, _) in self.cuts.drain(..) {
            reconnect(sim, a, b, held);
        }
        self.restart(sim, "heal: ");
        let now = sim.elapsed();
        self.end_slow(now, "heal: ");
    }

    fn cut(&mut self, sim: &mut turmoil::Sim<'_>, rng: &mut Rng, now: Duration) {
        let a = NODES[rng.below(3) as usize];
        let b = if rng.below(4) == 0 {
            "controller"
        } else {
            NODES[rng.below(3) as usize]
        };
        if a == b {
            self.injected -= 1;
            return;
        }
        let held = rng.below(3) == 0;
        if held {
            sim.hold(a, b);
        } else {
            sim.partition(a, b);
        }
        let until = now + rng.ms(100, 2_000);
        self.timeline.push(format!(
            "{now:?} {a} <-> {b} {} until {until:?}",
            if held { "held" } else { "partitioned" }
        ));
        self.cuts.push((a, b, held, until));
    }

    fn crash(&mut self, sim: &mut turmoil::Sim<'_>, rng: &mut Rng, now: Duration, healthy: bool) {
        if self.down.is_some() {
            self.injected -= 1;
            return;
        }
        let n = rng.below(3) as usize;
        sim.crash(NODES[n]);
        let until = now + rng.ms(200, 3_000);
        self.timeline
            .push(format!("{now:?} {} crashed until {until:?}", NODES[n]));
        let node_dir = self.data.join(NODES[n]);
        match if healthy { rng.below(4) } else { 3 } {
            0 => {
                let bytes = 1 + rng.below(4_096);
                for log in partition_dirs(&node_dir) {
                    if let Ok(torn) = disk::tear_tail(&log, bytes) {
                        if torn > 0 {
                            self.timeline.push(format!(
                                "{now:?} {}: tore the last {torn} bytes of {}",
                                NODES[n],
                                name(&log)
                            ));
                        }
                    }
                }
            }
            1 => {
                let logs = partition_dirs(&node_dir);
                if !logs.is_empty() {
                    let log = &logs[rng.below(logs.len() as u64) as usize];
                    if let Some(at) = flip_stored_byte(log, rng) {
                        self.timeline.push(format!(
                            "{now:?} {}: flipped a stored byte of {} at {at}",
                            NODES[n],
                            name(log)
                        ));
                    }
                }
            }
            _ => {}
        }
        self.down = Some((n, Down::Crashed, until));
    }

    fn fail_disk(&mut self, rng: &mut Rng, now: Duration) {
        if self.down.is_some() {
            self.injected -= 1;
            return;
        }
        let n = rng.below(3) as usize;
        if let Some((_, _, before)) = self.slow.take_if(|s| s.0 == n) {
            // The failing disk replaces the slow one.
            self.stalled += crate::sim_env::stalls() - before;
        }
        let fault = match rng.below(4) {
            0 => DiskFault::NoSpace,
            1 => DiskFault::FailWrite,
            2 => DiskFault::ShortWrite,
            _ => DiskFault::FailFsync,
        };
        disk::set(&self.data.join(NODES[n]), fault);
        let until = now + rng.ms(200, 2_000);
        self.timeline.push(format!(
            "{now:?} {}'s disk fails ({fault:?}) until {until:?}",
            NODES[n]
        ));
        self.down = Some((n, Down::Disk, until));
    }

    fn slow_fsync(&mut self, rng: &mut Rng, now: Duration) {
        let n = rng.below(3) as usize;
        let disk_down = matches!(self.down, Some((m, Down::Disk, _)) if m == n);
        if self.slow.is_some() || disk_down {
            self.injected -= 1;
            return;
        }
        let delay = rng.ms(20, 1_500);
        disk::set(&self.data.join(NODES[n]), DiskFault::SlowFsync(delay));
        let until = now + rng.ms(500, 4_000);
        self.timeline.push(format!(
            "{now:?} {}'s fsyncs take {delay:?} longer until {until:?}",
            NODES[n]
        ));
        self.slow = Some((n, until, crate::sim_env::stalls()));
    }

    fn end_slow(&mut self, now: Duration, prefix: &str) {
        let Some((n, _, before)) = self.slow.take() else {
            return;
        };
        disk::set(&self.data.join(NODES[n]), DiskFault::None);
        let stalled = crate::sim_env::stalls() - before;
        self.stalled += stalled;
        self.timeline.push(format!(
            "{now:?} {prefix}{}'s fsyncs are fast again ({stalled} stalled)",
            NODES[n]
        ));
    }

    fn restart(&mut self, sim: &mut turmoil::Sim<'_>, prefix: &str) {
        let now = sim.elapsed();
        let Some((n, how, _)) = self.down.take() else {
            return;
        };
        if let Down::Disk = how {
            disk::set(&self.data.join(NODES[n]), DiskFault::None);
        }
        sim.bounce(NODES[n]);
        self.calm_until = now + CALM;
        self.timeline
            .push(format!("{now:?} {prefix}{} restarted", NODES[n]));
    }
}

fn reconnect(sim: &mut turmoil::Sim<'_>, a: &str, b: &str, held: bool) {
    if held {
        sim.release(a, b);
    } else {
        sim.repair(a, b);
    }
}

fn name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A node's partition log directories (`<topic>-<partition>`), in name order.
fn partition_dirs(node_dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(node_dir) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .filter(|p| name(p).starts_with(crate::scenario::TOPIC))
        .collect();
    dirs.sort();
    dirs
}

/// Flips one byte inside the CRC-covered part (attributes to the last record) of
/// a batch stored in one of `log`'s segment files. Returns the file and position.
fn flip_stored_byte(log: &Path, rng: &mut Rng) -> Option<String> {
    use std::os::unix::fs::FileExt;
    let mut segments: Vec<PathBuf> = std::fs::read_dir(log)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    segments.sort();
    let segment = segments.get(rng.below(segments.len() as u64) as usize)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(segment)
        .ok()?;
    let len = file.metadata().ok()?.len();
    // Walk the batches: base offset (8), length (4), then `length` bytes, of which
    // the CRC covers everything after the first 9 (epoch 4, magic 1, CRC 4).
    let mut spans = Vec::new();
    let mut pos = 0u64;
    let mut head = [0u8; 12];
    while pos + 12 <= len && file.read_exact_at(&mut head, pos).is_ok() {
        let size = u32::from_be_bytes([head[8], head[9], head[10], head[11]]) as u64;
        if size < 9 + 40 || pos + 12 + size > len {
            break;
        }
        spans.push((pos + 12 + 9, pos + 12 + size));
        pos += 12 + size;
    }
    let (from, to) = *spans.get(rng.below(spans.len() as u64) as usize)?;
    let at = from + rng.below(to - from);
    let mut b = [0u8; 1];
    file.read_exact_at(&mut b, at).ok()?;
    file.write_all_at(&[b[0] ^ (1 << rng.below(8))], at).ok()?;
    file.sync_data().ok()?;
    Some(format!("{}+{at}", name(segment)))
}
