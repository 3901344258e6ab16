//! Baton's first demo: a bundled broker, a producer that pools its buffers, and a
//! consumer that checks every record.
//!
//! ```text
//! cargo run --release --example quickstart -- [--records N] [--partitions P] [--value-size BYTES] [--seed S]
//! ```
//!
//! It starts `baton-broker` in this process on 127.0.0.1 with its log in a temporary
//! directory, creates a topic, and runs an application like the one in Baton's
//! mission: the producer takes each value from a pool of `BytesMut` buffers and gives
//! the buffer back to the pool only through `Bytes::try_into_mut`, which succeeds
//! only once Baton has released its last reference. A consumer with explicit
//! partition assignment reads everything back and verifies a CRC-32C embedded in each
//! value. The report counts lost, duplicated, reordered and corrupted records.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use baton_broker::{Broker, BrokerConfig};
use baton_kafka::{Acks, Admin, Client, Consumer, Producer, ProducerRecord, StartOffset};
use bytes::{Bytes, BytesMut};

use baton_testkit::args;
use baton_testkit::payload::{fill_payload, parse_payload, History, ProduceOutcome};

const HELP: &str = "\
quickstart: produce and consume through Baton against the bundled broker

USAGE:
    cargo run --release --example quickstart -- [OPTIONS]

OPTIONS:
    --records N        records to produce (default 200000)
    --partitions P     partitions of the demo topic (default 3)
    --value-size B     bytes per value, at least 24 (default 100)
    --seed S           seed naming the topic (default: BATON_SEED or time-based, printed)
    -h, --help         print this help
";

struct Options {
    records: u64,
    partitions: i32,
    value_size: usize,
    seed: u64,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        records: 200_000,
        partitions: 3,
        value_size: 100,
        seed: 0,
    };
    let mut seed = None;
    let mut args = args::Args::new(HELP);
    while let Some(a) = args.next_flag() {
        match a.as_str() {
            "--records" => o.records = args.value("--records")?,
            "--partitions" => o.partitions = args.value("--partitions")?,
            "--value-size" => o.value_size = args.value("--value-size")?,
            "--seed" => seed = Some(args.value("--seed")?),
            other => return Err(args::unknown(other)),
        }
    }
    o.seed = seed.unwrap_or_else(baton_testkit::seed);
    if o.value_size < 24 {
        return Err("--value-size must be at least 24".into());
    }
    if o.partitions < 1 {
        return Err("--partitions must be at least 1".into());
    }
    Ok(o)
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
    let dir = tempfile::tempdir()?;
    let broker = Broker::start(BrokerConfig {
        listen: "127.0.0.1:0".parse()?,
        data_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    })
    .await?;
    println!(
        "baton-broker listening on {} (log in {})",
        broker.bootstrap(),
        dir.path().display()
    );
    println!(
        "seed {} · {} records of {} bytes over {} partitions",
        opts.seed, opts.records, opts.value_size, opts.partitions
    );

    let client = Client::builder([broker.bootstrap()])
        .client_id("quickstart")
        .build()
        .await?;
    let topic = format!("quickstart-{}", opts.seed % 100_000);
    Admin::new(&client)
        .create_topic(&topic, opts.partitions, 1)
        .await?;

    // The consumer starts first, at the earliest offset of every partition.
    let mut builder = Consumer::builder(&client);
    for p in 0..opts.partitions {
        builder = builder.assign(topic.clone(), p, StartOffset::Earliest);
    }
    let mut consumer = builder.build().await?;

    let producer = Producer::builder(&client).acks(Acks::All).build();
    let (done_tx, mut done_rx) = tokio::sync::mpsc::channel(4096);

    // Deliveries come back in a task that returns buffers to the pool.
    let (pool_tx, mut pool_rx) = tokio::sync::mpsc::unbounded_channel::<BytesMut>();
    let reclaimer = tokio::spawn(async move {
        let (mut acked, mut failed, mut reclaimed, mut refused) = (0u64, 0u64, 0u64, 0u64);
        let mut history = History::new();
        while let Some(delivery) = done_rx.recv().await {
            let delivery: baton_kafka::DeliveryFuture = delivery;
            let (record, outcome) = match delivery.await {
                Ok(meta) => {
                    acked += 1;
                    let outcome = ProduceOutcome::Acked {
                        partition: meta.partition,
                        offset: meta.offset,
                    };
                    (Some(meta.into_record()), outcome)
                }
                Err(e) => {
                    failed += 1;
                    eprintln!("delivery failed: {e}");
                    (e.into_record(), ProduceOutcome::Failed)
                }
            };
            // Every value handed back is the application's own payload: its id and
            // checksum go to the history before the buffer returns to the pool.
            let sent = record.as_ref().and_then(|r| r.value.as_deref());
            if let Some((id, sum)) = sent.and_then(parse_payload) {
                history.produced(id, sum, outcome);
            }
            if let Some(value) = record.and_then(|r| r.value) {
                match value.try_into_mut() {
                    Ok(buf) => {
                        reclaimed += 1;
                        let _ = pool_tx.send(buf);
                    }
                    Err(_) => refused += 1,
                }
            }
        }
        (acked, failed, reclaimed, refused, history)
    });

    let started = Instant::now();
    let mut allocated = 0u64;
    for seq in 0..opts.records {
        let mut buf = match pool_rx.try_recv() {
            Ok(b) => b,
            Err(_) => {
                allocated += 1;
                BytesMut::with_capacity(opts.value_size)
            }
        };
        fill_payload(&mut buf, seq, opts.value_size);
        let value: Bytes = buf.freeze();
        let record = ProducerRecord::new(topic.clone())
            .key(Bytes::from(format!("key-{}", seq % 1000)))
            .value(value);
        let delivery = producer.send(record).await?;
        done_tx.send(delivery).await?;
    }
    drop(done_tx);
    producer.flush().await;
    let (acked, failed, reclaimed, refused, mut history) = reclaimer.await?;
    let produce_secs = started.elapsed().as_secs_f64();
    println!(
        "produced {} records in {:.2}s ({:.0} records/s), {} buffers allocated, {} reclaimed through try_into_mut, {} refused",
        opts.records,
        produce_secs,
        opts.records as f64 / produce_secs,
        allocated,
        reclaimed,
        refused
    );

    // Read everything back and check it.
    let mut last_offset: HashMap<i32, i64> = HashMap::new();
    // Offsets a consumer delivered out of order (the history counts records whose
    // ids are out of order within a partition).
    let (mut consumed, mut out_of_order) = (0u64, 0u64);
    let consume_start = Instant::now();
    while consumed < acked {
        let record = match tokio::time::timeout(Duration::from_secs(30), consumer.recv()).await {
            Ok(r) => r?,
            Err(_) => {
                eprintln!("no record for 30s; stopping the read");
                break;
            }
        };
        consumed += 1;
        if let Some(prev) = last_offset.insert(record.partition, record.offset) {
            if record.offset <= prev {
                out_of_order += 1;
            }
        }
        // A value that is no payload names no record produced: corrupted.
        let (id, sum) = record
            .value
            .as_deref()
            .and_then(parse_payload)
            .unwrap_or((u64::MAX, 0));
        history.consumed(record.partition, record.offset, id, sum);
    }
    let consume_secs = consume_start.elapsed().as_secs_f64();
    let report = history.check();
    producer.close().await;
    broker.shutdown().await;

    println!(
        "consumed {consumed} records in {consume_secs:.2}s ({:.0} records/s)",
        consumed as f64 / consume_secs
    );
    println!();
    println!("records produced     {}", opts.records);
    println!("records acknowledged {acked}");
    println!("delivery failures    {failed}");
    println!("records consumed     {consumed}");
    println!("lost                 {}", report.lost);
    println!("duplicated           {}", report.duplicated);
    println!("reordered            {}", report.reordered);
    println!("corrupted            {}", report.corrupted);
    println!("delivered out of order {out_of_order}");
    println!("history              {report}");
    if !report.passed() || out_of_order + failed > 0 {
        eprintln!("history check FAILED (seed {})", opts.seed);
        std::process::exit(1);
    }
    println!("history check passed");
    Ok(())
}
