//! Decoding hostile input never allocates more than the input can justify.
//!
//! A counting global allocator records, per thread, the largest single allocation
//! and the total bytes allocated while decoding. Every message type in
//! `src/messages/` (each request and response, and the consumer protocol's embedded
//! subscription and assignment) is fed frames that lie about lengths and counts, in
//! every version; both figures must stay within a small multiple of the frame size.
//! A further test reads `src/messages/` and fails if a message type exists that the
//! list here does not name, so a new message cannot be forgotten.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use baton_protocol::messages::*;
use bytes::{BufMut, Bytes, BytesMut};
use proptest::prelude::*;

struct Counting;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
    static TOTAL: Cell<usize> = const { Cell::new(0) };
}

fn count(size: usize) {
    let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
    let _ = TOTAL.try_with(|t| t.set(t.get().saturating_add(size)));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        System.alloc_zeroed(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // A grown block counts in full: it may be a fresh allocation plus a copy.
        count(new_size);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The largest single allocation and the total bytes allocated while `decode` runs
/// on this thread.
fn measure(decode: impl FnOnce()) -> (usize, usize) {
    LARGEST.with(|l| l.set(0));
    TOTAL.with(|t| t.set(0));
    decode();
    (LARGEST.with(Cell::get), TOTAL.with(Cell::get))
}

/// Bytes of decoded structure a single input byte may justify. Arrays pre-reserve at
/// most 64 elements and then grow only as elements (each at least one input byte)
/// are decoded; the largest element type is a few hundred bytes.
const BOUND_PER_BYTE: usize = 1024;
const BOUND_FIXED: usize = 64 * 1024;

/// Total bytes allocated, summed over one decode, that a single input byte may
/// justify: the above doubled, because a growing vector's reallocations each count
/// in full and sum to at most twice its final size. (Measured: under 70 bytes per
/// input byte for bodies of about 150 bytes.)
const TOTAL_PER_BYTE: usize = 2 * BOUND_PER_BYTE;
const TOTAL_FIXED: usize = 2 * BOUND_FIXED;

/// Checks both bounds for one decode of `len` input bytes.
fn check_bounds(what: &str, version: i16, len: usize, (largest, total): (usize, usize)) {
    let bound = BOUND_FIXED + BOUND_PER_BYTE * len;
    assert!(
        largest <= bound,
        "{what} v{version}: largest allocation {largest} bytes for a {len}-byte body \
         (bound {bound})"
    );
    let bound = TOTAL_FIXED + TOTAL_PER_BYTE * len;
    assert!(
        total <= bound,
        "{what} v{version}: {total} bytes allocated in all for a {len}-byte body \
         (bound {bound})"
    );
}

/// Decodes `body` as `M` in every version, checking both bounds each time.
fn check_message<M: Message>(what: &str, body: &Bytes) {
    for version in M::MIN_VERSION..=M::MAX_VERSION {
        let got = measure(|| {
            let _ = M::decode_body(body.clone(), version);
        });
        check_bounds(what, version, body.len(), got);
    }
}

/// Calls `$callback!` with every message type of `src/messages/`, requests and
/// responses; [`every_message_type_is_listed`] keeps the list complete.
macro_rules! for_each_message {
    ($callback:ident) => {
        $callback!(
            ApiVersionsRequest,
            ApiVersionsResponse,
            MetadataRequest,
            MetadataResponse,
            ProduceRequest,
            ProduceResponse,
            FetchRequest,
            FetchResponse,
            ListOffsetsRequest,
            ListOffsetsResponse,
            CreateTopicsRequest,
            CreateTopicsResponse,
            DeleteTopicsRequest,
            DeleteTopicsResponse,
            InitProducerIdRequest,
            InitProducerIdResponse,
            OffsetForLeaderEpochRequest,
            OffsetForLeaderEpochResponse,
            BrokerRegistrationRequest,
            BrokerRegistrationResponse,
            BrokerHeartbeatRequest,
            BrokerHeartbeatResponse,
            AlterPartitionRequest,
            AlterPartitionResponse,
            FindCoordinatorRequest,
            FindCoordinatorResponse,
            JoinGroupRequest,
            JoinGroupResponse,
            SyncGroupRequest,
            SyncGroupResponse,
            HeartbeatRequest,
            HeartbeatResponse,
            LeaveGroupRequest,
            LeaveGroupResponse,
            OffsetCommitRequest,
            OffsetCommitResponse,
            OffsetFetchRequest,
            OffsetFetchResponse,
            DescribeGroupsRequest,
            DescribeGroupsResponse,
            ListGroupsRequest,
            ListGroupsResponse,
            DeleteGroupsRequest,
            DeleteGroupsResponse,
            OffsetDeleteRequest,
            OffsetDeleteResponse,
            DescribeConfigsRequest,
            DescribeConfigsResponse,
            DescribeClusterRequest,
            DescribeClusterResponse,
            SaslHandshakeRequest,
            SaslHandshakeResponse,
            SaslAuthenticateRequest,
            SaslAuthenticateResponse,
            DescribeAclsRequest,
            DescribeAclsResponse,
            CreateAclsRequest,
            CreateAclsResponse,
            DeleteAclsRequest,
            DeleteAclsResponse,
            DescribeUserScramCredentialsRequest,
            DescribeUserScramCredentialsResponse,
            AlterUserScramCredentialsRequest,
            AlterUserScramCredentialsResponse,
            AddPartitionsToTxnRequest,
            AddPartitionsToTxnResponse,
            AddOffsetsToTxnRequest,
            AddOffsetsToTxnResponse,
            EndTxnRequest,
            EndTxnResponse,
            DescribeTransactionsRequest,
            DescribeTransactionsResponse,
            ListTransactionsRequest,
            ListTransactionsResponse,
            TxnOffsetCommitRequest,
            TxnOffsetCommitResponse,
            WriteTxnMarkersRequest,
            WriteTxnMarkersResponse,
            DescribeProducersRequest,
            DescribeProducersResponse,
            ConsumerGroupHeartbeatRequest,
            ConsumerGroupHeartbeatResponse,
            ConsumerGroupDescribeRequest,
            ConsumerGroupDescribeResponse,
            DeleteRecordsRequest,
            DeleteRecordsResponse
        )
    };
}

fn check(body: &Bytes) {
    macro_rules! check_all {
        ($($m:ty),* $(,)?) => {
            $(check_message::<$m>(stringify!($m), body);)*
        };
    }
    for_each_message!(check_all);
    // The consumer protocol's embedded structs carry their own version.
    let got = measure(|| {
        let _ = ConsumerProtocolSubscription::decode_versioned(body.clone());
    });
    check_bounds("ConsumerProtocolSubscription", 0, body.len(), got);
    let got = measure(|| {
        let _ = ConsumerProtocolAssignment::decode_versioned(body.clone());
    });
    check_bounds("ConsumerProtocolAssignment", 0, body.len(), got);
}

#[test]
fn every_message_type_is_listed() {
    macro_rules! names {
        ($($m:ty),* $(,)?) => { [$(stringify!($m)),*] };
    }
    let listed = for_each_message!(names);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/messages");
    let mut defined = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for rest in text.split("impl_message!(").skip(1) {
            let name: String = rest
                .trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            defined.push(name);
        }
    }
    assert!(defined.len() >= 44, "found only {defined:?} in {dir:?}");
    for name in &defined {
        assert!(
            listed.contains(&name.as_str()),
            "{name} is a message in src/messages/ but allocation_bound.rs does not check it: \
             add it to for_each_message!"
        );
    }
    assert_eq!(
        listed.len(),
        defined.len(),
        "listed {listed:?}, defined {defined:?}"
    );
}

#[test]
fn metadata_request_claiming_2_billion_topics_is_a_clean_error() {
    // The 8-byte body: an array count of 0x7fffffff and four bytes of "topics".
    let body = Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff, 0x00, 0x01, b'a', 0x00]);
    for version in 0..=8 {
        let err = MetadataRequest::decode_body(body.clone(), version).unwrap_err();
        assert!(
            matches!(err, baton_protocol::DecodeError::BadLength { .. }),
            "v{version}: {err:?}"
        );
    }
    check(&body);
}

#[test]
fn huge_counts_everywhere_are_bounded() {
    // Every 4-byte window set to a huge count, in an otherwise plausible body.
    for len in [8usize, 32, 128] {
        for at in 0..len.saturating_sub(4) {
            let mut b = BytesMut::zeroed(len);
            b[at..at + 4].copy_from_slice(&0x7fff_fff0u32.to_be_bytes());
            check(&b.freeze());
            let mut b = BytesMut::new();
            b.put_bytes(0xff, at);
            b.put_slice(&[0xff, 0xff, 0xff, 0x07]);
            check(&b.freeze());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn arbitrary_bodies_are_bounded(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        check(&Bytes::from(bytes));
    }
}
