//! The `baton` consumer's defence against corrupt batches on the wire: a proxy
//! (`baton_broker::faults::proxy`, with a tap) between the client and a real broker
//! flips a byte inside a record value of Fetch responses. The consumer never yields a damaged record: it re-fetches (after a
//! metadata refresh), and a damage that persists becomes a typed error naming the
//! partition and offset. Turning CRC checks off is possible only explicitly.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use baton_broker::faults::proxy::{
    Exchange, Proxy, ProxyOptions, Reply, RequestFrame, Tap, Verdict,
};
use baton_broker::{Broker, BrokerConfig, BrokerHandle};
use baton_kafka::{
    Acks, Admin, Client, Consumer, ConsumerError, Producer, ProducerRecord, StartOffset,
};
use baton_protocol::messages::FetchRequest;
use baton_protocol::Message;
use baton_testkit::cluster::{parse, value};
use baton_testkit::topic_name;
use bytes::Bytes;

/// Records the tests produce.
const RECORDS: u64 = 200;

/// Flips one byte of the first record value in Fetch responses, `flips` times.
struct Flipper {
    flips: AtomicU64,
    done: AtomicU64,
}

impl Tap for Flipper {
    fn request(&self, _: &RequestFrame) -> Verdict {
        Verdict::default()
    }

    fn response(&self, exchange: Exchange, frame: Bytes) -> Reply {
        if exchange.api_key != FetchRequest::API_KEY {
            return Reply::now(frame);
        }
        let Some(at) = first_value(&frame) else {
            return Reply::now(frame);
        };
        let left = self.flips.load(Ordering::SeqCst);
        if left == 0 {
            return Reply::now(frame);
        }
        self.flips.store(left - 1, Ordering::SeqCst);
        self.done.fetch_add(1, Ordering::SeqCst);
        let mut resp = frame.to_vec();
        // A bit of the value's own checksum (after its id).
        resp[at + 8] ^= 0x01;
        Reply::now(resp.into())
    }
}

/// Where the first of the test's values (`value(id)`, `id < RECORDS`) starts in
/// `frame`.
fn first_value(frame: &[u8]) -> Option<usize> {
    (0..frame.len().saturating_sub(12)).find(|&i| {
        let id = u64::from_be_bytes(frame[i..i + 8].try_into().unwrap());
        id < RECORDS && frame[i..].starts_with(&value(id))
    })
}

/// A broker reachable only through the flipping proxy (both live as long as the
/// returned pair), and a client on it.
async fn setup(flips: u64) -> ((BrokerHandle, Proxy), Client, Arc<Flipper>, String) {
    baton_testkit::init_tracing();
    let flipper = Arc::new(Flipper {
        flips: AtomicU64::new(0),
        done: AtomicU64::new(0),
    });
    // The broker advertises the proxy's port, so the proxy starts first and is
    // pointed at the broker once it runs (no client connects before that).
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let proxy = Proxy::start_with(any, any, ProxyOptions::default().tap(flipper.clone()))
        .await
        .expect("proxy starts");
    let addr = proxy.local_addr();
    let mut cfg = BrokerConfig::in_memory();
    cfg.advertised_port = Some(addr.port());
    let broker = Broker::start(cfg).await.expect("broker starts");
    proxy.set_target(broker.local_addr());
    let client = Client::builder([addr.to_string()])
        .client_id("corruption-consumer-tests")
        .build()
        .await
        .expect("client connects");
    let topic = topic_name("wire-corrupt");
    Admin::new(&client)
        .create_topic(topic.clone(), 1, 1)
        .await
        .expect("topic");
    let producer = Producer::builder(&client).acks(Acks::All).build();
    let mut pending = Vec::new();
    for id in 0..RECORDS {
        let r = ProducerRecord::new(topic.clone()).value(value(id));
        pending.push(producer.send(r).await.expect("accepted"));
    }
    for d in pending {
        d.await.expect("acknowledged");
    }
    producer.close().await;
    // Damage starts only now, for the consumer's fetches.
    flipper.flips.store(flips, Ordering::SeqCst);
    ((broker, proxy), client, flipper, topic)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_damage_is_refetched_and_never_yielded() {
    let (_broker, client, flipper, topic) = setup(2).await;
    let mut consumer = Consumer::builder(&client)
        .assign(topic.clone(), 0, StartOffset::Earliest)
        .build()
        .await
        .expect("consumer");
    let mut next = 0i64;
    while next < 200 {
        let r = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
            .await
            .expect("records arrive")
            .expect("no error for a transient damage");
        assert_eq!(r.offset, next, "in order, once");
        assert_eq!(
            r.value.as_deref().and_then(parse),
            Some(next as u64),
            "record {next} intact"
        );
        next += 1;
    }
    assert_eq!(
        flipper.done.load(Ordering::SeqCst),
        2,
        "both damages were met"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_damage_is_a_typed_error_naming_partition_and_offset() {
    let (_broker, client, flipper, topic) = setup(u64::MAX).await;
    let mut consumer = Consumer::builder(&client)
        .assign(topic.clone(), 0, StartOffset::Earliest)
        .max_corrupt_attempts(3)
        .build()
        .await
        .expect("consumer");
    let answer = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
        .await
        .expect("an answer arrives");
    let err = match answer {
        Ok(r) => panic!(
            "a record of a damaged batch was yielded: offset {}",
            r.offset
        ),
        Err(e) => e,
    };
    match &err {
        ConsumerError::CorruptBatch {
            topic: t,
            partition,
            offset,
            attempts,
            ..
        } => {
            assert_eq!((t.as_str(), *partition, *offset), (topic.as_str(), 0, 0));
            assert_eq!(*attempts, 3);
        }
        other => panic!("CorruptBatch expected, got {other}"),
    }
    assert!(flipper.done.load(Ordering::SeqCst) >= 3);
    eprintln!("persistent damage: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crc_checks_are_off_only_when_asked() {
    let (_broker, client, _flipper, topic) = setup(u64::MAX).await;
    let mut consumer = Consumer::builder(&client)
        .assign(topic.clone(), 0, StartOffset::Earliest)
        .check_crcs(false)
        .build()
        .await
        .expect("consumer");
    let r = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
        .await
        .expect("a record arrives")
        .expect("no CRC check, no error");
    assert_eq!(r.offset, 0);
    assert_eq!(
        r.value.as_deref().and_then(parse),
        None,
        "with checks off the damaged value gets through (which is why they are on by default)"
    );
}
