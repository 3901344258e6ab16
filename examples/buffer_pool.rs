//! An application that pools its buffers, gives every send a deadline, and rides
//! broker failures without corrupting, losing or duplicating a record.
//!
//! ```text
//! cargo run --example buffer_pool -- [--records N] [--failovers K] [--single-node] [--seed S]
//! ```
//!
//! This is the application from Baton's mission statement. It takes each value's
//! buffer from a pool of `BytesMut`, writes a sequence number and a CRC-32C into it,
//! freezes it into `Bytes`, keeps its own handle on those bytes (as a Go program
//! keeps its slice) and sends the record with a 2 s timeout. A buffer goes back to
//! the pool **only** through `Bytes::try_into_mut`, which succeeds only when no one
//! else (in particular not the producer) holds a reference.
//!
//! When a send times out, the application asks Baton what happened
//! ([`DeliveryFuture::cancel`]):
//! - `NeverSent`: the record is handed back, guaranteed never written; the
//!   application sends it again (an application-level retry that cannot duplicate).
//! - `InFlight`: the outcome is unknown and the producer still holds the buffer.
//!   The application tries to reclaim it anyway, as the Go application did; the
//!   reclaim is *refused* (counted), so the buffer cannot be overwritten under the
//!   producer. It then awaits the final outcome and reclaims the buffer after it.
//!
//! Meanwhile the brokers fail. By default a 3-node in-process [`Cluster`] runs and
//! the leader of the topic's first partition is hard-killed `--failovers` times
//! (each node is restarted a few seconds later). With `--single-node`, the bundled
//! single broker is shut down instead and a new one started on the same port and
//! data directory a few seconds later. Either way, sends stall longer than their
//! 2 s timeout.
//!
//! At the end a consumer reads every partition and checks each value's CRC. The
//! report counts refused reclaims, and lost, duplicated, reordered and corrupted
//! records; the last four must be zero.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_broker::{Broker, BrokerConfig, BrokerHandle, Cluster};
use baton_kafka::{
    Admin, CancelOutcome, Client, Consumer, DeliveryFuture, NewTopic, ProduceError, Producer,
    ProducerRecord, RecordMetadata, StartOffset,
};
use bytes::{Bytes, BytesMut};

use baton_testkit::args;
use baton_testkit::payload::{
    fill_payload, parse_payload, payload, History, ProduceOutcome, HEADER_LEN,
};

const HELP: &str = "\
buffer_pool: pooled buffers, 2 s send timeouts and typed cancellation during failover

USAGE:
    cargo run --example buffer_pool -- [OPTIONS]

OPTIONS:
    --records N      records to produce (default 20000)
    --failovers K    broker failures while producing (default 3)
    --single-node    restart the single bundled broker instead of killing leaders
                     of a 3-node cluster
    --seed S         seed naming the topic (default: BATON_SEED or time-based, printed)
    -h, --help       print this help
";

const VALUE_SIZE: usize = 64;
const PARTITIONS: i32 = 3;
const SEND_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a failed broker stays down: longer than the send timeout.
const DOWN_FOR: Duration = Duration::from_secs(3);

struct Options {
    records: u64,
    failovers: u32,
    single_node: bool,
    seed: u64,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        records: 20_000,
        failovers: 3,
        single_node: false,
        seed: 0,
    };
    let mut seed = None;
    let mut args = args::Args::new(HELP);
    while let Some(a) = args.next_flag() {
        match a.as_str() {
            "--records" => o.records = args.value("--records")?,
            "--failovers" => o.failovers = args.value("--failovers")?,
            "--seed" => seed = Some(args.value("--seed")?),
            "--single-node" => o.single_node = true,
            other => return Err(args::unknown(other)),
        }
    }
    o.seed = seed.unwrap_or_else(baton_testkit::seed);
    Ok(o)
}

/// What the application counts.
#[derive(Debug, Default)]
struct Stats {
    /// Records acknowledged.
    acked: u64,
    /// Every final outcome, for the history check.
    history: History,
    /// Records whose delivery failed for good (outcome unknown or not written).
    failed: u64,
    /// Sends that hit the 2 s timeout.
    timeouts: u64,
    /// Timed-out records Baton handed back as never sent (then sent again).
    never_sent: u64,
    /// Timed-out records that were in flight (awaited to their final outcome).
    in_flight: u64,
    /// Buffers returned to the pool through `try_into_mut`.
    reclaimed: u64,
    /// Reclaims refused because the producer still held the buffer.
    refused: u64,
    /// Buffers newly allocated because the pool was empty.
    allocated: u64,
}

/// The application's state shared by its send tasks.
struct App {
    producer: Producer,
    topic: String,
    pool: Mutex<Vec<BytesMut>>,
    stats: Mutex<Stats>,
}

impl App {
    /// Gives a buffer back to the pool if no one else holds it; counts a refusal
    /// otherwise and returns the bytes.
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

    fn take_buffer(&self) -> BytesMut {
        match self.pool.lock().unwrap().pop() {
            Some(b) => b,
            None => {
                self.stats.lock().unwrap().allocated += 1;
                BytesMut::with_capacity(VALUE_SIZE)
            }
        }
    }

    /// Records a final outcome and drops the producer's copy of the record.
    fn settle(&self, seq: u64, result: Result<RecordMetadata, ProduceError>) {
        let mut st = self.stats.lock().unwrap();
        let (_, sum) = parse_payload(&payload(seq, VALUE_SIZE - HEADER_LEN)).expect("a payload");
        let outcome = match result {
            Ok(meta) => {
                st.acked += 1;
                ProduceOutcome::Acked {
                    partition: meta.partition,
                    offset: meta.offset,
                }
            }
            Err(e) => {
                st.failed += 1;
                eprintln!("record {seq} failed: {e}");
                ProduceOutcome::Unknown
            }
        };
        st.history.produced(seq, sum, outcome);
        // `result` (and the record it hands back) is dropped here.
    }

    /// Sends sequence number `seq` until Baton gives it a final outcome, retrying
    /// at application level only what Baton says was never sent.
    async fn send_one(self: Arc<Self>, seq: u64) {
        let mut buf = self.take_buffer();
        fill_payload(&mut buf, seq, VALUE_SIZE);
        let value = buf.freeze();
        // The application's own handle on its buffer, as a Go program keeps its slice.
        let mut mine = value.clone();
        let mut record = ProducerRecord::new(self.topic.clone())
            .key(Bytes::from(format!("key-{}", seq % 1000)))
            .value(value);
        loop {
            let mut delivery: DeliveryFuture = match self.producer.send(record).await {
                Ok(d) => d,
                Err(e) => {
                    self.settle(seq, Err(e));
                    break;
                }
            };
            let result = match tokio::time::timeout(SEND_TIMEOUT, &mut delivery).await {
                Ok(result) => result,
                Err(_elapsed) => {
                    self.stats.lock().unwrap().timeouts += 1;
                    match delivery.cancel() {
                        CancelOutcome::NeverSent(back) => {
                            // Guaranteed not written: sending it again cannot duplicate.
                            self.stats.lock().unwrap().never_sent += 1;
                            record = back;
                            continue;
                        }
                        CancelOutcome::InFlight(in_flight) => {
                            self.stats.lock().unwrap().in_flight += 1;
                            // A Go-style application would reuse its buffer now. Here the
                            // reclaim is refused: the producer still holds the bytes.
                            match self.reclaim(mine) {
                                Err(still) => mine = still,
                                Ok(()) => {
                                    // Only possible if the outcome became final just now.
                                    self.settle(seq, in_flight.await);
                                    return;
                                }
                            }
                            in_flight.await
                        }
                        CancelOutcome::Delivered(meta) => Ok(meta),
                        CancelOutcome::Failed(e) => Err(e),
                    }
                }
            };
            self.settle(seq, result);
            break;
        }
        // The outcome is final and the record dropped: the buffer is ours alone.
        if self.reclaim(mine).is_err() {
            eprintln!("record {seq}: buffer still shared after its final outcome");
        }
    }
}

/// The brokers the example runs against.
enum Brokers {
    Cluster(Box<Cluster>),
    Single {
        dir: PathBuf,
        addr: SocketAddr,
        handle: Option<BrokerHandle>,
    },
}

impl Brokers {
    fn bootstrap(&self) -> Vec<String> {
        match self {
            Brokers::Cluster(c) => c.bootstrap_servers(),
            Brokers::Single { addr, .. } => vec![addr.to_string()],
        }
    }

    /// One failure: a hard-killed leader (restarted after `DOWN_FOR`), or the
    /// single broker shut down and replaced on the same port.
    async fn fail_once(
        &mut self,
        topic: &str,
        round: u32,
    ) -> Result<(), Box<dyn std::error::Error>> {
        match self {
            Brokers::Cluster(c) => {
                let leader = c
                    .partition_state(topic, 0)
                    .map(|v| v.leader)
                    .filter(|&l| l > 0)
                    .unwrap_or(1);
                println!("failover {round}: hard-killing node {leader}, the leader of {topic}/0");
                c.node(leader).kill();
                tokio::time::sleep(DOWN_FOR).await;
                c.node(leader).restart().await?;
                println!("failover {round}: node {leader} restarted");
            }
            Brokers::Single { dir, addr, handle } => {
                println!("failover {round}: stopping the broker on {addr}");
                if let Some(h) = handle.take() {
                    h.shutdown().await;
                }
                tokio::time::sleep(DOWN_FOR).await;
                *handle = Some(
                    Broker::start(BrokerConfig::on_disk(dir.as_path()).with_listen(*addr)).await?,
                );
                println!("failover {round}: a new broker is up on {addr}");
            }
        }
        Ok(())
    }

    async fn shutdown(self) {
        match self {
            Brokers::Cluster(c) => c.shutdown().await,
            Brokers::Single { handle, .. } => {
                if let Some(h) = handle {
                    h.shutdown().await;
                }
            }
        }
    }
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
    let mut brokers = if opts.single_node {
        let handle = Broker::start(BrokerConfig::on_disk(dir.path())).await?;
        Brokers::Single {
            dir: dir.path().to_path_buf(),
            addr: handle.local_addr(),
            handle: Some(handle),
        }
    } else {
        Brokers::Cluster(Box::new(
            Cluster::builder()
                .brokers(3)
                .data_dir(dir.path())
                .start()
                .await?,
        ))
    };
    println!(
        "{} · seed {} · {} records",
        if opts.single_node {
            "single bundled broker"
        } else {
            "3-node in-process cluster"
        },
        opts.seed,
        opts.records
    );

    let client = Client::builder(brokers.bootstrap())
        .client_id("buffer-pool")
        .request_timeout(Duration::from_secs(5))
        .connect_timeout(Duration::from_secs(1))
        .build()
        .await?;
    let topic = format!("buffer-pool-{}", opts.seed % 100_000);
    let replication = if opts.single_node { 1 } else { 3 };
    let mut new_topic = NewTopic::new(topic.clone(), PARTITIONS, replication);
    if !opts.single_node {
        new_topic = new_topic.config("min.insync.replicas", "2");
    }
    Admin::new(&client).create_topics([new_topic]).await?;

    // Idempotent with acks=all: the defaults.
    let producer = Producer::builder(&client)
        .request_timeout(Duration::from_secs(5))
        .build();
    let app = Arc::new(App {
        producer: producer.clone(),
        topic: topic.clone(),
        pool: Mutex::new(Vec::new()),
        stats: Mutex::new(Stats::default()),
    });

    // Producing runs in its own task, with up to 2,000 sends outstanding, while
    // this task injects failures.
    let producing = tokio::spawn({
        let app = app.clone();
        let records = opts.records;
        async move {
            let limit = Arc::new(tokio::sync::Semaphore::new(2_000));
            let mut tasks = tokio::task::JoinSet::new();
            for seq in 0..records {
                let permit = limit.clone().acquire_owned().await.expect("never closed");
                let app = app.clone();
                tasks.spawn(async move {
                    app.send_one(seq).await;
                    drop(permit);
                });
                // Spread the sends over the failures.
                if seq % 500 == 499 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            while tasks.join_next().await.is_some() {}
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    for round in 1..=opts.failovers {
        if producing.is_finished() {
            break;
        }
        brokers.fail_once(&topic, round).await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    producing.await?;
    producer.close().await;

    // Read everything back and check it.
    let (acked, mut history) = {
        let st = app.stats.lock().unwrap();
        (st.acked, st.history.clone())
    };
    let mut builder = Consumer::builder(&client);
    for p in 0..PARTITIONS {
        builder = builder.assign(topic.clone(), p, StartOffset::Earliest);
    }
    let mut consumer = builder.build().await?;
    let mut last_offset: HashMap<i32, i64> = HashMap::new();
    // Offsets the consumer delivered out of order. (The history's own reorder
    // count, of ids within a partition, does not apply: sends run concurrently,
    // so ids do not reach a partition in order.)
    let (mut consumed, mut out_of_order) = (0u64, 0u64);
    loop {
        // Read until every acknowledged record arrived, then a little longer to see
        // anything extra (a duplicate would show up there).
        let wait = if consumed < acked {
            Duration::from_secs(30)
        } else {
            Duration::from_secs(2)
        };
        let record = match tokio::time::timeout(wait, consumer.recv()).await {
            Ok(r) => r?,
            Err(_) => break,
        };
        consumed += 1;
        if let Some(prev) = last_offset.insert(record.partition, record.offset) {
            if record.offset <= prev {
                out_of_order += 1;
            }
        }
        // A value overwritten by the pool reads as another id or fails its
        // checksum; one that is no payload names no record produced: corrupted.
        let (id, sum) = record
            .value
            .as_deref()
            .and_then(parse_payload)
            .unwrap_or((u64::MAX, 0));
        history.consumed(record.partition, record.offset, id, sum);
    }
    drop(consumer);
    brokers.shutdown().await;

    let st = app.stats.lock().unwrap();
    let report = history.check();
    println!();
    println!("records produced            {}", opts.records);
    println!("records acknowledged        {acked}");
    println!("delivery failures           {}", st.failed);
    println!("send timeouts (2 s)         {}", st.timeouts);
    println!("  never sent, sent again    {}", st.never_sent);
    println!("  in flight, awaited        {}", st.in_flight);
    println!("buffers allocated           {}", st.allocated);
    println!("buffers reclaimed           {}", st.reclaimed);
    println!("reclaims refused (held)     {}", st.refused);
    println!("records consumed            {consumed}");
    println!("lost                        {}", report.lost);
    println!("duplicated                  {}", report.duplicated);
    println!("reordered                   {out_of_order}");
    println!("corrupted                   {}", report.corrupted);
    if report.lost + report.duplicated + report.corrupted + out_of_order > 0 {
        eprintln!("history check FAILED (seed {})", opts.seed);
        std::process::exit(1);
    }
    println!("history check passed");
    Ok(())
}
