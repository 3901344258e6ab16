//! Produce stalls on a 3-node in-process cluster: leader hard kills and graceful
//! rolling restarts while a paced, idempotent acks=all producer runs.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use baton_broker::Cluster;
use baton_kafka::{Acks, Admin, Client, Producer, ProducerRecord};
use bytes::Bytes;
use tokio::sync::mpsc;

use crate::measure::{median, quantile};

/// Settings of the failover bench.
#[derive(Debug, Clone, Copy)]
pub struct FailoverOptions {
    /// Events of each kind.
    pub runs: usize,
    /// Records per second the producer is paced at.
    pub rate: u64,
    /// The controller's broker session timeout.
    pub session_timeout: Duration,
}

struct Outcome {
    intended: Instant,
    acked: Instant,
    ok: bool,
}

/// Runs the bench and prints its table.
pub async fn run(o: FailoverOptions) -> Result<(), String> {
    let mut cluster = Cluster::builder()
        .brokers(3)
        .session_timeout(o.session_timeout)
        .start()
        .await
        .map_err(|e| format!("cluster: {e}"))?;
    let client = Client::builder(cluster.bootstrap_servers())
        .client_id("bench-failover")
        .build()
        .await
        .map_err(|e| format!("client: {e}"))?;
    let topic = "failover";
    Admin::new(&client)
        .create_topic(topic, 1, 3)
        .await
        .map_err(|e| format!("create topic: {e}"))?;
    let full_isr = |c: &Cluster| {
        c.partition_state(topic, 0)
            .is_some_and(|v| v.isr.len() == 3)
    };
    cluster
        .wait_for(Duration::from_secs(30), full_isr)
        .await
        .map_err(|_| "ISR never reached 3")?;

    let producer = Producer::builder(&client).acks(Acks::All).build();
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, baton_kafka::DeliveryFuture)>();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let send_errors = Arc::new(Mutex::new(0u64));
    let pacer = {
        let (producer, stop, send_errors) = (producer.clone(), stop.clone(), send_errors.clone());
        let period = Duration::from_nanos(1_000_000_000 / o.rate.max(1));
        tokio::spawn(async move {
            let value = Bytes::from(vec![b'f'; 100]);
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let intended = tick.tick().await.into_std();
                let rec = ProducerRecord::new(topic).partition(0).value(value.clone());
                match producer.send(rec).await {
                    Ok(d) => {
                        let _ = tx.send((intended, d));
                    }
                    Err(_) => *send_errors.lock().expect("lock") += 1,
                }
            }
        })
    };
    let collector = tokio::spawn(async move {
        let mut out = Vec::new();
        while let Some((intended, d)) = rx.recv().await {
            let ok = d.await.is_ok();
            out.push(Outcome {
                intended,
                acked: Instant::now(),
                ok,
            });
        }
        out
    });

    let mut events: Vec<(&'static str, Instant, Instant)> = Vec::new();
    // Per node stop of the rolling restarts: (round, node, led the partition, window).
    let mut stops: Vec<(usize, i32, bool, Instant, Instant)> = Vec::new();
    tokio::time::sleep(Duration::from_secs(2)).await;
    for i in 0..o.runs {
        // Hard kill of the leader.
        let leader = cluster
            .partition_state(topic, 0)
            .map(|v| v.leader)
            .ok_or("no partition state")?;
        let t0 = Instant::now();
        cluster.node(leader).kill();
        cluster
            .wait_for(Duration::from_secs(120), |c| {
                c.partition_state(topic, 0)
                    .is_some_and(|v| v.leader != leader && v.leader != -1)
            })
            .await
            .map_err(|_| "no new leader after a kill")?;
        let elected = t0.elapsed();
        tokio::time::sleep(Duration::from_secs(2)).await;
        events.push(("leader hard kill", t0, Instant::now()));
        cluster
            .node(leader)
            .restart()
            .await
            .map_err(|e| format!("restart: {e}"))?;
        cluster
            .wait_for(Duration::from_secs(120), full_isr)
            .await
            .map_err(|_| "ISR did not recover after a kill")?;
        eprintln!(
            "  kill {}: node {leader} killed, new leader after {} ms",
            i + 1,
            elected.as_millis()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;

        // Graceful rolling restart of every node.
        let t0 = Instant::now();
        for id in cluster.node_ids() {
            let was_leader = cluster
                .partition_state(topic, 0)
                .is_some_and(|v| v.leader == id);
            let t_node = Instant::now();
            cluster.node(id).stop().await;
            cluster
                .node(id)
                .restart()
                .await
                .map_err(|e| format!("restart: {e}"))?;
            cluster
                .wait_for(Duration::from_secs(120), full_isr)
                .await
                .map_err(|_| "ISR did not recover during a rolling restart")?;
            let kind = if was_leader {
                "rolling restart: the leader's node"
            } else {
                "rolling restart: a follower's node"
            };
            events.push((kind, t_node, Instant::now()));
            stops.push((i + 1, id, was_leader, t_node, Instant::now()));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        events.push(("graceful rolling restart", t0, Instant::now()));
        eprintln!(
            "  rolling restart {}: {} ms for 3 nodes",
            i + 1,
            t0.elapsed().as_millis()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    pacer.await.map_err(|e| format!("pacer: {e}"))?;
    producer.flush().await;
    let outcomes = collector.await.map_err(|e| format!("collector: {e}"))?;
    producer.close().await;
    cluster.shutdown().await;

    println!();
    println!(
        "### Failover: produce latency while events run (acks=all, idempotent, {} records/s paced, session timeout {} ms)",
        o.rate,
        o.session_timeout.as_millis()
    );
    println!();
    println!("| event | events | records in windows | p50 ms | p99 ms | max ms | median of per-event max ms | errors |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for kind in [
        "leader hard kill",
        "graceful rolling restart",
        "rolling restart: the leader's node",
        "rolling restart: a follower's node",
    ] {
        let mut all = Vec::new();
        let mut maxes = Vec::new();
        let mut errors = 0u64;
        let mut count = 0usize;
        for (_, start, end) in events.iter().filter(|e| e.0 == kind) {
            let mut worst = 0f64;
            for r in outcomes
                .iter()
                .filter(|r| r.intended >= *start && r.intended <= *end)
            {
                let ms = r.acked.duration_since(r.intended).as_secs_f64() * 1e3;
                all.push(ms);
                worst = worst.max(ms);
                if !r.ok {
                    errors += 1;
                }
            }
            maxes.push(worst);
            count += 1;
        }
        all.sort_by(|a, b| a.total_cmp(b));
        println!(
            "| {kind} | {count} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {errors} |",
            all.len(),
            quantile(&all, 0.5),
            quantile(&all, 0.99),
            all.last().copied().unwrap_or(f64::NAN),
            median(maxes),
        );
    }
    println!();
    println!("Worst produce latency per node stop (records intended in the window from the stop until the ISR is full again):");
    println!();
    for (round, id, led, start, end) in &stops {
        let mut worst = 0f64;
        let mut worst_at = 0f64;
        let mut n = 0usize;
        for r in outcomes
            .iter()
            .filter(|r| r.intended >= *start && r.intended <= *end)
        {
            let ms = r.acked.duration_since(r.intended).as_secs_f64() * 1e3;
            n += 1;
            if ms > worst {
                worst = ms;
                worst_at = r.intended.duration_since(*start).as_secs_f64() * 1e3;
            }
        }
        println!(
            "  round {round}, node {id} ({}): {n} records, worst {worst:.1} ms (intended {worst_at:.0} ms after the stop began), window {} ms",
            if *led { "leader" } else { "follower" },
            end.duration_since(*start).as_millis()
        );
    }
    let total_errors = outcomes.iter().filter(|r| !r.ok).count();
    println!();
    println!(
        "{} records sent in all, {} delivery errors, {} send errors",
        outcomes.len(),
        total_errors,
        send_errors.lock().expect("lock")
    );
    Ok(())
}
