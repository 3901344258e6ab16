//! The `transactions` item: transactional produce throughput against idempotent
//! produce, for each client, against one broker in the same run.
//!
//! Every job sends `n` records of 100 bytes to partition 0 of a fresh topic with
//! acks=all and idempotence on (the settings a transactional producer must use).
//! A transactional job commits every `interval` (the transaction open at the end
//! is committed too), so the cost it shows is the transaction's: AddPartitionsToTxn
//! once per transaction, the flush before EndTxn, the markers the coordinator
//! writes, and the pause in the pipeline while the commit is in flight.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::producer::{DeliveryResult, Producer as _, ProducerContext, ThreadedProducer};
use rdkafka::ClientContext;

use crate::clients::{self, ProduceSettings};
use crate::measure::{self, self_cpu, BrokerProc, Sample, Table};
use crate::{blocking, log_sample, settings, Options, Topics};

/// Commit intervals measured.
const INTERVALS: [Duration; 2] = [Duration::from_millis(100), Duration::from_secs(1)];

/// Longest a commit (flush included) or a flush may take.
const COMMIT_TIMEOUT: Duration = Duration::from_secs(60);

/// How a job produces: idempotent, or in transactions committed every interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Idempotent, no transactions.
    Idempotent,
    /// Transactional, a commit every interval.
    Transactional(Duration),
}

impl Mode {
    fn label(self) -> String {
        match self {
            Mode::Idempotent => "idempotent".into(),
            Mode::Transactional(d) if d < Duration::from_secs(1) => {
                format!("txn, commit every {} ms", d.as_millis())
            }
            Mode::Transactional(d) => format!("txn, commit every {} s", d.as_secs()),
        }
    }

    fn all() -> Vec<Mode> {
        let mut modes = vec![Mode::Idempotent];
        modes.extend(INTERVALS.iter().map(|&d| Mode::Transactional(d)));
        modes
    }
}

/// The modes `client` runs: all of them for the clients of this item.
fn jobs_of(client: &str) -> Vec<Mode> {
    if CLIENTS.contains(&client) {
        Mode::all()
    } else {
        Vec::new()
    }
}

/// The clients of this item, in table order.
const CLIENTS: [&str; 2] = ["baton", "librdkafka"];

/// Runs the item against baton-broker (`--txn-broker baton`, the default) or
/// Apache Kafka (`--txn-broker kafka`, the referee).
pub async fn run(o: &Options) -> Result<(), String> {
    let broker = match o.txn_broker.as_str() {
        "baton" => BrokerProc::baton(&measure::baton_broker_bin())?,
        "kafka" => crate::kafka::start_node(&crate::kafka::libs()?).await?,
        other => return Err(format!("--txn-broker {other}: baton or kafka")),
    };
    let clients: Vec<&str> = CLIENTS
        .into_iter()
        .filter(|c| o.clients.iter().any(|x| x == c))
        .collect();
    let topics = Topics::new(&broker.bootstrap()).await?;
    println!(
        "\n## Transactions against {}: {} records of 100 bytes per run, 1 partition, acks=all, idempotence on, linger 5 ms, batch 1 MiB; transactional runs commit every 100 ms or 1 s",
        broker.name, o.records
    );
    // One untimed run per client and mode first (cold memory, the coordinator's
    // first transactional id).
    for c in &clients {
        for mode in jobs_of(c) {
            let topic = format!("txn-warmup-{c}-{}", slug(mode));
            topics.create(&topic).await?;
            let s = produce(c, &broker.bootstrap(), &topic, o.records.min(200_000), mode).await?;
            log_sample(&format!("{c} {} warm-up", mode.label()), &s);
            topics.delete(&topic).await;
        }
    }
    let mut table = Table::default();
    for run in 0..o.runs {
        // Rotate the order each run, so that no job always goes first.
        let mut jobs: Vec<(&str, Mode)> = clients
            .iter()
            .flat_map(|&c| jobs_of(c).into_iter().map(move |m| (c, m)))
            .collect();
        let n = jobs.len().max(1);
        jobs.rotate_left(run % n);
        for (c, mode) in jobs {
            let topic = format!("txn-{c}-{}-{run}", slug(mode));
            topics.create(&topic).await?;
            let s = produce(c, &broker.bootstrap(), &topic, o.records, mode).await?;
            log_sample(&format!("{c} {} run {}", mode.label(), run + 1), &s);
            table.push(&format!("{c} {}", mode.label()), s);
            topics.delete(&topic).await;
        }
    }
    table.print(
        &format!("Transactional produce against {}", broker.name),
        "librdkafka idempotent",
        "client",
    );
    print_ratios(&table, &clients);
    Ok(())
}

/// Each client's transactional throughput as a share of its idempotent one, and
/// Baton's against librdkafka's per mode.
fn print_ratios(table: &Table, clients: &[&str]) {
    println!();
    println!("| client | mode | records/s (median) | ÷ same client idempotent | ÷ librdkafka same mode |");
    println!("|---|---|---:|---:|---:|");
    for &c in clients {
        let idempotent = table.rate(&format!("{c} {}", Mode::Idempotent.label()));
        for mode in jobs_of(c) {
            let r = table.rate(&format!("{c} {}", mode.label()));
            let peer = table.rate(&format!("librdkafka {}", mode.label()));
            println!(
                "| {c} | {} | {r:.0} | {:.2} | {:.2} |",
                mode.label(),
                r / idempotent,
                r / peer
            );
        }
    }
}

fn slug(mode: Mode) -> String {
    match mode {
        Mode::Idempotent => "idem".into(),
        Mode::Transactional(d) => format!("txn{}ms", d.as_millis()),
    }
}

fn acks_all() -> ProduceSettings {
    settings(-1)
}

async fn produce(
    client: &str,
    bootstrap: &str,
    topic: &str,
    n: u64,
    mode: Mode,
) -> Result<Sample, String> {
    match (client, mode) {
        ("librdkafka", mode) => {
            let (b, t) = (bootstrap.to_owned(), topic.to_owned());
            blocking(move || rdkafka_produce(&b, &t, n, mode)).await
        }
        ("baton", mode) => baton_produce(bootstrap, topic, n, mode).await,
        (other, _) => Err(format!("unknown client {other}")),
    }
}

// ---------------------------------------------------------------------------
// Baton

/// Baton's producer (idempotent, acks=all) with the shared batching; in
/// transactions with a fresh transactional id, committed every interval.
async fn baton_produce(bootstrap: &str, topic: &str, n: u64, mode: Mode) -> Result<Sample, String> {
    let s = acks_all();
    let client = baton_kafka::Client::builder([bootstrap])
        .client_id("bench-baton-txn")
        .build()
        .await
        .map_err(|e| format!("baton client: {e}"))?;
    let mut builder = baton_kafka::Producer::builder(&client)
        .acks(baton_kafka::Acks::All)
        .linger(s.linger)
        .batch_size(s.batch_bytes)
        .max_request_size(s.max_request)
        .buffer_memory(s.buffer_bytes);
    if let Mode::Transactional(_) = mode {
        builder = builder.transactional_id(format!("bench-baton-{topic}"));
    }
    let producer = builder.build();
    let txn =
        |what: &'static str| move |e: baton_kafka::TransactionError| format!("baton {what}: {e}");
    if let Mode::Transactional(_) = mode {
        producer
            .init_transactions()
            .await
            .map_err(txn("init_transactions"))?;
        producer
            .begin_transaction()
            .await
            .map_err(txn("begin_transaction"))?;
    }
    let value = bytes::Bytes::from(vec![b'v'; 100]);
    let send = |v: bytes::Bytes| {
        producer.send(
            baton_kafka::ProducerRecord::new(topic.to_owned())
                .partition(0)
                .value(v),
        )
    };
    // Warm up: metadata, the connection, the producer id (and the partition in the
    // transaction).
    send(bytes::Bytes::from_static(b"warm"))
        .await
        .map_err(|e| format!("baton send: {e}"))?;
    let (cpu0, t0) = (self_cpu(), Instant::now());
    let mut next_commit = match mode {
        Mode::Transactional(d) => Some((d, t0 + d)),
        Mode::Idempotent => None,
    };
    let mut commits = 0u64;
    let mut window = std::collections::VecDeque::new();
    for _ in 0..n {
        window.push_back(
            send(value.clone())
                .await
                .map_err(|e| format!("baton send: {e}"))?,
        );
        if window.len() >= clients::WINDOW {
            if let Some(d) = window.pop_front() {
                d.await.map_err(|e| format!("baton delivery: {e}"))?;
            }
        }
        if let Some((d, at)) = next_commit {
            if Instant::now() >= at {
                producer
                    .commit_transaction()
                    .await
                    .map_err(txn("commit_transaction"))?;
                commits += 1;
                producer
                    .begin_transaction()
                    .await
                    .map_err(txn("begin_transaction"))?;
                next_commit = Some((d, Instant::now() + d));
            }
        }
    }
    if next_commit.is_some() {
        producer
            .commit_transaction()
            .await
            .map_err(txn("commit_transaction"))?;
        commits += 1;
        eprintln!("  baton: {commits} commits");
    }
    while let Some(d) = window.pop_front() {
        d.await.map_err(|e| format!("baton delivery: {e}"))?;
    }
    let sample = Sample {
        records: n,
        bytes: n * 100,
        secs: t0.elapsed().as_secs_f64(),
        cpu_secs: (self_cpu() - cpu0).as_secs_f64(),
    };
    producer.close().await;
    Ok(sample)
}

// ---------------------------------------------------------------------------
// librdkafka

/// Counts delivery reports.
struct Deliveries {
    ok: AtomicU64,
    failed: AtomicU64,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();
    fn delivery(&self, r: &DeliveryResult<'_>, _: ()) {
        match r {
            Ok(_) => self.ok.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.failed.fetch_add(1, Ordering::Relaxed),
        };
    }
}

/// librdkafka's producer, idempotent, or transactional with a fresh transactional
/// id, committing every interval. Blocking.
fn rdkafka_produce(bootstrap: &str, topic: &str, n: u64, mode: Mode) -> Result<Sample, String> {
    let mut config: ClientConfig = clients::rdkafka_producer_config(&bootstrap.into(), acks_all());
    config.set("enable.idempotence", "true");
    if let Mode::Transactional(_) = mode {
        config.set("transactional.id", format!("bench-librdkafka-{topic}"));
    }
    let producer: ThreadedProducer<Deliveries> = config
        .create_with_context(Deliveries {
            ok: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        })
        .map_err(|e| format!("librdkafka producer: {e}"))?;
    let txn = |r: rdkafka::error::KafkaResult<()>, what: &str| {
        r.map_err(|e| format!("librdkafka {what}: {e}"))
    };
    if let Mode::Transactional(_) = mode {
        txn(
            producer.init_transactions(COMMIT_TIMEOUT),
            "init_transactions",
        )?;
        txn(producer.begin_transaction(), "begin_transaction")?;
    }
    // Warm up: metadata, the connection (and the partition in the transaction).
    clients::send_blocking(&producer, topic, b"warm")?;
    let value = vec![b'v'; 100];
    let (cpu0, t0) = (self_cpu(), Instant::now());
    let mut commits = 0u64;
    let mut next_commit = match mode {
        Mode::Transactional(d) => Some((d, t0 + d)),
        Mode::Idempotent => None,
    };
    for _ in 0..n {
        clients::send_blocking(&producer, topic, &value)?;
        if let Some((d, at)) = next_commit {
            if Instant::now() >= at {
                txn(producer.commit_transaction(COMMIT_TIMEOUT), "commit")?;
                txn(producer.begin_transaction(), "begin_transaction")?;
                commits += 1;
                next_commit = Some((d, Instant::now() + d));
            }
        }
    }
    if next_commit.is_some() {
        txn(producer.commit_transaction(COMMIT_TIMEOUT), "commit")?;
        commits += 1;
        eprintln!("  librdkafka: {commits} commits");
    } else {
        producer
            .flush(COMMIT_TIMEOUT)
            .map_err(|e| format!("librdkafka flush: {e}"))?;
    }
    let sample = Sample {
        records: n,
        bytes: n * 100,
        secs: t0.elapsed().as_secs_f64(),
        cpu_secs: (self_cpu() - cpu0).as_secs_f64(),
    };
    let ok = producer.context().ok.load(Ordering::Relaxed);
    let failed = producer.context().failed.load(Ordering::Relaxed);
    if ok != n + 1 || failed != 0 {
        return Err(format!(
            "librdkafka: {ok} delivered, {failed} failed of {} ({commits} commits)",
            n + 1
        ));
    }
    Ok(sample)
}
