//! Benchmarks of Baton against librdkafka, rskafka and tansu; see docs/PERFORMANCE.md.

mod clients;
mod connections;
mod failover;
mod group;
mod java;
mod kafka;
mod latency;
mod measure;
mod metrics_overhead;
mod partitions;
mod referee;
mod security;
mod transactions;

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use clients::ProduceSettings;
use measure::{loadavg, BrokerProc, Sample, Table};

const HELP: &str = "\
baton-bench: Baton against librdkafka, rskafka, tansu, the Java client and Apache
Kafka's broker, in the same run

USAGE:
    cargo run --release -- <producer|consumer|group|broker|large|failover|latency|partitions|connections|java|kafka-broker|security|transactions|metrics|all> [OPTIONS]

    latency       end-to-end latency on a 3-node in-process baton-broker cluster
                  (in memory; 6 partitions, replication factor 3): a paced acks=all
                  producer stamps each 100-byte value with its intended send time and
                  a consumer in the same process reads concurrently; p50, p99, p99.9
                  and max of receive time minus intended time per client, rate
                  (--latency-rates) and linger (--latency-lingers), Baton against
                  librdkafka, medians of --runs runs
    partitions    per partition count (--partitions), a fresh in-memory baton-broker:
                  Baton and librdkafka produce --partition-records keyed 100-byte
                  records (acks=1, acks=all) into a fresh topic and read them back;
                  client and broker CPU, broker RSS per partition, Metadata time
    connections   --idle-connections raw connections (one ApiVersions each) held
                  open, then --producers Baton producers (one Client each) sending
                  --per-producer records each: broker RSS per idle connection,
                  broker records/s and CPU, per-producer records/s min/median/max
    java          Baton's producer and consumer against the Java client (a warm
                  harness JVM, and Kafka's ProducerPerformance/ConsumerPerformance),
                  all on one Apache Kafka node the bench starts (log dir on /dev/shm)
    kafka-broker  baton-broker (in memory, and on disk in /dev/shm) against Apache
                  Kafka's broker (log dir on /dev/shm) under the same librdkafka load
    security      Baton and librdkafka producing and consuming over SASL_SSL
                  (SCRAM-SHA-512) and PLAINTEXT, against two baton-broker processes
                  (this binary in its serve-broker mode, in memory); --records per
                  produce run, --consume-records per consume run
    metrics       Baton's producer (acks=1) and consumer without and with a metrics
                  recorder (metrics-exporter-prometheus), alternating run by run
                  (not part of `all`)
    transactions  transactional produce (a commit every 100 ms, every 1 s) against
                  idempotent produce, per client, on one broker (--txn-broker);
                  --records per run (not part of `all`)

OPTIONS:
    --runs N               runs per client (default 5); tables show medians
    --records N            records per producer run (default 2000000; also java)
    --consume-records N    records pre-produced once and read per consumer run (default 5000000;
                           also java)
                           (group: read per run by Baton's plain consumer and by one
                           member of a fresh group, alternating; default 5000000)
    --broker-records N     records per broker run (default 2000000; also kafka-broker)
    --large-values N       values per large-value run (default 1024)
    --large-value-mib M    size of each large value in MiB (default 1; with 16, pass about
                           --large-values 64 for the same bytes per run)
    --failover-rate R      records/s of the paced failover producer (default 2000)
    --session-timeout-ms T broker session timeout of the failover cluster (default 6000)
    --latency-rates LIST   latency: comma-separated records/s (default 10000,100000,500000)
    --latency-lingers LIST latency: comma-separated producer linger ms (default 0,5)
    --latency-secs S       latency: seconds of load per cell, warm-up included (default 5)
    --latency-warmup-secs S latency: seconds not counted at the start of a cell (default 1)
    --txn-broker B         transactions: baton (baton-broker, in memory; default) or kafka
                           (Apache Kafka, the referee)
    --partitions LIST      partitions: comma-separated partition counts (default
                           1,100,1000,10000)
    --partition-records N  partitions: records per produce run (default 300000)
    --idle-connections N   connections: idle connections held open (default 1000)
    --producers N          connections: active producers (default 200)
    --per-producer N       connections: records per producer (default 5000)
    --clients LIST         comma-separated subset of baton,librdkafka,rskafka (consumer:
                           also librdkafka-tuned, a larger prefetch queue; default
                           baton,librdkafka,librdkafka-tuned,rskafka there)

ENVIRONMENT:
    BATON_BROKER_BIN  the baton-broker binary (default target/release/baton-broker of
                      this package; build it with `cargo build --release -p baton-broker`
                      in this directory)
    TANSU_BIN         the tansu binary (default: tansu on the PATH); skipped if absent
    java, mvn         java and kafka items: Apache Kafka's jars are taken from
                      ../target/apache-kafka/libs, installed there with mvn from
                      ../tests/apache-kafka/pom.xml if missing
";

#[derive(Debug, Clone)]
struct Options {
    runs: usize,
    records: u64,
    consume_records: u64,
    broker_records: u64,
    large_values: u64,
    large_value_mib: usize,
    failover_rate: u64,
    session_timeout_ms: u64,
    clients: Vec<String>,
    txn_broker: String,
    partitions: Vec<i32>,
    partition_records: u64,
    idle_connections: usize,
    producers: usize,
    per_producer: u64,
    latency_rates: Vec<u64>,
    latency_lingers: Vec<u64>,
    latency_secs: f64,
    latency_warmup_secs: f64,
}

/// Parses a comma-separated list of non-negative integers.
fn num_list(name: &str, v: Option<String>) -> Result<Vec<u64>, String> {
    v.ok_or_else(|| format!("{name} needs a value"))?
        .split(',')
        .map(|x| {
            x.trim()
                .parse::<u64>()
                .map_err(|e| format!("{name}: {x:?}: {e}"))
        })
        .collect()
}

/// Parses a non-negative number of seconds.
fn secs(name: &str, v: Option<String>) -> Result<f64, String> {
    match v
        .ok_or_else(|| format!("{name} needs a value"))?
        .parse::<f64>()
    {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!("{name}: not a number of seconds")),
    }
}

fn parse() -> Result<(String, Options), String> {
    let mut o = Options {
        runs: 5,
        records: 2_000_000,
        consume_records: 5_000_000,
        broker_records: 2_000_000,
        large_values: 1024,
        large_value_mib: 1,
        failover_rate: 2000,
        session_timeout_ms: 6000,
        clients: vec!["baton".into(), "librdkafka".into(), "rskafka".into()],
        txn_broker: "baton".into(),
        partitions: vec![1, 100, 1000, 10_000],
        partition_records: 300_000,
        idle_connections: 1000,
        producers: 200,
        per_producer: 5000,
        latency_rates: vec![10_000, 100_000, 500_000],
        latency_lingers: vec![0, 5],
        latency_secs: 5.0,
        latency_warmup_secs: 1.0,
    };
    let mut args = std::env::args().skip(1);
    let mut sub = None;
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> Result<u64, String> {
            args.next()
                .ok_or_else(|| format!("{name} needs a value"))?
                .parse()
                .map_err(|e| format!("{name}: {e}"))
        };
        match a.as_str() {
            "-h" | "--help" => {
                print!("{HELP}");
                std::process::exit(0);
            }
            "--runs" => o.runs = num("--runs")?.max(1) as usize,
            "--records" => o.records = num("--records")?,
            "--consume-records" => o.consume_records = num("--consume-records")?,
            "--broker-records" => o.broker_records = num("--broker-records")?,
            "--large-values" => o.large_values = num("--large-values")?,
            "--large-value-mib" => {
                o.large_value_mib = num("--large-value-mib")?.clamp(1, 256) as usize
            }
            "--failover-rate" => o.failover_rate = num("--failover-rate")?,
            "--session-timeout-ms" => o.session_timeout_ms = num("--session-timeout-ms")?,
            "--txn-broker" => o.txn_broker = args.next().ok_or("--txn-broker needs a value")?,
            "--partition-records" => o.partition_records = num("--partition-records")?.max(1),
            "--idle-connections" => o.idle_connections = num("--idle-connections")? as usize,
            "--producers" => o.producers = num("--producers")?.max(1) as usize,
            "--per-producer" => o.per_producer = num("--per-producer")?.max(1),
            "--latency-rates" => o.latency_rates = num_list("--latency-rates", args.next())?,
            "--latency-lingers" => o.latency_lingers = num_list("--latency-lingers", args.next())?,
            "--latency-secs" => o.latency_secs = secs("--latency-secs", args.next())?,
            "--latency-warmup-secs" => {
                o.latency_warmup_secs = secs("--latency-warmup-secs", args.next())?
            }
            "--partitions" => {
                o.partitions = args
                    .next()
                    .ok_or("--partitions needs a value")?
                    .split(',')
                    .map(|p| match p.trim().parse::<i32>() {
                        Ok(n) if n >= 1 => Ok(n),
                        _ => Err(format!("--partitions: bad count {p:?}")),
                    })
                    .collect::<Result<_, _>>()?
            }
            "--clients" => {
                o.clients = args
                    .next()
                    .ok_or("--clients needs a value")?
                    .split(',')
                    .map(str::to_owned)
                    .collect()
            }
            s if sub.is_none() && !s.starts_with('-') => sub = Some(s.to_owned()),
            other => return Err(format!("unknown argument {other:?}; try --help")),
        }
    }
    Ok((sub.ok_or("which benchmark? try --help")?, o))
}

fn settings(acks: i16) -> ProduceSettings {
    ProduceSettings {
        acks,
        linger: Duration::from_millis(5),
        batch_bytes: 1024 * 1024,
        max_request: 2 * 1024 * 1024,
        buffer_bytes: 32 * 1024 * 1024,
    }
}

/// A Baton admin client on `bootstrap` for creating and deleting topics.
struct Topics {
    admin: baton_kafka::Admin,
}

impl Topics {
    async fn new(bootstrap: &str) -> Result<Topics, String> {
        let client = baton_kafka::Client::builder([bootstrap])
            .client_id("bench-admin")
            .build()
            .await
            .map_err(|e| format!("admin client: {e}"))?;
        Ok(Topics {
            admin: baton_kafka::Admin::new(&client),
        })
    }
    async fn create(&self, topic: &str) -> Result<(), String> {
        self.admin
            .create_topic(topic, 1, 1)
            .await
            .map_err(|e| format!("create {topic}: {e}"))
    }
    async fn delete(&self, topic: &str) {
        if let Err(e) = self.admin.delete_topics([topic]).await {
            eprintln!("  (delete {topic}: {e})");
        }
    }
}

/// Creates a topic through librdkafka's admin API (works with any broker).
async fn rdkafka_create_topic(bootstrap: &str, topic: &str) -> Result<(), String> {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let admin: AdminClient<rdkafka::client::DefaultClientContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .map_err(|e| format!("admin: {e}"))?;
    let res = admin
        .create_topics(
            [&NewTopic::new(topic, 1, TopicReplication::Fixed(1))],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10))),
        )
        .await
        .map_err(|e| format!("create {topic}: {e}"))?;
    for r in res {
        r.map_err(|(t, e)| format!("create {t}: {e}"))?;
    }
    Ok(())
}

fn log_sample(what: &str, s: &Sample) {
    eprintln!(
        "  {what:<28} {:>10.0} rec/s {:>9.1} MB/s {:>8.3} µs CPU/rec   load {}",
        s.rate(),
        s.byte_rate() / 1e6,
        s.cpu_us(),
        loadavg()
    );
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| format!("blocking task: {e}"))?
}

async fn produce_one(
    client: &str,
    bootstrap: &str,
    topic: &str,
    n: u64,
    value_size: usize,
    s: ProduceSettings,
) -> Result<Sample, String> {
    match client {
        "baton" => clients::baton_produce(bootstrap, topic, n, value_size, s).await,
        "librdkafka" => {
            let (b, t) = (bootstrap.to_owned(), topic.to_owned());
            blocking(move || clients::rdkafka_produce(&b, &t, n, value_size, s)).await
        }
        "rskafka" => clients::rskafka_produce(bootstrap, topic, n, value_size, s).await,
        other => Err(format!("unknown client {other}")),
    }
}

async fn producer(o: &Options) -> Result<(), String> {
    let broker = BrokerProc::baton(&measure::baton_broker_bin())?;
    let topics = Topics::new(&broker.bootstrap()).await?;
    println!(
        "\n## Producer: {} records of 100 bytes per run, 1 partition, linger 5 ms, batch 1 MiB, 32 MiB buffer, no compression, idempotence off",
        o.records
    );
    // One untimed run per client and acks setting first: the first run in a fresh
    // process (and against a fresh broker) pays for cold memory, whichever client
    // or setting it is.
    for acks in [1i16, -1] {
        for c in &o.clients {
            let topic = format!("produce-warmup-{}-{c}", if acks == 1 { "1" } else { "all" });
            topics.create(&topic).await?;
            let s = produce_one(
                c,
                &broker.bootstrap(),
                &topic,
                o.records,
                100,
                settings(acks),
            )
            .await?;
            log_sample(&format!("acks={acks} {c} warm-up (not counted)"), &s);
            topics.delete(&topic).await;
        }
    }
    for acks in [1i16, -1] {
        let mut table = Table::default();
        for run in 0..o.runs {
            // Rotate the order each run, so that no client always goes first.
            let mut order = o.clients.clone();
            let n = order.len().max(1);
            order.rotate_left(run % n);
            for c in &order {
                let topic = format!("produce-{}-{c}-{run}", if acks == 1 { "1" } else { "all" });
                topics.create(&topic).await?;
                let s = produce_one(
                    c,
                    &broker.bootstrap(),
                    &topic,
                    o.records,
                    100,
                    settings(acks),
                )
                .await?;
                log_sample(&format!("acks={acks} {c} run {}", run + 1), &s);
                table.push(c, s);
                topics.delete(&topic).await;
            }
        }
        table.print(
            &format!(
                "Producer, acks={} (rskafka always asks acks=all)",
                if acks == 1 { "1" } else { "all" }
            ),
            "baton",
            "client",
        );
    }
    Ok(())
}

async fn consumer(o: &Options) -> Result<(), String> {
    let mut o = o.clone();
    if o.clients == ["baton", "librdkafka", "rskafka"] {
        o.clients.insert(2, "librdkafka-tuned".into());
    }
    let broker = BrokerProc::baton(&measure::baton_broker_bin())?;
    let topics = Topics::new(&broker.bootstrap()).await?;
    let topic = "consume";
    topics.create(topic).await?;
    let s = clients::baton_produce(
        &broker.bootstrap(),
        topic,
        o.consume_records,
        100,
        settings(1),
    )
    .await?;
    log_sample("pre-produce (baton, acks=1)", &s);
    eprintln!("  broker RSS {} MiB", broker.rss_mib());
    println!(
        "\n## Consumer: {} records of 100 bytes read from offset 0 of 1 partition per run",
        o.consume_records
    );
    let mut table = Table::default();
    for run in 0..o.runs {
        for c in &o.clients {
            let b = broker.bootstrap();
            let n = o.consume_records;
            let s = match c.as_str() {
                "baton" => clients::baton_consume(&b, topic, n).await?,
                "librdkafka" => {
                    blocking(move || clients::rdkafka_consume(&b, "consume", n, false)).await?
                }
                "librdkafka-tuned" => {
                    blocking(move || clients::rdkafka_consume(&b, "consume", n, true)).await?
                }
                "rskafka" => clients::rskafka_consume(&b, topic, n).await?,
                other => return Err(format!("unknown client {other}")),
            };
            log_sample(&format!("consume {c} run {}", run + 1), &s);
            table.push(c, s);
        }
    }
    table.print("Consumer", "baton", "client");
    Ok(())
}

async fn group_bench(o: &Options) -> Result<(), String> {
    let broker = BrokerProc::baton(&measure::baton_broker_bin())?;
    let topics = Topics::new(&broker.bootstrap()).await?;
    let topic = "group";
    topics.create(topic).await?;
    let n = o.consume_records;
    let s = clients::baton_produce(&broker.bootstrap(), topic, n, 100, settings(1)).await?;
    log_sample("pre-produce (baton, acks=1)", &s);
    println!(
        "\n## Group consumer vs plain consumer: {n} records of 100 bytes, 1 partition, \
         read per run by an assigned Consumer and by the only member of a fresh group \
         (each timed from its first record), the one that goes first alternating"
    );
    let mut table = Table::default();
    let mut ratios = Vec::new();
    for run in 0..o.runs {
        let group = format!("bench-group-{run}");
        let b = broker.bootstrap();
        let (plain, grouped) = if run % 2 == 0 {
            let p = group::baton_plain_consume(&b, topic, n).await?;
            log_sample(&format!("plain baton run {}", run + 1), &p);
            let g = group::baton_group_consume(&b, topic, &group, n).await?;
            log_sample(&format!("group baton run {}", run + 1), &g);
            (p, g)
        } else {
            let g = group::baton_group_consume(&b, topic, &group, n).await?;
            log_sample(&format!("group baton run {}", run + 1), &g);
            let p = group::baton_plain_consume(&b, topic, n).await?;
            log_sample(&format!("plain baton run {}", run + 1), &p);
            (p, g)
        };
        eprintln!(
            "  run {}: group ÷ plain records/s {:.3}",
            run + 1,
            grouped.rate() / plain.rate()
        );
        ratios.push(grouped.rate() / plain.rate());
        table.push("baton plain", plain);
        table.push("baton group", grouped);
    }
    table.print("Group consumer vs plain consumer", "baton plain", "client");
    println!(
        "\ngroup ÷ plain records/s: {:.3} (ratio of the medians), {:.3} (median of the per-run ratios); \
         group CPU µs/record ÷ plain: {:.3}",
        table.rate("baton group") / table.rate("baton plain"),
        measure::median(ratios),
        table.cpu_us("baton group") / table.cpu_us("baton plain"),
    );
    Ok(())
}

async fn broker(o: &Options) -> Result<(), String> {
    let mut brokers = vec![BrokerProc::baton(&measure::baton_broker_bin())?];
    match BrokerProc::tansu(&measure::tansu_bin()) {
        Ok(t) => brokers.push(t),
        Err(e) => eprintln!("  tansu skipped: {e}"),
    }
    println!(
        "\n## Broker: librdkafka produces {} records of 100 bytes (acks=1, linger 5 ms, batch 1 MiB) then reads them back, per run; broker CPU from /proc/<pid>/stat",
        o.broker_records
    );
    let (prod, fetch) = broker_runs(o, &brokers, false).await?;
    prod.print(
        "Broker: produce (librdkafka load)",
        "baton-broker",
        "broker",
    );
    fetch.print("Broker: fetch (librdkafka load)", "baton-broker", "broker");
    Ok(())
}

/// One round on broker `b`: librdkafka produces `n` records to a new topic, then
/// the tuned librdkafka consumer reads them back; both samples carry the broker's
/// CPU over their span.
async fn broker_round(b: &BrokerProc, topic: &str, n: u64) -> Result<(Sample, Sample), String> {
    rdkafka_create_topic(&b.bootstrap(), topic).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (bs, t) = (b.bootstrap(), topic.to_owned());
    let cpu0 = b.cpu();
    let mut prod = blocking(move || clients::rdkafka_produce(&bs, &t, n, 100, settings(1))).await?;
    prod.cpu_secs = (b.cpu() - cpu0).as_secs_f64();
    let (bs, t) = (b.bootstrap(), topic.to_owned());
    let cpu0 = b.cpu();
    let mut fetch = blocking(move || clients::rdkafka_consume(&bs, &t, n, true)).await?;
    fetch.cpu_secs = (b.cpu() - cpu0).as_secs_f64();
    Ok((prod, fetch))
}

/// `o.runs` rounds on every broker, the broker that goes first rotating from run
/// to run (after one untimed round each if `warmup`); the produce and fetch tables.
async fn broker_runs(
    o: &Options,
    brokers: &[BrokerProc],
    warmup: bool,
) -> Result<(Table, Table), String> {
    if warmup {
        for b in brokers {
            let (p, f) = broker_round(b, "broker-warmup", o.broker_records).await?;
            log_sample(&format!("produce {} warm-up (not counted)", b.name), &p);
            log_sample(&format!("fetch {} warm-up (not counted)", b.name), &f);
        }
    }
    let (mut prod, mut fetch) = (Table::default(), Table::default());
    for run in 0..o.runs {
        // Rotate which broker goes first, so that none always runs first.
        let mut order: Vec<&BrokerProc> = brokers.iter().collect();
        let n = order.len().max(1);
        order.rotate_left(run % n);
        for b in order {
            let (p, f) = broker_round(b, &format!("broker-{run}"), o.broker_records).await?;
            log_sample(&format!("produce {} run {}", b.name, run + 1), &p);
            prod.push(b.name, p);
            log_sample(&format!("fetch {} run {}", b.name, run + 1), &f);
            fetch.push(b.name, f);
            eprintln!("  {} RSS {} MiB", b.name, b.rss_mib());
        }
    }
    Ok((prod, fetch))
}

/// Copies `total` bytes over a loopback TCP connection in `chunk`-byte writes;
/// returns bytes per second.
fn raw_loopback(total: u64, chunk: usize) -> Result<Sample, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let reader = std::thread::spawn(move || -> std::io::Result<u64> {
        let (mut s, _) = listener.accept()?;
        let mut buf = vec![0u8; chunk];
        let mut got = 0u64;
        loop {
            let n = s.read(&mut buf)?;
            if n == 0 {
                return Ok(got);
            }
            got += n as u64;
        }
    });
    let buf = vec![b'r'; chunk];
    let mut s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let mut sent = 0u64;
    while sent < total {
        s.write_all(&buf).map_err(|e| e.to_string())?;
        sent += chunk as u64;
    }
    drop(s);
    let got = reader
        .join()
        .map_err(|_| "reader panicked")?
        .map_err(|e| e.to_string())?;
    Ok(Sample {
        records: total / chunk as u64,
        bytes: got,
        secs: t0.elapsed().as_secs_f64(),
        cpu_secs: 0.0,
    })
}

async fn large(o: &Options) -> Result<(), String> {
    let broker = BrokerProc::baton(&measure::baton_broker_bin())?;
    let topics = Topics::new(&broker.bootstrap()).await?;
    const MIB: usize = 1024 * 1024;
    let n = o.large_values;
    let mib = o.large_value_mib;
    let size = mib * MIB;
    println!(
        "\n## Large values: {n} values of {mib} MiB per run, acks=1, against a raw loopback TCP copy of the same bytes"
    );
    let mut table = Table::default();
    let mut broker_cpu = Table::default();
    for run in 0..o.runs {
        let s = tokio::task::spawn_blocking(move || raw_loopback(n * size as u64, size))
            .await
            .map_err(|e| e.to_string())??;
        log_sample(&format!("raw loopback run {}", run + 1), &s);
        table.push("raw loopback TCP", s);
        for c in o.clients.iter().filter(|c| *c != "rskafka") {
            let topic = format!("large-{c}-{run}");
            topics.create(&topic).await?;
            let mut st = settings(1);
            // Room for one value per request, and for a few values in the buffer.
            st.max_request = (4 * MIB).max(size + MIB);
            st.buffer_bytes = st.buffer_bytes.max(4 * size);
            let cpu0 = broker.cpu();
            let s = produce_one(c, &broker.bootstrap(), &topic, n, size, st).await?;
            log_sample(&format!("large {c} run {}", run + 1), &s);
            table.push(c, s);
            broker_cpu.push(
                c,
                Sample {
                    cpu_secs: (broker.cpu() - cpu0).as_secs_f64(),
                    ..s
                },
            );
            topics.delete(&topic).await;
        }
    }
    println!();
    println!("| path | runs | MB/s (median) | % of raw loopback | client CPU µs per MiB | broker CPU µs per MiB |");
    println!("|---|---:|---:|---:|---:|---:|");
    let raw = table.byte_rate("raw loopback TCP");
    for name in table.names() {
        let r = table.byte_rate(&name);
        println!(
            "| {name} | {} | {:.0} | {:.0}% | {} | {} |",
            table.runs(&name),
            r / 1e6,
            100.0 * r / raw,
            if name.starts_with("raw") {
                "-".to_string()
            } else {
                format!("{:.0}", table.cpu_us(&name) / mib as f64)
            },
            if name.starts_with("raw") {
                "-".to_string()
            } else {
                format!("{:.0}", broker_cpu.cpu_us(&name) / mib as f64)
            }
        );
    }
    Ok(())
}

/// Sizes of the values Baton's produce path moves per record (diagnostic).
async fn sizes() {
    use std::mem::size_of;
    println!(
        "ProducerRecord          {} bytes",
        size_of::<baton_kafka::ProducerRecord>()
    );
    println!(
        "RecordMetadata          {} bytes",
        size_of::<baton_kafka::RecordMetadata>()
    );
    println!(
        "ProduceError            {} bytes",
        size_of::<baton_kafka::ProduceError>()
    );
    println!(
        "Result<RecordMetadata, ProduceError> {} bytes",
        size_of::<Result<baton_kafka::RecordMetadata, baton_kafka::ProduceError>>()
    );
    println!(
        "DeliveryFuture          {} bytes",
        size_of::<baton_kafka::DeliveryFuture>()
    );
    if let Ok(client) = baton_kafka::Client::builder(["127.0.0.1:1"]).build().await {
        let p = baton_kafka::Producer::builder(&client).build();
        let fut = p.send(baton_kafka::ProducerRecord::new("t"));
        println!(
            "Producer::send future   {} bytes",
            std::mem::size_of_val(&fut)
        );
    } else {
        // Build a client lazily against a broker to size the send future.
        let broker = BrokerProc::baton(&measure::baton_broker_bin()).expect("broker");
        let client = baton_kafka::Client::builder([broker.bootstrap()])
            .build()
            .await
            .expect("client");
        let p = baton_kafka::Producer::builder(&client).build();
        let fut = p.send(baton_kafka::ProducerRecord::new("t"));
        println!(
            "Producer::send future   {} bytes",
            std::mem::size_of_val(&fut)
        );
    }
}

async fn run(sub: &str, o: &Options) -> Result<(), String> {
    eprintln!("{sub}: load average {} at start", loadavg());
    match sub {
        "producer" => producer(o).await,
        "consumer" => consumer(o).await,
        "group" => group_bench(o).await,
        "broker" => broker(o).await,
        "large" => large(o).await,
        "failover" => {
            failover::run(failover::FailoverOptions {
                runs: o.runs,
                rate: o.failover_rate,
                session_timeout: Duration::from_millis(o.session_timeout_ms),
            })
            .await
        }
        "latency" => {
            latency::run(latency::LatencyOptions {
                runs: o.runs,
                clients: o.clients.clone(),
                rates: o.latency_rates.clone(),
                lingers: o.latency_lingers.clone(),
                secs: o.latency_secs,
                warmup_secs: o.latency_warmup_secs.min(o.latency_secs),
            })
            .await
        }
        "partitions" => partitions::run(o).await,
        "connections" => connections::run(o).await,
        "java" => referee::clients(o).await,
        "kafka-broker" => referee::brokers(o).await,
        "security" => security::run(o).await,
        "transactions" => transactions::run(o).await,
        "metrics" => metrics_overhead::run(o).await,
        "sizes" => {
            sizes().await;
            Ok(())
        }
        "all" => {
            for s in [
                "producer",
                "consumer",
                "broker",
                "large",
                "failover",
                "latency",
                "java",
                "kafka-broker",
                "security",
            ] {
                Box::pin(run(s, o)).await?;
            }
            Ok(())
        }
        other => Err(format!("unknown benchmark {other:?}; try --help")),
    }?;
    eprintln!("{sub}: load average {} at end", loadavg());
    Ok(())
}

fn main() {
    // The broker processes of the security item are this binary.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("serve-broker") {
        if let Err(e) = security::serve(&args[1..]) {
            eprintln!("serve-broker: {e}");
            std::process::exit(1);
        }
        return;
    }
    let (sub, o) = match parse() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    if let Err(e) = rt.block_on(run(&sub, &o)) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
