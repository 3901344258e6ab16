//! The one self-checking payload format: `baton_broker::history`'s [`payload`]
//! (id, CRC-32C, filler) read back by [`parse_payload`], re-exported with its
//! [`History`] checker, plus [`fill_payload`] to write it into a reusable buffer
//! (the examples' buffer pools overwrite those buffers, so a record that Baton
//! still held while the pool reused its bytes reads back as another id or fails
//! its checksum).

use bytes::BytesMut;

pub use baton_broker::history::{parse_payload, payload, History, HistoryReport, ProduceOutcome};

/// Bytes of a payload before its filler: the id (8) and the CRC-32C (4).
pub const HEADER_LEN: usize = 12;

/// Overwrites `buf` with the `size`-byte [`payload`] of `id` (at least
/// [`HEADER_LEN`] bytes), reusing its allocation.
pub fn fill_payload(buf: &mut BytesMut, id: u64, size: usize) {
    buf.clear();
    buf.extend_from_slice(&payload(id, size.saturating_sub(HEADER_LEN)));
}

/// The id of an intact payload, or `None` if it is not one (too short, or its
/// checksum fails).
pub fn intact_id(p: &[u8]) -> Option<u64> {
    let (id, sum) = parse_payload(p)?;
    let (_, expected) = parse_payload(&payload(id, p.len() - HEADER_LEN))?;
    (sum == expected).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filled_buffer_reads_back_and_a_flipped_bit_does_not() {
        let mut buf = BytesMut::with_capacity(64);
        fill_payload(&mut buf, 42, 64);
        assert_eq!(buf.len(), 64);
        assert_eq!(intact_id(&buf), Some(42));
        fill_payload(&mut buf, 43, 20);
        assert_eq!(intact_id(&buf), Some(43));
        buf[15] ^= 1;
        assert_eq!(intact_id(&buf), None);
        assert_eq!(intact_id(&[0; 11]), None);
    }

    /// `tests/interop/history_payload.py` writes the same bytes (its output for
    /// `payload(7, 16)`), so Python tools and Rust tests share one format.
    #[test]
    fn python_writes_the_same_bytes() {
        let hex: String = payload(7, 16).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "000000000000000793a150cc0726456483a2c1e0ff1e3d5c7b9ab9d8"
        );
    }
}
