//! Consumer group records in `__consumer_offsets`, in Apache Kafka's layout (the
//! group coordinator's `ConsumerGroup*Key`/`Value` JSON schemas), so that
//! compaction by key keeps the latest of each and Kafka's tools can read them.
//!
//! A key is its record type as an `int16` version, then `int16`-length strings
//! (not flexible):
//!
//! | type | record | key fields |
//! |---|---|---|
//! | 3 | `ConsumerGroupMetadata` | group id |
//! | 5 | `ConsumerGroupMemberMetadata` | group id, member id |
//! | 6 | `ConsumerGroupTargetAssignmentMetadata` | group id |
//! | 7 | `ConsumerGroupTargetAssignmentMember` | group id, member id |
//! | 8 | `ConsumerGroupCurrentMemberAssignment` | group id, member id |
//!
//! A value is `int16` version 0, then its fields in the flexible encoding (compact
//! strings and arrays, tagged fields after every struct):
//!
//! - 3: `Epoch: int32`, tagged `MetadataHash: int64` (tag 0, Kafka 4.1, KIP-1101);
//! - 5: `InstanceId`, `RackId` (nullable), `ClientId`, `ClientHost`,
//!   `SubscribedTopicNames: []string`, `SubscribedTopicRegex` (nullable),
//!   `RebalanceTimeoutMs: int32`, `ServerAssignor` (nullable), tagged
//!   `ClassicMemberMetadata` (tag 0, for a classic member: presence byte,
//!   `SessionTimeoutMs: int32`, `SupportedProtocols: [Name, Metadata: bytes]`);
//! - 6: `AssignmentEpoch: int32`;
//! - 7: `TopicPartitions: [TopicId: uuid, Partitions: []int32]`;
//! - 8: `MemberEpoch`, `PreviousMemberEpoch: int32`, `State: int8`,
//!   `AssignedPartitions` and `PartitionsPendingRevocation` as in 7.
//!
//! A null value is a tombstone. Kafka 4.1+ no longer writes
//! `ConsumerGroupPartitionMetadata` (type 4; the metadata hash replaced it); it is
//! neither written nor read here, nor is `ConsumerGroupRegularExpression` (type
//! 16): regexes are resolved again from the topics.
//!
//! Decoding is bounded by the bytes present (the protocol crate's `Decoder`).

use bytes::{BufMut, Bytes, BytesMut};

use baton_protocol::primitives::{
    decode_tagged_fields, put_array_len, put_nullable_bytes, put_nullable_string, put_tagged_field,
    put_uvarint, Decoder, Uuid,
};
use baton_protocol::DecodeError;

use super::member::{Assignment, ClassicMetadata, Current, MemberState, Subscription};
use super::registry::ConsumerRecord;

const GROUP: i16 = 3;
const MEMBER: i16 = 5;
const TARGET_EPOCH: i16 = 6;
const TARGET_MEMBER: i16 = 7;
const CURRENT: i16 = 8;

fn put_str(buf: &mut BytesMut, s: &str) {
    let b = s.as_bytes();
    let n = b.len().min(i16::MAX as usize);
    buf.put_i16(n as i16);
    buf.put_slice(&b[..n]);
}

fn key(kind: i16, group: &str, member: Option<&str>) -> Bytes {
    let mut buf = BytesMut::with_capacity(6 + group.len() + member.map_or(0, str::len));
    buf.put_i16(kind);
    put_str(&mut buf, group);
    if let Some(m) = member {
        put_str(&mut buf, m);
    }
    buf.freeze()
}

fn put_cstr(buf: &mut BytesMut, s: &str) {
    put_nullable_string(buf, Some(s), true);
}

fn put_assignment(buf: &mut BytesMut, a: &Assignment) {
    put_array_len(buf, Some(a.len()), true);
    for (t, ps) in a {
        buf.put_slice(&t.0);
        put_array_len(buf, Some(ps.len()), true);
        for p in ps {
            buf.put_i32(*p);
        }
        put_uvarint(buf, 0);
    }
}

fn value(f: impl FnOnce(&mut BytesMut)) -> Bytes {
    let mut buf = BytesMut::with_capacity(64);
    buf.put_i16(0);
    f(&mut buf);
    buf.freeze()
}

/// The key and value (`None`: tombstone) of a record.
pub fn encode(rec: &ConsumerRecord) -> (Bytes, Option<Bytes>) {
    match rec {
        ConsumerRecord::Group { group, value: v } => (
            key(GROUP, group, None),
            v.map(|(epoch, hash)| {
                value(|b| {
                    b.put_i32(epoch);
                    put_uvarint(b, 1);
                    put_tagged_field(b, 0, |t| t.put_i64(hash));
                })
            }),
        ),
        ConsumerRecord::Member {
            group,
            member,
            value: v,
        } => (
            key(MEMBER, group, Some(member)),
            v.as_ref().map(|s| {
                value(|b| {
                    put_nullable_string(b, s.instance_id.as_deref(), true);
                    put_nullable_string(b, s.rack_id.as_deref(), true);
                    put_cstr(b, &s.client_id);
                    put_cstr(b, &s.client_host);
                    put_array_len(b, Some(s.topic_names.len()), true);
                    for n in &s.topic_names {
                        put_cstr(b, n);
                    }
                    put_nullable_string(b, s.topic_regex.as_deref(), true);
                    b.put_i32(s.rebalance_timeout_ms);
                    put_nullable_string(b, s.server_assignor.as_deref(), true);
                    match &s.classic {
                        None => put_uvarint(b, 0),
                        Some(c) => {
                            put_uvarint(b, 1);
                            put_tagged_field(b, 0, |t| put_classic(t, c));
                        }
                    }
                })
            }),
        ),
        ConsumerRecord::TargetEpoch { group, value: v } => (
            key(TARGET_EPOCH, group, None),
            v.map(|e| {
                value(|b| {
                    b.put_i32(e);
                    put_uvarint(b, 0);
                })
            }),
        ),
        ConsumerRecord::TargetMember {
            group,
            member,
            value: v,
        } => (
            key(TARGET_MEMBER, group, Some(member)),
            v.as_ref().map(|a| {
                value(|b| {
                    put_assignment(b, a);
                    put_uvarint(b, 0);
                })
            }),
        ),
        ConsumerRecord::Current {
            group,
            member,
            value: v,
        } => (
            key(CURRENT, group, Some(member)),
            v.as_ref().map(|c| {
                value(|b| {
                    b.put_i32(c.epoch);
                    b.put_i32(c.previous_epoch);
                    b.put_i8(c.state.code());
                    put_assignment(b, &c.assigned);
                    put_assignment(b, &c.pending_revocation);
                    put_uvarint(b, 0);
                })
            }),
        ),
    }
}

fn put_classic(b: &mut BytesMut, c: &ClassicMetadata) {
    b.put_i8(1);
    b.put_i32(c.session_timeout_ms);
    put_array_len(b, Some(c.protocols.len()), true);
    for (name, metadata) in &c.protocols {
        put_cstr(b, name);
        put_nullable_bytes(b, Some(metadata), true);
        put_uvarint(b, 0);
    }
    put_uvarint(b, 0);
}

fn get_classic(d: &mut Decoder) -> Result<Option<ClassicMetadata>, DecodeError> {
    if d.i8()? < 0 {
        return Ok(None);
    }
    let session_timeout_ms = d.i32()?;
    let n = d.array_len(true)?.unwrap_or(0);
    let mut protocols = Vec::new();
    for _ in 0..n {
        let name = d.string(true)?;
        let metadata = d.nullable_bytes(true)?.unwrap_or_default();
        decode_tagged_fields(d, |_, _| Ok(false))?;
        protocols.push((name, metadata));
    }
    decode_tagged_fields(d, |_, _| Ok(false))?;
    Ok(Some(ClassicMetadata {
        session_timeout_ms,
        protocols,
    }))
}

fn get_str(d: &mut Decoder) -> Result<String, DecodeError> {
    d.string(false)
}

fn get_assignment(d: &mut Decoder) -> Result<Assignment, DecodeError> {
    let n = d.array_len(true)?.unwrap_or(0);
    let mut a = Assignment::new();
    for _ in 0..n {
        let t: Uuid = d.uuid()?;
        let m = d.array_len(true)?.unwrap_or(0);
        let entry = a.entry(t).or_default();
        for _ in 0..m {
            entry.insert(d.i32()?);
        }
        decode_tagged_fields(d, |_, _| Ok(false))?;
        if entry.is_empty() {
            a.remove(&t);
        }
    }
    Ok(a)
}

fn value_version(d: &mut Decoder) -> Result<(), DecodeError> {
    let v = d.i16()?;
    if v != 0 {
        return Err(DecodeError::UnsupportedVersion {
            api_key: -1,
            version: v,
        });
    }
    Ok(())
}

/// Decodes a consumer group record; `Ok(None)` for keys of other record types.
pub fn decode(key: &Bytes, val: Option<Bytes>) -> Result<Option<ConsumerRecord>, DecodeError> {
    let mut k = Decoder::new(key.clone());
    let kind = k.i16()?;
    if !matches!(
        kind,
        GROUP | MEMBER | TARGET_EPOCH | TARGET_MEMBER | CURRENT
    ) {
        return Ok(None);
    }
    let group = get_str(&mut k)?;
    let member = if matches!(kind, MEMBER | TARGET_MEMBER | CURRENT) {
        Some(get_str(&mut k)?)
    } else {
        None
    };
    let mut d = val.map(Decoder::new);
    if let Some(d) = d.as_mut() {
        value_version(d)?;
    }
    let member_id = || member.clone().unwrap_or_default();
    Ok(Some(match kind {
        GROUP => ConsumerRecord::Group {
            group,
            value: match d.as_mut() {
                None => None,
                Some(d) => {
                    let epoch = d.i32()?;
                    let mut hash = 0;
                    decode_tagged_fields(d, |tag, f| {
                        if tag == 0 {
                            hash = f.i64()?;
                            Ok(true)
                        } else {
                            Ok(false)
                        }
                    })?;
                    Some((epoch, hash))
                }
            },
        },
        MEMBER => ConsumerRecord::Member {
            group,
            member: member_id(),
            value: match d.as_mut() {
                None => None,
                Some(d) => {
                    let instance_id = d.nullable_string(true)?;
                    let rack_id = d.nullable_string(true)?;
                    let client_id = d.string(true)?;
                    let client_host = d.string(true)?;
                    let n = d.array_len(true)?.unwrap_or(0);
                    let mut topic_names = Vec::new();
                    for _ in 0..n {
                        topic_names.push(d.string(true)?);
                    }
                    let topic_regex = d.nullable_string(true)?;
                    let rebalance_timeout_ms = d.i32()?;
                    let server_assignor = d.nullable_string(true)?;
                    let mut classic = None;
                    decode_tagged_fields(d, |tag, f| {
                        if tag == 0 {
                            classic = get_classic(f)?;
                            Ok(true)
                        } else {
                            Ok(false)
                        }
                    })?;
                    Some(Subscription {
                        instance_id,
                        rack_id,
                        client_id,
                        client_host,
                        topic_names,
                        topic_regex,
                        rebalance_timeout_ms,
                        server_assignor,
                        classic,
                    })
                }
            },
        },
        TARGET_EPOCH => ConsumerRecord::TargetEpoch {
            group,
            value: match d.as_mut() {
                None => None,
                Some(d) => Some(d.i32()?),
            },
        },
        TARGET_MEMBER => ConsumerRecord::TargetMember {
            group,
            member: member_id(),
            value: match d.as_mut() {
                None => None,
                Some(d) => Some(get_assignment(d)?),
            },
        },
        _ => ConsumerRecord::Current {
            group,
            member: member_id(),
            value: match d.as_mut() {
                None => None,
                Some(d) => {
                    let epoch = d.i32()?;
                    let previous_epoch = d.i32()?;
                    let state = MemberState::from_code(d.i8()?);
                    let assigned = get_assignment(d)?;
                    let pending_revocation = get_assignment(d)?;
                    Some(Current {
                        epoch,
                        previous_epoch,
                        state,
                        assigned,
                        pending_revocation,
                    })
                }
            },
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::super::member::from_pairs;
    use super::*;

    fn round_trip(r: ConsumerRecord) {
        let (k, v) = encode(&r);
        assert_eq!(decode(&k, v).unwrap(), Some(r));
    }

    #[test]
    fn records_round_trip() {
        let a = from_pairs([(Uuid([7; 16]), vec![0, 2]), (Uuid([1; 16]), vec![5])]);
        round_trip(ConsumerRecord::Group {
            group: "g".into(),
            value: Some((7, -99)),
        });
        round_trip(ConsumerRecord::Group {
            group: "g".into(),
            value: None,
        });
        round_trip(ConsumerRecord::Member {
            group: "g".into(),
            member: "m".into(),
            value: Some(Subscription {
                instance_id: Some("i".into()),
                rack_id: None,
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                topic_names: vec!["a".into(), "b".into()],
                topic_regex: Some("x.*".into()),
                rebalance_timeout_ms: 300_000,
                server_assignor: Some("range".into()),
                classic: None,
            }),
        });
        round_trip(ConsumerRecord::Member {
            group: "g".into(),
            member: "classic".into(),
            value: Some(Subscription {
                topic_names: vec!["a".into()],
                rebalance_timeout_ms: 60_000,
                classic: Some(ClassicMetadata {
                    session_timeout_ms: 10_000,
                    protocols: vec![
                        ("cooperative-sticky".into(), Bytes::from_static(b"\0\x01x")),
                        ("range".into(), Bytes::new()),
                    ],
                }),
                ..Default::default()
            }),
        });
        round_trip(ConsumerRecord::TargetEpoch {
            group: "g".into(),
            value: Some(3),
        });
        round_trip(ConsumerRecord::TargetMember {
            group: "g".into(),
            member: "m".into(),
            value: Some(a.clone()),
        });
        round_trip(ConsumerRecord::Current {
            group: "g".into(),
            member: "m".into(),
            value: Some(Current {
                epoch: 4,
                previous_epoch: 3,
                state: MemberState::UnrevokedPartitions,
                assigned: a.clone(),
                pending_revocation: from_pairs([(Uuid([9; 16]), vec![1])]),
            }),
        });
        round_trip(ConsumerRecord::Current {
            group: "g".into(),
            member: "m".into(),
            value: None,
        });
    }

    #[test]
    fn layout_matches_kafka() {
        let (k, v) = encode(&ConsumerRecord::TargetEpoch {
            group: "g".into(),
            value: Some(5),
        });
        assert_eq!(&k[..], &[0, 6, 0, 1, b'g']);
        assert_eq!(&v.unwrap()[..], &[0, 0, 0, 0, 0, 5, 0]);
        let (k, v) = encode(&ConsumerRecord::Group {
            group: "g".into(),
            value: Some((1, 2)),
        });
        assert_eq!(&k[..], &[0, 3, 0, 1, b'g']);
        assert_eq!(
            &v.unwrap()[..],
            &[0, 0, 0, 0, 0, 1, 1, 0, 8, 0, 0, 0, 0, 0, 0, 0, 2]
        );
    }

    #[test]
    fn other_keys_and_garbage() {
        let offset_key = Bytes::from_static(&[0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 0]);
        assert_eq!(decode(&offset_key, None).unwrap(), None);
        let k = Bytes::from_static(&[0, 8, 0, 1, b'g', 0, 1, b'm']);
        assert!(decode(&k, Some(Bytes::from_static(&[0, 0, 0]))).is_err());
        assert!(decode(
            &k,
            Some(Bytes::from_static(&[0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0x7f]))
        )
        .is_err());
        assert!(decode(&Bytes::from_static(&[0, 5, 0]), None).is_err());
    }
}

#[cfg(test)]
mod fuzz {
    use super::*;

    /// Seeded random keys and values, and every truncation of valid ones, decode
    /// to a record or a typed error, never a panic.
    #[test]
    fn hostile_records_never_panic() {
        let seed = baton_testkit::seed();
        let mut rng = baton_protocol::testing::Rng::new(seed);
        let (k, v) = encode(&ConsumerRecord::Current {
            group: "g".into(),
            member: "m".into(),
            value: Some(Current {
                epoch: 3,
                previous_epoch: 2,
                state: MemberState::Stable,
                assigned: super::super::member::from_pairs([(Uuid([1; 16]), vec![0, 1])]),
                pending_revocation: Assignment::new(),
            }),
        });
        let v = v.unwrap();
        for n in 0..v.len() {
            let _ = decode(&k, Some(v.slice(..n)));
        }
        for kind in [3i16, 5, 6, 7, 8] {
            for _ in 0..500 {
                let mut key = BytesMut::new();
                key.put_i16(kind);
                put_str(&mut key, "g");
                put_str(&mut key, "m");
                let len = rng.below(64) as usize;
                let mut val = BytesMut::new();
                val.put_i16(0);
                val.put_slice(&rng.bytes(len));
                let _ = decode(&key.freeze(), Some(val.freeze()));
            }
        }
    }
}
