//! Tests of the record batch format: a batch captured from a real Kafka broker,
//! builder round trips, CRC coverage, header rewrites, batch iteration with a
//! truncated tail, malformed records, and property tests that arbitrary input never
//! panics.

use bytes::{BufMut, Bytes, BytesMut};
use proptest::prelude::*;

use super::*;
use crate::error::DecodeError;
use crate::primitives::{put_varint, put_varlong};
use crate::testing::Rng;

/// One batch as an Apache Kafka 0.11 broker returned it in a fetch response:
/// offset 0, leader epoch 1, one record with a null key and the value "123".
const KAFKA_BATCH: [u8; 71] = [
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x3b, 0x00, 0x00, 0x00, 0x01,
    0x02, 0x03, 0x18, 0xa2, 0x70, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x5d, 0xff,
    0x7b, 0x06, 0x3c, 0x00, 0x00, 0x01, 0x5d, 0xff, 0x7b, 0x06, 0x3c, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x01, 0x12, 0x00, 0x00,
    0x00, 0x01, 0x06, 0x31, 0x32, 0x33, 0x00,
];

fn collect(batch: &RecordBatch) -> Result<Vec<Record>, DecodeError> {
    batch.records()?.collect()
}

/// The values of every record of `batch`, in order.
fn values_of(batch: &RecordBatch) -> Vec<Option<Bytes>> {
    collect(batch)
        .unwrap()
        .into_iter()
        .map(|r| r.value)
        .collect()
}

/// A batch with a valid CRC around a hand-made records section.
fn raw_batch(attributes: i16, count: i32, body: &[u8]) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i64(0);
    buf.put_i32((BATCH_HEADER_LEN - LOG_OVERHEAD + body.len()) as i32);
    buf.put_i32(-1);
    buf.put_i8(2);
    buf.put_u32(0);
    buf.put_i16(attributes);
    buf.put_i32(count.max(1) - 1);
    buf.put_i64(1000);
    buf.put_i64(1000);
    buf.put_i64(-1);
    buf.put_i16(-1);
    buf.put_i32(-1);
    buf.put_i32(count);
    buf.put_slice(body);
    batch::write_crc(&mut buf);
    buf.freeze()
}

/// One hand-encoded record.
fn raw_record(key_len: i32, key: &[u8], headers: &[(i32, &[u8], i32, &[u8])]) -> Vec<u8> {
    let mut inner = BytesMut::new();
    inner.put_i8(0);
    put_varlong(&mut inner, 0);
    put_varint(&mut inner, 0);
    put_varint(&mut inner, key_len);
    inner.put_slice(key);
    put_varint(&mut inner, -1);
    put_varint(&mut inner, headers.len() as i32);
    for (kl, k, vl, v) in headers {
        put_varint(&mut inner, *kl);
        inner.put_slice(k);
        put_varint(&mut inner, *vl);
        inner.put_slice(v);
    }
    let mut out = BytesMut::new();
    put_varint(&mut out, inner.len() as i32);
    out.put_slice(&inner);
    out.to_vec()
}

fn sample_batch(base_timestamp: i64, n: usize) -> Bytes {
    let mut b = RecordBatchBuilder::new(base_timestamp).producer(7, 3, 100);
    for i in 0..n {
        let headers = [
            RecordHeader::new("h", Some(Bytes::from(vec![i as u8; i]))),
            RecordHeader::new("h", None),
        ];
        b.push(
            base_timestamp + i as i64 * 10,
            Some(format!("key-{i}").as_bytes()),
            Some(&vec![b'v'; i * 3]),
            &headers,
        );
    }
    b.finish()
}

#[test]
fn reads_a_batch_written_by_kafka() {
    let batch = RecordBatch::parse(Bytes::from_static(&KAFKA_BATCH)).unwrap();
    batch.verify_crc().unwrap();
    assert_eq!(batch.crc(), 0x0318_a270);
    assert_eq!(batch.base_offset(), 0);
    assert_eq!(batch.batch_length(), 59);
    assert_eq!(batch.partition_leader_epoch(), 1);
    assert_eq!(batch.magic(), 2);
    assert_eq!(batch.compression(), Compression::None);
    assert_eq!(batch.timestamp_type(), TimestampType::CreateTime);
    assert!(!batch.is_transactional() && !batch.is_control());
    assert_eq!(batch.last_offset_delta(), 0);
    assert_eq!(batch.next_offset(), 1);
    assert_eq!(batch.base_timestamp(), 1_503_229_838_908);
    assert_eq!(batch.max_timestamp(), 1_503_229_838_908);
    assert_eq!(batch.producer_id(), -1);
    assert_eq!(batch.producer_epoch(), -1);
    assert_eq!(batch.base_sequence(), -1);
    assert_eq!(batch.record_count(), 1);
    let records = collect(&batch).unwrap();
    assert_eq!(
        records,
        vec![Record {
            offset: 0,
            timestamp: 1_503_229_838_908,
            key: None,
            value: Some(Bytes::from_static(b"123")),
            headers: vec![],
            attributes: 0,
        }]
    );

    // The builder writes the same bytes for the same content.
    let mut b = RecordBatchBuilder::new(1_503_229_838_908).partition_leader_epoch(1);
    b.push(1_503_229_838_908, None, Some(b"123"), &[]);
    assert_eq!(&b.finish()[..], &KAFKA_BATCH[..]);
}

#[test]
fn builder_defaults_and_fields() {
    let mut b = RecordBatchBuilder::new(500);
    assert!(b.is_empty());
    assert_eq!(b.size_bytes(), BATCH_HEADER_LEN);
    b.push(600, Some(b"k"), Some(b"v"), &[]);
    b.push(450, None, Some(b""), &[]);
    b.push(550, Some(b""), None, &[]);
    assert_eq!(b.len(), 3);
    let size = b.size_bytes();
    let bytes = b.finish();
    assert_eq!(bytes.len(), size);
    let batch = RecordBatch::parse(bytes).unwrap();
    batch.verify_crc().unwrap();
    assert_eq!(batch.base_offset(), 0);
    assert_eq!(batch.partition_leader_epoch(), -1);
    assert_eq!(batch.producer_id(), -1);
    assert_eq!(batch.producer_epoch(), -1);
    assert_eq!(batch.base_sequence(), -1);
    assert_eq!(batch.base_timestamp(), 500);
    assert_eq!(batch.max_timestamp(), 600);
    assert_eq!(batch.last_offset_delta(), 2);
    assert_eq!(batch.last_offset(), 2);
    assert_eq!(batch.record_count(), 3);
    let r = collect(&batch).unwrap();
    assert_eq!(r[0].timestamp, 600);
    assert_eq!(r[1].timestamp, 450);
    assert_eq!(r[1].key, None);
    assert_eq!(r[1].value.as_deref(), Some(&b""[..]));
    assert_eq!(r[2].key.as_deref(), Some(&b""[..]));
    assert_eq!(r[2].value, None);
    assert_eq!(
        r.iter().map(|r| r.offset).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
}

#[test]
fn builder_options_set_attributes() {
    let mut b = RecordBatchBuilder::new(1)
        .base_offset(40)
        .partition_leader_epoch(9)
        .producer(5, 6, 7)
        .transactional(true)
        .control(true)
        .timestamp_type(TimestampType::LogAppendTime);
    b.push(1, Some(&[0, 0, 0, 1]), Some(&[0, 0, 0, 0, 0, 0]), &[]);
    let batch = RecordBatch::parse(b.finish()).unwrap();
    batch.verify_crc().unwrap();
    assert_eq!(batch.base_offset(), 40);
    assert_eq!(batch.partition_leader_epoch(), 9);
    assert_eq!(
        (
            batch.producer_id(),
            batch.producer_epoch(),
            batch.base_sequence()
        ),
        (5, 6, 7)
    );
    assert!(batch.is_transactional() && batch.is_control());
    assert_eq!(batch.timestamp_type(), TimestampType::LogAppendTime);
    let r = collect(&batch).unwrap();
    assert_eq!(r[0].offset, 40);
    assert_eq!(r[0].control_type(), Ok(ControlRecordType::Commit));
}

#[test]
fn empty_builder_makes_a_valid_empty_batch() {
    let bytes = RecordBatchBuilder::new(3).finish();
    assert_eq!(bytes.len(), BATCH_HEADER_LEN);
    let batch = RecordBatch::parse(bytes).unwrap();
    batch.verify_crc().unwrap();
    assert_eq!(batch.record_count(), 0);
    assert_eq!(batch.max_timestamp(), -1);
    assert!(collect(&batch).unwrap().is_empty());
}

#[test]
fn finish_into_appends() {
    let mut buf = BytesMut::from(&b"prefix"[..]);
    let mut b = RecordBatchBuilder::new(0);
    b.push(0, None, Some(b"x"), &[]);
    b.finish_into(&mut buf);
    let batch = RecordBatch::parse(buf.freeze().slice(6..)).unwrap();
    batch.verify_crc().unwrap();
}

#[test]
fn finish_and_finish_into_write_the_same_batch() {
    for codec in [Compression::None, Compression::Lz4]
        .into_iter()
        .filter(|c| c.is_supported())
    {
        let build = || {
            let mut b = RecordBatchBuilder::new(7)
                .compression(codec)
                .producer(3, 1, 9);
            b.push(7, Some(b"k"), Some(&[0x11; 3000]), &[]);
            b.push(9, None, Some(b"v"), &[]);
            b
        };
        let alone = build().finish();
        let mut buf = BytesMut::from(&b"prefix"[..]);
        build().finish_into(&mut buf);
        assert_eq!(&buf[6..], &alone[..], "{codec}");
        let mut empty = BytesMut::new();
        build().finish_into(&mut empty);
        assert_eq!(&empty[..], &alone[..], "{codec}");
        let batch = RecordBatch::parse(alone).unwrap();
        batch.verify_crc().unwrap();
        assert_eq!(batch.record_count(), 2);
        assert_eq!(
            collect(&batch).unwrap()[0].value.as_deref(),
            Some(&[0x11; 3000][..])
        );
    }
}

#[test]
fn large_value_and_duplicate_headers_round_trip() {
    let big = vec![0x5a; 100 * 1024];
    let headers = vec![
        RecordHeader::new("dup", Some(Bytes::from_static(b"1"))),
        RecordHeader::new("other", None),
        RecordHeader::new("dup", Some(Bytes::from_static(b""))),
        RecordHeader::new("dup", Some(Bytes::from_static(b"3"))),
    ];
    let mut b = RecordBatchBuilder::new(10);
    b.push(10, Some(b"k"), Some(&big), &headers);
    let batch = RecordBatch::parse(b.finish()).unwrap();
    batch.verify_crc().unwrap();
    let r = collect(&batch).unwrap();
    assert_eq!(r[0].value.as_deref(), Some(&big[..]));
    assert_eq!(r[0].headers, headers);
}

#[test]
fn records_are_slices_of_the_batch() {
    let batch = RecordBatch::parse(sample_batch(0, 5)).unwrap();
    let range = batch.as_bytes().as_ptr_range();
    for r in batch.records().unwrap() {
        let r = r.unwrap();
        for b in [&r.key, &r.value]
            .into_iter()
            .flatten()
            .chain(r.headers.iter().filter_map(|h| h.value.as_ref()))
        {
            let p = b.as_ptr_range();
            assert!(range.start <= p.start && p.end <= range.end);
        }
    }
}

/// Whether the CRC stored in a raw batch matches its contents.
fn raw_crc_ok(m: &[u8]) -> bool {
    let stored = u32::from_be_bytes([m[17], m[18], m[19], m[20]]);
    crc32c::crc32c(&m[super::offsets::ATTRIBUTES..]) == stored
}

#[test]
fn every_byte_from_attributes_on_is_covered_by_the_crc() {
    let bytes = sample_batch(1_700_000_000_000, 4);
    assert!(raw_crc_ok(&bytes));
    for i in 0..bytes.len() {
        for mask in [0x01u8, 0x80, 0xff, 0x3c] {
            let mut m = bytes.to_vec();
            m[i] ^= mask;
            let covered = i >= super::offsets::CRC;
            assert_eq!(raw_crc_ok(&m), !covered, "byte {i} mask {mask:#x}");
            match RecordBatch::parse(Bytes::from(m)) {
                Ok(batch) => assert_eq!(
                    batch.verify_crc().is_err(),
                    covered,
                    "byte {i} mask {mask:#x}"
                ),
                // Outside the CRC only batchLength and magic are framing.
                Err(_) => assert!(
                    (8..12).contains(&i) || i == 16 || covered,
                    "byte {i} mask {mask:#x}"
                ),
            }
        }
    }
}

#[test]
fn offset_and_epoch_rewrites_keep_the_crc() {
    let mut m = sample_batch(0, 3).to_vec();
    set_base_offset(&mut m, 1_000_000);
    set_partition_leader_epoch(&mut m, 42);
    let batch = RecordBatch::parse(Bytes::from(m)).unwrap();
    batch.verify_crc().unwrap();
    assert_eq!(batch.base_offset(), 1_000_000);
    assert_eq!(batch.partition_leader_epoch(), 42);
    assert_eq!(batch.last_offset(), 1_000_002);
    assert_eq!(batch.next_offset(), 1_000_003);
    let offsets: Vec<i64> = batch
        .records()
        .unwrap()
        .map(|r| r.unwrap().offset)
        .collect();
    assert_eq!(offsets, vec![1_000_000, 1_000_001, 1_000_002]);
}

#[test]
fn log_append_time_rewrite_recomputes_the_crc() {
    let mut m = sample_batch(100, 3).to_vec();
    set_log_append_time(&mut m, 9_999);
    let batch = RecordBatch::parse(Bytes::from(m)).unwrap();
    batch.verify_crc().unwrap();
    assert_eq!(batch.timestamp_type(), TimestampType::LogAppendTime);
    assert_eq!(batch.max_timestamp(), 9_999);
    assert_eq!(batch.base_timestamp(), 100);
    assert!(batch.producer_id() == 7 && batch.compression() == Compression::None);
    for r in batch.records().unwrap() {
        assert_eq!(r.unwrap().timestamp, 9_999);
    }
}

#[test]
fn batches_stop_at_a_truncated_tail() {
    let whole: Vec<Bytes> = (0..3)
        .map(|i| sample_batch(i * 100, i as usize + 1))
        .collect();
    let tail = sample_batch(7, 2);
    let mut blob = BytesMut::new();
    for b in &whole {
        blob.put_slice(b);
    }
    let prefix_len = blob.len();
    for cut in 0..tail.len() {
        let mut data = blob.clone();
        data.put_slice(&tail[..cut]);
        let mut it = batches(data.freeze());
        let got: Vec<RecordBatch> = it.by_ref().collect::<Result<_, _>>().unwrap();
        assert_eq!(got.len(), 3, "cut {cut}");
        for (g, w) in got.iter().zip(&whole) {
            assert_eq!(g.as_bytes(), w);
        }
        assert_eq!(it.position(), prefix_len);
        assert_eq!(it.remainder().len(), cut);
    }
    let mut full = blob.clone();
    full.put_slice(&tail);
    assert_eq!(batches(full.freeze()).count(), 4);
    assert_eq!(batches(Bytes::new()).count(), 0);
}

#[test]
fn batches_report_malformed_framing() {
    // batchLength below the header size.
    let mut m = sample_batch(0, 1).to_vec();
    m[8..12].copy_from_slice(&10i32.to_be_bytes());
    let mut it = batches(Bytes::from(m));
    assert!(matches!(
        it.next(),
        Some(Err(DecodeError::BadLength { .. }))
    ));
    assert!(it.next().is_none());

    // A batch of another format, even when cut short.
    let mut m = sample_batch(0, 1).to_vec();
    m[16] = 1;
    m.truncate(20);
    let mut it = batches(Bytes::from(m));
    assert_eq!(it.next(), Some(Err(DecodeError::UnsupportedMagic(1))));
    assert!(it.next().is_none());

    // A good batch, then a bad one: the good one is still yielded.
    let mut blob = sample_batch(0, 1).to_vec();
    let mut bad = sample_batch(0, 1).to_vec();
    bad[57..61].copy_from_slice(&(-3i32).to_be_bytes());
    blob.extend_from_slice(&bad);
    let results: Vec<_> = batches(Bytes::from(blob)).collect();
    assert_eq!(results.len(), 2);
    assert!(results[0].is_ok() && results[1].is_err());
}

#[test]
fn parse_checks_framing() {
    let good = sample_batch(0, 2);
    assert!(matches!(
        RecordBatch::parse(good.slice(..60)),
        Err(DecodeError::Truncated { .. })
    ));
    assert!(matches!(
        RecordBatch::parse(good.slice(..good.len() - 1)),
        Err(DecodeError::BadLength { .. })
    ));
    let mut longer = good.to_vec();
    longer.push(0);
    assert!(matches!(
        RecordBatch::parse(Bytes::from(longer)),
        Err(DecodeError::BadLength { .. })
    ));
    let mut m = good.to_vec();
    m[16] = 1;
    assert_eq!(
        RecordBatch::parse(Bytes::from(m)),
        Err(DecodeError::UnsupportedMagic(1))
    );
    let mut m = good.to_vec();
    m[22] = 5;
    assert_eq!(
        RecordBatch::parse(Bytes::from(m)),
        Err(DecodeError::UnsupportedCompression(5))
    );
    let mut m = good.to_vec();
    m[23..27].copy_from_slice(&(-1i32).to_be_bytes());
    assert!(RecordBatch::parse(Bytes::from(m)).is_err());
    let mut m = good.to_vec();
    m[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
    assert!(matches!(
        RecordBatch::parse(Bytes::from(m)),
        Err(DecodeError::BadLength { .. })
    ));
}

#[test]
fn compressed_batches_with_garbage_sections_are_typed_errors() {
    for (bits, codec) in [
        (1, Compression::Gzip),
        (2, Compression::Snappy),
        (3, Compression::Lz4),
        (4, Compression::Zstd),
    ] {
        let batch = RecordBatch::parse(raw_batch(bits, 1, &[1, 2, 3])).unwrap();
        batch.verify_crc().unwrap();
        assert_eq!(batch.compression(), codec);
        assert_eq!(codec.bits(), bits);
        assert_eq!(Compression::from_attributes(bits | 0x18), Ok(codec));
        let err = batch.records().unwrap_err();
        if codec.is_supported() {
            assert!(matches!(err, DecodeError::CorruptCompression { codec: c, .. } if c == codec));
        } else {
            assert_eq!(err, DecodeError::UnsupportedCompression(bits as u8));
        }
    }
}

#[test]
fn record_count_must_match() {
    let one = raw_record(10, b"0123456789", &[]);
    let two = [one.clone(), one.clone()].concat();
    // Fewer records present than announced.
    let batch = RecordBatch::parse(raw_batch(0, 2, &one)).unwrap();
    let r: Vec<_> = batch.records().unwrap().collect();
    assert_eq!(r.len(), 2);
    assert!(r[0].is_ok() && r[1].is_err());
    // More bytes than the announced records.
    let batch = RecordBatch::parse(raw_batch(0, 1, &two)).unwrap();
    let r: Vec<_> = batch.records().unwrap().collect();
    assert_eq!(r.len(), 2);
    assert!(matches!(r[1], Err(DecodeError::TrailingBytes(_))));
    // Exactly right.
    let batch = RecordBatch::parse(raw_batch(0, 2, &two)).unwrap();
    assert_eq!(collect(&batch).unwrap().len(), 2);
}

#[test]
fn malformed_records_are_errors() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("key length below -1", raw_record(-2, b"", &[])),
        ("key longer than record", raw_record(50, b"abc", &[])),
        (
            "null header key",
            raw_record(-1, b"", &[(-1, b"", -1, b"")]),
        ),
        (
            "header key not utf-8",
            raw_record(-1, b"", &[(2, &[0xc3, 0x28], -1, b"")]),
        ),
        (
            "header value too long",
            raw_record(-1, b"", &[(1, b"a", 9, b"x")]),
        ),
    ];
    for (what, body) in cases {
        let batch = RecordBatch::parse(raw_batch(0, 1, &body)).unwrap();
        assert!(collect(&batch).is_err(), "{what}");
    }
    // A header count larger than the bytes left could hold.
    let mut inner = BytesMut::new();
    inner.put_i8(0);
    put_varlong(&mut inner, 0);
    put_varint(&mut inner, 0);
    put_varint(&mut inner, -1);
    put_varint(&mut inner, -1);
    put_varint(&mut inner, i32::MAX);
    let mut body = BytesMut::new();
    put_varint(&mut body, inner.len() as i32);
    body.put_slice(&inner);
    body.put_slice(&[0; 16]);
    let batch = RecordBatch::parse(raw_batch(0, 1, &body)).unwrap();
    assert!(matches!(
        collect(&batch),
        Err(DecodeError::BadLength { .. })
    ));
    // Bytes left inside a record's own length.
    let mut rec = raw_record(1, b"k", &[]);
    rec[0] += 2; // zigzag: length + 1
    rec.push(0);
    let batch = RecordBatch::parse(raw_batch(0, 1, &rec)).unwrap();
    assert!(collect(&batch).is_err());
    // A valid utf-8 header key is accepted.
    let ok = raw_record(-1, b"", &[(2, "é".as_bytes(), -1, b"")]);
    let batch = RecordBatch::parse(raw_batch(0, 1, &ok)).unwrap();
    assert_eq!(collect(&batch).unwrap()[0].headers[0].key, "é");
}

#[test]
fn control_record_types() {
    let rec = |key: Option<&[u8]>| Record {
        offset: 0,
        timestamp: 0,
        key: key.map(Bytes::copy_from_slice),
        value: None,
        headers: vec![],
        attributes: 0,
    };
    assert_eq!(
        rec(Some(&[0, 0, 0, 0])).control_type(),
        Ok(ControlRecordType::Abort)
    );
    assert_eq!(
        rec(Some(&[0, 0, 0, 1])).control_type(),
        Ok(ControlRecordType::Commit)
    );
    assert_eq!(
        rec(Some(&[0, 0, 0, 3])).control_type(),
        Ok(ControlRecordType::Other(3))
    );
    assert!(rec(Some(&[0, 0, 0])).control_type().is_err());
    assert!(rec(Some(&[0xff, 0xff, 0, 0])).control_type().is_err());
    assert!(rec(None).control_type().is_err());
}

#[test]
fn estimate_is_an_upper_bound() {
    let seed = 0x5eed_0001;
    let mut rng = Rng::new(seed);
    for _ in 0..200 {
        let key_len = rng.below(300) as usize;
        let value_len = rng.below(300) as usize;
        let headers: Vec<RecordHeader> = (0..rng.below(4))
            .map(|i| {
                RecordHeader::new(
                    format!("h{i}"),
                    Some(Bytes::from(vec![0; i as usize * 200])),
                )
            })
            .collect();
        let ts = rng.next_u64() as i64;
        let mut b = RecordBatchBuilder::new(0);
        b.push(
            ts,
            Some(&vec![1; key_len]),
            Some(&vec![2; value_len]),
            &headers,
        );
        let actual = b.size_bytes() - BATCH_HEADER_LEN;
        let estimate = RecordBatchBuilder::estimate_record_size(key_len, value_len, &headers);
        assert!(actual <= estimate, "seed {seed:#x}: {actual} > {estimate}");
    }
}

/// A record as the property tests generate it.
#[derive(Debug, Clone)]
struct TestRecord {
    timestamp: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
}

/// A builder with a key, headers and a timestamp per record, pushing `values` with
/// [`RecordBatchBuilder::push_shared`] (`shared`) or [`RecordBatchBuilder::push`].
fn build_values(values: &[Option<Bytes>], shared: bool) -> RecordBatchBuilder {
    let mut b = RecordBatchBuilder::new(1_700_000_000_000).producer(7, 1, 40);
    for (i, v) in values.iter().enumerate() {
        let key = format!("key-{i}");
        let headers = [
            RecordHeader::new("trace", Some(Bytes::from(vec![i as u8; i + 1]))),
            RecordHeader::new("trace", None),
        ];
        let ts = 1_700_000_000_000 + i as i64;
        if shared {
            b.push_shared(ts, Some(key.as_bytes()), v.as_ref(), &headers);
        } else {
            b.push(ts, Some(key.as_bytes()), v.as_deref(), &headers);
        }
    }
    b
}

/// A value of `len` bytes whose content depends on `seed`.
fn value_of(len: usize, seed: u8) -> Bytes {
    Bytes::from(
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31) ^ seed)
            .collect::<Vec<u8>>(),
    )
}

#[test]
fn shared_values_are_segments_with_the_contiguous_bytes() {
    let m = SHARED_VALUE_MIN;
    let cases: Vec<Vec<Option<Bytes>>> = vec![
        vec![Some(value_of(m - 1, 1))],
        vec![Some(value_of(m, 2))],
        vec![Some(value_of(m + 1, 3))],
        vec![Some(value_of(1 << 20, 4))],
        vec![
            None,
            Some(value_of(m, 5)),
            Some(value_of(10, 6)),
            Some(value_of(m + 7, 7)),
            None,
        ],
        vec![Some(value_of(m, 8)), Some(value_of(m, 9))],
        vec![
            Some(Bytes::new()),
            Some(value_of(m - 1, 10)),
            Some(value_of(3 * m, 11)),
        ],
    ];
    for values in cases {
        let contiguous = build_values(&values, false).finish();
        let builder = build_values(&values, true);
        assert_eq!(builder.size_bytes(), contiguous.len());
        let segments = builder.finish_segments();
        assert_eq!(segments.len(), contiguous.len());
        assert_eq!(
            segments.segments().concat(),
            contiguous.to_vec(),
            "byte for byte"
        );
        assert_eq!(segments, BatchSegments::from(contiguous.clone()));
        let batch = RecordBatch::parse(segments.to_bytes()).unwrap();
        batch.verify_crc().unwrap();
        assert_eq!(values_of(&batch), values);

        // Every value of at least the threshold is its own segment, the caller's
        // buffer itself; the others are copied.
        let large: Vec<&Bytes> = values.iter().flatten().filter(|v| v.len() >= m).collect();
        assert_eq!(segments.segments().len(), 1 + 2 * large.len());
        for v in &large {
            assert!(
                segments
                    .segments()
                    .iter()
                    .any(|s| s.as_ptr() == v.as_ptr() && s.len() == v.len()),
                "value of {} bytes shared",
                v.len()
            );
        }

        // The contiguous outputs of a builder with shared values are the same bytes.
        assert_eq!(build_values(&values, true).finish(), contiguous);
        let mut buf = BytesMut::new();
        build_values(&values, true).finish_into(&mut buf);
        assert_eq!(buf.freeze(), contiguous);
        let mut buf = BytesMut::from(&b"before"[..]);
        build_values(&values, true).finish_into(&mut buf);
        assert_eq!(&buf[6..], &contiguous[..]);
    }
}

#[test]
fn compressed_batches_never_share_values() {
    let values = vec![
        Some(value_of(SHARED_VALUE_MIN * 2, 1)),
        Some(value_of(5, 2)),
    ];
    for codec in Compression::ALL
        .into_iter()
        .filter(|c| *c != Compression::None)
    {
        if !codec.is_supported() {
            continue;
        }
        // Codec set first: push_shared copies.
        let mut b = RecordBatchBuilder::new(0).compression(codec);
        for v in &values {
            b.push_shared(0, None, v.as_ref(), &[]);
        }
        let one = b.finish_segments();
        assert_eq!(one.segments().len(), 1);
        // Codec set after shared pushes: the values are copied in first.
        let mut b = RecordBatchBuilder::new(0);
        for v in &values {
            b.push_shared(0, None, v.as_ref(), &[]);
        }
        let b = b.compression(codec);
        let two = b.finish_segments();
        assert_eq!(two.segments().len(), 1);
        for s in [one, two] {
            let batch = RecordBatch::parse(s.to_bytes()).unwrap();
            batch.verify_crc().unwrap();
            assert_eq!(batch.compression(), codec);
            assert_eq!(values_of(&batch), values);
        }
    }
}

#[test]
fn a_flipped_byte_in_a_shared_value_fails_the_crc() {
    let value = value_of(SHARED_VALUE_MIN, 3);
    let mut b = RecordBatchBuilder::new(0);
    b.push_shared(0, None, Some(&value), &[]);
    let mut bytes = b.finish_segments().to_bytes().to_vec();
    let at = bytes.len() / 2;
    bytes[at] ^= 1;
    let batch = RecordBatch::parse(Bytes::from(bytes)).unwrap();
    assert!(batch.verify_crc().is_err());
}

fn bytes_strategy() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        4 => proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64)),
        1 => Just(Some(Vec::new())),
        1 => Just(None),
        1 => Just(Some(vec![0xa5; 100 * 1024])),
    ]
}

fn record_strategy() -> impl Strategy<Value = TestRecord> {
    let header_key = prop_oneof![
        Just("dup".to_string()),
        Just(String::new()),
        "[a-z\u{e9}\u{4e16}]{0,12}",
    ];
    let header = (
        header_key,
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..16)),
    );
    (
        any::<i64>(),
        bytes_strategy(),
        bytes_strategy(),
        proptest::collection::vec(header, 0..5),
    )
        .prop_map(|(timestamp, key, value, headers)| TestRecord {
            timestamp,
            key,
            value,
            headers,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn builder_round_trips(
        base_timestamp in any::<i64>(),
        producer in (any::<i64>(), any::<i16>(), any::<i32>()),
        records in proptest::collection::vec(record_strategy(), 0..8),
    ) {
        let mut b = RecordBatchBuilder::new(base_timestamp).producer(producer.0, producer.1, producer.2);
        let mut shared = b.clone();
        for r in &records {
            let headers: Vec<RecordHeader> = r
                .headers
                .iter()
                .map(|(k, v)| RecordHeader::new(k.clone(), v.clone().map(Bytes::from)))
                .collect();
            b.push(r.timestamp, r.key.as_deref(), r.value.as_deref(), &headers);
            let value = r.value.clone().map(Bytes::from);
            shared.push_shared(r.timestamp, r.key.as_deref(), value.as_ref(), &headers);
        }
        prop_assert_eq!(b.len(), records.len());
        let size = b.size_bytes();
        prop_assert_eq!(shared.size_bytes(), size);
        let bytes = b.finish();
        prop_assert_eq!(bytes.len(), size);
        // Shared values change how the batch is cut, never its bytes.
        let segments = shared.finish_segments();
        prop_assert_eq!(segments.segments().concat(), bytes.to_vec());
        let batch = RecordBatch::parse(bytes).unwrap();
        prop_assert!(batch.verify_crc().is_ok());
        prop_assert_eq!(batch.record_count() as usize, records.len());
        prop_assert_eq!(batch.base_timestamp(), base_timestamp);
        prop_assert_eq!(
            (batch.producer_id(), batch.producer_epoch(), batch.base_sequence()),
            producer
        );
        prop_assert_eq!(batch.last_offset_delta() as usize, records.len().saturating_sub(1));
        let max = records.iter().map(|r| r.timestamp).max().unwrap_or(-1);
        prop_assert_eq!(batch.max_timestamp(), max);
        let decoded: Vec<Record> = batch.records().unwrap().collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(decoded.len(), records.len());
        for (i, (d, r)) in decoded.iter().zip(&records).enumerate() {
            prop_assert_eq!(d.offset, i as i64);
            prop_assert_eq!(d.timestamp, r.timestamp);
            prop_assert_eq!(d.key.as_deref(), r.key.as_deref());
            prop_assert_eq!(d.value.as_deref(), r.value.as_deref());
            prop_assert_eq!(d.attributes, 0);
            let headers: Vec<(String, Option<Vec<u8>>)> = d
                .headers
                .iter()
                .map(|h| (h.key.clone(), h.value.as_ref().map(|v| v.to_vec())))
                .collect();
            prop_assert_eq!(&headers, &r.headers);
        }
        // Re-encoding the decoded records gives the same batch.
        let mut again = RecordBatchBuilder::new(base_timestamp).producer(producer.0, producer.1, producer.2);
        for d in &decoded {
            again.push_record(d);
        }
        prop_assert_eq!(&again.finish(), batch.as_bytes());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        let data = Bytes::from(data);
        if let Ok(batch) = RecordBatch::parse(data.clone()) {
            exercise(&batch);
        }
        for batch in batches(data).flatten() {
            exercise(&batch);
        }
    }

    #[test]
    fn mutated_batches_never_panic(
        seed in any::<u64>(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        truncate in any::<prop::sample::Index>(),
    ) {
        let mut rng = Rng::new(seed);
        let n = rng.below(5) as usize;
        let mut m = sample_batch(rng.next_u64() as i64, n).to_vec();
        for (at, byte) in edits {
            let i = at.index(m.len());
            m[i] = byte;
        }
        // Keep the framing valid often enough for the record decoder to be reached.
        let len = m.len();
        if seed % 2 == 0 {
            m[8..12].copy_from_slice(&((len - LOG_OVERHEAD) as i32).to_be_bytes());
            m[16] = 2;
            m[22] &= 0xf8;
        }
        let whole = Bytes::from(m);
        if let Ok(batch) = RecordBatch::parse(whole.clone()) {
            exercise(&batch);
        }
        let cut = whole.slice(..truncate.index(whole.len() + 1));
        let mut blob = whole.to_vec();
        blob.extend_from_slice(&cut);
        for batch in batches(Bytes::from(blob)).flatten() {
            exercise(&batch);
        }
    }
}

/// Touches every accessor and decodes every record of a batch.
fn exercise(batch: &RecordBatch) {
    let _ = (
        batch.base_offset(),
        batch.batch_length(),
        batch.partition_leader_epoch(),
        batch.magic(),
        batch.attributes(),
        batch.compression(),
        batch.timestamp_type(),
        batch.is_transactional(),
        batch.is_control(),
        batch.has_delete_horizon(),
        batch.last_offset(),
        batch.next_offset(),
        batch.max_timestamp(),
        batch.producer_id(),
        batch.producer_epoch(),
        batch.base_sequence(),
        batch.record_count(),
        batch.verify_crc(),
        format!("{batch:?}"),
    );
    if let Ok(records) = batch.records() {
        let announced = records.remaining_count();
        let checked = records.check();
        let mut n = 0;
        let mut failed = None;
        for r in records {
            n += 1;
            match r {
                Ok(r) => {
                    let _ = r.control_type();
                }
                Err(e) => failed = Some(e),
            }
        }
        assert!(n <= announced + 1);
        // The allocation-free check accepts exactly what decoding accepts.
        assert_eq!(
            checked.is_ok(),
            failed.is_none(),
            "{checked:?} vs {failed:?}"
        );
    }
    if batch.compression() == Compression::None {
        // The walk's offset deltas are those decoding finds, up to the same error.
        let body = batch.records_bytes();
        let walked: Vec<Result<i32, DecodeError>> =
            walk_records(&body, batch.record_count()).collect();
        let decoded: Vec<Result<i32, DecodeError>> = batch
            .records()
            .unwrap()
            .map(|r| r.map(|r| r.offset.wrapping_sub(batch.base_offset()) as i32))
            .collect();
        assert_eq!(walked.len(), decoded.len());
        for (w, d) in walked.iter().zip(&decoded) {
            assert_eq!(w.as_ref().ok(), d.as_ref().ok());
        }
    }
    let mut m = batch.as_bytes().to_vec();
    set_base_offset(&mut m, 1);
    set_partition_leader_epoch(&mut m, 2);
    set_log_append_time(&mut m, 3);
}
