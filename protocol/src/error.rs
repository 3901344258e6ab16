//! Errors of the protocol layer: decoding failures (typed, never panics) and
//! Kafka's numeric error codes as data.

/// Why a frame or message could not be decoded.
///
/// Every decode failure in `baton-protocol` is one of these; no input makes the
/// decoder panic or allocate more than the input can justify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ended before the value being decoded was complete.
    #[error("input ended early: needed {needed} more bytes for {what}")]
    Truncated {
        /// What was being decoded.
        what: &'static str,
        /// How many more bytes were needed.
        needed: usize,
    },
    /// A length or element count is negative (and not the null marker) or larger than
    /// the bytes that remain could hold.
    #[error("invalid length {length} for {what} with {remaining} bytes remaining")]
    BadLength {
        /// What was being decoded.
        what: &'static str,
        /// The length read from the input.
        length: i64,
        /// Bytes left in the input at that point.
        remaining: usize,
    },
    /// A variable-length integer ran over its maximum width.
    #[error("varint too long")]
    VarintOverflow,
    /// A string was not valid UTF-8.
    #[error("string is not valid UTF-8")]
    InvalidUtf8,
    /// A null was found where the protocol does not allow one.
    #[error("unexpected null for {0}")]
    UnexpectedNull(&'static str),
    /// The API version is outside the range this implementation supports.
    #[error("unsupported version {version} of api key {api_key}")]
    UnsupportedVersion {
        /// The API key.
        api_key: i16,
        /// The requested version.
        version: i16,
    },
    /// The API key is not one this implementation knows.
    #[error("unknown api key {0}")]
    UnknownApiKey(i16),
    /// A frame announced a size over the configured maximum.
    #[error("frame of {size} bytes exceeds the maximum of {max}")]
    FrameTooLarge {
        /// Size announced by the frame header.
        size: i64,
        /// Configured maximum.
        max: usize,
    },
    /// Bytes were left over after a complete message was decoded.
    #[error("{0} trailing bytes after message")]
    TrailingBytes(usize),
    /// A record batch or record is malformed.
    #[error("malformed record batch: {0}")]
    Record(&'static str),
    /// A record batch's CRC-32C does not match its contents.
    #[error("record batch CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// CRC stored in the batch header.
        stored: u32,
        /// CRC computed over the batch.
        computed: u32,
    },
    /// A record batch uses a compression codec this build cannot handle.
    #[error("unsupported compression codec {0}")]
    UnsupportedCompression(u8),
    /// A record batch uses a magic (format version) other than 2.
    #[error("unsupported record batch magic {0}")]
    UnsupportedMagic(i8),
    /// A compressed records section would decompress to more than the allowed size
    /// (see [`DecompressionLimits`](crate::record::DecompressionLimits)).
    #[error("{codec} records section decompresses to more than {limit} bytes")]
    DecompressedTooLarge {
        /// The batch's codec.
        codec: crate::codec::Compression,
        /// The limit that applied to this records section.
        limit: usize,
    },
    /// A compressed records section is not a complete, valid stream of its codec.
    #[error("corrupt {codec} records section: {detail}")]
    CorruptCompression {
        /// The batch's codec.
        codec: crate::codec::Compression,
        /// What the codec reported.
        detail: String,
    },
}

/// Why a message could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The version is outside the message's supported range.
    #[error("unsupported version {version} of api key {api_key}")]
    UnsupportedVersion {
        /// The API key.
        api_key: i16,
        /// The requested version.
        version: i16,
    },
    /// A value is too large for its wire representation.
    #[error("{0} too large to encode")]
    TooLarge(&'static str),
}

macro_rules! error_codes {
    ($( $(#[$m:meta])* $name:ident = $code:literal, $retriable:literal; )*) => {
        /// A Kafka protocol error code (see Apache Kafka's `Errors.java` for the list).
        ///
        /// Codes this crate does not know are kept as [`ErrorCode::Unknown`] with their
        /// numeric value, so nothing received is lost.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorCode {
            $( $(#[$m])* $name, )*
            /// A code not listed here; the value is kept.
            Unknown(i16),
        }

        impl ErrorCode {
            /// The numeric code on the wire.
            pub fn code(self) -> i16 {
                match self {
                    $( ErrorCode::$name => $code, )*
                    ErrorCode::Unknown(c) => c,
                }
            }

            /// The error for a numeric code from the wire.
            pub fn from_code(code: i16) -> Self {
                match code {
                    $( $code => ErrorCode::$name, )*
                    other => ErrorCode::Unknown(other),
                }
            }

            /// Whether the request may succeed if retried (Kafka's `RetriableException`).
            pub fn is_retriable(self) -> bool {
                match self {
                    $( ErrorCode::$name => $retriable, )*
                    ErrorCode::Unknown(_) => false,
                }
            }
        }
    };
}

error_codes! {
    /// The request succeeded.
    None = 0, false;
    /// The server experienced an unexpected error when processing the request.
    UnknownServerError = -1, false;
    /// The requested offset is not within the range of offsets maintained by the server.
    OffsetOutOfRange = 1, false;
    /// A message failed its CRC check, exceeds the valid size, has a null key on a compacted topic, or is otherwise corrupt.
    CorruptMessage = 2, true;
    /// This server does not host this topic-partition.
    UnknownTopicOrPartition = 3, true;
    /// The requested fetch size is invalid.
    InvalidFetchSize = 4, false;
    /// There is no leader for this topic-partition as we are in the middle of a leadership election.
    LeaderNotAvailable = 5, true;
    /// For requests intended only for the leader, this error indicates that the broker is not the current leader.
    NotLeaderOrFollower = 6, true;
    /// The request timed out.
    RequestTimedOut = 7, true;
    /// The broker is not available.
    BrokerNotAvailable = 8, false;
    /// The replica is not available for the requested topic-partition.
    ReplicaNotAvailable = 9, true;
    /// The request included a message larger than the max message size the server will accept.
    MessageTooLarge = 10, false;
    /// The controller moved to another broker.
    StaleControllerEpoch = 11, false;
    /// The metadata field of the offset request was too large.
    OffsetMetadataTooLarge = 12, false;
    /// The server disconnected before a response was received.
    NetworkException = 13, true;
    /// The coordinator is loading and hence can't process requests.
    CoordinatorLoadInProgress = 14, true;
    /// The coordinator is not available.
    CoordinatorNotAvailable = 15, true;
    /// This is not the correct coordinator.
    NotCoordinator = 16, true;
    /// The request attempted to perform an operation on an invalid topic.
    InvalidTopicException = 17, false;
    /// The request included message batch larger than the configured segment size on the server.
    RecordListTooLarge = 18, false;
    /// Messages are rejected since there are fewer in-sync replicas than required.
    NotEnoughReplicas = 19, true;
    /// Messages are written to the log, but to fewer in-sync replicas than required.
    NotEnoughReplicasAfterAppend = 20, true;
    /// Produce request specified an invalid value for required acks.
    InvalidRequiredAcks = 21, false;
    /// Specified group generation id is not valid.
    IllegalGeneration = 22, false;
    /// The group member's supported protocols are incompatible with those of existing members.
    InconsistentGroupProtocol = 23, false;
    /// The configured groupId is invalid.
    InvalidGroupId = 24, false;
    /// The coordinator is not aware of this member.
    UnknownMemberId = 25, false;
    /// The session timeout is not within the range allowed by the broker.
    InvalidSessionTimeout = 26, false;
    /// The group is rebalancing, so a rejoin is needed.
    RebalanceInProgress = 27, false;
    /// The committing offset data size is not valid.
    InvalidCommitOffsetSize = 28, false;
    /// Topic authorization failed.
    TopicAuthorizationFailed = 29, false;
    /// Group authorization failed.
    GroupAuthorizationFailed = 30, false;
    /// Cluster authorization failed.
    ClusterAuthorizationFailed = 31, false;
    /// The timestamp of the message is out of acceptable range.
    InvalidTimestamp = 32, false;
    /// The broker does not support the requested SASL mechanism.
    UnsupportedSaslMechanism = 33, false;
    /// Request is not valid given the current SASL state.
    IllegalSaslState = 34, false;
    /// The version of API is not supported.
    UnsupportedVersion = 35, false;
    /// Topic with this name already exists.
    TopicAlreadyExists = 36, false;
    /// Number of partitions is below 1.
    InvalidPartitions = 37, false;
    /// Replication factor is below 1 or larger than the number of available brokers.
    InvalidReplicationFactor = 38, false;
    /// Replica assignment is invalid.
    InvalidReplicaAssignment = 39, false;
    /// Configuration is invalid.
    InvalidConfig = 40, false;
    /// This is not the correct controller for this cluster.
    NotController = 41, true;
    /// This most likely occurs because of a request being malformed by the client library.
    InvalidRequest = 42, false;
    /// The message format version on the broker does not support the request.
    UnsupportedForMessageFormat = 43, false;
    /// Request parameters do not satisfy the configured policy.
    PolicyViolation = 44, false;
    /// The broker received an out of order sequence number.
    OutOfOrderSequenceNumber = 45, false;
    /// The broker received a duplicate sequence number.
    DuplicateSequenceNumber = 46, false;
    /// Producer attempted to produce with an old epoch.
    InvalidProducerEpoch = 47, false;
    /// The producer attempted a transactional operation in an invalid state.
    InvalidTxnState = 48, false;
    /// The producer attempted to use a producer id which is not currently assigned to its transactional id.
    InvalidProducerIdMapping = 49, false;
    /// The transaction timeout is larger than the maximum value allowed by the broker.
    InvalidTransactionTimeout = 50, false;
    /// The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing.
    ConcurrentTransactions = 51, true;
    /// Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current coordinator.
    TransactionCoordinatorFenced = 52, false;
    /// Transactional Id authorization failed.
    TransactionalIdAuthorizationFailed = 53, false;
    /// Security features are disabled.
    SecurityDisabled = 54, false;
    /// The broker did not attempt to execute this operation.
    OperationNotAttempted = 55, false;
    /// Disk error when trying to access log file on the disk.
    KafkaStorageError = 56, true;
    /// The user-specified log directory is not found in the broker config.
    LogDirNotFound = 57, false;
    /// SASL Authentication failed.
    SaslAuthenticationFailed = 58, false;
    /// The broker could not locate the producer metadata associated with the producer id.
    UnknownProducerId = 59, false;
    /// A partition reassignment is in progress.
    ReassignmentInProgress = 60, false;
    /// Delegation Token feature is not enabled.
    DelegationTokenAuthDisabled = 61, false;
    /// Delegation Token is not found on server.
    DelegationTokenNotFound = 62, false;
    /// Specified Principal is not valid Owner/Renewer.
    DelegationTokenOwnerMismatch = 63, false;
    /// Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels.
    DelegationTokenRequestNotAllowed = 64, false;
    /// Delegation Token authorization failed.
    DelegationTokenAuthorizationFailed = 65, false;
    /// Delegation Token is expired.
    DelegationTokenExpired = 66, false;
    /// Supplied principalType is not supported.
    InvalidPrincipalType = 67, false;
    /// The group is not empty.
    NonEmptyGroup = 68, false;
    /// The group id does not exist.
    GroupIdNotFound = 69, false;
    /// The fetch session ID was not found.
    FetchSessionIdNotFound = 70, true;
    /// The fetch session epoch is invalid.
    InvalidFetchSessionEpoch = 71, true;
    /// There is no listener on the leader broker that matches the listener on which metadata request was processed.
    ListenerNotFound = 72, true;
    /// Topic deletion is disabled.
    TopicDeletionDisabled = 73, false;
    /// The leader epoch in the request is older than the epoch on the broker.
    FencedLeaderEpoch = 74, true;
    /// The leader epoch in the request is newer than the epoch on the broker.
    UnknownLeaderEpoch = 75, true;
    /// The requesting client does not support the compression type of given partition.
    UnsupportedCompressionType = 76, false;
    /// Broker epoch has changed.
    StaleBrokerEpoch = 77, false;
    /// The leader high watermark has not caught up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing.
    OffsetNotAvailable = 78, true;
    /// The group member needs to have a valid member id before actually entering a consumer group.
    MemberIdRequired = 79, false;
    /// The preferred leader was not available.
    PreferredLeaderNotAvailable = 80, true;
    /// The consumer group has reached its max size.
    GroupMaxSizeReached = 81, false;
    /// The broker rejected this static consumer since another consumer with the same group.instance.id has registered with a different member.id.
    FencedInstanceId = 82, false;
    /// Eligible topic partition leaders are not available.
    EligibleLeadersNotAvailable = 83, true;
    /// Leader election not needed for topic partition.
    ElectionNotNeeded = 84, true;
    /// No partition reassignment is in progress.
    NoReassignmentInProgress = 85, false;
    /// Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it.
    GroupSubscribedToTopic = 86, false;
    /// This record has failed the validation on broker and hence will be rejected.
    InvalidRecord = 87, false;
    /// There are unstable offsets that need to be cleared.
    UnstableOffsetCommit = 88, true;
    /// The throttling quota has been exceeded.
    ThrottlingQuotaExceeded = 89, true;
    /// There is a newer producer with the same transactionalId which fences the current one.
    ProducerFenced = 90, false;
    /// A request illegally referred to a resource that does not exist.
    ResourceNotFound = 91, false;
    /// A request illegally referred to the same resource twice.
    DuplicateResource = 92, false;
    /// Requested credential would not meet criteria for acceptability.
    UnacceptableCredential = 93, false;
    /// Indicates that the either the sender or recipient of a voter-only request is not one of the expected voters.
    InconsistentVoterSet = 94, false;
    /// The given update version was invalid.
    InvalidUpdateVersion = 95, false;
    /// Unable to update finalized features due to an unexpected server error.
    FeatureUpdateFailed = 96, false;
    /// Request principal deserialization failed during forwarding.
    PrincipalDeserializationFailure = 97, false;
    /// Requested snapshot was not found.
    SnapshotNotFound = 98, false;
    /// Requested position is not greater than or equal to zero, and less than the size of the snapshot.
    PositionOutOfRange = 99, false;
    /// This server does not host this topic ID.
    UnknownTopicId = 100, true;
    /// This broker ID is already in use.
    DuplicateBrokerRegistration = 101, false;
    /// The given broker ID was not registered.
    BrokerIdNotRegistered = 102, false;
    /// The log's topic ID did not match the topic ID in the request.
    InconsistentTopicId = 103, true;
    /// The clusterId in the request does not match that found on the server.
    InconsistentClusterId = 104, false;
    /// The transactionalId could not be found.
    TransactionalIdNotFound = 105, false;
    /// The fetch session encountered inconsistent topic ID usage.
    FetchSessionTopicIdError = 106, true;
    /// The new ISR contains at least one ineligible replica.
    IneligibleReplica = 107, false;
    /// The AlterPartition request successfully updated the partition state but the leader has changed.
    NewLeaderElected = 108, false;
    /// The requested offset is moved to tiered storage.
    OffsetMovedToTieredStorage = 109, false;
    /// The member epoch is fenced by the group coordinator.
    FencedMemberEpoch = 110, false;
    /// The instance ID is still used by another member in the consumer group.
    UnreleasedInstanceId = 111, false;
    /// The assignor or its version range is not supported by the consumer group.
    UnsupportedAssignor = 112, false;
    /// The member epoch is stale.
    StaleMemberEpoch = 113, false;
    /// The request was sent to an endpoint of the wrong type.
    MismatchedEndpointType = 114, false;
    /// This endpoint type is not supported yet.
    UnsupportedEndpointType = 115, false;
    /// This controller ID is not known.
    UnknownControllerId = 116, false;
    /// Client sent a push telemetry request with an invalid or outdated subscription ID.
    UnknownSubscriptionId = 117, false;
    /// Client sent a push telemetry request larger than the maximum size the broker will accept.
    TelemetryTooLarge = 118, false;
    /// The controller has considered the broker registration to be invalid.
    InvalidRegistration = 119, false;
    /// Indicates that a transaction was aborted or timed out on the server.
    TransactionAbortable = 120, false;
    /// The record state is invalid; the acknowledgement of delivery could not be completed.
    InvalidRecordState = 121, false;
    /// The share session was not found.
    ShareSessionNotFound = 122, false;
    /// The share session epoch is invalid.
    InvalidShareSessionEpoch = 123, false;
    /// The coordinator rejected the request because the state epoch did not match.
    FencedStateEpoch = 124, false;
    /// The voter key doesn't match the receiving replica's key.
    InvalidVoterKey = 125, false;
    /// The voter is already part of the set of voters.
    DuplicateVoter = 126, false;
    /// The voter is not part of the set of voters.
    VoterNotFound = 127, false;
    /// The regular expression is not valid (a consumer group's SubscribedTopicRegex).
    InvalidRegularExpression = 128, false;
    /// Client metadata is stale; the client should rebootstrap to obtain new metadata.
    RebootstrapRequired = 129, false;
    /// The supplied topology is invalid.
    StreamsInvalidTopology = 130, false;
    /// The supplied topology epoch is invalid.
    StreamsInvalidTopologyEpoch = 131, false;
    /// The supplied topology epoch is outdated.
    StreamsTopologyFenced = 132, false;
    /// The limit of share sessions has been reached.
    ShareSessionLimitReached = 133, true;
}

impl ErrorCode {
    /// Whether this is the success code.
    pub fn is_ok(self) -> bool {
        self == ErrorCode::None
    }

    /// `Ok(())` for [`ErrorCode::None`], `Err(self)` otherwise.
    pub fn into_result(self) -> Result<(), ErrorCode> {
        if self.is_ok() {
            Ok(())
        } else {
            Err(self)
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ErrorCode::Unknown(c) => write!(f, "unknown error code {c}"),
            other => write!(f, "{other:?} ({})", other.code()),
        }
    }
}

impl std::error::Error for ErrorCode {}

impl From<i16> for ErrorCode {
    fn from(code: i16) -> Self {
        ErrorCode::from_code(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for c in -1..=133i16 {
            assert_eq!(ErrorCode::from_code(c).code(), c);
        }
        assert!(ErrorCode::NotLeaderOrFollower.is_retriable());
        assert!(!ErrorCode::TopicAlreadyExists.is_retriable());
        assert_eq!(ErrorCode::from_code(9999), ErrorCode::Unknown(9999));
        assert_eq!(
            ErrorCode::from_code(128),
            ErrorCode::InvalidRegularExpression
        );
        assert_eq!(ErrorCode::from_code(111), ErrorCode::UnreleasedInstanceId);
        assert_eq!(ErrorCode::from_code(81), ErrorCode::GroupMaxSizeReached);
    }
}
