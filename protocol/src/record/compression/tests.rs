//! Tests of the codecs: batches written by another client (kafka-python), streams
//! made with each codec library's own API in forms our writer never uses, the exact
//! framing we write, builder round trips, limits, truncation and property tests that
//! arbitrary input is an error or a bounded output, never a panic.

use std::io::Write;

use bytes::{BufMut, Bytes, BytesMut};
use proptest::prelude::*;

use super::super::{
    batch, set_base_offset, set_partition_leader_epoch, Record, RecordBatch, RecordBatchBuilder,
    RecordHeader, BATCH_HEADER_LEN, LOG_OVERHEAD,
};
use super::*;
use crate::testing::Rng;

const CODECS: [Compression; 4] = [
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

// Batches written by kafka-python 3.0.12's `DefaultRecordBatchBuilder` (magic 2,
// producer id 4242, epoch 1, base sequence 17) with its codec helpers: gzip from
// Python's standard library, Snappy from python-snappy in the xerial framing
// kafka-python writes by default (and, for `SNAPPY_RAW`, one raw block as
// librdkafka writes), LZ4 from python-lz4's frame API (independent blocks, with
// the content size in the header), Zstandard from python-zstandard. The records
// are those of `expected_record`.
const GZIP: &[u8] = include_bytes!("../../../tests/data/kafka_python_gzip.bin");
const SNAPPY_XERIAL: &[u8] = include_bytes!("../../../tests/data/kafka_python_snappy_xerial.bin");
const SNAPPY_RAW: &[u8] = include_bytes!("../../../tests/data/kafka_python_snappy_raw.bin");
const LZ4: &[u8] = include_bytes!("../../../tests/data/kafka_python_lz4.bin");
const ZSTD: &[u8] = include_bytes!("../../../tests/data/kafka_python_zstd.bin");

/// Record `i` of the kafka-python batches.
fn expected_record(i: usize) -> Record {
    let key = (i != 3).then(|| Bytes::from(format!("key-{i}")));
    let value = (i != 5).then(|| {
        Bytes::from(format!("record {i} says hello to kafka; ").repeat(1 + (i * 37) % 200))
    });
    Record {
        offset: i as i64,
        timestamp: 1_700_000_000_000 + i as i64 * 3,
        key,
        value,
        headers: vec![
            RecordHeader::new("trace", Some(Bytes::from(format!("t{i}")))),
            RecordHeader::new("dup", None),
            RecordHeader::new("dup", Some(Bytes::from_static(b"x"))),
        ],
        attributes: 0,
    }
}

fn collect(batch: &RecordBatch) -> Vec<Record> {
    batch.records().unwrap().collect::<Result<_, _>>().unwrap()
}

#[test]
fn reads_batches_written_by_kafka_python() {
    for (data, codec, xerial) in [
        (GZIP, Compression::Gzip, false),
        (SNAPPY_XERIAL, Compression::Snappy, true),
        (SNAPPY_RAW, Compression::Snappy, false),
        (LZ4, Compression::Lz4, false),
        (ZSTD, Compression::Zstd, false),
    ] {
        let batch = RecordBatch::parse(Bytes::from_static(data)).unwrap();
        batch.verify_crc().unwrap();
        assert_eq!(batch.compression(), codec);
        assert_eq!(
            (
                batch.producer_id(),
                batch.producer_epoch(),
                batch.base_sequence()
            ),
            (4242, 1, 17)
        );
        assert_eq!(batch.record_count(), 40);
        let body = &data[BATCH_HEADER_LEN..];
        assert_eq!(body.starts_with(&XERIAL_MAGIC), xerial, "{codec}");
        let records = collect(&batch);
        assert_eq!(records.len(), 40, "{codec}");
        for (i, r) in records.iter().enumerate() {
            assert_eq!(r, &expected_record(i), "{codec} record {i}");
        }
        // The decompressed section is larger than one xerial block and one LZ4
        // block, so the multi-block paths were taken.
        let plain = decompress(codec, body, &DecompressionLimits::default()).unwrap();
        assert!(plain.len() > 100 * 1024, "{codec}: {}", plain.len());
    }
}

#[test]
fn keys_and_values_are_slices_of_one_decompressed_buffer() {
    let batch = RecordBatch::parse(Bytes::from_static(ZSTD)).unwrap();
    let records = collect(&batch);
    let first = records[0].key.as_ref().unwrap().as_ptr() as usize;
    let last = records[39].value.as_ref().unwrap();
    let end = last.as_ptr() as usize + last.len();
    // Everything lies within one allocation about the size of the records section.
    let plain = decompress(
        Compression::Zstd,
        &ZSTD[BATCH_HEADER_LEN..],
        &DecompressionLimits::default(),
    )
    .unwrap();
    assert!(end > first && end - first <= plain.len());
}

/// A records section of `n` records, uncompressed, and the batch header fields
/// to go with it.
fn sample_records(n: usize) -> RecordBatchBuilder {
    let mut b = RecordBatchBuilder::new(1_000).producer(9, 2, 5);
    for i in 0..n {
        let value = format!("value {i} ").repeat(i % 100);
        let headers = [RecordHeader::new(
            "h",
            Some(Bytes::from(vec![i as u8; i % 7])),
        )];
        b.push(
            1_000 + i as i64,
            Some(format!("k{i}").as_bytes()),
            Some(value.as_bytes()),
            &headers,
        );
    }
    b
}

/// The records section of an uncompressed batch.
fn plain_section(n: usize) -> Bytes {
    sample_records(n).finish().slice(BATCH_HEADER_LEN..)
}

/// A batch with a valid CRC around `section`, compressed with `codec`.
fn wrap(codec: Compression, count: i32, section: &[u8]) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i64(0);
    buf.put_i32((BATCH_HEADER_LEN - LOG_OVERHEAD + section.len()) as i32);
    buf.put_i32(-1);
    buf.put_i8(2);
    buf.put_u32(0);
    buf.put_i16(codec.bits());
    buf.put_i32(count.max(1) - 1);
    buf.put_i64(1_000);
    buf.put_i64(1_000 + count as i64);
    buf.put_i64(9);
    buf.put_i16(2);
    buf.put_i32(5);
    buf.put_i32(count);
    buf.put_slice(section);
    batch::write_crc(&mut buf);
    buf.freeze()
}

/// Decodes `stream` as the records section of a `codec` batch of `n` sample
/// records and checks the records.
fn check_stream(codec: Compression, n: usize, stream: &[u8]) {
    let batch = RecordBatch::parse(wrap(codec, n as i32, stream)).unwrap();
    batch.verify_crc().unwrap();
    let expected = RecordBatch::parse(sample_records(n).finish()).unwrap();
    assert_eq!(collect(&batch), collect(&expected), "{codec}");
}

#[test]
fn reads_streams_made_with_each_library_in_other_forms() {
    let plain = plain_section(600);
    assert!(plain.len() > 256 * 1024);

    // gzip: two members back to back, as a concatenating writer would produce.
    let (a, b) = plain.split_at(plain.len() / 3);
    let mut gz = Vec::new();
    for part in [a, b] {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(part).unwrap();
        gz.extend(e.finish().unwrap());
    }
    check_stream(Compression::Gzip, 600, &gz);

    // Snappy: one raw block (librdkafka), and xerial streams concatenated with a
    // second header in the middle and uneven block sizes.
    let raw = snap::raw::Encoder::new().compress_vec(&plain).unwrap();
    check_stream(Compression::Snappy, 600, &raw);
    let mut xerial = Vec::new();
    for (part, block) in [(a, 1000), (b, 50_000)] {
        xerial.extend_from_slice(&XERIAL_MAGIC);
        xerial.extend_from_slice(&1i32.to_be_bytes());
        xerial.extend_from_slice(&1i32.to_be_bytes());
        for chunk in part.chunks(block) {
            let c = snap::raw::Encoder::new().compress_vec(chunk).unwrap();
            xerial.extend_from_slice(&(c.len() as i32).to_be_bytes());
            xerial.extend_from_slice(&c);
        }
    }
    check_stream(Compression::Snappy, 600, &xerial);

    // LZ4: linked 256 KiB blocks with block and content checksums and the content
    // size, which we never write but other clients may.
    let info = lz4_flex::frame::FrameInfo::new()
        .block_size(lz4_flex::frame::BlockSize::Max256KB)
        .block_mode(lz4_flex::frame::BlockMode::Linked)
        .block_checksums(true)
        .content_checksum(true)
        .content_size(Some(plain.len() as u64));
    let mut e = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
    e.write_all(&plain).unwrap();
    let lz = e.finish().unwrap();
    check_stream(Compression::Lz4, 600, &lz);

    // Zstandard: a streaming frame without content size but with a checksum, then
    // a second frame.
    let mut zs = Vec::new();
    let mut e = ::zstd::stream::write::Encoder::new(&mut zs, 19).unwrap();
    e.include_checksum(true).unwrap();
    e.write_all(a).unwrap();
    e.finish().unwrap();
    zs.extend(::zstd::bulk::compress(b, 1).unwrap());
    check_stream(Compression::Zstd, 600, &zs);
}

#[test]
fn writes_the_framing_the_java_client_writes() {
    let plain = plain_section(200);
    assert!(plain.len() > 2 * XERIAL_BLOCK_SIZE);

    let mut out = BytesMut::new();
    compress(Compression::Snappy, None, &plain, &mut out);
    assert_eq!(&out[..8], &XERIAL_MAGIC);
    assert_eq!(&out[8..16], &[0, 0, 0, 1, 0, 0, 0, 1]);
    // Blocks of 32 KiB of input, each a raw Snappy block the library reads alone.
    let mut rest = &out[16..];
    let mut blocks = Vec::new();
    while !rest.is_empty() {
        let len = i32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        blocks.push(
            snap::raw::Decoder::new()
                .decompress_vec(&rest[4..4 + len])
                .unwrap(),
        );
        rest = &rest[4 + len..];
    }
    assert!(blocks[..blocks.len() - 1]
        .iter()
        .all(|b| b.len() == XERIAL_BLOCK_SIZE));
    assert_eq!(blocks.concat(), plain);

    // LZ4: magic, FLG 0x60 (version 1, independent blocks), BD 0x40 (64 KiB) and
    // the header checksum 0x82, byte for byte what Kafka's Java client writes.
    let mut out = BytesMut::new();
    compress(Compression::Lz4, None, &plain, &mut out);
    assert_eq!(&out[..7], &[0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, 0x82]);
    assert_eq!(&out[out.len() - 4..], &[0, 0, 0, 0]);
    let mut d = lz4_flex::frame::FrameDecoder::new(&out[..]);
    let mut back = Vec::new();
    std::io::Read::read_to_end(&mut d, &mut back).unwrap();
    assert_eq!(back, plain);

    // gzip: a plain gzip member; Zstandard: one frame with the content size.
    let mut out = BytesMut::new();
    compress(Compression::Gzip, None, &plain, &mut out);
    assert_eq!(&out[..3], &[0x1f, 0x8b, 8]);
    let mut back = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&out[..]), &mut back).unwrap();
    assert_eq!(back, plain);
    let mut out = BytesMut::new();
    compress(Compression::Zstd, None, &plain, &mut out);
    assert_eq!(
        ::zstd::zstd_safe::get_frame_content_size(&out).ok(),
        Some(Some(plain.len() as u64))
    );
    assert_eq!(::zstd::decode_all(&out[..]).unwrap(), plain);
}

#[test]
fn builder_compresses_once_and_the_crc_covers_the_compressed_bytes() {
    for codec in CODECS {
        let builder = sample_records(100).compression(codec);
        let uncompressed = builder.size_bytes();
        let bytes = builder.finish();
        assert!(bytes.len() < uncompressed / 2, "{codec}");
        let batch = RecordBatch::parse(bytes.clone()).unwrap();
        batch.verify_crc().unwrap();
        assert_eq!(batch.compression(), codec);
        assert_eq!(batch.attributes() & 0x07, codec.bits());
        assert_eq!(batch.batch_length() as usize + LOG_OVERHEAD, bytes.len());
        let expected = RecordBatch::parse(sample_records(100).finish()).unwrap();
        assert_eq!(collect(&batch), collect(&expected));
        // The same records give the same bytes: nothing random is written.
        assert_eq!(sample_records(100).compression(codec).finish(), bytes);

        // Every compressed byte is covered by the CRC.
        for at in (BATCH_HEADER_LEN..bytes.len()).step_by(7) {
            let mut m = bytes.to_vec();
            m[at] ^= 0x10;
            let m = RecordBatch::parse(Bytes::from(m)).unwrap();
            assert!(m.verify_crc().is_err(), "{codec} byte {at}");
        }
        // The broker's header rewrites keep it valid.
        let mut m = bytes.to_vec();
        set_base_offset(&mut m, 1234);
        set_partition_leader_epoch(&mut m, 7);
        let m = RecordBatch::parse(Bytes::from(m)).unwrap();
        m.verify_crc().unwrap();
        assert_eq!(collect(&m)[3].offset, 1237);
    }
}

#[test]
fn empty_and_tiny_batches_round_trip() {
    for codec in CODECS {
        let bytes = RecordBatchBuilder::new(5).compression(codec).finish();
        let batch = RecordBatch::parse(bytes).unwrap();
        batch.verify_crc().unwrap();
        assert_eq!(batch.compression(), codec);
        assert!(collect(&batch).is_empty());

        let mut b = RecordBatchBuilder::new(5).compression(codec);
        b.push(5, None, Some(b"x"), &[]);
        let batch = RecordBatch::parse(b.finish()).unwrap();
        assert_eq!(collect(&batch)[0].value.as_deref(), Some(&b"x"[..]));
    }
    // An empty compressed section is read as no records.
    for codec in CODECS {
        let batch = RecordBatch::parse(wrap(codec, 0, &[])).unwrap();
        assert!(collect(&batch).is_empty());
        let batch = RecordBatch::parse(wrap(codec, 1, &[])).unwrap();
        assert!(batch.records().unwrap().next().unwrap().is_err());
    }
}

#[test]
fn levels_are_applied_and_clamped() {
    let plain = plain_section(300);
    let size = |codec, level| {
        let mut out = BytesMut::new();
        compress(codec, level, &plain, &mut out);
        let back = decompress(codec, &out, &DecompressionLimits::default()).unwrap();
        assert_eq!(back, plain);
        out.len()
    };
    assert!(size(Compression::Gzip, Some(1)) > size(Compression::Gzip, Some(9)));
    assert_eq!(
        size(Compression::Gzip, Some(100)),
        size(Compression::Gzip, Some(9))
    );
    assert_eq!(
        size(Compression::Gzip, Some(-5)),
        size(Compression::Gzip, Some(1))
    );
    assert_eq!(
        size(Compression::Gzip, None),
        size(Compression::Gzip, Some(6))
    );
    assert!(size(Compression::Zstd, Some(1)) > size(Compression::Zstd, Some(19)));
    assert_eq!(
        size(Compression::Zstd, None),
        size(Compression::Zstd, Some(3))
    );
    assert_eq!(
        size(Compression::Zstd, Some(99)),
        size(Compression::Zstd, Some(22))
    );
    let _ = size(Compression::Zstd, Some(-1000));
    assert_eq!(
        size(Compression::Lz4, Some(17)),
        size(Compression::Lz4, None)
    );
    assert_eq!(
        size(Compression::Snappy, Some(3)),
        size(Compression::Snappy, None)
    );

    assert_eq!(Compression::Gzip.effective_level(Some(0)), Some(1));
    assert_eq!(Compression::Zstd.effective_level(None), Some(3));
    assert_eq!(Compression::Lz4.effective_level(Some(5)), None);

    let a = sample_records(50)
        .compression(Compression::Gzip)
        .compression_level(1)
        .finish();
    let b = sample_records(50)
        .compression(Compression::Gzip)
        .compression_level(9)
        .finish();
    assert!(a.len() > b.len());
    for bytes in [a, b] {
        assert_eq!(collect(&RecordBatch::parse(bytes).unwrap()).len(), 50);
    }
}

#[test]
fn names_and_support() {
    for codec in Compression::ALL {
        assert_eq!(Compression::from_name(codec.name()), Some(codec));
        assert_eq!(codec.to_string(), codec.name());
        assert!(codec.is_supported());
        assert_eq!(Compression::from_attributes(codec.bits()), Ok(codec));
    }
    assert_eq!(Compression::from_name("ZSTD"), Some(Compression::Zstd));
    assert_eq!(Compression::from_name("brotli"), None);
}

#[test]
fn limits() {
    let d = DecompressionLimits::default();
    assert_eq!(d.limit_for(0), DEFAULT_RATIO_ALLOWANCE);
    assert_eq!(d.limit_for(100), DEFAULT_RATIO_ALLOWANCE);
    assert_eq!(d.limit_for(10_000), 10_000 * DEFAULT_MAX_RATIO);
    assert_eq!(d.limit_for(1 << 30), DEFAULT_MAX_DECOMPRESSED);
    assert_eq!(d.limit_for(usize::MAX), DEFAULT_MAX_DECOMPRESSED);
    let only = DecompressionLimits::max_bytes(1000);
    assert_eq!(only.limit_for(1), 1000);
    assert_eq!(only.limit_for(usize::MAX), 1000);

    assert_eq!(zstd::window_log_max(0), 23);
    assert_eq!(zstd::window_log_max(1 << 20), 23);
    assert_eq!(zstd::window_log_max((1 << 25) + 1), 26);
    assert_eq!(zstd::window_log_max(DEFAULT_MAX_DECOMPRESSED), 27);
    assert_eq!(zstd::window_log_max(usize::MAX), 27);
}

#[test]
fn output_is_capped_exactly_at_the_limit() {
    let plain: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    for codec in CODECS {
        let mut out = BytesMut::new();
        compress(codec, None, &plain, &mut out);
        let at = DecompressionLimits::max_bytes(plain.len());
        assert_eq!(decompress(codec, &out, &at).unwrap(), plain, "{codec}");
        let under = DecompressionLimits::max_bytes(plain.len() - 1);
        assert_eq!(
            decompress(codec, &out, &under),
            Err(DecodeError::DecompressedTooLarge {
                codec,
                limit: plain.len() - 1
            }),
            "{codec}"
        );
    }
    // The default ratio stops a small, very repetitive Zstandard section.
    let zeros = vec![0u8; 64 << 20];
    let bomb = ::zstd::bulk::compress(&zeros, 19).unwrap();
    let limit = DecompressionLimits::default().limit_for(bomb.len());
    assert!(limit < zeros.len());
    assert_eq!(
        decompress(Compression::Zstd, &bomb, &DecompressionLimits::default()),
        Err(DecodeError::DecompressedTooLarge {
            codec: Compression::Zstd,
            limit
        })
    );
    // And a batch reports it from `records`.
    let batch = RecordBatch::parse(wrap(Compression::Zstd, 1, &bomb)).unwrap();
    assert!(matches!(
        batch.records(),
        Err(DecodeError::DecompressedTooLarge { .. })
    ));
    assert!(batch
        .records_with_limits(&DecompressionLimits::max_bytes(zeros.len()))
        .is_ok());
}

#[test]
fn zstd_frames_asking_for_huge_windows_need_a_large_limit() {
    // A streaming frame (no content size) at level 22 asks for a 128 MiB window.
    let plain = plain_section(20);
    let mut zs = Vec::new();
    let mut e = ::zstd::stream::write::Encoder::new(&mut zs, 22).unwrap();
    e.long_distance_matching(true).unwrap();
    e.window_log(27).unwrap();
    e.write_all(&plain).unwrap();
    e.finish().unwrap();
    let small = DecompressionLimits::max_bytes(1 << 20);
    assert!(matches!(
        decompress(Compression::Zstd, &zs, &small),
        Err(DecodeError::CorruptCompression { .. })
    ));
    let large = DecompressionLimits::max_bytes(1 << 27);
    assert_eq!(decompress(Compression::Zstd, &zs, &large).unwrap(), plain);
}

#[test]
fn truncated_and_trailing_streams_are_errors() {
    let plain = plain_section(120);
    let limits = DecompressionLimits::default();
    for codec in CODECS {
        let mut out = BytesMut::new();
        compress(codec, None, &plain, &mut out);
        let mut rng = Rng::new(codec.bits() as u64);
        let mut cuts: Vec<usize> = (1..out.len()).step_by(97).collect();
        cuts.extend((1..20).map(|_| rng.below(out.len() as u64) as usize + 1));
        cuts.extend(out.len().saturating_sub(12)..out.len());
        for cut in cuts {
            let cut = cut.min(out.len() - 1).max(1);
            let r = decompress(codec, &out[..cut], &limits);
            assert!(
                matches!(r, Err(DecodeError::CorruptCompression { .. })),
                "{codec} cut at {cut} of {}: {:?}",
                out.len(),
                r.map(|b| b.len())
            );
        }
        for tail in [&[0u8][..], &[1, 2, 3, 4, 5, 6, 7, 8, 9]] {
            let mut t = out.to_vec();
            t.extend_from_slice(tail);
            assert!(
                decompress(codec, &t, &limits).is_err(),
                "{codec} with trailing {tail:?}"
            );
        }
    }
}

#[test]
fn lz4_reads_exactly_one_whole_frame() {
    let plain = plain_section(300);
    let mut out = BytesMut::new();
    compress(Compression::Lz4, None, &plain, &mut out);
    let limits = DecompressionLimits::default();
    // Header of 7 bytes, then the first block's length and data.
    let first = u32::from_le_bytes(out[7..11].try_into().unwrap()) & 0x7fff_ffff;
    let boundary = 11 + first as usize;
    assert!(boundary < out.len() - 4);
    assert!(matches!(
        decompress(Compression::Lz4, &out[..boundary], &limits),
        Err(DecodeError::CorruptCompression { .. })
    ));
    // Like the Java client, one frame is read: a second frame, or a skippable frame
    // (neither of which any Kafka client writes), is refused.
    let (a, b) = plain.split_at(plain.len() / 2);
    let mut two = BytesMut::new();
    compress(Compression::Lz4, None, a, &mut two);
    compress(Compression::Lz4, None, b, &mut two);
    assert!(matches!(
        decompress(Compression::Lz4, &two, &limits),
        Err(DecodeError::CorruptCompression { .. })
    ));
    let mut s = vec![0x5a, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 1, 2, 3];
    s.extend_from_slice(&out);
    assert!(matches!(
        decompress(Compression::Lz4, &s, &limits),
        Err(DecodeError::CorruptCompression { .. })
    ));
}

#[test]
fn garbage_sections_are_typed_errors() {
    for codec in CODECS {
        let batch = RecordBatch::parse(wrap(codec, 1, &[1, 2, 3])).unwrap();
        batch.verify_crc().unwrap();
        assert!(
            matches!(
                batch.records(),
                Err(DecodeError::CorruptCompression { codec: c, .. }) if c == codec
            ),
            "{codec}"
        );
    }
    // A snappy block announcing more than the limit is refused before allocating.
    let mut claim = Vec::new();
    let mut n = u32::MAX as u64;
    while n >= 0x80 {
        claim.push((n as u8) | 0x80);
        n >>= 7;
    }
    claim.push(n as u8);
    assert!(matches!(
        decompress(Compression::Snappy, &claim, &DecompressionLimits::default()),
        Err(DecodeError::DecompressedTooLarge { .. })
    ));
    // Xerial framing errors: negative and overlong block lengths, a cut header.
    let mut x = XERIAL_MAGIC.to_vec();
    x.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
    for tail in [&[0xff, 0xff, 0xff, 0xff][..], &[0, 0, 1, 0, 0], &[0, 0]] {
        let mut s = x.clone();
        s.extend_from_slice(tail);
        assert!(matches!(
            decompress(Compression::Snappy, &s, &DecompressionLimits::default()),
            Err(DecodeError::CorruptCompression { .. })
        ));
    }
    assert!(matches!(
        decompress(
            Compression::Snappy,
            &x[..12],
            &DecompressionLimits::default()
        ),
        Err(DecodeError::CorruptCompression { .. })
    ));
    // A header alone is an empty stream.
    assert_eq!(
        decompress(Compression::Snappy, &x, &DecompressionLimits::default()),
        Ok(Bytes::new())
    );
}

/// A record as the property tests generate it.
#[derive(Debug, Clone)]
struct TestRecord {
    timestamp: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
}

fn bytes_strategy() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        4 => proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64)),
        2 => proptest::option::of(proptest::collection::vec(0u8..4, 0..512)),
        1 => Just(None),
        1 => (any::<u8>(), 0usize..100_000).prop_map(|(b, n)| Some(vec![b; n])),
    ]
}

fn record_strategy() -> impl Strategy<Value = TestRecord> {
    let header = (
        "[a-z]{0,8}",
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..16)),
    );
    (
        any::<i64>(),
        bytes_strategy(),
        bytes_strategy(),
        proptest::collection::vec(header, 0..4),
    )
        .prop_map(|(timestamp, key, value, headers)| TestRecord {
            timestamp,
            key,
            value,
            headers,
        })
}

fn codec_strategy() -> impl Strategy<Value = Compression> {
    prop::sample::select(CODECS.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn compressed_builder_round_trips(
        codec in codec_strategy(),
        level in proptest::option::of(-10i32..25),
        base_timestamp in any::<i64>(),
        records in proptest::collection::vec(record_strategy(), 0..12),
    ) {
        let mut b = RecordBatchBuilder::new(base_timestamp).producer(1, 2, 3).compression(codec);
        if let Some(level) = level {
            b = b.compression_level(level);
        }
        let mut plain = RecordBatchBuilder::new(base_timestamp).producer(1, 2, 3);
        for r in &records {
            let headers: Vec<RecordHeader> = r
                .headers
                .iter()
                .map(|(k, v)| RecordHeader::new(k.clone(), v.clone().map(Bytes::from)))
                .collect();
            b.push(r.timestamp, r.key.as_deref(), r.value.as_deref(), &headers);
            plain.push(r.timestamp, r.key.as_deref(), r.value.as_deref(), &headers);
        }
        let batch = RecordBatch::parse(b.finish()).unwrap();
        prop_assert!(batch.verify_crc().is_ok());
        prop_assert_eq!(batch.compression(), codec);
        let plain = RecordBatch::parse(plain.finish()).unwrap();
        // Only the attributes, batch length, CRC and records section differ.
        prop_assert_eq!(&batch.as_bytes()[23..BATCH_HEADER_LEN], &plain.as_bytes()[23..BATCH_HEADER_LEN]);
        let decoded: Vec<Record> = batch.records().unwrap().collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(decoded.len(), records.len());
        for (i, (d, r)) in decoded.iter().zip(&records).enumerate() {
            prop_assert_eq!(d.offset, i as i64);
            prop_assert_eq!(d.timestamp, r.timestamp);
            prop_assert_eq!(d.key.as_deref(), r.key.as_deref());
            prop_assert_eq!(d.value.as_deref(), r.value.as_deref());
            let headers: Vec<(String, Option<Vec<u8>>)> = d
                .headers
                .iter()
                .map(|h| (h.key.clone(), h.value.as_ref().map(|v| v.to_vec())))
                .collect();
            prop_assert_eq!(&headers, &r.headers);
        }
        prop_assert_eq!(decoded, plain.records().unwrap().collect::<Result<Vec<_>, _>>().unwrap());
    }
}

/// Decompresses `input` with every codec under a small limit: each result is an
/// error or fits the limit.
fn every_decompressor(input: &[u8]) -> Result<(), TestCaseError> {
    let limits = DecompressionLimits {
        max_bytes: 256 * 1024,
        ..DecompressionLimits::default()
    };
    for codec in Compression::ALL {
        match decompress(codec, input, &limits) {
            Ok(out) => prop_assert!(out.len() <= limits.limit_for(input.len())),
            Err(
                DecodeError::CorruptCompression { codec: c, .. }
                | DecodeError::DecompressedTooLarge { codec: c, .. },
            ) => prop_assert_eq!(c, codec),
            Err(e) => prop_assert!(false, "{codec}: unexpected error {e:?}"),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_are_an_error_or_bounded(
        data in proptest::collection::vec(any::<u8>(), 0..1024),
        prefix in prop::sample::select(vec![
            Vec::new(),
            XERIAL_MAGIC.to_vec(),
            [&XERIAL_MAGIC[..], &[0, 0, 0, 1, 0, 0, 0, 1]].concat(),
            vec![0x04, 0x22, 0x4d, 0x18],
            vec![0x28, 0xb5, 0x2f, 0xfd],
            vec![0x1f, 0x8b, 0x08, 0x00],
        ]),
    ) {
        let mut input = prefix;
        input.extend_from_slice(&data);
        every_decompressor(&input)?;
    }

    #[test]
    fn mutated_streams_are_an_error_or_bounded(
        seed in any::<u64>(),
        codec in codec_strategy(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        truncate in any::<prop::sample::Index>(),
    ) {
        let mut rng = Rng::new(seed);
        let plain = plain_section(rng.below(80) as usize);
        let mut out = BytesMut::new();
        compress(codec, None, &plain, &mut out);
        let mut m = out.to_vec();
        for (at, byte) in edits {
            let i = at.index(m.len());
            m[i] = byte;
        }
        every_decompressor(&m)?;
        every_decompressor(&m[..truncate.index(m.len() + 1)])?;
    }
}
