//! The `partitions` item: producing keyed records into, and reading them back
//! from, a fresh topic of 1, 100, 1,000 or 10,000 partitions on an in-memory
//! baton-broker, Baton against librdkafka in the same run.
//!
//! Per partition count the item starts a fresh broker and records its resident
//! memory before the first topic is created, after it is created and after the
//! first produce into it. Every run then creates a topic per client and acks
//! setting, times a Metadata request for it, produces `records` keyed 100-byte
//! values (the client's own partitioner spreads them), reads them back from
//! every partition (after the acks=1 produce) and deletes the topic.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::Message as _;
use rdkafka::producer::ThreadedProducer;
use rdkafka::producer::{BaseRecord, Producer as _};
use rdkafka::{Offset, TopicPartitionList};

use crate::clients::{rdkafka_producer_config, Counting, Endpoint, ProduceSettings, WINDOW};
use crate::measure::{self, median, self_cpu, BrokerProc, Sample, Table};
use crate::{blocking, log_sample, settings, Options};

/// The value size of every record.
const VALUE: usize = 100;

/// The key of record `i`: distinct keys, so the partitioner spreads them.
fn key(i: u64) -> String {
    format!("key-{i:012}")
}

fn err<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> String {
    move |e| format!("{what}: {e}")
}

/// Runs the item for every partition count of `o.partitions`.
pub async fn run(o: &Options) -> Result<(), String> {
    println!(
        "\n## Partitions: {} keyed records of 100 bytes per run into a fresh topic (linger 5 ms, batch 1 MiB, 32 MiB buffer, idempotence off), read back from every partition after the acks=1 produce",
        o.partition_records
    );
    let mut summary = Vec::new();
    for &p in &o.partitions {
        summary.push(one_count(o, p).await?);
    }
    println!();
    println!("### Partitions: summary (medians)");
    println!();
    println!("| partitions | Baton acks=1 rec/s | % of Baton at 1 partition | Baton ÷ librdkafka | Baton acks=all rec/s | Baton ÷ librdkafka | broker CPU µs/rec (Baton load, acks=1) | broker CPU µs/rec (librdkafka load, acks=1) | broker RSS KiB per partition (created / after produce) | Metadata ms | Baton consume rec/s | librdkafka consume rec/s |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let base = summary
        .first()
        .map_or(f64::NAN, |s: &Summary| s.baton_acks1);
    for s in &summary {
        println!(
            "| {} | {:.0} | {:.0}% | {:.2} | {:.0} | {:.2} | {:.3} | {:.3} | {:.1} / {:.1} | {:.2} | {:.0} | {:.0} |",
            s.partitions,
            s.baton_acks1,
            100.0 * s.baton_acks1 / base,
            s.baton_acks1 / s.rdkafka_acks1,
            s.baton_acks_all,
            s.baton_acks_all / s.rdkafka_acks_all,
            s.broker_cpu_baton,
            s.broker_cpu_rdkafka,
            s.rss_created_kib,
            s.rss_produced_kib,
            s.metadata_ms,
            s.baton_consume,
            s.rdkafka_consume,
        );
    }
    Ok(())
}

/// The medians of one partition count, for the summary table.
struct Summary {
    partitions: i32,
    baton_acks1: f64,
    rdkafka_acks1: f64,
    baton_acks_all: f64,
    rdkafka_acks_all: f64,
    broker_cpu_baton: f64,
    broker_cpu_rdkafka: f64,
    rss_created_kib: f64,
    rss_produced_kib: f64,
    metadata_ms: f64,
    baton_consume: f64,
    rdkafka_consume: f64,
}

async fn one_count(o: &Options, partitions: i32) -> Result<Summary, String> {
    let broker = BrokerProc::baton(&measure::baton_broker_bin())?;
    let bootstrap = broker.bootstrap();
    let client = Endpoint::from(&bootstrap).baton().await?;
    let admin = baton_kafka::Admin::new(&client);
    let n = o.partition_records;
    let clients = ["baton", "librdkafka"];

    // Memory: a fresh broker, then one topic created, then one produce into it.
    settle().await;
    let rss0 = broker.rss_kib();
    let topic = format!("parts-{partitions}-memory");
    create(&admin, &topic, partitions).await?;
    settle().await;
    let rss1 = broker.rss_kib();
    let s = produce(clients[0], &bootstrap, &topic, n, settings(1)).await?;
    settle().await;
    let rss2 = broker.rss_kib();
    log_sample(&format!("{partitions} partitions: memory produce"), &s);
    delete(&admin, &topic).await;
    let per = |kib: u64| (kib.saturating_sub(rss0)) as f64 / f64::from(partitions);
    eprintln!(
        "  broker RSS {rss0} KiB fresh, {rss1} KiB with {partitions} partitions, {rss2} KiB after {n} records"
    );

    let mut metadata_ms = Vec::new();
    let mut tables = [Table::default(), Table::default()];
    let mut broker_tables = [Table::default(), Table::default()];
    let mut consume = Table::default();
    for run in 0..o.runs {
        for (ai, acks) in [1i16, -1].into_iter().enumerate() {
            let mut order = clients.to_vec();
            let k = run % order.len();
            order.rotate_left(k);
            for c in order {
                let topic = format!(
                    "parts-{partitions}-{}-{c}-{run}",
                    if acks == 1 { "1" } else { "all" }
                );
                create(&admin, &topic, partitions).await?;
                metadata_ms.push(metadata_time(&client, &topic).await?);
                let cpu0 = broker.cpu();
                let s = produce(c, &bootstrap, &topic, n, settings(acks)).await?;
                let broker_cpu = (broker.cpu() - cpu0).as_secs_f64();
                log_sample(
                    &format!("{partitions}p acks={acks} {c} run {}", run + 1),
                    &s,
                );
                tables[ai].push(c, s);
                broker_tables[ai].push(
                    c,
                    Sample {
                        cpu_secs: broker_cpu,
                        ..s
                    },
                );
                if acks == 1 {
                    let s = consume_all(c, &bootstrap, &topic, partitions, n).await?;
                    log_sample(&format!("{partitions}p consume {c} run {}", run + 1), &s);
                    consume.push(c, s);
                }
                delete(&admin, &topic).await;
            }
        }
    }
    for (ai, name) in ["1", "all"].into_iter().enumerate() {
        tables[ai].print(
            &format!("Partitions: {partitions}, producer, acks={name}, client CPU"),
            "baton",
            "client",
        );
        broker_tables[ai].print(
            &format!(
                "Partitions: {partitions}, producer, acks={name}, broker CPU under each client's load"
            ),
            "baton",
            "broker",
        );
    }
    consume.print(
        &format!("Partitions: {partitions}, consumer (every partition from offset 0)"),
        "baton",
        "client",
    );
    let md = median(metadata_ms);
    println!();
    println!(
        "{partitions} partitions: broker RSS {:.1} KiB per partition after creation, {:.1} KiB per partition after {n} records; Metadata for the topic {md:.2} ms (median of {} runs × 9 requests)",
        per(rss1),
        per(rss2),
        o.runs
    );
    Ok(Summary {
        partitions,
        baton_acks1: tables[0].rate("baton"),
        rdkafka_acks1: tables[0].rate("librdkafka"),
        baton_acks_all: tables[1].rate("baton"),
        rdkafka_acks_all: tables[1].rate("librdkafka"),
        broker_cpu_baton: broker_tables[0].cpu_us("baton"),
        broker_cpu_rdkafka: broker_tables[0].cpu_us("librdkafka"),
        rss_created_kib: per(rss1),
        rss_produced_kib: per(rss2),
        metadata_ms: md,
        baton_consume: consume.rate("baton"),
        rdkafka_consume: consume.rate("librdkafka"),
    })
}

/// Lets the broker's allocator and background tasks settle before reading RSS.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(300)).await;
}

async fn create(admin: &baton_kafka::Admin, topic: &str, partitions: i32) -> Result<(), String> {
    admin
        .create_topic(topic, partitions, 1)
        .await
        .map_err(|e| format!("create {topic}: {e}"))
}

async fn delete(admin: &baton_kafka::Admin, topic: &str) {
    if let Err(e) = admin.delete_topics([topic]).await {
        eprintln!("  (delete {topic}: {e})");
    }
}

/// Milliseconds of one Metadata round trip for `topic` (the median of 9, after
/// one untimed), through Baton's client.
async fn metadata_time(client: &baton_kafka::Client, topic: &str) -> Result<f64, String> {
    let mut times = Vec::new();
    for i in 0..10 {
        let t0 = Instant::now();
        let md = client.refresh_metadata().await.map_err(err("metadata"))?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        if md.topic(topic).is_none() {
            return Err(format!("metadata: {topic} missing"));
        }
        if i > 0 {
            times.push(ms);
        }
    }
    Ok(median(times))
}

async fn produce(
    client: &str,
    bootstrap: &str,
    topic: &str,
    n: u64,
    s: ProduceSettings,
) -> Result<Sample, String> {
    match client {
        "baton" => baton_produce(bootstrap, topic, n, s).await,
        _ => {
            let (b, t) = (bootstrap.to_owned(), topic.to_owned());
            blocking(move || rdkafka_produce(&b, &t, n, s)).await
        }
    }
}

async fn consume_all(
    client: &str,
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    n: u64,
) -> Result<Sample, String> {
    match client {
        "baton" => baton_consume(bootstrap, topic, partitions, n).await,
        _ => {
            let (b, t) = (bootstrap.to_owned(), topic.to_owned());
            blocking(move || rdkafka_consume(&b, &t, partitions, n)).await
        }
    }
}

/// Produces `n` keyed records with Baton's default partitioner.
pub async fn baton_produce(
    bootstrap: &str,
    topic: &str,
    n: u64,
    s: ProduceSettings,
) -> Result<Sample, String> {
    let client = Endpoint::from(bootstrap).baton().await?;
    let producer = baton_kafka::Producer::builder(&client)
        .acks(if s.acks == 1 {
            baton_kafka::Acks::Leader
        } else {
            baton_kafka::Acks::All
        })
        .linger(s.linger)
        .batch_size(s.batch_bytes)
        .max_request_size(s.max_request)
        .buffer_memory(s.buffer_bytes)
        .idempotence(false)
        .build();
    // Warm up: metadata and the connection.
    producer
        .send(baton_kafka::ProducerRecord::new(topic).value(Bytes::from_static(b"warm")))
        .await
        .map_err(err("baton send"))?
        .await
        .map_err(err("baton delivery"))?;
    let value = Bytes::from(vec![b'v'; VALUE]);
    let keys: Vec<Bytes> = (0..n).map(|i| Bytes::from(key(i))).collect();
    let topic: String = topic.to_owned();
    let (cpu0, t0) = (self_cpu(), Instant::now());
    let mut window = VecDeque::with_capacity(WINDOW);
    for k in keys {
        let d = producer
            .send(
                baton_kafka::ProducerRecord::new(topic.clone())
                    .key(k)
                    .value(value.clone()),
            )
            .await
            .map_err(err("baton send"))?;
        window.push_back(d);
        if window.len() >= WINDOW {
            if let Some(d) = window.pop_front() {
                d.await.map_err(err("baton delivery"))?;
            }
        }
    }
    while let Some(d) = window.pop_front() {
        d.await.map_err(err("baton delivery"))?;
    }
    let sample = Sample {
        records: n,
        bytes: n * VALUE as u64,
        secs: t0.elapsed().as_secs_f64(),
        cpu_secs: (self_cpu() - cpu0).as_secs_f64(),
    };
    producer.close().await;
    Ok(sample)
}

/// Reads `n` records from offset 0 of every partition with Baton's assigned
/// consumer (the records of the warm-up send are counted among them, so the
/// run reads `n` of the `n + 1` produced).
async fn baton_consume(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    n: u64,
) -> Result<Sample, String> {
    let client = Endpoint::from(bootstrap).baton().await?;
    client
        .refresh_metadata()
        .await
        .map_err(err("baton metadata"))?;
    let (cpu0, t0) = (self_cpu(), Instant::now());
    let mut builder = baton_kafka::Consumer::builder(&client);
    for p in 0..partitions {
        builder = builder.assign(topic, p, baton_kafka::StartOffset::Earliest);
    }
    let mut consumer = builder.build().await.map_err(err("baton consumer"))?;
    let (mut got, mut bytes) = (0u64, 0u64);
    while got < n {
        let r = tokio::time::timeout(Duration::from_secs(60), consumer.recv())
            .await
            .map_err(|_| format!("baton consumer stalled at {got} of {n}"))?
            .map_err(err("baton recv"))?;
        bytes += r.value.as_ref().map_or(0, |v| v.len() as u64);
        got += 1;
    }
    Ok(Sample {
        records: got,
        bytes,
        secs: t0.elapsed().as_secs_f64(),
        cpu_secs: (self_cpu() - cpu0).as_secs_f64(),
    })
}

/// Produces `n` keyed records with librdkafka's default partitioner. Blocking.
fn rdkafka_produce(
    bootstrap: &str,
    topic: &str,
    n: u64,
    s: ProduceSettings,
) -> Result<Sample, String> {
    let ctx = Counting {
        ok: AtomicU64::new(0),
        failed: AtomicU64::new(0),
    };
    let producer: ThreadedProducer<Counting> =
        rdkafka_producer_config(&Endpoint::from(bootstrap), s)
            .create_with_context(ctx)
            .map_err(err("librdkafka producer"))?;
    send(&producer, topic, b"warm-key", b"warm")?;
    producer
        .flush(Duration::from_secs(60))
        .map_err(err("librdkafka flush"))?;
    let base_ok = producer.context().ok.load(Ordering::Relaxed);
    let value = vec![b'v'; VALUE];
    let keys: Vec<String> = (0..n).map(key).collect();
    let (cpu0, t0) = (self_cpu(), Instant::now());
    for k in &keys {
        send(&producer, topic, k.as_bytes(), &value)?;
    }
    producer
        .flush(Duration::from_secs(300))
        .map_err(err("librdkafka flush"))?;
    let sample = Sample {
        records: n,
        bytes: n * VALUE as u64,
        secs: t0.elapsed().as_secs_f64(),
        cpu_secs: (self_cpu() - cpu0).as_secs_f64(),
    };
    let ok = producer.context().ok.load(Ordering::Relaxed) - base_ok;
    let failed = producer.context().failed.load(Ordering::Relaxed);
    if ok != n || failed != 0 {
        return Err(format!(
            "librdkafka: {ok} delivered, {failed} failed of {n}"
        ));
    }
    Ok(sample)
}

/// Sends one keyed record, polling while librdkafka's queue is full.
fn send(
    p: &ThreadedProducer<Counting>,
    topic: &str,
    key: &[u8],
    value: &[u8],
) -> Result<(), String> {
    let mut record = BaseRecord::<[u8], [u8]>::to(topic).key(key).payload(value);
    loop {
        match p.send(record) {
            Ok(()) => return Ok(()),
            Err((
                rdkafka::error::KafkaError::MessageProduction(
                    rdkafka::types::RDKafkaErrorCode::QueueFull,
                ),
                r,
            )) => {
                record = r;
                p.poll(Duration::from_millis(1));
            }
            Err((e, _)) => return Err(format!("librdkafka send: {e}")),
        }
    }
}

/// Reads `n` records from offset 0 of every partition with librdkafka's
/// BaseConsumer (assigned, no group membership, the prefetch floor raised as in
/// the consumer item's tuned row). Blocking.
fn rdkafka_consume(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    n: u64,
) -> Result<Sample, String> {
    let (cpu0, t0) = (self_cpu(), Instant::now());
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("client.id", "bench-librdkafka")
        .set("group.id", "bench-librdkafka")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .set("fetch.wait.max.ms", "500")
        .set("max.partition.fetch.bytes", "1048576")
        .set("fetch.max.bytes", "52428800")
        .set("queued.min.messages", "1000000")
        .set("queued.max.messages.kbytes", "1048576")
        .create()
        .map_err(err("librdkafka consumer"))?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .map_err(err("librdkafka assign"))?;
    }
    consumer.assign(&tpl).map_err(err("librdkafka assign"))?;
    let (mut got, mut bytes) = (0u64, 0u64);
    let mut idle_since = Instant::now();
    while got < n {
        match consumer.poll(Duration::from_millis(500)) {
            Some(Ok(m)) => {
                bytes += m.payload().map_or(0, |v| v.len() as u64);
                got += 1;
                idle_since = Instant::now();
            }
            Some(Err(e)) => return Err(format!("librdkafka poll: {e}")),
            None if idle_since.elapsed() > Duration::from_secs(60) => {
                return Err(format!("librdkafka consumer stalled at {got} of {n}"))
            }
            None => {}
        }
    }
    Ok(Sample {
        records: got,
        bytes,
        secs: t0.elapsed().as_secs_f64(),
        cpu_secs: (self_cpu() - cpu0).as_secs_f64(),
    })
}
