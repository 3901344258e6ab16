//! Writes the starting corpus of every fuzz target into `fuzz/corpus/<target>/`:
//! valid encodings from `baton_protocol::fuzzing::seeds` (seeded, so the same
//! seed writes the same files).
//!
//! `cargo run --bin seed_corpus [-- SEED]` from `fuzz/` (a plain build: `cargo fuzz
//! build` instruments what it builds, so build the targets by name).

use std::path::Path;

use baton_protocol::fuzzing::seeds;

/// The seed used when none is given.
const DEFAULT_SEED: u64 = 0x5eed;

fn main() -> std::io::Result<()> {
    let seed = match std::env::args().nth(1) {
        Some(s) => s.parse().expect("SEED is a u64"),
        None => DEFAULT_SEED,
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let targets: [(&str, Vec<Vec<u8>>); 5] = [
        ("decode_request", seeds::requests(seed)),
        ("decode_response", seeds::responses(seed)),
        ("record_batch", seeds::record_batches(seed)),
        ("roundtrip", seeds::roundtrips(seed)),
        ("broker_frames", seeds::broker_frames(seed)),
    ];
    for (target, inputs) in targets {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir)?;
        for (i, input) in inputs.iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{seed}-{i:05}")), input)?;
        }
        println!("{target}: {} inputs in {}", inputs.len(), dir.display());
    }
    Ok(())
}
