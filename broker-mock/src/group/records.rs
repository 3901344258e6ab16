//! How committed offsets are written to the internal `__consumer_offsets` topic.
//!
//! One record per committed partition, in the layout Apache Kafka uses, so that
//! Kafka's tools can read the topic:
//!
//! - key: `version: int16 = 1`, `group: string`, `topic: string`, `partition: int32`
//!   (Kafka's `OffsetCommitKey` v1);
//! - value: `version: int16 = 3`, `offset: int64`, `leader_epoch: int32`,
//!   `metadata: string`, `commit_timestamp: int64` (Kafka's `OffsetCommitValue` v3);
//! - a null value (tombstone) deletes the committed offset (DeleteGroups).
//!
//! and one record per completed generation of a group, so that generation ids keep
//! growing when the coordinator moves or restarts:
//!
//! - key: `version: int16 = 2`, `group: string` (Kafka's `GroupMetadataKey`);
//! - value: `version: int16 = 3`, `protocol_type: string`, `generation: int32`,
//!   `protocol: nullable string`, `leader: nullable string`,
//!   `current_state_timestamp: int64`, `members: int32 count = 0` (Kafka's
//!   `GroupMetadataValue` v3 without members: membership itself is not persisted,
//!   members rejoin a new coordinator);
//! - a tombstone deletes the group (DeleteGroups).
//!
//! Strings are `int16` length + UTF-8 (-1 for null). On load, offset values of
//! versions 0–3 are read (v1's expire timestamp is skipped) and group values of any
//! version are read for their protocol type and generation; unknown key versions are
//! skipped.

use bytes::{BufMut, Bytes, BytesMut};

use super::machine::CommittedOffset;
use baton_protocol::primitives::Decoder;
use baton_protocol::DecodeError;

/// The internal topic holding committed offsets.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

const KEY_VERSION_OFFSET: i16 = 1;
const KEY_VERSION_GROUP: i16 = 2;
const VALUE_VERSION: i16 = 3;
const GROUP_VALUE_VERSION: i16 = 3;

/// A decoded record key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogKey {
    /// A committed offset.
    Offset(OffsetKey),
    /// A group's generation record.
    Group(String),
}

/// What a generation record keeps of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRecord {
    /// The protocol type (`consumer`), or empty.
    pub protocol_type: String,
    /// The generation id.
    pub generation: i32,
    /// The selected protocol.
    pub protocol: Option<String>,
    /// The leader's member id.
    pub leader: Option<String>,
    /// When the record was written, in ms since the epoch.
    pub state_timestamp: i64,
}

/// The key of an offset record: group, topic, partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetKey {
    /// The group id.
    pub group: String,
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
}

fn put_str(buf: &mut BytesMut, s: &str) {
    // Group ids, topic names and metadata are bounded far below 32 KiB by the
    // request size and `offset_metadata_max_bytes`; cut defensively anyway.
    let b = s.as_bytes();
    let n = b.len().min(i16::MAX as usize);
    buf.put_i16(n as i16);
    buf.put_slice(&b[..n]);
}

fn get_str(d: &mut Decoder) -> Result<String, DecodeError> {
    let n = d.i16()?;
    if n < 0 {
        return Err(DecodeError::UnexpectedNull("offset record string"));
    }
    let b = d.take(n as usize, "offset record string")?;
    String::from_utf8(b.to_vec()).map_err(|_| DecodeError::InvalidUtf8)
}

/// Encodes an offset record key.
pub fn encode_key(key: &OffsetKey) -> Bytes {
    let mut buf = BytesMut::with_capacity(12 + key.group.len() + key.topic.len());
    buf.put_i16(KEY_VERSION_OFFSET);
    put_str(&mut buf, &key.group);
    put_str(&mut buf, &key.topic);
    buf.put_i32(key.partition);
    buf.freeze()
}

fn put_nullable_str(buf: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_str(buf, s),
        None => buf.put_i16(-1),
    }
}

/// Encodes a generation record key.
pub fn encode_group_key(group: &str) -> Bytes {
    let mut buf = BytesMut::with_capacity(4 + group.len());
    buf.put_i16(KEY_VERSION_GROUP);
    put_str(&mut buf, group);
    buf.freeze()
}

/// Encodes a generation record value.
pub fn encode_group_value(g: &GroupRecord) -> Bytes {
    let mut buf = BytesMut::with_capacity(32 + g.protocol_type.len());
    buf.put_i16(GROUP_VALUE_VERSION);
    put_str(&mut buf, &g.protocol_type);
    buf.put_i32(g.generation);
    put_nullable_str(&mut buf, g.protocol.as_deref());
    put_nullable_str(&mut buf, g.leader.as_deref());
    buf.put_i64(g.state_timestamp);
    buf.put_i32(0);
    buf.freeze()
}

/// Decodes the protocol type and generation of a generation record value.
pub fn decode_group_value(value: Bytes) -> Result<(String, i32), DecodeError> {
    let mut d = Decoder::new(value);
    let version = d.i16()?;
    if version < 0 {
        return Err(DecodeError::UnsupportedVersion {
            api_key: -1,
            version,
        });
    }
    let protocol_type = get_str(&mut d)?;
    let generation = d.i32()?;
    Ok((protocol_type, generation))
}

/// Decodes any record key; `Ok(None)` for unknown key versions.
pub fn decode_log_key(key: Bytes) -> Result<Option<LogKey>, DecodeError> {
    let mut d = Decoder::new(key.clone());
    match d.i16()? {
        KEY_VERSION_GROUP => Ok(Some(LogKey::Group(get_str(&mut d)?))),
        _ => Ok(decode_key(key)?.map(LogKey::Offset)),
    }
}

/// Encodes an offset record value.
pub fn encode_value(o: &CommittedOffset) -> Bytes {
    let mut buf = BytesMut::with_capacity(24 + o.metadata.len());
    buf.put_i16(VALUE_VERSION);
    buf.put_i64(o.offset);
    buf.put_i32(o.leader_epoch);
    put_str(&mut buf, &o.metadata);
    buf.put_i64(o.commit_timestamp);
    buf.freeze()
}

/// Decodes a record key; `Ok(None)` for keys that are not offset commits.
pub fn decode_key(key: Bytes) -> Result<Option<OffsetKey>, DecodeError> {
    let mut d = Decoder::new(key);
    let version = d.i16()?;
    if !(0..=KEY_VERSION_OFFSET).contains(&version) {
        return Ok(None);
    }
    let group = get_str(&mut d)?;
    let topic = get_str(&mut d)?;
    let partition = d.i32()?;
    Ok(Some(OffsetKey {
        group,
        topic,
        partition,
    }))
}

/// Decodes a record value (not a tombstone).
pub fn decode_value(value: Bytes) -> Result<CommittedOffset, DecodeError> {
    let mut d = Decoder::new(value);
    let version = d.i16()?;
    if version < 0 {
        return Err(DecodeError::UnsupportedVersion {
            api_key: -1,
            version,
        });
    }
    let offset = d.i64()?;
    let leader_epoch = if version >= 3 { d.i32()? } else { -1 };
    let metadata = get_str(&mut d)?;
    let commit_timestamp = d.i64()?;
    Ok(CommittedOffset {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp,
    })
}

/// The `__consumer_offsets` partition of a group: Kafka's
/// `Utils.abs(groupId.hashCode()) % partitions` (where `abs(i32::MIN)` is 0), with
/// Java's `String.hashCode` over UTF-16 code units, so the mapping matches a Kafka
/// cluster's.
pub fn partition_for(group: &str, partitions: i32) -> i32 {
    let mut h: i32 = 0;
    for unit in group.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(unit as i32);
    }
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_and_value_round_trip() {
        let key = OffsetKey {
            group: "g".into(),
            topic: "t".into(),
            partition: 3,
        };
        let b = encode_key(&key);
        #[rustfmt::skip]
        assert_eq!(&b[..], &[0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 3]);
        assert_eq!(decode_key(b).unwrap(), Some(key));
        let v = CommittedOffset {
            offset: 42,
            leader_epoch: 7,
            metadata: "m".into(),
            commit_timestamp: 1000,
        };
        assert_eq!(decode_value(encode_value(&v)).unwrap(), v);
    }

    #[test]
    fn group_records_round_trip() {
        let k = encode_group_key("g");
        assert_eq!(&k[..], &[0, 2, 0, 1, b'g']);
        assert_eq!(decode_log_key(k).unwrap(), Some(LogKey::Group("g".into())));
        let v = encode_group_value(&GroupRecord {
            protocol_type: "consumer".into(),
            generation: 9,
            protocol: None,
            leader: Some("l".into()),
            state_timestamp: 5,
        });
        assert_eq!(decode_group_value(v).unwrap(), ("consumer".into(), 9));
        let off = encode_key(&OffsetKey {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
        });
        assert!(matches!(decode_log_key(off), Ok(Some(LogKey::Offset(_)))));
        assert_eq!(decode_log_key(Bytes::from_static(&[0, 7])).unwrap(), None);
    }

    #[test]
    fn other_keys_and_garbage() {
        assert_eq!(decode_key(Bytes::from_static(&[0, 2, 0, 0])).unwrap(), None);
        assert!(decode_key(Bytes::from_static(&[0, 1, 0x7f, 0xff])).is_err());
        assert!(decode_value(Bytes::from_static(&[0, 3, 1])).is_err());
        assert!(decode_value(Bytes::new()).is_err());
    }

    #[test]
    fn partition_matches_java_hash_code() {
        // "group".hashCode() == 98629247 in Java.
        assert_eq!(partition_for("group", 50), 98_629_247 % 50);
        // "foo".hashCode() == 101574.
        assert_eq!(partition_for("foo", 50), 101_574 % 50);
        // A negative hash: "polygenelubricants".hashCode() == Integer.MIN_VALUE.
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        // "my-group".hashCode() == -1906497762.
        assert_eq!(partition_for("my-group", 50), 1_906_497_762 % 50);
        assert_eq!(partition_for("anything", 1), 0);
    }
}
