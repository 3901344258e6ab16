//! End-to-end latency on a 3-node in-process cluster: a paced acks=all producer
//! and a consumer reading concurrently in the same process, for Baton and
//! librdkafka, at several rates and linger settings.
//!
//! Each record's value (100 bytes) starts with its intended send time: nanoseconds
//! since a process-wide base instant, computed from the pacing schedule (record
//! `i` is due at `start + i / rate`), not from when the pacer got to it. So a
//! producer that falls behind its schedule shows that as latency. Latency is the
//! consumer's receive time minus that intended time, on the same monotonic clock.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use baton_broker::Cluster;
use baton_kafka::{Acks, Admin, Client, Consumer, Producer, ProducerRecord, StartOffset};
use bytes::Bytes;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::Message as _;
use rdkafka::producer::{
    BaseRecord, DeliveryResult, Producer as _, ProducerContext, ThreadedProducer,
};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use crate::measure::{median, quantile};

/// Partitions of every latency topic (replication factor 3).
const PARTITIONS: i32 = 6;
/// Bytes per record value; the first 8 hold the intended send time.
const VALUE_BYTES: usize = 100;
/// How long the consumer keeps reading after the producer has flushed.
const DRAIN: Duration = Duration::from_secs(10);

/// Settings of the latency item.
#[derive(Debug, Clone)]
pub struct LatencyOptions {
    /// Runs per cell; the table shows medians of per-run quantiles.
    pub runs: usize,
    /// Clients to measure (`baton`, `librdkafka`; others are skipped).
    pub clients: Vec<String>,
    /// Records per second the producer is paced at.
    pub rates: Vec<u64>,
    /// Producer linger settings, in milliseconds.
    pub lingers: Vec<u64>,
    /// Seconds of load per cell, the warm-up included.
    pub secs: f64,
    /// Seconds at the start of each cell not counted.
    pub warmup_secs: f64,
}

/// One cell's measurement in one run.
#[derive(Debug, Clone, Copy)]
struct CellRun {
    p50: f64,
    p99: f64,
    p999: f64,
    max: f64,
    /// Records per second actually handed to the producer over the measured window.
    achieved: f64,
    /// Records intended in the measured window, and of those, received.
    intended: u64,
    received: u64,
}

fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

fn stamp(at: Instant) -> u64 {
    at.saturating_duration_since(base()).as_nanos() as u64
}

fn value_for(intended: Instant) -> Vec<u8> {
    let mut v = vec![b'l'; VALUE_BYTES];
    v[..8].copy_from_slice(&stamp(intended).to_le_bytes());
    v
}

/// The intended time in a value, if it has one.
fn stamp_of(value: &[u8]) -> Option<u64> {
    value.get(..8)?.try_into().ok().map(u64::from_le_bytes)
}

/// The pacing schedule of one cell.
#[derive(Debug, Clone, Copy)]
struct Schedule {
    start: Instant,
    rate: u64,
    total: u64,
}

impl Schedule {
    fn new(rate: u64, secs: f64) -> Schedule {
        // Start a little ahead so that the first tick is on time.
        Schedule {
            start: Instant::now() + Duration::from_millis(5),
            rate: rate.max(1),
            total: (rate.max(1) as f64 * secs) as u64,
        }
    }
    /// When record `i` is due.
    fn intended(&self, i: u64) -> Instant {
        self.start + Duration::from_nanos(((i as u128 * 1_000_000_000) / self.rate as u128) as u64)
    }
    /// How many records are due by `now`.
    fn due(&self, now: Instant) -> u64 {
        let ns = now.saturating_duration_since(self.start).as_nanos();
        ((ns * self.rate as u128 / 1_000_000_000) as u64 + 1).min(self.total)
    }
}

/// What the consumer side collects: latencies in ms of records intended after
/// `measure_from`, and the count of those.
struct Collected {
    lat_ms: Vec<f64>,
}

impl Collected {
    fn new(cap: usize) -> Collected {
        Collected {
            // Bounded up front; grows past this only as records arrive.
            lat_ms: Vec::with_capacity(cap.min(10_000_000)),
        }
    }
    fn record(&mut self, value: &[u8], measure_from: u64) {
        let now = stamp(Instant::now());
        if let Some(t) = stamp_of(value) {
            if t >= measure_from {
                self.lat_ms.push(now.saturating_sub(t) as f64 / 1e6);
            }
        }
    }
}

/// `handed_all`: when the last record was handed to the producer.
fn summarize(
    mut c: Collected,
    sched: &Schedule,
    measure_from: u64,
    handed_all: Instant,
) -> CellRun {
    c.lat_ms.sort_by(|a, b| a.total_cmp(b));
    let first = (0..sched.total)
        .find(|&i| stamp(sched.intended(i)) >= measure_from)
        .unwrap_or(sched.total);
    let intended = sched.total.saturating_sub(first);
    // The scheduled window, or longer if the producer fell behind its schedule.
    let window = sched
        .intended(sched.total)
        .max(handed_all)
        .saturating_duration_since(sched.intended(first))
        .as_secs_f64();
    CellRun {
        p50: quantile(&c.lat_ms, 0.5),
        p99: quantile(&c.lat_ms, 0.99),
        p999: quantile(&c.lat_ms, 0.999),
        max: c.lat_ms.last().copied().unwrap_or(f64::NAN),
        achieved: if window > 0.0 {
            intended as f64 / window
        } else {
            f64::NAN
        },
        intended,
        received: c.lat_ms.len() as u64,
    }
}

// ---------------------------------------------------------------------------
// Baton

async fn baton_cell(
    bootstrap: &[String],
    topic: &str,
    rate: u64,
    linger: Duration,
    o: &LatencyOptions,
) -> Result<CellRun, String> {
    let client = Client::builder(bootstrap.iter().map(String::as_str))
        .client_id("bench-latency-baton")
        .build()
        .await
        .map_err(|e| format!("baton client: {e}"))?;
    client
        .refresh_metadata()
        .await
        .map_err(|e| format!("baton metadata: {e}"))?;
    let mut cb = Consumer::builder(&client);
    for p in 0..PARTITIONS {
        cb = cb.assign(topic, p, StartOffset::Earliest);
    }
    let mut consumer = cb
        .build()
        .await
        .map_err(|e| format!("baton consumer: {e}"))?;
    // Acks::All and the default idempotence (on with acks=all).
    let producer = Producer::builder(&client)
        .acks(Acks::All)
        .linger(linger)
        .build();

    let sched = Schedule::new(rate, o.secs);
    let measure_from = stamp(sched.start + Duration::from_secs_f64(o.warmup_secs));
    let done = Arc::new(AtomicBool::new(false));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<baton_kafka::DeliveryFuture>();
    let acks = tokio::spawn(async move {
        let mut failed = 0u64;
        while let Some(d) = rx.recv().await {
            if d.await.is_err() {
                failed += 1;
            }
        }
        failed
    });
    let pacer = {
        let (producer, topic) = (producer.clone(), topic.to_owned());
        tokio::spawn(async move {
            let topic: Arc<str> = topic.into();
            let mut tick = tokio::time::interval_at(sched.start.into(), Duration::from_millis(1));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let mut next = 0u64;
            while next < sched.total {
                tick.tick().await;
                let due = sched.due(Instant::now());
                while next < due {
                    let rec = ProducerRecord::new(topic.to_string())
                        .partition((next % PARTITIONS as u64) as i32)
                        .value(Bytes::from(value_for(sched.intended(next))));
                    let d = producer
                        .send(rec)
                        .await
                        .map_err(|e| format!("baton send: {e}"))?;
                    let _ = tx.send(d);
                    next += 1;
                }
            }
            let handed_all = Instant::now();
            producer.flush().await;
            Ok::<_, String>(handed_all)
        })
    };
    let reader = {
        let done = done.clone();
        let total = sched.total;
        tokio::spawn(async move {
            let mut c = Collected::new(total as usize);
            let mut got = 0u64;
            let mut drain_until: Option<Instant> = None;
            while got < total {
                if drain_until.is_none() && done.load(Ordering::Relaxed) {
                    drain_until = Some(Instant::now() + DRAIN);
                }
                if drain_until.is_some_and(|t| Instant::now() > t) {
                    break;
                }
                match tokio::time::timeout(Duration::from_millis(100), consumer.recv()).await {
                    Ok(Ok(r)) => {
                        got += 1;
                        if let Some(v) = &r.value {
                            c.record(v, measure_from);
                        }
                    }
                    Ok(Err(e)) => return Err(format!("baton recv: {e}")),
                    Err(_) => {}
                }
            }
            Ok(c)
        })
    };
    let paced = pacer.await;
    // Tell the reader to drain and stop whether or not the pacer succeeded.
    done.store(true, Ordering::Relaxed);
    let c = reader.await.map_err(|e| format!("reader: {e}"))??;
    let handed_all = paced.map_err(|e| format!("pacer: {e}"))??;
    producer.close().await;
    let failed = acks.await.map_err(|e| format!("acks: {e}"))?;
    if failed > 0 {
        eprintln!("  baton: {failed} delivery errors");
    }
    Ok(summarize(c, &sched, measure_from, handed_all))
}

// ---------------------------------------------------------------------------
// librdkafka

struct Failures(AtomicU64);

impl ClientContext for Failures {}

impl ProducerContext for Failures {
    type DeliveryOpaque = ();
    fn delivery(&self, r: &DeliveryResult<'_>, _: ()) {
        if r.is_err() {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One cell with librdkafka: a ThreadedProducer paced on this thread, a
/// BaseConsumer polled on another. Blocking.
fn rdkafka_cell(
    bootstrap: &str,
    topic: &str,
    rate: u64,
    linger: Duration,
    o: &LatencyOptions,
) -> Result<CellRun, String> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("client.id", "bench-latency-librdkafka")
        .set("group.id", "bench-latency-librdkafka")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .create()
        .map_err(|e| format!("librdkafka consumer: {e}"))?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .map_err(|e| format!("librdkafka assign: {e}"))?;
    }
    consumer
        .assign(&tpl)
        .map_err(|e| format!("librdkafka assign: {e}"))?;
    let producer: ThreadedProducer<Failures> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("client.id", "bench-latency-librdkafka")
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", linger.as_millis().to_string())
        .set("queue.buffering.max.messages", "2000000")
        .create_with_context(Failures(AtomicU64::new(0)))
        .map_err(|e| format!("librdkafka producer: {e}"))?;

    let sched = Schedule::new(rate, o.secs);
    let measure_from = stamp(sched.start + Duration::from_secs_f64(o.warmup_secs));
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let done = done.clone();
        let total = sched.total;
        std::thread::spawn(move || -> Result<Collected, String> {
            let mut c = Collected::new(total as usize);
            let mut got = 0u64;
            let mut drain_until: Option<Instant> = None;
            while got < total {
                if drain_until.is_none() && done.load(Ordering::Relaxed) {
                    drain_until = Some(Instant::now() + DRAIN);
                }
                if drain_until.is_some_and(|t| Instant::now() > t) {
                    break;
                }
                match consumer.poll(Duration::from_millis(100)) {
                    Some(Ok(m)) => {
                        got += 1;
                        if let Some(v) = m.payload() {
                            c.record(v, measure_from);
                        }
                    }
                    Some(Err(e)) => return Err(format!("librdkafka poll: {e}")),
                    None => {}
                }
            }
            Ok(c)
        })
    };
    let paced = pace_rdkafka(&producer, topic, &sched);
    let flushed = producer.flush(Duration::from_secs(60));
    // Tell the reader to drain and stop whether or not pacing succeeded.
    done.store(true, Ordering::Relaxed);
    let c = reader
        .join()
        .map_err(|_| "librdkafka reader panicked".to_string())??;
    let handed_all = paced?;
    flushed.map_err(|e| format!("librdkafka flush: {e}"))?;
    let failed = producer.context().0.load(Ordering::Relaxed);
    if failed > 0 {
        eprintln!("  librdkafka: {failed} delivery errors");
    }
    Ok(summarize(c, &sched, measure_from, handed_all))
}

/// Hands librdkafka every record of `sched` as it falls due; returns when the
/// last was handed over.
fn pace_rdkafka(
    producer: &ThreadedProducer<Failures>,
    topic: &str,
    sched: &Schedule,
) -> Result<Instant, String> {
    let mut next = 0u64;
    let mut tick = sched.start;
    while next < sched.total {
        let now = Instant::now();
        if tick > now {
            std::thread::sleep(tick - now);
        }
        tick += Duration::from_millis(1);
        let due = sched.due(Instant::now());
        while next < due {
            let value = value_for(sched.intended(next));
            let mut record = BaseRecord::<(), [u8]>::to(topic)
                .partition((next % PARTITIONS as u64) as i32)
                .payload(&value[..]);
            loop {
                match producer.send(record) {
                    Ok(()) => break,
                    Err((
                        rdkafka::error::KafkaError::MessageProduction(
                            rdkafka::types::RDKafkaErrorCode::QueueFull,
                        ),
                        r,
                    )) => {
                        record = r;
                        std::thread::sleep(Duration::from_micros(200));
                    }
                    Err((e, _)) => return Err(format!("librdkafka send: {e}")),
                }
            }
            next += 1;
        }
    }
    Ok(Instant::now())
}

// ---------------------------------------------------------------------------

async fn create_topic(cluster: &Cluster, admin: &Admin, topic: &str) -> Result<(), String> {
    admin
        .create_topic(topic, PARTITIONS, 3)
        .await
        .map_err(|e| format!("create {topic}: {e}"))?;
    cluster
        .wait_for(Duration::from_secs(30), |c| {
            (0..PARTITIONS).all(|p| {
                c.partition_state(topic, p)
                    .is_some_and(|v| v.isr.len() == 3 && v.leader > 0)
            })
        })
        .await
        .map_err(|_| format!("{topic}: ISR never reached 3"))
}

/// Runs the item and prints its table.
pub async fn run(o: LatencyOptions) -> Result<(), String> {
    let _ = base();
    let clients: Vec<&str> = o
        .clients
        .iter()
        .map(String::as_str)
        .filter(|c| {
            let known = matches!(*c, "baton" | "librdkafka");
            if !known {
                eprintln!("  latency: client {c} skipped (only baton and librdkafka)");
            }
            known
        })
        .collect();
    let cluster = Cluster::builder()
        .brokers(3)
        .in_memory()
        .start()
        .await
        .map_err(|e| format!("cluster: {e}"))?;
    let bootstrap = cluster.bootstrap_servers();
    let admin_client = Client::builder(bootstrap.iter().map(String::as_str))
        .client_id("bench-latency-admin")
        .build()
        .await
        .map_err(|e| format!("admin client: {e}"))?;
    let admin = Admin::new(&admin_client);
    println!(
        "\n## End-to-end latency: 3-node in-process baton-broker cluster (in memory), \
         {PARTITIONS} partitions, replication factor 3, acks=all, idempotent, {VALUE_BYTES}-byte values, \
         {:.1} s of load per cell of which the first {:.1} s are not counted; {} runs",
        o.secs, o.warmup_secs, o.runs
    );
    // (client, rate, linger) -> per-run results.
    let mut results: Vec<((String, u64, u64), Vec<CellRun>)> = Vec::new();
    let mut seq = 0u64;
    for run in 0..o.runs {
        for &rate in &o.rates {
            for &linger in &o.lingers {
                // Alternate which client goes first.
                let mut order = clients.clone();
                let n = order.len().max(1);
                order.rotate_left(run % n);
                for c in order {
                    seq += 1;
                    let topic = format!("latency-{seq}");
                    create_topic(&cluster, &admin, &topic).await?;
                    let lg = Duration::from_millis(linger);
                    let r = match c {
                        "baton" => baton_cell(&bootstrap, &topic, rate, lg, &o).await,
                        _ => {
                            let (b, t, oo) = (bootstrap.join(","), topic.clone(), o.clone());
                            tokio::task::spawn_blocking(move || rdkafka_cell(&b, &t, rate, lg, &oo))
                                .await
                                .map_err(|e| format!("blocking task: {e}"))
                                .and_then(|r| r)
                        }
                    };
                    if let Err(e) = admin.delete_topics([topic.as_str()]).await {
                        eprintln!("  (delete {topic}: {e})");
                    }
                    // A failed cell is reported and left out; the others still run.
                    let r = match r {
                        Ok(r) => r,
                        Err(e) => {
                            eprintln!(
                                "  run {} {c} {rate} rec/s linger {linger} ms failed: {e}",
                                run + 1
                            );
                            continue;
                        }
                    };
                    eprintln!(
                        "  run {} {c:<10} {rate:>7} rec/s linger {linger} ms: achieved {:>8.0} rec/s, \
                         received {}/{}, p50 {:.2} p99 {:.2} p99.9 {:.2} max {:.2} ms   load {}",
                        run + 1,
                        r.achieved,
                        r.received,
                        r.intended,
                        r.p50,
                        r.p99,
                        r.p999,
                        r.max,
                        crate::measure::loadavg()
                    );
                    let key = (c.to_owned(), rate, linger);
                    match results.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, v)) => v.push(r),
                        None => results.push((key, vec![r])),
                    }
                }
            }
        }
    }
    cluster.shutdown().await;

    let med = |v: &[CellRun], f: fn(&CellRun) -> f64| median(v.iter().map(f).collect());
    println!();
    println!("| client | rate rec/s | linger ms | achieved rec/s | received | p50 ms | p99 ms | p99.9 ms | max ms | p99 ÷ librdkafka p99 |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for ((c, rate, linger), v) in &results {
        let p99 = med(v, |r| r.p99);
        let ratio = results
            .iter()
            .find(|((c2, r2, l2), _)| c2 == "librdkafka" && r2 == rate && l2 == linger)
            .map(|(_, lv)| p99 / med(lv, |r| r.p99));
        let recv: u64 = v.iter().map(|r| r.received).sum();
        let intended: u64 = v.iter().map(|r| r.intended).sum();
        println!(
            "| {c} | {rate} | {linger} | {:.0} | {:.2}% | {:.2} | {:.2} | {:.2} | {:.2} | {} |",
            med(v, |r| r.achieved),
            100.0 * recv as f64 / intended.max(1) as f64,
            med(v, |r| r.p50),
            p99,
            med(v, |r| r.p999),
            med(v, |r| r.max),
            ratio.map_or("-".into(), |x| format!("{x:.2}")),
        );
    }
    println!(
        "\nQuantiles and max are medians over runs of each run's value; achieved is the median \
         rate at which records were handed to the producer in the measured window; received is \
         the share of the measured window's intended records the consumer got (all runs)."
    );
    Ok(())
}
