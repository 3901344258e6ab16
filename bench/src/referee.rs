//! Apache Kafka as the referee (issue 14, section 7): Baton's producer and
//! consumer against the Java client on an Apache Kafka node (`java`), and
//! baton-broker against Apache Kafka's broker under the same load (`kafka-broker`).

use std::time::Duration;

use crate::java::{self, JavaClient};
use crate::measure::{self, BrokerProc, Sample, Table};
use crate::{broker_runs, clients, kafka, log_sample, settings, Options, Topics};

/// The clients of the `java` item, in their first run's order.
const PRODUCERS: [&str; 3] = ["baton", "java", "ProducerPerformance"];
const CONSUMERS: [&str; 3] = ["baton", "java", "ConsumerPerformance"];

fn acks_name(acks: i16) -> &'static str {
    if acks == 1 {
        "1"
    } else {
        "all"
    }
}

/// Creates `topic` (1 partition) and gives the new leader a moment.
async fn create(topics: &Topics, topic: &str) -> Result<(), String> {
    topics.create(topic).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    Ok(())
}

/// Blocking work (the Java processes) on this worker thread.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

struct Peers {
    node: BrokerProc,
    java: JavaClient,
    libs: std::path::PathBuf,
    dir: std::path::PathBuf,
}

impl Peers {
    async fn produce(&mut self, c: &str, topic: &str, n: u64, acks: i16) -> Result<Sample, String> {
        let (b, s) = (self.node.bootstrap(), settings(acks));
        match c {
            "baton" => clients::baton_produce(&b, topic, n, 100, s).await,
            "java" => blocking(|| self.java.produce(topic, n, 100, s)),
            _ => blocking(|| java::producer_performance(&self.libs, &self.dir, &b, topic, n, s)),
        }
    }

    async fn consume(
        &mut self,
        c: &str,
        topic: &str,
        n: u64,
        run: usize,
    ) -> Result<Sample, String> {
        let b = self.node.bootstrap();
        match c {
            "baton" => clients::baton_consume(&b, topic, n).await,
            "java" => blocking(|| self.java.consume(topic, n)),
            _ => blocking(|| {
                let group = format!("bench-consumer-performance-{run}");
                java::consumer_performance(&self.libs, &self.dir, &b, topic, n, &group)
            }),
        }
    }
}

/// `baton-bench java`: Baton against the Java client, both on one Apache Kafka node.
pub async fn clients(o: &Options) -> Result<(), String> {
    let libs = kafka::libs()?;
    let node = kafka::start_node(&libs).await?;
    let dir = kafka::scratch("java");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let java = JavaClient::start(&libs, &dir, &node.bootstrap())?;
    let topics = Topics::new(&node.bootstrap()).await?;
    let mut p = Peers {
        node,
        java,
        libs,
        dir: dir.clone(),
    };
    let result = clients_on(o, &mut p, &topics).await;
    eprintln!("  Apache Kafka RSS {} MiB", p.node.rss_mib());
    drop(p);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn clients_on(o: &Options, p: &mut Peers, topics: &Topics) -> Result<(), String> {
    println!(
        "\n## Baton vs the Java client {v} on Apache Kafka {v} (1 node, log dir on tmpfs): {} records of 100 bytes per producer run, 1 partition, linger 5 ms, batch 1 MiB, 32 MiB buffer, no compression, idempotence off",
        o.records,
        v = kafka::version()
    );
    // One untimed run of each warm client per acks setting (ProducerPerformance
    // starts a fresh JVM every run, so it has nothing to warm).
    for acks in [1i16, -1] {
        for c in &PRODUCERS[..2] {
            let topic = format!("java-warmup-{}-{c}", acks_name(acks));
            create(topics, &topic).await?;
            let s = p.produce(c, &topic, o.records, acks).await?;
            log_sample(&format!("acks={acks} {c} warm-up (not counted)"), &s);
            topics.delete(&topic).await;
        }
    }
    for acks in [1i16, -1] {
        let mut table = Table::default();
        for run in 0..o.runs {
            let mut order = PRODUCERS.to_vec();
            order.rotate_left(run % PRODUCERS.len());
            for c in order {
                let topic = format!("java-produce-{}-{c}-{run}", acks_name(acks));
                create(topics, &topic).await?;
                let s = p.produce(c, &topic, o.records, acks).await?;
                log_sample(&format!("acks={acks} {c} run {}", run + 1), &s);
                table.push(c, s);
                topics.delete(&topic).await;
            }
        }
        table.print(
            &format!("Producer vs the Java client, acks={}", acks_name(acks)),
            "baton",
            "client",
        );
    }
    let topic = "java-consume";
    create(topics, topic).await?;
    let n = o.consume_records;
    let s = clients::baton_produce(&p.node.bootstrap(), topic, n, 100, settings(1)).await?;
    log_sample("pre-produce (baton, acks=1)", &s);
    println!("\n## Consumer vs the Java client: {n} records of 100 bytes read from offset 0 of 1 partition per run");
    // One untimed read by each warm client (the harness JVM's JIT has not seen
    // the consumer yet; ConsumerPerformance starts a fresh JVM every run).
    for c in &CONSUMERS[..2] {
        let s = p.consume(c, topic, n, 0).await?;
        log_sample(&format!("consume {c} warm-up (not counted)"), &s);
    }
    let mut table = Table::default();
    for run in 0..o.runs {
        let mut order = CONSUMERS.to_vec();
        order.rotate_left(run % CONSUMERS.len());
        for c in order {
            let s = p.consume(c, topic, n, run).await?;
            log_sample(&format!("consume {c} run {}", run + 1), &s);
            table.push(c, s);
        }
    }
    table.print("Consumer vs the Java client", "baton", "client");
    Ok(())
}

/// `baton-bench kafka-broker`: baton-broker (in memory, and on disk in the same
/// tmpfs) against Apache Kafka's broker (log dir on tmpfs), librdkafka load.
pub async fn brokers(o: &Options) -> Result<(), String> {
    let libs = kafka::libs()?;
    let bin = measure::baton_broker_bin();
    let brokers = vec![
        BrokerProc::baton(&bin)?,
        BrokerProc::baton_on_disk(&bin, kafka::scratch("baton-broker"))?,
        kafka::start_node(&libs).await?,
    ];
    println!(
        "\n## baton-broker vs Apache Kafka {} (1 node each, data on tmpfs or in memory): librdkafka produces {} records of 100 bytes (acks=1, linger 5 ms, batch 1 MiB) then reads them back, per run; broker CPU from /proc/<pid>/stat",
        kafka::version(),
        o.broker_records
    );
    let (prod, fetch) = broker_runs(o, &brokers, true).await?;
    prod.print(
        "Broker vs Apache Kafka: produce (librdkafka load)",
        "baton-broker",
        "broker",
    );
    fetch.print(
        "Broker vs Apache Kafka: fetch (librdkafka load)",
        "baton-broker",
        "broker",
    );
    Ok(())
}
