//! The group consumer against the plain consumer on the same data: one member of
//! a fresh group reads a pre-produced partition through
//! [`baton_kafka::GroupConsumer::recv`], and an assigned
//! [`baton_kafka::Consumer`] reads the same partition through
//! [`baton_kafka::Consumer::recv`]. Both are timed the same way, from their
//! first record on, so what differs is the per-record path alone (the group's
//! join and start-offset lookup, and the plain consumer's ListOffsets, are left
//! out).

use std::time::Instant;

use crate::measure::{self_cpu, Sample};

/// Reads `n` records of `topic` as the only member of group `group` (automatic
/// commits at the default interval). Time and CPU are counted from the first
/// record on, so the join and the start-offset lookup are left out.
pub async fn baton_group_consume(
    bootstrap: &str,
    topic: &str,
    group: &str,
    n: u64,
) -> Result<Sample, String> {
    let client = baton_kafka::Client::builder([bootstrap])
        .client_id("bench-baton-group")
        .build()
        .await
        .map_err(|e| format!("baton client: {e}"))?;
    let mut consumer = baton_kafka::GroupConsumer::builder(&client, group)
        .subscribe([topic])
        .build()
        .await
        .map_err(|e| format!("group consumer: {e}"))?;
    let first = consumer
        .recv()
        .await
        .map_err(|e| format!("group recv: {e}"))?;
    let (cpu0, t0) = (self_cpu(), Instant::now());
    let mut bytes = first.value.as_ref().map_or(0, |v| v.len() as u64);
    let mut got = 1u64;
    while got < n {
        let r = consumer
            .recv()
            .await
            .map_err(|e| format!("group recv: {e}"))?;
        bytes += r.value.as_ref().map_or(0, |v| v.len() as u64);
        got += 1;
    }
    let sample = Sample {
        records: got - 1,
        bytes,
        secs: t0.elapsed().as_secs_f64(),
        cpu_secs: (self_cpu() - cpu0).as_secs_f64(),
    };
    consumer
        .close()
        .await
        .map_err(|e| format!("group close: {e}"))?;
    Ok(sample)
}

/// Reads `n` records of partition 0 of `topic` from the earliest offset with the
/// plain consumer (default settings, the same the group consumer fetches with),
/// timed like [`baton_group_consume`]: from the first record on.
pub async fn baton_plain_consume(bootstrap: &str, topic: &str, n: u64) -> Result<Sample, String> {
    let client = baton_kafka::Client::builder([bootstrap])
        .client_id("bench-baton-plain")
        .build()
        .await
        .map_err(|e| format!("baton client: {e}"))?;
    let mut consumer = baton_kafka::Consumer::builder(&client)
        .assign(topic, 0, baton_kafka::StartOffset::Earliest)
        .build()
        .await
        .map_err(|e| format!("plain consumer: {e}"))?;
    let first = consumer
        .recv()
        .await
        .map_err(|e| format!("plain recv: {e}"))?;
    let (cpu0, t0) = (self_cpu(), Instant::now());
    let mut bytes = first.value.as_ref().map_or(0, |v| v.len() as u64);
    let mut got = 1u64;
    while got < n {
        let r = consumer
            .recv()
            .await
            .map_err(|e| format!("plain recv: {e}"))?;
        bytes += r.value.as_ref().map_or(0, |v| v.len() as u64);
        got += 1;
    }
    Ok(Sample {
        records: got - 1,
        bytes,
        secs: t0.elapsed().as_secs_f64(),
        cpu_secs: (self_cpu() - cpu0).as_secs_f64(),
    })
}
