//! `baton_protocol::fuzzing::decode_request` on each input, with the allocation bound.

#![no_main]

#[global_allocator]
static ALLOC: baton_protocol::fuzzing::CountingAllocator =
    baton_protocol::fuzzing::CountingAllocator;

libfuzzer_sys::fuzz_target!(|data: &[u8]| baton_protocol::fuzzing::decode_request(data));
