//! The `baton` consumer's defence against corrupt batches on the wire: a proxy
//! between the client and a real broker flips a byte inside a record value of Fetch
//! responses. The consumer never yields a damaged record: it re-fetches (after a
//! metadata refresh), and a damage that persists becomes a typed error naming the
//! partition and offset. Turning CRC checks off is possible only explicitly.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton::{Acks, Admin, Client, Consumer, ConsumerError, Producer, ProducerRecord, StartOffset};
use baton_broker::{Broker, BrokerConfig, BrokerHandle};
use baton_testkit::cluster::{parse, value};
use baton_testkit::topic_name;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const FETCH: i16 = 1;
/// Records the tests produce.
const RECORDS: u64 = 200;

/// Flips one byte of the first record value in Fetch responses, `flips` times.
struct Flipper {
    flips: AtomicU64,
    done: AtomicU64,
}

async fn read_frame(r: &mut (impl AsyncReadExt + Unpin)) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len).await.ok()?;
    let n = i32::from_be_bytes(len);
    if !(0..=64 << 20).contains(&n) {
        return None;
    }
    let mut body = vec![0u8; n as usize];
    r.read_exact(&mut body).await.ok()?;
    Some(body)
}

async fn write_frame(w: &mut (impl AsyncWriteExt + Unpin), body: &[u8]) -> bool {
    w.write_all(&(body.len() as i32).to_be_bytes())
        .await
        .is_ok()
        && w.write_all(body).await.is_ok()
}

/// Starts the proxy; returns its address. `target` is filled in once the broker runs.
async fn proxy(flipper: Arc<Flipper>, target: Arc<Mutex<Option<SocketAddr>>>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let to = target.lock().unwrap().expect("broker started");
            let Ok(server) = TcpStream::connect(to).await else {
                continue;
            };
            let fetches: Arc<Mutex<HashSet<i32>>> = Arc::default();
            let (mut cr, mut cw) = client.into_split();
            let (mut sr, mut sw) = server.into_split();
            let f = fetches.clone();
            tokio::spawn(async move {
                while let Some(req) = read_frame(&mut cr).await {
                    if req.len() >= 8 && i16::from_be_bytes([req[0], req[1]]) == FETCH {
                        f.lock()
                            .unwrap()
                            .insert(i32::from_be_bytes([req[4], req[5], req[6], req[7]]));
                    }
                    if !write_frame(&mut sw, &req).await {
                        return;
                    }
                }
            });
            let fl = flipper.clone();
            tokio::spawn(async move {
                while let Some(mut resp) = read_frame(&mut sr).await {
                    let corr = resp
                        .get(..4)
                        .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                    let is_fetch = corr.is_some_and(|c| fetches.lock().unwrap().remove(&c));
                    if is_fetch {
                        if let Some(at) = first_value(&resp) {
                            let left = fl.flips.load(Ordering::SeqCst);
                            if left > 0 {
                                fl.flips.store(left - 1, Ordering::SeqCst);
                                fl.done.fetch_add(1, Ordering::SeqCst);
                                // A bit of the value's own checksum (after its id).
                                resp[at + 8] ^= 0x01;
                            }
                        }
                    }
                    if !write_frame(&mut cw, &resp).await {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// Where the first of the test's values (`value(id)`, `id < RECORDS`) starts in
/// `frame`.
fn first_value(frame: &[u8]) -> Option<usize> {
    (0..frame.len().saturating_sub(12)).find(|&i| {
        let id = u64::from_be_bytes(frame[i..i + 8].try_into().unwrap());
        id < RECORDS && frame[i..].starts_with(&value(id))
    })
}

/// A broker reachable only through the flipping proxy, and a client on it.
async fn setup(flips: u64) -> (BrokerHandle, Client, Arc<Flipper>, String) {
    baton_testkit::init_tracing();
    let flipper = Arc::new(Flipper {
        flips: AtomicU64::new(0),
        done: AtomicU64::new(0),
    });
    let target = Arc::new(Mutex::new(None));
    let addr = proxy(flipper.clone(), target.clone()).await;
    let mut cfg = BrokerConfig::in_memory();
    cfg.advertised_port = Some(addr.port());
    let broker = Broker::start(cfg).await.expect("broker starts");
    *target.lock().unwrap() = Some(broker.local_addr());
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
    (broker, client, flipper, topic)
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
