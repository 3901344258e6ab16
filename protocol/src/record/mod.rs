//! Kafka's record batch format v2 (magic 2, KIP-98): a zero-copy view over one batch,
//! a lazy record iterator, an allocation-free check of a records section, an
//! iterator over the batches of a records blob, in-place header rewrites for the
//! broker, and a builder.
//!
//! Layout of a batch (all integers big-endian; see Apache Kafka's
//! `DefaultRecordBatch`):
//!
//! | offset | field                  | type  | covered by CRC |
//! |-------:|------------------------|-------|----------------|
//! | 0      | baseOffset             | int64 | no             |
//! | 8      | batchLength            | int32 | no             |
//! | 12     | partitionLeaderEpoch   | int32 | no             |
//! | 16     | magic (= 2)            | int8  | no             |
//! | 17     | crc (CRC-32C)          | uint32| no             |
//! | 21     | attributes             | int16 | yes            |
//! | 23     | lastOffsetDelta        | int32 | yes            |
//! | 27     | baseTimestamp          | int64 | yes            |
//! | 35     | maxTimestamp           | int64 | yes            |
//! | 43     | producerId             | int64 | yes            |
//! | 51     | producerEpoch          | int16 | yes            |
//! | 53     | baseSequence           | int32 | yes            |
//! | 57     | recordCount            | int32 | yes            |
//! | 61     | records...             |       | yes            |
//!
//! `batchLength` counts the bytes after itself, so a whole batch is
//! `batchLength + 12` bytes. Because the CRC starts at the attributes, the broker can
//! assign offsets and stamp its leader epoch without recomputing it
//! ([`set_base_offset`], [`set_partition_leader_epoch`]).
//!
//! ```
//! use baton_protocol::record::{RecordBatch, RecordBatchBuilder, RecordHeader};
//! use bytes::Bytes;
//!
//! let mut builder = RecordBatchBuilder::new(1_700_000_000_000);
//! let headers = [RecordHeader::new("trace", Some(Bytes::from_static(b"abc")))];
//! builder.push(1_700_000_000_000, Some(b"key"), Some(b"value"), &headers);
//! builder.push(1_700_000_000_005, None, None, &[]);
//! let batch = RecordBatch::parse(builder.finish()).unwrap();
//! batch.verify_crc().unwrap();
//! let records: Vec<_> = batch.records().unwrap().collect::<Result<_, _>>().unwrap();
//! assert_eq!(records.len(), 2);
//! assert_eq!(records[0].value.as_deref(), Some(&b"value"[..]));
//! assert_eq!(records[1].offset, 1);
//! assert_eq!(batch.max_timestamp(), 1_700_000_000_005);
//! ```

mod batch;
mod builder;
pub mod compression;
pub mod control;
mod pool;
#[allow(clippy::module_inception)]
mod record;
mod segments;
mod walk;

#[cfg(test)]
mod tests;

pub use batch::{
    batches, set_base_offset, set_log_append_time, set_partition_leader_epoch, BatchIter,
    RecordBatch,
};
pub use builder::{RecordBatchBuilder, SHARED_VALUE_MIN};
pub use compression::{
    compress, decompress, DecompressionLimits, DEFAULT_MAX_DECOMPRESSED, DEFAULT_MAX_RATIO,
    DEFAULT_RATIO_ALLOWANCE, XERIAL_BLOCK_SIZE, XERIAL_MAGIC,
};
pub use record::{ControlRecordType, Record, RecordHeader, Records};
pub use segments::BatchSegments;
pub use walk::{walk_records, RecordWalk};

pub use crate::codec::Compression;
use crate::error::DecodeError;

/// Size of the fixed batch header, from `baseOffset` through `recordCount`.
pub const BATCH_HEADER_LEN: usize = 61;

/// Bytes before `batchLength`'s count starts (`baseOffset` and `batchLength`), Kafka's
/// `LOG_OVERHEAD`. A whole batch is `batchLength + LOG_OVERHEAD` bytes.
pub const LOG_OVERHEAD: usize = 12;

/// The record format version this module reads and writes.
pub const MAGIC_V2: i8 = 2;

/// Byte offsets of the header fields inside a v2 batch (from the start of its
/// base offset field).
pub mod offsets {
    /// Base offset (int64); not covered by the CRC.
    pub const BASE_OFFSET: usize = 0;
    /// Batch length (int32): the bytes after this field.
    pub const BATCH_LENGTH: usize = 8;
    /// Partition leader epoch (int32); not covered by the CRC.
    pub const PARTITION_LEADER_EPOCH: usize = 12;
    /// Magic byte (2).
    pub const MAGIC: usize = 16;
    /// CRC-32C (uint32) of the bytes from the attributes to the end.
    pub const CRC: usize = 17;
    /// Attributes (int16); see [`attr`](super::attr).
    pub const ATTRIBUTES: usize = 21;
    /// Last offset delta (int32).
    pub const LAST_OFFSET_DELTA: usize = 23;
    /// Base timestamp (int64).
    pub const BASE_TIMESTAMP: usize = 27;
    /// Max timestamp (int64).
    pub const MAX_TIMESTAMP: usize = 35;
    /// Producer id (int64).
    pub const PRODUCER_ID: usize = 43;
    /// Producer epoch (int16).
    pub const PRODUCER_EPOCH: usize = 51;
    /// Base sequence (int32).
    pub const BASE_SEQUENCE: usize = 53;
    /// Record count (int32).
    pub const RECORD_COUNT: usize = 57;
}

/// Attribute bits of a batch (the low three bits are the compression codec).
pub mod attr {
    /// The compression codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
    pub const COMPRESSION_MASK: i16 = 0x07;
    /// Set for LogAppendTime timestamps, clear for CreateTime.
    pub const TIMESTAMP_TYPE: i16 = 0x08;
    /// The batch is part of a transaction.
    pub const TRANSACTIONAL: i16 = 0x10;
    /// A control batch (transaction markers).
    pub const CONTROL: i16 = 0x20;
    /// The base timestamp is a delete horizon (compacted topics).
    pub const DELETE_HORIZON: i16 = 0x40;
}

impl Compression {
    /// The codec named by attribute bits 0-2; codes 5-7 are
    /// [`DecodeError::UnsupportedCompression`].
    pub fn from_attributes(attributes: i16) -> Result<Compression, DecodeError> {
        match (attributes & attr::COMPRESSION_MASK) as u8 {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            4 => Ok(Compression::Zstd),
            other => Err(DecodeError::UnsupportedCompression(other)),
        }
    }
}

/// What a batch's timestamps mean (attribute bit 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TimestampType {
    /// Set by the producer for each record.
    #[default]
    CreateTime,
    /// Set by the broker when it appended the batch; every record's timestamp is the
    /// batch's `maxTimestamp`.
    LogAppendTime,
}

impl TimestampType {
    /// The type named by attribute bit 3.
    pub fn from_attributes(attributes: i16) -> TimestampType {
        if attributes & attr::TIMESTAMP_TYPE != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }
}
