//! What the clients do: produce with the idempotent producer while the members
//! of a consumer group consume, then read back with a plain consumer, recording
//! every outcome in the histories.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_broker::history::{parse_payload, payload, History, ProduceOutcome};
use baton_kafka::{
    Acks, Client, Consumer, GroupConsumer, OffsetReset, Producer, ProducerRecord, StartOffset,
};

use crate::scenario::{PARTITIONS, TOPIC};

/// Records produced per seed.
pub const RECORDS: u64 = 200;

/// Produces [`RECORDS`] records round-robin over the partitions with the
/// idempotent `acks=all` producer, recording every outcome.
pub async fn produce(client: &Client, history: &Arc<Mutex<History>>) {
    let producer = Producer::builder(client)
        .acks(Acks::All)
        .idempotence(true)
        .request_timeout(Duration::from_secs(5))
        .delivery_timeout(Duration::from_secs(60))
        .linger(Duration::from_millis(2))
        .build();
    let mut deliveries = tokio::task::JoinSet::new();
    for id in 0..RECORDS {
        let bytes = payload(id, 16 + (id % 32) as usize);
        let (_, sum) = parse_payload(&bytes).expect("own payload");
        let record = ProducerRecord::new(TOPIC)
            .partition((id % PARTITIONS as u64) as i32)
            .value(bytes);
        history
            .lock()
            .expect("history")
            .produced(id, sum, ProduceOutcome::Unknown);
        match producer.send(record).await {
            Ok(d) => {
                let history = history.clone();
                deliveries.spawn(async move {
                    let outcome = match d.await {
                        Ok(m) => ProduceOutcome::Acked {
                            partition: m.partition,
                            offset: m.offset,
                        },
                        Err(_) => ProduceOutcome::Failed,
                    };
                    history.lock().expect("history").produced(id, sum, outcome);
                });
            }
            Err(_) => history
                .lock()
                .expect("history")
                .produced(id, sum, ProduceOutcome::Failed),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    while deliveries.join_next().await.is_some() {}
    producer.close().await;
}

/// Reads every partition from the start until it holds at least as many records
/// as were acknowledged and nothing more arrives for a while.
pub async fn consume(client: &Client, history: &mut History) {
    let acked = history.check().acknowledged as usize;
    let mut builder = Consumer::builder(client).max_wait(Duration::from_millis(100));
    for p in 0..PARTITIONS {
        builder = builder.assign(TOPIC.to_owned(), p, StartOffset::Earliest);
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    // Building resolves the start offsets; while a partition has no leader it
    // fails after the request timeout, and an application tries again.
    let mut consumer = loop {
        match builder.clone().build().await {
            Ok(c) => break c,
            Err(e) if tokio::time::Instant::now() < deadline => {
                eprintln!("consumer: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => {
                eprintln!("consumer: {e}");
                return;
            }
        }
    };
    loop {
        let idle = if history.consumed_count() < acked {
            Duration::from_secs(20)
        } else {
            Duration::from_secs(1)
        };
        let wait = idle.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
        match tokio::time::timeout(wait, consumer.recv()).await {
            Ok(Ok(r)) => match r.value.as_deref().and_then(parse_payload) {
                Some((id, sum)) => history.consumed(r.partition, r.offset, id, sum),
                None => history.consumed(r.partition, r.offset, u64::MAX, 0),
            },
            Ok(Err(e)) => {
                eprintln!("consumer: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(_) => break,
        }
    }
}

/// The consumer group the simulation's members join.
pub const GROUP: &str = "sim-group";
/// Members of the group, consuming while the faults run.
pub const MEMBERS: usize = 2;

/// What the group's members saw, shared by them.
#[derive(Default)]
pub struct GroupLog {
    /// Every record a member received: partition, offset, id and checksum.
    pub consumed: Vec<(i32, i64, u64, u32)>,
    /// Broken invariants (a member's generation going backwards).
    pub violations: Vec<String>,
    /// The highest generation any member reached.
    pub max_generation: i32,
    /// Members built again after they kept failing.
    pub rebuilds: u64,
    /// Each member's state when it stopped (generation, assigned partitions with
    /// their positions, the errors `recv` returned and the last of them), written
    /// after the run's end was signalled so it does not change the schedule.
    pub final_states: Vec<String>,
}

/// One member of [`GROUP`] (classic protocol, automatic commits): consumes
/// [`TOPIC`] from its assignment, checking that its generation never goes
/// backwards, until `stop`. A member that keeps failing is closed and built
/// again (a new member).
pub async fn group_member(
    client: Client,
    n: usize,
    log: Arc<Mutex<GroupLog>>,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    while !*stop.borrow() {
        let built = GroupConsumer::builder(&client, GROUP)
            .subscribe([TOPIC])
            .offset_reset(OffsetReset::Earliest)
            .session_timeout(Duration::from_secs(6))
            .heartbeat_interval(Duration::from_millis(500))
            .auto_commit_interval(Duration::from_millis(200))
            .max_wait(Duration::from_millis(100))
            .build()
            .await;
        let mut member = match built {
            Ok(m) => m,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        let mut generation = -1;
        let mut failures = 0;
        let mut errors = 0u64;
        let mut last_error = String::new();
        while !*stop.borrow() && failures < 50 {
            match tokio::time::timeout(Duration::from_millis(200), member.recv()).await {
                Err(_) => {}
                Ok(Ok(r)) => {
                    failures = 0;
                    let (id, sum) = r
                        .value
                        .as_deref()
                        .and_then(parse_payload)
                        .unwrap_or((u64::MAX, 0));
                    let mut log = log.lock().expect("group log");
                    log.consumed.push((r.partition, r.offset, id, sum));
                }
                Ok(Err(e)) => {
                    failures += 1;
                    errors += 1;
                    last_error = e.to_string();
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            let now = member.generation();
            if now >= 0 {
                let mut log = log.lock().expect("group log");
                if now < generation {
                    log.violations.push(format!(
                        "member {n}: group generation went from {generation} to {now}"
                    ));
                }
                log.max_generation = log.max_generation.max(now);
                generation = generation.max(now);
            }
        }
        if *stop.borrow() {
            let positions: Vec<String> = member
                .assignment()
                .iter()
                .map(|tp| format!("p{} at {:?}", tp.partition, member.position(tp)))
                .collect();
            let stats = member.stats();
            let lag: Vec<String> = stats
                .lag
                .iter()
                .map(|(tp, l)| {
                    format!(
                        "p{} hw {} position {}",
                        tp.partition, l.high_watermark, l.position
                    )
                })
                .collect();
            log.lock().expect("group log").final_states.push(format!(
                "member {n}: generation {}, assigned [{}], last fetch responses [{}], \
                 {} fetches, {} rebalances, {errors} recv errors{}",
                member.generation(),
                positions.join(", "),
                lag.join(", "),
                stats.fetch_latency.count,
                stats.rebalances,
                if last_error.is_empty() {
                    String::new()
                } else {
                    format!(" (last: {last_error})")
                }
            ));
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), member.close()).await;
        if !*stop.borrow() {
            log.lock().expect("group log").rebuilds += 1;
        }
    }
}

/// `produced` (a history holding produce outcomes only) with every record the
/// group's members received.
pub fn group_history(produced: &History, log: &GroupLog) -> History {
    let mut h = produced.clone();
    for &(partition, offset, id, sum) in &log.consumed {
        h.consumed(partition, offset, id, sum);
    }
    h
}
