//! The same produce and consume jobs written against each client.
//!
//! Every job moves `n` records of `value_size` bytes (no key, no headers) to or from
//! partition 0 of one topic and returns a [`Sample`] whose CPU time is this
//! process's (all threads: the client's own threads and the Tokio workers).
//!
//! The Baton and librdkafka jobs connect to an [`Endpoint`]: a bootstrap address
//! (plaintext, what a `&str` converts to) or one with `SASL_SSL` settings.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::stream::{FuturesUnordered, StreamExt};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::Message as _;
use rdkafka::producer::{
    BaseRecord, DeliveryResult, Producer as _, ProducerContext, ThreadedProducer,
};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use baton_testkit::security::ClientSecurity;

use crate::measure::{self_cpu, Sample};

/// Where a job connects: a bootstrap address and, over `SASL_SSL`, the login
/// and the CA that verifies the broker.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `host:port` of the broker.
    pub bootstrap: String,
    /// `SASL_SSL` settings; plaintext without.
    pub security: Option<ClientSecurity>,
}

impl From<&str> for Endpoint {
    fn from(bootstrap: &str) -> Endpoint {
        Endpoint {
            bootstrap: bootstrap.to_owned(),
            security: None,
        }
    }
}

impl From<&String> for Endpoint {
    fn from(bootstrap: &String) -> Endpoint {
        Endpoint::from(bootstrap.as_str())
    }
}

impl From<&Endpoint> for Endpoint {
    fn from(at: &Endpoint) -> Endpoint {
        at.clone()
    }
}

impl Endpoint {
    /// A Baton client connected here.
    pub async fn baton(&self) -> Result<baton_kafka::Client, String> {
        let mut builder =
            baton_kafka::Client::builder([self.bootstrap.as_str()]).client_id("bench-baton");
        if let Some(security) = &self.security {
            builder = security.apply(builder);
        }
        builder.build().await.map_err(err("baton client"))
    }

    /// A librdkafka configuration connecting here: `bootstrap.servers`, and over
    /// `SASL_SSL` the mechanism, login and `ssl.ca.location` (host name
    /// verification on, librdkafka's default).
    fn rdkafka(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.bootstrap);
        if let Some(security) = &self.security {
            c.set("security.protocol", "SASL_SSL")
                .set("sasl.mechanisms", security.login.mechanism.name())
                .set("sasl.username", security.login.username)
                .set("sasl.password", security.login.password)
                .set("ssl.ca.location", security.ca.display().to_string())
                .set("ssl.endpoint.identification.algorithm", "https");
        }
        c
    }
}

/// Batching settings shared by every producer.
#[derive(Debug, Clone, Copy)]
pub struct ProduceSettings {
    /// Acknowledgements: 1 or -1 (all).
    pub acks: i16,
    /// Linger before a partial batch is sent.
    pub linger: Duration,
    /// Batch size in bytes.
    pub batch_bytes: usize,
    /// Largest request (and record) in bytes.
    pub max_request: usize,
    /// Bytes the producer may buffer before `send` waits.
    pub buffer_bytes: usize,
}

/// Outstanding deliveries an application keeps before awaiting the oldest.
pub const WINDOW: usize = 200_000;

fn err<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> String {
    move |e| format!("{what}: {e}")
}

// ---------------------------------------------------------------------------
// Baton

/// Produces with Baton (idempotence off, explicit partition 0).
pub async fn baton_produce(
    at: impl Into<Endpoint>,
    topic: &str,
    n: u64,
    value_size: usize,
    s: ProduceSettings,
) -> Result<Sample, String> {
    let client = at.into().baton().await?;
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
        .send(
            baton_kafka::ProducerRecord::new(topic)
                .partition(0)
                .value(Bytes::from_static(b"warm")),
        )
        .await
        .map_err(err("baton send"))?
        .await
        .map_err(err("baton delivery"))?;
    let value = Bytes::from(vec![b'v'; value_size]);
    let topic: String = topic.to_owned();
    let (cpu0, t0) = (self_cpu(), Instant::now());
    let mut window = VecDeque::with_capacity(WINDOW);
    for _ in 0..n {
        let d = producer
            .send(
                baton_kafka::ProducerRecord::new(topic.clone())
                    .partition(0)
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
        bytes: n * value_size as u64,
        secs: t0.elapsed().as_secs_f64(),
        cpu_secs: (self_cpu() - cpu0).as_secs_f64(),
    };
    producer.close().await;
    Ok(sample)
}

/// Consumes `n` records from offset 0 with Baton's assigned consumer.
pub async fn baton_consume(at: impl Into<Endpoint>, topic: &str, n: u64) -> Result<Sample, String> {
    let client = at.into().baton().await?;
    client
        .refresh_metadata()
        .await
        .map_err(err("baton metadata"))?;
    let (cpu0, t0) = (self_cpu(), Instant::now());
    let mut consumer = baton_kafka::Consumer::builder(&client)
        .assign(topic, 0, baton_kafka::StartOffset::Earliest)
        .build()
        .await
        .map_err(err("baton consumer"))?;
    let (mut got, mut bytes) = (0u64, 0u64);
    while got < n {
        let r = consumer.recv().await.map_err(err("baton recv"))?;
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

// ---------------------------------------------------------------------------
// librdkafka

/// Counts librdkafka delivery reports (shared by the producer items).
pub(crate) struct Counting {
    pub(crate) ok: AtomicU64,
    pub(crate) failed: AtomicU64,
}

impl ClientContext for Counting {}

impl ProducerContext for Counting {
    type DeliveryOpaque = ();
    fn delivery(&self, r: &DeliveryResult<'_>, _: ()) {
        match r {
            Ok(_) => self.ok.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.failed.fetch_add(1, Ordering::Relaxed),
        };
    }
}

/// The librdkafka producer configuration used by every job.
pub fn rdkafka_producer_config(at: &Endpoint, s: ProduceSettings) -> ClientConfig {
    let mut c = at.rdkafka();
    c.set("client.id", "bench-librdkafka")
        .set("acks", if s.acks == 1 { "1" } else { "all" })
        .set("enable.idempotence", "false")
        .set("compression.codec", "none")
        .set("linger.ms", s.linger.as_millis().to_string())
        .set("batch.size", s.batch_bytes.to_string())
        .set("message.max.bytes", s.max_request.to_string())
        .set(
            "queue.buffering.max.kbytes",
            (s.buffer_bytes / 1024).to_string(),
        )
        .set("queue.buffering.max.messages", "2000000")
        .set("max.in.flight.requests.per.connection", "5");
    c
}

/// Produces with librdkafka (ThreadedProducer, delivery reports counted in its
/// callback). Blocking: call from a blocking thread.
pub fn rdkafka_produce(
    at: impl Into<Endpoint>,
    topic: &str,
    n: u64,
    value_size: usize,
    s: ProduceSettings,
) -> Result<Sample, String> {
    let ctx = Counting {
        ok: AtomicU64::new(0),
        failed: AtomicU64::new(0),
    };
    let producer: ThreadedProducer<Counting> = rdkafka_producer_config(&at.into(), s)
        .create_with_context(ctx)
        .map_err(err("librdkafka producer"))?;
    // Warm up: metadata and the connection.
    send_blocking(&producer, topic, b"warm")?;
    producer
        .flush(Duration::from_secs(30))
        .map_err(err("librdkafka flush"))?;
    let base_ok = producer.context().ok.load(Ordering::Relaxed);
    let value = vec![b'v'; value_size];
    let (cpu0, t0) = (self_cpu(), Instant::now());
    for _ in 0..n {
        send_blocking(&producer, topic, &value)?;
    }
    producer
        .flush(Duration::from_secs(120))
        .map_err(err("librdkafka flush"))?;
    let sample = Sample {
        records: n,
        bytes: n * value_size as u64,
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

/// Sends one record to partition 0 of `topic`, polling while librdkafka's queue is
/// full. Shared by every librdkafka producer job, whatever its delivery context.
pub fn send_blocking<C: ProducerContext<DeliveryOpaque = ()> + 'static>(
    p: &ThreadedProducer<C>,
    topic: &str,
    value: &[u8],
) -> Result<(), String> {
    let mut record = BaseRecord::<(), [u8]>::to(topic)
        .partition(0)
        .payload(value);
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

/// Consumes `n` records from offset 0 with librdkafka's BaseConsumer (assigned, no
/// group membership). Blocking.
///
/// `tuned` raises librdkafka's prefetch floor (`queued.min.messages=1000000`,
/// `queued.max.messages.kbytes=1048576`): with its defaults (100,000 messages) and
/// 100-byte records, it backs off fetching (`fetch.queue.backoff.ms`, 1 s) and is
/// mostly idle.
pub fn rdkafka_consume(
    at: impl Into<Endpoint>,
    topic: &str,
    n: u64,
    tuned: bool,
) -> Result<Sample, String> {
    let (cpu0, t0) = (self_cpu(), Instant::now());
    let mut config = at.into().rdkafka();
    if tuned {
        config
            .set("queued.min.messages", "1000000")
            .set("queued.max.messages.kbytes", "1048576");
    }
    // Extra settings, `key=value,key=value`, for experiments with librdkafka's
    // prefetching (the tables use its defaults).
    if let Ok(extra) = std::env::var("BENCH_RDKAFKA_CONSUMER") {
        for kv in extra.split(',').filter(|s| !s.is_empty()) {
            if let Some((k, v)) = kv.split_once('=') {
                config.set(k, v);
            }
        }
    }
    let consumer: BaseConsumer = config
        .set("client.id", "bench-librdkafka")
        .set("group.id", "bench-librdkafka")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .set("fetch.wait.max.ms", "500")
        .set("max.partition.fetch.bytes", "1048576")
        .set("fetch.max.bytes", "52428800")
        .create()
        .map_err(err("librdkafka consumer"))?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .map_err(err("librdkafka assign"))?;
    consumer.assign(&tpl).map_err(err("librdkafka assign"))?;
    let (mut got, mut bytes) = (0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs(600);
    while got < n {
        match consumer.poll(Duration::from_millis(500)) {
            Some(Ok(m)) => {
                bytes += m.payload().map_or(0, |v| v.len() as u64);
                got += 1;
            }
            Some(Err(e)) => return Err(format!("librdkafka poll: {e}")),
            None if Instant::now() > deadline => return Err("librdkafka consumer stalled".into()),
            None => {}
        }
    }
    let sample = Sample {
        records: got,
        bytes,
        secs: t0.elapsed().as_secs_f64(),
        cpu_secs: (self_cpu() - cpu0).as_secs_f64(),
    };
    Ok(sample)
}

// ---------------------------------------------------------------------------
// rskafka

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Produces with rskafka's BatchProducer (which always asks for acks=all).
pub async fn rskafka_produce(
    bootstrap: &str,
    topic: &str,
    n: u64,
    value_size: usize,
    s: ProduceSettings,
) -> Result<Sample, String> {
    use rskafka::client::partition::UnknownTopicHandling;
    use rskafka::client::producer::aggregator::RecordAggregator;
    use rskafka::client::producer::BatchProducerBuilder;
    use rskafka::client::ClientBuilder;
    use rskafka::record::Record;

    let client = ClientBuilder::new(vec![bootstrap.to_owned()])
        .max_message_size(s.max_request.max(100 * 1024 * 1024))
        .build()
        .await
        .map_err(err("rskafka client"))?;
    let pc = client
        .partition_client(topic, 0, UnknownTopicHandling::Retry)
        .await
        .map_err(err("rskafka partition client"))?;
    let producer = BatchProducerBuilder::new(Arc::new(pc))
        .with_linger(s.linger)
        .build(RecordAggregator::new(s.batch_bytes));
    let record = |v: Vec<u8>| Record {
        key: None,
        value: Some(v),
        headers: BTreeMap::new(),
        timestamp: rskafka::chrono::DateTime::from_timestamp_millis(now_ms()).unwrap_or_default(),
    };
    producer
        .produce(record(b"warm".to_vec()))
        .await
        .map_err(err("rskafka produce"))?;
    let value = vec![b'v'; value_size];
    // Keep about the same bytes outstanding as the other clients' buffer memory.
    let window = (s.buffer_bytes / (value_size + 30)).clamp(2, WINDOW);
    let (cpu0, t0) = (self_cpu(), Instant::now());
    let mut inflight = FuturesUnordered::new();
    for _ in 0..n {
        inflight.push(producer.produce(record(value.clone())));
        if inflight.len() >= window {
            if let Some(r) = inflight.next().await {
                r.map_err(err("rskafka produce"))?;
            }
        }
    }
    while let Some(r) = inflight.next().await {
        r.map_err(err("rskafka produce"))?;
    }
    Ok(Sample {
        records: n,
        bytes: n * value_size as u64,
        secs: t0.elapsed().as_secs_f64(),
        cpu_secs: (self_cpu() - cpu0).as_secs_f64(),
    })
}

/// Consumes `n` records from offset 0 with rskafka's PartitionClient::fetch_records
/// (1 MiB per fetch, 500 ms max wait).
pub async fn rskafka_consume(bootstrap: &str, topic: &str, n: u64) -> Result<Sample, String> {
    use rskafka::client::partition::UnknownTopicHandling;
    use rskafka::client::ClientBuilder;

    let (cpu0, t0) = (self_cpu(), Instant::now());
    let client = ClientBuilder::new(vec![bootstrap.to_owned()])
        .build()
        .await
        .map_err(err("rskafka client"))?;
    let pc = client
        .partition_client(topic, 0, UnknownTopicHandling::Retry)
        .await
        .map_err(err("rskafka partition client"))?;
    let (mut got, mut bytes, mut offset) = (0u64, 0u64, 0i64);
    while got < n {
        let (records, _hw) = pc
            .fetch_records(offset, 1..1_048_576, 500)
            .await
            .map_err(err("rskafka fetch"))?;
        for r in records {
            bytes += r.record.value.as_ref().map_or(0, |v| v.len() as u64);
            offset = r.offset + 1;
            got += 1;
        }
    }
    Ok(Sample {
        records: got,
        bytes,
        secs: t0.elapsed().as_secs_f64(),
        cpu_secs: (self_cpu() - cpu0).as_secs_f64(),
    })
}
