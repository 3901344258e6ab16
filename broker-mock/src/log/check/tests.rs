//! The one-pass check against decoding every record with the protocol crate's
//! batch and record iterators: both must accept and reject the same inputs with
//! the same error code.

use baton_protocol::record::{batches, Compression, RecordBatch, RecordBatchBuilder, RecordHeader};
use baton_protocol::ErrorCode;
use bytes::{Bytes, BytesMut};
use proptest::prelude::*;

use super::{check_produced, CheckedBatch};
use crate::producer_state::ProducerBatch;

/// The checks as the broker made them by decoding every record.
fn reference(records: &Bytes) -> Result<Vec<CheckedBatch>, ErrorCode> {
    let mut valid = Vec::new();
    let mut iter = batches(records.clone());
    let mut at = 0;
    for batch in iter.by_ref() {
        let batch = batch.map_err(|_| ErrorCode::CorruptMessage)?;
        batch.verify_crc().map_err(|_| ErrorCode::CorruptMessage)?;
        reference_records(&batch)?;
        valid.push(CheckedBatch {
            range: at..at + batch.len(),
            producer: ProducerBatch::of(&batch),
        });
        at += batch.len();
    }
    if iter.position() != records.len() || valid.is_empty() {
        return Err(ErrorCode::CorruptMessage);
    }
    Ok(valid)
}

fn reference_records(batch: &RecordBatch) -> Result<(), ErrorCode> {
    if batch.is_control() {
        return Err(ErrorCode::InvalidRecord);
    }
    if batch.record_count() == 0
        || batch.record_count() as i64 != batch.last_offset_delta() as i64 + 1
    {
        return Err(ErrorCode::InvalidRecord);
    }
    if batch.compression() == Compression::None {
        let records = batch.records().map_err(|_| ErrorCode::CorruptMessage)?;
        for (i, r) in records.enumerate() {
            let r = r.map_err(|_| ErrorCode::CorruptMessage)?;
            if r.offset != batch.base_offset().wrapping_add(i as i64) {
                return Err(ErrorCode::InvalidRecord);
            }
        }
    }
    Ok(())
}

#[derive(Debug, Clone)]
struct Rec {
    ts: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
}

#[derive(Debug, Clone)]
struct Spec {
    records: Vec<Rec>,
    gzip: bool,
    control: bool,
    producer: (i64, i16, i32),
}

fn rec() -> impl Strategy<Value = Rec> {
    (
        prop_oneof![Just(0i64), any::<i64>(), -100_000i64..100_000],
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..12)),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..200)),
        proptest::collection::vec(
            (
                "[a-zé]{0,6}",
                proptest::option::of(proptest::collection::vec(any::<u8>(), 0..6)),
            ),
            0..3,
        ),
    )
        .prop_map(|(ts, key, value, headers)| Rec {
            ts,
            key,
            value,
            headers,
        })
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        proptest::collection::vec(rec(), 0..6),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.05),
        (-1i64..3, -1i16..2, -1i32..5),
    )
        .prop_map(|(records, gzip, control, producer)| Spec {
            records,
            gzip,
            control,
            producer,
        })
}

fn build(spec: &Spec) -> Bytes {
    let mut b = RecordBatchBuilder::new(1_700_000_000_000)
        .producer(spec.producer.0, spec.producer.1, spec.producer.2)
        .control(spec.control);
    if spec.gzip {
        b = b.compression(Compression::Gzip);
    }
    for r in &spec.records {
        let headers: Vec<RecordHeader> = r
            .headers
            .iter()
            .map(|(k, v)| RecordHeader::new(k.clone(), v.clone().map(Bytes::from)))
            .collect();
        b.push(r.ts, r.key.as_deref(), r.value.as_deref(), &headers);
    }
    b.finish()
}

/// Rewrites the CRC of every batch whose framing can be followed, so that damage
/// inside records reaches the record checks.
fn fix_crcs(blob: &mut [u8]) {
    let mut at = 0;
    while blob.len() - at >= 61 {
        let len = i32::from_be_bytes([blob[at + 8], blob[at + 9], blob[at + 10], blob[at + 11]]);
        if len < 49 || at + 12 + len as usize > blob.len() {
            return;
        }
        let end = at + 12 + len as usize;
        let crc = crc32c::crc32c(&blob[at + 21..end]);
        blob[at + 17..at + 21].copy_from_slice(&crc.to_be_bytes());
        at = end;
    }
}

#[derive(Debug, Clone)]
struct Damage {
    flips: Vec<(usize, u8)>,
    fix_crc: bool,
    cut: Option<usize>,
    tail: Vec<u8>,
}

fn damage() -> impl Strategy<Value = Damage> {
    (
        proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        prop::bool::weighted(0.7),
        proptest::option::weighted(0.1, any::<usize>()),
        prop_oneof![
            8 => Just(Vec::new()),
            1 => proptest::collection::vec(any::<u8>(), 1..80),
        ],
    )
        .prop_map(|(flips, fix_crc, cut, tail)| Damage {
            flips,
            fix_crc,
            cut,
            tail,
        })
}

fn compare(blob: &[u8]) -> Result<(), TestCaseError> {
    let ours = check_produced(blob);
    let theirs = reference(&Bytes::copy_from_slice(blob));
    prop_assert_eq!(ours, theirs, "blob {:02x?}", blob);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn agrees_with_decoding_every_record(specs in proptest::collection::vec(spec(), 1..4), d in damage()) {
        let mut blob = BytesMut::new();
        for s in &specs {
            blob.extend_from_slice(&build(s));
        }
        compare(&blob)?;
        if !blob.is_empty() {
            for (pos, byte) in &d.flips {
                let at = pos % blob.len();
                blob[at] ^= byte | 1;
            }
        }
        if d.fix_crc {
            fix_crcs(&mut blob);
        }
        if let Some(cut) = d.cut {
            blob.truncate(cut % (blob.len() + 1));
        }
        blob.extend_from_slice(&d.tail);
        compare(&blob)?;
    }
}

#[test]
fn empty_and_tiny_inputs_are_corrupt() {
    for blob in [&[][..], &[0u8; 5][..], &[0u8; 12][..], &[0xffu8; 70][..]] {
        assert_eq!(check_produced(blob), Err(ErrorCode::CorruptMessage));
        assert_eq!(
            reference(&Bytes::copy_from_slice(blob)),
            Err(ErrorCode::CorruptMessage)
        );
    }
}

#[test]
fn offset_deltas_out_of_sequence_are_invalid_records() {
    // Two records whose offset deltas are swapped, with a valid CRC.
    let mut b = RecordBatchBuilder::new(0);
    b.push(0, None, Some(b"a"), &[]);
    b.push(0, None, Some(b"b"), &[]);
    let mut blob = b.finish().to_vec();
    // Record 0 starts right after the header: length, attributes, timestamp delta,
    // offset delta.
    let first_delta = 61 + 3;
    assert_eq!(blob[first_delta], 0);
    blob[first_delta] = 2; // zigzag 1
    fix_crcs(&mut blob);
    assert_eq!(check_produced(&blob), Err(ErrorCode::InvalidRecord));
    compare(&blob).unwrap();
}
