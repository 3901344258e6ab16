//! Transaction markers: the control records that end a transaction on a partition
//! (KIP-98).
//!
//! A marker is a one-record control batch (attributes CONTROL | TRANSACTIONAL)
//! carrying the producer id and epoch of the transaction it ends, base sequence -1.
//! Its record's key and value are fixed layouts (see Apache Kafka's
//! `ControlRecordType` and `EndTransactionMarker`):
//!
//! ```text
//! key:   version int16 (0), type int16 (0 = abort, 1 = commit)
//! value: version int16 (0), coordinatorEpoch int32
//! ```
//!
//! ```
//! use baton_protocol::record::control::{control_batch, EndTxnMarker};
//! use baton_protocol::record::RecordBatch;
//!
//! let marker = EndTxnMarker { commit: true, coordinator_epoch: 3 };
//! let batch = RecordBatch::parse(control_batch(42, 1, marker, 1_700_000_000_000)).unwrap();
//! batch.verify_crc().unwrap();
//! assert!(batch.is_control() && batch.is_transactional());
//! assert_eq!(EndTxnMarker::from_batch(&batch).unwrap(), marker);
//! ```

use bytes::Bytes;

use super::batch::RecordBatch;
use super::builder::RecordBatchBuilder;
use super::record::Record;
use crate::error::DecodeError;

/// The control record key and value version this module writes.
pub const CONTROL_RECORD_VERSION: i16 = 0;

/// Control record type of an abort marker.
pub const ABORT_TYPE: i16 = 0;

/// Control record type of a commit marker.
pub const COMMIT_TYPE: i16 = 1;

/// Length of an encoded control record key: version and type.
pub const KEY_LEN: usize = 4;

/// Length of an encoded end-transaction marker value: version and coordinator epoch.
pub const VALUE_LEN: usize = 6;

/// Why a control record is not a valid transaction marker.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ControlRecordError {
    /// The record has no key, or no value, where a marker needs both.
    #[error("control record without a {0}")]
    Missing(&'static str),
    /// The key or value is shorter than its version-0 layout.
    #[error("control record {what} of {len} bytes, shorter than {needed}")]
    Short {
        /// Key or value.
        what: &'static str,
        /// Bytes present.
        len: usize,
        /// Bytes the layout needs.
        needed: usize,
    },
    /// The key or value carries a negative version.
    #[error("negative control record {what} version {version}")]
    NegativeVersion {
        /// Key or value.
        what: &'static str,
        /// The version read.
        version: i16,
    },
    /// The key names a control type other than abort or commit (a KRaft leader
    /// change or snapshot marker, say).
    #[error("control record type {0} is not a transaction marker")]
    NotATransactionMarker(i16),
    /// The batch is not a control batch, or holds no record.
    #[error("not a control batch with a record: {0}")]
    NotAControlBatch(&'static str),
    /// The batch's records do not decode.
    #[error("control batch records: {0}")]
    Decode(#[from] DecodeError),
}

/// The marker that ends a transaction: commit or abort, and the epoch of the
/// transaction coordinator that wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EndTxnMarker {
    /// `true` for a commit marker, `false` for an abort marker.
    pub commit: bool,
    /// The epoch of the coordinator's `__transaction_state` partition.
    pub coordinator_epoch: i32,
}

impl EndTxnMarker {
    /// The control record type of this marker ([`COMMIT_TYPE`] or [`ABORT_TYPE`]).
    pub fn control_type(&self) -> i16 {
        if self.commit {
            COMMIT_TYPE
        } else {
            ABORT_TYPE
        }
    }

    /// The control record key: version 0 and the marker's type.
    pub fn encode_key(&self) -> [u8; KEY_LEN] {
        let mut key = [0u8; KEY_LEN];
        key[..2].copy_from_slice(&CONTROL_RECORD_VERSION.to_be_bytes());
        key[2..].copy_from_slice(&self.control_type().to_be_bytes());
        key
    }

    /// The marker value: version 0 and the coordinator epoch.
    pub fn encode_value(&self) -> [u8; VALUE_LEN] {
        let mut value = [0u8; VALUE_LEN];
        value[..2].copy_from_slice(&CONTROL_RECORD_VERSION.to_be_bytes());
        value[2..].copy_from_slice(&self.coordinator_epoch.to_be_bytes());
        value
    }

    /// Decodes a marker from a control record's key and value. Versions above 0 are
    /// read by their version-0 prefix, as Apache Kafka does, so that newer writers
    /// that append fields stay readable.
    pub fn decode(key: &[u8], value: &[u8]) -> Result<EndTxnMarker, ControlRecordError> {
        let commit = match decode_control_type(key)? {
            ABORT_TYPE => false,
            COMMIT_TYPE => true,
            other => return Err(ControlRecordError::NotATransactionMarker(other)),
        };
        if value.len() < VALUE_LEN {
            return Err(ControlRecordError::Short {
                what: "value",
                len: value.len(),
                needed: VALUE_LEN,
            });
        }
        let version = i16::from_be_bytes([value[0], value[1]]);
        if version < 0 {
            return Err(ControlRecordError::NegativeVersion {
                what: "value",
                version,
            });
        }
        let coordinator_epoch = i32::from_be_bytes([value[2], value[3], value[4], value[5]]);
        Ok(EndTxnMarker {
            commit,
            coordinator_epoch,
        })
    }

    /// Decodes the marker of a decoded control record.
    pub fn from_record(record: &Record) -> Result<EndTxnMarker, ControlRecordError> {
        let key = record
            .key
            .as_ref()
            .ok_or(ControlRecordError::Missing("key"))?;
        let value = record
            .value
            .as_ref()
            .ok_or(ControlRecordError::Missing("value"))?;
        EndTxnMarker::decode(key, value)
    }

    /// Decodes the marker of a control batch from its first record (Kafka writes
    /// exactly one). Allocates only what decoding that one record needs.
    pub fn from_batch(batch: &RecordBatch) -> Result<EndTxnMarker, ControlRecordError> {
        if !batch.is_control() {
            return Err(ControlRecordError::NotAControlBatch(
                "control attribute not set",
            ));
        }
        let record = batch
            .records()?
            .next()
            .ok_or(ControlRecordError::NotAControlBatch("no record"))??;
        EndTxnMarker::from_record(&record)
    }
}

/// Reads the type from a control record key (`version: int16, type: int16`).
pub fn decode_control_type(key: &[u8]) -> Result<i16, ControlRecordError> {
    if key.len() < KEY_LEN {
        return Err(ControlRecordError::Short {
            what: "key",
            len: key.len(),
            needed: KEY_LEN,
        });
    }
    let version = i16::from_be_bytes([key[0], key[1]]);
    if version < 0 {
        return Err(ControlRecordError::NegativeVersion {
            what: "key",
            version,
        });
    }
    Ok(i16::from_be_bytes([key[2], key[3]]))
}

/// Builds the one-record control batch that writes `marker` for the transaction of
/// (`producer_id`, `producer_epoch`): attributes CONTROL | TRANSACTIONAL, base
/// sequence -1, base offset 0 and partition leader epoch -1 (the partition stamps
/// both on append), `timestamp` as base and max timestamp, CRC-32C filled in.
pub fn control_batch(
    producer_id: i64,
    producer_epoch: i16,
    marker: EndTxnMarker,
    timestamp: i64,
) -> Bytes {
    let mut builder = RecordBatchBuilder::new(timestamp)
        .producer(producer_id, producer_epoch, -1)
        .transactional(true)
        .control(true);
    builder.push(
        timestamp,
        Some(&marker.encode_key()),
        Some(&marker.encode_value()),
        &[],
    );
    builder.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{attr, ControlRecordType};

    #[test]
    fn key_and_value_have_kafkas_layout() {
        let commit = EndTxnMarker {
            commit: true,
            coordinator_epoch: 0x0102_0304,
        };
        assert_eq!(commit.encode_key(), [0, 0, 0, 1]);
        assert_eq!(commit.encode_value(), [0, 0, 1, 2, 3, 4]);
        let abort = EndTxnMarker {
            commit: false,
            coordinator_epoch: -1,
        };
        assert_eq!(abort.encode_key(), [0, 0, 0, 0]);
        assert_eq!(abort.encode_value(), [0, 0, 0xff, 0xff, 0xff, 0xff]);
        for m in [commit, abort] {
            assert_eq!(
                EndTxnMarker::decode(&m.encode_key(), &m.encode_value()),
                Ok(m)
            );
        }
    }

    #[test]
    fn newer_versions_are_read_by_their_prefix() {
        let got = EndTxnMarker::decode(&[0, 1, 0, 1, 9, 9], &[0, 2, 0, 0, 0, 7, 5, 5]).unwrap();
        assert_eq!(
            got,
            EndTxnMarker {
                commit: true,
                coordinator_epoch: 7
            }
        );
    }

    #[test]
    fn malformed_keys_and_values_are_typed_errors() {
        let value = [0, 0, 0, 0, 0, 1];
        assert!(matches!(
            EndTxnMarker::decode(&[0, 0, 1], &value),
            Err(ControlRecordError::Short { what: "key", .. })
        ));
        assert!(matches!(
            EndTxnMarker::decode(&[0xff, 0xff, 0, 1], &value),
            Err(ControlRecordError::NegativeVersion { what: "key", .. })
        ));
        assert_eq!(
            EndTxnMarker::decode(&[0, 0, 0, 2], &value),
            Err(ControlRecordError::NotATransactionMarker(2))
        );
        assert!(matches!(
            EndTxnMarker::decode(&[0, 0, 0, 1], &[0, 0, 0]),
            Err(ControlRecordError::Short { what: "value", .. })
        ));
        assert!(matches!(
            EndTxnMarker::decode(&[0, 0, 0, 1], &[0x80, 0, 0, 0, 0, 0]),
            Err(ControlRecordError::NegativeVersion { what: "value", .. })
        ));
    }

    #[test]
    fn control_batch_is_one_transactional_control_record() {
        let marker = EndTxnMarker {
            commit: false,
            coordinator_epoch: 5,
        };
        let bytes = control_batch(1234, 7, marker, 1_700_000_000_123);
        let batch = RecordBatch::parse(bytes).unwrap();
        batch.verify_crc().unwrap();
        assert_eq!(batch.attributes(), attr::CONTROL | attr::TRANSACTIONAL);
        assert_eq!(batch.producer_id(), 1234);
        assert_eq!(batch.producer_epoch(), 7);
        assert_eq!(batch.base_sequence(), -1);
        assert_eq!(batch.base_offset(), 0);
        assert_eq!(batch.partition_leader_epoch(), -1);
        assert_eq!(batch.record_count(), 1);
        assert_eq!(batch.last_offset_delta(), 0);
        assert_eq!(batch.base_timestamp(), 1_700_000_000_123);
        assert_eq!(batch.max_timestamp(), 1_700_000_000_123);
        let record = batch.records().unwrap().next().unwrap().unwrap();
        assert_eq!(record.control_type().unwrap(), ControlRecordType::Abort);
        assert_eq!(EndTxnMarker::from_batch(&batch).unwrap(), marker);
    }

    #[test]
    fn a_data_batch_is_not_a_marker() {
        let mut b = RecordBatchBuilder::new(0).transactional(true);
        b.push(0, Some(&[0, 0, 0, 1]), Some(&[0, 0, 0, 0, 0, 0]), &[]);
        let batch = RecordBatch::parse(b.finish()).unwrap();
        assert!(matches!(
            EndTxnMarker::from_batch(&batch),
            Err(ControlRecordError::NotAControlBatch(_))
        ));
        let empty = RecordBatch::parse(RecordBatchBuilder::new(0).control(true).finish()).unwrap();
        assert!(matches!(
            EndTxnMarker::from_batch(&empty),
            Err(ControlRecordError::NotAControlBatch("no record"))
        ));
    }
}
