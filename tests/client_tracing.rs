//! Tracing: the `kafka.request` span of every request (broker, API, version,
//! correlation id, outcome), the opt-in `kafka.record` span of each produced
//! record, W3C `traceparent` headers through the broker, and what a leader
//! failover logs. A capturing `tracing` layer, installed as the test thread's
//! default subscriber, records spans and events; the tests run on a
//! current-thread runtime so that every task of the client (and of the
//! in-process brokers) reports to it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_broker::Cluster;
use baton_kafka::{
    Acks, Admin, Consumer, GroupConsumer, NewTopic, Producer, ProducerRecord, StartOffset,
    TraceContext,
};
use baton_testkit::client::{broker_and_client, create_topic};
use baton_testkit::topic_name;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

const LONG: Duration = Duration::from_secs(60);

/// A span as the layer saw it: its name and fields (values as text).
#[derive(Debug, Clone)]
struct SpanRec {
    name: &'static str,
    fields: BTreeMap<&'static str, String>,
}

impl SpanRec {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

/// An event: its level, fields (`message` included) and the span it happened in.
#[derive(Debug, Clone)]
struct EventRec {
    level: Level,
    fields: BTreeMap<&'static str, String>,
    span: Option<SpanRec>,
}

impl EventRec {
    fn message(&self) -> &str {
        self.fields.get("message").map_or("", String::as_str)
    }
}

#[derive(Debug, Default)]
struct Captured {
    open: HashMap<u64, SpanRec>,
    closed: Vec<SpanRec>,
    events: Vec<EventRec>,
}

impl Captured {
    /// Closed spans named `name`.
    fn spans(&self, name: &str) -> Vec<SpanRec> {
        self.closed
            .iter()
            .filter(|s| s.name == name)
            .cloned()
            .collect()
    }

    /// Closed request spans of `api`.
    fn requests(&self, api: &str) -> Vec<SpanRec> {
        self.spans("kafka.request")
            .into_iter()
            .filter(|s| s.field("api") == Some(api))
            .collect()
    }
}

struct FieldsVisitor<'a>(&'a mut BTreeMap<&'static str, String>);

impl Visit for FieldsVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name(), value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name(), format!("{value:?}"));
    }
}

/// Records spans and events of the `baton_kafka` crate.
struct Capture(Arc<Mutex<Captured>>);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        let mut rec = SpanRec {
            name: attrs.metadata().name(),
            fields: BTreeMap::new(),
        };
        attrs.record(&mut FieldsVisitor(&mut rec.fields));
        self.0.lock().unwrap().open.insert(id.into_u64(), rec);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        if let Some(rec) = self.0.lock().unwrap().open.get_mut(&id.into_u64()) {
            values.record(&mut FieldsVisitor(&mut rec.fields));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut FieldsVisitor(&mut fields));
        let mut c = self.0.lock().unwrap();
        let span = ctx
            .event_span(event)
            .and_then(|s| c.open.get(&s.id().into_u64()).cloned());
        c.events.push(EventRec {
            level: *event.metadata().level(),
            fields,
            span,
        });
    }

    fn on_close(&self, id: Id, _: Context<'_, S>) {
        let mut c = self.0.lock().unwrap();
        if let Some(rec) = c.open.remove(&id.into_u64()) {
            c.closed.push(rec);
        }
    }
}

/// Installs the capturing layer as this thread's subscriber (until the guard
/// drops), for every level of the `baton_kafka` crate's spans and events.
fn capture() -> (Arc<Mutex<Captured>>, tracing::subscriber::DefaultGuard) {
    let captured = Arc::new(Mutex::new(Captured::default()));
    let filter = tracing_subscriber::filter::filter_fn(|m| m.target().starts_with("baton_kafka"));
    let subscriber =
        tracing_subscriber::registry().with(Capture(captured.clone()).with_filter(filter));
    (captured, tracing::subscriber::set_default(subscriber))
}

/// Asserts the fields every request span has, naming `what` on failure.
fn assert_request_span(span: &SpanRec, broker: &str, what: &str) {
    assert_eq!(span.field("broker"), Some(broker), "{what}: {span:?}");
    let node: i32 = span
        .field("node_id")
        .unwrap_or_else(|| panic!("{what}: no node_id: {span:?}"))
        .parse()
        .unwrap();
    assert!(node >= 0, "{what}: {span:?}");
    let corr: i32 = span
        .field("correlation_id")
        .unwrap_or_else(|| panic!("{what}: no correlation_id: {span:?}"))
        .parse()
        .unwrap();
    assert!(corr > 0, "{what}: {span:?}");
    assert!(span.field("api_version").is_some(), "{what}: {span:?}");
}

#[tokio::test(flavor = "current_thread")]
async fn produce_fetch_and_group_requests_have_spans() {
    let (captured, _guard) = capture();
    let (broker, client) = broker_and_client().await;
    let addr = broker.bootstrap();
    let topic = create_topic(&client, "spans", 1).await;

    let producer = Producer::builder(&client).build();
    let meta = producer
        .send(ProducerRecord::new(topic.clone()).value("v"))
        .await
        .unwrap()
        .await
        .unwrap();
    producer.close().await;
    let produce = captured.lock().unwrap().requests("Produce");
    assert!(!produce.is_empty(), "a Produce request span");
    for span in &produce {
        assert_request_span(span, &addr, "Produce");
        assert_eq!(span.field("error"), None, "{span:?}");
    }
    // Bootstrap connections have no node id yet; metadata names the node.
    let metadata = captured.lock().unwrap().requests("Metadata");
    assert!(!metadata.is_empty());

    let mut consumer = Consumer::builder(&client)
        .assign(topic.clone(), 0, StartOffset::Earliest)
        .build()
        .await
        .unwrap();
    let r = tokio::time::timeout(LONG, consumer.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.offset, meta.offset);
    drop(consumer);
    let fetch = captured.lock().unwrap().requests("Fetch");
    assert!(!fetch.is_empty(), "a Fetch request span");
    assert_request_span(&fetch[0], &addr, "Fetch");

    let mut group = GroupConsumer::builder(&client, topic_name("spans-group"))
        .subscribe([topic.clone()])
        .heartbeat_interval(Duration::from_millis(100))
        .max_wait(Duration::from_millis(50))
        .build()
        .await
        .unwrap();
    let r = tokio::time::timeout(LONG, group.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.offset, meta.offset);
    group.close().await.unwrap();
    {
        let c = captured.lock().unwrap();
        for api in ["FindCoordinator", "JoinGroup", "SyncGroup", "LeaveGroup"] {
            let spans = c.requests(api);
            assert!(!spans.is_empty(), "a {api} request span");
            assert_request_span(&spans[spans.len() - 1], &addr, api);
        }
        // The first JoinGroup of a new member is answered MEMBER_ID_REQUIRED
        // (KIP-394): its outcome is on its span.
        let join = c.requests("JoinGroup");
        assert!(
            join.iter()
                .any(|s| s.field("error") == Some("MemberIdRequired (79)")
                    && s.field("error_code") == Some("79")),
            "{join:?}"
        );
    }
    broker.shutdown().await;
}

#[tokio::test(flavor = "current_thread")]
async fn record_spans_appear_only_when_enabled() {
    let (captured, _guard) = capture();
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "record-spans", 2).await;

    let plain = Producer::builder(&client).build();
    for i in 0..3 {
        plain
            .send(
                ProducerRecord::new(topic.clone())
                    .partition(i % 2)
                    .value("x"),
            )
            .await
            .unwrap()
            .await
            .unwrap();
    }
    plain.close().await;
    assert!(captured.lock().unwrap().spans("kafka.record").is_empty());

    let traced = Producer::builder(&client).record_spans(true).build();
    let mut landed = Vec::new();
    for i in 0..4 {
        let meta = traced
            .send(
                ProducerRecord::new(topic.clone())
                    .partition(i % 2)
                    .value("y"),
            )
            .await
            .unwrap()
            .await
            .unwrap();
        landed.push((meta.partition.to_string(), meta.offset.to_string()));
    }
    // A record that fails at `send` ends its span with the error.
    let refused = traced
        .send(ProducerRecord::new(topic.clone()).partition(7))
        .await;
    assert!(refused.is_err());
    traced.close().await;

    let spans = captured.lock().unwrap().spans("kafka.record");
    assert_eq!(spans.len(), 5, "{spans:?}");
    let seen: Vec<(String, String)> = spans[..4]
        .iter()
        .map(|s| {
            assert_eq!(s.field("topic"), Some(topic.as_str()), "{s:?}");
            assert_eq!(s.field("error"), None, "{s:?}");
            (
                s.field("partition").unwrap_or_default().to_string(),
                s.field("offset").unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(seen, landed);
    assert!(spans[4].field("error").is_some(), "{:?}", spans[4]);
    assert_eq!(spans[4].field("offset"), None);
    broker.shutdown().await;
}

#[tokio::test(flavor = "current_thread")]
async fn traceparent_goes_from_producer_to_consumer_through_the_broker() {
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "traceparent", 1).await;
    let seed = baton_testkit::seed();
    let mut rng = baton_testkit::Rng::new(seed);
    let mut ids = || {
        let mut trace = [0u8; 16];
        let mut span = [0u8; 8];
        trace.iter_mut().for_each(|b| *b = rng.next_u64() as u8);
        span.iter_mut().for_each(|b| *b = rng.next_u64() as u8);
        trace[0] |= 1;
        span[0] |= 1;
        (trace, span)
    };
    let (t1, s1) = ids();
    let (t2, s2) = ids();
    let explicit = TraceContext::new(t1, s1, 0x01).unwrap();
    let current = TraceContext::new(t2, s2, 0x00).unwrap();

    // Every record gets the application's current context, unless it has one.
    let producer = Producer::builder(&client)
        .propagate_trace_context(move || Some(current))
        .build();
    let records = [
        ProducerRecord::new(topic.clone()).value("a"),
        ProducerRecord::new(topic.clone())
            .value("b")
            .trace_context(&explicit),
        ProducerRecord::new(topic.clone())
            .value("c")
            .header("traceparent", explicit.to_string()),
    ];
    for r in records {
        producer.send(r).await.unwrap().await.unwrap();
    }
    producer.close().await;
    // Without propagation, nothing is added.
    let plain = Producer::builder(&client).build();
    plain
        .send(ProducerRecord::new(topic.clone()).value("d"))
        .await
        .unwrap()
        .await
        .unwrap();
    plain.close().await;

    let mut consumer = Consumer::builder(&client)
        .assign(topic.clone(), 0, StartOffset::Earliest)
        .build()
        .await
        .unwrap();
    let mut got = Vec::new();
    for _ in 0..4 {
        let r = tokio::time::timeout(LONG, consumer.recv())
            .await
            .unwrap()
            .unwrap();
        let n = r.headers.iter().filter(|h| h.key == "traceparent").count();
        got.push((r.trace_context(), n));
    }
    assert_eq!(
        got,
        [
            (Some(current), 1),
            (Some(explicit), 1),
            (Some(explicit), 1),
            (None, 0)
        ],
        "seed {seed}"
    );
    broker.shutdown().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_leader_failover_logs_the_failed_request_at_debug_and_the_retry_at_info() {
    let (captured, _guard) = capture();
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::builder()
        .brokers(3)
        .data_dir(dir.path())
        .session_timeout(Duration::from_secs(4))
        .start()
        .await
        .expect("cluster starts");
    let client = baton_testkit::cluster::client(&cluster).await;
    let topic = topic_name("failover-logs");
    Admin::new(&client)
        .create_topics([NewTopic::new(topic.clone(), 1, 3)])
        .await
        .expect("topic created");
    let producer = Producer::builder(&client)
        .acks(Acks::All)
        .retry_backoff(Duration::from_millis(20))
        .build();
    producer
        .send(ProducerRecord::new(topic.clone()).value("before"))
        .await
        .unwrap()
        .await
        .unwrap();

    // With the followers held back, an acks=all Produce waits at the leader:
    // it is in flight when the leader dies.
    let old = cluster.partition_state(&topic, 0).unwrap().leader;
    let followers: Vec<i32> = cluster
        .node_ids()
        .into_iter()
        .filter(|id| *id != old)
        .collect();
    for f in &followers {
        cluster.node(*f).pause_replication(true);
    }
    let delivery = producer
        .send(ProducerRecord::new(topic.clone()).value("during"))
        .await
        .unwrap();
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state(&topic, 0).unwrap();
            v.replica(old).unwrap().log_end_offset == 2
        })
        .await
        .expect("the leader appends the record");
    cluster.node(old).kill();
    for f in &followers {
        cluster.node(*f).pause_replication(false);
    }
    let meta = tokio::time::timeout(LONG, delivery)
        .await
        .expect("delivered after the failover")
        .expect("delivered");
    assert_eq!(meta.record().value.as_deref(), Some(&b"during"[..]));
    producer.close().await;

    {
        let c = captured.lock().unwrap();
        let failed: Vec<&EventRec> = c
            .events
            .iter()
            .filter(|e| {
                e.level == Level::DEBUG
                    && e.message() == "request failed"
                    && e.fields.get("api").map(String::as_str) == Some("Produce")
            })
            .collect();
        assert!(!failed.is_empty(), "no failed Produce logged at debug");
        for e in &failed {
            assert!(e.fields.contains_key("error"), "{e:?}");
            let span = e.span.as_ref().expect("logged in the request's span");
            assert_eq!(span.field("api"), Some("Produce"), "{e:?}");
            assert_eq!(
                span.field("node_id"),
                Some(old.to_string().as_str()),
                "{e:?}"
            );
        }
        // The request's span carries the error too.
        assert!(
            c.requests("Produce")
                .iter()
                .any(|s| s.field("node_id") == Some(old.to_string().as_str())
                    && s.field("error").is_some()),
            "no failed Produce span"
        );
        let retried = c
            .events
            .iter()
            .filter(|e| e.level == Level::INFO && e.message() == "retrying batch")
            .collect::<Vec<_>>();
        assert!(!retried.is_empty(), "no retry logged at info");
        assert!(retried.iter().all(|e| e.fields.contains_key("error")));
        assert!(
            c.events.iter().any(|e| e.level == Level::INFO
                && e.message() == "partition leader changed"
                && e.fields.get("from").map(String::as_str)
                    == Some(format!("Some({old})").as_str())),
            "no leader change logged at info"
        );
    }
    cluster.shutdown().await;
}
