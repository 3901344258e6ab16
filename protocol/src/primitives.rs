//! Kafka's primitive types: fixed-width integers, varints, (compact, nullable)
//! strings, bytes and arrays, UUIDs and tagged-field sections.
//!
//! Decoding goes through [`Decoder`], a cursor over a [`Bytes`] frame. Byte fields are
//! returned as zero-copy slices of that frame. Every length read from the input is
//! checked against the bytes that remain before anything is allocated.
//!
//! Encoding appends to a [`BytesMut`]. The [`Wire`] trait ties a Rust type to its wire
//! form; whether the compact (flexible) form is used is passed in by the message.
//! [`Wire::encode_to`] writes the same bytes into an [`Encoder`], which can keep large
//! [`Bytes`] fields (record batches) out of line as their own segments, shared rather
//! than copied, for a vectored write.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error::DecodeError;

/// A cursor over one frame's bytes.
#[derive(Debug, Clone)]
pub struct Decoder {
    data: Bytes,
}

impl Decoder {
    /// A decoder over `data`.
    pub fn new(data: Bytes) -> Self {
        Decoder { data }
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.data.len()
    }

    /// The bytes not yet consumed, without consuming them.
    pub fn rest(&self) -> &[u8] {
        &self.data
    }

    /// Whether all bytes were consumed.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Fails with [`DecodeError::TrailingBytes`] if any bytes are left.
    pub fn finish(&self) -> Result<(), DecodeError> {
        if self.data.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::TrailingBytes(self.data.len()))
        }
    }

    fn need(&self, n: usize, what: &'static str) -> Result<(), DecodeError> {
        if self.data.len() < n {
            Err(DecodeError::Truncated {
                what,
                needed: n - self.data.len(),
            })
        } else {
            Ok(())
        }
    }

    /// Takes the next `n` bytes as a zero-copy slice.
    pub fn take(&mut self, n: usize, what: &'static str) -> Result<Bytes, DecodeError> {
        self.need(n, what)?;
        Ok(self.data.split_to(n))
    }

    /// Takes everything left.
    pub fn take_rest(&mut self) -> Bytes {
        std::mem::take(&mut self.data)
    }

    /// Reads an `int8`.
    pub fn i8(&mut self) -> Result<i8, DecodeError> {
        self.need(1, "int8")?;
        Ok(self.data.get_i8())
    }
    /// Reads an `int16`.
    pub fn i16(&mut self) -> Result<i16, DecodeError> {
        self.need(2, "int16")?;
        Ok(self.data.get_i16())
    }
    /// Reads a `uint16`.
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        self.need(2, "uint16")?;
        Ok(self.data.get_u16())
    }
    /// Reads an `int32`.
    pub fn i32(&mut self) -> Result<i32, DecodeError> {
        self.need(4, "int32")?;
        Ok(self.data.get_i32())
    }
    /// Reads a `uint32`.
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        self.need(4, "uint32")?;
        Ok(self.data.get_u32())
    }
    /// Reads an `int64`.
    pub fn i64(&mut self) -> Result<i64, DecodeError> {
        self.need(8, "int64")?;
        Ok(self.data.get_i64())
    }
    /// Reads a `float64`.
    pub fn f64(&mut self) -> Result<f64, DecodeError> {
        self.need(8, "float64")?;
        Ok(self.data.get_f64())
    }

    /// Reads an unsigned LEB128 varint of at most 32 bits.
    pub fn uvarint(&mut self) -> Result<u32, DecodeError> {
        let mut value: u32 = 0;
        for i in 0..5 {
            self.need(1, "varint")?;
            let b = self.data.get_u8();
            if i == 4 && b > 0x0f {
                return Err(DecodeError::VarintOverflow);
            }
            value |= ((b & 0x7f) as u32) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError::VarintOverflow)
    }

    /// Reads an unsigned LEB128 varint of at most 64 bits.
    pub fn uvarlong(&mut self) -> Result<u64, DecodeError> {
        let mut value: u64 = 0;
        for i in 0..10 {
            self.need(1, "varlong")?;
            let b = self.data.get_u8();
            if i == 9 && b > 0x01 {
                return Err(DecodeError::VarintOverflow);
            }
            value |= ((b & 0x7f) as u64) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError::VarintOverflow)
    }

    /// Reads a zigzag-encoded signed varint (32 bits).
    pub fn varint(&mut self) -> Result<i32, DecodeError> {
        let v = self.uvarint()?;
        Ok(((v >> 1) as i32) ^ -((v & 1) as i32))
    }

    /// Reads a zigzag-encoded signed varlong (64 bits).
    pub fn varlong(&mut self) -> Result<i64, DecodeError> {
        let v = self.uvarlong()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    /// Reads a length prefix: `int16`/`int32` (non-compact) or `uvarint - 1` (compact).
    /// Returns `None` for the null marker (-1). The length is checked against the bytes
    /// that remain, scaled by `min_elem` bytes per element.
    fn length(
        &mut self,
        compact: bool,
        wide: bool,
        min_elem: usize,
        what: &'static str,
    ) -> Result<Option<usize>, DecodeError> {
        let len: i64 = if compact {
            self.uvarint()? as i64 - 1
        } else if wide {
            self.i32()? as i64
        } else {
            self.i16()? as i64
        };
        if len == -1 {
            return Ok(None);
        }
        if len < 0 || (len as u64).saturating_mul(min_elem as u64) > self.remaining() as u64 {
            return Err(DecodeError::BadLength {
                what,
                length: len,
                remaining: self.remaining(),
            });
        }
        Ok(Some(len as usize))
    }

    /// Reads a (compact) nullable string.
    pub fn nullable_string(&mut self, compact: bool) -> Result<Option<String>, DecodeError> {
        match self.length(compact, false, 1, "string")? {
            None => Ok(None),
            Some(n) => {
                let b = self.take(n, "string")?;
                String::from_utf8(b.to_vec())
                    .map(Some)
                    .map_err(|_| DecodeError::InvalidUtf8)
            }
        }
    }

    /// Reads a (compact) string; null is an error.
    pub fn string(&mut self, compact: bool) -> Result<String, DecodeError> {
        self.nullable_string(compact)?
            .ok_or(DecodeError::UnexpectedNull("string"))
    }

    /// Reads (compact) nullable bytes as a zero-copy slice.
    pub fn nullable_bytes(&mut self, compact: bool) -> Result<Option<Bytes>, DecodeError> {
        match self.length(compact, true, 1, "bytes")? {
            None => Ok(None),
            Some(n) => self.take(n, "bytes").map(Some),
        }
    }

    /// Reads a (compact) array length; `None` for null. Each element is assumed to
    /// take at least one byte, which bounds the count by the remaining input.
    pub fn array_len(&mut self, compact: bool) -> Result<Option<usize>, DecodeError> {
        self.length(compact, true, 1, "array")
    }

    /// Reads a UUID.
    pub fn uuid(&mut self) -> Result<Uuid, DecodeError> {
        let b = self.take(16, "uuid")?;
        let mut out = [0u8; 16];
        out.copy_from_slice(&b);
        Ok(Uuid(out))
    }
}

/// Appends a zigzag varint.
pub fn put_varint<B: BufMut + ?Sized>(buf: &mut B, v: i32) {
    put_uvarint(buf, ((v << 1) ^ (v >> 31)) as u32);
}

/// Appends a zigzag varlong.
pub fn put_varlong<B: BufMut + ?Sized>(buf: &mut B, v: i64) {
    put_uvarlong(buf, ((v << 1) ^ (v >> 63)) as u64);
}

/// Appends an unsigned varint.
pub fn put_uvarint<B: BufMut + ?Sized>(buf: &mut B, v: u32) {
    put_uvarlong(buf, v as u64)
}

/// Appends an unsigned varlong.
pub fn put_uvarlong<B: BufMut + ?Sized>(buf: &mut B, mut v: u64) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

/// Number of bytes an unsigned varint takes.
pub fn uvarint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Number of bytes a zigzag varint takes.
pub fn varint_len(v: i64) -> usize {
    uvarint_len(((v << 1) ^ (v >> 63)) as u64)
}

pub(crate) fn put_len(buf: &mut BytesMut, len: Option<usize>, compact: bool, wide: bool) {
    match (len, compact) {
        (None, true) => put_uvarint(buf, 0),
        (Some(n), true) => put_uvarint(buf, n as u32 + 1),
        (None, false) if wide => buf.put_i32(-1),
        (None, false) => buf.put_i16(-1),
        (Some(n), false) if wide => buf.put_i32(n as i32),
        (Some(n), false) => buf.put_i16(n as i16),
    }
}

/// Appends a (compact) nullable string.
pub fn put_nullable_string(buf: &mut BytesMut, s: Option<&str>, compact: bool) {
    put_len(buf, s.map(str::len), compact, false);
    if let Some(s) = s {
        buf.put_slice(s.as_bytes());
    }
}

/// Appends (compact) nullable bytes.
pub fn put_nullable_bytes(buf: &mut BytesMut, b: Option<&[u8]>, compact: bool) {
    put_len(buf, b.map(<[u8]>::len), compact, true);
    if let Some(b) = b {
        buf.put_slice(b);
    }
}

/// Appends a (compact) array length; `None` writes null.
pub fn put_array_len(buf: &mut BytesMut, len: Option<usize>, compact: bool) {
    put_len(buf, len, compact, true);
}

/// A 128-bit UUID as Kafka sends it (topic ids, directory ids).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    /// The all-zero UUID, Kafka's "no id".
    pub const ZERO: Uuid = Uuid([0; 16]);

    /// A UUID from two 64-bit halves.
    pub fn from_u64_pair(hi: u64, lo: u64) -> Self {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&hi.to_be_bytes());
        b[8..].copy_from_slice(&lo.to_be_bytes());
        Uuid(b)
    }
}

impl std::fmt::Debug for Uuid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// Byte fields of at least this many bytes are good candidates to send out of line
/// (see [`Encoder::segmented`]): below it, copying is cheaper than another segment.
pub const DEFAULT_MIN_SEGMENT: usize = 16 * 1024;

/// An encoding destination that can keep large byte fields out of line.
///
/// Everything is written to an inline [`BytesMut`] except [`Bytes`] fields of at least
/// `min_segment` bytes, which are kept as they are (a reference-counted clone, no
/// copy) together with the inline position they belong at. [`Encoder::finish`] cuts
/// the encoding into segments; written one after the other they are exactly the
/// bytes [`Wire::encode`] would have appended. Positions inside the inline buffer
/// stay valid while encoding, so a size prefix written before any out-of-line field
/// can be patched afterwards (see [`crate::frame::finish_segmented_frame`]).
///
/// ```
/// use baton_protocol::primitives::{Encoder, Wire};
/// use bytes::{BufMut, Bytes, BytesMut};
///
/// let big = Bytes::from(vec![7u8; 100]);
/// let mut enc = Encoder::segmented(BytesMut::new(), 64);
/// enc.buf_mut().put_u8(1);
/// big.encode_to(&mut enc, 0, false);
/// enc.buf_mut().put_u8(2);
/// let segments = enc.finish();
/// assert_eq!(segments.len(), 3);
/// assert_eq!(segments[1], big); // the same bytes, shared
/// assert_eq!(segments.concat().len(), 1 + 4 + 100 + 1);
/// ```
#[derive(Debug, Default)]
pub struct Encoder {
    buf: BytesMut,
    /// Out-of-line fields, each with the position in `buf` it goes before; positions
    /// never decrease.
    spliced: Vec<(usize, Bytes)>,
    /// Total length of `spliced`.
    spliced_len: usize,
    /// Byte fields at least this long go out of line. Invariant: at least 1.
    min_segment: usize,
}

impl Encoder {
    /// An encoder that appends to `buf` and keeps every byte field inline.
    pub fn contiguous(buf: BytesMut) -> Self {
        Self::segmented(buf, usize::MAX)
    }

    /// An encoder that appends to `buf` and keeps [`Bytes`] fields of at least
    /// `min_segment` bytes out of line (`0` is taken as 1: empty fields stay inline).
    pub fn segmented(buf: BytesMut, min_segment: usize) -> Self {
        Encoder {
            buf,
            spliced: Vec::new(),
            spliced_len: 0,
            min_segment: min_segment.max(1),
        }
    }

    /// The inline buffer, for writing fixed-width values, lengths and small fields.
    /// Bytes written here go after every out-of-line field added so far.
    pub fn buf_mut(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// Appends the contents of `b` (no length prefix): out of line if it is at least
    /// `min_segment` bytes long, copied inline otherwise.
    pub fn put_bytes(&mut self, b: &Bytes) {
        if b.len() >= self.min_segment {
            self.spliced.push((self.buf.len(), b.clone()));
            self.spliced_len += b.len();
        } else {
            self.buf.put_slice(b);
        }
    }

    /// Total length encoded so far, inline and out of line.
    pub fn len(&self) -> usize {
        self.buf.len() + self.spliced_len
    }

    /// Whether nothing was encoded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether any field went out of line.
    pub fn is_segmented(&self) -> bool {
        !self.spliced.is_empty()
    }

    /// The encoding as segments in order; without out-of-line fields, one segment
    /// (the inline buffer, frozen). Empty segments are left out.
    pub fn finish(self) -> Vec<Bytes> {
        let inline = self.buf.freeze();
        if self.spliced.is_empty() {
            return if inline.is_empty() {
                Vec::new()
            } else {
                vec![inline]
            };
        }
        let mut out = Vec::with_capacity(2 * self.spliced.len() + 1);
        let mut at = 0;
        for (pos, b) in self.spliced {
            if pos > at {
                out.push(inline.slice(at..pos));
                at = pos;
            }
            out.push(b);
        }
        if at < inline.len() {
            out.push(inline.slice(at..));
        }
        out
    }
}

/// A Rust type with a Kafka wire form.
///
/// `flexible` selects the compact encodings of strings, bytes and arrays and, for
/// structs, the trailing tagged-field section.
pub trait Wire: Sized {
    /// Appends the value.
    fn encode(&self, buf: &mut BytesMut, version: i16, flexible: bool);
    /// Reads a value.
    fn decode(d: &mut Decoder, version: i16, flexible: bool) -> Result<Self, DecodeError>;

    /// Appends the value to an [`Encoder`]: the same bytes as [`Wire::encode`], with
    /// large [`Bytes`] fields possibly out of line. The default encodes inline;
    /// byte fields, arrays and `wire_struct!` types pass the encoder down.
    fn encode_to(&self, out: &mut Encoder, version: i16, flexible: bool) {
        self.encode(out.buf_mut(), version, flexible);
    }
}

macro_rules! fixed_wire {
    ($($t:ty => $get:ident, $put:ident;)*) => {$(
        impl Wire for $t {
            fn encode(&self, buf: &mut BytesMut, _: i16, _: bool) {
                buf.$put(*self);
            }
            fn decode(d: &mut Decoder, _: i16, _: bool) -> Result<Self, DecodeError> {
                d.$get()
            }
        }
    )*};
}

fixed_wire! {
    i8 => i8, put_i8;
    i16 => i16, put_i16;
    u16 => u16, put_u16;
    i32 => i32, put_i32;
    u32 => u32, put_u32;
    i64 => i64, put_i64;
    f64 => f64, put_f64;
}

impl Wire for bool {
    fn encode(&self, buf: &mut BytesMut, _: i16, _: bool) {
        buf.put_u8(*self as u8);
    }
    fn decode(d: &mut Decoder, _: i16, _: bool) -> Result<Self, DecodeError> {
        Ok(d.i8()? != 0)
    }
}

impl Wire for Uuid {
    fn encode(&self, buf: &mut BytesMut, _: i16, _: bool) {
        buf.put_slice(&self.0);
    }
    fn decode(d: &mut Decoder, _: i16, _: bool) -> Result<Self, DecodeError> {
        d.uuid()
    }
}

impl Wire for String {
    fn encode(&self, buf: &mut BytesMut, _: i16, flexible: bool) {
        put_nullable_string(buf, Some(self), flexible);
    }
    fn decode(d: &mut Decoder, _: i16, flexible: bool) -> Result<Self, DecodeError> {
        d.string(flexible)
    }
}

impl Wire for Option<String> {
    fn encode(&self, buf: &mut BytesMut, _: i16, flexible: bool) {
        put_nullable_string(buf, self.as_deref(), flexible);
    }
    fn decode(d: &mut Decoder, _: i16, flexible: bool) -> Result<Self, DecodeError> {
        d.nullable_string(flexible)
    }
}

impl Wire for Bytes {
    fn encode(&self, buf: &mut BytesMut, _: i16, flexible: bool) {
        put_nullable_bytes(buf, Some(self), flexible);
    }
    fn decode(d: &mut Decoder, _: i16, flexible: bool) -> Result<Self, DecodeError> {
        d.nullable_bytes(flexible)?
            .ok_or(DecodeError::UnexpectedNull("bytes"))
    }
    fn encode_to(&self, out: &mut Encoder, _: i16, flexible: bool) {
        put_len(out.buf_mut(), Some(self.len()), flexible, true);
        out.put_bytes(self);
    }
}

impl Wire for Option<Bytes> {
    fn encode(&self, buf: &mut BytesMut, _: i16, flexible: bool) {
        put_nullable_bytes(buf, self.as_deref(), flexible);
    }
    fn decode(d: &mut Decoder, _: i16, flexible: bool) -> Result<Self, DecodeError> {
        d.nullable_bytes(flexible)
    }
    fn encode_to(&self, out: &mut Encoder, version: i16, flexible: bool) {
        match self {
            None => put_len(out.buf_mut(), None, flexible, true),
            Some(b) => b.encode_to(out, version, flexible),
        }
    }
}

/// Arrays reserve at most this many elements up front; past that they grow only as
/// elements are actually decoded, each of which consumes input.
const MAX_PREALLOC: usize = 64;

/// Marker for types that are encoded as array elements (everything but `u8`, which
/// Kafka calls `bytes` and we model as [`Bytes`]).
pub trait ArrayElement: Wire {}
impl ArrayElement for i8 {}
impl ArrayElement for i16 {}
impl ArrayElement for i32 {}
impl ArrayElement for i64 {}
impl ArrayElement for String {}
impl ArrayElement for Uuid {}

impl<T: ArrayElement> Wire for Vec<T> {
    fn encode(&self, buf: &mut BytesMut, version: i16, flexible: bool) {
        put_array_len(buf, Some(self.len()), flexible);
        for item in self {
            item.encode(buf, version, flexible);
        }
    }
    fn encode_to(&self, out: &mut Encoder, version: i16, flexible: bool) {
        put_array_len(out.buf_mut(), Some(self.len()), flexible);
        for item in self {
            item.encode_to(out, version, flexible);
        }
    }
    fn decode(d: &mut Decoder, version: i16, flexible: bool) -> Result<Self, DecodeError> {
        let n = d
            .array_len(flexible)?
            .ok_or(DecodeError::UnexpectedNull("array"))?;
        let mut v = Vec::with_capacity(n.min(MAX_PREALLOC));
        for _ in 0..n {
            v.push(T::decode(d, version, flexible)?);
        }
        Ok(v)
    }
}

impl<T: ArrayElement> Wire for Option<Vec<T>> {
    fn encode(&self, buf: &mut BytesMut, version: i16, flexible: bool) {
        match self {
            None => put_array_len(buf, None, flexible),
            Some(v) => v.encode(buf, version, flexible),
        }
    }
    fn encode_to(&self, out: &mut Encoder, version: i16, flexible: bool) {
        match self {
            None => put_array_len(out.buf_mut(), None, flexible),
            Some(v) => v.encode_to(out, version, flexible),
        }
    }
    fn decode(d: &mut Decoder, version: i16, flexible: bool) -> Result<Self, DecodeError> {
        let Some(n) = d.array_len(flexible)? else {
            return Ok(None);
        };
        let mut v = Vec::with_capacity(n.min(MAX_PREALLOC));
        for _ in 0..n {
            v.push(T::decode(d, version, flexible)?);
        }
        Ok(Some(v))
    }
}

/// Skips a tagged-field section's unknown entries and hands known ones to `known`.
///
/// `known(tag, decoder)` returns `Ok(true)` if it consumed the field.
pub fn decode_tagged_fields(
    d: &mut Decoder,
    mut known: impl FnMut(u32, &mut Decoder) -> Result<bool, DecodeError>,
) -> Result<(), DecodeError> {
    let count = d.uvarint()? as usize;
    if count > d.remaining() {
        return Err(DecodeError::BadLength {
            what: "tagged fields",
            length: count as i64,
            remaining: d.remaining(),
        });
    }
    for _ in 0..count {
        let tag = d.uvarint()?;
        let size = d.uvarint()? as usize;
        let mut field = Decoder::new(d.take(size, "tagged field")?);
        if known(tag, &mut field)? {
            field.finish()?;
        }
    }
    Ok(())
}

/// Appends one tagged field: tag, size, then the value encoded by `f`.
pub fn put_tagged_field(buf: &mut BytesMut, tag: u32, f: impl FnOnce(&mut BytesMut)) {
    let mut tmp = BytesMut::new();
    f(&mut tmp);
    put_uvarint(buf, tag);
    put_uvarint(buf, tmp.len() as u32);
    buf.put_slice(&tmp);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        for v in [
            0i64,
            1,
            -1,
            63,
            -64,
            64,
            300,
            i32::MAX as i64,
            i32::MIN as i64,
            i64::MAX,
            i64::MIN,
        ] {
            let mut b = BytesMut::new();
            put_varlong(&mut b, v);
            assert_eq!(b.len(), varint_len(v));
            assert_eq!(Decoder::new(b.freeze()).varlong().unwrap(), v);
        }
        for v in [0i32, 1, -1, i32::MAX, i32::MIN] {
            let mut b = BytesMut::new();
            put_varint(&mut b, v);
            assert_eq!(Decoder::new(b.freeze()).varint().unwrap(), v);
        }
    }

    #[test]
    fn encoder_segments_concatenate_to_the_contiguous_encoding() {
        let big = |n: usize, b: u8| Bytes::from(vec![b; n]);
        let fields: Vec<Option<Bytes>> = vec![
            Some(big(10, 1)),
            None,
            Some(big(2, 2)),
            Some(Bytes::new()),
            Some(big(10, 3)),
            Some(big(12, 4)),
        ];
        for flexible in [false, true] {
            let mut plain = BytesMut::new();
            fields
                .iter()
                .for_each(|f| f.encode(&mut plain, 0, flexible));
            for min_segment in [0, 1, 5, 10, 11, usize::MAX] {
                let mut enc = Encoder::segmented(BytesMut::new(), min_segment);
                fields
                    .iter()
                    .for_each(|f| f.encode_to(&mut enc, 0, flexible));
                assert_eq!(enc.len(), plain.len());
                let out = enc.finish();
                assert!(out.iter().all(|s| !s.is_empty()), "{min_segment}");
                assert_eq!(out.concat(), plain.to_vec(), "{min_segment} {flexible}");
                if min_segment == 10 {
                    // Three fields out of line, shared with their sources:
                    // [len] [10x1] [null, len, 2x2, len, len] [10x3] [len] [12x4].
                    assert_eq!(out.len(), 6);
                    for (segment, field) in [(1, 0), (3, 4), (5, 5)] {
                        let source = fields[field].as_ref().unwrap();
                        assert_eq!(out[segment].as_ptr(), source.as_ptr());
                    }
                }
            }
        }
        assert!(Encoder::contiguous(BytesMut::new()).finish().is_empty());
    }

    #[test]
    fn lying_lengths_are_errors() {
        let mut d = Decoder::new(Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff, 0, 0]));
        assert!(matches!(
            d.array_len(false),
            Err(DecodeError::BadLength { .. })
        ));
        let mut d = Decoder::new(Bytes::from_static(&[0x00, 0x05, b'a']));
        assert!(matches!(
            d.string(false),
            Err(DecodeError::BadLength { .. })
        ));
        let mut d = Decoder::new(Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff]));
        assert_eq!(d.uvarint(), Err(DecodeError::VarintOverflow));
    }
}
