//! The input split into size-prefixed frames, handled one after the other by a
//! fresh in-memory node (`baton_broker::fuzzing::run_frames`), each reply checked
//! by `baton_protocol::fuzzing::check_reply`.

#![no_main]

use baton_protocol::fuzzing::{check_reply, split_frames};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    runtime.block_on(baton_broker::fuzzing::run_frames(
        split_frames(data),
        check_reply,
    ));
});
