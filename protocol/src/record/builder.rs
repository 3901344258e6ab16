//! Building a batch: records are encoded as they are pushed, after room left for the
//! batch header in the same buffer; `finish` fills in the header, counts, last offset
//! delta, max timestamp and CRC in place, so an uncompressed batch is never copied. A
//! compressed batch is written once more, compressed, after a fresh header.
//!
//! Values of at least [`SHARED_VALUE_MIN`] bytes pushed with
//! [`RecordBatchBuilder::push_shared`] into an uncompressed batch are not copied at
//! all: the builder keeps the value's [`Bytes`] and where it belongs, and
//! [`RecordBatchBuilder::finish_segments`] returns the batch as a chain of segments
//! whose CRC-32C is computed across them.

use bytes::{BufMut, Bytes, BytesMut};

use super::batch::write_crc;
use super::compression::compress;
use super::pool;
use super::record::RecordHeader;
use super::{
    attr, offsets, BatchSegments, Compression, Record, TimestampType, BATCH_HEADER_LEN,
    LOG_OVERHEAD, MAGIC_V2,
};
use crate::primitives::{put_varint, put_varlong, varint_len};

/// Longest encoding of a varint (32-bit value).
const MAX_VARINT_LEN: usize = 5;
/// Longest encoding of a varlong (64-bit value).
const MAX_VARLONG_LEN: usize = 10;

/// Values of at least this many bytes, pushed with
/// [`RecordBatchBuilder::push_shared`] into an uncompressed batch, become segments
/// of their own instead of being copied into the batch.
///
/// Why 64 KiB: a shared value costs a segment (a reference count, an extra entry
/// in the vectored write, a slice of the CRC pass); below a few tens of KiB copying
/// it is cheaper. It is also above the Produce encoder's
/// [`DEFAULT_MIN_SEGMENT`](crate::primitives::DEFAULT_MIN_SEGMENT) (16 KiB), so a
/// shared value also stays out of line in the request frame and reaches the socket
/// uncopied, and equal to the size from which batch buffers come from the buffer
/// pool: a batch of only small values never has segments.
pub const SHARED_VALUE_MIN: usize = 64 * 1024;

/// Builds one record batch (format v2) into a [`BytesMut`].
///
/// Defaults: base offset 0, partition leader epoch -1, producer id -1, producer
/// epoch -1, base sequence -1, no compression, create time, not transactional,
/// not control. With [`RecordBatchBuilder::compression`] the records section is
/// compressed once, when the batch is finished; the finished [`Bytes`] are what a
/// retry resends. Record offset deltas are 0, 1, 2, ... in push order; timestamp deltas
/// are relative to the base timestamp given to [`RecordBatchBuilder::new`] (pass the
/// first record's timestamp to keep them short). An empty batch gets
/// `lastOffsetDelta` 0 and `maxTimestamp` -1.
#[derive(Debug, Clone)]
pub struct RecordBatchBuilder {
    base_offset: i64,
    partition_leader_epoch: i32,
    attributes: i16,
    base_timestamp: i64,
    max_timestamp: Option<i64>,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    /// The batch so far: [`BATCH_HEADER_LEN`] bytes of room for the header (filled
    /// in by `finish`), then the encoded records.
    buf: Vec<u8>,
    /// Shared values, each with the position in `buf` it goes before (after its
    /// length prefix). Positions never decrease. Invariant: empty when compressed.
    spliced: Vec<(usize, Bytes)>,
    /// Total length of `spliced`.
    spliced_len: usize,
    /// Records pushed so far. Invariant: fits in an `i32`.
    count: usize,
    /// Codec of the records section. Invariant: supported by this build.
    compression: Compression,
    /// Requested compression level; `None` is the codec's default.
    compression_level: Option<i32>,
}

impl RecordBatchBuilder {
    /// An empty builder whose timestamp deltas are relative to `base_timestamp`.
    pub fn new(base_timestamp: i64) -> Self {
        RecordBatchBuilder {
            base_offset: 0,
            partition_leader_epoch: -1,
            attributes: 0,
            base_timestamp,
            max_timestamp: None,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            buf: vec![0; BATCH_HEADER_LEN],
            spliced: Vec::new(),
            spliced_len: 0,
            count: 0,
            compression: Compression::None,
            compression_level: None,
        }
    }

    /// Sets the codec that compresses the records section when the batch is
    /// finished (default [`Compression::None`]).
    ///
    /// # Panics
    ///
    /// If the codec's cargo feature is off; check [`Compression::is_supported`]
    /// when the codec comes from configuration.
    pub fn compression(mut self, codec: Compression) -> Self {
        assert!(
            codec.is_supported(),
            "compression codec {codec} is not enabled in this build of baton-protocol"
        );
        self.attributes = (self.attributes & !attr::COMPRESSION_MASK) | codec.bits();
        self.compression = codec;
        if codec != Compression::None {
            self.inline_shared();
        }
        self
    }

    /// Copies the shared values into `buf`, for a records section that must be
    /// contiguous (compression).
    fn inline_shared(&mut self) {
        if self.spliced.is_empty() {
            return;
        }
        let total = self.buf.len() + self.spliced_len;
        let mut merged = if total >= pool::MIN_POOLED {
            pool::take(total)
        } else {
            Vec::with_capacity(total)
        };
        let mut at = 0;
        for (pos, value) in self.spliced.drain(..) {
            merged.extend_from_slice(&self.buf[at..pos]);
            merged.extend_from_slice(&value);
            at = pos;
        }
        merged.extend_from_slice(&self.buf[at..]);
        self.spliced_len = 0;
        pool::give(std::mem::replace(&mut self.buf, merged));
    }

    /// Sets the compression level: gzip 1-9 (default 6), Zstandard -131072 to 22
    /// (default 3). Out-of-range levels are clamped; codecs without levels (Snappy,
    /// LZ4) ignore it. See [`Compression::level_range`].
    pub fn compression_level(mut self, level: i32) -> Self {
        self.compression_level = Some(level);
        self
    }

    /// Sets the idempotent producer's id, epoch and the first record's sequence.
    pub fn producer(mut self, producer_id: i64, producer_epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
        self
    }

    /// Sets the base offset (the broker assigns it; producers leave 0).
    pub fn base_offset(mut self, base_offset: i64) -> Self {
        self.base_offset = base_offset;
        self
    }

    /// Sets the partition leader epoch (the broker stamps it; producers leave -1).
    pub fn partition_leader_epoch(mut self, epoch: i32) -> Self {
        self.partition_leader_epoch = epoch;
        self
    }

    /// Marks the batch as part of a transaction.
    pub fn transactional(mut self, yes: bool) -> Self {
        self.set_bit(attr::TRANSACTIONAL, yes);
        self
    }

    /// Marks the batch as holding control records.
    pub fn control(mut self, yes: bool) -> Self {
        self.set_bit(attr::CONTROL, yes);
        self
    }

    /// Sets the timestamp type. With [`TimestampType::LogAppendTime`] readers take
    /// every record's timestamp from `maxTimestamp`.
    pub fn timestamp_type(mut self, timestamp_type: TimestampType) -> Self {
        self.set_bit(
            attr::TIMESTAMP_TYPE,
            timestamp_type == TimestampType::LogAppendTime,
        );
        self
    }

    fn set_bit(&mut self, bit: i16, on: bool) {
        if on {
            self.attributes |= bit;
        } else {
            self.attributes &= !bit;
        }
    }

    /// An upper bound of one record's encoded size, for checking size limits
    /// before pushing.
    pub fn estimate_record_size(
        key_len: usize,
        value_len: usize,
        headers: &[RecordHeader],
    ) -> usize {
        let headers_len: usize = headers
            .iter()
            .map(|h| 2 * MAX_VARINT_LEN + h.key.len() + h.value.as_ref().map_or(0, |v| v.len()))
            .sum();
        // length, attributes, timestamp delta, offset delta, key length, key,
        // value length, value, header count, headers.
        MAX_VARINT_LEN
            + 1
            + MAX_VARLONG_LEN
            + MAX_VARINT_LEN
            + MAX_VARINT_LEN
            + key_len
            + MAX_VARINT_LEN
            + value_len
            + MAX_VARINT_LEN
            + headers_len
    }

    /// Appends a record.
    ///
    /// # Panics
    ///
    /// If the batch would exceed `i32::MAX` records or bytes, or a key, value or
    /// header is longer than `i32::MAX` bytes (Kafka's limits; check sizes with
    /// [`RecordBatchBuilder::estimate_record_size`] first).
    pub fn push(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[RecordHeader],
    ) {
        self.push_with(timestamp, key, value, None, headers);
    }

    /// Appends a record like [`RecordBatchBuilder::push`]; a value of at least
    /// [`SHARED_VALUE_MIN`] bytes in an uncompressed batch is kept as it is (a
    /// reference-counted clone of `value`, no copy) and becomes a segment of
    /// [`RecordBatchBuilder::finish_segments`]'s output.
    ///
    /// # Panics
    ///
    /// As [`RecordBatchBuilder::push`].
    pub fn push_shared(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&Bytes>,
        headers: &[RecordHeader],
    ) {
        let shared =
            value.filter(|v| self.compression == Compression::None && v.len() >= SHARED_VALUE_MIN);
        self.push_with(timestamp, key, value.map(|v| &v[..]), shared, headers);
    }

    /// Appends a record; `shared`, when given, is `value` itself, kept out of line.
    fn push_with(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        shared: Option<&Bytes>,
        headers: &[RecordHeader],
    ) {
        let offset_delta = i32::try_from(self.count).expect("record count over i32::MAX");
        let timestamp_delta = timestamp.wrapping_sub(self.base_timestamp);

        let mut size = 1 + varint_len(timestamp_delta) + varint_len(offset_delta as i64);
        size += bytes_len(key) + bytes_len(value);
        size += varint_len(len_i32(headers.len()) as i64);
        for h in headers {
            size += bytes_len(Some(h.key.as_bytes())) + bytes_len(h.value.as_deref());
        }
        let size = len_i32(size);

        let inline = size as usize - shared.map_or(0, Bytes::len);
        self.reserve(MAX_VARINT_LEN + inline);
        let buf = &mut self.buf;
        put_varint(buf, size);
        buf.put_i8(0);
        put_varlong(buf, timestamp_delta);
        put_varint(buf, offset_delta);
        put_bytes(buf, key);
        match shared {
            Some(v) => {
                put_varint(buf, len_i32(v.len()));
                self.spliced.push((buf.len(), v.clone()));
                self.spliced_len += v.len();
            }
            None => put_bytes(buf, value),
        }
        put_varint(buf, len_i32(headers.len()));
        for h in headers {
            put_bytes(buf, Some(h.key.as_bytes()));
            put_bytes(buf, h.value.as_deref());
        }
        assert!(
            buf.len() + self.spliced_len <= i32::MAX as usize,
            "record batch over i32::MAX bytes"
        );

        self.count += 1;
        self.max_timestamp = Some(self.max_timestamp.map_or(timestamp, |m| m.max(timestamp)));
    }

    /// Makes room for `additional` more bytes. Large buffers come from the pool of
    /// batch buffers, whose pages are already mapped (see `pool`).
    fn reserve(&mut self, additional: usize) {
        if self.buf.capacity() - self.buf.len() >= additional {
            return;
        }
        let wanted = self.buf.len().saturating_add(additional);
        if wanted < pool::MIN_POOLED {
            self.buf.reserve(additional);
            return;
        }
        // Grow at least geometrically, as `Vec::reserve` would.
        let mut grown = pool::take(wanted.max(2 * self.buf.capacity()));
        grown.extend_from_slice(&self.buf);
        pool::give(std::mem::replace(&mut self.buf, grown));
    }

    /// Appends a decoded record, keeping its timestamp, key, value and headers (its
    /// offset is replaced by the next offset delta).
    pub fn push_record(&mut self, record: &Record) {
        self.push(
            record.timestamp,
            record.key.as_deref(),
            record.value.as_deref(),
            &record.headers,
        );
    }

    /// Records pushed so far.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether no record was pushed.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The batch's encoded size so far (header included), for `batch.size` limits.
    /// For a compressed batch this is the size before compression, which is what
    /// the Java client's `batch.size` limit measures too; the finished batch is
    /// usually smaller.
    pub fn size_bytes(&self) -> usize {
        self.buf.len() + self.spliced_len
    }

    /// The finished batch. Without compression this is the builder's own buffer with
    /// the header filled in (no copy); shared values (see
    /// [`RecordBatchBuilder::push_shared`]) are copied into one buffer here, which
    /// [`RecordBatchBuilder::finish_segments`] avoids.
    ///
    /// # Panics
    ///
    /// If the compressed records section would take the batch over `i32::MAX`
    /// bytes.
    pub fn finish(self) -> Bytes {
        if !self.spliced.is_empty() {
            return self.finish_segments().into_bytes();
        }
        if self.compression == Compression::None {
            let header = self.header();
            let mut batch = self.buf;
            seal(&mut batch, &header);
            return pool::freeze(batch);
        }
        let mut buf = BytesMut::new();
        self.finish_into(&mut buf);
        buf.freeze()
    }

    /// Appends the finished batch to `buf` (without compression and with `buf`
    /// empty, `buf` takes over the builder's buffer instead of copying it).
    ///
    /// # Panics
    ///
    /// If the compressed records section would take the batch over `i32::MAX`
    /// bytes.
    pub fn finish_into(mut self, buf: &mut BytesMut) {
        self.inline_shared();
        let header = self.header();
        match self.compression {
            Compression::None => {
                let mut batch = self.buf;
                seal(&mut batch, &header);
                if buf.is_empty() {
                    *buf = BytesMut::from(Bytes::from(batch)); // no copy: the batch is unique
                } else {
                    buf.extend_from_slice(&batch);
                    pool::give(batch);
                }
            }
            codec => {
                let start = buf.len();
                buf.reserve(self.buf.len());
                buf.put_slice(&header);
                compress(
                    codec,
                    self.compression_level,
                    &self.buf[BATCH_HEADER_LEN..],
                    buf,
                );
                seal(&mut buf[start..], &header);
                pool::give(self.buf);
            }
        }
    }

    /// The finished batch as segments: without shared values one segment (what
    /// [`RecordBatchBuilder::finish`] returns); with them the bytes before the first
    /// shared value, the value's own [`Bytes`], the bytes up to the next one, and so
    /// on. `batchLength` counts every segment and the CRC-32C is computed across
    /// them, so the segments written one after the other are exactly the batch the
    /// same pushes would have built contiguously.
    ///
    /// # Panics
    ///
    /// As [`RecordBatchBuilder::finish`].
    pub fn finish_segments(self) -> BatchSegments {
        if self.spliced.is_empty() {
            return BatchSegments::from(self.finish());
        }
        let header = self.header();
        let mut buf = self.buf;
        buf[..BATCH_HEADER_LEN].copy_from_slice(&header);
        let batch_length = len_i32(buf.len() + self.spliced_len - LOG_OVERHEAD);
        let at = offsets::BATCH_LENGTH;
        buf[at..at + 4].copy_from_slice(&batch_length.to_be_bytes());
        let mut crc = 0;
        let mut from = offsets::ATTRIBUTES;
        for (pos, value) in &self.spliced {
            crc = crc32c::crc32c_append(crc, &buf[from..*pos]);
            crc = crc32c::crc32c_append(crc, value);
            from = *pos;
        }
        crc = crc32c::crc32c_append(crc, &buf[from..]);
        let at = offsets::CRC;
        buf[at..at + 4].copy_from_slice(&crc.to_be_bytes());

        let inline = pool::freeze(buf);
        let mut out = Vec::with_capacity(2 * self.spliced.len() + 1);
        let mut at = 0;
        for (pos, value) in self.spliced {
            out.push(inline.slice(at..pos));
            out.push(value);
            at = pos;
        }
        out.push(inline.slice(at..));
        BatchSegments::from_segments(out)
    }

    /// The batch header; `batchLength` and the CRC are left 0 for [`seal`].
    fn header(&self) -> [u8; BATCH_HEADER_LEN] {
        let last_offset_delta = self.count.saturating_sub(1) as i32;
        let mut h = [0u8; BATCH_HEADER_LEN];
        let mut w = &mut h[..];
        w.put_i64(self.base_offset);
        w.put_i32(0); // batchLength, written by `seal`.
        w.put_i32(self.partition_leader_epoch);
        w.put_i8(MAGIC_V2);
        w.put_u32(0); // CRC, written by `seal`.
        w.put_i16(self.attributes);
        w.put_i32(last_offset_delta);
        w.put_i64(self.base_timestamp);
        w.put_i64(self.max_timestamp.unwrap_or(-1));
        w.put_i64(self.producer_id);
        w.put_i16(self.producer_epoch);
        w.put_i32(self.base_sequence);
        w.put_i32(self.count as i32);
        debug_assert!(w.is_empty());
        h
    }
}

/// Completes a whole batch in place: copies in `header`, then writes `batchLength`
/// and the CRC.
fn seal(batch: &mut [u8], header: &[u8; BATCH_HEADER_LEN]) {
    batch[..BATCH_HEADER_LEN].copy_from_slice(header);
    let batch_length = len_i32(batch.len() - LOG_OVERHEAD);
    let at = offsets::BATCH_LENGTH;
    batch[at..at + 4].copy_from_slice(&batch_length.to_be_bytes());
    write_crc(batch);
}

fn len_i32(n: usize) -> i32 {
    i32::try_from(n).expect("length over i32::MAX")
}

/// Encoded size of a varint-length-prefixed nullable byte string.
fn bytes_len(b: Option<&[u8]>) -> usize {
    match b {
        None => 1,
        Some(b) => varint_len(len_i32(b.len()) as i64) + b.len(),
    }
}

fn put_bytes(buf: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => put_varint(buf, -1),
        Some(b) => {
            put_varint(buf, len_i32(b.len()));
            buf.put_slice(b);
        }
    }
}
