//! Producer compression against the in-process broker: every codec round-trips
//! byte-identical through producer, broker and consumer, every batch on the wire
//! carries the codec, and a retry after a lost response resends the very bytes of
//! the first attempt.
//!
//! The client reaches the broker through `baton_testkit::proxy`, which logs each
//! Produce request's batches and can drop a response after the broker wrote the
//! batch.

use std::collections::BTreeMap;
use std::time::Duration;

use baton_kafka::{Compression, Producer, ProducerConfigError, ProducerRecord, RecordHeader};
use baton_protocol::record::RecordBatch;
use baton_testkit::client::{consume_from_start, create_topic};
use baton_testkit::proxy::{Proxied, ProxyState};
use baton_testkit::{seed, Rng, RngExt};
use bytes::Bytes;

/// Values that compress like real payloads: JSON-ish text, random bytes, empty and
/// null values.
fn random_value(rng: &mut Rng) -> Option<Bytes> {
    match rng.below(20) {
        0 => None,
        1 => Some(Bytes::new()),
        2..=4 => Some(Bytes::from(rng.bytes_up_to(300))),
        _ => {
            let level = ["DEBUG", "INFO", "WARN", "ERROR"][rng.below(4) as usize];
            let text = format!(
                r#"{{"ts":{},"level":"{level}","service":"svc-{}","msg":"request {} took {} ms","user":{}}}"#,
                1_700_000_000_000u64 + rng.below(1_000_000),
                rng.below(8),
                rng.below(100_000),
                rng.below(5_000),
                rng.below(1_000),
            );
            Some(Bytes::from(text))
        }
    }
}

fn random_record(rng: &mut Rng, topic: &str, i: usize) -> ProducerRecord {
    let mut r = ProducerRecord::new(topic).timestamp(1_700_000_000_000 + i as i64);
    if rng.below(8) != 0 {
        r.key = Some(Bytes::from(format!("user-{}", rng.below(500))));
    }
    r.value = random_value(rng);
    for h in 0..rng.below(3) {
        let value = match rng.below(4) {
            0 => None,
            _ => Some(Bytes::from(rng.bytes_up_to(12))),
        };
        r.headers.push(RecordHeader::new(format!("h{h}"), value));
    }
    r
}

const RECORDS_PER_CODEC: usize = 3_000;
const PARTITIONS: i32 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_codec_round_trips_byte_identical() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    let setup = Proxied::start("baton-compression-tests", ProxyState::default()).await;
    for codec in Compression::ALL {
        assert!(codec.is_supported(), "{codec} is a default feature");
        let topic = create_topic(&setup.client, &format!("codec-{codec}"), PARTITIONS).await;
        let before = setup.batches().len();
        let producer = Producer::builder(&setup.client)
            .compression(codec)
            .batch_size(16 * 1024)
            .try_build()
            .expect("valid settings");
        let mut deliveries = Vec::with_capacity(RECORDS_PER_CODEC);
        for i in 0..RECORDS_PER_CODEC {
            let record = random_record(&mut rng, &topic, i);
            deliveries.push(producer.send(record).await.expect("accepted"));
        }
        producer.flush().await;
        let mut sent: BTreeMap<(i32, i64), ProducerRecord> = BTreeMap::new();
        for d in deliveries {
            let meta = d
                .await
                .unwrap_or_else(|e| panic!("seed {seed} {codec}: delivery failed: {e}"));
            sent.insert((meta.partition, meta.offset), meta.into_record());
        }
        producer.close().await;
        assert_eq!(sent.len(), RECORDS_PER_CODEC, "seed {seed} {codec}");

        // Every batch on the wire carries the codec, passes its CRC and decompresses
        // to records that were sent.
        let batches = &setup.batches()[before..];
        assert!(
            batches.len() > PARTITIONS as usize,
            "{codec}: several batches"
        );
        let mut on_wire = 0;
        let mut raw = 0usize;
        let mut compressed = 0usize;
        for b in batches {
            let batch = RecordBatch::parse(b.bytes.clone()).expect("a well-formed batch");
            assert_eq!(batch.compression(), codec, "seed {seed}");
            batch.verify_crc().expect("CRC");
            let mut n = 0;
            for r in batch.records().expect("decompresses") {
                let r = r.expect("record decodes");
                raw += r.value.as_ref().map_or(0, |v| v.len());
                n += 1;
            }
            assert_eq!(n, batch.record_count());
            on_wire += n as usize;
            compressed += batch.len();
        }
        assert_eq!(on_wire, RECORDS_PER_CODEC, "no retries expected here");
        eprintln!(
            "{codec}: {} batches, {compressed} bytes on the wire for {raw} bytes of values",
            batches.len()
        );
        if codec != Compression::None {
            assert!(compressed < raw, "{codec} compresses the JSON-like values");
        }

        let got =
            consume_from_start(&setup.client, &topic, PARTITIONS, RECORDS_PER_CODEC, seed).await;
        for r in got {
            let want = sent
                .get(&(r.partition, r.offset))
                .unwrap_or_else(|| panic!("seed {seed} {codec}: unknown record"));
            let at = format!("seed {seed} {codec} at {}/{}", r.partition, r.offset);
            assert_eq!(r.key, want.key, "{at}: key");
            assert_eq!(r.value, want.value, "{at}: value");
            assert_eq!(r.headers, want.headers, "{at}: headers");
            assert_eq!(Some(r.timestamp), want.timestamp, "{at}: timestamp");
        }
    }
    setup.shutdown().await;
}

/// The response to the first Produce request is lost after the broker wrote the
/// batch. The producer retries, and the retry carries exactly the bytes of the
/// first attempt (same compressed payload, same CRC). Without idempotence the
/// broker keeps both copies, and both read back identical to what was sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_a_lost_response_resends_identical_bytes() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    let setup = Proxied::start("baton-compression-tests", ProxyState::losing(vec![0])).await;
    let topic = create_topic(&setup.client, "retry-bytes", 1).await;
    // Creating the topic sent no Produce; the first Produce is request 0.
    let producer = Producer::builder(&setup.client)
        .idempotence(false)
        .max_in_flight(1)
        .compression(Compression::Zstd)
        .compression_level(5)
        .linger(Duration::from_millis(50))
        .retry_backoff(Duration::from_millis(20))
        .try_build()
        .unwrap();
    let records: Vec<ProducerRecord> = (0..200)
        .map(|i| random_record(&mut rng, &topic, i).partition(0))
        .collect();
    let mut deliveries = Vec::new();
    for r in &records {
        deliveries.push(producer.send(r.clone()).await.unwrap());
    }
    for (i, d) in deliveries.into_iter().enumerate() {
        let meta = d
            .await
            .unwrap_or_else(|e| panic!("seed {seed}: record {i}: {e}"));
        assert_eq!(
            meta.record(),
            &records[i],
            "the record comes back untouched"
        );
    }
    producer.close().await;

    let batches = setup.batches();
    assert!(batches.len() >= 2, "seed {seed}: {batches:?}");
    let (lost, retry) = (&batches[0], &batches[1]);
    assert_eq!(lost.request, 0);
    assert!(retry.request > 0, "the retry is a new request");
    assert_eq!(lost.partition, retry.partition);
    assert_eq!(
        lost.bytes, retry.bytes,
        "seed {seed}: the retry must resend the first attempt's bytes"
    );
    let first = RecordBatch::parse(lost.bytes.clone()).unwrap();
    assert_eq!(first.compression(), Compression::Zstd);
    let dup = first.record_count() as usize;

    // The log holds the first batch twice, then the rest: all byte-identical.
    let expected: Vec<&ProducerRecord> = records[..dup].iter().chain(records.iter()).collect();
    let got = consume_from_start(&setup.client, &topic, 1, expected.len(), seed).await;
    for (i, (r, want)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(r.offset, i as i64);
        assert_eq!(
            (&r.key, &r.value, &r.headers),
            (&want.key, &want.value, &want.headers),
            "seed {seed}: offset {i}"
        );
    }
    setup.shutdown().await;
}

#[tokio::test]
async fn invalid_compression_settings_are_refused_at_build() {
    let (broker, client) = baton_testkit::client::broker_and_client().await;
    let err = Producer::builder(&client)
        .compression(Compression::Gzip)
        .compression_level(10)
        .try_build()
        .unwrap_err();
    assert_eq!(
        err,
        ProducerConfigError::InvalidCompressionLevel {
            codec: Compression::Gzip,
            level: 10,
            min: 1,
            max: 9
        }
    );
    assert!(Producer::builder(&client)
        .compression(Compression::Zstd)
        .compression_level(-5)
        .try_build()
        .is_ok());
    // Codecs without levels ignore one.
    assert!(Producer::builder(&client)
        .compression(Compression::Lz4)
        .compression_level(99)
        .try_build()
        .is_ok());
    broker.shutdown().await;
}
