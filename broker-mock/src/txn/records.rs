//! How transaction state is written to the internal `__transaction_state` topic.
//!
//! One record per state change of a transactional id, in the layout Apache Kafka
//! uses (its `TransactionLogKey` / `TransactionLogValue`), so that Kafka's tools can
//! read the topic:
//!
//! - key: `version: int16 = 0`, `transactional_id: string` (TransactionLogKey v0);
//! - value: `version: int16`, then TransactionLogValue in that version: v0
//!   (`producer_id: int64`, `producer_epoch: int16`, `transaction_timeout_ms: int32`,
//!   `transaction_status: int8`, `transaction_partitions: nullable [topic: string,
//!   partition_ids: [int32]]`, `last_update_ms: int64`, `start_ms: int64`), or v1,
//!   the same fields in the flexible encoding (compact strings and arrays) with
//!   tagged fields `previous_producer_id` (tag 0), `next_producer_id` (tag 1) and
//!   `client_transaction_version` (tag 2). This broker writes v1 and reads both.
//! - a null value (tombstone) removes the id (written by Kafka when an id expires).
//!
//! The partition of an id is Kafka's `abs(hashCode) % partitions`, as for groups.

use std::collections::BTreeSet;

use baton_protocol::primitives::{Decoder, Wire};
use baton_protocol::{wire_struct, DecodeError};
use bytes::{BufMut, Bytes, BytesMut};

use super::machine::{TxnMetadata, TxnState, NO_PRODUCER_EPOCH, NO_PRODUCER_ID};

/// The internal topic holding transaction state.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

const KEY_VERSION: i16 = 0;
/// The value version written.
const VALUE_VERSION: i16 = 1;

wire_struct! {
    /// A topic's partitions in a transaction record.
    pub struct LogPartitions {
        /// The topic.
        pub topic: String [0..],
        /// Its partitions.
        pub partition_ids: Vec<i32> [0..],
    }
}

wire_struct! {
    /// Kafka's TransactionLogValue, versions 0–1 (flexible from 1).
    pub struct LogValue {
        /// The producer id.
        pub producer_id: i64 [0..],
        /// The producer id before the last change, or -1 (v1+, tagged).
        pub previous_producer_id: i64 [1..] tag(0) default(-1),
        /// The producer id handed out next, or -1 (v1+, tagged).
        pub next_producer_id: i64 [1..] tag(1) default(-1),
        /// The producer epoch.
        pub producer_epoch: i16 [0..],
        /// The transaction timeout in ms.
        pub transaction_timeout_ms: i32 [0..],
        /// The state's id.
        pub transaction_status: i8 [0..],
        /// The partitions of the transaction.
        pub transaction_partitions: Option<Vec<LogPartitions>> [0..],
        /// When the state last changed.
        pub transaction_last_update_timestamp_ms: i64 [0..],
        /// When the transaction started, or -1.
        pub transaction_start_timestamp_ms: i64 [0..],
        /// The client's transaction version (v1+, tagged).
        pub client_transaction_version: i16 [1..] tag(2),
    }
}

/// The partition of `__transaction_state` holding `transactional_id`.
pub fn partition_for(transactional_id: &str, partitions: i32) -> i32 {
    crate::group::records::partition_for(transactional_id, partitions)
}

/// Encodes a record key.
pub fn encode_key(transactional_id: &str) -> Bytes {
    let b = transactional_id.as_bytes();
    // Ids are bounded far below 32 KiB by `BrokerLimits::max_transactional_id_bytes`.
    let n = b.len().min(i16::MAX as usize);
    let mut buf = BytesMut::with_capacity(4 + n);
    buf.put_i16(KEY_VERSION);
    buf.put_i16(n as i16);
    buf.put_slice(&b[..n]);
    buf.freeze()
}

/// Decodes a record key: the transactional id, `Ok(None)` for other key versions.
pub fn decode_key(key: Bytes) -> Result<Option<String>, DecodeError> {
    let mut d = Decoder::new(key);
    if d.i16()? != KEY_VERSION {
        return Ok(None);
    }
    let n = d.i16()?;
    if n < 0 {
        return Err(DecodeError::UnexpectedNull("transactional id"));
    }
    let b = d.take(n as usize, "transactional id")?;
    String::from_utf8(b.to_vec())
        .map(Some)
        .map_err(|_| DecodeError::InvalidUtf8)
}

/// Encodes a record value (v1).
pub fn encode_value(m: &TxnMetadata) -> Bytes {
    let mut groups: Vec<LogPartitions> = Vec::new();
    for (topic, p) in &m.partitions {
        match groups.last_mut() {
            Some(g) if g.topic == *topic => g.partition_ids.push(*p),
            _ => groups.push(LogPartitions {
                topic: topic.clone(),
                partition_ids: vec![*p],
            }),
        }
    }
    let value = LogValue {
        producer_id: m.producer_id,
        previous_producer_id: m.last_producer_id,
        next_producer_id: NO_PRODUCER_ID,
        producer_epoch: m.producer_epoch,
        transaction_timeout_ms: m.timeout_ms,
        transaction_status: m.state.id(),
        transaction_partitions: Some(groups),
        transaction_last_update_timestamp_ms: m.last_update_ms,
        transaction_start_timestamp_ms: m.start_ms,
        client_transaction_version: m.client_txn_version,
    };
    let mut buf = BytesMut::with_capacity(64 + 16 * m.partitions.len());
    buf.put_i16(VALUE_VERSION);
    value.encode(&mut buf, VALUE_VERSION, true);
    buf.freeze()
}

/// Decodes a record value (not a tombstone), of version 0 or 1.
pub fn decode_value(value: Bytes) -> Result<TxnMetadata, DecodeError> {
    let mut d = Decoder::new(value);
    let version = d.i16()?;
    if !(0..=1).contains(&version) {
        return Err(DecodeError::UnsupportedVersion {
            api_key: -1,
            version,
        });
    }
    let v = LogValue::decode(&mut d, version, version >= 1)?;
    let state = TxnState::from_id(v.transaction_status).ok_or(DecodeError::UnsupportedVersion {
        api_key: -1,
        version: i16::from(v.transaction_status),
    })?;
    let partitions: BTreeSet<(String, i32)> = v
        .transaction_partitions
        .unwrap_or_default()
        .into_iter()
        .flat_map(|g| {
            let topic = g.topic;
            g.partition_ids.into_iter().map(move |p| (topic.clone(), p))
        })
        .collect();
    Ok(TxnMetadata {
        producer_id: v.producer_id,
        last_producer_id: v.previous_producer_id,
        producer_epoch: v.producer_epoch,
        last_producer_epoch: NO_PRODUCER_EPOCH,
        timeout_ms: v.transaction_timeout_ms,
        state,
        partitions,
        start_ms: v.transaction_start_timestamp_ms,
        last_update_ms: v.transaction_last_update_timestamp_ms,
        client_txn_version: v.client_transaction_version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> TxnMetadata {
        let mut m = TxnMetadata::new(42, 60_000, 1_000);
        m.producer_epoch = 3;
        m.last_producer_id = 41;
        m.state = TxnState::Ongoing;
        m.partitions = [
            ("a".to_owned(), 1),
            ("a".to_owned(), 0),
            ("b".to_owned(), 5),
        ]
        .into_iter()
        .collect();
        m.start_ms = 900;
        m.client_txn_version = 2;
        m
    }

    #[test]
    fn key_layout_is_kafkas() {
        let k = encode_key("tx");
        assert_eq!(&k[..], &[0, 0, 0, 2, b't', b'x']);
        assert_eq!(decode_key(k).unwrap().as_deref(), Some("tx"));
        assert_eq!(decode_key(Bytes::from_static(&[0, 1, 0, 0])).unwrap(), None);
        assert!(decode_key(Bytes::from_static(&[0, 0, 0x7f, 0xff])).is_err());
    }

    #[test]
    fn value_round_trips_in_v1() {
        let m = meta();
        let v = encode_value(&m);
        assert_eq!(&v[..2], &[0, 1]);
        let mut back = decode_value(v).unwrap();
        // The last epoch is not part of Kafka's record.
        back.last_producer_epoch = m.last_producer_epoch;
        assert_eq!(back, m);
    }

    #[test]
    fn reads_a_v0_value_as_kafka_writes_it() {
        #[rustfmt::skip]
        let v0 = [
            0, 0,                          // version 0
            0, 0, 0, 0, 0, 0, 0, 42,       // producer id
            0, 3,                          // epoch
            0, 0, 0xea, 0x60,              // timeout 60000
            2,                             // PrepareCommit
            0, 0, 0, 1,                    // one topic
            0, 1, b'a',                    // "a"
            0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1,
            0, 0, 0, 0, 0, 0, 0x03, 0xe8,  // last update 1000
            0, 0, 0, 0, 0, 0, 0x03, 0x84,  // start 900
        ];
        let m = decode_value(Bytes::copy_from_slice(&v0)).unwrap();
        assert_eq!(m.producer_id, 42);
        assert_eq!(m.producer_epoch, 3);
        assert_eq!(m.state, TxnState::PrepareCommit);
        assert_eq!(m.partitions.len(), 2);
        assert_eq!((m.start_ms, m.last_update_ms), (900, 1000));
        assert_eq!(m.last_producer_id, -1);
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(decode_value(Bytes::new()).is_err());
        assert!(decode_value(Bytes::from_static(&[0, 9, 1])).is_err());
        assert!(decode_value(Bytes::from_static(&[0, 1, 0, 0])).is_err());
    }
}
