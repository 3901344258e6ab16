//! The consumer embedded protocol: what a consumer puts in JoinGroup's protocol
//! metadata (`ConsumerProtocolSubscription`) and what the leader puts in SyncGroup's
//! assignments (`ConsumerProtocolAssignment`).
//!
//! These are not API messages: each is versioned by a leading `int16` in its own bytes,
//! and never flexible. Versions 0–3 of both, from Apache Kafka's spec: subscription v1
//! adds the owned partitions (KIP-429, cooperative rebalancing), v2 the generation id
//! (KIP-792), v3 the rack id (KIP-881); the assignment's layout is the same in every
//! version. Following Kafka, a reader accepts versions above 3 by reading the v3 fields
//! and ignoring what follows them, so newer members can still join a group.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{DecodeError, EncodeError};
use crate::primitives::{Decoder, Wire};
use crate::wire_struct;

wire_struct! {
    /// A topic and some of its partitions.
    pub struct ConsumerProtocolTopicPartition {
        /// The topic name.
        pub topic: String [0..],
        /// The partition indexes.
        pub partitions: Vec<i32> [0..],
    }
}

wire_struct! {
    /// A consumer's subscription, sent as JoinGroup protocol metadata. Versions 0–3.
    pub struct ConsumerProtocolSubscription {
        /// The subscribed topics.
        pub topics: Vec<String> [0..],
        /// Assignor-specific user data, or null.
        pub user_data: Option<Bytes> [0..],
        /// The partitions the member owns now (v1+).
        pub owned_partitions: Vec<ConsumerProtocolTopicPartition> [1..],
        /// The generation of the owned partitions, or -1 (v2+).
        pub generation_id: i32 [2..] default(-1),
        /// The member's rack, or null (v3+).
        pub rack_id: Option<String> [3..],
    }
}

wire_struct! {
    /// A member's assignment, sent in SyncGroup. Versions 0–3.
    pub struct ConsumerProtocolAssignment {
        /// The assigned partitions.
        pub assigned_partitions: Vec<ConsumerProtocolTopicPartition> [0..],
        /// Assignor-specific user data, or null.
        pub user_data: Option<Bytes> [0..],
    }
}

/// The highest version of both embedded structs this crate writes.
pub const CONSUMER_PROTOCOL_MAX_VERSION: i16 = 3;

fn encode_versioned<T: Wire>(value: &T, version: i16) -> Result<Bytes, EncodeError> {
    if !(0..=CONSUMER_PROTOCOL_MAX_VERSION).contains(&version) {
        // The embedded protocol has no API key; -1 marks that in the error.
        return Err(EncodeError::UnsupportedVersion {
            api_key: -1,
            version,
        });
    }
    let mut buf = BytesMut::new();
    buf.put_i16(version);
    value.encode(&mut buf, version, false);
    Ok(buf.freeze())
}

fn decode_versioned<T: Wire>(bytes: Bytes) -> Result<(i16, T), DecodeError> {
    let mut d = Decoder::new(bytes);
    let version = d.i16()?;
    if version < 0 {
        return Err(DecodeError::UnsupportedVersion {
            api_key: -1,
            version,
        });
    }
    let read_as = version.min(CONSUMER_PROTOCOL_MAX_VERSION);
    let value = T::decode(&mut d, read_as, false)?;
    if version <= CONSUMER_PROTOCOL_MAX_VERSION {
        d.finish()?;
    }
    Ok((version, value))
}

impl ConsumerProtocolSubscription {
    /// Encodes the version prefix and the fields of `version` (0–3).
    pub fn encode_versioned(&self, version: i16) -> Result<Bytes, EncodeError> {
        encode_versioned(self, version)
    }

    /// Decodes a version-prefixed subscription; returns the version written by the
    /// sender with the value. Versions above 3 are read as v3 and their extra bytes
    /// ignored.
    pub fn decode_versioned(bytes: Bytes) -> Result<(i16, Self), DecodeError> {
        decode_versioned(bytes)
    }
}

impl ConsumerProtocolAssignment {
    /// Encodes the version prefix and the fields of `version` (0–3).
    pub fn encode_versioned(&self, version: i16) -> Result<Bytes, EncodeError> {
        encode_versioned(self, version)
    }

    /// Decodes a version-prefixed assignment; returns the version written by the
    /// sender with the value. Empty input (what SyncGroup returns to a member that got
    /// no assignment) is an empty v0 assignment. Versions above 3 are read as v3 and
    /// their extra bytes ignored.
    pub fn decode_versioned(bytes: Bytes) -> Result<(i16, Self), DecodeError> {
        if bytes.is_empty() {
            return Ok((0, Self::default()));
        }
        decode_versioned(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Random, Rng};

    #[test]
    fn round_trip_every_version() {
        let seed = 0x5eed_c0de;
        let mut rng = Rng::new(seed);
        for version in 0..=CONSUMER_PROTOCOL_MAX_VERSION {
            for _ in 0..16 {
                let s = ConsumerProtocolSubscription::random(&mut rng, version);
                let bytes = s.encode_versioned(version).unwrap();
                let (v, back) = ConsumerProtocolSubscription::decode_versioned(bytes).unwrap();
                assert_eq!((v, &back), (version, &s), "seed {seed} v{version}");

                let a = ConsumerProtocolAssignment::random(&mut rng, version);
                let bytes = a.encode_versioned(version).unwrap();
                let (v, back) = ConsumerProtocolAssignment::decode_versioned(bytes).unwrap();
                assert_eq!((v, &back), (version, &a), "seed {seed} v{version}");
            }
        }
    }

    #[test]
    fn golden_subscription_v0() {
        let s = ConsumerProtocolSubscription {
            topics: vec!["t".into()],
            ..Default::default()
        };
        let bytes = s.encode_versioned(0).unwrap();
        #[rustfmt::skip]
        let golden = [
            0x00, 0x00,             // version 0
            0x00, 0x00, 0x00, 0x01, // topics: 1
            0x00, 0x01, b't',       //   "t"
            0xff, 0xff, 0xff, 0xff, // user_data: null
        ];
        assert_eq!(&bytes[..], &golden);
    }

    #[test]
    fn newer_versions_are_read_as_v3() {
        let s = ConsumerProtocolSubscription {
            topics: vec!["a".into()],
            generation_id: 4,
            rack_id: Some("r".into()),
            ..Default::default()
        };
        let bytes = s.encode_versioned(3).unwrap();
        let mut newer = BytesMut::from(&bytes[..]);
        newer[1] = 7;
        newer.extend_from_slice(&[1, 2, 3]);
        let (v, back) = ConsumerProtocolSubscription::decode_versioned(newer.freeze()).unwrap();
        assert_eq!(v, 7);
        assert_eq!(back, s);
    }

    #[test]
    fn empty_assignment_and_bad_input() {
        let (v, a) = ConsumerProtocolAssignment::decode_versioned(Bytes::new()).unwrap();
        assert_eq!((v, a), (0, ConsumerProtocolAssignment::default()));
        assert!(ConsumerProtocolSubscription::decode_versioned(Bytes::new()).is_err());
        assert!(
            ConsumerProtocolAssignment::decode_versioned(Bytes::from_static(&[0xff, 0xff]))
                .is_err()
        );
        assert!(ConsumerProtocolAssignment::default()
            .encode_versioned(4)
            .is_err());
        // A lying array count fails without allocating.
        let lying = Bytes::from_static(&[0, 0, 0x7f, 0xff, 0xff, 0xff]);
        assert!(ConsumerProtocolAssignment::decode_versioned(lying).is_err());
    }
}
