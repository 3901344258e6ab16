//! Decoding hostile input never allocates more than the input can justify.
//!
//! A counting global allocator records the largest single allocation made while
//! decoding. Every request and response type is fed frames that lie about lengths and
//! counts; the largest allocation must stay within a small multiple of the frame size.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use baton_protocol::messages::*;
use bytes::{BufMut, Bytes, BytesMut};
use proptest::prelude::*;

struct Counting;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The largest allocation that decoding `body` as `M` in every version makes.
fn largest_allocation<M: Message>(body: &Bytes) -> usize {
    let mut worst = 0;
    for version in M::MIN_VERSION..=M::MAX_VERSION {
        LARGEST.store(0, Ordering::Relaxed);
        let _ = M::decode_body(body.clone(), version);
        worst = worst.max(LARGEST.load(Ordering::Relaxed));
    }
    worst
}

/// Bytes of decoded structure a single input byte may justify. Arrays pre-reserve at
/// most 64 elements and then grow only as elements (each at least one input byte)
/// are decoded; the largest element type is a few hundred bytes.
const BOUND_PER_BYTE: usize = 1024;
const BOUND_FIXED: usize = 64 * 1024;

macro_rules! check_all {
    ($body:expr; $($m:ty),* $(,)?) => {
        $(
            let got = largest_allocation::<$m>($body);
            let bound = BOUND_FIXED + BOUND_PER_BYTE * $body.len();
            assert!(
                got <= bound,
                "{}: largest allocation {got} bytes for a {}-byte body (bound {bound})",
                stringify!($m),
                $body.len()
            );
        )*
    };
}

fn check(body: &Bytes) {
    check_all!(body;
        ApiVersionsRequest, ApiVersionsResponse,
        MetadataRequest, MetadataResponse,
        ProduceRequest, ProduceResponse,
        FetchRequest, FetchResponse,
        ListOffsetsRequest, ListOffsetsResponse,
        CreateTopicsRequest, CreateTopicsResponse,
        DeleteTopicsRequest, DeleteTopicsResponse,
        InitProducerIdRequest, InitProducerIdResponse,
        OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
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
