//! The cost of Baton's client metrics: the Baton producer and consumer, each run
//! with no metrics recorder and with a Prometheus exporter's recorder
//! (`metrics-exporter-prometheus`, no HTTP listener), alternating in one process
//! against one broker.
//!
//! A global recorder cannot be uninstalled, so the one installed here is a switch
//! in front of the Prometheus recorder: while it is off it hands out the facade's
//! no-op handles, exactly what Baton gets with no recorder at all (Baton registers
//! its handles when a producer or consumer is built, and per broker or partition at
//! first use). That lets the two halves alternate run by run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};

use crate::clients;
use crate::measure::{self, BrokerProc, Table};
use crate::{log_sample, settings, Options, Topics};

/// The Prometheus recorder behind an on/off switch.
struct Switch {
    on: AtomicBool,
    inner: PrometheusRecorder,
}

impl Recorder for Switch {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, text: SharedString) {
        self.inner.describe_counter(key, unit, text)
    }
    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, text: SharedString) {
        self.inner.describe_gauge(key, unit, text)
    }
    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, text: SharedString) {
        self.inner.describe_histogram(key, unit, text)
    }
    fn register_counter(&self, key: &Key, meta: &Metadata<'_>) -> Counter {
        if self.on.load(Ordering::Relaxed) {
            self.inner.register_counter(key, meta)
        } else {
            Counter::noop()
        }
    }
    fn register_gauge(&self, key: &Key, meta: &Metadata<'_>) -> Gauge {
        if self.on.load(Ordering::Relaxed) {
            self.inner.register_gauge(key, meta)
        } else {
            Gauge::noop()
        }
    }
    fn register_histogram(&self, key: &Key, meta: &Metadata<'_>) -> Histogram {
        if self.on.load(Ordering::Relaxed) {
            self.inner.register_histogram(key, meta)
        } else {
            Histogram::noop()
        }
    }
}

/// The installed switch and the exporter's handle (to render what it holds).
fn switch() -> &'static (&'static Switch, PrometheusHandle) {
    static SWITCH: OnceLock<(&'static Switch, PrometheusHandle)> = OnceLock::new();
    SWITCH.get_or_init(|| {
        let inner = PrometheusBuilder::new().build_recorder();
        let handle = inner.handle();
        let switch: &'static Switch = Box::leak(Box::new(Switch {
            on: AtomicBool::new(false),
            inner,
        }));
        metrics::set_global_recorder(switch).expect("the only recorder of this process");
        (switch, handle)
    })
}

/// Which half a run belongs to.
const HALVES: [&str; 2] = ["no recorder", "prometheus recorder"];

pub async fn run(o: &Options) -> Result<(), String> {
    let (sw, handle) = switch();
    let broker = BrokerProc::baton(&measure::baton_broker_bin())?;
    let topics = Topics::new(&broker.bootstrap()).await?;
    let consume_topic = "metrics-consume";
    topics.create(consume_topic).await?;
    let s = clients::baton_produce(
        &broker.bootstrap(),
        consume_topic,
        o.consume_records,
        100,
        settings(1),
    )
    .await?;
    log_sample("pre-produce (not counted)", &s);
    println!(
        "\n## Metrics overhead: Baton, {} records of 100 bytes produced (acks=1) and {} read per run, without and with a recorder",
        o.records, o.consume_records
    );
    // An untimed producer run first: the first run of a process pays for cold memory.
    topics.create("metrics-warmup").await?;
    let s = clients::baton_produce(
        &broker.bootstrap(),
        "metrics-warmup",
        o.records,
        100,
        settings(1),
    )
    .await?;
    log_sample("warm-up (not counted)", &s);
    topics.delete("metrics-warmup").await;

    let (mut produce, mut consume) = (Table::default(), Table::default());
    for run in 0..o.runs {
        // Alternate which half goes first.
        let order = if run % 2 == 0 { [0, 1] } else { [1, 0] };
        for half in order {
            sw.on.store(half == 1, Ordering::Relaxed);
            let topic = format!("metrics-produce-{run}-{half}");
            topics.create(&topic).await?;
            let s =
                clients::baton_produce(&broker.bootstrap(), &topic, o.records, 100, settings(1))
                    .await?;
            log_sample(&format!("produce, {} run {}", HALVES[half], run + 1), &s);
            produce.push(HALVES[half], s);
            topics.delete(&topic).await;
            let s = clients::baton_consume(&broker.bootstrap(), consume_topic, o.consume_records)
                .await?;
            log_sample(&format!("consume, {} run {}", HALVES[half], run + 1), &s);
            consume.push(HALVES[half], s);
        }
    }
    sw.on.store(false, Ordering::Relaxed);
    let rendered = handle.render();
    let series = |name: &str| rendered.lines().filter(|l| l.starts_with(name)).count();
    eprintln!(
        "  the exporter holds {} lines; kafka_producer_record_send_total series: {}, kafka_consumer_records_consumed_total series: {}",
        rendered.lines().count(),
        series("kafka_producer_record_send_total"),
        series("kafka_consumer_records_consumed_total")
    );
    if series("kafka_producer_record_send_total") == 0 {
        return Err("the recorder received no producer metrics".into());
    }
    produce.print("Metrics overhead: producer", HALVES[0], "client");
    consume.print("Metrics overhead: consumer", HALVES[0], "client");
    println!();
    for (what, t) in [("producer", &produce), ("consumer", &consume)] {
        let (off, on) = (t.rate(HALVES[0]), t.rate(HALVES[1]));
        println!(
            "{what}: {off:.0} records/s without a recorder, {on:.0} with; difference {:+.1}%",
            (on - off) / off * 100.0
        );
    }
    Ok(())
}
