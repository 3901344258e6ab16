//! Metadata log records, shaped like KRaft's `__cluster_metadata` records, and their
//! binary form.
//!
//! Every entry of the log is one [`MetadataRecord`] with its log offset and the
//! controller epoch that wrote it. On disk an entry is framed as
//!
//! ```text
//! body_len: u32 BE | crc32c(body): u32 BE | body
//! body = offset: i64 | controller_epoch: i32 | record_type: u8 | version: u8 | fields
//! ```
//!
//! Fields are big-endian integers, strings as `u16` length + UTF-8, arrays as `u32`
//! count + elements, options as a `u8` tag (0 absent, 1 present) + value, UUIDs as 16
//! bytes. Decoding checks the CRC before anything else, bounds every count by the bytes
//! left, rejects trailing bytes, and never panics.

use baton_protocol::acl::{
    AccessControlEntry, AclBinding, AclOperation, AclPermissionType, PatternType, ResourcePattern,
    ResourceType,
};
use baton_protocol::sasl::{ScramCredential, ScramHash};
use baton_protocol::Uuid;

/// The leader value meaning "no leader" (partition offline).
pub const NO_LEADER: i32 = -1;

/// Largest encoded entry body accepted, so a corrupt length cannot ask for more.
pub const MAX_ENTRY_BYTES: usize = 1 << 20;

/// Bytes before the body: length and CRC.
const FRAME_HEADER: usize = 8;

/// Longest string field of an ACL binding a record carries (its name, principal,
/// host); longer bindings are refused before they reach the log.
pub const MAX_ACL_FIELD_BYTES: usize = 4096;

/// Version of the record bodies written here.
const RECORD_VERSION: u8 = 0;

/// The record type of [`MetadataRecord::TopicConfig`] (numbered apart from the
/// others so that record types added in parallel do not collide).
const TOPIC_CONFIG_TYPE: u8 = 20;
/// The record type of [`MetadataRecord::BrokerDefaultConfig`].
const BROKER_DEFAULT_CONFIG_TYPE: u8 = 21;

/// Version of a RegisterBroker body that lists further listeners after the
/// first; a registration without them is still written as version 0.
const REGISTER_WITH_LISTENERS_VERSION: u8 = 1;

/// Version of a RegisterBroker body that also carries the broker's rack (after the
/// listener count, which may then be 0); written only for a broker with a rack.
const REGISTER_WITH_RACK_VERSION: u8 = 2;

/// Longest rack a registration carries.
pub const MAX_RACK_BYTES: usize = 1024;

/// Most listeners a broker registers besides its first.
pub const MAX_EXTRA_LISTENERS: usize = 16;

/// One more listener of a registered broker: its name and advertised endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerRecord {
    /// The listener name (`SASL_SSL`, `CLIENT`, ...).
    pub name: String,
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: u16,
}

/// A broker announced itself (it starts fenced until it catches up).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterBrokerRecord {
    /// Broker id.
    pub broker_id: i32,
    /// Random id of this broker process; a new value means the broker restarted.
    pub incarnation_id: u64,
    /// Advertised host of the broker's first listener (the one brokers replicate
    /// over).
    pub host: String,
    /// Advertised port of the first listener.
    pub port: u16,
    /// The broker's other listeners (at most [`MAX_EXTRA_LISTENERS`]); Metadata
    /// asked on one of them names every broker by its endpoint of that listener.
    pub listeners: Vec<ListenerRecord>,
    /// The broker's rack (`broker.rack`, at most [`MAX_RACK_BYTES`]), if any.
    pub rack: Option<String>,
}

/// A topic was created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicRecord {
    /// Topic name.
    pub name: String,
    /// Topic id.
    pub topic_id: Uuid,
    /// Topic configuration overrides (`unclean.leader.election.enable`, ...).
    pub configs: Vec<(String, String)>,
}

/// A partition's full state, written when it is created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionRecord {
    /// Topic id.
    pub topic_id: Uuid,
    /// Partition index.
    pub partition: i32,
    /// Assigned replicas, preferred first.
    pub replicas: Vec<i32>,
    /// In-sync replicas.
    pub isr: Vec<i32>,
    /// Leader, or [`NO_LEADER`].
    pub leader: i32,
    /// Leader epoch.
    pub leader_epoch: i32,
    /// Partition epoch (bumped by every change).
    pub partition_epoch: i32,
}

/// A change to a partition. Absent fields are unchanged. Applying it bumps the
/// partition epoch, and the leader epoch when the leader changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionChangeRecord {
    /// Topic id.
    pub topic_id: Uuid,
    /// Partition index.
    pub partition: i32,
    /// New ISR.
    pub isr: Option<Vec<i32>>,
    /// New leader (may be [`NO_LEADER`]).
    pub leader: Option<i32>,
}

/// The phase of a planned leadership move (controlled shutdown or preferred-leader
/// restore). A planned move loses nothing even for `acks=1`: the old leader stops
/// taking writes, the successor catches up to its frozen log end, then leadership
/// changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoveState {
    /// The old leader was asked to stop accepting writes.
    Requested,
    /// The old leader stopped; its log end is `target_log_end_offset` and the successor
    /// must reach it.
    Draining {
        /// The old leader's frozen LEO.
        target_log_end_offset: i64,
    },
    /// The successor caught up; a [`PartitionChangeRecord`] makes it leader.
    HandedOver,
    /// The move was abandoned (a party failed, left the ISR, or timed out).
    Aborted,
}

/// A step of a planned leadership move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderMoveRecord {
    /// Topic id.
    pub topic_id: Uuid,
    /// Partition index.
    pub partition: i32,
    /// Current leader.
    pub from: i32,
    /// Successor.
    pub to: i32,
    /// New phase.
    pub state: MoveState,
}

/// A partition's replica set changed by a reassignment (KIP-455, as KRaft's
/// PartitionChangeRecord carries `replicas`, `addingReplicas` and
/// `removingReplicas`): started (the union of old and target replicas), completed
/// (the target) or cancelled (the old replicas). Sets every field; applying it
/// bumps the partition epoch, and the leader epoch when the leader changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReassignmentRecord {
    /// Topic id.
    pub topic_id: Uuid,
    /// Partition index.
    pub partition: i32,
    /// The replicas, preferred first.
    pub replicas: Vec<i32>,
    /// The in-sync replicas (a subset of `replicas`).
    pub isr: Vec<i32>,
    /// The leader, or [`NO_LEADER`].
    pub leader: i32,
    /// Replicas being added (empty when no reassignment is in progress).
    pub adding: Vec<i32>,
    /// Replicas being removed.
    pub removing: Vec<i32>,
}

/// One typed record of the metadata log.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MetadataRecord {
    /// A broker registered (fenced until it catches up).
    RegisterBroker(RegisterBrokerRecord),
    /// A broker was fenced: it may not lead or be in an ISR.
    FenceBroker {
        /// Broker id.
        broker_id: i32,
    },
    /// A broker was unfenced.
    UnfenceBroker {
        /// Broker id.
        broker_id: i32,
    },
    /// A broker asked to shut down; its leaderships are being moved away.
    BrokerShutdownRequested {
        /// Broker id.
        broker_id: i32,
    },
    /// A topic was created.
    Topic(TopicRecord),
    /// A partition was created.
    Partition(PartitionRecord),
    /// A partition changed.
    PartitionChange(PartitionChangeRecord),
    /// A planned leadership move advanced.
    LeaderMove(LeaderMoveRecord),
    /// A topic was deleted with all its partitions.
    RemoveTopic {
        /// Topic id.
        topic_id: Uuid,
    },
    /// An ACL binding was added (KRaft's AccessControlEntryRecord).
    AccessControlEntry(AclBinding),
    /// An ACL binding was removed (KRaft's RemoveAccessControlEntryRecord).
    RemoveAccessControlEntry(AclBinding),
    /// A user's SCRAM credential for one mechanism was set (KRaft's
    /// UserScramCredentialRecord): salt, StoredKey, ServerKey and iterations.
    UserScramCredential {
        /// The user.
        name: String,
        /// The credential (its hash names the mechanism).
        credential: ScramCredential,
    },
    /// A user's SCRAM credential for one mechanism was removed (KRaft's
    /// RemoveUserScramCredentialRecord).
    RemoveUserScramCredential {
        /// The user.
        name: String,
        /// The mechanism's hash.
        hash: ScramHash,
    },
    /// A partition's replicas were reassigned.
    Reassignment(ReassignmentRecord),
    /// A topic config override was set or, with no value, removed (KRaft's
    /// ConfigRecord for a topic resource; IncrementalAlterConfigs).
    TopicConfig {
        /// Topic id.
        topic_id: Uuid,
        /// The config key.
        key: String,
        /// The new value; `None` removes the override.
        value: Option<String>,
    },
    /// A cluster-wide dynamic broker default was set or, with no value, removed
    /// (KRaft's ConfigRecord for the broker resource named "").
    BrokerDefaultConfig {
        /// The config key (`log.retention.ms`, ...).
        key: String,
        /// The new value; `None` removes the default.
        value: Option<String>,
    },
}

/// One entry of the metadata log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataLogEntry {
    /// Position in the log: 0, 1, 2, ... without gaps.
    pub offset: i64,
    /// The controller epoch that wrote it.
    pub controller_epoch: i32,
    /// The record.
    pub record: MetadataRecord,
}

/// Why bytes could not be decoded as metadata log entries.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MetadataDecodeError {
    /// The input ends inside an entry (a torn tail when at the end of a file).
    #[error("entry incomplete: need {needed} bytes, have {available}")]
    Incomplete {
        /// Bytes the entry needs.
        needed: usize,
        /// Bytes present.
        available: usize,
    },
    /// The frame announces a body larger than [`MAX_ENTRY_BYTES`].
    #[error("entry of {0} bytes exceeds the maximum")]
    TooLarge(usize),
    /// The body's CRC-32C does not match.
    #[error("entry checksum mismatch: stored {stored:08x}, computed {computed:08x}")]
    Crc {
        /// Stored checksum.
        stored: u32,
        /// Computed checksum.
        computed: u32,
    },
    /// The body (with a valid CRC) is malformed.
    #[error("malformed entry: {0}")]
    Malformed(String),
    /// The record type byte is unknown.
    #[error("unknown record type {0}")]
    UnknownType(u8),
    /// The record version is unknown.
    #[error("unknown record version {0}")]
    UnknownVersion(u8),
}

/// Result of reading a whole metadata log file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedLog {
    /// The complete entries, in order.
    pub entries: Vec<MetadataLogEntry>,
    /// Bytes covered by `entries`; anything after it is a torn tail to cut.
    pub valid_len: usize,
    /// Whether an incomplete entry followed the last complete one.
    pub torn_tail: bool,
}

impl MetadataLogEntry {
    /// Appends the framed entry to `out`.
    ///
    /// # Panics
    ///
    /// If the body would exceed [`MAX_ENTRY_BYTES`] or a string exceeds 65535 bytes;
    /// the controller never builds such records (names and configs are bounded).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut body = Vec::with_capacity(64);
        body.extend_from_slice(&self.offset.to_be_bytes());
        body.extend_from_slice(&self.controller_epoch.to_be_bytes());
        let mut w = Writer(&mut body);
        match &self.record {
            MetadataRecord::RegisterBroker(r) => {
                if r.rack.is_some() {
                    w.u8(1);
                    w.u8(REGISTER_WITH_RACK_VERSION);
                } else if r.listeners.is_empty() {
                    w.header(1);
                } else {
                    w.u8(1);
                    w.u8(REGISTER_WITH_LISTENERS_VERSION);
                }
                w.i32(r.broker_id);
                w.u64(r.incarnation_id);
                w.string(&r.host);
                w.u16(r.port);
                if let Some(rack) = &r.rack {
                    assert!(r.listeners.len() <= MAX_EXTRA_LISTENERS);
                    assert!(rack.len() <= MAX_RACK_BYTES);
                    w.u16(r.listeners.len() as u16);
                    for l in &r.listeners {
                        w.string(&l.name);
                        w.string(&l.host);
                        w.u16(l.port);
                    }
                    w.string(rack);
                } else if !r.listeners.is_empty() {
                    assert!(r.listeners.len() <= MAX_EXTRA_LISTENERS);
                    w.u16(r.listeners.len() as u16);
                    for l in &r.listeners {
                        w.string(&l.name);
                        w.string(&l.host);
                        w.u16(l.port);
                    }
                }
            }
            MetadataRecord::FenceBroker { broker_id } => {
                w.header(2);
                w.i32(*broker_id);
            }
            MetadataRecord::UnfenceBroker { broker_id } => {
                w.header(3);
                w.i32(*broker_id);
            }
            MetadataRecord::BrokerShutdownRequested { broker_id } => {
                w.header(4);
                w.i32(*broker_id);
            }
            MetadataRecord::Topic(t) => {
                w.header(5);
                w.string(&t.name);
                w.uuid(t.topic_id);
                w.u32(t.configs.len());
                for (k, v) in &t.configs {
                    w.string(k);
                    w.string(v);
                }
            }
            MetadataRecord::Partition(p) => {
                w.header(6);
                w.uuid(p.topic_id);
                w.i32(p.partition);
                w.i32s(&p.replicas);
                w.i32s(&p.isr);
                w.i32(p.leader);
                w.i32(p.leader_epoch);
                w.i32(p.partition_epoch);
            }
            MetadataRecord::PartitionChange(c) => {
                w.header(7);
                w.uuid(c.topic_id);
                w.i32(c.partition);
                match &c.isr {
                    None => w.u8(0),
                    Some(isr) => {
                        w.u8(1);
                        w.i32s(isr);
                    }
                }
                match c.leader {
                    None => w.u8(0),
                    Some(l) => {
                        w.u8(1);
                        w.i32(l);
                    }
                }
            }
            MetadataRecord::LeaderMove(m) => {
                w.header(8);
                w.uuid(m.topic_id);
                w.i32(m.partition);
                w.i32(m.from);
                w.i32(m.to);
                match m.state {
                    MoveState::Requested => w.u8(0),
                    MoveState::Draining {
                        target_log_end_offset,
                    } => {
                        w.u8(1);
                        w.i64(target_log_end_offset);
                    }
                    MoveState::HandedOver => w.u8(2),
                    MoveState::Aborted => w.u8(3),
                }
            }
            MetadataRecord::RemoveTopic { topic_id } => {
                w.header(9);
                w.uuid(*topic_id);
            }
            MetadataRecord::AccessControlEntry(b) => {
                w.header(10);
                w.acl(b);
            }
            MetadataRecord::RemoveAccessControlEntry(b) => {
                w.header(11);
                w.acl(b);
            }
            MetadataRecord::UserScramCredential { name, credential } => {
                w.header(12);
                w.string(name);
                w.u8(credential.hash().kafka_type() as u8);
                w.bytes(credential.salt());
                w.bytes(credential.stored_key());
                w.bytes(credential.server_key());
                w.u32(credential.iterations() as usize);
            }
            MetadataRecord::RemoveUserScramCredential { name, hash } => {
                w.header(13);
                w.string(name);
                w.u8(hash.kafka_type() as u8);
            }
            MetadataRecord::Reassignment(r) => {
                w.header(14);
                w.uuid(r.topic_id);
                w.i32(r.partition);
                w.i32s(&r.replicas);
                w.i32s(&r.isr);
                w.i32(r.leader);
                w.i32s(&r.adding);
                w.i32s(&r.removing);
            }
            MetadataRecord::TopicConfig {
                topic_id,
                key,
                value,
            } => {
                w.header(TOPIC_CONFIG_TYPE);
                w.uuid(*topic_id);
                w.string(key);
                w.optional_string(value.as_deref());
            }
            MetadataRecord::BrokerDefaultConfig { key, value } => {
                w.header(BROKER_DEFAULT_CONFIG_TYPE);
                w.string(key);
                w.optional_string(value.as_deref());
            }
        }
        assert!(body.len() <= MAX_ENTRY_BYTES, "metadata entry too large");
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
        out.extend_from_slice(&body);
    }

    /// The framed bytes of this entry.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    /// Decodes one framed entry from the start of `buf`; returns it and the bytes used.
    pub fn decode(buf: &[u8]) -> Result<(MetadataLogEntry, usize), MetadataDecodeError> {
        if buf.len() < FRAME_HEADER {
            return Err(MetadataDecodeError::Incomplete {
                needed: FRAME_HEADER,
                available: buf.len(),
            });
        }
        let len = u32::from_be_bytes(buf[0..4].try_into().expect("4 bytes")) as usize;
        if len > MAX_ENTRY_BYTES {
            return Err(MetadataDecodeError::TooLarge(len));
        }
        let total = FRAME_HEADER + len;
        if buf.len() < total {
            return Err(MetadataDecodeError::Incomplete {
                needed: total,
                available: buf.len(),
            });
        }
        let stored = u32::from_be_bytes(buf[4..8].try_into().expect("4 bytes"));
        let body = &buf[FRAME_HEADER..total];
        let computed = crc32c::crc32c(body);
        if stored != computed {
            return Err(MetadataDecodeError::Crc { stored, computed });
        }
        let mut r = Reader { buf: body };
        let offset = r.i64()?;
        let controller_epoch = r.i32()?;
        let record_type = r.u8()?;
        let version = r.u8()?;
        let known = version == RECORD_VERSION
            || (record_type == 1
                && (version == REGISTER_WITH_LISTENERS_VERSION
                    || version == REGISTER_WITH_RACK_VERSION));
        if !known {
            return Err(MetadataDecodeError::UnknownVersion(version));
        }
        let record = match record_type {
            1 => {
                let mut record = RegisterBrokerRecord {
                    broker_id: r.i32()?,
                    incarnation_id: r.u64()?,
                    host: r.string()?,
                    port: r.u16()?,
                    listeners: Vec::new(),
                    rack: None,
                };
                if version == REGISTER_WITH_RACK_VERSION {
                    let n = r.u16()? as usize;
                    if n > MAX_EXTRA_LISTENERS {
                        return Err(malformed(format!("{n} extra listeners")));
                    }
                    for _ in 0..n {
                        record.listeners.push(ListenerRecord {
                            name: r.string()?,
                            host: r.string()?,
                            port: r.u16()?,
                        });
                    }
                    let rack = r.string()?;
                    if rack.len() > MAX_RACK_BYTES {
                        return Err(malformed(format!("a rack of {} bytes", rack.len())));
                    }
                    record.rack = Some(rack);
                } else if version == REGISTER_WITH_LISTENERS_VERSION {
                    let n = r.u16()? as usize;
                    if n == 0 || n > MAX_EXTRA_LISTENERS {
                        return Err(malformed(format!("{n} extra listeners")));
                    }
                    for _ in 0..n {
                        record.listeners.push(ListenerRecord {
                            name: r.string()?,
                            host: r.string()?,
                            port: r.u16()?,
                        });
                    }
                }
                MetadataRecord::RegisterBroker(record)
            }
            2 => MetadataRecord::FenceBroker {
                broker_id: r.i32()?,
            },
            3 => MetadataRecord::UnfenceBroker {
                broker_id: r.i32()?,
            },
            4 => MetadataRecord::BrokerShutdownRequested {
                broker_id: r.i32()?,
            },
            5 => {
                let name = r.string()?;
                let topic_id = r.uuid()?;
                // Each config pair takes at least 4 bytes (two empty strings).
                let n = r.count(4)?;
                let mut configs = Vec::with_capacity(n);
                for _ in 0..n {
                    configs.push((r.string()?, r.string()?));
                }
                MetadataRecord::Topic(TopicRecord {
                    name,
                    topic_id,
                    configs,
                })
            }
            6 => MetadataRecord::Partition(PartitionRecord {
                topic_id: r.uuid()?,
                partition: r.i32()?,
                replicas: r.i32s()?,
                isr: r.i32s()?,
                leader: r.i32()?,
                leader_epoch: r.i32()?,
                partition_epoch: r.i32()?,
            }),
            7 => {
                let topic_id = r.uuid()?;
                let partition = r.i32()?;
                let isr = match r.u8()? {
                    0 => None,
                    1 => Some(r.i32s()?),
                    t => return Err(malformed(format!("bad option tag {t}"))),
                };
                let leader = match r.u8()? {
                    0 => None,
                    1 => Some(r.i32()?),
                    t => return Err(malformed(format!("bad option tag {t}"))),
                };
                MetadataRecord::PartitionChange(PartitionChangeRecord {
                    topic_id,
                    partition,
                    isr,
                    leader,
                })
            }
            8 => {
                let topic_id = r.uuid()?;
                let partition = r.i32()?;
                let from = r.i32()?;
                let to = r.i32()?;
                let state = match r.u8()? {
                    0 => MoveState::Requested,
                    1 => MoveState::Draining {
                        target_log_end_offset: r.i64()?,
                    },
                    2 => MoveState::HandedOver,
                    3 => MoveState::Aborted,
                    t => return Err(malformed(format!("bad move state {t}"))),
                };
                MetadataRecord::LeaderMove(LeaderMoveRecord {
                    topic_id,
                    partition,
                    from,
                    to,
                    state,
                })
            }
            9 => MetadataRecord::RemoveTopic {
                topic_id: r.uuid()?,
            },
            10 => MetadataRecord::AccessControlEntry(r.acl()?),
            11 => MetadataRecord::RemoveAccessControlEntry(r.acl()?),
            12 => {
                let name = r.string()?;
                let hash = r.scram_hash()?;
                let salt = r.bytes()?;
                let stored_key = r.bytes()?;
                let server_key = r.bytes()?;
                let iterations = r.u32()?;
                let credential =
                    ScramCredential::from_parts(hash, salt, iterations, stored_key, server_key)
                        .map_err(|e| malformed(format!("SCRAM credential: {e}")))?;
                MetadataRecord::UserScramCredential { name, credential }
            }
            13 => MetadataRecord::RemoveUserScramCredential {
                name: r.string()?,
                hash: r.scram_hash()?,
            },
            14 => MetadataRecord::Reassignment(ReassignmentRecord {
                topic_id: r.uuid()?,
                partition: r.i32()?,
                replicas: r.i32s()?,
                isr: r.i32s()?,
                leader: r.i32()?,
                adding: r.i32s()?,
                removing: r.i32s()?,
            }),
            TOPIC_CONFIG_TYPE => MetadataRecord::TopicConfig {
                topic_id: r.uuid()?,
                key: r.string()?,
                value: r.optional_string()?,
            },
            BROKER_DEFAULT_CONFIG_TYPE => MetadataRecord::BrokerDefaultConfig {
                key: r.string()?,
                value: r.optional_string()?,
            },
            t => return Err(MetadataDecodeError::UnknownType(t)),
        };
        if !r.buf.is_empty() {
            return Err(malformed(format!("{} trailing bytes", r.buf.len())));
        }
        Ok((
            MetadataLogEntry {
                offset,
                controller_epoch,
                record,
            },
            total,
        ))
    }
}

/// Decodes a whole log file: complete entries in order, stopping at an incomplete
/// tail (reported, not an error). A bad checksum or malformed entry before the end is
/// an error.
pub fn decode_log(buf: &[u8]) -> Result<DecodedLog, MetadataDecodeError> {
    let mut entries = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        match MetadataLogEntry::decode(&buf[pos..]) {
            Ok((entry, used)) => {
                entries.push(entry);
                pos += used;
            }
            Err(MetadataDecodeError::Incomplete { .. }) => {
                return Ok(DecodedLog {
                    entries,
                    valid_len: pos,
                    torn_tail: true,
                });
            }
            Err(e) => return Err(e),
        }
    }
    Ok(DecodedLog {
        entries,
        valid_len: pos,
        torn_tail: false,
    })
}

fn malformed(s: String) -> MetadataDecodeError {
    MetadataDecodeError::Malformed(s)
}

/// Big-endian field writer.
struct Writer<'a>(&'a mut Vec<u8>);

impl Writer<'_> {
    fn header(&mut self, record_type: u8) {
        self.u8(record_type);
        self.u8(RECORD_VERSION);
    }
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn u32(&mut self, v: usize) {
        let v = u32::try_from(v).expect("count fits u32");
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn uuid(&mut self, v: Uuid) {
        self.0.extend_from_slice(&v.0);
    }
    fn string(&mut self, s: &str) {
        let len = u16::try_from(s.len()).expect("string fits u16 length");
        self.u16(len);
        self.0.extend_from_slice(s.as_bytes());
    }
    /// A presence flag, then the string if present.
    fn optional_string(&mut self, s: Option<&str>) {
        match s {
            None => self.u8(0),
            Some(s) => {
                self.u8(1);
                self.string(s);
            }
        }
    }
    /// Bytes with a `u32` length (salts and SCRAM keys).
    fn bytes(&mut self, v: &[u8]) {
        self.u32(v.len());
        self.0.extend_from_slice(v);
    }
    fn i32s(&mut self, v: &[i32]) {
        self.u32(v.len());
        for x in v {
            self.i32(*x);
        }
    }
    /// An ACL binding: its codes as bytes, its strings (each at most
    /// `MAX_ACL_FIELD_BYTES`, checked before a binding is accepted).
    fn acl(&mut self, b: &AclBinding) {
        self.u8(b.pattern.resource_type.code() as u8);
        self.string(&b.pattern.name);
        self.u8(b.pattern.pattern_type.code() as u8);
        self.string(&b.entry.principal);
        self.string(&b.entry.host);
        self.u8(b.entry.operation.code() as u8);
        self.u8(b.entry.permission_type.code() as u8);
    }
}

/// Big-endian field reader over a checked body; every read is bounds-checked.
struct Reader<'a> {
    buf: &'a [u8],
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], MetadataDecodeError> {
        if self.buf.len() < n {
            return Err(malformed(format!(
                "field needs {n} bytes, {} left",
                self.buf.len()
            )));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, MetadataDecodeError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, MetadataDecodeError> {
        Ok(u16::from_be_bytes(self.take(2)?.try_into().expect("2")))
    }
    fn u32(&mut self) -> Result<u32, MetadataDecodeError> {
        Ok(u32::from_be_bytes(self.take(4)?.try_into().expect("4")))
    }
    fn i32(&mut self) -> Result<i32, MetadataDecodeError> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().expect("4")))
    }
    fn i64(&mut self) -> Result<i64, MetadataDecodeError> {
        Ok(i64::from_be_bytes(self.take(8)?.try_into().expect("8")))
    }
    fn u64(&mut self) -> Result<u64, MetadataDecodeError> {
        Ok(u64::from_be_bytes(self.take(8)?.try_into().expect("8")))
    }
    fn uuid(&mut self) -> Result<Uuid, MetadataDecodeError> {
        Ok(Uuid(self.take(16)?.try_into().expect("16")))
    }
    fn string(&mut self) -> Result<String, MetadataDecodeError> {
        let n = self.u16()? as usize;
        let bytes = self.take(n)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| malformed("string is not UTF-8".into()))
    }
    fn optional_string(&mut self) -> Result<Option<String>, MetadataDecodeError> {
        match self.u8()? {
            0 => Ok(None),
            1 => Ok(Some(self.string()?)),
            t => Err(malformed(format!("bad presence flag {t}"))),
        }
    }
    /// An element count, refused if `count * min_elem_bytes` exceeds what is left.
    fn count(&mut self, min_elem_bytes: usize) -> Result<usize, MetadataDecodeError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_elem_bytes) > self.buf.len() {
            return Err(malformed(format!(
                "count {n} exceeds the {} bytes left",
                self.buf.len()
            )));
        }
        Ok(n)
    }
    fn bytes(&mut self) -> Result<Vec<u8>, MetadataDecodeError> {
        let n = self.count(1)?;
        Ok(self.take(n)?.to_vec())
    }
    fn scram_hash(&mut self) -> Result<ScramHash, MetadataDecodeError> {
        let t = self.u8()? as i8;
        ScramHash::from_kafka_type(t)
            .ok_or_else(|| malformed(format!("unknown SCRAM mechanism {t}")))
    }
    fn i32s(&mut self) -> Result<Vec<i32>, MetadataDecodeError> {
        let n = self.count(4)?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(self.i32()?);
        }
        Ok(v)
    }
    fn code<T>(&mut self, what: &str, from: fn(i8) -> Option<T>) -> Result<T, MetadataDecodeError> {
        let c = self.u8()? as i8;
        from(c).ok_or_else(|| malformed(format!("unknown ACL {what} code {c}")))
    }
    fn acl(&mut self) -> Result<AclBinding, MetadataDecodeError> {
        Ok(AclBinding {
            pattern: ResourcePattern {
                resource_type: self.code("resource type", ResourceType::from_code)?,
                name: self.string()?,
                pattern_type: self.code("pattern type", PatternType::from_code)?,
            },
            entry: AccessControlEntry {
                principal: self.string()?,
                host: self.string()?,
                operation: self.code("operation", AclOperation::from_code)?,
                permission_type: self.code("permission type", AclPermissionType::from_code)?,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed};

    fn id(n: u64) -> Uuid {
        Uuid::from_u64_pair(n, !n)
    }

    /// One of each record kind.
    pub(crate) fn samples() -> Vec<MetadataRecord> {
        vec![
            MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                broker_id: 3,
                incarnation_id: 0xdead_beef,
                host: "127.0.0.1".into(),
                port: 9093,
                listeners: Vec::new(),
                rack: None,
            }),
            MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                broker_id: 5,
                incarnation_id: 0xbeef,
                host: "127.0.0.1".into(),
                port: 9095,
                listeners: Vec::new(),
                rack: Some("eu-west-1a".into()),
            }),
            MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                broker_id: 4,
                incarnation_id: 0xfeed,
                host: "127.0.0.1".into(),
                port: 9094,
                listeners: vec![ListenerRecord {
                    name: "SASL_SSL".into(),
                    host: "kafka.example".into(),
                    port: 19094,
                }],
                rack: None,
            }),
            MetadataRecord::FenceBroker { broker_id: 3 },
            MetadataRecord::UnfenceBroker { broker_id: 3 },
            MetadataRecord::BrokerShutdownRequested { broker_id: 2 },
            MetadataRecord::Topic(TopicRecord {
                name: "orders-é".into(),
                topic_id: id(7),
                configs: vec![
                    ("unclean.leader.election.enable".into(), "true".into()),
                    ("min.insync.replicas".into(), "2".into()),
                ],
            }),
            MetadataRecord::Partition(PartitionRecord {
                topic_id: id(7),
                partition: 4,
                replicas: vec![1, 2, 3],
                isr: vec![1, 3],
                leader: 1,
                leader_epoch: 9,
                partition_epoch: 12,
            }),
            MetadataRecord::PartitionChange(PartitionChangeRecord {
                topic_id: id(7),
                partition: 4,
                isr: Some(vec![1]),
                leader: None,
            }),
            MetadataRecord::PartitionChange(PartitionChangeRecord {
                topic_id: id(7),
                partition: 4,
                isr: None,
                leader: Some(NO_LEADER),
            }),
            MetadataRecord::LeaderMove(LeaderMoveRecord {
                topic_id: id(7),
                partition: 4,
                from: 1,
                to: 3,
                state: MoveState::Draining {
                    target_log_end_offset: 1234,
                },
            }),
            MetadataRecord::LeaderMove(LeaderMoveRecord {
                topic_id: id(7),
                partition: 4,
                from: 1,
                to: 3,
                state: MoveState::Aborted,
            }),
            MetadataRecord::RemoveTopic { topic_id: id(7) },
            MetadataRecord::AccessControlEntry(AclBinding {
                pattern: ResourcePattern {
                    resource_type: ResourceType::Topic,
                    name: "orders-".into(),
                    pattern_type: PatternType::Prefixed,
                },
                entry: AccessControlEntry {
                    principal: "User:CN=app,O=Baton".into(),
                    host: "*".into(),
                    operation: AclOperation::Write,
                    permission_type: AclPermissionType::Deny,
                },
            }),
            MetadataRecord::RemoveAccessControlEntry(AclBinding {
                pattern: ResourcePattern {
                    resource_type: ResourceType::Cluster,
                    name: "kafka-cluster".into(),
                    pattern_type: PatternType::Literal,
                },
                entry: AccessControlEntry {
                    principal: "User:*".into(),
                    host: "10.0.0.1".into(),
                    operation: AclOperation::IdempotentWrite,
                    permission_type: AclPermissionType::Allow,
                },
            }),
            MetadataRecord::UserScramCredential {
                name: "alice".into(),
                credential: ScramCredential::with_salt(
                    ScramHash::Sha512,
                    b"alice-secret",
                    b"salt".to_vec(),
                    4096,
                )
                .unwrap(),
            },
            MetadataRecord::RemoveUserScramCredential {
                name: "bob".into(),
                hash: ScramHash::Sha256,
            },
            MetadataRecord::Reassignment(ReassignmentRecord {
                topic_id: id(1),
                partition: 0,
                replicas: vec![2, 3, 1],
                isr: vec![1, 2],
                leader: 1,
                adding: vec![3],
                removing: vec![1],
            }),
            MetadataRecord::TopicConfig {
                topic_id: id(7),
                key: "retention.ms".into(),
                value: Some("60000".into()),
            },
            MetadataRecord::TopicConfig {
                topic_id: id(7),
                key: "cleanup.policy".into(),
                value: None,
            },
            MetadataRecord::BrokerDefaultConfig {
                key: "log.retention.ms".into(),
                value: Some("1000".into()),
            },
            MetadataRecord::BrokerDefaultConfig {
                key: "log.retention.bytes".into(),
                value: None,
            },
        ]
    }

    fn log_bytes() -> (Vec<MetadataLogEntry>, Vec<u8>) {
        let entries: Vec<MetadataLogEntry> = samples()
            .into_iter()
            .enumerate()
            .map(|(i, record)| MetadataLogEntry {
                offset: i as i64,
                controller_epoch: 2,
                record,
            })
            .collect();
        let mut buf = Vec::new();
        for e in &entries {
            e.encode(&mut buf);
        }
        (entries, buf)
    }

    #[test]
    fn every_record_round_trips() {
        let (entries, buf) = log_bytes();
        let decoded = decode_log(&buf).unwrap();
        assert_eq!(decoded.entries, entries);
        assert_eq!(decoded.valid_len, buf.len());
        assert!(!decoded.torn_tail);
    }

    #[test]
    fn torn_tail_is_reported_and_damage_is_an_error() {
        let (entries, buf) = log_bytes();
        // Every cut inside the last entry is a torn tail after the others.
        let last_len = entries.last().unwrap().to_bytes().len();
        for cut in 1..last_len {
            let d = decode_log(&buf[..buf.len() - cut]).unwrap();
            assert!(d.torn_tail);
            assert_eq!(d.entries.len(), entries.len() - 1);
            assert_eq!(d.valid_len, buf.len() - last_len);
        }
        // Flipping any byte of any entry is detected (CRC, length or incomplete).
        for i in 0..buf.len() {
            let mut bad = buf.clone();
            bad[i] ^= 0x40;
            match decode_log(&bad) {
                Err(_) => {}
                Ok(d) => assert!(
                    d.torn_tail && d.entries.len() < entries.len(),
                    "flip at {i} went unnoticed"
                ),
            }
        }
    }

    #[test]
    fn valid_crc_over_malformed_body_is_an_error() {
        let frame = |body: &[u8]| {
            let mut out = (body.len() as u32).to_be_bytes().to_vec();
            out.extend_from_slice(&crc32c::crc32c(body).to_be_bytes());
            out.extend_from_slice(body);
            out
        };
        let mut body = vec![0u8; 12];
        body.extend_from_slice(&[6, 0]); // Partition record
        body.extend_from_slice(&[0; 16]);
        body.extend_from_slice(&0i32.to_be_bytes());
        body.extend_from_slice(&u32::MAX.to_be_bytes()); // huge replica count
        assert!(matches!(
            MetadataLogEntry::decode(&frame(&body)),
            Err(MetadataDecodeError::Malformed(_))
        ));
        let mut body = vec![0u8; 12];
        body.extend_from_slice(&[42, 0]);
        assert_eq!(
            MetadataLogEntry::decode(&frame(&body)).unwrap_err(),
            MetadataDecodeError::UnknownType(42)
        );
        let mut body = vec![0u8; 12];
        body.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0xff]); // trailing byte
        assert!(matches!(
            MetadataLogEntry::decode(&frame(&body)),
            Err(MetadataDecodeError::Malformed(_))
        ));
        let huge = [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0];
        assert_eq!(
            MetadataLogEntry::decode(&huge).unwrap_err(),
            MetadataDecodeError::TooLarge(u32::MAX as usize)
        );
    }

    proptest! {
        #![proptest_config(Config { cases: 512, rng_seed: RngSeed::Fixed(0xc0de_1095), ..Config::default() })]

        /// Arbitrary bytes never panic the decoder.
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode_log(&bytes);
        }

        /// Arbitrary bodies behind a valid frame and CRC never panic either, and what
        /// decodes re-encodes to the same bytes.
        #[test]
        fn framed_garbage_never_panics(body in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut buf = (body.len() as u32).to_be_bytes().to_vec();
            buf.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
            buf.extend_from_slice(&body);
            if let Ok((entry, used)) = MetadataLogEntry::decode(&buf) {
                prop_assert_eq!(used, buf.len());
                prop_assert_eq!(entry.to_bytes(), buf);
            }
        }

        /// Random partition records round-trip.
        #[test]
        fn partition_records_round_trip(
            offset in any::<i64>(), epoch in any::<i32>(), part in any::<i32>(),
            replicas in proptest::collection::vec(any::<i32>(), 0..8),
            isr in proptest::option::of(proptest::collection::vec(any::<i32>(), 0..8)),
            leader in proptest::option::of(any::<i32>()),
        ) {
            let e = MetadataLogEntry {
                offset,
                controller_epoch: epoch,
                record: MetadataRecord::PartitionChange(PartitionChangeRecord {
                    topic_id: id(offset as u64), partition: part, isr, leader,
                }),
            };
            let (back, _) = MetadataLogEntry::decode(&e.to_bytes()).unwrap();
            prop_assert_eq!(back, e);
            let p = MetadataLogEntry {
                offset,
                controller_epoch: epoch,
                record: MetadataRecord::Partition(PartitionRecord {
                    topic_id: id(7), partition: part, isr: replicas.clone(), replicas,
                    leader: part, leader_epoch: epoch, partition_epoch: epoch,
                }),
            };
            prop_assert_eq!(MetadataLogEntry::decode(&p.to_bytes()).unwrap().0, p);
        }
    }
}
