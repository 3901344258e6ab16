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
//! and a record of a classic group each time a generation completes and each
//! time the leader's SyncGroup sets the assignments, so that generation ids keep
//! growing and members keep their place when the coordinator moves or restarts:
//!
//! - key: `version: int16 = 2`, `group: string` (Kafka's `GroupMetadataKey`);
//! - value: `version: int16 = 3`, `protocol_type: string`, `generation: int32`,
//!   `protocol: nullable string`, `leader: nullable string`,
//!   `current_state_timestamp: int64`, `members: int32 count`, then per member
//!   `member_id: string`, `group_instance_id: nullable string`,
//!   `client_id: string`, `client_host: string`, `rebalance_timeout: int32`,
//!   `session_timeout: int32`, `subscription: bytes`, `assignment: bytes`
//!   (Kafka's `GroupMetadataValue` v3);
//! - a tombstone deletes the group (DeleteGroups).
//!
//! Strings are `int16` length + UTF-8 (-1 for null), bytes `int32` length. On
//! load, offset values of versions 0–3 are read (v1's expire timestamp is
//! skipped) and group values of versions 0–4 (v0 has no rebalance timeout: the
//! session timeout stands in, as in Kafka; v1 no state timestamp; v2 no
//! instance id; v4 is the flexible layout: compact strings, bytes and arrays,
//! tagged fields skipped); unknown key versions are skipped. A group value names
//! at most `max_members` members (`group.max.size`) and never more than its bytes
//! can hold; anything else is a typed error and the record is skipped.

use bytes::{BufMut, Bytes, BytesMut};

use super::machine::{CommittedOffset, GroupSnapshot, PersistedMember};
use baton_protocol::primitives::{decode_tagged_fields, Decoder};
use baton_protocol::DecodeError;

/// The internal topic holding committed offsets.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

const KEY_VERSION_OFFSET: i16 = 1;
const KEY_VERSION_GROUP: i16 = 2;
const VALUE_VERSION: i16 = 3;
const GROUP_VALUE_VERSION: i16 = 3;
/// The newest group value layout read (the first flexible one).
const GROUP_VALUE_MAX_VERSION: i16 = 4;

/// A decoded record key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogKey {
    /// A committed offset.
    Offset(OffsetKey),
    /// A group's generation record.
    Group(String),
}

/// A group record's value: the group and when the record was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRecord {
    /// The group: generation, protocol, leader, members.
    pub group: GroupSnapshot,
    /// When the record was written, in ms since the epoch (-1 when the record's
    /// version has none).
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

fn put_bytes(buf: &mut BytesMut, b: &[u8]) {
    // Subscriptions and assignments come from requests, far below 2 GiB.
    let n = b.len().min(i32::MAX as usize);
    buf.put_i32(n as i32);
    buf.put_slice(&b[..n]);
}

/// Encodes a group record value (version 3).
pub fn encode_group_value(r: &GroupRecord) -> Bytes {
    let g = &r.group;
    let members: usize = g
        .members
        .iter()
        .map(|m| {
            28 + m.member_id.len()
                + m.group_instance_id.as_ref().map_or(0, String::len)
                + m.client_id.len()
                + m.client_host.len()
                + m.subscription.len()
                + m.assignment.len()
        })
        .sum();
    let mut buf = BytesMut::with_capacity(32 + g.protocol_type.len() + members);
    buf.put_i16(GROUP_VALUE_VERSION);
    put_str(&mut buf, &g.protocol_type);
    buf.put_i32(g.generation_id);
    put_nullable_str(&mut buf, g.protocol_name.as_deref());
    put_nullable_str(&mut buf, g.leader.as_deref());
    buf.put_i64(r.state_timestamp);
    buf.put_i32(g.members.len().min(i32::MAX as usize) as i32);
    for m in &g.members {
        put_str(&mut buf, &m.member_id);
        put_nullable_str(&mut buf, m.group_instance_id.as_deref());
        put_str(&mut buf, &m.client_id);
        put_str(&mut buf, &m.client_host);
        buf.put_i32(m.rebalance_timeout_ms);
        buf.put_i32(m.session_timeout_ms);
        put_bytes(&mut buf, &m.subscription);
        put_bytes(&mut buf, &m.assignment);
    }
    buf.freeze()
}

/// Decodes a group record value of versions 0–4 naming at most `max_members`
/// members. Allocation is bounded by the bytes present.
pub fn decode_group_value(value: Bytes, max_members: usize) -> Result<GroupRecord, DecodeError> {
    let mut d = Decoder::new(value);
    let version = d.i16()?;
    if !(0..=GROUP_VALUE_MAX_VERSION).contains(&version) {
        return Err(DecodeError::UnsupportedVersion {
            api_key: -1,
            version,
        });
    }
    let flexible = version >= 4;
    let protocol_type = d.string(flexible)?;
    let generation_id = d.i32()?;
    let protocol_name = d.nullable_string(flexible)?;
    let leader = d.nullable_string(flexible)?;
    let state_timestamp = if version >= 2 { d.i64()? } else { -1 };
    let count = d
        .array_len(flexible)?
        .ok_or(DecodeError::UnexpectedNull("group members"))?;
    if count > max_members {
        return Err(DecodeError::BadLength {
            what: "group members",
            length: count as i64,
            remaining: d.remaining(),
        });
    }
    // A member takes at least 15 bytes (v4: empty compact strings and bytes,
    // no tagged fields; v0 takes 18), which bounds the reservation by the input.
    let mut members = Vec::with_capacity(count.min(d.remaining() / 15));
    for _ in 0..count {
        members.push(decode_member(&mut d, version, flexible)?);
    }
    if flexible {
        decode_tagged_fields(&mut d, |_, _| Ok(false))?;
    }
    Ok(GroupRecord {
        group: GroupSnapshot {
            protocol_type,
            generation_id,
            protocol_name,
            leader,
            members,
        },
        state_timestamp,
    })
}

fn decode_member(
    d: &mut Decoder,
    version: i16,
    flexible: bool,
) -> Result<PersistedMember, DecodeError> {
    let member_id = d.string(flexible)?;
    let group_instance_id = if version >= 3 {
        d.nullable_string(flexible)?
    } else {
        None
    };
    let client_id = d.string(flexible)?;
    let client_host = d.string(flexible)?;
    let rebalance_timeout = if version >= 1 { Some(d.i32()?) } else { None };
    let session_timeout_ms = d.i32()?;
    let subscription = d
        .nullable_bytes(flexible)?
        .ok_or(DecodeError::UnexpectedNull("member subscription"))?;
    let assignment = d
        .nullable_bytes(flexible)?
        .ok_or(DecodeError::UnexpectedNull("member assignment"))?;
    if flexible {
        decode_tagged_fields(d, |_, _| Ok(false))?;
    }
    Ok(PersistedMember {
        member_id,
        group_instance_id,
        client_id,
        client_host,
        rebalance_timeout_ms: rebalance_timeout.unwrap_or(session_timeout_ms),
        session_timeout_ms,
        subscription,
        assignment,
    })
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
        let empty = GroupRecord {
            group: GroupSnapshot {
                protocol_type: "consumer".into(),
                generation_id: 9,
                protocol_name: None,
                leader: Some("l".into()),
                members: Vec::new(),
            },
            state_timestamp: 5,
        };
        assert_eq!(
            decode_group_value(encode_group_value(&empty), 0).unwrap(),
            empty
        );
        let off = encode_key(&OffsetKey {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
        });
        assert!(matches!(decode_log_key(off), Ok(Some(LogKey::Offset(_)))));
        assert_eq!(decode_log_key(Bytes::from_static(&[0, 7])).unwrap(), None);
    }

    fn member(id: &str, instance: Option<&str>) -> PersistedMember {
        PersistedMember {
            member_id: id.into(),
            group_instance_id: instance.map(str::to_owned),
            client_id: "client".into(),
            client_host: "/127.0.0.1".into(),
            rebalance_timeout_ms: 30_000,
            session_timeout_ms: 10_000,
            subscription: Bytes::from_static(b"\x00\x01sub"),
            assignment: Bytes::from_static(b"\x00\x01asg"),
        }
    }

    fn two_members() -> GroupRecord {
        GroupRecord {
            group: GroupSnapshot {
                protocol_type: "consumer".into(),
                generation_id: 7,
                protocol_name: Some("range".into()),
                leader: Some("a".into()),
                members: vec![member("a", None), member("b", Some("ib"))],
            },
            state_timestamp: 1_700_000_000_000,
        }
    }

    #[test]
    fn group_values_with_members_round_trip() {
        let r = two_members();
        let v = encode_group_value(&r);
        assert_eq!(decode_group_value(v.clone(), 2).unwrap(), r);
        // More members than allowed is refused before any is read.
        assert!(matches!(
            decode_group_value(v.clone(), 1),
            Err(DecodeError::BadLength {
                what: "group members",
                length: 2,
                ..
            })
        ));
        // Every truncation is a typed error, never a panic.
        for n in 0..v.len() {
            assert!(decode_group_value(v.slice(..n), 2).is_err(), "cut at {n}");
        }
        // A member count the bytes cannot hold.
        let mut forged = BytesMut::from(
            &encode_group_value(&GroupRecord {
                group: GroupSnapshot {
                    members: Vec::new(),
                    ..r.group.clone()
                },
                ..r
            })[..],
        );
        let len = forged.len();
        forged[len - 4..].copy_from_slice(&0x7fff_ffffi32.to_be_bytes());
        assert!(decode_group_value(forged.freeze(), usize::MAX).is_err());
        // Unknown versions.
        assert!(decode_group_value(Bytes::from_static(&[0, 5, 0, 0]), 2).is_err());
        assert!(decode_group_value(Bytes::from_static(&[0xff, 0xff]), 2).is_err());
    }

    /// Apache Kafka's `GroupMetadataValue` v3, byte by byte from its message
    /// spec (protocolType, generation, protocol, leader, currentStateTimestamp,
    /// members: memberId, groupInstanceId, clientId, clientHost,
    /// rebalanceTimeout, sessionTimeout, subscription, assignment).
    #[test]
    fn kafka_group_value_v3_decodes() {
        #[rustfmt::skip]
        let v: &[u8] = &[
            0, 3,                                   // version
            0, 8, b'c', b'o', b'n', b's', b'u', b'm', b'e', b'r',
            0, 0, 0, 4,                             // generation
            0, 5, b'r', b'a', b'n', b'g', b'e',     // protocol
            0, 2, b'm', b'1',                       // leader
            0, 0, 0, 0, 0, 0, 0x03, 0xe8,           // currentStateTimestamp = 1000
            0, 0, 0, 2,                             // members
            // member 1: static
            0, 2, b'm', b'1',
            0, 2, b'i', b'1',
            0, 3, b'c', b'i', b'd',
            0, 10, b'/', b'1', b'0', b'.', b'0', b'.', b'0', b'.', b'1', b'2',
            0, 0, 0x75, 0x30,                       // rebalanceTimeout = 30000
            0, 0, 0x27, 0x10,                       // sessionTimeout = 10000
            0, 0, 0, 2, 0xaa, 0xbb,                 // subscription
            0, 0, 0, 1, 0xcc,                       // assignment
            // member 2: dynamic, nothing assigned
            0, 2, b'm', b'2',
            0xff, 0xff,                             // groupInstanceId = null
            0, 0,
            0, 0,
            0, 0, 0x75, 0x30,
            0, 0, 0x1b, 0x58,                       // sessionTimeout = 7000
            0, 0, 0, 0,
            0, 0, 0, 0,
        ];
        let r = decode_group_value(Bytes::copy_from_slice(v), 10).unwrap();
        assert_eq!(r.state_timestamp, 1000);
        let g = r.group;
        assert_eq!(g.protocol_type, "consumer");
        assert_eq!(g.generation_id, 4);
        assert_eq!(g.protocol_name.as_deref(), Some("range"));
        assert_eq!(g.leader.as_deref(), Some("m1"));
        assert_eq!(g.members.len(), 2);
        let m = &g.members[0];
        assert_eq!(
            (m.member_id.as_str(), m.group_instance_id.as_deref()),
            ("m1", Some("i1"))
        );
        assert_eq!(
            (m.client_id.as_str(), m.client_host.as_str()),
            ("cid", "/10.0.0.12")
        );
        assert_eq!(
            (m.rebalance_timeout_ms, m.session_timeout_ms),
            (30_000, 10_000)
        );
        assert_eq!(&m.subscription[..], &[0xaa, 0xbb]);
        assert_eq!(&m.assignment[..], &[0xcc]);
        let m = &g.members[1];
        assert_eq!(
            (m.member_id.as_str(), m.group_instance_id.as_deref()),
            ("m2", None)
        );
        assert_eq!(m.session_timeout_ms, 7_000);
        assert!(m.subscription.is_empty() && m.assignment.is_empty());
        // Our encoding of the same group is the same bytes.
        let ours = GroupRecord {
            group: g,
            state_timestamp: 1000,
        };
        assert_eq!(&encode_group_value(&ours)[..], v);
    }

    /// Older and newer layouts: v0 (no rebalance timeout: the session timeout
    /// stands in; no timestamp, no instance id) and v4 (flexible: compact
    /// lengths, tagged fields, which are skipped).
    #[test]
    fn kafka_group_values_v0_and_v4_decode() {
        #[rustfmt::skip]
        let v0: &[u8] = &[
            0, 0,
            0, 8, b'c', b'o', b'n', b's', b'u', b'm', b'e', b'r',
            0, 0, 0, 2,
            0, 5, b'r', b'a', b'n', b'g', b'e',
            0, 1, b'm',
            0, 0, 0, 1,
            0, 1, b'm',
            0, 1, b'c',
            0, 1, b'h',
            0, 0, 0x27, 0x10,                       // sessionTimeout = 10000
            0, 0, 0, 1, 1,
            0, 0, 0, 1, 2,
        ];
        let r = decode_group_value(Bytes::copy_from_slice(v0), 10).unwrap();
        assert_eq!(r.state_timestamp, -1);
        assert_eq!(r.group.generation_id, 2);
        let m = &r.group.members[0];
        assert_eq!(
            (m.rebalance_timeout_ms, m.session_timeout_ms),
            (10_000, 10_000)
        );
        assert_eq!(m.group_instance_id, None);
        #[rustfmt::skip]
        let v4: &[u8] = &[
            0, 4,
            9, b'c', b'o', b'n', b's', b'u', b'm', b'e', b'r',
            0, 0, 0, 3,
            6, b'r', b'a', b'n', b'g', b'e',
            2, b'm',
            0, 0, 0, 0, 0, 0, 0, 9,
            2,                                      // one member
            2, b'm',
            0,                                      // groupInstanceId = null
            2, b'c',
            2, b'h',
            0, 0, 0x75, 0x30,
            0, 0, 0x27, 0x10,
            2, 1,                                   // subscription
            2, 2,                                   // assignment
            1, 5, 2, 0xde, 0xad,                    // an unknown tagged field
            0,                                      // no tagged fields
        ];
        let r = decode_group_value(Bytes::copy_from_slice(v4), 10).unwrap();
        assert_eq!((r.group.generation_id, r.state_timestamp), (3, 9));
        assert_eq!(r.group.leader.as_deref(), Some("m"));
        let m = &r.group.members[0];
        assert_eq!((m.member_id.as_str(), m.client_host.as_str()), ("m", "h"));
        assert_eq!(
            (m.rebalance_timeout_ms, m.session_timeout_ms),
            (30_000, 10_000)
        );
        assert_eq!(
            (&m.subscription[..], &m.assignment[..]),
            (&[1u8][..], &[2u8][..])
        );
        for n in 0..v4.len() {
            assert!(decode_group_value(Bytes::copy_from_slice(&v4[..n]), 10).is_err());
        }
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
