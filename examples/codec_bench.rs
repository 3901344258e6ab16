//! Compression and decompression throughput of each record batch codec on a
//! realistic payload: JSON log lines of about 200 bytes, encoded as Kafka records
//! and cut into records sections of 1 MiB (what the producer compresses per batch).
//!
//! ```text
//! cargo run --release --example codec_bench -- [--runs 7] [--batches 16] [--seed 1]
//! ```
//!
//! Each run compresses, then decompresses, every batch once per codec setting; the
//! table shows the median over the runs of throughput in MB/s (10^6 bytes of
//! *uncompressed* records per second, both directions) and the size ratio
//! (uncompressed / compressed). The payload is generated from the seed, so runs on
//! different machines see the same bytes.

use std::hint::black_box;
use std::time::Instant;

use baton_protocol::record::compression::{compress, decompress, DecompressionLimits};
use baton_protocol::record::{Compression, RecordBatchBuilder, BATCH_HEADER_LEN};
use baton_testkit::Rng;
use bytes::BytesMut;

/// Uncompressed size of one records section.
const BATCH_BYTES: usize = 1 << 20;

/// One of `items`, drawn from `rng`.
fn pick<'a>(rng: &mut Rng, items: &[&'a str]) -> &'a str {
    items[rng.below(items.len() as u64) as usize]
}

/// One structured log line, about 200 bytes (204 on average with seed 1).
fn log_line(rng: &mut Rng, ts_ms: u64) -> String {
    let level = pick(rng, &["INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR"]);
    let service = pick(rng, &["checkout", "payments", "search", "catalog", "auth"]);
    let method = pick(rng, &["GET", "GET", "POST", "PUT", "DELETE"]);
    let path = pick(
        rng,
        &[
            "/api/v1/orders",
            "/api/v1/cart/items",
            "/api/v2/search",
            "/api/v1/users/me",
            "/healthz",
        ],
    );
    let region = pick(rng, &["eu-west-1", "us-east-1", "ap-south-1"]);
    let status = pick(rng, &["200", "200", "200", "201", "204", "404", "500"]);
    format!(
        r#"{{"ts":{ts_ms},"level":"{level}","service":"{service}","env":"prod","region":"{region}","host":"{service}-{host}","trace":"{trace:016x}","msg":"{method} {path}/{id} {status}","latency_ms":{lat},"user":{user}}}"#,
        host = rng.below(16),
        trace = rng.next_u64(),
        id = rng.below(1_000_000),
        lat = rng.below(2_000),
        user = rng.below(100_000),
    )
}

/// `count` records sections of about [`BATCH_BYTES`] each, as the producer builds
/// them before compression.
fn payload(seed: u64, count: usize) -> Vec<Vec<u8>> {
    let mut rng = Rng::new(seed);
    let mut ts = 1_700_000_000_000u64;
    let mut out = Vec::with_capacity(count);
    let mut line_bytes = 0usize;
    let mut lines = 0usize;
    for _ in 0..count {
        let mut builder = RecordBatchBuilder::new(ts as i64);
        while builder.size_bytes() - BATCH_HEADER_LEN < BATCH_BYTES - 300 {
            ts += rng.below(5);
            let line = log_line(&mut rng, ts);
            line_bytes += line.len();
            lines += 1;
            builder.push(ts as i64, None, Some(line.as_bytes()), &[]);
        }
        let batch = builder.finish();
        out.push(batch[BATCH_HEADER_LEN..].to_vec());
    }
    eprintln!(
        "payload: {count} records sections, {lines} log lines of {:.0} bytes on average",
        line_bytes as f64 / lines as f64
    );
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} takes a number, got {v}"))
        })
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runs = arg(&args, "--runs", 7).max(1) as usize;
    let batches = arg(&args, "--batches", 16).max(1) as usize;
    let seed = arg(&args, "--seed", 1);
    if cfg!(debug_assertions) {
        eprintln!("warning: a debug build; run with --release for meaningful figures");
    }
    let input = payload(seed, batches);
    let total: usize = input.iter().map(Vec::len).sum();
    let limits = DecompressionLimits::default();

    let settings: [(Compression, Option<i32>); 8] = [
        (Compression::None, None),
        (Compression::Gzip, Some(1)),
        (Compression::Gzip, None),
        (Compression::Snappy, None),
        (Compression::Lz4, None),
        (Compression::Zstd, Some(1)),
        (Compression::Zstd, None),
        (Compression::Zstd, Some(9)),
    ];
    println!(
        "{runs} runs over {batches} x 1 MiB records sections ({:.1} MB), seed {seed}; median of runs",
        total as f64 / 1e6
    );
    println!();
    println!("| codec | level | compress MB/s | decompress MB/s | ratio |");
    println!("|---|---:|---:|---:|---:|");
    for (codec, level) in settings {
        if !codec.is_supported() {
            println!("| {codec} | - | (feature off) | | |");
            continue;
        }
        let mut c_rates = Vec::with_capacity(runs);
        let mut d_rates = Vec::with_capacity(runs);
        let mut compressed_len = 0;
        for _ in 0..runs {
            let mut packed = Vec::with_capacity(input.len());
            let start = Instant::now();
            for section in &input {
                let mut out = BytesMut::with_capacity(section.len() / 2);
                compress(codec, level, black_box(section), &mut out);
                packed.push(out.freeze());
            }
            c_rates.push(total as f64 / start.elapsed().as_secs_f64() / 1e6);
            compressed_len = packed.iter().map(|b| b.len()).sum::<usize>();

            let start = Instant::now();
            for (section, original) in packed.iter().zip(&input) {
                let out = decompress(codec, black_box(section), &limits).expect("round trip");
                assert_eq!(out.len(), original.len());
                black_box(out);
            }
            d_rates.push(total as f64 / start.elapsed().as_secs_f64() / 1e6);
        }
        let level = codec
            .effective_level(level)
            .map_or_else(|| "-".to_string(), |l| l.to_string());
        println!(
            "| {codec} | {level} | {:.0} | {:.0} | {:.2} |",
            median(c_rates),
            median(d_rates),
            total as f64 / compressed_len as f64
        );
    }
}
