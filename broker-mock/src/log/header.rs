//! The fixed 61-byte header of a v2 record batch, as far as the log needs it: framing
//! (base offset, length), the offset range, the max timestamp and the CRC.
//!
//! The log reads headers straight from segment files, where the bytes may be torn or
//! damaged, so every accessor works on a checked slice and nothing here panics.

pub use baton_protocol::record::{BATCH_HEADER_LEN as HEADER_LEN, LOG_OVERHEAD};

/// The fields of a batch header the log uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// Offset of the first record.
    pub base_offset: i64,
    /// Whole batch size in bytes, including base offset and length fields.
    pub total_len: usize,
    /// Offset of the last record (base offset + last offset delta).
    pub last_offset: i64,
    /// The largest record timestamp in the batch.
    pub max_timestamp: i64,
    /// Format version (must be 2).
    pub magic: i8,
    /// The stored CRC-32C over attributes to the end.
    pub crc: u32,
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

fn be_i32(b: &[u8], at: usize) -> i32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    i32::from_be_bytes(a)
}

/// Reads base offset and total length from the first 12 bytes, `None` if fewer are
/// given or the length is impossible for a v2 batch.
pub fn frame_len(b: &[u8]) -> Option<(i64, usize)> {
    if b.len() < LOG_OVERHEAD {
        return None;
    }
    let len = be_i32(b, 8);
    if len < (HEADER_LEN - LOG_OVERHEAD) as i32 {
        return None;
    }
    Some((be_i64(b, 0), LOG_OVERHEAD + len as usize))
}

impl BatchHeader {
    /// Parses a header from at least [`HEADER_LEN`] bytes; `Err` names what is wrong.
    pub fn parse(b: &[u8]) -> Result<BatchHeader, &'static str> {
        if b.len() < HEADER_LEN {
            return Err("batch shorter than its header");
        }
        let (base_offset, total_len) = frame_len(b).ok_or("batch length too small")?;
        let magic = b[16] as i8;
        if magic != 2 {
            return Err("batch magic is not 2");
        }
        let delta = be_i32(b, 23);
        if delta < 0 {
            return Err("negative last offset delta");
        }
        let last_offset = base_offset
            .checked_add(delta as i64)
            .ok_or("offset overflow")?;
        if base_offset < 0 {
            return Err("negative base offset");
        }
        Ok(BatchHeader {
            base_offset,
            total_len,
            last_offset,
            max_timestamp: be_i64(b, 35),
            magic,
            crc: be_i32(b, 17) as u32,
        })
    }

    /// Whether the CRC-32C over `batch[21..]` (attributes to the end) matches.
    pub fn crc_ok(&self, batch: &[u8]) -> bool {
        batch.len() == self.total_len
            && batch.len() >= HEADER_LEN
            && crc32c::crc32c(&batch[21..]) == self.crc
    }
}

/// Checks a whole batch: framing, magic and CRC. `Ok` carries its header.
pub fn validate(batch: &[u8]) -> Result<BatchHeader, &'static str> {
    let h = BatchHeader::parse(batch)?;
    if h.total_len != batch.len() {
        return Err("batch length field does not match its size");
    }
    if !h.crc_ok(batch) {
        return Err("batch CRC mismatch");
    }
    Ok(h)
}
