//! Decompressing hostile records sections never holds more memory than the
//! decompression limit plus a fixed amount of codec state.
//!
//! A counting global allocator tracks, per thread, the bytes currently allocated
//! and their peak. Decompression bombs (huge, highly compressible payloads) must end
//! in `DecompressedTooLarge` with a peak near the limit, not near the payload; and
//! arbitrary or mutated input must stay within the same bound. Zstandard's C
//! library allocates through this allocator too (the `with-rust-allocator`
//! feature), so its window and contexts are counted.

#![cfg(all(
    feature = "gzip",
    feature = "snappy",
    feature = "lz4",
    feature = "zstd"
))]
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write;

use baton_protocol::record::{
    decompress, Compression, DecompressionLimits, RecordBatch, RecordBatchBuilder,
    BATCH_HEADER_LEN, XERIAL_MAGIC,
};
use baton_protocol::DecodeError;
use bytes::{BufMut, Bytes, BytesMut};
use proptest::prelude::*;

struct Counting;

thread_local! {
    static CURRENT: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn add(n: usize) {
    let _ = CURRENT.try_with(|c| {
        let now = c.get() + n;
        c.set(now);
        let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
    });
}

fn sub(n: usize) {
    let _ = CURRENT.try_with(|c| c.set(c.get().saturating_sub(n)));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        add(layout.size());
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        add(layout.size());
        System.alloc_zeroed(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        sub(layout.size());
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Old and new blocks may both be live while the contents move.
        add(new_size);
        let p = System.realloc(ptr, layout, new_size);
        sub(layout.size());
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Peak bytes allocated on this thread while running `f`, above what was
/// allocated before.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = CURRENT.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let out = f();
    (out, PEAK.with(Cell::get) - base)
}

/// Codec state a decoder may hold besides its output: LZ4 block buffers for the
/// largest (4 MiB) block size, or a Zstandard window of 8 MiB plus contexts.
const CODEC_STATE: usize = 10 << 20;

const CODECS: [Compression; 4] = [
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

/// `len` zero bytes compressed with `codec`, written in pieces so that building
/// the bomb does not itself need `len` bytes at once.
fn bomb(codec: Compression, len: usize) -> Vec<u8> {
    let piece = vec![0u8; 1 << 20];
    let pieces = len / piece.len();
    match codec {
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            for _ in 0..pieces {
                e.write_all(&piece).unwrap();
            }
            e.finish().unwrap()
        }
        Compression::Snappy => {
            // Xerial blocks of 1 MiB each, so the output grows block by block.
            let mut out = XERIAL_MAGIC.to_vec();
            out.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
            let block = snap::raw::Encoder::new().compress_vec(&piece).unwrap();
            for _ in 0..pieces {
                out.extend_from_slice(&(block.len() as i32).to_be_bytes());
                out.extend_from_slice(&block);
            }
            out
        }
        Compression::Lz4 => {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            for _ in 0..pieces {
                e.write_all(&piece).unwrap();
            }
            e.finish().unwrap()
        }
        Compression::Zstd => {
            let mut e = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
            for _ in 0..pieces {
                e.write_all(&piece).unwrap();
            }
            e.finish().unwrap()
        }
        Compression::None => unreachable!(),
    }
}

/// A batch with a valid CRC around a compressed records section.
fn batch_around(codec: Compression, section: &[u8]) -> RecordBatch {
    let mut buf = BytesMut::new();
    buf.put_i64(0);
    buf.put_i32((BATCH_HEADER_LEN - 12 + section.len()) as i32);
    buf.put_i32(-1);
    buf.put_i8(2);
    buf.put_u32(0);
    buf.put_i16(codec.bits());
    buf.put_i32(0);
    buf.put_i64(0);
    buf.put_i64(0);
    buf.put_i64(-1);
    buf.put_i16(-1);
    buf.put_i32(-1);
    buf.put_i32(1);
    buf.put_slice(section);
    let crc = crc32c::crc32c(&buf[21..]);
    buf[17..21].copy_from_slice(&crc.to_be_bytes());
    RecordBatch::parse(buf.freeze()).unwrap()
}

#[test]
fn bombs_stop_at_the_limit() {
    let payload = 24 << 20;
    let limits = DecompressionLimits::max_bytes(2 << 20);
    for codec in CODECS {
        let section = bomb(codec, payload);
        assert!(section.len() < payload / 20, "{codec}: {}", section.len());
        let (result, peak) = peak_during(|| decompress(codec, &section, &limits));
        assert_eq!(
            result,
            Err(DecodeError::DecompressedTooLarge {
                codec,
                limit: 2 << 20
            })
        );
        let bound = 2 * limits.max_bytes + CODEC_STATE;
        assert!(
            peak <= bound,
            "{codec}: peak {peak} bytes for a {}-byte bomb of {payload} bytes (bound {bound})",
            section.len()
        );
        println!("{codec}: {} compressed bytes, peak {peak}", section.len());

        // The same through a batch with the default limits: the ratio stops
        // Zstandard; the others reach the payload size within 100 MiB.
        let batch = batch_around(codec, &section);
        batch.verify_crc().unwrap();
        let default = DecompressionLimits::default().limit_for(section.len());
        let (result, peak) = peak_during(|| batch.records().map(|_| ()));
        if default < payload {
            assert!(
                matches!(result, Err(DecodeError::DecompressedTooLarge { .. })),
                "{codec}: {result:?}"
            );
        }
        assert!(
            peak <= 2 * default.min(payload) + CODEC_STATE,
            "{codec}: peak {peak} with the default limit {default}"
        );
    }
}

#[test]
fn snappy_blocks_announcing_huge_sizes_allocate_nothing_big() {
    // A raw block announcing 4 GiB, and a xerial stream whose blocks each announce
    // the most a block may.
    let mut raw = Vec::new();
    let mut n = u32::MAX as u64;
    while n >= 0x80 {
        raw.push((n as u8) | 0x80);
        n >>= 7;
    }
    raw.push(n as u8);
    raw.extend_from_slice(&[0; 16]);
    let (result, peak) =
        peak_during(|| decompress(Compression::Snappy, &raw, &DecompressionLimits::default()));
    assert!(matches!(
        result,
        Err(DecodeError::DecompressedTooLarge { .. })
    ));
    assert!(peak < 64 * 1024, "peak {peak}");
}

/// Every decompressor's peak for `input` stays within its limit plus codec state.
fn check_bounded(input: &[u8]) -> Result<(), TestCaseError> {
    let limits = DecompressionLimits::default();
    let limit = limits.limit_for(input.len());
    for codec in CODECS {
        let (result, peak) = peak_during(|| decompress(codec, input, &limits));
        if let Ok(out) = &result {
            prop_assert!(out.len() <= limit);
        }
        prop_assert!(
            peak <= 2 * limit + CODEC_STATE,
            "{}: peak {} for {} input bytes (limit {})",
            codec,
            peak,
            input.len(),
            limit
        );
    }
    Ok(())
}

fn sample_section(n: usize, codec: Compression) -> Bytes {
    let mut b = RecordBatchBuilder::new(0).compression(codec);
    for i in 0..n {
        b.push(
            i as i64,
            Some(b"key"),
            Some(format!("value {i}").repeat(i).as_bytes()),
            &[],
        );
    }
    b.finish().slice(BATCH_HEADER_LEN..)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_input_is_bounded(
        data in proptest::collection::vec(any::<u8>(), 0..2048),
        prefix in prop::sample::select(vec![
            Vec::new(),
            [&XERIAL_MAGIC[..], &[0, 0, 0, 1, 0, 0, 0, 1]].concat(),
            vec![0x04, 0x22, 0x4d, 0x18, 0x60, 0x70, 0x73],
            vec![0x04, 0x22, 0x4d, 0x18],
            vec![0x28, 0xb5, 0x2f, 0xfd],
            vec![0x1f, 0x8b, 0x08, 0x00],
        ]),
    ) {
        let mut input = prefix;
        input.extend_from_slice(&data);
        check_bounded(&input)?;
    }

    #[test]
    fn mutated_streams_are_bounded(
        n in 0usize..60,
        codec in prop::sample::select(CODECS.to_vec()),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let mut m = sample_section(n, codec).to_vec();
        for (at, byte) in edits {
            let i = at.index(m.len());
            m[i] = byte;
        }
        check_bounded(&m)?;
    }
}

#[test]
fn compressing_a_batch_allocates_about_its_size() {
    // The builder compresses into the output buffer; the peak stays a small
    // multiple of the uncompressed batch (codec state aside).
    for codec in CODECS {
        let mut b = RecordBatchBuilder::new(0).compression(codec);
        let value = vec![7u8; 1 << 20];
        b.push(0, None, Some(&value), &[]);
        let size = b.size_bytes();
        let (bytes, peak) = peak_during(move || b.finish());
        assert!(bytes.len() < size);
        assert!(
            peak <= 3 * size + CODEC_STATE,
            "{codec}: peak {peak} for {size}"
        );
    }
}
