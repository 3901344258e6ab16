//! Replays every input kept under `fuzz/regressions/<target>/` (inputs that once
//! crashed a fuzz target, minimized) through the same check the target runs, and
//! the seed corpus of each target, so that `cargo test` keeps both passing.
//!
//! The protocol checks live in `baton_protocol::fuzzing`, the broker's frame
//! handling in `baton_broker::fuzzing`; the targets in `fuzz/fuzz_targets/` are
//! thin wrappers around the same functions, with the same counting allocator.

use std::path::{Path, PathBuf};

use baton_protocol::fuzzing::{self, check_reply, seeds, split_frames, CountingAllocator};

#[global_allocator]
static ALLOC: CountingAllocator = CountingAllocator;

/// The seed of the seed corpora checked here (the generator's default).
const SEED: u64 = 0x5eed;

fn regressions(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/regressions")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.file_name().is_some_and(|n| n != ".gitkeep"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

/// Runs `check` on every regression input of `target`, naming each before it runs.
fn replay(target: &str, check: impl Fn(&[u8])) -> usize {
    let inputs = regressions(target);
    for (path, input) in &inputs {
        println!("{target}: {}", path.display());
        check(input);
    }
    inputs.len()
}

fn broker_frames(input: &[u8]) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    runtime.block_on(baton_broker::fuzzing::run_frames(
        split_frames(input),
        check_reply,
    ));
}

#[test]
fn decode_request_regressions_and_seeds() {
    replay("decode_request", fuzzing::decode_request);
    let seeds = seeds::requests(SEED);
    assert!(seeds.len() > 300, "{} request seeds", seeds.len());
    seeds.iter().for_each(|s| fuzzing::decode_request(s));
}

#[test]
fn decode_response_regressions_and_seeds() {
    replay("decode_response", fuzzing::decode_response);
    seeds::responses(SEED)
        .iter()
        .for_each(|s| fuzzing::decode_response(s));
}

#[test]
fn record_batch_regressions_and_seeds() {
    replay("record_batch", fuzzing::record_batch);
    seeds::record_batches(SEED)
        .iter()
        .for_each(|s| fuzzing::record_batch(s));
}

#[test]
fn roundtrip_regressions_and_seeds() {
    replay("roundtrip", fuzzing::roundtrip);
    seeds::roundtrips(SEED)
        .iter()
        .for_each(|s| fuzzing::roundtrip(s));
}

#[test]
fn broker_frames_regressions_and_scenario_seeds() {
    replay("broker_frames", broker_frames);
    // The scenario seeds (create, produce in each codec, fetch): the last few.
    let all = seeds::broker_frames(SEED);
    all.iter().rev().take(5).for_each(|s| broker_frames(s));
}

#[test]
fn every_request_type_is_dispatched() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../protocol/src/messages");
    let mut requests = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        requests += text.matches("response = ").count();
    }
    let mut keys = fuzzing::api_keys();
    assert_eq!(
        keys.len(),
        requests,
        "baton_protocol::for_each_request! must list every request type of src/messages"
    );
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), requests, "an API key listed twice");
}
