//! The `connections` item: many idle connections, then many active producers,
//! on one in-memory baton-broker.
//!
//! Each run starts a fresh broker, reads its resident memory, opens `idle`
//! raw TCP connections that each complete one ApiVersions v0 exchange and then
//! stay open and silent, and reads the memory again: the difference per
//! connection is the broker's cost of an idle connection. With those still
//! open, `producers` Baton producers (each its own `Client`, all in this
//! process) each send `per_producer` records of 100 bytes (acks=1) to a topic
//! of 10 partitions, producer `i` to partition `i % 10`. The run records the
//! broker's records/s and CPU per record over the whole, and each producer's
//! own records/s (its records over the time from the common start to its last
//! delivery): the minimum shows whether one was starved.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::clients::Endpoint;
use crate::measure::{self, median, quantile, BrokerProc, Sample};
use crate::Options;

/// Partitions of the topic the active producers write.
const PARTITIONS: i32 = 10;

fn err<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> String {
    move |e| format!("{what}: {e}")
}

/// One run's numbers.
struct Run {
    idle_kib_per_conn: f64,
    broker: Sample,
    per_producer: Vec<f64>,
}

/// Runs the item `o.runs` times, each on a fresh broker.
pub async fn run(o: &Options) -> Result<(), String> {
    let (idle, producers, per) = (o.idle_connections, o.producers, o.per_producer);
    println!(
        "\n## Connections: {idle} idle connections (raw TCP, one ApiVersions v0 each), then {producers} Baton producers (one Client each, one process) sending {per} records of 100 bytes each (acks=1, linger 5 ms) to a topic of {PARTITIONS} partitions while the idle connections stay open"
    );
    let mut runs = Vec::new();
    for run in 0..o.runs {
        let r = one_run(idle, producers, per).await?;
        let mut sorted = r.per_producer.clone();
        sorted.sort_by(f64::total_cmp);
        eprintln!(
            "  run {}: {:.1} KiB per idle connection; broker {:.0} rec/s, {:.3} µs CPU/rec; per producer min {:.0} median {:.0} max {:.0} rec/s; load {}",
            run + 1,
            r.idle_kib_per_conn,
            r.broker.rate(),
            r.broker.cpu_us(),
            quantile(&sorted, 0.0),
            median(sorted.clone()),
            quantile(&sorted, 1.0),
            measure::loadavg()
        );
        runs.push(r);
    }
    let med = |f: &dyn Fn(&Run) -> f64| median(runs.iter().map(f).collect());
    let min_of = |r: &Run| r.per_producer.iter().copied().fold(f64::INFINITY, f64::min);
    let max_of = |r: &Run| r.per_producer.iter().copied().fold(0.0, f64::max);
    println!();
    println!("### Connections (medians of {} runs)", runs.len());
    println!();
    println!("| broker RSS per idle connection (KiB) | broker records/s | broker CPU µs/record | per-producer records/s min | median | max | max ÷ min |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {:.1} | {:.0} | {:.3} | {:.0} | {:.0} | {:.0} | {:.2} |",
        med(&|r| r.idle_kib_per_conn),
        med(&|r| r.broker.rate()),
        med(&|r| r.broker.cpu_us()),
        med(&min_of),
        med(&|r| median(r.per_producer.clone())),
        med(&max_of),
        med(&|r| max_of(r) / min_of(r)),
    );
    Ok(())
}

async fn one_run(idle: usize, producers: usize, per: u64) -> Result<Run, String> {
    let broker = BrokerProc::baton(&measure::baton_broker_bin())?;
    let bootstrap = broker.bootstrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss0 = broker.rss_kib();
    let mut held = Vec::with_capacity(idle);
    for i in 0..idle {
        held.push(api_versions(&bootstrap, i as i32).await?);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss1 = broker.rss_kib();
    let idle_kib_per_conn = rss1.saturating_sub(rss0) as f64 / idle.max(1) as f64;

    let admin_client = Endpoint::from(&bootstrap).baton().await?;
    let topic = "connections";
    baton_kafka::Admin::new(&admin_client)
        .create_topic(topic, PARTITIONS, 1)
        .await
        .map_err(err("create topic"))?;

    // Every producer connects and warms up first, then all start together.
    let start = Arc::new(tokio::sync::Barrier::new(producers + 1));
    let mut tasks = Vec::with_capacity(producers);
    for i in 0..producers {
        let (b, start) = (bootstrap.clone(), start.clone());
        tasks.push(tokio::spawn(async move {
            producer_task(b, topic, (i as i32) % PARTITIONS, per, start).await
        }));
    }
    start.wait().await;
    let (cpu0, t0) = (broker.cpu(), Instant::now());
    let mut per_producer = Vec::with_capacity(producers);
    for t in tasks {
        let done = t.await.map_err(err("producer task"))??;
        per_producer.push(per as f64 / done.duration_since(t0).as_secs_f64());
    }
    let broker_sample = Sample {
        records: per * producers as u64,
        bytes: per * producers as u64 * 100,
        secs: t0.elapsed().as_secs_f64(),
        cpu_secs: (broker.cpu() - cpu0).as_secs_f64(),
    };
    // The idle connections must still be open and answering.
    for (i, s) in held.iter_mut().enumerate().step_by(97) {
        exchange(s, i as i32).await?;
    }
    drop(held);
    Ok(Run {
        idle_kib_per_conn,
        broker: broker_sample,
        per_producer,
    })
}

/// One producer: connect, warm up, wait for the common start, send `per`
/// records to `partition` keeping up to 10,000 deliveries outstanding; returns
/// when its last delivery completed.
async fn producer_task(
    bootstrap: String,
    topic: &'static str,
    partition: i32,
    per: u64,
    start: Arc<tokio::sync::Barrier>,
) -> Result<Instant, String> {
    let client = Endpoint::from(&bootstrap).baton().await;
    // Reach the barrier even on failure, so the others are not held forever.
    let producer = match client {
        Ok(client) => {
            let p = baton_kafka::Producer::builder(&client)
                .acks(baton_kafka::Acks::Leader)
                .linger(Duration::from_millis(5))
                .idempotence(false)
                .build();
            let warm = async {
                p.send(
                    baton_kafka::ProducerRecord::new(topic)
                        .partition(partition)
                        .value(Bytes::from_static(b"warm")),
                )
                .await
                .map_err(err("baton send"))?
                .await
                .map_err(err("baton delivery"))?;
                Ok::<_, String>(())
            };
            warm.await.map(|()| p)
        }
        Err(e) => Err(e),
    };
    start.wait().await;
    let producer = producer?;
    let value = Bytes::from(vec![b'v'; 100]);
    let mut window = VecDeque::new();
    for _ in 0..per {
        let d = producer
            .send(
                baton_kafka::ProducerRecord::new(topic)
                    .partition(partition)
                    .value(value.clone()),
            )
            .await
            .map_err(err("baton send"))?;
        window.push_back(d);
        if window.len() >= 10_000 {
            if let Some(d) = window.pop_front() {
                d.await.map_err(err("baton delivery"))?;
            }
        }
    }
    while let Some(d) = window.pop_front() {
        d.await.map_err(err("baton delivery"))?;
    }
    let done = Instant::now();
    producer.close().await;
    Ok(done)
}

/// A connection that has completed one ApiVersions exchange.
async fn api_versions(bootstrap: &str, correlation: i32) -> Result<TcpStream, String> {
    let mut s = TcpStream::connect(bootstrap)
        .await
        .map_err(err("connect"))?;
    exchange(&mut s, correlation).await?;
    Ok(s)
}

/// Sends ApiVersions v0 (request header v1, client id "idle") and reads the
/// response, checking its correlation id and error code.
async fn exchange(s: &mut TcpStream, correlation: i32) -> Result<(), String> {
    let client_id = b"idle";
    let mut req = Vec::with_capacity(16);
    let body_len = 2 + 2 + 4 + 2 + client_id.len();
    req.extend_from_slice(&(body_len as i32).to_be_bytes());
    req.extend_from_slice(&18i16.to_be_bytes());
    req.extend_from_slice(&0i16.to_be_bytes());
    req.extend_from_slice(&correlation.to_be_bytes());
    req.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
    req.extend_from_slice(client_id);
    s.write_all(&req).await.map_err(err("ApiVersions write"))?;
    let mut size = [0u8; 4];
    s.read_exact(&mut size)
        .await
        .map_err(err("ApiVersions read"))?;
    let size = i32::from_be_bytes(size);
    if !(6..=1 << 20).contains(&size) {
        return Err(format!("ApiVersions: response size {size}"));
    }
    let mut body = vec![0u8; size as usize];
    s.read_exact(&mut body)
        .await
        .map_err(err("ApiVersions read"))?;
    let got = i32::from_be_bytes([body[0], body[1], body[2], body[3]]);
    let code = i16::from_be_bytes([body[4], body[5]]);
    if got != correlation || code != 0 {
        return Err(format!(
            "ApiVersions: correlation {got} (sent {correlation}), error {code}"
        ));
    }
    Ok(())
}
