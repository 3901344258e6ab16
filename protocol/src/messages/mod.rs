//! Kafka request and response bodies, each written once and usable both ways.
//!
//! One module per API key. Field names are the snake_case of the names in Apache
//! Kafka's message JSON specs; each field's doc says in which versions it exists.

use bytes::{Bytes, BytesMut};

use crate::error::{DecodeError, EncodeError};
use crate::primitives::{Decoder, Encoder, Wire};

pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod alter_partition;
pub mod alter_partition_reassignments;
pub mod alter_user_scram_credentials;
pub mod api_versions;
pub mod broker_heartbeat;
pub mod broker_registration;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod consumer_protocol;
pub mod create_acls;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_acls;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_acls;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_transactions;
pub mod describe_user_scram_credentials;
pub mod elect_leaders;
pub mod end_txn;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod sync_group;
pub mod txn_offset_commit;
pub mod write_txn_markers;

pub use add_offsets_to_txn::*;
pub use add_partitions_to_txn::*;
pub use alter_partition::*;
pub use alter_partition_reassignments::*;
pub use alter_user_scram_credentials::*;
pub use api_versions::*;
pub use broker_heartbeat::*;
pub use broker_registration::*;
pub use consumer_group_describe::*;
pub use consumer_group_heartbeat::*;
pub use consumer_protocol::*;
pub use create_acls::*;
pub use create_partitions::*;
pub use create_topics::*;
pub use delete_acls::*;
pub use delete_groups::*;
pub use delete_records::*;
pub use delete_topics::*;
pub use describe_acls::*;
pub use describe_cluster::*;
pub use describe_configs::*;
pub use describe_groups::*;
pub use describe_log_dirs::*;
pub use describe_producers::*;
pub use describe_transactions::*;
pub use describe_user_scram_credentials::*;
pub use elect_leaders::*;
pub use end_txn::*;
pub use fetch::*;
pub use find_coordinator::*;
pub use heartbeat::*;
pub use incremental_alter_configs::*;
pub use init_producer_id::*;
pub use join_group::*;
pub use leave_group::*;
pub use list_groups::*;
pub use list_offsets::*;
pub use list_partition_reassignments::*;
pub use list_transactions::*;
pub use metadata::*;
pub use offset_commit::*;
pub use offset_delete::*;
pub use offset_fetch::*;
pub use offset_for_leader_epoch::*;
pub use produce::*;
pub use sasl_authenticate::*;
pub use sasl_handshake::*;
pub use sync_group::*;
pub use txn_offset_commit::*;
pub use write_txn_markers::*;

/// A top-level request or response body.
pub trait Message: Wire + Default + Clone + std::fmt::Debug + PartialEq {
    /// The Kafka API key.
    const API_KEY: i16;
    /// Lowest version this implementation encodes and decodes.
    const MIN_VERSION: i16;
    /// Highest version this implementation encodes and decodes.
    const MAX_VERSION: i16;
    /// First flexible version (compact encodings, tagged fields); `i16::MAX` if none.
    const FIRST_FLEXIBLE: i16;

    /// Whether `version` is one this implementation handles.
    fn supports(version: i16) -> bool {
        (Self::MIN_VERSION..=Self::MAX_VERSION).contains(&version)
    }

    /// Whether `version` uses the flexible encoding.
    fn is_flexible(version: i16) -> bool {
        version >= Self::FIRST_FLEXIBLE
    }

    /// Appends the body in `version`.
    fn encode_body(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError> {
        if !Self::supports(version) {
            return Err(EncodeError::UnsupportedVersion {
                api_key: Self::API_KEY,
                version,
            });
        }
        self.encode(buf, version, Self::is_flexible(version));
        Ok(())
    }

    /// Appends the body in `version` to an [`Encoder`], which may keep large byte
    /// fields (the records of a Produce request or a Fetch response) out of line.
    fn encode_body_to(&self, out: &mut Encoder, version: i16) -> Result<(), EncodeError> {
        if !Self::supports(version) {
            return Err(EncodeError::UnsupportedVersion {
                api_key: Self::API_KEY,
                version,
            });
        }
        self.encode_to(out, version, Self::is_flexible(version));
        Ok(())
    }

    /// Decodes a whole body in `version`; trailing bytes are an error.
    fn decode_body(body: Bytes, version: i16) -> Result<Self, DecodeError> {
        if !Self::supports(version) {
            return Err(DecodeError::UnsupportedVersion {
                api_key: Self::API_KEY,
                version,
            });
        }
        let mut d = Decoder::new(body);
        let msg = Self::decode(&mut d, version, Self::is_flexible(version))?;
        d.finish()?;
        Ok(msg)
    }
}

/// A request body and the response type it expects.
pub trait Request: Message {
    /// The response body type.
    type Response: Message;

    /// The request header version used with this request `version`.
    fn request_header_version(version: i16) -> i16 {
        if Self::is_flexible(version) {
            2
        } else {
            1
        }
    }

    /// The response header version used with this request `version`.
    ///
    /// ApiVersions responses always use header v0 so that a client can parse them
    /// whatever version the broker supports (KIP-511).
    fn response_header_version(version: i16) -> i16 {
        if Self::is_flexible(version) && Self::API_KEY != 18 {
            1
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    //! Every message round-trips in every supported version, and arbitrary bytes
    //! decode to an error or a value, never a panic.

    use super::*;
    use crate::testing::{Random, Rng};
    use proptest::prelude::*;

    fn round_trip<M: Message + Random>(seed: u64) {
        let mut rng = Rng::new(seed);
        for version in M::MIN_VERSION..=M::MAX_VERSION {
            for _ in 0..4 {
                let msg = M::random(&mut rng, version);
                let mut buf = BytesMut::new();
                msg.encode_body(&mut buf, version).unwrap();
                let back = M::decode_body(buf.clone().freeze(), version).unwrap_or_else(|e| {
                    panic!(
                        "seed {seed}: api {} v{version} failed to decode: {e}",
                        M::API_KEY
                    )
                });
                assert_eq!(back, msg, "seed {seed}: api {} v{version}", M::API_KEY);
                for min_segment in [1, 3, 64] {
                    let mut enc = Encoder::segmented(BytesMut::from(&b"pre"[..]), min_segment);
                    msg.encode_body_to(&mut enc, version).unwrap();
                    assert_eq!(enc.len(), 3 + buf.len());
                    let segments = enc.finish();
                    assert!(segments.iter().all(|s| !s.is_empty()));
                    assert_eq!(
                        &segments.concat()[3..],
                        &buf[..],
                        "seed {seed}: api {} v{version}: segmented encoding (min {min_segment})",
                        M::API_KEY
                    );
                }
            }
        }
    }

    fn never_panics<M: Message>(bytes: &[u8]) {
        for version in M::MIN_VERSION..=M::MAX_VERSION {
            let _ = M::decode_body(Bytes::copy_from_slice(bytes), version);
        }
    }

    macro_rules! all_messages {
        ($f:ident, $arg:expr) => {
            $f::<ApiVersionsRequest>($arg);
            $f::<ApiVersionsResponse>($arg);
            $f::<MetadataRequest>($arg);
            $f::<MetadataResponse>($arg);
            $f::<ProduceRequest>($arg);
            $f::<ProduceResponse>($arg);
            $f::<FetchRequest>($arg);
            $f::<FetchResponse>($arg);
            $f::<ListOffsetsRequest>($arg);
            $f::<ListOffsetsResponse>($arg);
            $f::<CreateTopicsRequest>($arg);
            $f::<CreateTopicsResponse>($arg);
            $f::<DeleteTopicsRequest>($arg);
            $f::<DeleteTopicsResponse>($arg);
            $f::<InitProducerIdRequest>($arg);
            $f::<InitProducerIdResponse>($arg);
            $f::<OffsetForLeaderEpochRequest>($arg);
            $f::<OffsetForLeaderEpochResponse>($arg);
            $f::<BrokerRegistrationRequest>($arg);
            $f::<BrokerRegistrationResponse>($arg);
            $f::<BrokerHeartbeatRequest>($arg);
            $f::<BrokerHeartbeatResponse>($arg);
            $f::<AlterPartitionRequest>($arg);
            $f::<AlterPartitionResponse>($arg);
            $f::<FindCoordinatorRequest>($arg);
            $f::<FindCoordinatorResponse>($arg);
            $f::<JoinGroupRequest>($arg);
            $f::<JoinGroupResponse>($arg);
            $f::<SyncGroupRequest>($arg);
            $f::<SyncGroupResponse>($arg);
            $f::<HeartbeatRequest>($arg);
            $f::<HeartbeatResponse>($arg);
            $f::<LeaveGroupRequest>($arg);
            $f::<LeaveGroupResponse>($arg);
            $f::<OffsetCommitRequest>($arg);
            $f::<OffsetCommitResponse>($arg);
            $f::<OffsetFetchRequest>($arg);
            $f::<OffsetFetchResponse>($arg);
            $f::<DescribeGroupsRequest>($arg);
            $f::<DescribeGroupsResponse>($arg);
            $f::<ListGroupsRequest>($arg);
            $f::<ListGroupsResponse>($arg);
            $f::<DeleteGroupsRequest>($arg);
            $f::<DeleteGroupsResponse>($arg);
            $f::<OffsetDeleteRequest>($arg);
            $f::<OffsetDeleteResponse>($arg);
            $f::<DescribeConfigsRequest>($arg);
            $f::<DescribeConfigsResponse>($arg);
            $f::<DescribeClusterRequest>($arg);
            $f::<DescribeClusterResponse>($arg);
            $f::<SaslHandshakeRequest>($arg);
            $f::<SaslHandshakeResponse>($arg);
            $f::<SaslAuthenticateRequest>($arg);
            $f::<SaslAuthenticateResponse>($arg);
            $f::<DescribeAclsRequest>($arg);
            $f::<DescribeAclsResponse>($arg);
            $f::<CreateAclsRequest>($arg);
            $f::<CreateAclsResponse>($arg);
            $f::<DeleteAclsRequest>($arg);
            $f::<DeleteAclsResponse>($arg);
            $f::<DescribeUserScramCredentialsRequest>($arg);
            $f::<DescribeUserScramCredentialsResponse>($arg);
            $f::<AlterUserScramCredentialsRequest>($arg);
            $f::<AlterUserScramCredentialsResponse>($arg);
            $f::<AddPartitionsToTxnRequest>($arg);
            $f::<AddPartitionsToTxnResponse>($arg);
            $f::<AddOffsetsToTxnRequest>($arg);
            $f::<AddOffsetsToTxnResponse>($arg);
            $f::<EndTxnRequest>($arg);
            $f::<EndTxnResponse>($arg);
            $f::<DescribeTransactionsRequest>($arg);
            $f::<DescribeTransactionsResponse>($arg);
            $f::<ListTransactionsRequest>($arg);
            $f::<ListTransactionsResponse>($arg);
            $f::<TxnOffsetCommitRequest>($arg);
            $f::<TxnOffsetCommitResponse>($arg);
            $f::<WriteTxnMarkersRequest>($arg);
            $f::<WriteTxnMarkersResponse>($arg);
            $f::<DescribeProducersRequest>($arg);
            $f::<DescribeProducersResponse>($arg);
            $f::<ConsumerGroupHeartbeatRequest>($arg);
            $f::<ConsumerGroupHeartbeatResponse>($arg);
            $f::<ConsumerGroupDescribeRequest>($arg);
            $f::<ConsumerGroupDescribeResponse>($arg);
            $f::<DeleteRecordsRequest>($arg);
            $f::<DeleteRecordsResponse>($arg);
            $f::<ElectLeadersRequest>($arg);
            $f::<ElectLeadersResponse>($arg);
            $f::<AlterPartitionReassignmentsRequest>($arg);
            $f::<AlterPartitionReassignmentsResponse>($arg);
            $f::<ListPartitionReassignmentsRequest>($arg);
            $f::<ListPartitionReassignmentsResponse>($arg);
            $f::<IncrementalAlterConfigsRequest>($arg);
            $f::<IncrementalAlterConfigsResponse>($arg);
            $f::<CreatePartitionsRequest>($arg);
            $f::<CreatePartitionsResponse>($arg);
            $f::<DescribeLogDirsRequest>($arg);
            $f::<DescribeLogDirsResponse>($arg);
        };
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn every_message_round_trips(seed in any::<u64>()) {
            all_messages!(round_trip, seed);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            all_messages!(never_panics, &bytes);
        }
    }

    /// Encodes `msg` in `version`, checks the bytes against `golden`, and checks that
    /// `golden` decodes back to `msg`.
    fn check_golden<M: Message>(msg: &M, version: i16, golden: &[u8]) {
        let mut buf = BytesMut::new();
        msg.encode_body(&mut buf, version).unwrap();
        assert_eq!(
            &buf[..],
            golden,
            "api {} v{version}: encoding differs from the hand-derived bytes",
            M::API_KEY
        );
        let back = M::decode_body(Bytes::copy_from_slice(golden), version).unwrap();
        assert_eq!(&back, msg, "api {} v{version}: decode", M::API_KEY);
    }

    /// The 8-byte body that made `Vec::with_capacity(0x7fffffff)` abort other decoders.
    const LYING_METADATA_BODY: [u8; 8] = [0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0];

    #[test]
    fn metadata_request_claiming_huge_topic_count_is_bad_length() {
        let err =
            MetadataRequest::decode_body(Bytes::from_static(&LYING_METADATA_BODY), 1).unwrap_err();
        assert!(
            matches!(
                err,
                DecodeError::BadLength {
                    length: 0x7fff_ffff,
                    remaining: 4,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn metadata_frame_claiming_huge_topic_count_is_bad_length_in_every_version() {
        use crate::frame::FrameCodec;
        use crate::header::RequestHeader;

        for version in MetadataRequest::MIN_VERSION..=MetadataRequest::MAX_VERSION {
            let header_version = MetadataRequest::request_header_version(version);
            let header = RequestHeader {
                api_key: MetadataRequest::API_KEY,
                api_version: version,
                correlation_id: 7,
                client_id: Some("x".into()),
            };
            let mut body = BytesMut::new();
            header.encode(&mut body, header_version);
            body.extend_from_slice(&LYING_METADATA_BODY);
            let codec = FrameCodec::default();
            let mut stream = BytesMut::new();
            codec.encode(&body, &mut stream);

            let frame = codec.decode(&mut stream).unwrap().unwrap();
            let mut d = Decoder::new(frame);
            let got = RequestHeader::decode(&mut d, header_version).unwrap();
            assert_eq!(got.api_version, version);
            let err = MetadataRequest::decode_body(d.take_rest(), version).unwrap_err();
            assert!(
                matches!(err, DecodeError::BadLength { .. }),
                "v{version}: {err:?}"
            );
        }
    }

    #[test]
    fn golden_consumer_group_heartbeat_response_v0_nullable_assignment() {
        let mut msg = ConsumerGroupHeartbeatResponse {
            member_epoch: 3,
            heartbeat_interval_ms: 5000,
            ..Default::default()
        };
        #[rustfmt::skip]
        let null_assignment = [
            0, 0, 0, 0,             // throttle_time_ms
            0, 0,                   // error_code
            0x00,                   // error_message: null
            0x00,                   // member_id: null
            0, 0, 0, 3,             // member_epoch
            0, 0, 0x13, 0x88,       // heartbeat_interval_ms 5000
            0xff,                   // assignment: null (int8 -1)
            0x00,                   // no tagged fields
        ];
        check_golden(&msg, 0, &null_assignment);
        msg.assignment = Some(ConsumerGroupHeartbeatAssignment {
            topic_partitions: vec![ConsumerGroupHeartbeatTopicPartitions {
                topic_id: crate::primitives::Uuid::from_u64_pair(0, 7),
                partitions: vec![2],
            }],
        });
        #[rustfmt::skip]
        let with_assignment = [
            0, 0, 0, 0, 0, 0, 0x00, 0x00, 0, 0, 0, 3, 0, 0, 0x13, 0x88,
            0x01,                   // assignment present (int8 1)
            0x02,                   // topic_partitions: 1 element
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, // topic_id
            0x02, 0, 0, 0, 2,       // partitions [2]
            0x00,                   // topic entry tagged fields
            0x00,                   // assignment tagged fields
            0x00,                   // response tagged fields
        ];
        check_golden(&msg, 0, &with_assignment);
    }

    #[test]
    fn golden_offset_delete_v0() {
        let msg = OffsetDeleteRequest {
            group_id: "g".into(),
            topics: vec![OffsetDeleteRequestTopic {
                name: "t".into(),
                partitions: vec![OffsetDeleteRequestPartition { partition_index: 2 }],
            }],
        };
        #[rustfmt::skip]
        let golden = [
            0x00, 0x01, b'g',       // group id
            0x00, 0x00, 0x00, 0x01, // topics: 1
            0x00, 0x01, b't',       //   name
            0x00, 0x00, 0x00, 0x01, //   partitions: 1
            0x00, 0x00, 0x00, 0x02, //     index 2
        ];
        check_golden(&msg, 0, &golden);
        let msg = OffsetDeleteResponse {
            error_code: 0,
            throttle_time_ms: 0,
            topics: vec![OffsetDeleteResponseTopic {
                name: "t".into(),
                partitions: vec![OffsetDeleteResponsePartition {
                    partition_index: 2,
                    error_code: 86,
                }],
            }],
        };
        #[rustfmt::skip]
        let golden = [
            0x00, 0x00,             // error code (before throttle time, as in the spec)
            0x00, 0x00, 0x00, 0x00, // throttle time
            0x00, 0x00, 0x00, 0x01, // topics: 1
            0x00, 0x01, b't',       //   name
            0x00, 0x00, 0x00, 0x01, //   partitions: 1
            0x00, 0x00, 0x00, 0x02, //     index 2
            0x00, 0x56,             //     GROUP_SUBSCRIBED_TO_TOPIC
        ];
        check_golden(&msg, 0, &golden);
    }

    #[test]
    fn golden_api_versions_request_v3() {
        let msg = ApiVersionsRequest {
            client_software_name: "baton".into(),
            client_software_version: "0.1".into(),
        };
        #[rustfmt::skip]
        let golden = [
            0x06, b'b', b'a', b't', b'o', b'n', // compact string: len 5 + 1
            0x04, b'0', b'.', b'1',             // compact string: len 3 + 1
            0x00,                               // no tagged fields
        ];
        check_golden(&msg, 3, &golden);
    }

    #[test]
    fn golden_create_acls_request_v1_and_v2() {
        let msg = CreateAclsRequest {
            creations: vec![AclCreation {
                resource_type: 2,
                resource_name: "t".into(),
                resource_pattern_type: 4,
                principal: "User:a".into(),
                host: "*".into(),
                operation: 3,
                permission_type: 3,
            }],
        };
        #[rustfmt::skip]
        let v1 = [
            0, 0, 0, 1,                      // one creation
            2,                               // topic
            0, 1, b't',                      // name
            4,                               // prefixed
            0, 6, b'U', b's', b'e', b'r', b':', b'a',
            0, 1, b'*',
            3, 3,                            // read, allow
        ];
        check_golden(&msg, 1, &v1);
        #[rustfmt::skip]
        let v2 = [
            2,                               // compact array: 1 + 1
            2,
            2, b't',
            4,
            7, b'U', b's', b'e', b'r', b':', b'a',
            2, b'*',
            3, 3,
            0,                               // the creation's tagged fields
            0,                               // the request's tagged fields
        ];
        check_golden(&msg, 2, &v2);
    }

    fn one_partition_produce(
        transactional_id: Option<&str>,
        acks: i16,
        timeout_ms: i32,
    ) -> ProduceRequest {
        ProduceRequest {
            transactional_id: transactional_id.map(str::to_owned),
            acks,
            timeout_ms,
            topic_data: vec![TopicProduceData {
                name: "t".into(),
                partition_data: vec![PartitionProduceData {
                    index: 0,
                    records: Some(Bytes::from_static(&[1, 2, 3]).into()),
                }],
            }],
        }
    }

    #[test]
    fn golden_produce_request_v3() {
        let msg = one_partition_produce(None, -1, 30_000);
        #[rustfmt::skip]
        let golden = [
            0xff, 0xff,             // transactional_id: null (int16 -1)
            0xff, 0xff,             // acks: -1
            0x00, 0x00, 0x75, 0x30, // timeout_ms: 30000
            0x00, 0x00, 0x00, 0x01, // topic_data: 1 element
            0x00, 0x01, b't',       //   name
            0x00, 0x00, 0x00, 0x01, //   partition_data: 1 element
            0x00, 0x00, 0x00, 0x00, //     index 0
            0x00, 0x00, 0x00, 0x03, 1, 2, 3, // records: int32 length + bytes
        ];
        check_golden(&msg, 3, &golden);
    }

    #[test]
    fn golden_produce_request_v9() {
        let msg = one_partition_produce(Some("tx"), 1, 1000);
        #[rustfmt::skip]
        let golden = [
            0x03, b't', b'x',       // transactional_id: compact nullable string
            0x00, 0x01,             // acks: 1
            0x00, 0x00, 0x03, 0xe8, // timeout_ms: 1000
            0x02,                   // topic_data: compact array of 1
            0x02, b't',             //   name
            0x02,                   //   partition_data: compact array of 1
            0x00, 0x00, 0x00, 0x00, //     index 0
            0x04, 1, 2, 3,          //     records: compact bytes, len 3 + 1
            0x00,                   //     partition tagged fields
            0x00,                   //   topic tagged fields
            0x00,                   // top-level tagged fields
        ];
        check_golden(&msg, 9, &golden);

        // Null records are a compact length of 0.
        let mut null_records = msg.clone();
        null_records.topic_data[0].partition_data[0].records = None;
        let mut golden = golden.to_vec();
        golden.splice(17..21, [0x00]);
        check_golden(&null_records, 9, &golden);
    }

    #[test]
    fn golden_produce_response_v10_leader_hints() {
        let msg = ProduceResponse {
            responses: vec![TopicProduceResponse {
                name: "t".into(),
                partition_responses: vec![PartitionProduceResponse {
                    index: 0,
                    error_code: 6,
                    base_offset: -1,
                    current_leader: ProduceResponseLeaderIdAndEpoch {
                        leader_id: 2,
                        leader_epoch: 7,
                    },
                    ..Default::default()
                }],
            }],
            throttle_time_ms: 0,
            node_endpoints: vec![ProduceResponseNodeEndpoint {
                node_id: 2,
                host: "h".into(),
                port: 9092,
                rack: None,
            }],
        };
        #[rustfmt::skip]
        let golden = [
            0x02,                                           // responses: 1
            0x02, b't',                                     //   name
            0x02,                                           //   partition_responses: 1
            0x00, 0x00, 0x00, 0x00,                         //     index
            0x00, 0x06,                                     //     error_code
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, //     base_offset -1
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, //     log_append_time_ms -1
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, //     log_start_offset -1
            0x01,                                           //     record_errors: empty
            0x00,                                           //     error_message: null
            0x01,                                           //     1 tagged field:
            0x00, 0x09,                                     //       tag 0, 9 bytes
            0x00, 0x00, 0x00, 0x02,                         //       leader_id 2
            0x00, 0x00, 0x00, 0x07,                         //       leader_epoch 7
            0x00,                                           //       its tagged fields
            0x00,                                           //   topic tagged fields
            0x00, 0x00, 0x00, 0x00,                         // throttle_time_ms
            0x01,                                           // 1 tagged field:
            0x00, 0x0d,                                     //   tag 0, 13 bytes
            0x02,                                           //   node_endpoints: 1
            0x00, 0x00, 0x00, 0x02,                         //     node_id
            0x02, b'h',                                     //     host
            0x00, 0x00, 0x23, 0x84,                         //     port 9092
            0x00,                                           //     rack: null
            0x00,                                           //     tagged fields
        ];
        check_golden(&msg, 10, &golden);
    }

    #[test]
    fn golden_fetch_request_v4() {
        let msg = FetchRequest {
            replica_id: -1,
            max_wait_ms: 500,
            min_bytes: 1,
            max_bytes: 0x10_0000,
            isolation_level: 1,
            topics: vec![FetchTopic {
                topic: "t".into(),
                partitions: vec![FetchPartition {
                    partition: 2,
                    fetch_offset: 42,
                    partition_max_bytes: 65536,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        #[rustfmt::skip]
        let golden = [
            0xff, 0xff, 0xff, 0xff, // replica_id -1
            0x00, 0x00, 0x01, 0xf4, // max_wait_ms 500
            0x00, 0x00, 0x00, 0x01, // min_bytes 1
            0x00, 0x10, 0x00, 0x00, // max_bytes 1 MiB
            0x01,                   // isolation_level READ_COMMITTED
            0x00, 0x00, 0x00, 0x01, // topics: 1
            0x00, 0x01, b't',       //   topic
            0x00, 0x00, 0x00, 0x01, //   partitions: 1
            0x00, 0x00, 0x00, 0x02, //     partition 2
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a, // fetch_offset 42
            0x00, 0x01, 0x00, 0x00, //     partition_max_bytes 65536
        ];
        check_golden(&msg, 4, &golden);
    }

    #[test]
    fn golden_fetch_request_v12() {
        let msg = FetchRequest {
            cluster_id: Some("c".into()),
            replica_id: -1,
            max_wait_ms: 500,
            min_bytes: 1,
            topics: vec![FetchTopic {
                topic: "t".into(),
                partitions: vec![FetchPartition {
                    partition: 0,
                    current_leader_epoch: 5,
                    fetch_offset: 10,
                    last_fetched_epoch: 4,
                    partition_max_bytes: 1024,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        #[rustfmt::skip]
        let golden = [
            0xff, 0xff, 0xff, 0xff, // replica_id -1
            0x00, 0x00, 0x01, 0xf4, // max_wait_ms 500
            0x00, 0x00, 0x00, 0x01, // min_bytes 1
            0x7f, 0xff, 0xff, 0xff, // max_bytes default
            0x00,                   // isolation_level
            0x00, 0x00, 0x00, 0x00, // session_id 0
            0xff, 0xff, 0xff, 0xff, // session_epoch -1
            0x02,                   // topics: compact array of 1
            0x02, b't',             //   topic
            0x02,                   //   partitions: 1
            0x00, 0x00, 0x00, 0x00, //     partition 0
            0x00, 0x00, 0x00, 0x05, //     current_leader_epoch 5
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, // fetch_offset 10
            0x00, 0x00, 0x00, 0x04, //     last_fetched_epoch 4
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // log_start_offset -1
            0x00, 0x00, 0x04, 0x00, //     partition_max_bytes 1024
            0x00,                   //     partition tagged fields
            0x00,                   //   topic tagged fields
            0x01,                   // forgotten_topics_data: empty compact array
            0x01,                   // rack_id: empty compact string
            0x01,                   // 1 tagged field:
            0x00, 0x02, 0x02, b'c', //   tag 0 (cluster_id), 2 bytes, "c"
        ];
        check_golden(&msg, 12, &golden);
    }

    #[test]
    fn golden_metadata_response_v9() {
        let msg = MetadataResponse {
            throttle_time_ms: 0,
            brokers: vec![MetadataResponseBroker {
                node_id: 1,
                host: "h".into(),
                port: 9092,
                rack: None,
            }],
            cluster_id: Some("c".into()),
            controller_id: 1,
            topics: vec![MetadataResponseTopic {
                error_code: 0,
                name: Some("t".into()),
                is_internal: false,
                partitions: vec![MetadataResponsePartition {
                    error_code: 0,
                    partition_index: 0,
                    leader_id: 1,
                    leader_epoch: 3,
                    replica_nodes: vec![1],
                    isr_nodes: vec![1],
                    offline_replicas: vec![],
                }],
                ..Default::default()
            }],
            cluster_authorized_operations: i32::MIN,
        };
        #[rustfmt::skip]
        let golden = [
            0x00, 0x00, 0x00, 0x00, // throttle_time_ms
            0x02,                   // brokers: 1
            0x00, 0x00, 0x00, 0x01, //   node_id
            0x02, b'h',             //   host
            0x00, 0x00, 0x23, 0x84, //   port 9092
            0x00,                   //   rack: null
            0x00,                   //   tagged fields
            0x02, b'c',             // cluster_id
            0x00, 0x00, 0x00, 0x01, // controller_id
            0x02,                   // topics: 1
            0x00, 0x00,             //   error_code
            0x02, b't',             //   name
            0x00,                   //   is_internal
            0x02,                   //   partitions: 1
            0x00, 0x00,             //     error_code
            0x00, 0x00, 0x00, 0x00, //     partition_index
            0x00, 0x00, 0x00, 0x01, //     leader_id
            0x00, 0x00, 0x00, 0x03, //     leader_epoch
            0x02, 0x00, 0x00, 0x00, 0x01, // replica_nodes [1]
            0x02, 0x00, 0x00, 0x00, 0x01, // isr_nodes [1]
            0x01,                   //     offline_replicas []
            0x00,                   //     tagged fields
            0x80, 0x00, 0x00, 0x00, //   topic_authorized_operations: i32::MIN
            0x00,                   //   tagged fields
            0x80, 0x00, 0x00, 0x00, // cluster_authorized_operations: i32::MIN
            0x00,                   // tagged fields
        ];
        check_golden(&msg, 9, &golden);
    }

    #[test]
    fn unknown_tagged_fields_are_skipped() {
        // ApiVersionsRequest v3 with two tags nobody defines (5 and 9).
        #[rustfmt::skip]
        let body = [
            0x02, b'a',
            0x02, b'b',
            0x02,                   // 2 tagged fields
            0x05, 0x03, 0xaa, 0xbb, 0xcc, // tag 5, 3 bytes
            0x09, 0x00,             // tag 9, empty
        ];
        let got = ApiVersionsRequest::decode_body(Bytes::copy_from_slice(&body), 3).unwrap();
        assert_eq!(got.client_software_name, "a");
        assert_eq!(got.client_software_version, "b");

        // A Fetch response partition: known tag 1 (current_leader) between unknown
        // tags 7 and 1000 (a two-byte uvarint tag).
        #[rustfmt::skip]
        let body = [
            0x00, 0x00, 0x00, 0x00, // throttle_time_ms
            0x00, 0x00,             // error_code
            0x00, 0x00, 0x00, 0x00, // session_id
            0x02,                   // responses: 1
            0x02, b't',             //   topic
            0x02,                   //   partitions: 1
            0x00, 0x00, 0x00, 0x01, //     partition_index
            0x00, 0x00,             //     error_code
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, // high_watermark
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // last_stable_offset
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // log_start_offset
            0x00,                   //     aborted_transactions: null
            0xff, 0xff, 0xff, 0xff, //     preferred_read_replica
            0x00,                   //     records: null
            0x03,                   //     3 tagged fields:
            0x01, 0x09, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x08, 0x00, // tag 1
            0x07, 0x02, 0x12, 0x34, //       tag 7, unknown
            0xe8, 0x07, 0x01, 0xff, //       tag 1000, unknown
            0x00,                   //   topic tagged fields
            0x00,                   // tagged fields
        ];
        let got = FetchResponse::decode_body(Bytes::copy_from_slice(&body), 12).unwrap();
        let p = &got.responses[0].partitions[0];
        assert_eq!(p.partition_index, 1);
        assert_eq!(p.high_watermark, 5);
        assert_eq!(
            p.current_leader,
            FetchResponseLeaderIdAndEpoch {
                leader_id: 3,
                leader_epoch: 8
            }
        );
        assert_eq!(p.diverging_epoch, FetchResponseEpochEndOffset::default());
        assert_eq!(p.records, None);
    }

    #[test]
    fn tagged_fields_equal_to_default_are_not_written() {
        let msg = FetchResponsePartitionData::default();
        let mut with_default = BytesMut::new();
        msg.encode(&mut with_default, 12, true);
        let mut with_leader = BytesMut::new();
        let hinted = FetchResponsePartitionData {
            current_leader: FetchResponseLeaderIdAndEpoch {
                leader_id: 1,
                leader_epoch: 2,
            },
            ..msg
        };
        hinted.encode(&mut with_leader, 12, true);
        assert_eq!(with_default.last(), Some(&0x00), "empty tagged section");
        // tag, size, 4 + 4 struct bytes and its own empty tagged section.
        assert_eq!(with_leader.len(), with_default.len() + 11);
    }

    #[test]
    fn scram_credential_admin_golden_bytes() {
        let alter = AlterUserScramCredentialsRequest {
            deletions: vec![ScramCredentialDeletion {
                name: "a".into(),
                mechanism: 1,
            }],
            upsertions: vec![ScramCredentialUpsertion {
                name: "b".into(),
                mechanism: 2,
                iterations: 4096,
                salt: Bytes::from_static(&[1, 2]),
                salted_password: RedactedBytes(Bytes::from_static(&[3])),
            }],
        };
        let golden = [
            0x02, // one deletion (compact array)
            0x02, b'a', 0x01, 0x00, // name, mechanism, no tags
            0x02, // one upsertion
            0x02, b'b', 0x02, // name, mechanism
            0x00, 0x00, 0x10, 0x00, // iterations
            0x03, 1, 2, // salt (compact bytes)
            0x02, 3,    // salted password
            0x00, // no tags in the upsertion
            0x00, // no tags in the request
        ];
        check_golden(&alter, 0, &golden);
        assert!(format!("{alter:?}").contains("RedactedBytes(<1 bytes>)"));
        let describe_all = DescribeUserScramCredentialsRequest { users: None };
        check_golden(&describe_all, 0, &[0x00, 0x00]);
        let described = DescribeUserScramCredentialsResponse {
            results: vec![DescribeUserScramCredentialsResult {
                user: "b".into(),
                credential_infos: vec![CredentialInfo {
                    mechanism: 2,
                    iterations: 8192,
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let golden = [
            0, 0, 0, 0, // throttle
            0, 0,    // error code
            0x00, // null error message
            0x02, // one result
            0x02, b'b', 0, 0, 0x00, // user, error code, null message
            0x02, 0x02, 0x00, 0x00, 0x20, 0x00, 0x00, // one credential info
            0x00, // no tags in the result
            0x00, // no tags in the response
        ];
        check_golden(&described, 0, &golden);
    }

    /// DeleteRecords v0 and v2 (flexible) against bytes laid out from the spec.
    #[test]
    fn delete_records_golden() {
        let msg = DeleteRecordsRequest {
            topics: vec![DeleteRecordsTopic {
                name: "t".into(),
                partitions: vec![DeleteRecordsPartition {
                    partition_index: 1,
                    offset: -1,
                }],
            }],
            timeout_ms: 500,
        };
        #[rustfmt::skip]
        let v0 = [
            0, 0, 0, 1,                      // one topic
            0, 1, b't',
            0, 0, 0, 1,                      // one partition
            0, 0, 0, 1,
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // offset -1: the HW
            0, 0, 0x01, 0xf4,                // timeout 500 ms
        ];
        check_golden(&msg, 0, &v0);
        #[rustfmt::skip]
        let v2 = [
            2,                               // compact array: 1 + 1
            2, b't',
            2,
            0, 0, 0, 1,
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0,                               // the partition's tagged fields
            0,                               // the topic's tagged fields
            0, 0, 0x01, 0xf4,
            0,                               // the request's tagged fields
        ];
        check_golden(&msg, 2, &v2);
    }

    /// ElectLeaders v1 (election type, null partitions: all) against bytes laid out
    /// from the spec.
    #[test]
    fn elect_leaders_golden() {
        let msg = ElectLeadersRequest {
            election_type: ELECTION_UNCLEAN,
            topic_partitions: None,
            timeout_ms: 500,
        };
        #[rustfmt::skip]
        let v1 = [
            1,                               // unclean
            0xff, 0xff, 0xff, 0xff,          // null array: every partition
            0, 0, 0x01, 0xf4,                // timeout 500 ms
        ];
        check_golden(&msg, 1, &v1);
    }

    /// AlterPartitionReassignments v0: a target and a cancellation (null replicas).
    #[test]
    fn alter_partition_reassignments_golden() {
        let msg = AlterPartitionReassignmentsRequest {
            timeout_ms: 500,
            topics: vec![ReassignableTopic {
                name: "t".into(),
                partitions: vec![
                    ReassignablePartition {
                        partition_index: 0,
                        replicas: Some(vec![2, 3]),
                    },
                    ReassignablePartition {
                        partition_index: 1,
                        replicas: None,
                    },
                ],
            }],
        };
        #[rustfmt::skip]
        let v0 = [
            0, 0, 0x01, 0xf4,                // timeout 500 ms
            2,                               // one topic
            2, b't',
            3,                               // two partitions
            0, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 3, 0, // partition 0 -> [2, 3]
            0, 0, 0, 1, 0, 0,                // partition 1: null, cancel
            0,                               // the topic's tagged fields
            0,                               // the request's tagged fields
        ];
        check_golden(&msg, 0, &v0);
    }
}
