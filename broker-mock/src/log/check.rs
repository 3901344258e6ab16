//! The checks a producer's records pass before they are appended, in one pass over
//! the bytes.
//!
//! A Produce request's records field must be whole v2 batches, each with a known
//! codec, a valid CRC, a record count matching its offset range, and (uncompressed)
//! records that decode exactly as announced with offset deltas 0, 1, 2, ... Kafka's
//! broker iterates the records of uncompressed batches in the same way.
//!
//! The walk over the records ([`baton_protocol::record::walk_records`], shared with
//! the consumer) reads only lengths and varints and skips keys, values and header
//! values without building record views; it accepts and rejects exactly what
//! decoding every record with [`baton_protocol::record::Records`] would. A
//! framing or decoding problem is `CORRUPT_MESSAGE`; a control batch, a count that
//! does not match the offset range, or an offset delta out of sequence is
//! `INVALID_RECORD`. The first problem in byte order decides.

use std::ops::Range;

use baton_protocol::record::attr::{CONTROL, TRANSACTIONAL};
use baton_protocol::record::offsets::{
    ATTRIBUTES, BASE_SEQUENCE, BATCH_LENGTH, CRC, LAST_OFFSET_DELTA, MAGIC, MAX_TIMESTAMP,
    PRODUCER_EPOCH, PRODUCER_ID, RECORD_COUNT,
};
use baton_protocol::record::{walk_records, Compression, BATCH_HEADER_LEN, LOG_OVERHEAD};
use baton_protocol::ErrorCode;

use crate::producer_state::ProducerBatch;

/// The smallest encoded record: a one-byte length and six one-byte fields.
const MIN_RECORD_LEN: usize = 7;

const CORRUPT: ErrorCode = ErrorCode::CorruptMessage;
const INVALID: ErrorCode = ErrorCode::InvalidRecord;

/// One batch of a producer's records that passed the checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CheckedBatch {
    /// Where the batch lies in the records field.
    pub range: Range<usize>,
    /// Its producer fields (and last offset delta).
    pub producer: ProducerBatch,
}

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}

fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(x)
}

/// Checks a Produce request's records field: one or more whole batches and nothing
/// else. Returns where each batch lies, in order.
pub(crate) fn check_produced(records: &[u8]) -> Result<Vec<CheckedBatch>, ErrorCode> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < records.len() {
        let rest = &records[at..];
        if rest.len() < LOG_OVERHEAD {
            return Err(CORRUPT);
        }
        let batch_length = be_i32(rest, BATCH_LENGTH);
        if batch_length < (BATCH_HEADER_LEN - LOG_OVERHEAD) as i32 {
            return Err(CORRUPT);
        }
        let total = batch_length as usize + LOG_OVERHEAD;
        if rest.len() < total {
            return Err(CORRUPT);
        }
        let batch = &rest[..total];
        let producer = check_batch(batch)?;
        out.push(CheckedBatch {
            range: at..at + total,
            producer,
        });
        at += total;
    }
    if out.is_empty() {
        return Err(CORRUPT);
    }
    Ok(out)
}

/// Checks one whole batch (its length field already matches `batch.len()`).
fn check_batch(batch: &[u8]) -> Result<ProducerBatch, ErrorCode> {
    if batch[MAGIC] != 2 {
        return Err(CORRUPT);
    }
    let attributes = be_i16(batch, ATTRIBUTES);
    let compression = Compression::from_attributes(attributes).map_err(|_| CORRUPT)?;
    let count = be_i32(batch, RECORD_COUNT);
    if count < 0 {
        return Err(CORRUPT);
    }
    let body = &batch[BATCH_HEADER_LEN..];
    if compression == Compression::None && count as usize > body.len() / MIN_RECORD_LEN {
        return Err(CORRUPT);
    }
    let last_offset_delta = be_i32(batch, LAST_OFFSET_DELTA);
    if last_offset_delta < 0 {
        return Err(CORRUPT);
    }
    if crc32c::crc32c(&batch[ATTRIBUTES..]) != be_i32(batch, CRC) as u32 {
        return Err(CORRUPT);
    }
    if attributes & CONTROL != 0 {
        return Err(INVALID);
    }
    if count == 0 || count as i64 != last_offset_delta as i64 + 1 {
        return Err(INVALID);
    }
    if compression == Compression::None {
        check_records(body, count)?;
    }
    Ok(ProducerBatch {
        producer_id: be_i64(batch, PRODUCER_ID),
        producer_epoch: be_i16(batch, PRODUCER_EPOCH),
        base_sequence: be_i32(batch, BASE_SEQUENCE),
        last_offset_delta,
        transactional: attributes & TRANSACTIONAL != 0,
        max_timestamp: be_i64(batch, MAX_TIMESTAMP),
    })
}

/// Walks `count` records filling `body` exactly (the protocol crate's
/// allocation-free walk); each one's offset delta must be its position.
fn check_records(body: &[u8], count: i32) -> Result<(), ErrorCode> {
    for (i, offset_delta) in walk_records(body, count).enumerate() {
        if offset_delta.map_err(|_| CORRUPT)? != i as i32 {
            return Err(INVALID);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
