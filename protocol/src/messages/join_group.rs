//! JoinGroup (API key 11): a member joins (or rejoins) a classic consumer group.
//!
//! Supported versions 0–9, flexible from 6. Version history, from Apache Kafka's spec:
//! v1 adds the rebalance timeout; v2 adds throttle time; v3 is unchanged; v4 makes the
//! first join answer MEMBER_ID_REQUIRED with a member id to rejoin with (KIP-394);
//! v5 adds `group_instance_id` for static membership (KIP-345); v6 is the first
//! flexible version; v7 adds the protocol type to the response (KIP-559); v8 adds the
//! join reason (KIP-800); v9 adds `skip_assignment` (KIP-814). Kafka 4.0 removed v0–1
//! (KIP-896).

use bytes::Bytes;

use crate::{impl_message, wire_struct};

wire_struct! {
    /// One assignment protocol a joining member supports.
    pub struct JoinGroupRequestProtocol {
        /// The protocol name (for consumers, the assignor name).
        pub name: String [0..],
        /// The protocol metadata (for consumers, a `ConsumerProtocolSubscription`).
        pub metadata: Bytes [0..],
    }
}

wire_struct! {
    /// Joins a group. Versions 0–9; flexible from 6.
    pub struct JoinGroupRequest {
        /// The group id.
        pub group_id: String [0..],
        /// The session timeout in ms.
        pub session_timeout_ms: i32 [0..],
        /// The rebalance timeout in ms, -1 if absent (v1+).
        pub rebalance_timeout_ms: i32 [1..] default(-1),
        /// The member id assigned by the coordinator, empty on a first join.
        pub member_id: String [0..],
        /// The static instance id, or null (v5+).
        pub group_instance_id: Option<String> [5..],
        /// The protocol type, `consumer` for consumers.
        pub protocol_type: String [0..],
        /// The protocols the member supports, in preference order.
        pub protocols: Vec<JoinGroupRequestProtocol> [0..],
        /// Why the member (re)joins, or null (v8+).
        pub reason: Option<String> [8..],
    }
}

wire_struct! {
    /// One member of the group, as told to the leader.
    pub struct JoinGroupResponseMember {
        /// The member id.
        pub member_id: String [0..],
        /// The member's static instance id, or null (v5+).
        pub group_instance_id: Option<String> [5..],
        /// The member's metadata for the selected protocol.
        pub metadata: Bytes [0..],
    }
}

wire_struct! {
    /// The result of a join. Versions 0–9; flexible from 6.
    pub struct JoinGroupResponse {
        /// Throttle time in ms (v2+).
        pub throttle_time_ms: i32 [2..],
        /// The error code, or 0.
        pub error_code: i16 [0..],
        /// The generation id, -1 on error.
        pub generation_id: i32 [0..] default(-1),
        /// The protocol type, or null (v7+).
        pub protocol_type: Option<String> [7..],
        /// The protocol selected by the coordinator (nullable from v7).
        pub protocol_name: Option<String> [0..],
        /// The leader's member id.
        pub leader: String [0..],
        /// Whether the leader must skip running the assignment (v9+).
        pub skip_assignment: bool [9..],
        /// The member id assigned by the coordinator.
        pub member_id: String [0..],
        /// The members with their metadata; only the leader receives them.
        pub members: Vec<JoinGroupResponseMember> [0..],
    }
}

impl_message!(
    JoinGroupRequest,
    key = 11,
    versions = 0..=9,
    flexible = 6,
    response = JoinGroupResponse
);
impl_message!(JoinGroupResponse, key = 11, versions = 0..=9, flexible = 6);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::Message;
    use bytes::BytesMut;

    #[test]
    fn golden_join_group_request_v1_and_v6() {
        let msg = JoinGroupRequest {
            group_id: "g".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 300_000,
            member_id: String::new(),
            group_instance_id: None,
            protocol_type: "consumer".into(),
            protocols: vec![JoinGroupRequestProtocol {
                name: "range".into(),
                metadata: Bytes::from_static(&[9]),
            }],
            reason: None,
        };
        let mut buf = BytesMut::new();
        msg.encode_body(&mut buf, 1).unwrap();
        #[rustfmt::skip]
        let v1: &[u8] = &[
            0, 1, b'g',             // group_id
            0, 0, 0x27, 0x10,       // session_timeout_ms 10000
            0, 0x04, 0x93, 0xe0,    // rebalance_timeout_ms 300000
            0, 0,                   // member_id ""
            0, 8, b'c', b'o', b'n', b's', b'u', b'm', b'e', b'r',
            0, 0, 0, 1,             // protocols: 1
            0, 5, b'r', b'a', b'n', b'g', b'e',
            0, 0, 0, 1, 9,          // metadata
        ];
        assert_eq!(&buf[..], v1);
        let mut buf = BytesMut::new();
        msg.encode_body(&mut buf, 6).unwrap();
        #[rustfmt::skip]
        let v6: &[u8] = &[
            2, b'g',                // compact group_id
            0, 0, 0x27, 0x10,
            0, 0x04, 0x93, 0xe0,
            1,                      // member_id ""
            0,                      // group_instance_id null
            9, b'c', b'o', b'n', b's', b'u', b'm', b'e', b'r',
            2,                      // protocols: 1
            6, b'r', b'a', b'n', b'g', b'e',
            2, 9,                   // metadata
            0,                      // protocol tagged fields
            0,                      // tagged fields
        ];
        assert_eq!(&buf[..], v6);
        assert_eq!(
            JoinGroupRequest::decode_body(Bytes::from_static(v6), 6).unwrap(),
            msg
        );
    }
}
