//! Consumer memory bounds: a small compressed batch of many tiny records must not
//! make `recv` hold more than the batch's decompressed section plus the configured
//! in-flight byte budget, and a batch that decompresses beyond the configured limit
//! is a typed error naming its partition and offset.
//!
//! A counting global allocator tracks live heap bytes and their peak; the broker
//! runs in the same process, but serving a fetch of a batch of a few kilobytes
//! costs it little next to the bounds checked here.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use baton_broker::BrokerHandle;
use baton_kafka::connection::{Connection, ConnectionConfig};
use baton_kafka::{
    Client, Consumer, ConsumerBuilder, ConsumerError, ConsumerRecord, GroupConsumer, GroupError,
    StartOffset,
};
use baton_protocol::messages::{PartitionProduceData, ProduceRequest, TopicProduceData};
use baton_protocol::record::{Compression, RecordBatch, RecordBatchBuilder};
use baton_testkit::client::{broker_and_client, create_topic};
use bytes::Bytes;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        System.alloc_zeroed(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size >= layout.size() {
            grew(new_size - layout.size());
        } else {
            LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
        }
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Starts a measurement: the peak restarts at the live bytes, which are returned.
fn start_measuring() -> usize {
    let live = LIVE.load(Ordering::Relaxed);
    PEAK.store(live, Ordering::Relaxed);
    live
}

/// Records in the tiny-record batches: with a one-byte value each encodes to at
/// most 10 bytes, so the records section stays under 1 MiB, the protocol crate's
/// ratio allowance.
const RECORDS: usize = 100_000;

/// The value of record `i` of a tiny-record batch.
fn value_of(i: usize) -> [u8; 1] {
    [(i >> 12) as u8]
}

/// One batch of `RECORDS` records with no key, a one-byte value and no header,
/// compressed with `codec`; returns it and its decompressed records section size.
fn tiny_records_batch(codec: Compression) -> (Bytes, usize) {
    let mut b = RecordBatchBuilder::new(1_700_000_000_000).compression(codec);
    for i in 0..RECORDS {
        b.push(1_700_000_000_000, None, Some(&value_of(i)), &[]);
    }
    let batch = b.finish();
    let parsed = RecordBatch::parse(batch.clone()).unwrap();
    let decompressed = parsed.records().unwrap().remaining_bytes();
    (batch, decompressed)
}

/// Appends `batch` to partition 0 of `topic` with a plain Produce; returns its base
/// offset.
async fn produce_raw(broker: &BrokerHandle, topic: &str, batch: Bytes) -> i64 {
    let conn = Connection::connect(&broker.bootstrap(), &ConnectionConfig::default())
        .await
        .unwrap();
    let req = ProduceRequest {
        transactional_id: None,
        acks: 1,
        timeout_ms: 5000,
        topic_data: vec![TopicProduceData {
            name: topic.into(),
            partition_data: vec![PartitionProduceData {
                index: 0,
                records: Some(batch.into()),
            }],
        }],
    };
    let resp = conn.send(&req).await.unwrap();
    let p = &resp.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 0, "produce refused");
    p.base_offset
}

fn consumer(client: &Client, topic: &str) -> ConsumerBuilder {
    Consumer::builder(client)
        .assign(topic, 0, StartOffset::Earliest)
        .max_wait(Duration::from_millis(50))
}

/// Receives every record of one tiny-record batch and returns the peak heap growth
/// while doing so (building the consumer included).
async fn peak_while_receiving(builder: ConsumerBuilder) -> usize {
    let base = start_measuring();
    let mut c = builder.build().await.unwrap();
    for i in 0..RECORDS {
        let r = tokio::time::timeout(Duration::from_secs(30), c.recv())
            .await
            .unwrap_or_else(|_| panic!("stalled after {i} records"))
            .unwrap();
        assert_eq!(r.offset, i as i64, "offsets in order");
        assert_eq!(r.value.as_deref(), Some(&value_of(i)[..]), "value of {i}");
    }
    let peak = PEAK.load(Ordering::Relaxed) - base;
    drop(c);
    peak
}

/// The in-flight byte budget the bounded tests configure.
const BUDGET: usize = 256 * 1024;
/// Heap the rest of the path may take: the fetch request and response buffers, the
/// codec's context, connections, the channel's blocks, the broker's share.
const SLACK: usize = 1024 * 1024;

/// The tests of this file run one at a time: the allocator counts every thread.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn small_batch_stays_bounded(codec: Compression, channel_capacity: usize) {
    let _serial = SERIAL.lock().await;
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, codec.name(), 1).await;
    let (batch, decompressed) = tiny_records_batch(codec);
    assert_eq!(produce_raw(&broker, &topic, batch.clone()).await, 0);
    let builder = consumer(&client, &topic)
        .channel_capacity(channel_capacity)
        .max_buffered_bytes(BUDGET);
    let peak = peak_while_receiving(builder).await;
    // The decompressed section, and while decompressing the codec's window (zstd
    // keeps up to the section's size, see baton_protocol::record::compression).
    let bound = 2 * decompressed + BUDGET + SLACK;
    println!(
        "{codec}: {}-byte batch, {decompressed} bytes decompressed, peak heap growth {peak} bytes (bound {bound})",
        batch.len()
    );
    assert!(
        peak <= bound,
        "{codec}: receiving a {}-byte batch ({decompressed} bytes decompressed) grew the heap by {peak} bytes, over {bound}",
        batch.len()
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn a_small_zstd_batch_of_tiny_records_stays_within_the_budget() {
    // A channel that could hold every record: only the byte budget bounds it.
    small_batch_stays_bounded(Compression::Zstd, 1 << 20).await;
}

#[tokio::test]
async fn a_small_gzip_batch_of_tiny_records_stays_within_the_budget() {
    small_batch_stays_bounded(Compression::Gzip, 1024).await;
}

/// Three plain records at offsets 0-2, then a zstd batch (offset 3) decompressing to
/// about 1 MiB. Returns the records section size of the large batch.
async fn small_then_large(broker: &BrokerHandle, topic: &str) -> usize {
    let mut b = RecordBatchBuilder::new(0);
    for i in 0..3 {
        b.push(0, None, Some(&value_of(i)), &[]);
    }
    assert_eq!(produce_raw(broker, topic, b.finish()).await, 0);
    let (batch, decompressed) = tiny_records_batch(Compression::Zstd);
    assert_eq!(produce_raw(broker, topic, batch).await, 3);
    decompressed
}

const LIMIT: usize = 64 * 1024;

async fn recv(
    c: &mut Consumer,
) -> Result<Result<ConsumerRecord, ConsumerError>, tokio::time::error::Elapsed> {
    tokio::time::timeout(Duration::from_secs(30), c.recv()).await
}

#[tokio::test]
async fn a_batch_over_the_decompression_limit_is_a_typed_error() {
    let _serial = SERIAL.lock().await;
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "too-large", 1).await;
    let decompressed = small_then_large(&broker, &topic).await;
    assert!(decompressed > LIMIT);
    // Were it treated as corruption, a thousand attempts would stall the test.
    let mut c = consumer(&client, &topic)
        .max_decompressed_bytes(LIMIT)
        .max_corrupt_attempts(1000)
        .build()
        .await
        .unwrap();
    for i in 0..3 {
        assert_eq!(recv(&mut c).await.unwrap().unwrap().offset, i);
    }
    match recv(&mut c).await.expect("the error comes at once") {
        Err(ConsumerError::BatchTooLarge {
            topic: t,
            partition,
            offset,
            limit,
        }) => {
            assert_eq!((t.as_str(), partition, offset), (topic.as_str(), 0, 3));
            assert_eq!(limit, LIMIT);
        }
        other => panic!("expected BatchTooLarge, got {other:?}"),
    }
    // The partition stopped: with nothing else assigned, the consumer is closed.
    assert!(matches!(
        recv(&mut c).await.unwrap(),
        Err(ConsumerError::Closed)
    ));
    broker.shutdown().await;
}

#[tokio::test]
async fn the_group_consumer_reports_a_batch_over_the_limit() {
    let _serial = SERIAL.lock().await;
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "too-large-group", 1).await;
    small_then_large(&broker, &topic).await;
    let mut c = GroupConsumer::builder(&client, format!("{topic}-g"))
        .subscribe([topic.clone()])
        .heartbeat_interval(Duration::from_millis(100))
        .session_timeout(Duration::from_secs(3))
        .max_wait(Duration::from_millis(50))
        .max_decompressed_bytes(LIMIT)
        .build()
        .await
        .unwrap();
    for i in 0..3 {
        let r = tokio::time::timeout(Duration::from_secs(30), c.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(r.offset, i);
    }
    match tokio::time::timeout(Duration::from_secs(30), c.recv()).await {
        Ok(Err(GroupError::Consumer(ConsumerError::BatchTooLarge {
            partition, offset, ..
        }))) => assert_eq!((partition, offset), (0, 3)),
        other => panic!("expected BatchTooLarge, got {other:?}"),
    }
    broker.shutdown().await;
}

/// Twenty uncompressed records of 2 KiB each, record `i` filled with byte `i`.
async fn large_records(broker: &BrokerHandle, topic: &str) {
    let mut b = RecordBatchBuilder::new(0);
    for i in 0..20u8 {
        b.push(0, None, Some(&[i; 2048]), &[]);
    }
    assert_eq!(produce_raw(broker, topic, b.finish()).await, 0);
}

fn assert_large(r: &ConsumerRecord, i: i64) {
    assert_eq!(r.offset, i);
    assert_eq!(r.value.as_deref(), Some(&[i as u8; 2048][..]));
}

#[tokio::test]
async fn records_larger_than_the_budget_pass_one_at_a_time() {
    let _serial = SERIAL.lock().await;
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "over-budget", 1).await;
    large_records(&broker, &topic).await;
    // Each record alone exceeds the budget: it can only be sent once the one
    // before it has been handed out and its charge released.
    let mut c = consumer(&client, &topic)
        .max_buffered_bytes(1024)
        .build()
        .await
        .unwrap();
    for i in 0..20 {
        let r = recv(&mut c).await.expect("no stall").unwrap();
        assert_large(&r, i);
    }
    broker.shutdown().await;
}

#[tokio::test]
async fn the_group_consumer_releases_the_budget_of_stale_records() {
    let _serial = SERIAL.lock().await;
    let (broker, client) = broker_and_client().await;
    let topic = create_topic(&client, "over-budget-group", 1).await;
    large_records(&broker, &topic).await;
    let mut c = GroupConsumer::builder(&client, format!("{topic}-g"))
        .subscribe([topic.clone()])
        .heartbeat_interval(Duration::from_millis(100))
        .session_timeout(Duration::from_secs(3))
        .max_wait(Duration::from_millis(50))
        .max_buffered_bytes(1024)
        .build()
        .await
        .unwrap();
    let tp = baton_kafka::TopicPartition {
        topic: topic.as_str().into(),
        partition: 0,
    };
    // Seeking back makes whatever was fetched stale; it is dropped, and its share
    // of the budget must come back for fetching to go on.
    for _ in 0..3 {
        for i in 0..5 {
            let r = tokio::time::timeout(Duration::from_secs(30), c.recv())
                .await
                .expect("no stall")
                .unwrap();
            assert_large(&r, i);
        }
        c.seek(&tp, 0).unwrap();
    }
    for i in 0..20 {
        let r = tokio::time::timeout(Duration::from_secs(30), c.recv())
            .await
            .expect("no stall")
            .unwrap();
        assert_large(&r, i);
    }
    broker.shutdown().await;
}
