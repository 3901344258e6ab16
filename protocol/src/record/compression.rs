//! Compression of a batch's records section: gzip, Snappy, LZ4 and Zstandard, each
//! behind the cargo feature of the same name (all on by default).
//!
//! Only the records section (everything after the 61-byte batch header) is
//! compressed, and the batch's CRC-32C covers the compressed bytes as stored.
//!
//! | codec  | bits | written as                                   | read                                      |
//! |--------|-----:|----------------------------------------------|-------------------------------------------|
//! | gzip   | 1    | one gzip member (RFC 1952), level 1-9        | one or more concatenated members          |
//! | snappy | 2    | xerial framing, 32 KiB blocks (Java client)  | xerial framing, or one raw block (librdkafka) |
//! | lz4    | 3    | LZ4 frame, independent 64 KiB blocks, no checksums (Java client) | one LZ4 frame: any block size, linked or independent blocks, optional checksums and content size |
//! | zstd   | 4    | one frame with its content size, level -131072..=22 | one or more frames                  |
//!
//! The xerial framing, as `org.xerial.snappy.SnappyOutputStream` writes it: the
//! 8-byte magic `\x82SNAPPY\0`, the format version and the minimum compatible
//! version as big-endian `i32`s (both 1), then blocks of
//! `[i32 BE compressed length][raw Snappy block]`, each holding at most 32 KiB of
//! input. A stream without the magic is one raw Snappy block, as librdkafka writes.
//! The LZ4 frame's header checksum is the one the LZ4 frame format specifies
//! (magic v2 batches never carry the broken checksum of Kafka's pre-0.10 messages).
//!
//! # Limits
//!
//! Decompression never produces more than [`DecompressionLimits::limit_for`] bytes
//! for a records section of a given compressed size: by default at most
//! [`DEFAULT_MAX_DECOMPRESSED`] (100 MiB, the default maximum frame) and, above
//! [`DEFAULT_RATIO_ALLOWANCE`] (1 MiB), at most [`DEFAULT_MAX_RATIO`] (2048) times
//! the compressed size. gzip cannot exceed about 1032:1, LZ4 about 255:1 and Snappy
//! far less, so the ratio only stops pathological Zstandard input. Output is produced
//! in bounded chunks into a buffer that never grows past the limit, so a
//! decompression bomb ends in [`DecodeError::DecompressedTooLarge`] after allocating
//! about the limit, not the bomb's size. A corrupt or truncated stream is
//! [`DecodeError::CorruptCompression`]; no input panics. (A stream cut exactly
//! between two gzip members, Zstandard frames or xerial blocks is complete as far
//! as the codec can tell; the record iterator then reports the missing records.)
//!
//! Beyond the output, a decoder holds a bounded amount of state: LZ4 block buffers
//! (up to 2 × 4 MiB for the largest block size a frame may declare) and the
//! Zstandard window. A Zstandard frame may declare a window of up to 8 MiB, or up
//! to the output limit when that is larger (at most 128 MiB, zstd's default
//! maximum); a frame declaring more is refused as corrupt. Only levels 20-22 write
//! such windows, so only small batches written at those levels are affected.

use std::fmt;

use bytes::{Bytes, BytesMut};

use super::Compression;
use crate::error::DecodeError;
use crate::frame::DEFAULT_MAX_FRAME;

/// Default of [`DecompressionLimits::max_bytes`]: the default maximum frame size,
/// 100 MiB.
pub const DEFAULT_MAX_DECOMPRESSED: usize = DEFAULT_MAX_FRAME;

/// Default of [`DecompressionLimits::max_ratio`]: 2048 decompressed bytes per
/// compressed byte, above what gzip (about 1032:1), LZ4 (about 255:1) and Snappy can
/// reach, so only Zstandard input can hit it.
pub const DEFAULT_MAX_RATIO: usize = 2048;

/// Default of [`DecompressionLimits::ratio_allowance`]: every records section may
/// decompress to 1 MiB whatever its ratio.
pub const DEFAULT_RATIO_ALLOWANCE: usize = 1 << 20;

/// Input a single xerial block holds when writing, as the Java client's
/// `SnappyOutputStream` does.
pub const XERIAL_BLOCK_SIZE: usize = 32 * 1024;

/// The xerial framing's magic: `0x82 'S' 'N' 'A' 'P' 'P' 'Y' 0`.
pub const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];

/// Magic, version and compatible version.
#[cfg(feature = "snappy")]
const XERIAL_HEADER_LEN: usize = 16;

/// First size of the output buffer when the decompressed size is unknown.
const INITIAL_OUTPUT: usize = 16 * 1024;

/// How much a records section may decompress to.
///
/// The limit for a section of `n` compressed bytes is
/// `min(max_bytes, max(ratio_allowance, n * max_ratio))`; see
/// [`DecompressionLimits::limit_for`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DecompressionLimits {
    /// The most bytes any records section may decompress to. Bounds the memory one
    /// batch can take; defaults to [`DEFAULT_MAX_DECOMPRESSED`].
    pub max_bytes: usize,
    /// The most decompressed bytes per compressed byte. Bounds the amplification of
    /// small hostile batches, such as a fetch response full of tiny bombs; defaults
    /// to [`DEFAULT_MAX_RATIO`].
    pub max_ratio: usize,
    /// A size every records section may reach whatever its ratio (still capped by
    /// `max_bytes`), so that small, very repetitive batches are never refused;
    /// defaults to [`DEFAULT_RATIO_ALLOWANCE`].
    pub ratio_allowance: usize,
}

impl Default for DecompressionLimits {
    fn default() -> Self {
        DecompressionLimits {
            max_bytes: DEFAULT_MAX_DECOMPRESSED,
            max_ratio: DEFAULT_MAX_RATIO,
            ratio_allowance: DEFAULT_RATIO_ALLOWANCE,
        }
    }
}

impl DecompressionLimits {
    /// Limits with only an absolute cap: any ratio is allowed up to `max_bytes`.
    pub fn max_bytes(max_bytes: usize) -> Self {
        DecompressionLimits {
            max_bytes,
            max_ratio: usize::MAX,
            ratio_allowance: max_bytes,
        }
    }

    /// The most bytes a records section of `compressed_len` bytes may decompress to.
    pub fn limit_for(&self, compressed_len: usize) -> usize {
        let by_ratio = compressed_len
            .saturating_mul(self.max_ratio)
            .max(self.ratio_allowance);
        self.max_bytes.min(by_ratio)
    }
}

impl Compression {
    /// Every codec, in attribute-bit order.
    pub const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// Kafka's name of the codec, as in the `compression.type` setting: `none`,
    /// `gzip`, `snappy`, `lz4`, `zstd`.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    /// The codec with Kafka's name `name` (see [`Compression::name`]; ASCII case is
    /// ignored).
    pub fn from_name(name: &str) -> Option<Compression> {
        Compression::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(name))
    }

    /// Whether this build can compress and decompress the codec (its cargo feature
    /// is on). [`Compression::None`] always is.
    pub fn is_supported(self) -> bool {
        match self {
            Compression::None => true,
            Compression::Gzip => cfg!(feature = "gzip"),
            Compression::Snappy => cfg!(feature = "snappy"),
            Compression::Lz4 => cfg!(feature = "lz4"),
            Compression::Zstd => cfg!(feature = "zstd"),
        }
    }

    /// The compression levels the codec accepts when writing, or `None` if it has
    /// no levels here. gzip: 1-9; Zstandard: -131072 to 22. LZ4 has levels in the
    /// Java client (high-compression mode), but this crate always writes LZ4's fast
    /// mode, which the Java client also uses at its default level.
    pub fn level_range(self) -> Option<std::ops::RangeInclusive<i32>> {
        match self {
            Compression::Gzip => Some(1..=9),
            Compression::Zstd => Some(-131_072..=22),
            _ => None,
        }
    }

    /// The level used when none is set, the Java client's default: gzip 6
    /// (zlib's default), Zstandard 3.
    pub fn default_level(self) -> Option<i32> {
        match self {
            Compression::Gzip => Some(6),
            Compression::Zstd => Some(3),
            _ => None,
        }
    }

    /// `level` clamped into [`Compression::level_range`], or the default level if
    /// `level` is `None`; `None` for codecs without levels.
    pub fn effective_level(self, level: Option<i32>) -> Option<i32> {
        let range = self.level_range()?;
        let level = level.or(self.default_level())?;
        Some(level.clamp(*range.start(), *range.end()))
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Appends `input` compressed with `codec` to `out`, in the form the Java client
/// writes (see the [module docs](self)). `level` is clamped into the codec's range
/// and ignored by codecs without levels; `None` is the codec's default.
/// [`Compression::None`] copies `input`.
///
/// # Panics
///
/// If the codec's feature is off (check [`Compression::is_supported`]), or if the
/// codec library fails to allocate its state.
pub fn compress(codec: Compression, level: Option<i32>, input: &[u8], out: &mut BytesMut) {
    assert!(
        codec.is_supported(),
        "compression codec {codec} is not enabled in this build of baton-protocol"
    );
    #[allow(unused_variables)] // with neither gzip nor zstd
    let level = codec.effective_level(level);
    match codec {
        Compression::None => out.extend_from_slice(input),
        #[cfg(feature = "gzip")]
        Compression::Gzip => gzip::compress(level.unwrap_or(6), input, out),
        #[cfg(feature = "snappy")]
        Compression::Snappy => snappy::compress(input, out),
        #[cfg(feature = "lz4")]
        Compression::Lz4 => lz4::compress(input, out),
        #[cfg(feature = "zstd")]
        Compression::Zstd => zstd::compress(level.unwrap_or(3), input, out),
        #[allow(unreachable_patterns)]
        _ => unreachable!("checked by is_supported"),
    }
}

/// Decompresses a records section compressed with `codec`, producing at most
/// `limits.limit_for(input.len())` bytes.
///
/// An empty `input` decompresses to nothing for every codec. [`Compression::None`]
/// copies `input`, within the same limit. The result is one buffer; records decoded
/// from it are zero-copy slices of it.
///
/// # Errors
///
/// - [`DecodeError::UnsupportedCompression`] if the codec's feature is off;
/// - [`DecodeError::DecompressedTooLarge`] if the output would pass the limit;
/// - [`DecodeError::CorruptCompression`] if `input` is not a complete, valid stream
///   of the codec (including bytes trailing it).
pub fn decompress(
    codec: Compression,
    input: &[u8],
    limits: &DecompressionLimits,
) -> Result<Bytes, DecodeError> {
    if !codec.is_supported() {
        return Err(DecodeError::UnsupportedCompression(codec.bits() as u8));
    }
    if input.is_empty() {
        return Ok(Bytes::new());
    }
    let limit = limits.limit_for(input.len());
    let out = match codec {
        Compression::None => {
            if input.len() > limit {
                return Err(too_large(codec, limit));
            }
            input.to_vec()
        }
        #[cfg(feature = "gzip")]
        Compression::Gzip => gzip::decompress(input, limit)?,
        #[cfg(feature = "snappy")]
        Compression::Snappy => snappy::decompress(input, limit)?,
        #[cfg(feature = "lz4")]
        Compression::Lz4 => lz4::decompress(input, limit)?,
        #[cfg(feature = "zstd")]
        Compression::Zstd => zstd::decompress(input, limit)?,
        #[allow(unreachable_patterns)]
        _ => return Err(DecodeError::UnsupportedCompression(codec.bits() as u8)),
    };
    Ok(Bytes::from(out))
}

fn too_large(codec: Compression, limit: usize) -> DecodeError {
    DecodeError::DecompressedTooLarge { codec, limit }
}

#[allow(dead_code)]
fn corrupt(codec: Compression, detail: impl fmt::Display) -> DecodeError {
    DecodeError::CorruptCompression {
        codec,
        detail: detail.to_string(),
    }
}

/// The next size of an output buffer holding `len` bytes: double, at least
/// [`INITIAL_OUTPUT`], never over `max`.
#[allow(dead_code)]
fn grown(len: usize, max: usize) -> usize {
    len.saturating_mul(2).max(INITIAL_OUTPUT).min(max)
}

/// Reads `reader` to its end into a buffer of at most `limit` bytes.
///
/// The buffer doubles from a small start and is reserved exactly, so its capacity
/// never passes `limit`. Once it holds `limit` bytes, one more byte read into a
/// scratch byte means the output is too large.
#[cfg(any(feature = "gzip", feature = "lz4", feature = "zstd"))]
fn read_capped(
    mut reader: impl std::io::Read,
    limit: usize,
    codec: Compression,
) -> Result<Vec<u8>, DecodeError> {
    use std::io::ErrorKind;

    let mut out: Vec<u8> = Vec::new();
    let mut filled = 0;
    loop {
        if filled == out.len() {
            if filled >= limit {
                break;
            }
            let target = grown(filled, limit);
            out.reserve_exact(target - out.len());
            out.resize(target, 0);
        }
        match reader.read(&mut out[filled..]) {
            Ok(0) => {
                out.truncate(filled);
                return Ok(out);
            }
            Ok(n) => filled += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(corrupt(codec, e)),
        }
    }
    // Exactly `limit` bytes so far: the stream must end here.
    let mut probe = [0u8; 1];
    loop {
        match reader.read(&mut probe) {
            Ok(0) => return Ok(out),
            Ok(_) => return Err(too_large(codec, limit)),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(corrupt(codec, e)),
        }
    }
}

#[cfg(feature = "gzip")]
mod gzip {
    use std::io::Write;

    use bytes::{BufMut, BytesMut};
    use flate2::read::MultiGzDecoder;
    use flate2::write::GzEncoder;

    use super::{read_capped, Compression};
    use crate::error::DecodeError;

    pub(super) fn compress(level: i32, input: &[u8], out: &mut BytesMut) {
        let mut encoder = GzEncoder::new(out.writer(), flate2::Compression::new(level as u32));
        // Writing to a `BytesMut` cannot fail.
        encoder
            .write_all(input)
            .and_then(|()| encoder.try_finish())
            .expect("gzip into memory");
    }

    pub(super) fn decompress(input: &[u8], limit: usize) -> Result<Vec<u8>, DecodeError> {
        read_capped(MultiGzDecoder::new(input), limit, Compression::Gzip)
    }
}

#[cfg(feature = "snappy")]
mod snappy {
    use bytes::{BufMut, BytesMut};

    use super::{
        corrupt, grown, too_large, Compression, XERIAL_BLOCK_SIZE, XERIAL_HEADER_LEN, XERIAL_MAGIC,
    };
    use crate::error::DecodeError;

    const CODEC: Compression = Compression::Snappy;

    pub(super) fn compress(input: &[u8], out: &mut BytesMut) {
        out.put_slice(&XERIAL_MAGIC);
        out.put_i32(1); // version
        out.put_i32(1); // minimum compatible version
        let mut encoder = snap::raw::Encoder::new();
        for block in input.chunks(XERIAL_BLOCK_SIZE) {
            let at = out.len();
            let bound = snap::raw::max_compress_len(block.len());
            out.put_i32(0);
            out.resize(at + 4 + bound, 0);
            // A block of at most 32 KiB is always within Snappy's limits.
            let n = encoder
                .compress(block, &mut out[at + 4..])
                .expect("snappy block within limits");
            out.truncate(at + 4 + n);
            out[at..at + 4].copy_from_slice(&(n as i32).to_be_bytes());
        }
    }

    pub(super) fn decompress(input: &[u8], limit: usize) -> Result<Vec<u8>, DecodeError> {
        let mut out = Vec::new();
        let mut decoder = snap::raw::Decoder::new();
        if !input.starts_with(&XERIAL_MAGIC) {
            block(&mut decoder, input, &mut out, limit)?;
            return Ok(out);
        }
        let mut rest = input;
        while !rest.is_empty() {
            // A header starts the stream and may recur where streams were
            // concatenated; its version fields are not checked (librdkafka skips
            // them too). A block length is never negative, so it cannot look like
            // the magic.
            if rest.starts_with(&XERIAL_MAGIC) {
                if rest.len() < XERIAL_HEADER_LEN {
                    return Err(corrupt(CODEC, "xerial header cut short"));
                }
                rest = &rest[XERIAL_HEADER_LEN..];
                continue;
            }
            if rest.len() < 4 {
                return Err(corrupt(CODEC, "xerial block length cut short"));
            }
            let len = i32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
            rest = &rest[4..];
            if len < 0 || len as usize > rest.len() {
                return Err(corrupt(
                    CODEC,
                    format_args!("xerial block of {len} bytes with {} bytes left", rest.len()),
                ));
            }
            let (data, tail) = rest.split_at(len as usize);
            block(&mut decoder, data, &mut out, limit)?;
            rest = tail;
        }
        Ok(out)
    }

    /// Appends one raw Snappy block to `out`, refusing it before allocating if its
    /// announced length would take `out` past `limit`.
    fn block(
        decoder: &mut snap::raw::Decoder,
        data: &[u8],
        out: &mut Vec<u8>,
        limit: usize,
    ) -> Result<(), DecodeError> {
        let len = snap::raw::decompress_len(data).map_err(|e| corrupt(CODEC, e))?;
        let start = out.len();
        let end = start
            .checked_add(len)
            .filter(|&end| end <= limit)
            .ok_or_else(|| too_large(CODEC, limit))?;
        if end > out.capacity() {
            let target = grown(out.capacity(), limit).max(end);
            out.reserve_exact(target - start);
        }
        out.resize(end, 0);
        let n = decoder
            .decompress(data, &mut out[start..])
            .map_err(|e| corrupt(CODEC, e))?;
        if n != len {
            return Err(corrupt(CODEC, "snappy block shorter than announced"));
        }
        Ok(())
    }
}

#[cfg(feature = "lz4")]
mod lz4 {
    use std::io::Write;

    use bytes::{BufMut, BytesMut};
    use lz4_flex::frame::{BlockMode, BlockSize, FrameDecoder, FrameEncoder, FrameInfo};

    use super::{corrupt, read_capped, Compression};
    use crate::error::DecodeError;

    pub(super) fn compress(input: &[u8], out: &mut BytesMut) {
        // What the Java client writes: independent 64 KiB blocks, no block or
        // content checksum, no content size (the Java reader refuses dependent
        // blocks).
        let info = FrameInfo::new()
            .block_size(BlockSize::Max64KB)
            .block_mode(BlockMode::Independent)
            .block_checksums(false)
            .content_checksum(false);
        let mut encoder = FrameEncoder::with_frame_info(info, out.writer());
        // Writing to a `BytesMut` cannot fail.
        encoder.write_all(input).expect("lz4 into memory");
        encoder.finish().expect("lz4 into memory");
    }

    pub(super) fn decompress(input: &[u8], limit: usize) -> Result<Vec<u8>, DecodeError> {
        check_framing(input)?;
        read_capped(FrameDecoder::new(input), limit, Compression::Lz4)
    }

    const FRAME_MAGIC: u32 = 0x184D_2204;
    const FLG_DICT_ID: u8 = 0x01;
    const FLG_CONTENT_CHECKSUM: u8 = 0x04;
    const FLG_CONTENT_SIZE: u8 = 0x08;
    const FLG_BLOCK_CHECKSUM: u8 = 0x10;
    const BLOCK_UNCOMPRESSED: u32 = 0x8000_0000;

    fn u32_le(input: &[u8], at: usize) -> Result<u32, DecodeError> {
        input
            .get(at..at.saturating_add(4))
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| corrupt(Compression::Lz4, "frame cut short"))
    }

    /// Walks the frame's structure (header, block lengths, end mark, checksum
    /// slots) without decoding, so that a stream cut at a block boundary, which
    /// the decoder would end quietly, or one followed by anything, is an error.
    /// The decoder checks the rest. Like the Java client, only one frame is read
    /// and skippable frames are refused; no Kafka client writes either.
    fn check_framing(input: &[u8]) -> Result<(), DecodeError> {
        let cut = || corrupt(Compression::Lz4, "frame cut short");
        if u32_le(input, 0)? != FRAME_MAGIC {
            return Err(corrupt(Compression::Lz4, "bad frame magic"));
        }
        let flg = *input.get(4).ok_or_else(cut)?;
        let mut at = 4 + 2 + 1;
        if flg & FLG_CONTENT_SIZE != 0 {
            at += 8;
        }
        if flg & FLG_DICT_ID != 0 {
            at += 4;
        }
        let block_checksum = if flg & FLG_BLOCK_CHECKSUM != 0 { 4 } else { 0 };
        loop {
            let size = u32_le(input, at)?;
            at += 4;
            if size == 0 {
                break;
            }
            let len = (size & !BLOCK_UNCOMPRESSED) as usize;
            // `at` stays far below `usize::MAX`: it passed `input.len()` by at
            // most one block.
            at += len + block_checksum;
        }
        if flg & FLG_CONTENT_CHECKSUM != 0 {
            at += 4;
        }
        match at.cmp(&input.len()) {
            std::cmp::Ordering::Greater => Err(cut()),
            std::cmp::Ordering::Less => Err(corrupt(Compression::Lz4, "bytes after the frame")),
            std::cmp::Ordering::Equal => Ok(()),
        }
    }
}

#[cfg(feature = "zstd")]
pub(super) mod zstd {
    use bytes::BytesMut;

    use super::{corrupt, read_capped, Compression};
    use crate::error::DecodeError;

    /// Windows a frame may always ask for: 2^23 bytes (8 MiB), what levels up to 19
    /// use when the content size is unknown, as with the Java client's streaming
    /// encoder.
    const WINDOW_LOG_FLOOR: u32 = 23;

    /// The largest window any frame may ask for: 2^27 bytes (128 MiB), zstd's
    /// default for decoders and what the Java client accepts.
    const WINDOW_LOG_CEILING: u32 = 27;

    /// The window log a frame may ask for when at most `limit` bytes may come out.
    ///
    /// The decoder allocates the frame's window (or its content size, if smaller
    /// and declared) before producing output, so a tiny frame asking for a 128 MiB
    /// window would cost 128 MiB. Windows above 8 MiB are therefore accepted only
    /// when the output limit is at least that large; only levels 20-22 ask for them,
    /// so such a frame is refused only if its batch is small.
    pub(super) fn window_log_max(limit: usize) -> u32 {
        let needed = usize::BITS - limit.saturating_sub(1).leading_zeros();
        needed.clamp(WINDOW_LOG_FLOOR, WINDOW_LOG_CEILING)
    }

    pub(super) fn compress(level: i32, input: &[u8], out: &mut BytesMut) {
        let compressed = ::zstd::bulk::compress(input, level).expect("zstd into memory");
        out.extend_from_slice(&compressed);
    }

    pub(super) fn decompress(input: &[u8], limit: usize) -> Result<Vec<u8>, DecodeError> {
        let mut decoder = ::zstd::stream::read::Decoder::with_buffer(input)
            .map_err(|e| corrupt(Compression::Zstd, e))?;
        decoder
            .window_log_max(window_log_max(limit))
            .map_err(|e| corrupt(Compression::Zstd, e))?;
        read_capped(decoder, limit, Compression::Zstd)
    }
}

#[cfg(all(
    test,
    feature = "gzip",
    feature = "snappy",
    feature = "lz4",
    feature = "zstd"
))]
mod tests;
