//! `baton produce`: records from stdin or a file, one per delimiter, sent through
//! the SDK's producer; every delivery is awaited and failures are counted.

use std::io::{BufRead, Read};

use bytes::Bytes;
use tokio::sync::mpsc;

use baton_kafka::{Client, DeliveryFuture, Producer, ProducerRecord};

use crate::args::ProduceArgs;
use crate::error::CliError;

/// How many deliveries may be awaited at once before reading more input (the
/// producer's own buffer bounds the bytes).
const PENDING_DELIVERIES: usize = 10_000;
/// How many records read ahead of the producer may wait.
const READ_AHEAD: usize = 64;

/// What the deliveries came to.
#[derive(Debug, Default)]
struct Tally {
    delivered: u64,
    failed: u64,
    first_error: Option<String>,
}

/// Runs `baton produce`.
pub async fn run(client: &Client, args: ProduceArgs) -> Result<(), CliError> {
    let meta = client.refresh_metadata().await?;
    let Some(topic) = meta.topic(&args.topic) else {
        return Err(CliError::unknown_topic(&args.topic));
    };
    if let Some(p) = args.partition {
        if topic.partition(p).is_none() {
            return Err(CliError::not_found(format!(
                "topic {:?} has no partition {p} (it has {})",
                args.topic,
                topic.partitions.len()
            )));
        }
    }
    let mut builder = Producer::builder(client)
        .acks(args.acks)
        .compression(args.compression.codec());
    if let Some(on) = args.idempotent {
        builder = builder.idempotence(on);
    }
    let producer = builder
        .try_build()
        .map_err(|e| CliError::usage(e.to_string()).hint("idempotence needs --acks all"))?;

    let (tx, mut rx) = mpsc::channel::<DeliveryFuture>(PENDING_DELIVERIES);
    let waiter = tokio::spawn(async move {
        let mut tally = Tally::default();
        while let Some(delivery) = rx.recv().await {
            match delivery.await {
                Ok(_) => tally.delivered += 1,
                Err(e) => {
                    tally.failed += 1;
                    tally.first_error.get_or_insert_with(|| e.to_string());
                }
            }
        }
        tally
    });

    let input: Box<dyn Read + Send> = match &args.file {
        Some(path) => Box::new(
            std::fs::File::open(path)
                .map_err(|e| CliError::usage(format!("--file {}: {e}", path.display())))?,
        ),
        None => Box::new(std::io::stdin()),
    };
    let (lines_tx, lines) = mpsc::channel(READ_AHEAD);
    let (delimiter, limit) = (args.delimiter, args.max_record_bytes);
    // A blocking reader: stdin and files are read on their own thread.
    let reader =
        tokio::task::spawn_blocking(move || read_records(input, delimiter, limit, &lines_tx));
    let mut refused = Tally::default();
    let sent = send_all(&producer, &args, lines, &tx, &mut refused).await;
    drop(tx);
    producer.close().await;
    let mut tally = waiter
        .await
        .map_err(|e| CliError::failure(format!("delivery task failed: {e}")))?;
    sent?;
    reader
        .await
        .map_err(|e| CliError::failure(format!("input task failed: {e}")))??;
    if refused.failed > 0 {
        tally.failed += refused.failed;
        tally.first_error = refused.first_error.or(tally.first_error);
    }
    if tally.failed > 0 {
        return Err(CliError::failure(format!(
            "{} of {} records were not delivered; first error: {}",
            tally.failed,
            tally.failed + tally.delivered,
            tally.first_error.unwrap_or_default()
        )));
    }
    Ok(())
}

/// Reads the records of `input` (each ended by `delimiter`, the last one maybe
/// not) and sends them on `lines`, until the input ends or the receiver stops.
fn read_records(
    input: Box<dyn Read + Send>,
    delimiter: u8,
    limit: usize,
    lines: &mpsc::Sender<Vec<u8>>,
) -> Result<(), CliError> {
    let mut reader = std::io::BufReader::new(input);
    let mut number = 0u64;
    loop {
        let mut line = Vec::new();
        // One byte more than the limit tells an over-long record from one that
        // fits exactly.
        let n = (&mut reader)
            .take(limit as u64 + 1)
            .read_until(delimiter, &mut line)
            .map_err(|e| CliError::failure(format!("reading the input: {e}")))?;
        if n == 0 {
            return Ok(());
        }
        number += 1;
        if line.last() == Some(&delimiter) {
            line.pop();
        } else if line.len() > limit {
            return Err(CliError::failure(format!(
                "record {number} is longer than {limit} bytes; it and what follows were not sent"
            ))
            .hint("raise --max-record-bytes, or check --delimiter"));
        }
        if lines.blocking_send(line).is_err() {
            return Ok(());
        }
    }
}

/// Hands every record read to the producer, passing its delivery to the waiter.
/// Records the producer refuses outright (too large, say) are counted in `refused`.
async fn send_all(
    producer: &Producer,
    args: &ProduceArgs,
    mut lines: mpsc::Receiver<Vec<u8>>,
    deliveries: &mpsc::Sender<DeliveryFuture>,
    refused: &mut Tally,
) -> Result<(), CliError> {
    while let Some(line) = lines.recv().await {
        match producer.send(record(args, &line)).await {
            Ok(delivery) => {
                if deliveries.send(delivery).await.is_err() {
                    return Err(CliError::failure("the delivery task stopped"));
                }
            }
            Err(e) => {
                refused.failed += 1;
                refused.first_error.get_or_insert_with(|| e.to_string());
            }
        }
    }
    Ok(())
}

/// The record of one input line.
fn record(args: &ProduceArgs, line: &[u8]) -> ProducerRecord {
    let mut r = ProducerRecord::new(args.topic.clone());
    let split = args.key_delimiter.as_deref().and_then(|d| {
        let d = d.as_bytes();
        line.windows(d.len().max(1))
            .position(|w| w == d)
            .map(|at| (&line[..at], &line[at + d.len()..]))
    });
    r = match split {
        Some((k, v)) => r
            .key(Bytes::copy_from_slice(k))
            .value(Bytes::copy_from_slice(v)),
        None => r.value(Bytes::copy_from_slice(line)),
    };
    for (k, v) in &args.headers {
        r = r.header(k.clone(), Bytes::copy_from_slice(v.as_bytes()));
    }
    if let Some(p) = args.partition {
        r = r.partition(p);
    }
    r
}
