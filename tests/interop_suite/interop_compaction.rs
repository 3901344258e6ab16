//! kafka-python reads a compacted topic of `baton-broker`: the cleaner removed
//! superseded records (so offsets skip) and kept tombstones; kafka-python must
//! read exactly the latest record of every key, at its original offset, and
//! reach the end of the partition.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use baton_broker::{Broker, BrokerConfig, CleanerConfig};
use baton_kafka::{Admin, Consumer, NewTopic, Producer, ProducerRecord, StartOffset};
use baton_testkit::seed;
use baton_testkit::tools::{python, run, scripts_dir};

const KEYS: u64 = 10;

#[test]
fn kafka_python_reads_a_compacted_topic() {
    let seed = seed();
    let runtime = crate::interop_java::runtime();
    baton_testkit::init_tracing();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = BrokerConfig::on_disk(dir.path()).with_cleaner(CleanerConfig {
        backoff_ms: 50,
        ..CleanerConfig::default()
    });
    let broker = runtime
        .block_on(Broker::start(config))
        .expect("broker starts");
    let bootstrap = broker.bootstrap();
    let topic = format!("interop-compacted-{seed}");
    // Key `i % KEYS` gets value `i`; keys 3 and 7 end with a tombstone; 20
    // records of keys of their own follow, so the data leaves the active segment.
    let (expected, end) = runtime.block_on(async {
        let client = baton_kafka::Client::builder([bootstrap.as_str()])
            .client_id("interop-baton-compaction")
            .build()
            .await
            .expect("Baton client connects");
        Admin::new(&client)
            .create_topics([NewTopic::new(topic.clone(), 1, 1)
                .config("cleanup.policy", "compact")
                .config("segment.bytes", "1024")
                .config("min.cleanable.dirty.ratio", "0.01")])
            .await
            .expect("topic created");
        let producer = Producer::builder(&client).batch_size(256).build();
        let mut sent = Vec::new();
        for i in 0..300u64 {
            let r = ProducerRecord::new(topic.as_str())
                .partition(0)
                .key((i % KEYS).to_string())
                .value(i.to_string());
            sent.push(((i % KEYS) as i64, i as i64, producer.send(r).await.unwrap()));
        }
        for k in [3u64, 7] {
            let r = ProducerRecord::new(topic.as_str())
                .partition(0)
                .key(k.to_string());
            sent.push((k as i64, -1, producer.send(r).await.unwrap()));
        }
        for i in 0..20u64 {
            let k = 1000 + i;
            let r = ProducerRecord::new(topic.as_str())
                .partition(0)
                .key(k.to_string())
                .value(k.to_string());
            sent.push((k as i64, k as i64, producer.send(r).await.unwrap()));
        }
        let mut latest: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
        let mut end = 0;
        for (k, v, d) in sent {
            let md = d.await.expect("delivered");
            latest.insert(k, (md.offset, v));
            end = end.max(md.offset + 1);
        }
        producer.close().await;
        // Wait until Baton's consumer sees only the latest record of every key.
        let mut rows = 0;
        for _ in 0..600 {
            let mut c = Consumer::builder(&client)
                .assign(topic.clone(), 0, StartOffset::Earliest)
                .max_wait(Duration::from_millis(50))
                .build()
                .await
                .unwrap();
            rows = 0;
            loop {
                let r = tokio::time::timeout(Duration::from_secs(30), c.recv())
                    .await
                    .expect("records arrive")
                    .expect("consume");
                rows += 1;
                if r.offset + 1 >= end {
                    break;
                }
            }
            if rows == latest.len() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(
            rows,
            latest.len(),
            "seed {seed}: the cleaner compacted the topic"
        );
        (latest, end)
    });

    let what = format!("kafka_python_client.py read-table {topic}");
    let mut cmd = Command::new(python());
    cmd.arg(scripts_dir().join("kafka_python_client.py"))
        .args([
            "read-table",
            bootstrap.as_str(),
            topic.as_str(),
            &end.to_string(),
        ])
        .current_dir(scripts_dir())
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("INTEROP_CLIENT_TIMEOUT_S", "90");
    let out = run(&mut cmd, &what, Duration::from_secs(120))
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    assert!(out.status.success(), "seed {seed}: {}", out.describe(&what));
    let line = out
        .stdout
        .lines()
        .rev()
        .find(|l| l.starts_with("RESULT "))
        .unwrap_or_else(|| panic!("seed {seed}: no RESULT; {}", out.describe(&what)));
    let ints = |key: &str| -> Vec<i64> {
        let needle = format!("\"{key}\": [");
        let start = line.find(&needle).expect(key) + needle.len();
        let rest = &line[start..];
        let list = &rest[..rest.find(']').expect("list end")];
        list.split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|s| s.trim().parse().expect("integer"))
            .collect()
    };
    assert!(
        line.contains("\"ok\": true"),
        "seed {seed}: kafka-python reached the end: {line}"
    );
    let (offsets, keys, values) = (ints("offsets"), ints("keys"), ints("values"));
    let mut read = BTreeMap::new();
    for ((o, k), v) in offsets.iter().zip(&keys).zip(&values) {
        assert!(
            read.insert(*k, (*o, *v)).is_none(),
            "seed {seed}: key {k} read twice"
        );
    }
    assert_eq!(read, expected, "seed {seed}: kafka-python's table");
    runtime.block_on(broker.shutdown());
}
