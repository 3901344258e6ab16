//! The group consumer's read path: one member of a fresh group reads a
//! pre-produced partition through [`baton_kafka::GroupConsumer::recv`].

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
