//! Baton's demo: an application keeps producing and consuming through a graceful
//! rolling restart, a hard kill of a leader and a corrupted segment on a leader, and
//! proves afterwards that nothing was lost, duplicated, reordered or corrupted.
//!
//! ```text
//! cargo run --release --example rolling_restart -- [--duration SECS] [--nodes N] [--seed S] [--out PATH]
//! ```
//!
//! It starts an in-process cluster of `--nodes` brokers on 127.0.0.1 with a
//! controller, every node's log in a temporary directory, and creates a topic with
//! two partitions per node, replication factor 3 and `min.insync.replicas=2`.
//!
//! The application is the one from Baton's mission statement:
//! - the producer (idempotent, `acks=all`) takes each value's buffer from a pool of
//!   `BytesMut`, writes a sequence number, filler and a CRC-32C into it, keeps its
//!   own handle on the frozen `Bytes` and sends the record with a 1 s timeout. A
//!   buffer goes back to the pool only through `Bytes::try_into_mut`, which succeeds
//!   only when the producer holds no reference any more;
//! - when a send times out it asks Baton what happened ([`DeliveryFuture::cancel`]):
//!   `NeverSent` hands the record back, guaranteed unwritten, and the application
//!   sends it again; `InFlight` means the outcome is unknown, so the application
//!   awaits it (its attempt to reclaim the buffer early is refused and counted);
//! - a consumer with explicit partition assignment reads every partition while
//!   the faults happen and checks each value's CRC, its partition, and its offsets.
//!
//! Meanwhile the cluster goes through, in order: a graceful rolling restart (each
//! node in turn: controlled shutdown, restart, wait until it is back in its ISRs);
//! a hard kill of the leader of a partition chosen by the seed (restarted once new
//! leaders are elected); and a flipped byte in a stored batch of a leader (a
//! committed offset half-way through its log), which a second reader then replays
//! through: the leader detects the damage before serving it, steps down, a healthy
//! replica serves intact data, and the damaged replica repairs itself.
//!
//! Every produce outcome and every record read goes to the history checker of
//! [`baton_broker::history`]. Sends are numbered in the order the producer accepted
//! them (a record sent again after `NeverSent` gets a new number), so its order check
//! is exact. Live progress goes to the terminal (plain log lines when stderr is not
//! one); at the end a report lists the counts, every fault's stall (the longest gap
//! between two acknowledgements of one partition that ends during the fault), the
//! corruption's detection and repair times, and an SVG chart of acknowledgements per
//! second with the faults and leader changes marked is written to `--out`. The exit
//! code is 1 if any record was lost, duplicated, reordered or corrupted, or any error
//! reached the application.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use baton_broker::history::{History, ProduceOutcome};
use baton_broker::Cluster;
use baton_kafka::{
    Admin, CancelOutcome, CancellationToken, Client, Consumer, DeliveryFuture, NewTopic,
    ProduceError, Producer, ProducerRecord, RecordMetadata, StartOffset,
};
use baton_testkit::Rng;
use bytes::{Bytes, BytesMut};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use baton_testkit::args;
use baton_testkit::payload::{fill_payload, intact_id, parse_payload};

const HELP: &str = "\
rolling_restart: an application rides a rolling restart, a leader kill and a corrupted
segment of an in-process Baton cluster; the report shows nothing lost, duplicated,
reordered or corrupted.

USAGE:
    cargo run --release --example rolling_restart -- [OPTIONS]

OPTIONS:
    --duration SECS   how long the application produces (default 30); the faults run
                      in sequence from the start and production goes on at least
                      until they are over
    --nodes N         broker nodes in the cluster, at least 3 (default 3); the topic
                      has 2 partitions per node and replication factor 3
    --seed S          seed for choosing faults (default: BATON_SEED or time-based,
                      printed so that a run can be repeated)
    --rate R          records produced per second (default 10000)
    --out PATH        where to write the SVG timeline chart
                      (default target/rolling_restart.svg)
    -h, --help        print this help

The exit code is 1 if a record was lost, duplicated, reordered or corrupted, or if an
error reached the application (a failed delivery, a consumer error).
";

const VALUE_SIZE: usize = 100;
/// Each send's deadline; shorter than a hard-kill failover, so both cancellation
/// outcomes happen.
const SEND_TIMEOUT: Duration = Duration::from_secs(1);
/// How long a hard-killed node stays silent before the controller fences it.
const SESSION_TIMEOUT: Duration = Duration::from_secs(2);
/// Sends whose outcome the application may wait for at once.
const MAX_OUTSTANDING: usize = 20_000;

struct Options {
    duration: Duration,
    nodes: usize,
    seed: u64,
    rate: u64,
    out: PathBuf,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        duration: Duration::from_secs(30),
        nodes: 3,
        seed: 0,
        rate: 10_000,
        out: PathBuf::from("target/rolling_restart.svg"),
    };
    let mut seed = None;
    let mut args = args::Args::new(HELP);
    while let Some(a) = args.next_flag() {
        match a.as_str() {
            "--duration" => {
                let secs: f64 = args.value("--duration")?;
                if !(secs.is_finite() && secs > 0.0) {
                    return Err("--duration must be a positive number of seconds".into());
                }
                o.duration = Duration::from_secs_f64(secs);
            }
            "--nodes" => o.nodes = args.value("--nodes")?,
            "--seed" => seed = Some(args.value("--seed")?),
            "--rate" => o.rate = args.value("--rate")?,
            "--out" => o.out = args.value("--out")?,
            other => return Err(args::unknown(other)),
        }
    }
    o.seed = seed.unwrap_or_else(baton_testkit::seed);
    if o.nodes < 3 {
        return Err("--nodes must be at least 3 (the topic has replication factor 3)".into());
    }
    if o.nodes > 32 {
        return Err("--nodes must be at most 32".into());
    }
    if o.rate == 0 {
        return Err("--rate must be at least 1".into());
    }
    Ok(o)
}

/// What kind of mark an event leaves on the chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EventKind {
    /// A phase of the scenario begins.
    Phase,
    /// A fault is injected (shutdown, kill, corruption).
    Fault,
    /// A node comes back, or a repair completes.
    Recovery,
    /// A partition's leader changed.
    Leader,
    /// Logged, not drawn.
    Note,
}

#[derive(Debug, Clone)]
struct Event {
    at: Duration,
    kind: EventKind,
    what: String,
    /// The label on the chart, for faults.
    short: Option<String>,
}

/// One fault and the time range whose acknowledgements tell its stall.
#[derive(Debug, Clone)]
struct FaultWindow {
    label: String,
    start: Duration,
    end: Duration,
}

/// What the producing side of the application counts.
#[derive(Debug, Default)]
struct ProduceStats {
    /// (time since start in µs, partition) of every acknowledgement.
    acks: Vec<(u64, i32)>,
    /// Records acknowledged.
    acked: u64,
    /// Records whose delivery failed for good.
    failed: u64,
    /// Sends that hit the timeout.
    timeouts: u64,
    /// Timed-out records handed back as never sent, and sent again.
    never_sent: u64,
    /// Timed-out records that were in flight, awaited to their outcome.
    in_flight: u64,
    /// Buffers returned to the pool through `try_into_mut`.
    reclaimed: u64,
    /// Reclaims refused because the producer still held the buffer.
    refused: u64,
    /// Buffers returned after their final outcome that were still shared (a bug).
    leaked: u64,
    /// Buffers newly allocated because the pool was empty.
    allocated: u64,
}

/// The producer's numbers at one moment, from [`Producer::stats`].
#[derive(Debug, Clone, Copy)]
struct ProducerSample {
    at: Duration,
    /// Produce requests awaiting a response, all brokers.
    in_flight: u64,
    /// Records sent again so far, all errors.
    retries: u64,
}

/// State shared by the application's tasks, the fault driver and the display.
struct App {
    t0: Instant,
    topic: String,
    partitions: i32,
    producer: Producer,
    pool: Mutex<Vec<BytesMut>>,
    stats: Mutex<ProduceStats>,
    /// Serialises handing records to the producer and numbers each accepted send,
    /// so that the numbers follow the order records were accepted in (a record sent
    /// again after `NeverSent` gets a new, later number).
    send_gate: tokio::sync::Mutex<u64>,
    /// The number of each sequence number's last accepted send.
    ids: Mutex<Vec<u64>>,
    /// Every produce outcome and every record read, for the history checker.
    history: Mutex<History>,
    produced: AtomicU64,
    acked: AtomicU64,
    consumed: AtomicU64,
    events: Mutex<Vec<Event>>,
    phase: Mutex<String>,
    leaders: Mutex<Vec<i32>>,
    /// The producer's requests in flight and retries so far, every 100 ms
    /// ([`Producer::stats`]), for the chart's second panel.
    producer_samples: Mutex<Vec<ProducerSample>>,
    corruption: Mutex<CorruptionReport>,
    /// What the replaying reader of the corruption step found wrong.
    replay_corrupted: AtomicU64,
    replay_reordered: AtomicU64,
    replay_errors: AtomicU64,
    ui: Ui,
}

impl App {
    fn now(&self) -> Duration {
        self.t0.elapsed()
    }

    fn event(&self, kind: EventKind, what: String) {
        self.event_labelled(kind, what, None);
    }

    /// A fault, with a short label for the chart.
    fn fault(&self, short: &str, what: String) {
        self.event_labelled(EventKind::Fault, what, Some(short.to_owned()));
    }

    fn event_labelled(&self, kind: EventKind, what: String, short: Option<String>) {
        let at = self.now();
        if kind == EventKind::Phase {
            *self.phase.lock().unwrap() = what.clone();
        }
        self.ui
            .log(format!("{:>7.2}s  {}", at.as_secs_f64(), what.as_str()));
        self.events.lock().unwrap().push(Event {
            at,
            kind,
            what,
            short,
        });
    }

    fn take_buffer(&self) -> BytesMut {
        if let Some(b) = self.pool.lock().unwrap().pop() {
            return b;
        }
        self.stats.lock().unwrap().allocated += 1;
        BytesMut::with_capacity(VALUE_SIZE)
    }

    /// Gives a buffer back to the pool if no one else holds it; counts a refusal
    /// and returns the bytes otherwise.
    fn reclaim(&self, mine: Bytes) -> Result<(), Bytes> {
        match mine.try_into_mut() {
            Ok(buf) => {
                self.pool.lock().unwrap().push(buf);
                self.stats.lock().unwrap().reclaimed += 1;
                Ok(())
            }
            Err(still_shared) => {
                self.stats.lock().unwrap().refused += 1;
                Err(still_shared)
            }
        }
    }

    /// A record for `seq`, the application's own handle on its value, and the
    /// value's CRC-32C (what the history checker compares reads against).
    fn record(&self, seq: u64) -> (ProducerRecord, Bytes, u32) {
        let mut buf = self.take_buffer();
        fill_payload(&mut buf, seq, VALUE_SIZE);
        let value = buf.freeze();
        let mine = value.clone();
        let (_, checksum) = parse_payload(&value).expect("a payload parses");
        let record = ProducerRecord::new(self.topic.clone())
            .partition((seq % self.partitions as u64) as i32)
            .key(Bytes::from(format!("key-{}", seq % 1000)))
            .value(value);
        (record, mine, checksum)
    }

    /// Hands `seq`'s record to the producer (giving up if `stop` is cancelled first)
    /// and numbers the send if it is accepted.
    async fn accept(
        &self,
        seq: u64,
        record: ProducerRecord,
        stop: Option<&CancellationToken>,
    ) -> Result<DeliveryFuture, ProduceError> {
        let mut next = self.send_gate.lock().await;
        let delivery = match stop {
            Some(token) => self.producer.send_with_cancel(record, token).await?,
            None => self.producer.send(record).await?,
        };
        let mut ids = self.ids.lock().unwrap();
        match ids.get_mut(seq as usize) {
            Some(id) => *id = *next,
            None => {
                ids.resize(seq as usize, u64::MAX);
                ids.push(*next);
            }
        }
        *next += 1;
        Ok(delivery)
    }

    /// The number of `seq`'s last accepted send; `u64::MAX` (never produced) if none.
    fn id_of(&self, seq: u64) -> u64 {
        self.ids
            .lock()
            .unwrap()
            .get(seq as usize)
            .copied()
            .unwrap_or(u64::MAX)
    }

    /// Hands a record read by any reader to the history checker; returns whether
    /// the application's own check passes (intact CRC, right partition).
    fn observe(&self, record: &baton_kafka::ConsumerRecord) -> bool {
        let value = record.value.as_deref().unwrap_or_default();
        let checked = intact_id(value);
        // A damaged value still names the record it claims to be, and reports a
        // checksum the producer never recorded.
        let parsed = parse_payload(value);
        let id = parsed.map_or(u64::MAX, |(seq, _)| self.id_of(seq));
        let sum = parsed.map_or(0, |(_, sum)| sum);
        self.history
            .lock()
            .unwrap()
            .consumed(record.partition, record.offset, id, sum);
        checked.is_some_and(|s| (s % self.partitions as u64) as i32 == record.partition)
    }

    /// Waits for `seq`'s final outcome with a deadline on every attempt, acting on
    /// what Baton says a timed-out send became; then returns its buffer to the pool.
    async fn follow(
        self: Arc<Self>,
        seq: u64,
        mut delivery: DeliveryFuture,
        mine: Bytes,
        checksum: u32,
    ) {
        let mut mine = Some(mine);
        let result: Result<RecordMetadata, ProduceError> = loop {
            match tokio::time::timeout(SEND_TIMEOUT, &mut delivery).await {
                Ok(result) => break result,
                Err(_elapsed) => {
                    self.stats.lock().unwrap().timeouts += 1;
                    match delivery.cancel() {
                        CancelOutcome::NeverSent(record) => {
                            // Guaranteed unwritten: sending it again cannot duplicate it.
                            self.stats.lock().unwrap().never_sent += 1;
                            match self.accept(seq, record, None).await {
                                Ok(d) => delivery = d,
                                Err(e) => break Err(e),
                            }
                        }
                        CancelOutcome::InFlight(in_flight) => {
                            self.stats.lock().unwrap().in_flight += 1;
                            // An application written for buffers it owns outright would
                            // reuse this one now. The reclaim is refused while the
                            // producer still holds the bytes it may yet retry.
                            if let Some(bytes) = mine.take() {
                                mine = self.reclaim(bytes).err();
                            }
                            break in_flight.await;
                        }
                        CancelOutcome::Delivered(meta) => break Ok(meta),
                        CancelOutcome::Failed(e) => break Err(e),
                    }
                }
            }
        };
        let outcome = match &result {
            Ok(meta) => ProduceOutcome::Acked {
                partition: meta.partition,
                offset: meta.offset,
            },
            // Whether a failed record was written is not known in general.
            Err(_) => ProduceOutcome::Unknown,
        };
        self.history
            .lock()
            .unwrap()
            .produced(self.id_of(seq), checksum, outcome);
        match result {
            Ok(meta) => {
                let at = self.now().as_micros() as u64;
                let mut st = self.stats.lock().unwrap();
                st.acks.push((at, meta.partition));
                st.acked += 1;
                self.acked.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.stats.lock().unwrap().failed += 1;
                self.ui.log(format!("record {seq} failed: {e}"));
            }
        }
        // The outcome is final and the producer's copy dropped: the buffer is ours.
        if let Some(bytes) = mine {
            match bytes.try_into_mut() {
                Ok(buf) => {
                    self.pool.lock().unwrap().push(buf);
                    self.stats.lock().unwrap().reclaimed += 1;
                }
                Err(_) => self.stats.lock().unwrap().leaked += 1,
            }
        }
    }
}

/// Produces `rate` records per second until `stop` is cancelled.
async fn produce(app: Arc<App>, rate: u64, stop: CancellationToken) {
    let limit = Arc::new(tokio::sync::Semaphore::new(MAX_OUTSTANDING));
    let mut followers = tokio::task::JoinSet::new();
    let started = Instant::now();
    let mut seq = 0u64;
    while !stop.is_cancelled() {
        let due = (started.elapsed().as_secs_f64() * rate as f64) as u64;
        if seq >= due {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(2)) => {}
                () = stop.cancelled() => break,
            }
            continue;
        }
        let permit = tokio::select! {
            p = limit.clone().acquire_owned() => p.expect("never closed"),
            () = stop.cancelled() => break,
        };
        let (record, mine, checksum) = app.record(seq);
        match app.accept(seq, record, Some(&stop)).await {
            Ok(delivery) => {
                app.produced.fetch_add(1, Ordering::Relaxed);
                let app = app.clone();
                followers.spawn(async move {
                    app.follow(seq, delivery, mine, checksum).await;
                    drop(permit);
                });
                seq += 1;
            }
            Err(ProduceError::Cancelled { record }) => {
                // Never accepted: the record comes back and its buffer goes to the pool.
                drop(record);
                let _ = app.reclaim(mine);
                break;
            }
            Err(e) => {
                app.ui.log(format!("send of record {seq} failed: {e}"));
                app.stats.lock().unwrap().failed += 1;
                app.produced.fetch_add(1, Ordering::Relaxed);
                seq += 1;
            }
        }
        // Reap finished followers so the set stays small.
        while followers.try_join_next().is_some() {}
    }
    while followers.join_next().await.is_some() {}
}

/// What the consuming side of the application found (the history checker sees
/// every record too).
#[derive(Debug, Default)]
struct ConsumeStats {
    consumed: u64,
    /// Values whose CRC failed, or that sat in the wrong partition.
    corrupted: u64,
    /// Offsets not increasing within a partition.
    reordered: u64,
    /// Errors `recv` returned.
    errors: u64,
    /// The consumer's own numbers at the end ([`Consumer::stats`]).
    metrics: baton_kafka::ConsumerStats,
}

/// Reads every partition until `stop` is cancelled, checking every value.
async fn consume(app: Arc<App>, mut consumer: Consumer, stop: CancellationToken) -> ConsumeStats {
    let mut st = ConsumeStats::default();
    let mut last_offset: HashMap<i32, i64> = HashMap::new();
    loop {
        let record = tokio::select! {
            r = consumer.recv() => r,
            () = stop.cancelled() => break,
        };
        let record = match record {
            Ok(r) => r,
            Err(e) => {
                st.errors += 1;
                app.ui.log(format!("consumer error: {e}"));
                if matches!(e, baton_kafka::ConsumerError::Closed) {
                    break;
                }
                continue;
            }
        };
        st.consumed += 1;
        app.consumed.fetch_add(1, Ordering::Relaxed);
        if let Some(prev) = last_offset.insert(record.partition, record.offset) {
            if record.offset <= prev {
                st.reordered += 1;
            }
        }
        if !app.observe(&record) {
            st.corrupted += 1;
        }
    }
    st.metrics = consumer.stats();
    st
}

/// The terminal display: a progress bar with the phase, a line of record counts, a
/// line of send timeout outcomes and a line of partition leaders; or plain log
/// lines when stderr is not a terminal.
struct Ui {
    multi: MultiProgress,
    bar: ProgressBar,
    counts: ProgressBar,
    sends: ProgressBar,
    leaders: ProgressBar,
}

impl Ui {
    fn new(duration: Duration) -> Ui {
        let multi = MultiProgress::new();
        let bar = multi.add(ProgressBar::new(duration.as_millis() as u64));
        bar.set_style(
            ProgressStyle::with_template("{spinner} {elapsed:>4} [{bar:30}] {msg}")
                .expect("a valid template")
                .progress_chars("=> "),
        );
        let line = || {
            let b = ProgressBar::new_spinner();
            b.set_style(ProgressStyle::with_template("  {msg}").expect("a valid template"));
            b
        };
        let counts = multi.add(line());
        let sends = multi.add(line());
        let leaders = multi.add(line());
        Ui {
            multi,
            bar,
            counts,
            sends,
            leaders,
        }
    }

    fn log(&self, line: String) {
        if self.multi.is_hidden() {
            println!("{line}");
        } else {
            let _ = self.multi.println(line);
        }
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
        self.counts.finish_and_clear();
        self.sends.finish_and_clear();
        self.leaders.finish_and_clear();
    }
}

/// Refreshes the display and notices leader changes, every 100 ms.
async fn watch(app: Arc<App>, cluster: Arc<tokio::sync::Mutex<Cluster>>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    while !stop.is_cancelled() {
        tokio::select! {
            _ = tick.tick() => {}
            () = stop.cancelled() => break,
        }
        // A fault step holds the cluster while it runs; leaders are read between steps.
        if let Ok(c) = cluster.try_lock() {
            let now: Vec<(i32, i32)> = (0..app.partitions)
                .map(|p| {
                    c.partition_state(&app.topic, p)
                        .map_or((-1, -1), |v| (v.leader, v.leader_epoch))
                })
                .collect();
            drop(c);
            let changes: Vec<String> = {
                let mut leaders = app.leaders.lock().unwrap();
                let mut changes = Vec::new();
                for (p, &(leader, epoch)) in now.iter().enumerate() {
                    if leaders[p] != leader {
                        if leaders[p] != 0 {
                            changes.push(format!(
                                "partition {p}: leader {} -> {} (epoch {epoch})",
                                show_node(leaders[p]),
                                show_node(leader)
                            ));
                        }
                        leaders[p] = leader;
                    }
                }
                changes
            };
            for c in changes {
                app.event(EventKind::Leader, c);
            }
        }
        let elapsed = app.now();
        let stats = app.producer.stats();
        app.producer_samples.lock().unwrap().push(ProducerSample {
            at: elapsed,
            in_flight: stats.in_flight.values().sum(),
            retries: stats.total_retries(),
        });
        app.ui.bar.set_position(elapsed.as_millis() as u64);
        app.ui.bar.set_message(app.phase.lock().unwrap().clone());
        let st = app.stats.lock().unwrap();
        let (timeouts, never_sent, in_flight, refused) =
            (st.timeouts, st.never_sent, st.in_flight, st.refused);
        drop(st);
        app.ui.counts.set_message(format!(
            "records   produced {} · acked {} · consumed {}",
            app.produced.load(Ordering::Relaxed),
            app.acked.load(Ordering::Relaxed),
            app.consumed.load(Ordering::Relaxed),
        ));
        app.ui.sends.set_message(format!(
            "timeouts  {timeouts} (never sent {never_sent}, in flight {in_flight}) · reclaims refused {refused}"
        ));
        let leaders = app.leaders.lock().unwrap();
        let text: Vec<String> = leaders
            .iter()
            .enumerate()
            .map(|(p, &l)| format!("p{p}:{}", show_node(l)))
            .collect();
        drop(leaders);
        app.ui
            .leaders
            .set_message(format!("leaders   {}", text.join(" ")));
    }
}

fn show_node(id: i32) -> String {
    if id > 0 {
        format!("n{id}")
    } else {
        "none".into()
    }
}

/// Polls `cond` on the cluster every 50 ms (locking it only to look) until it holds
/// or `timeout` passes; returns whether it held.
async fn wait_until(
    cluster: &tokio::sync::Mutex<Cluster>,
    timeout: Duration,
    mut cond: impl FnMut(&Cluster) -> bool,
) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond(&*cluster.lock().await) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether `node` is unfenced and in the ISR of every partition it holds a
/// replica of.
fn in_sync(c: &Cluster, topic: &str, partitions: i32, node: i32) -> bool {
    c.unfenced_brokers().contains(&node)
        && (0..partitions).all(|p| {
            c.partition_state(topic, p).is_some_and(|v| {
                v.leader > 0 && (!v.replicas.contains(&node) || v.isr.contains(&node))
            })
        })
}

/// Runs the faults in sequence; returns one window per fault.
async fn run_faults(
    app: &Arc<App>,
    cluster: &Arc<tokio::sync::Mutex<Cluster>>,
    client: &Client,
    nodes: usize,
    rng: &mut Rng,
) -> Result<Vec<FaultWindow>, Box<dyn std::error::Error>> {
    let topic = app.topic.clone();
    let partitions = app.partitions;
    let mut windows = Vec::new();
    let recover = Duration::from_secs(30);

    app.event(EventKind::Phase, "warm-up".into());
    tokio::time::sleep(Duration::from_secs(3)).await;

    // A graceful rolling restart, one node at a time, each back in its ISRs first.
    app.event(EventKind::Phase, "rolling restart".into());
    let first = (rng.next_u64() % nodes as u64) as i32;
    for i in 0..nodes as i32 {
        let id = (first + i) % nodes as i32 + 1;
        let start = app.now();
        app.fault(
            &format!("stop n{id}"),
            format!("node {id}: controlled shutdown"),
        );
        cluster.lock().await.node(id).stop().await;
        app.event(EventKind::Note, format!("node {id}: stopped"));
        tokio::time::sleep(Duration::from_millis(500)).await;
        cluster.lock().await.node(id).restart().await?;
        app.event(EventKind::Recovery, format!("node {id}: restarted"));
        if wait_until(cluster, recover, |c| in_sync(c, &topic, partitions, id)).await {
            app.event(EventKind::Recovery, format!("node {id}: back in its ISRs"));
        } else {
            app.ui.log(format!(
                "node {id} did not rejoin its ISRs within {recover:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        windows.push(FaultWindow {
            label: format!("rolling restart, node {id}"),
            start,
            end: app.now(),
        });
    }

    // A hard kill of a leader.
    app.event(EventKind::Phase, "leader hard kill".into());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let victim_partition = (rng.next_u64() % partitions as u64) as i32;
    let victim = {
        let c = cluster.lock().await;
        c.partition_state(&topic, victim_partition)
            .map(|v| v.leader)
            .filter(|&l| l > 0)
            .unwrap_or(1)
    };
    let start = app.now();
    app.fault(
        &format!("kill n{victim}"),
        format!("node {victim} (leader of partition {victim_partition}): hard kill"),
    );
    cluster.lock().await.node(victim).kill();
    let elected = wait_until(cluster, recover, |c| {
        (0..partitions).all(|p| {
            c.partition_state(&topic, p)
                .is_some_and(|v| v.leader > 0 && v.leader != victim)
        })
    })
    .await;
    if !elected {
        app.ui.log(format!("no new leader within {recover:?}"));
    }
    app.event(
        EventKind::Recovery,
        format!("leaders moved off node {victim}"),
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    cluster.lock().await.node(victim).restart().await?;
    app.event(EventKind::Recovery, format!("node {victim}: restarted"));
    if !wait_until(cluster, recover, |c| in_sync(c, &topic, partitions, victim)).await {
        app.ui.log(format!(
            "node {victim} did not rejoin its ISRs within {recover:?}"
        ));
    } else {
        app.event(
            EventKind::Recovery,
            format!("node {victim}: back in its ISRs"),
        );
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    windows.push(FaultWindow {
        label: format!("hard kill, node {victim}"),
        start,
        end: app.now(),
    });

    windows.push(corrupt_segment(app, cluster, client, rng).await?);
    Ok(windows)
}

/// What the corruption step measured.
#[derive(Debug, Default, Clone)]
struct CorruptionReport {
    /// The partition, the node whose stored batch was damaged, and the offset.
    target: Option<(i32, i32, i64)>,
    /// From the damage to the first detection.
    detected_after: Option<Duration>,
    /// Where the damage was detected.
    detected_where: Option<String>,
    /// From detection to the damaged replica caught up again.
    repaired_after: Option<Duration>,
    /// Records the replaying reader read (every one checked).
    replayed: u64,
}

/// Damages the stored batch holding a committed offset in the middle of a leader's
/// log, then has a second reader replay that partition from the start: the leader
/// finds the bad batch when it is about to serve it, steps down, a healthy replica
/// takes over and serves intact data, and the damaged replica repairs itself from
/// the new leader.
async fn corrupt_segment(
    app: &Arc<App>,
    cluster: &Arc<tokio::sync::Mutex<Cluster>>,
    client: &Client,
    rng: &mut Rng,
) -> Result<FaultWindow, Box<dyn std::error::Error>> {
    use baton_broker::corruption::CorruptionKind;

    let topic = app.topic.clone();
    app.event(EventKind::Phase, "corruption".into());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let partition = (rng.next_u64() % app.partitions as u64) as i32;
    let start = app.now();
    let (node, offset, end_offset, seen_before) = {
        let mut c = cluster.lock().await;
        let view = c
            .partition_state(&topic, partition)
            .ok_or("the demo topic has no such partition")?;
        let hw = view.high_watermark().unwrap_or(0);
        let offset = hw / 2;
        let seen_before = c.corruption_events().len();
        c.node(view.leader).corrupt(&topic, partition, offset)?;
        (view.leader, offset, hw, seen_before)
    };
    let injected = app.now();
    app.fault(
        &format!("corrupt n{node}"),
        format!("node {node}: flipped a byte of its stored batch holding partition {partition} offset {offset}"),
    );
    app.corruption.lock().unwrap().target = Some((partition, node, offset));

    // A reader replays the partition from the start through the damaged batch.
    let replay = Consumer::builder(client)
        .assign(topic.clone(), partition, StartOffset::Earliest)
        .build()
        .await?;
    let reader = tokio::spawn(replay_partition(app.clone(), replay, end_offset));

    let (mut detected, mut repaired) = (None, None);
    let deadline = Instant::now() + Duration::from_secs(30);
    while repaired.is_none() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let events = cluster.lock().await.corruption_events();
        for e in events.iter().skip(seen_before) {
            if e.topic != topic || e.partition != partition {
                continue;
            }
            let at = e.at.saturating_duration_since(app.t0);
            match &e.kind {
                CorruptionKind::Detected { at: place, .. } if detected.is_none() => {
                    detected = Some(at);
                    app.corruption.lock().unwrap().detected_where = Some(place.to_string());
                    app.event(
                        EventKind::Note,
                        format!("node {}: corruption detected ({place})", e.node),
                    );
                }
                CorruptionKind::RepairFinished { .. } if repaired.is_none() => {
                    repaired = Some(at);
                    app.event(
                        EventKind::Recovery,
                        format!("node {}: damaged replica repaired", e.node),
                    );
                }
                _ => {}
            }
        }
    }
    if repaired.is_none() {
        app.ui
            .log("the damaged replica did not report a repair within 30 s".into());
    }
    let replayed = reader.await?;
    {
        let mut r = app.corruption.lock().unwrap();
        r.detected_after = detected.map(|d| d.saturating_sub(injected));
        r.repaired_after = match (detected, repaired) {
            (Some(d), Some(r)) => Some(r.saturating_sub(d)),
            _ => None,
        };
        r.replayed = replayed;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    Ok(FaultWindow {
        label: format!("corruption, node {node}"),
        start,
        end: app.now(),
    })
}

/// Reads one partition from its start up to `end_offset`, checking every value as
/// the main consumer does; returns how many records it read.
async fn replay_partition(app: Arc<App>, mut consumer: Consumer, end_offset: i64) -> u64 {
    let mut read = 0u64;
    let mut last_offset: Option<i64> = None;
    loop {
        let record = match tokio::time::timeout(Duration::from_secs(30), consumer.recv()).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                app.ui.log(format!("replaying reader: {e}"));
                app.replay_errors.fetch_add(1, Ordering::Relaxed);
                if matches!(e, baton_kafka::ConsumerError::Closed) {
                    break;
                }
                continue;
            }
            Err(_) => {
                app.ui.log("replaying reader: nothing for 30 s".into());
                app.replay_errors.fetch_add(1, Ordering::Relaxed);
                break;
            }
        };
        read += 1;
        if last_offset.is_some_and(|prev| record.offset <= prev) {
            app.replay_reordered.fetch_add(1, Ordering::Relaxed);
        }
        last_offset = Some(record.offset);
        if !app.observe(&record) {
            app.replay_corrupted.fetch_add(1, Ordering::Relaxed);
        }
        if record.offset + 1 >= end_offset {
            break;
        }
    }
    read
}

/// The longest gap between two consecutive acknowledgements of one partition that
/// ends within `[start, end]`, that partition, and when the gap began.
fn stall(
    acks_by_partition: &[Vec<u64>],
    start: Duration,
    end: Duration,
) -> (Duration, i32, Duration) {
    let (s, e) = (start.as_micros() as u64, end.as_micros() as u64);
    let mut worst = (0u64, -1i32, 0u64);
    for (p, acks) in acks_by_partition.iter().enumerate() {
        for w in acks.windows(2) {
            if w[1] >= s && w[1] <= e && w[1] - w[0] > worst.0 {
                worst = (w[1] - w[0], p as i32, w[0]);
            }
        }
    }
    (
        Duration::from_micros(worst.0),
        worst.1,
        Duration::from_micros(worst.2),
    )
}

/// Writes the timeline chart: acknowledgements per second in 100 ms buckets, with
/// faults, recoveries and leader changes as vertical lines; below it the
/// producer's requests in flight and retries over time.
fn write_chart(
    path: &std::path::Path,
    acks: &[(u64, i32)],
    samples: &[ProducerSample],
    events: &[Event],
    end: Duration,
    seed: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;

    let buckets = (end.as_millis() / 100 + 1) as usize;
    let mut counts = vec![0u64; buckets];
    for &(at, _) in acks {
        let b = (at / 100_000) as usize;
        if b < buckets {
            counts[b] += 1;
        }
    }
    let rate: Vec<(f64, f64)> = counts
        .iter()
        .enumerate()
        .map(|(i, &n)| (i as f64 / 10.0, n as f64 * 10.0))
        .collect();
    // Catch-up bursts after a stall can be many times the steady rate; the scale
    // stops at 4x the median so that the steady rate and the stalls stay readable.
    let mut sorted: Vec<f64> = rate.iter().map(|&(_, y)| y).filter(|&y| y > 0.0).collect();
    sorted.sort_by(f64::total_cmp);
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or(1.0);
    let peak = sorted.last().copied().unwrap_or(1.0);
    let y_max = peak.min(4.0 * median).max(1.0) * 1.3;
    let clipped = peak > y_max;
    let x_max = end.as_secs_f64().max(1.0);

    let root = SVGBackend::new(path, (1200, 860)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(560);
    let mut chart = ChartBuilder::on(&top)
        .caption(
            format!("Baton rolling restart demo: acknowledgements per second (seed {seed})"),
            ("sans-serif", 20),
        )
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc("seconds since start")
        .y_desc(if clipped {
            "acks/s (100 ms buckets; catch-up bursts clipped)"
        } else {
            "acks/s (100 ms buckets)"
        })
        .y_label_formatter(&|y| format!("{y:.0}"))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;

    let leader = RGBColor(90, 140, 220);
    let fault = RGBColor(220, 50, 40);
    let recovery = RGBColor(40, 160, 80);
    let phase = RGBColor(120, 120, 120);
    let mut first_of = HashSet::new();
    let mut faults_drawn = 0u32;
    let mut phases_drawn = 0u32;
    for kind in [
        EventKind::Phase,
        EventKind::Leader,
        EventKind::Recovery,
        EventKind::Fault,
    ] {
        let (color, width, name) = match kind {
            EventKind::Phase => (phase, 1, "phase"),
            EventKind::Leader => (leader, 1, "leader change"),
            EventKind::Recovery => (recovery, 1, "node back / repaired"),
            EventKind::Fault => (fault, 2, "fault"),
            EventKind::Note => continue,
        };
        for e in events.iter().filter(|e| e.kind == kind) {
            let x = e.at.as_secs_f64();
            let series = chart.draw_series(std::iter::once(PathElement::new(
                vec![(x, 0.0), (x, y_max)],
                color.stroke_width(width),
            )))?;
            if first_of.insert(name) {
                series.label(name).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
            }
            if kind == EventKind::Phase {
                phases_drawn += 1;
                chart.draw_series(std::iter::once(Text::new(
                    e.what.clone(),
                    (
                        x + x_max / 300.0,
                        y_max * (0.97 - 0.035 * (phases_drawn % 2) as f64),
                    ),
                    ("sans-serif", 13).into_font().color(&BLACK),
                )))?;
            }
            if let Some(short) = &e.short {
                faults_drawn += 1;
                chart.draw_series(std::iter::once(Text::new(
                    short.clone(),
                    (
                        x + x_max / 300.0,
                        y_max * (0.88 - 0.04 * (faults_drawn % 2) as f64),
                    ),
                    ("sans-serif", 12).into_font().color(&fault),
                )))?;
            }
        }
    }
    chart
        .draw_series(LineSeries::new(rate, BLACK.stroke_width(1)))?
        .label("acks/s")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.stroke_width(2)));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::MiddleRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    draw_producer_panel(&bottom, samples, events, x_max)?;
    root.present()?;
    Ok(())
}

/// The chart's second panel: the producer's requests in flight (left axis) and
/// its retried records so far (right axis), from [`Producer::stats`], with the
/// faults marked.
fn draw_producer_panel(
    area: &plotters::drawing::DrawingArea<
        plotters::prelude::SVGBackend<'_>,
        plotters::coord::Shift,
    >,
    samples: &[ProducerSample],
    events: &[Event],
    x_max: f64,
) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;

    let in_flight_max = samples
        .iter()
        .map(|s| s.in_flight)
        .max()
        .unwrap_or(0)
        .max(1) as f64
        * 1.2;
    let retries_max = samples.iter().map(|s| s.retries).max().unwrap_or(0).max(1) as f64 * 1.2;
    let mut chart = ChartBuilder::on(area)
        .caption(
            "producer: requests in flight and retried records (Producer::stats)",
            ("sans-serif", 16),
        )
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .right_y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..in_flight_max)?
        .set_secondary_coord(0.0..x_max, 0.0..retries_max);
    chart
        .configure_mesh()
        .x_desc("seconds since start")
        .y_desc("requests in flight")
        .y_label_formatter(&|y| format!("{y:.0}"))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    chart
        .configure_secondary_axes()
        .y_desc("records retried (total)")
        .label_style(("sans-serif", 12))
        .draw()?;
    let fault = RGBColor(220, 50, 40);
    for e in events.iter().filter(|e| e.kind == EventKind::Fault) {
        let x = e.at.as_secs_f64();
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(x, 0.0), (x, in_flight_max)],
            fault.mix(0.5).stroke_width(1),
        )))?;
    }
    let in_flight_color = RGBColor(90, 140, 220);
    let retries_color = RGBColor(230, 140, 20);
    chart
        .draw_series(LineSeries::new(
            samples
                .iter()
                .map(|s| (s.at.as_secs_f64(), s.in_flight as f64)),
            in_flight_color.stroke_width(1),
        ))?
        .label("requests in flight (all brokers)")
        .legend(move |(x, y)| {
            PathElement::new(vec![(x, y), (x + 18, y)], in_flight_color.stroke_width(2))
        });
    chart
        .draw_secondary_series(LineSeries::new(
            samples
                .iter()
                .map(|s| (s.at.as_secs_f64(), s.retries as f64)),
            retries_color.stroke_width(2),
        ))?
        .label("records retried (right axis)")
        .legend(move |(x, y)| {
            PathElement::new(vec![(x, y), (x + 18, y)], retries_color.stroke_width(2))
        });
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let opts = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let mut rng = Rng::new(opts.seed);
    let dir = tempfile::tempdir()?;
    let cluster = Cluster::builder()
        .brokers(opts.nodes)
        .data_dir(dir.path())
        .session_timeout(SESSION_TIMEOUT)
        .start()
        .await?;
    println!(
        "{}-node cluster on {} (data in {}) · seed {} · {} records/s for {:.0}s",
        opts.nodes,
        cluster.bootstrap(),
        dir.path().display(),
        opts.seed,
        opts.rate,
        opts.duration.as_secs_f64()
    );

    let client = Client::builder(cluster.bootstrap_servers())
        .client_id("rolling-restart")
        .request_timeout(Duration::from_secs(5))
        .connect_timeout(Duration::from_secs(1))
        .build()
        .await?;
    let topic = format!("orders-{}", opts.seed % 100_000);
    let partitions = 2 * opts.nodes as i32;
    Admin::new(&client)
        .create_topics([
            NewTopic::new(topic.clone(), partitions, 3).config("min.insync.replicas", "2")
        ])
        .await?;
    let cluster = Arc::new(tokio::sync::Mutex::new(cluster));
    let ready = wait_until(&cluster, Duration::from_secs(30), |c| {
        (0..partitions).all(|p| {
            c.partition_state(&topic, p)
                .is_some_and(|v| v.leader > 0 && v.isr.len() == 3)
        })
    })
    .await;
    if !ready {
        return Err("the topic's partitions did not get leaders in time".into());
    }

    // Idempotent with acks=all: the defaults.
    let producer = Producer::builder(&client)
        .request_timeout(Duration::from_secs(5))
        .build();
    let app = Arc::new(App {
        t0: Instant::now(),
        topic: topic.clone(),
        partitions,
        producer: producer.clone(),
        pool: Mutex::new(Vec::new()),
        stats: Mutex::new(ProduceStats::default()),
        send_gate: tokio::sync::Mutex::new(0),
        ids: Mutex::new(Vec::new()),
        history: Mutex::new(History::new()),
        produced: AtomicU64::new(0),
        acked: AtomicU64::new(0),
        consumed: AtomicU64::new(0),
        events: Mutex::new(Vec::new()),
        phase: Mutex::new("starting".into()),
        leaders: Mutex::new(vec![0; partitions as usize]),
        producer_samples: Mutex::new(Vec::new()),
        corruption: Mutex::new(CorruptionReport::default()),
        replay_corrupted: AtomicU64::new(0),
        replay_reordered: AtomicU64::new(0),
        replay_errors: AtomicU64::new(0),
        ui: Ui::new(opts.duration),
    });

    let mut builder = Consumer::builder(&client);
    for p in 0..partitions {
        builder = builder.assign(topic.clone(), p, StartOffset::Earliest);
    }
    let consumer = builder.build().await?;

    let stop_watch = CancellationToken::new();
    let stop_produce = CancellationToken::new();
    let stop_consume = CancellationToken::new();
    let watcher = tokio::spawn(watch(app.clone(), cluster.clone(), stop_watch.clone()));
    let consuming = tokio::spawn(consume(app.clone(), consumer, stop_consume.clone()));
    let producing = tokio::spawn(produce(app.clone(), opts.rate, stop_produce.clone()));

    let windows = run_faults(&app, &cluster, &client, opts.nodes, &mut rng).await?;
    app.event(EventKind::Phase, "steady".into());
    let rest = opts.duration.saturating_sub(app.now());
    tokio::time::sleep(rest.max(Duration::from_secs(2))).await;

    // Stop producing, wait for every outcome, then read what is left.
    app.event(EventKind::Phase, "draining".into());
    stop_produce.cancel();
    producing.await?;
    if producer
        .close_timeout(Duration::from_secs(30))
        .await
        .is_err()
    {
        app.ui.log("the producer did not finish in 30 s".into());
    }
    let produce_end = app.now();
    let acked_total = app.acked.load(Ordering::Relaxed);
    let mut last = (app.consumed.load(Ordering::Relaxed), Instant::now());
    while app.consumed.load(Ordering::Relaxed) < acked_total {
        let now = app.consumed.load(Ordering::Relaxed);
        if now != last.0 {
            last = (now, Instant::now());
        } else if last.1.elapsed() > Duration::from_secs(20) {
            app.ui
                .log("no record consumed for 20 s; stopping the read".into());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A little longer, to see anything extra (a duplicate would show up here).
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop_consume.cancel();
    let cs = consuming.await?;
    stop_watch.cancel();
    watcher.await?;
    app.ui.finish();
    let end = app.now();
    match Arc::try_unwrap(cluster) {
        Ok(c) => c.into_inner().shutdown().await,
        Err(_) => eprintln!("cluster still shared at the end"),
    }

    // The report.
    let st = std::mem::take(&mut *app.stats.lock().unwrap());
    let events = std::mem::take(&mut *app.events.lock().unwrap());
    let history = app.history.lock().unwrap().check();
    let produced = app.produced.load(Ordering::Relaxed);
    let mut acks_by_partition = vec![Vec::new(); partitions as usize];
    for &(at, p) in &st.acks {
        if let Some(v) = acks_by_partition.get_mut(p as usize) {
            v.push(at);
        }
    }
    for v in &mut acks_by_partition {
        v.sort_unstable();
    }
    println!();
    println!("records produced              {produced}");
    println!("records acknowledged          {}", st.acked);
    println!("records consumed              {}", cs.consumed);
    println!(
        "throughput while producing    {:.0} acks/s",
        st.acked as f64 / produce_end.as_secs_f64()
    );
    println!(
        "send timeouts ({} s)           {}",
        SEND_TIMEOUT.as_secs(),
        st.timeouts
    );
    println!("  never sent, sent again      {}", st.never_sent);
    println!("  in flight, awaited          {}", st.in_flight);
    println!("buffers allocated             {}", st.allocated);
    println!("buffers reclaimed             {}", st.reclaimed);
    println!("reclaims refused (held)       {}", st.refused);
    println!();
    println!("failover stalls (longest gap between acks of one partition):");
    for w in &windows {
        let (gap, p, from) = stall(&acks_by_partition, w.start, w.end);
        println!(
            "  {:<28} {:>6} ms  (partition {p} from {:.2}s; fault window {:.1}s-{:.1}s)",
            w.label,
            gap.as_millis(),
            from.as_secs_f64(),
            w.start.as_secs_f64(),
            w.end.as_secs_f64()
        );
    }
    let leader_changes = events
        .iter()
        .filter(|e| e.kind == EventKind::Leader)
        .count();
    println!("leader changes seen           {leader_changes}");
    let cr = app.corruption.lock().unwrap().clone();
    let ms =
        |d: Option<Duration>| d.map_or("never".to_owned(), |d| format!("{} ms", d.as_millis()));
    if let Some((p, node, offset)) = cr.target {
        println!();
        println!("corruption: node {node}'s stored batch holding partition {p} offset {offset}");
        println!(
            "  detected after              {}{}",
            ms(cr.detected_after),
            cr.detected_where
                .map(|w| format!(" ({w})"))
                .unwrap_or_default()
        );
        println!("  repaired after detection    {}", ms(cr.repaired_after));
        println!(
            "  replayed by a second reader {} records, all checked",
            cr.replayed
        );
    }
    let replay_corrupted = app.replay_corrupted.load(Ordering::Relaxed);
    let replay_reordered = app.replay_reordered.load(Ordering::Relaxed);
    let replay_errors = app.replay_errors.load(Ordering::Relaxed);
    // The history checker's counts, plus what the readers' own checks found (a
    // value failing its CRC, a record in the wrong partition, offsets going back).
    let (lost, duplicated) = (history.lost, history.duplicated);
    let corrupted = history.corrupted + cs.corrupted + replay_corrupted;
    let reordered = history.reordered + cs.reordered + replay_reordered;
    let consumer_errors = cs.errors + replay_errors;
    let unrepaired = u64::from(cr.target.is_some() && cr.repaired_after.is_none());
    let pm = producer.stats();
    let cm = &cs.metrics;
    let show_ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1000.0);
    println!();
    println!("client metrics (Producer::stats, Consumer::stats):");
    let retries: Vec<String> = pm.retries.iter().map(|(e, n)| format!("{e} {n}")).collect();
    println!(
        "  records retried, by error   {}",
        if retries.is_empty() {
            "none".into()
        } else {
            retries.join(", ")
        }
    );
    println!(
        "  produce requests            {} (latency mean {}, p99 <= {}, worst {})",
        pm.requests,
        show_ms(pm.request_latency.mean()),
        show_ms(pm.request_latency.quantile(0.99)),
        show_ms(pm.request_latency.max)
    );
    println!(
        "  fetches                     {} (worst {}, long-poll wait included)",
        cm.fetch_latency.count,
        show_ms(cm.fetch_latency.max)
    );
    println!(
        "  consumer rebalances         {} (partitions assigned explicitly, no group)",
        cm.rebalances
    );
    println!(
        "  connections                 {} opened, {} closed",
        pm.connections.created, pm.connections.closed
    );
    println!();
    println!("delivery failures             {}", st.failed);
    println!("consumer errors               {consumer_errors}");
    println!("corruption left unrepaired    {unrepaired}");
    println!("buffers shared after outcome  {}", st.leaked);
    println!("history check (baton_broker::history): {history}");
    println!("lost                          {lost}");
    println!("duplicated                    {duplicated}");
    println!("reordered                     {reordered}");
    println!("corrupted                     {corrupted}");

    if let Some(parent) = opts.out.parent() {
        if !parent.as_os_str().is_empty() {
            std::fs::create_dir_all(parent)?;
        }
    }
    let samples = std::mem::take(&mut *app.producer_samples.lock().unwrap());
    match write_chart(&opts.out, &st.acks, &samples, &events, end, opts.seed) {
        Ok(()) => {
            let shown = std::fs::canonicalize(&opts.out).unwrap_or_else(|_| opts.out.clone());
            println!();
            println!("timeline chart: {}", shown.display());
        }
        Err(e) => eprintln!("could not write the chart to {}: {e}", opts.out.display()),
    }

    let bad = lost
        + duplicated
        + reordered
        + corrupted
        + st.failed
        + consumer_errors
        + st.leaked
        + unrepaired;
    if bad > 0 {
        eprintln!("history check FAILED (seed {})", opts.seed);
        std::process::exit(1);
    }
    println!("history check passed: nothing lost, duplicated, reordered or corrupted");
    Ok(())
}
