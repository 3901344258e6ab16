//! Self-checking record values shared by the examples: a sequence number,
//! seed-derived filler and a CRC-32C of both, written into a reusable buffer.

use bytes::{Buf, BufMut, BytesMut};

/// Fills `buf` with the `size`-byte value of `seq` (at least 12 bytes): the
/// sequence number, filler derived from `seed`, and a CRC-32C over the rest.
pub fn fill_value(buf: &mut BytesMut, seq: u64, seed: u64, size: usize) {
    buf.clear();
    buf.put_u64(seq);
    let mut x = seed ^ seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    while buf.len() < size.max(12) - 4 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf.put_u8(x as u8);
    }
    let crc = crc32c::crc32c(&buf[..]);
    buf.put_u32(crc);
}

/// The sequence number of an intact value, or `None` if its checksum fails.
pub fn check_value(value: &[u8]) -> Option<u64> {
    if value.len() < 12 {
        return None;
    }
    let (body, mut crc) = value.split_at(value.len() - 4);
    (crc32c::crc32c(body) == crc.get_u32()).then(|| (&body[..8]).get_u64())
}
