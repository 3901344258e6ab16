//! Record batches as a chain of shared segments: what a Produce request carries, so
//! that a large record value can travel from the caller's [`Bytes`] to the socket
//! without being copied into the batch (see
//! [`RecordBatchBuilder::push_shared`](super::RecordBatchBuilder::push_shared)).

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::DecodeError;
use crate::primitives::{put_len, Decoder, Encoder, Wire};

/// One or more record batches held as a chain of [`Bytes`] segments; written one
/// after the other the segments are the batches' bytes.
///
/// A decoded field is always one segment (the frame's own bytes, no copy); a batch
/// built with shared values has a segment per shared value and one per run of
/// bytes between them. Equality compares the bytes, not how they are cut.
///
/// Invariant: no segment is empty, and `len` is the sum of the segments' lengths.
///
/// ```
/// use baton_protocol::record::BatchSegments;
/// use bytes::Bytes;
///
/// let s = BatchSegments::from_segments(vec![Bytes::from_static(b"ab"), Bytes::new(), Bytes::from_static(b"c")]);
/// assert_eq!(s.len(), 3);
/// assert_eq!(s.segments().len(), 2);
/// assert_eq!(s, BatchSegments::from(Bytes::from_static(b"abc")));
/// assert_eq!(s.to_bytes(), Bytes::from_static(b"abc"));
/// ```
#[derive(Clone, Default)]
pub struct BatchSegments {
    segments: Vec<Bytes>,
    len: usize,
}

impl BatchSegments {
    /// The segments in order; empty ones are left out.
    pub fn from_segments(segments: Vec<Bytes>) -> Self {
        let mut segments = segments;
        segments.retain(|s| !s.is_empty());
        let len = segments.iter().map(Bytes::len).sum();
        BatchSegments { segments, len }
    }

    /// Total length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The segments, in order, none empty.
    pub fn segments(&self) -> &[Bytes] {
        &self.segments
    }

    /// The bytes as one [`Bytes`]: the segment itself when there is one (no copy), a
    /// copy into a new buffer otherwise.
    pub fn to_bytes(&self) -> Bytes {
        match self.segments.as_slice() {
            [] => Bytes::new(),
            [one] => one.clone(),
            many => {
                let mut buf = BytesMut::with_capacity(self.len);
                for s in many {
                    buf.put_slice(s);
                }
                buf.freeze()
            }
        }
    }

    /// Like [`BatchSegments::to_bytes`], consuming the segments.
    pub fn into_bytes(self) -> Bytes {
        if self.segments.len() == 1 {
            let mut segments = self.segments;
            return segments.pop().unwrap_or_default();
        }
        self.to_bytes()
    }

    /// The bytes in order, without copying.
    fn chunks(&self) -> impl Iterator<Item = &[u8]> {
        self.segments.iter().map(|s| &s[..])
    }
}

impl From<Bytes> for BatchSegments {
    fn from(b: Bytes) -> Self {
        BatchSegments::from_segments(vec![b])
    }
}

impl PartialEq for BatchSegments {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.chunks().flatten().eq(other.chunks().flatten())
    }
}

impl Eq for BatchSegments {}

impl fmt::Debug for BatchSegments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchSegments")
            .field("len", &self.len)
            .field("segments", &self.segments.len())
            .finish()
    }
}

/// A nullable `records` field: the same wire form as `Option<Bytes>`.
impl Wire for Option<BatchSegments> {
    fn encode(&self, buf: &mut BytesMut, _: i16, flexible: bool) {
        put_len(buf, self.as_ref().map(BatchSegments::len), flexible, true);
        if let Some(s) = self {
            for chunk in s.chunks() {
                buf.put_slice(chunk);
            }
        }
    }

    fn decode(d: &mut Decoder, _: i16, flexible: bool) -> Result<Self, DecodeError> {
        Ok(d.nullable_bytes(flexible)?.map(BatchSegments::from))
    }

    /// Each segment of at least the encoder's `min_segment` bytes goes out of line on
    /// its own; shorter ones are copied inline.
    fn encode_to(&self, out: &mut Encoder, _: i16, flexible: bool) {
        put_len(
            out.buf_mut(),
            self.as_ref().map(BatchSegments::len),
            flexible,
            true,
        );
        if let Some(s) = self {
            for segment in &s.segments {
                out.put_bytes(segment);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(b: &[u8], cuts: &[usize]) -> BatchSegments {
        let b = Bytes::copy_from_slice(b);
        let mut at = 0;
        let mut out = Vec::new();
        for &c in cuts {
            out.push(b.slice(at..c));
            at = c;
        }
        out.push(b.slice(at..));
        BatchSegments::from_segments(out)
    }

    #[test]
    fn wire_form_does_not_depend_on_the_cuts() {
        let data: Vec<u8> = (0..200u32).map(|i| (i * 7) as u8).collect();
        let whole = Some(BatchSegments::from(Bytes::from(data.clone())));
        for flexible in [false, true] {
            let mut plain = BytesMut::new();
            Some(Bytes::from(data.clone())).encode(&mut plain, 9, flexible);
            for cuts in [&[][..], &[0, 1], &[10, 100, 150], &[199]] {
                let seg = Some(split(&data, cuts));
                assert_eq!(seg, whole);
                let mut buf = BytesMut::new();
                seg.encode(&mut buf, 9, flexible);
                assert_eq!(buf, plain);
                for min_segment in [1, 40, 60, usize::MAX] {
                    let mut enc = Encoder::segmented(BytesMut::new(), min_segment);
                    seg.encode_to(&mut enc, 9, flexible);
                    assert_eq!(
                        enc.finish().concat(),
                        plain.to_vec(),
                        "{cuts:?} {min_segment}"
                    );
                }
                let back = Option::<BatchSegments>::decode(
                    &mut Decoder::new(plain.clone().freeze()),
                    9,
                    flexible,
                )
                .unwrap();
                assert_eq!(back, whole);
                assert_eq!(back.unwrap().segments().len(), 1);
            }
        }
        let mut buf = BytesMut::new();
        None::<BatchSegments>.encode(&mut buf, 9, true);
        let back = Option::<BatchSegments>::decode(&mut Decoder::new(buf.freeze()), 9, true);
        assert_eq!(back.unwrap(), None);
    }

    #[test]
    fn large_segments_stay_shared() {
        let big = Bytes::from(vec![3u8; 1000]);
        let s = BatchSegments::from_segments(vec![Bytes::from_static(b"head"), big.clone()]);
        let mut enc = Encoder::segmented(BytesMut::new(), 500);
        Some(s.clone()).encode_to(&mut enc, 3, false);
        let out = enc.finish();
        assert_eq!(out.last().unwrap().as_ptr(), big.as_ptr());
        assert_ne!(s, BatchSegments::from(big));
        assert_eq!(BatchSegments::default().to_bytes(), Bytes::new());
    }
}
