//! Length-prefixed framing: every Kafka request and response is a 4-byte big-endian
//! size followed by that many bytes.
//!
//! [`FrameCodec::decode`] looks at the size before buffering anything, so a peer that
//! announces a frame over the configured maximum is rejected at once.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error::DecodeError;
use crate::primitives::Encoder;

/// Default maximum frame size: 100 MiB, Kafka's `socket.request.max.bytes`.
pub const DEFAULT_MAX_FRAME: usize = 100 * 1024 * 1024;

/// Splits a byte stream into frames with a size limit.
#[derive(Debug, Clone, Copy)]
pub struct FrameCodec {
    /// Frames larger than this are rejected before they are buffered.
    pub max_frame: usize,
}

impl Default for FrameCodec {
    fn default() -> Self {
        FrameCodec {
            max_frame: DEFAULT_MAX_FRAME,
        }
    }
}

impl FrameCodec {
    /// A codec with the given maximum frame size.
    pub fn new(max_frame: usize) -> Self {
        FrameCodec { max_frame }
    }

    /// Checks the size prefix in `buf`: `Ok(Some(n))` when a complete frame of `n`
    /// body bytes is buffered, `Ok(None)` when more input is needed, and an error for
    /// a negative or oversized frame.
    pub fn check(&self, buf: &[u8]) -> Result<Option<usize>, DecodeError> {
        if buf.len() < 4 {
            return Ok(None);
        }
        let size = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
        if size < 0 || size as usize > self.max_frame {
            return Err(DecodeError::FrameTooLarge {
                size: size as i64,
                max: self.max_frame,
            });
        }
        let size = size as usize;
        if buf.len() - 4 < size {
            Ok(None)
        } else {
            Ok(Some(size))
        }
    }

    /// How many more bytes are needed before the next frame is complete (at least 1
    /// when [`FrameCodec::check`] returns `Ok(None)`), used to size reads.
    pub fn wanted(&self, buf: &[u8]) -> usize {
        if buf.len() < 4 {
            return 4 - buf.len();
        }
        let size = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]).max(0) as usize;
        (size + 4).saturating_sub(buf.len()).max(1)
    }

    /// Takes the next complete frame's body out of `buf`, if there is one.
    pub fn decode(&self, buf: &mut BytesMut) -> Result<Option<Bytes>, DecodeError> {
        match self.check(buf)? {
            None => Ok(None),
            Some(n) => {
                buf.advance(4);
                Ok(Some(buf.split_to(n).freeze()))
            }
        }
    }

    /// Appends a frame: the size of `body`, then `body`.
    pub fn encode(&self, body: &[u8], buf: &mut BytesMut) {
        buf.reserve(4 + body.len());
        buf.put_i32(body.len() as i32);
        buf.put_slice(body);
    }
}

/// Starts a frame in `buf` and returns the position of its size prefix; pass it to
/// [`finish_frame`] after writing the body, which avoids copying the body.
pub fn begin_frame(buf: &mut BytesMut) -> usize {
    let at = buf.len();
    buf.put_i32(0);
    at
}

/// Fills in the size prefix written by [`begin_frame`].
pub fn finish_frame(buf: &mut BytesMut, at: usize) {
    let size = (buf.len() - at - 4) as i32;
    buf[at..at + 4].copy_from_slice(&size.to_be_bytes());
}

/// Fills in the size prefix written by [`begin_frame`] into `enc`'s inline buffer
/// (before any out-of-line field): the size covers everything encoded after it,
/// out-of-line fields included.
pub fn finish_segmented_frame(enc: &mut Encoder, at: usize) {
    let size = (enc.len() - at - 4) as i32;
    enc.buf_mut()[at..at + 4].copy_from_slice(&size.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversized_frames_are_rejected_before_buffering() {
        let codec = FrameCodec::new(1024);
        let mut buf = BytesMut::from(&[0x00, 0x01, 0x00, 0x00][..]);
        assert!(matches!(
            codec.decode(&mut buf),
            Err(DecodeError::FrameTooLarge { .. })
        ));
        let mut buf = BytesMut::from(&[0xff, 0xff, 0xff, 0xff][..]);
        assert!(codec.decode(&mut buf).is_err());
    }

    #[test]
    fn frames_split_and_join() {
        let codec = FrameCodec::default();
        let mut buf = BytesMut::new();
        codec.encode(b"hello", &mut buf);
        let at = begin_frame(&mut buf);
        buf.put_slice(b"world!");
        finish_frame(&mut buf, at);
        let mut partial = buf.split_to(6);
        assert_eq!(codec.decode(&mut partial).unwrap(), None);
        partial.unsplit(buf);
        assert_eq!(&codec.decode(&mut partial).unwrap().unwrap()[..], b"hello");
        assert_eq!(&codec.decode(&mut partial).unwrap().unwrap()[..], b"world!");
        assert!(partial.is_empty());
    }

    #[test]
    fn segmented_frames_count_out_of_line_bytes() {
        let big = Bytes::from(vec![9u8; 40]);
        let mut enc = Encoder::segmented(BytesMut::new(), 16);
        let at = begin_frame(enc.buf_mut());
        enc.buf_mut().put_slice(b"head");
        enc.put_bytes(&big);
        enc.buf_mut().put_slice(b"tail");
        finish_segmented_frame(&mut enc, at);
        let segments = enc.finish();
        assert_eq!(segments.len(), 3);
        let mut joined = BytesMut::from(&segments.concat()[..]);
        let body = FrameCodec::default().decode(&mut joined).unwrap().unwrap();
        assert_eq!(body.len(), 4 + 40 + 4);
        assert!(joined.is_empty());
    }
}
