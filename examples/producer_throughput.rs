//! Producer throughput against an in-process baton-broker: records of 100 bytes
//! to one partition, acks=1, idempotence off, linger 5 ms, batch 1 MiB (the
//! settings of `baton-bench producer`), up to 200,000 delivery futures
//! outstanding. No `tracing` subscriber is installed, so the figure includes what
//! the SDK's spans and events cost when nobody listens.
//!
//! ```text
//! cargo run --release --example producer_throughput -- [--records 1000000] [--runs 5]
//! ```
//!
//! One untimed warm-up run, then `--runs` timed runs, each on a fresh topic
//! (deleted after); prints each run's records/s and the median.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use baton_broker::{Broker, BrokerConfig};
use baton_kafka::{Acks, Admin, Client, Producer, ProducerRecord};
use bytes::Bytes;

/// Delivery futures kept outstanding before the oldest is awaited.
const WINDOW: usize = 200_000;

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} takes a number, got {v}"))
        })
        .unwrap_or(default)
}

/// Sends `records` records to partition 0 of `topic`; records/s.
async fn run(
    client: &Client,
    topic: &str,
    records: u64,
) -> Result<f64, Box<dyn std::error::Error>> {
    let producer = Producer::builder(client)
        .acks(Acks::Leader)
        .idempotence(false)
        .linger(Duration::from_millis(5))
        .batch_size(1 << 20)
        .max_request_size(1 << 21)
        .build();
    producer
        .send(ProducerRecord::new(topic).partition(0).value("warm"))
        .await?
        .await?;
    let value = Bytes::from(vec![b'v'; 100]);
    let topic = topic.to_string();
    let started = Instant::now();
    let mut window = VecDeque::with_capacity(WINDOW);
    for _ in 0..records {
        let delivery = producer
            .send(
                ProducerRecord::new(topic.clone())
                    .partition(0)
                    .value(value.clone()),
            )
            .await?;
        window.push_back(delivery);
        if window.len() >= WINDOW {
            if let Some(oldest) = window.pop_front() {
                oldest.await?;
            }
        }
    }
    for delivery in window {
        delivery.await?;
    }
    let secs = started.elapsed().as_secs_f64();
    producer.close().await;
    Ok(records as f64 / secs)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let records = arg(&args, "--records", 1_000_000).max(1);
    let runs = arg(&args, "--runs", 5).max(1);
    if cfg!(debug_assertions) {
        eprintln!("warning: a debug build; run with --release for meaningful figures");
    }
    let broker = Broker::start(BrokerConfig::in_memory()).await?;
    let client = Client::builder([broker.bootstrap()]).build().await?;
    let admin = Admin::new(&client);
    let mut rates = Vec::new();
    for i in 0..=runs {
        let topic = format!("throughput-{i}");
        admin.create_topic(topic.clone(), 1, 1).await?;
        let rate = run(&client, &topic, records).await?;
        admin.delete_topics([topic]).await?;
        if i == 0 {
            println!("warm-up: {rate:.0} records/s (not counted)");
        } else {
            println!("run {i}: {rate:.0} records/s");
            rates.push(rate);
        }
    }
    rates.sort_by(f64::total_cmp);
    println!(
        "median of {runs}: {:.0} records/s ({records} records of 100 bytes per run)",
        rates[rates.len() / 2]
    );
    broker.shutdown().await;
    Ok(())
}
