//! The checks the fuzz targets in `fuzz/` run on each input, shared with the
//! tests that replay `fuzz/regressions/` (feature `testing`; not a stable API).
//!
//! Each check takes arbitrary bytes and panics when the code under test misbehaves:
//! a panic inside a decoder, a decode that allocates more than its input justifies
//! (measured by [`CountingAllocator`], which the calling binary must install as its
//! global allocator), a value that does not survive re-encoding, or a malformed
//! response. Inputs that are merely invalid are fine: they must decode to an error.
//!
//! | check | input |
//! |---|---|
//! | [`decode_request`] | a request frame after its size prefix (header and body) |
//! | [`decode_response`] | API key (i16), request version (i16), then a response frame after its size prefix |
//! | [`record_batch`] | a records blob: record batches, any codec |
//! | [`roundtrip`] | kind (u8, even: request, odd: response), API key (i16), version (i16), then a message body |
//! | [`check_reply`] | a request frame and the broker's reply to it |
//!
//! [`seeds`] writes valid inputs of each kind, for the fuzzers' starting corpora.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::{Buf, Bytes, BytesMut};

use crate::envelope;
use crate::messages::*;
use crate::record::{batches, DecompressionLimits};
use crate::testing::Random;
use crate::{Message, Request, RequestHeader};

pub mod seeds;

/// A global allocator that counts, per thread, the bytes each measured piece of
/// code allocates (see [`measure`]); install it with `#[global_allocator]`.
#[derive(Debug, Clone, Copy, Default)]
pub struct CountingAllocator;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
    static TOTAL: Cell<usize> = const { Cell::new(0) };
}

fn count(size: usize) {
    let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
    let _ = TOTAL.try_with(|t| t.set(t.get().saturating_add(size)));
}

// SAFETY: every call is forwarded unchanged to the system allocator; counting
// touches only const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for CountingAllocator {
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

/// What one measured piece of code allocated on its thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocations {
    /// The largest single allocation, in bytes.
    pub largest: usize,
    /// All bytes allocated, summed (a grown block counts in full each time).
    pub total: usize,
}

/// Runs `f` and returns its result with what it allocated on this thread.
///
/// # Panics
///
/// If [`CountingAllocator`] is not the global allocator: every bound would then
/// hold trivially.
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, Allocations) {
    LARGEST.with(|l| l.set(0));
    TOTAL.with(|t| t.set(0));
    let probe = std::hint::black_box(Box::new(0u64));
    drop(probe);
    assert!(
        TOTAL.with(Cell::get) > 0,
        "baton_protocol::fuzzing::CountingAllocator must be the global allocator"
    );
    LARGEST.with(|l| l.set(0));
    TOTAL.with(|t| t.set(0));
    let out = f();
    let got = Allocations {
        largest: LARGEST.with(Cell::get),
        total: TOTAL.with(Cell::get),
    };
    (out, got)
}

/// Bytes of decoded structure one input byte may justify, and a fixed allowance,
/// for the largest allocation of a decode: the rule of
/// `protocol/tests/allocation_bound.rs` (arrays pre-reserve at most 64 elements,
/// then grow only as elements of at least one input byte are decoded).
pub const BOUND_PER_BYTE: usize = 1024;
/// See [`BOUND_PER_BYTE`].
pub const BOUND_FIXED: usize = 64 * 1024;

/// Panics unless `got` is within the bounds for a decode of `input_len` bytes that
/// may also produce `extra` bytes of decompressed data: the largest allocation at
/// most `BOUND_FIXED + BOUND_PER_BYTE * input_len + extra`, the total at most
/// twice that (a growing vector's reallocations sum to at most twice its size).
pub fn check_allocations(what: &str, input_len: usize, extra: usize, got: Allocations) {
    let bound = BOUND_FIXED
        .saturating_add(BOUND_PER_BYTE.saturating_mul(input_len))
        .saturating_add(extra);
    assert!(
        got.largest <= bound,
        "{what}: largest allocation {} bytes for {input_len} input bytes (bound {bound})",
        got.largest
    );
    let total_bound = bound.saturating_mul(2);
    assert!(
        got.total <= total_bound,
        "{what}: {} bytes allocated in all for {input_len} input bytes (bound {total_bound})",
        got.total
    );
}

/// Something done with one request type, chosen by API key at run time (see
/// [`visit_request`]).
pub trait RequestVisitor {
    /// What the visit returns.
    type Output;
    /// Does the work for request type `R`.
    fn visit<R>(self) -> Self::Output
    where
        R: Request + Random,
        R::Response: Random;
}

/// Calls `$callback!` with every request type of `src/messages/`; the protocol's
/// `fuzz_regressions` test keeps the list complete.
#[doc(hidden)]
#[macro_export]
macro_rules! for_each_request {
    ($callback:ident) => {
        $callback!(
            ProduceRequest,
            FetchRequest,
            ListOffsetsRequest,
            MetadataRequest,
            OffsetCommitRequest,
            OffsetFetchRequest,
            FindCoordinatorRequest,
            JoinGroupRequest,
            HeartbeatRequest,
            LeaveGroupRequest,
            SyncGroupRequest,
            DescribeGroupsRequest,
            ListGroupsRequest,
            SaslHandshakeRequest,
            ApiVersionsRequest,
            CreateTopicsRequest,
            DeleteTopicsRequest,
            DeleteRecordsRequest,
            InitProducerIdRequest,
            OffsetForLeaderEpochRequest,
            AddPartitionsToTxnRequest,
            AddOffsetsToTxnRequest,
            EndTxnRequest,
            WriteTxnMarkersRequest,
            TxnOffsetCommitRequest,
            DescribeAclsRequest,
            CreateAclsRequest,
            DeleteAclsRequest,
            DescribeConfigsRequest,
            DescribeLogDirsRequest,
            SaslAuthenticateRequest,
            CreatePartitionsRequest,
            DeleteGroupsRequest,
            ElectLeadersRequest,
            IncrementalAlterConfigsRequest,
            AlterPartitionReassignmentsRequest,
            ListPartitionReassignmentsRequest,
            OffsetDeleteRequest,
            DescribeUserScramCredentialsRequest,
            AlterUserScramCredentialsRequest,
            AlterPartitionRequest,
            DescribeClusterRequest,
            DescribeProducersRequest,
            BrokerRegistrationRequest,
            BrokerHeartbeatRequest,
            DescribeTransactionsRequest,
            ListTransactionsRequest,
            ConsumerGroupHeartbeatRequest,
            ConsumerGroupDescribeRequest
        )
    };
}

/// Runs `visitor` with the request type of `api_key`; `None` for a key no message
/// of this crate has.
pub fn visit_request<V: RequestVisitor>(api_key: i16, visitor: V) -> Option<V::Output> {
    macro_rules! by_key {
        ($($r:ident),* $(,)?) => {
            match api_key {
                $(k if k == $r::API_KEY => Some(visitor.visit::<$r>()),)*
                _ => None,
            }
        };
    }
    for_each_request!(by_key)
}

/// The API key of every request type, for seed generators and tests.
pub fn api_keys() -> Vec<i16> {
    macro_rules! keys {
        ($($r:ident),* $(,)?) => { vec![$($r::API_KEY),*] };
    }
    for_each_request!(keys)
}

/// Reads a big-endian i16 from the front of `data`, or `None` if it is too short.
fn take_i16(data: &mut &[u8]) -> Option<i16> {
    if data.len() < 2 {
        return None;
    }
    Some(data.get_i16())
}

/// Decodes a request frame (header and body, as `FrameCodec` hands it over) with
/// the request type and version its header names, within the allocation bound.
pub fn decode_request(data: &[u8]) {
    let frame = Bytes::copy_from_slice(data);
    let Ok((api_key, version, _)) = RequestHeader::peek(&frame) else {
        return;
    };
    struct Decode(Bytes, i16);
    impl RequestVisitor for Decode {
        type Output = ();
        fn visit<R: Request + Random>(self)
        where
            R::Response: Random,
        {
            let Decode(frame, version) = self;
            let len = frame.len();
            let (_, got) = measure(|| envelope::decode_request::<R>(frame, version).is_ok());
            check_allocations(
                &format!("api {} v{version} request", R::API_KEY),
                len,
                0,
                got,
            );
        }
    }
    visit_request(api_key, Decode(frame, version));
}

/// Decodes a response frame (after two i16s naming the API key and the request
/// version) as the response to that request, within the allocation bound.
pub fn decode_response(mut data: &[u8]) {
    let (Some(api_key), Some(version)) = (take_i16(&mut data), take_i16(&mut data)) else {
        return;
    };
    struct Decode(Bytes, i16);
    impl RequestVisitor for Decode {
        type Output = ();
        fn visit<R: Request + Random>(self)
        where
            R::Response: Random,
        {
            let Decode(frame, version) = self;
            let len = frame.len();
            let (_, got) = measure(|| envelope::decode_response::<R>(frame, version).is_ok());
            check_allocations(
                &format!("api {} v{version} response", R::API_KEY),
                len,
                0,
                got,
            );
        }
    }
    visit_request(api_key, Decode(Bytes::copy_from_slice(data), version));
}

/// The decompression caps of the record batch check: the consumer's default
/// memory bound (50 MiB) with the default ratio cap, as the client's fetcher
/// uses them. The broker uses [`DecompressionLimits::default`], whose only
/// difference is a larger absolute cap that no fuzz input reaches (the ratio cap
/// applies first).
pub fn record_limits() -> DecompressionLimits {
    DecompressionLimits {
        max_bytes: 50 << 20,
        ..DecompressionLimits::default()
    }
}

/// State a decompressor may hold beyond its output: two LZ4 blocks of up to 4 MiB
/// and a Zstandard window of up to 8 MiB with its context (see
/// [`crate::record::compression`]).
pub const CODEC_STATE: usize = 18 << 20;

/// Walks the record batches of a records blob: parses each batch, verifies its
/// CRC (the outcome is not checked: compaction and the consumer read records of
/// batches either way), decompresses its records within [`record_limits`], and
/// checks that the allocation-free walk and the record iterator agree on every
/// batch. Allocation is bounded per batch by its size plus its decompression
/// limit.
pub fn record_batch(data: &[u8]) {
    let blob = Bytes::copy_from_slice(data);
    let limits = record_limits();
    for next in batches(blob) {
        let Ok(batch) = next else { break };
        let _ = batch.verify_crc();
        let len = batch.len();
        let extra = limits.limit_for(len).saturating_add(CODEC_STATE);
        let (_, got) = measure(|| {
            let records = match batch.records_with_limits(&limits) {
                Ok(r) => r,
                Err(_) => return,
            };
            let walked = records.check();
            let announced = records.remaining_count();
            let mut yielded = 0usize;
            let mut failed = false;
            for record in records {
                match record {
                    Ok(r) => {
                        yielded += 1;
                        let _ = r.control_type();
                    }
                    Err(_) => {
                        failed = true;
                        break;
                    }
                }
            }
            assert_eq!(
                walked.is_ok(),
                !failed,
                "walk_records and the record iterator disagree on {batch:?}: walk {walked:?}"
            );
            if walked.is_ok() {
                assert_eq!(yielded, announced, "records of {batch:?}");
            }
        });
        check_allocations("record batch", len, extra, got);
    }
}

/// Decodes a message body, re-encodes it and decodes that again: both decoded
/// values must be equal and encoding the second must give the same bytes. The
/// first byte picks request (even) or response (odd), then two i16s name the API
/// key and the version.
pub fn roundtrip(mut data: &[u8]) {
    if data.is_empty() {
        return;
    }
    let response = data.get_u8() % 2 == 1;
    let (Some(api_key), Some(version)) = (take_i16(&mut data), take_i16(&mut data)) else {
        return;
    };
    struct Roundtrip(Bytes, i16, bool);
    impl RequestVisitor for Roundtrip {
        type Output = ();
        fn visit<R: Request + Random>(self)
        where
            R::Response: Random,
        {
            let Roundtrip(body, version, response) = self;
            if response {
                roundtrip_message::<R::Response>(body, version);
            } else {
                roundtrip_message::<R>(body, version);
            }
        }
    }
    visit_request(
        api_key,
        Roundtrip(Bytes::copy_from_slice(data), version, response),
    );
}

/// Decodes `body` as `M` in `version`; if it decodes, checks that re-encoding is
/// faithful and stable.
pub fn roundtrip_message<M: Message>(body: Bytes, version: i16) {
    let len = body.len();
    let (first, got) = measure(|| M::decode_body(body, version));
    check_allocations(&format!("api {} v{version} body", M::API_KEY), len, 0, got);
    let Ok(first) = first else { return };
    let what = || {
        format!(
            "api {} v{version} {}",
            M::API_KEY,
            std::any::type_name::<M>()
        )
    };
    let mut encoded = BytesMut::new();
    first
        .encode_body(&mut encoded, version)
        .unwrap_or_else(|e| panic!("{}: a decoded value does not encode: {e}", what()));
    let encoded = encoded.freeze();
    let second = M::decode_body(encoded.clone(), version).unwrap_or_else(|e| {
        panic!(
            "{}: re-encoded bytes {encoded:02x?} do not decode: {e}\nvalue {first:?}",
            what()
        )
    });
    // Floating-point fields may hold NaN, which is never equal to itself; their
    // Debug forms and encodings still are.
    assert!(
        second == first || format!("{second:?}") == format!("{first:?}"),
        "{}: decode(encode(x)) != x\n x: {first:?}\n y: {second:?}",
        what()
    );
    let mut again = BytesMut::new();
    second.encode_body(&mut again, version).unwrap();
    assert_eq!(
        &again[..],
        &encoded[..],
        "{}: encoding is not stable",
        what()
    );
}

/// Splits `data` into frames as a connection would: each a big-endian i32 size,
/// then that many bytes. A size that is negative or larger than what remains
/// makes the rest one last frame (a fuzz input then still reaches the broker).
pub fn split_frames(data: &[u8]) -> Vec<Bytes> {
    let mut rest = data;
    let mut frames = Vec::new();
    while rest.len() >= 4 {
        let size = rest.get_i32();
        let take = usize::try_from(size)
            .ok()
            .filter(|&n| n <= rest.len())
            .unwrap_or(rest.len());
        frames.push(Bytes::copy_from_slice(&rest[..take]));
        rest = &rest[take..];
    }
    frames
}

/// Checks a broker's answer to one request frame (after its size prefix):
/// `Some(frame)` must be one whole frame, size prefix included, whose response
/// header carries the request's correlation id and whose body decodes as the
/// response to the request's API key and version (ApiVersions in a version the
/// broker does not know is answered in v0, KIP-511); `None` (no answer) is only
/// right for a Produce request with `acks=0`.
pub fn check_reply(request: &[u8], reply: Option<&[u8]>) {
    let Ok((api_key, version, correlation_id)) = RequestHeader::peek(request) else {
        panic!("an answer to a request without a header: {request:02x?}");
    };
    let Some(mut frame) = reply else {
        let (_, produce) =
            envelope::decode_request::<ProduceRequest>(Bytes::copy_from_slice(request), version)
                .unwrap_or_else(|e| {
                    panic!(
                        "api {api_key} v{version}: no answer, yet not a valid Produce request: {e}"
                    )
                });
        assert_eq!(
            produce.acks, 0,
            "a Produce request with acks != 0 got no answer"
        );
        return;
    };
    assert!(frame.len() >= 4, "a reply shorter than its size prefix");
    let size = frame.get_i32();
    assert_eq!(
        usize::try_from(size).ok(),
        Some(frame.len()),
        "api {api_key} v{version}: the size prefix does not match the reply"
    );
    struct Check(Bytes, i16, i32);
    impl RequestVisitor for Check {
        type Output = ();
        fn visit<R: Request + Random>(self)
        where
            R::Response: Random,
        {
            let Check(frame, mut version, correlation_id) = self;
            if R::API_KEY == ApiVersionsRequest::API_KEY && !R::supports(version) {
                version = 0;
            }
            let (header, _) = envelope::decode_response::<R>(frame.clone(), version)
                .unwrap_or_else(|e| {
                    panic!(
                        "api {} v{version}: the reply {frame:02x?} does not decode: {e}",
                        R::API_KEY
                    )
                });
            assert_eq!(
                header.correlation_id,
                correlation_id,
                "api {} v{version}: the reply's correlation id",
                R::API_KEY
            );
        }
    }
    let checked = visit_request(
        api_key,
        Check(Bytes::copy_from_slice(frame), version, correlation_id),
    );
    assert!(checked.is_some(), "an answer to unknown api key {api_key}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_with_another_correlation_id_fails_the_check() {
        let req = MetadataRequest::default();
        let request = envelope::encode_request(7, None, &req, 12).unwrap();
        let reply =
            envelope::encode_response::<MetadataRequest>(7, 12, &Default::default()).unwrap();
        check_reply(&request[4..], Some(&reply));
        let wrong =
            envelope::encode_response::<MetadataRequest>(8, 12, &Default::default()).unwrap();
        let caught = std::panic::catch_unwind(|| check_reply(&request[4..], Some(&wrong)));
        assert!(caught.is_err(), "a reply to another request passed");
        let caught = std::panic::catch_unwind(|| check_reply(&request[4..], None));
        assert!(
            caught.is_err(),
            "a Metadata request without an answer passed"
        );
    }

    #[test]
    fn an_allocation_past_the_bound_fails_the_check() {
        let within = Allocations {
            largest: BOUND_FIXED + BOUND_PER_BYTE,
            total: 2 * (BOUND_FIXED + BOUND_PER_BYTE),
        };
        check_allocations("test", 1, 0, within);
        let caught = std::panic::catch_unwind(|| {
            let over = Allocations {
                largest: BOUND_FIXED + BOUND_PER_BYTE + 1,
                total: 0,
            };
            check_allocations("test", 1, 0, over)
        });
        assert!(caught.is_err(), "an allocation past the bound passed");
    }

    #[test]
    fn frames_split_at_their_size_prefixes() {
        let data = [
            0, 0, 0, 2, 9, 9, 0, 0, 0, 1, 7, 0xff, 0xff, 0xff, 0xff, 1, 2,
        ];
        let frames = split_frames(&data);
        assert_eq!(frames, [&[9, 9][..], &[7][..], &[1, 2][..]]);
    }
}
