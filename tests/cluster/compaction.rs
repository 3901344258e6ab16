//! Compaction in a cluster: every replica cleans its own log, a follower that was
//! down catches up from a compacted leader (its fetches see offsets with gaps),
//! and Baton's consumer reading from the start builds the same table from any
//! leader: the latest value of every key at its original offset, judged by the
//! compaction-aware history check.

use std::collections::BTreeMap;
use std::time::Duration;

use baton_broker::history::{parse_payload, payload, History, ProduceOutcome};
use baton_broker::{CleanerConfig, Cluster};
use baton_kafka::{Acks, Admin, NewTopic, Producer, ProducerRecord, StartOffset};
use baton_protocol::record::RecordBatch;
use baton_testkit::client::read_partition_through;
use baton_testkit::cluster::client;
use baton_testkit::topic_name;
use bytes::Bytes;

const KEYS: u64 = 20;
const WRITES: u64 = 400;

/// The records a replica stores below `end`: offset -> (key, value).
fn replica_table(
    cluster: &Cluster,
    node: i32,
    topic: &str,
    end: i64,
) -> BTreeMap<i64, (Bytes, Option<Bytes>)> {
    let mut out = BTreeMap::new();
    for b in cluster
        .stored_batches(node, topic, 0, end)
        .expect("replica readable")
    {
        let b = RecordBatch::parse(b).unwrap();
        b.verify_crc().unwrap();
        if b.is_control() {
            continue;
        }
        for r in b.records().unwrap() {
            let r = r.unwrap();
            out.insert(r.offset, (r.key.unwrap(), r.value));
        }
    }
    out
}

/// Reads partition 0 from the start up to `last` (inclusive) with Baton's
/// consumer: each record's (offset, key, value).
async fn read_from_start(
    client: &baton_kafka::Client,
    topic: &str,
    last: i64,
) -> Vec<(i64, Bytes, Option<Bytes>)> {
    read_partition_through(client, topic, StartOffset::Earliest, last)
        .await
        .into_iter()
        .map(|r| (r.offset, r.key.unwrap(), r.value))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replica_compacts_and_readers_see_one_table() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::builder()
        .brokers(3)
        .data_dir(dir.path())
        .cleaner(CleanerConfig {
            backoff_ms: 50,
            ..CleanerConfig::default()
        })
        .start()
        .await
        .expect("cluster starts");
    let client = client(&cluster).await;
    let topic = topic_name("compacted");
    Admin::new(&client)
        .create_topics([NewTopic::new(topic.clone(), 1, 3)
            .config("cleanup.policy", "compact")
            .config("segment.bytes", "1024")
            .config("min.cleanable.dirty.ratio", "0.01")])
        .await
        .expect("topic created");
    cluster
        .wait_for(Duration::from_secs(30), |c| {
            c.partition_state(&topic, 0).is_some_and(|v| v.leader >= 0)
        })
        .await
        .unwrap();
    let view = cluster.partition_state(&topic, 0).unwrap();
    let follower = *view.replicas.iter().find(|r| **r != view.leader).unwrap();
    // One follower is down while the log is written and compacted.
    cluster.node(follower).kill();

    // Small batches, so that the log spans many segments.
    let producer = Producer::builder(&client)
        .acks(Acks::All)
        .batch_size(512)
        .build();
    let mut history = History::new();
    let mut sent = Vec::new();
    for id in 0..WRITES {
        let key = format!("k{}", id % KEYS);
        let v = Bytes::from(payload(id, 16));
        let r = ProducerRecord::new(topic.clone())
            .partition(0)
            .key(key.clone())
            .value(v);
        sent.push((Some(id), key, producer.send(r).await.unwrap()));
    }
    for k in ["k5", "k15"] {
        let r = ProducerRecord::new(topic.clone()).partition(0).key(k);
        sent.push((None, k.to_owned(), producer.send(r).await.unwrap()));
    }
    for id in WRITES..WRITES + 30 {
        let key = format!("filler{id}");
        let r = ProducerRecord::new(topic.clone())
            .partition(0)
            .key(key.clone())
            .value(Bytes::from(payload(id, 16)));
        sent.push((Some(id), key, producer.send(r).await.unwrap()));
    }
    let mut expected = BTreeMap::new();
    let mut last = 0;
    for (id, key, d) in sent {
        let md = d.await.expect("acks=all delivery");
        last = last.max(md.offset);
        match id {
            Some(id) => {
                let (_, sum) = parse_payload(&payload(id, 16)).unwrap();
                let outcome = ProduceOutcome::Acked {
                    partition: 0,
                    offset: md.offset,
                };
                history.produced_keyed(id, sum, key.as_bytes(), outcome);
                expected.insert(key, Some(id));
            }
            None => {
                history.tombstone(0, md.offset, key.as_bytes());
                expected.insert(key, None);
            }
        }
    }
    producer.close().await;
    let end = last + 1;

    // The running replicas compact their own logs.
    let running: Vec<i32> = view
        .replicas
        .iter()
        .copied()
        .filter(|r| *r != follower)
        .collect();
    let compacted =
        |c: &Cluster, node: i32| replica_table(c, node, &topic, end).len() < (WRITES / 2) as usize;
    cluster
        .wait_for(Duration::from_secs(60), |c| {
            running.iter().all(|n| compacted(c, *n))
        })
        .await
        .unwrap_or_else(|_| panic!("replicas compact"));

    // The follower comes back and replicates the compacted leader, gaps and all,
    // then compacts too.
    cluster.node(follower).restart().await.unwrap();
    cluster
        .wait_for(Duration::from_secs(60), |c| {
            c.partition_state(&topic, 0).is_some_and(|v| {
                v.isr.len() == 3 && v.replica(follower).is_some_and(|r| r.log_end_offset >= end)
            }) && compacted(c, follower)
        })
        .await
        .unwrap_or_else(|_| {
            panic!(
                "follower catches up: {:?}",
                cluster.partition_state(&topic, 0)
            )
        });

    // Every replica holds the same table: the latest record of each key, where it
    // was written.
    let table = |rows: &BTreeMap<i64, (Bytes, Option<Bytes>)>| {
        let mut t = BTreeMap::new();
        for (k, v) in rows.values() {
            let key = String::from_utf8(k.to_vec()).unwrap();
            t.insert(key, v.as_ref().map(|v| parse_payload(v).unwrap().0));
        }
        t
    };
    for node in &view.replicas {
        let rows = replica_table(&cluster, *node, &topic, end);
        assert_eq!(table(&rows), expected, "node {node}");
    }

    // Baton's consumer from the start, before and after the leader changes.
    for round in 0..2 {
        let rows = read_from_start(&client, &topic, last).await;
        let mut seen = History::new();
        let mut t = BTreeMap::new();
        for (offset, key, value) in &rows {
            let key = String::from_utf8(key.to_vec()).unwrap();
            let id = value.as_ref().map(|v| {
                let (id, sum) = parse_payload(v).unwrap();
                seen.consumed(0, *offset, id, sum);
                history.consumed(0, *offset, id, sum);
                id
            });
            t.insert(key, id);
        }
        assert_eq!(t, expected, "round {round}: the table read back");
        let report = history.check_compacted();
        assert!(report.passed(), "round {round}: {report}");
        assert!(report.compacted > 0, "round {round}: {report}");
        assert!(
            !history.check().passed(),
            "without compaction the gaps would be losses"
        );
        if round == 0 {
            let leader = cluster.partition_state(&topic, 0).unwrap().leader;
            cluster.node(leader).kill();
            cluster
                .wait_for(Duration::from_secs(60), |c| {
                    c.partition_state(&topic, 0)
                        .is_some_and(|v| v.leader >= 0 && v.leader != leader)
                })
                .await
                .unwrap();
        }
    }
    cluster.shutdown().await;
}
