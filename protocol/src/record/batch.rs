//! The zero-copy batch view, the batch iterator over a records blob, and the in-place
//! header rewrites the broker applies to owned batch buffers.

use std::fmt;

use bytes::Bytes;

use super::compression::{decompress, DecompressionLimits};
use super::offsets as off;
use super::record::Records;
use super::{attr, Compression, TimestampType, BATCH_HEADER_LEN, LOG_OVERHEAD, MAGIC_V2};
use crate::error::DecodeError;

/// A zero-copy view over exactly one whole record batch (format v2).
///
/// Invariant (checked by [`RecordBatch::parse`]): the buffer holds at least
/// [`BATCH_HEADER_LEN`] bytes, its `batchLength` equals `len - 12`, the magic is 2,
/// the compression bits name a known codec, and `recordCount` and `lastOffsetDelta`
/// are not negative. The CRC is *not* checked by `parse`; call
/// [`RecordBatch::verify_crc`].
#[derive(Clone, PartialEq, Eq)]
pub struct RecordBatch {
    data: Bytes,
}

fn get_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}

fn get_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn get_i64(b: &[u8], at: usize) -> i64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(x)
}

impl RecordBatch {
    /// Checks the framing of one whole batch and wraps it without copying.
    ///
    /// Checks: at least [`BATCH_HEADER_LEN`] bytes; magic 2; `batchLength + 12`
    /// equal to `data.len()`; a known compression codec; `recordCount >= 0`;
    /// `lastOffsetDelta >= 0`; and, for uncompressed batches, a record count the
    /// bytes present could hold. The CRC is not checked here.
    pub fn parse(data: Bytes) -> Result<RecordBatch, DecodeError> {
        if data.len() < BATCH_HEADER_LEN {
            return Err(DecodeError::Truncated {
                what: "record batch header",
                needed: BATCH_HEADER_LEN - data.len(),
            });
        }
        let magic = data[off::MAGIC] as i8;
        if magic != MAGIC_V2 {
            return Err(DecodeError::UnsupportedMagic(magic));
        }
        let batch_length = get_i32(&data, off::BATCH_LENGTH);
        if batch_length < 0 || batch_length as usize + LOG_OVERHEAD != data.len() {
            return Err(DecodeError::BadLength {
                what: "record batch length",
                length: batch_length as i64,
                remaining: data.len() - LOG_OVERHEAD,
            });
        }
        let attributes = get_i16(&data, off::ATTRIBUTES);
        let compression = Compression::from_attributes(attributes)?;
        let count = get_i32(&data, off::RECORD_COUNT);
        if count < 0 {
            return Err(DecodeError::Record("negative record count"));
        }
        if compression == Compression::None {
            let body = data.len() - BATCH_HEADER_LEN;
            if count as usize > body / super::record::MIN_RECORD_LEN {
                return Err(DecodeError::BadLength {
                    what: "record count",
                    length: count as i64,
                    remaining: body,
                });
            }
        }
        if get_i32(&data, off::LAST_OFFSET_DELTA) < 0 {
            return Err(DecodeError::Record("negative last offset delta"));
        }
        Ok(RecordBatch { data })
    }

    /// The offset of the first record (assigned by the broker; 0 from producers).
    pub fn base_offset(&self) -> i64 {
        get_i64(&self.data, off::BASE_OFFSET)
    }

    /// Bytes after the `batchLength` field; the whole batch is this plus 12.
    pub fn batch_length(&self) -> i32 {
        get_i32(&self.data, off::BATCH_LENGTH)
    }

    /// The leader epoch of the broker that appended the batch (-1 from producers).
    pub fn partition_leader_epoch(&self) -> i32 {
        get_i32(&self.data, off::PARTITION_LEADER_EPOCH)
    }

    /// The format version; always 2 for a parsed batch.
    pub fn magic(&self) -> i8 {
        self.data[off::MAGIC] as i8
    }

    /// The CRC-32C stored in the header.
    pub fn crc(&self) -> u32 {
        get_u32(&self.data, off::CRC)
    }

    /// The raw attributes field.
    pub fn attributes(&self) -> i16 {
        get_i16(&self.data, off::ATTRIBUTES)
    }

    /// The compression codec (attribute bits 0-2).
    pub fn compression(&self) -> Compression {
        // `parse` rejected unknown codecs.
        Compression::from_attributes(self.attributes()).unwrap_or_default()
    }

    /// The timestamp type (attribute bit 3).
    pub fn timestamp_type(&self) -> TimestampType {
        TimestampType::from_attributes(self.attributes())
    }

    /// Whether the batch belongs to a transaction (attribute bit 4).
    pub fn is_transactional(&self) -> bool {
        self.attributes() & attr::TRANSACTIONAL != 0
    }

    /// Whether the batch holds control records such as commit/abort markers
    /// (attribute bit 5).
    pub fn is_control(&self) -> bool {
        self.attributes() & attr::CONTROL != 0
    }

    /// Whether `baseTimestamp` holds the delete horizon set by the log cleaner
    /// (attribute bit 6, KIP-534).
    pub fn has_delete_horizon(&self) -> bool {
        self.attributes() & attr::DELETE_HORIZON != 0
    }

    /// The last record's offset minus the base offset.
    pub fn last_offset_delta(&self) -> i32 {
        get_i32(&self.data, off::LAST_OFFSET_DELTA)
    }

    /// The offset of the last record the batch covers (records may have been
    /// removed by compaction, but the range stays).
    pub fn last_offset(&self) -> i64 {
        self.base_offset()
            .wrapping_add(self.last_offset_delta() as i64)
    }

    /// The offset after this batch: `last_offset() + 1`.
    pub fn next_offset(&self) -> i64 {
        self.last_offset().wrapping_add(1)
    }

    /// The timestamp record deltas are relative to.
    pub fn base_timestamp(&self) -> i64 {
        get_i64(&self.data, off::BASE_TIMESTAMP)
    }

    /// The largest record timestamp, or the append time for
    /// [`TimestampType::LogAppendTime`].
    pub fn max_timestamp(&self) -> i64 {
        get_i64(&self.data, off::MAX_TIMESTAMP)
    }

    /// The idempotent producer's id, or -1.
    pub fn producer_id(&self) -> i64 {
        get_i64(&self.data, off::PRODUCER_ID)
    }

    /// The idempotent producer's epoch, or -1.
    pub fn producer_epoch(&self) -> i16 {
        get_i16(&self.data, off::PRODUCER_EPOCH)
    }

    /// The sequence number of the first record, or -1.
    pub fn base_sequence(&self) -> i32 {
        get_i32(&self.data, off::BASE_SEQUENCE)
    }

    /// The number of records the header announces.
    pub fn record_count(&self) -> i32 {
        get_i32(&self.data, off::RECORD_COUNT)
    }

    /// The CRC-32C over the attributes to the end of the batch.
    pub fn compute_crc(&self) -> u32 {
        crc32c::crc32c(&self.data[off::ATTRIBUTES..])
    }

    /// Fails with [`DecodeError::CrcMismatch`] unless the stored CRC matches the
    /// contents.
    pub fn verify_crc(&self) -> Result<(), DecodeError> {
        let stored = self.crc();
        let computed = self.compute_crc();
        if stored == computed {
            Ok(())
        } else {
            Err(DecodeError::CrcMismatch { stored, computed })
        }
    }

    /// The records, decoded lazily as the iterator advances.
    ///
    /// Keys and values are zero-copy slices of the batch's buffer, or, for a
    /// compressed batch, of one buffer holding the decompressed records section
    /// (decompressed here, once, within [`DecompressionLimits::default`]). The
    /// iterator yields an error (and then ends) if a record is malformed, if fewer
    /// records than announced are present, or if bytes trail the last one.
    ///
    /// # Errors
    ///
    /// For compressed batches: [`DecodeError::UnsupportedCompression`] if the
    /// codec's feature is off, [`DecodeError::DecompressedTooLarge`] or
    /// [`DecodeError::CorruptCompression`].
    pub fn records(&self) -> Result<Records, DecodeError> {
        self.records_with_limits(&DecompressionLimits::default())
    }

    /// [`RecordBatch::records`] with explicit limits on decompression.
    pub fn records_with_limits(
        &self,
        limits: &DecompressionLimits,
    ) -> Result<Records, DecodeError> {
        let body = self.decompressed_body(limits)?;
        Ok(Records::new(
            body,
            self.record_count(),
            self.base_offset(),
            self.base_timestamp(),
            self.timestamp_type(),
            self.max_timestamp(),
        ))
    }

    /// The encoded records as stored (after the header), possibly compressed.
    pub fn records_bytes(&self) -> Bytes {
        self.data.slice(BATCH_HEADER_LEN..)
    }

    /// The records section with compression undone, bounded by `limits`; an
    /// uncompressed section is returned without copying.
    fn decompressed_body(&self, limits: &DecompressionLimits) -> Result<Bytes, DecodeError> {
        match self.compression() {
            Compression::None => Ok(self.records_bytes()),
            codec => decompress(codec, &self.data[BATCH_HEADER_LEN..], limits),
        }
    }

    /// The whole batch's bytes.
    pub fn as_bytes(&self) -> &Bytes {
        &self.data
    }

    /// The whole batch's bytes, by value.
    pub fn into_bytes(self) -> Bytes {
        self.data
    }

    /// The size of the whole batch in bytes.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Always false: a batch holds at least its header.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

impl fmt::Debug for RecordBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordBatch")
            .field("base_offset", &self.base_offset())
            .field("len", &self.len())
            .field("partition_leader_epoch", &self.partition_leader_epoch())
            .field("crc", &format_args!("{:#010x}", self.crc()))
            .field("attributes", &format_args!("{:#06x}", self.attributes()))
            .field("last_offset_delta", &self.last_offset_delta())
            .field("base_timestamp", &self.base_timestamp())
            .field("max_timestamp", &self.max_timestamp())
            .field("producer_id", &self.producer_id())
            .field("producer_epoch", &self.producer_epoch())
            .field("base_sequence", &self.base_sequence())
            .field("record_count", &self.record_count())
            .finish()
    }
}

/// Iterates the batches of a records blob: a Produce request's or Fetch response's
/// `records` field, or a log segment.
///
/// A truncated trailing batch (a fetch response may cut the last one at its size
/// limit) ends the iteration without an error; [`BatchIter::position`] then tells
/// where it started. Malformed framing of a whole batch yields one error, after which
/// the iterator ends.
#[derive(Debug, Clone)]
pub struct BatchIter {
    data: Bytes,
    position: usize,
    failed: bool,
}

/// Iterates the batches in `data` (see [`BatchIter`]).
pub fn batches(data: Bytes) -> BatchIter {
    BatchIter {
        data,
        position: 0,
        failed: false,
    }
}

impl BatchIter {
    /// Bytes of the blob consumed by the whole batches yielded so far. Once the
    /// iterator has ended without error, everything from here on is a truncated
    /// tail (empty if the blob ended cleanly).
    pub fn position(&self) -> usize {
        self.position
    }

    /// The bytes not yet consumed.
    pub fn remainder(&self) -> Bytes {
        self.data.slice(self.position..)
    }
}

impl Iterator for BatchIter {
    type Item = Result<RecordBatch, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let rest = &self.data[self.position..];
        if rest.len() < LOG_OVERHEAD {
            return None;
        }
        let batch_length = get_i32(rest, off::BATCH_LENGTH);
        let min_length = (BATCH_HEADER_LEN - LOG_OVERHEAD) as i32;
        if batch_length < min_length {
            self.failed = true;
            return Some(Err(DecodeError::BadLength {
                what: "record batch length",
                length: batch_length as i64,
                remaining: rest.len() - LOG_OVERHEAD,
            }));
        }
        // A known magic is checked as soon as it is present, so that a blob of
        // another format is an error rather than a "truncated" tail.
        if rest.len() > off::MAGIC && rest[off::MAGIC] as i8 != MAGIC_V2 {
            self.failed = true;
            return Some(Err(DecodeError::UnsupportedMagic(rest[off::MAGIC] as i8)));
        }
        let total = batch_length as usize + LOG_OVERHEAD;
        if rest.len() < total {
            return None;
        }
        let start = self.position;
        match RecordBatch::parse(self.data.slice(start..start + total)) {
            Ok(batch) => {
                self.position += total;
                Some(Ok(batch))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

impl std::iter::FusedIterator for BatchIter {}

fn check_header(batch: &[u8]) {
    assert!(
        batch.len() >= BATCH_HEADER_LEN,
        "record batch buffer of {} bytes is shorter than its header",
        batch.len()
    );
}

/// Writes the base offset into an owned batch buffer. The field is outside the CRC,
/// so the CRC stays valid.
///
/// # Panics
///
/// If `batch` is shorter than [`BATCH_HEADER_LEN`] (pass only parsed batches).
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    check_header(batch);
    batch[off::BASE_OFFSET..off::BASE_OFFSET + 8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Writes the partition leader epoch into an owned batch buffer. The field is
/// outside the CRC, so the CRC stays valid.
///
/// # Panics
///
/// If `batch` is shorter than [`BATCH_HEADER_LEN`] (pass only parsed batches).
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    check_header(batch);
    batch[off::PARTITION_LEADER_EPOCH..off::PARTITION_LEADER_EPOCH + 4]
        .copy_from_slice(&epoch.to_be_bytes());
}

/// Marks an owned batch buffer as [`TimestampType::LogAppendTime`] with `timestamp`
/// as its `maxTimestamp`, then recomputes the CRC (both fields are covered by it).
///
/// Verify the CRC *before* calling this: the recomputed CRC covers whatever the
/// buffer holds, including prior corruption.
///
/// # Panics
///
/// If `batch` is shorter than [`BATCH_HEADER_LEN`] (pass only parsed batches).
pub fn set_log_append_time(batch: &mut [u8], timestamp: i64) {
    check_header(batch);
    let attributes = get_i16(batch, off::ATTRIBUTES) | attr::TIMESTAMP_TYPE;
    batch[off::ATTRIBUTES..off::ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
    batch[off::MAX_TIMESTAMP..off::MAX_TIMESTAMP + 8].copy_from_slice(&timestamp.to_be_bytes());
    write_crc(batch);
}

/// Recomputes and stores the CRC of a batch buffer.
pub(crate) fn write_crc(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[off::ATTRIBUTES..]);
    batch[off::CRC..off::CRC + 4].copy_from_slice(&crc.to_be_bytes());
}
