//! An allocation-free pass over a (decompressed) records section that checks each
//! record's framing without building record views.
//!
//! [`walk_records`] reads only lengths and varints and skips keys, values and header
//! values (header keys are checked to be UTF-8). It accepts and rejects exactly what
//! decoding every record with [`Records`](super::Records) would, so a caller can
//! check a whole batch first and then hand its records out lazily, knowing the
//! decoding iterator will not fail half-way: the consumer does so before yielding
//! any record of a batch, and the broker runs it on produced batches.

use crate::error::DecodeError;

/// The smallest encoded header: a key length and a value length.
pub(crate) const MIN_HEADER_LEN: usize = 2;

/// Walks `count` records that must fill `body` exactly; see [`RecordWalk`].
pub fn walk_records(body: &[u8], count: i32) -> RecordWalk<'_> {
    RecordWalk {
        body,
        at: 0,
        remaining: count.max(0),
        done: false,
    }
}

/// Yields the offset delta of each of `count` records in turn, each only after the
/// whole record checked out; then an error if bytes trail the last record. The
/// first error ends the walk. Never allocates.
///
/// ```
/// use baton_protocol::record::{walk_records, RecordBatch, RecordBatchBuilder};
///
/// let mut b = RecordBatchBuilder::new(0);
/// b.push(0, Some(b"k"), Some(b"v"), &[]);
/// b.push(0, None, None, &[]);
/// let batch = RecordBatch::parse(b.finish()).unwrap();
/// let body = batch.records_bytes();
/// let deltas: Result<Vec<i32>, _> = walk_records(&body, batch.record_count()).collect();
/// assert_eq!(deltas.unwrap(), [0, 1]);
/// assert!(walk_records(&body[..body.len() - 1], 2).any(|r| r.is_err()));
/// ```
#[derive(Debug, Clone)]
pub struct RecordWalk<'a> {
    body: &'a [u8],
    at: usize,
    remaining: i32,
    done: bool,
}

impl RecordWalk<'_> {
    /// Runs the walk to its end: `Ok` if every record checks out and nothing
    /// trails them.
    pub fn check(self) -> Result<(), DecodeError> {
        for r in self {
            r?;
        }
        Ok(())
    }

    /// Checks the next record and returns its offset delta.
    fn step(&mut self) -> Result<i32, DecodeError> {
        let b = self.body;
        let len = varint(b, &mut self.at)?;
        if len < 0 || len as usize > b.len() - self.at {
            return Err(DecodeError::BadLength {
                what: "record",
                length: len as i64,
                remaining: b.len() - self.at,
            });
        }
        let end = self.at + len as usize;
        let delta = check_record(&b[self.at..end])?;
        self.at = end;
        Ok(delta)
    }
}

impl Iterator for RecordWalk<'_> {
    type Item = Result<i32, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.remaining == 0 {
            self.done = true;
            let left = self.body.len() - self.at;
            return (left != 0).then_some(Err(DecodeError::TrailingBytes(left)));
        }
        let step = self.step();
        if step.is_ok() {
            self.remaining -= 1;
        } else {
            self.done = true;
        }
        Some(step)
    }
}

impl std::iter::FusedIterator for RecordWalk<'_> {}

/// Checks one record's fields (after its length) and returns its offset delta.
fn check_record(r: &[u8]) -> Result<i32, DecodeError> {
    if r.is_empty() {
        return Err(DecodeError::Truncated {
            what: "int8",
            needed: 1,
        });
    }
    let mut at = 1; // attributes
    skip_varlong(r, &mut at)?; // timestamp delta
    let offset_delta = varint(r, &mut at)?;
    skip_nullable(r, &mut at, "record key")?;
    skip_nullable(r, &mut at, "record value")?;
    let headers = varint(r, &mut at)?;
    if headers < 0 || headers as usize > (r.len() - at) / MIN_HEADER_LEN {
        return Err(DecodeError::BadLength {
            what: "record header count",
            length: headers as i64,
            remaining: r.len() - at,
        });
    }
    for _ in 0..headers {
        let len = varint(r, &mut at)?;
        if len == -1 {
            return Err(DecodeError::UnexpectedNull("record header key"));
        }
        if len < 0 || len as usize > r.len() - at {
            return Err(DecodeError::BadLength {
                what: "record header key",
                length: len as i64,
                remaining: r.len() - at,
            });
        }
        let key = &r[at..at + len as usize];
        std::str::from_utf8(key).map_err(|_| DecodeError::InvalidUtf8)?;
        at += len as usize;
        skip_nullable(r, &mut at, "record header value")?;
    }
    if at != r.len() {
        return Err(DecodeError::Record("bytes left over inside a record"));
    }
    Ok(offset_delta)
}

/// Skips a varint length (-1 = null) and that many bytes.
#[inline]
fn skip_nullable(b: &[u8], at: &mut usize, what: &'static str) -> Result<(), DecodeError> {
    let len = varint(b, at)?;
    if len == -1 {
        return Ok(());
    }
    if len < 0 || len as usize > b.len() - *at {
        return Err(DecodeError::BadLength {
            what,
            length: len as i64,
            remaining: b.len() - *at,
        });
    }
    *at += len as usize;
    Ok(())
}

fn truncated(what: &'static str) -> DecodeError {
    DecodeError::Truncated { what, needed: 1 }
}

/// Reads a zigzag varint of at most 32 bits (5 bytes, the last below 0x10).
#[inline]
fn varint(b: &[u8], at: &mut usize) -> Result<i32, DecodeError> {
    let first = *b.get(*at).ok_or_else(|| truncated("varint"))?;
    let v = if first < 0x80 {
        *at += 1;
        first as u32
    } else {
        uvarint_slow(b, at)?
    };
    Ok(((v >> 1) as i32) ^ -((v & 1) as i32))
}

fn uvarint_slow(b: &[u8], at: &mut usize) -> Result<u32, DecodeError> {
    let mut value: u32 = 0;
    for i in 0..5 {
        let byte = *b.get(*at).ok_or_else(|| truncated("varint"))?;
        *at += 1;
        if i == 4 && byte > 0x0f {
            return Err(DecodeError::VarintOverflow);
        }
        value |= ((byte & 0x7f) as u32) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(DecodeError::VarintOverflow)
}

/// Skips a varint of at most 64 bits (10 bytes, the last below 0x02).
#[inline]
fn skip_varlong(b: &[u8], at: &mut usize) -> Result<(), DecodeError> {
    for i in 0..10 {
        let byte = *b.get(*at).ok_or_else(|| truncated("varlong"))?;
        *at += 1;
        if i == 9 && byte > 0x01 {
            return Err(DecodeError::VarintOverflow);
        }
        if byte & 0x80 == 0 {
            return Ok(());
        }
    }
    Err(DecodeError::VarintOverflow)
}
