//! Single records inside a batch, and the lazy iterator that decodes them.
//!
//! A record is:
//!
//! ```text
//! length          varint   (bytes of the rest of the record)
//! attributes      int8     (unused, kept)
//! timestampDelta  varlong
//! offsetDelta     varint
//! keyLength       varint   (-1 = null)
//! key             bytes
//! valueLength     varint   (-1 = null)
//! value           bytes
//! headerCount     varint
//!   headerKeyLength   varint (never null)
//!   headerKey         UTF-8
//!   headerValueLength varint (-1 = null)
//!   headerValue       bytes
//! ```

use bytes::Bytes;

use super::walk::{walk_records, MIN_HEADER_LEN};
use super::TimestampType;
use crate::error::DecodeError;
use crate::primitives::Decoder;

/// The smallest encoded record: a one-byte length and six one-byte fields.
pub(crate) const MIN_RECORD_LEN: usize = 7;

/// Headers reserved up front per record; more grow as they are decoded.
const MAX_HEADER_PREALLOC: usize = 16;

/// One record header. Keys may repeat; order is kept.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RecordHeader {
    /// The header's key (UTF-8, never null).
    pub key: String,
    /// The header's value; `None` is Kafka's null.
    pub value: Option<Bytes>,
}

impl RecordHeader {
    /// A header from a key and value.
    pub fn new(key: impl Into<String>, value: Option<Bytes>) -> Self {
        RecordHeader {
            key: key.into(),
            value,
        }
    }
}

/// One decoded record with absolute offset and timestamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The record's offset: the batch's base offset plus the record's offset delta.
    pub offset: i64,
    /// The record's timestamp: base timestamp plus delta for
    /// [`TimestampType::CreateTime`], the batch's max timestamp for
    /// [`TimestampType::LogAppendTime`].
    pub timestamp: i64,
    /// The key, a slice of the batch's buffer; `None` is Kafka's null.
    pub key: Option<Bytes>,
    /// The value, a slice of the batch's buffer; `None` is Kafka's null (a tombstone
    /// on compacted topics).
    pub value: Option<Bytes>,
    /// The headers in wire order; keys may repeat.
    pub headers: Vec<RecordHeader>,
    /// The record-level attributes byte (unused by Kafka so far, kept as read).
    pub attributes: i8,
}

/// The kind of a control record (the record key of a control batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlRecordType {
    /// The transaction was aborted.
    Abort,
    /// The transaction was committed.
    Commit,
    /// Another control type (KRaft leader change, snapshot markers, ...), kept by
    /// value.
    Other(i16),
}

impl Record {
    /// Reads the key of a record in a control batch: `version: int16, type: int16`.
    pub fn control_type(&self) -> Result<ControlRecordType, DecodeError> {
        let key = self
            .key
            .as_ref()
            .ok_or(DecodeError::Record("control record without a key"))?;
        if key.len() < 4 {
            return Err(DecodeError::Record(
                "control record key shorter than 4 bytes",
            ));
        }
        let version = i16::from_be_bytes([key[0], key[1]]);
        if version < 0 {
            return Err(DecodeError::Record("negative control record version"));
        }
        Ok(match i16::from_be_bytes([key[2], key[3]]) {
            0 => ControlRecordType::Abort,
            1 => ControlRecordType::Commit,
            other => ControlRecordType::Other(other),
        })
    }
}

/// Lazily decodes the records of one batch; see [`RecordBatch::records`].
///
/// Yields at most `recordCount` records. Yields an error, then ends, if a record is
/// malformed, if the bytes end before `recordCount` records, or if bytes trail the
/// last one.
///
/// [`RecordBatch::records`]: super::RecordBatch::records
#[derive(Debug, Clone)]
pub struct Records {
    data: Decoder,
    remaining: i32,
    base_offset: i64,
    base_timestamp: i64,
    timestamp_type: TimestampType,
    max_timestamp: i64,
    done: bool,
}

impl Records {
    pub(crate) fn new(
        body: Bytes,
        count: i32,
        base_offset: i64,
        base_timestamp: i64,
        timestamp_type: TimestampType,
        max_timestamp: i64,
    ) -> Self {
        Records {
            data: Decoder::new(body),
            remaining: count.max(0),
            base_offset,
            base_timestamp,
            timestamp_type,
            max_timestamp,
            done: false,
        }
    }

    /// Records announced but not yet yielded.
    pub fn remaining_count(&self) -> usize {
        if self.done {
            0
        } else {
            self.remaining as usize
        }
    }

    /// Bytes of the records section not yet decoded: for a fresh iterator over a
    /// compressed batch, the size of the decompressed section its records point
    /// into.
    pub fn remaining_bytes(&self) -> usize {
        self.data.remaining()
    }

    /// Checks, in one pass that allocates nothing and does not advance the
    /// iterator, that every record not yet yielded decodes and that nothing trails
    /// them (see [`walk_records`]). After `Ok`, the iterator yields only records.
    pub fn check(&self) -> Result<(), DecodeError> {
        if self.done {
            return Ok(());
        }
        walk_records(self.data.rest(), self.remaining).check()
    }

    fn decode_one(&mut self) -> Result<Record, DecodeError> {
        let length = self.data.varint()?;
        if length < 0 || length as usize > self.data.remaining() {
            return Err(DecodeError::BadLength {
                what: "record",
                length: length as i64,
                remaining: self.data.remaining(),
            });
        }
        let mut r = Decoder::new(self.data.take(length as usize, "record")?);
        let attributes = r.i8()?;
        let timestamp_delta = r.varlong()?;
        let offset_delta = r.varint()?;
        let key = nullable_bytes(&mut r, "record key")?;
        let value = nullable_bytes(&mut r, "record value")?;
        let header_count = r.varint()?;
        if header_count < 0 || header_count as usize > r.remaining() / MIN_HEADER_LEN {
            return Err(DecodeError::BadLength {
                what: "record header count",
                length: header_count as i64,
                remaining: r.remaining(),
            });
        }
        let mut headers = Vec::with_capacity((header_count as usize).min(MAX_HEADER_PREALLOC));
        for _ in 0..header_count {
            let key = nullable_bytes(&mut r, "record header key")?
                .ok_or(DecodeError::UnexpectedNull("record header key"))?;
            let key = std::str::from_utf8(&key)
                .map_err(|_| DecodeError::InvalidUtf8)?
                .to_owned();
            let value = nullable_bytes(&mut r, "record header value")?;
            headers.push(RecordHeader { key, value });
        }
        if !r.is_empty() {
            return Err(DecodeError::Record("bytes left over inside a record"));
        }
        let timestamp = match self.timestamp_type {
            TimestampType::CreateTime => self.base_timestamp.wrapping_add(timestamp_delta),
            TimestampType::LogAppendTime => self.max_timestamp,
        };
        Ok(Record {
            offset: self.base_offset.wrapping_add(offset_delta as i64),
            timestamp,
            key,
            value,
            headers,
            attributes,
        })
    }
}

/// Reads a varint length (-1 = null) and that many bytes, zero-copy.
fn nullable_bytes(d: &mut Decoder, what: &'static str) -> Result<Option<Bytes>, DecodeError> {
    let len = d.varint()?;
    if len == -1 {
        return Ok(None);
    }
    if len < 0 || len as usize > d.remaining() {
        return Err(DecodeError::BadLength {
            what,
            length: len as i64,
            remaining: d.remaining(),
        });
    }
    d.take(len as usize, what).map(Some)
}

impl Iterator for Records {
    type Item = Result<Record, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.remaining == 0 {
            self.done = true;
            return match self.data.finish() {
                Ok(()) => None,
                Err(e) => Some(Err(e)),
            };
        }
        match self.decode_one() {
            Ok(record) => {
                self.remaining -= 1;
                Some(Ok(record))
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.done {
            (0, Some(0))
        } else {
            // One more item may be the trailing-bytes error.
            (0, Some(self.remaining as usize + 1))
        }
    }
}

impl std::iter::FusedIterator for Records {}
