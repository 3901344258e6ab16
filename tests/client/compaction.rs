//! Baton's consumer on a compacted topic of the bundled broker: a table read back
//! from a changelog. The cleaner leaves offset gaps and, for a producer whose
//! records were all superseded, an empty batch; the consumer passes both.

use std::collections::BTreeMap;
use std::time::Duration;

use baton_broker::{Broker, BrokerConfig, CleanerConfig};
use baton_kafka::{Admin, Client, NewTopic, Producer, ProducerRecord, StartOffset};
use baton_testkit::client::read_partition_through;
use baton_testkit::topic_name;

/// Reads partition 0 from `start` through offset `last`: (offset, key, value).
async fn read(
    client: &Client,
    topic: &str,
    start: StartOffset,
    last: i64,
) -> Vec<(i64, String, Option<String>)> {
    let s = |b: bytes::Bytes| String::from_utf8(b.to_vec()).unwrap();
    read_partition_through(client, topic, start, last)
        .await
        .into_iter()
        .map(|r| (r.offset, s(r.key.unwrap()), r.value.map(s)))
        .collect()
}

#[tokio::test]
async fn a_table_is_read_back_from_a_compacted_changelog() {
    let broker = Broker::start(BrokerConfig::in_memory().with_cleaner(CleanerConfig {
        backoff_ms: 20,
        ..CleanerConfig::default()
    }))
    .await
    .unwrap();
    let client = Client::builder([broker.bootstrap()]).build().await.unwrap();
    let topic = topic_name("changelog");
    Admin::new(&client)
        .create_topics([NewTopic::new(topic.clone(), 1, 1)
            .config("cleanup.policy", "compact")
            .config("min.cleanable.dirty.ratio", "0.01")])
        .await
        .unwrap();

    let mut written: BTreeMap<i64, (String, Option<String>)> = BTreeMap::new();
    // A first producer's records are all overwritten later: its last batch stays
    // as an empty batch the consumer must pass.
    for (round, n) in [(0, 10), (1, 200)] {
        let producer = Producer::builder(&client).batch_size(256).build();
        let mut sent = Vec::new();
        for i in 0..n {
            let (k, v) = (format!("k{}", i % 10), format!("r{round}-{i}"));
            let r = ProducerRecord::new(topic.clone())
                .partition(0)
                .key(k.clone())
                .value(v.clone());
            sent.push((k, Some(v), producer.send(r).await.unwrap()));
        }
        if round == 1 {
            let r = ProducerRecord::new(topic.clone()).partition(0).key("k4");
            sent.push(("k4".to_owned(), None, producer.send(r).await.unwrap()));
            // The log's last batch is never cleaned: end with a key of its own.
            producer.flush().await;
            let r = ProducerRecord::new(topic.clone())
                .partition(0)
                .key("end")
                .value("x");
            sent.push((
                "end".to_owned(),
                Some("x".to_owned()),
                producer.send(r).await.unwrap(),
            ));
        }
        for (k, v, d) in sent {
            written.insert(d.await.unwrap().offset, (k, v));
        }
        producer.close().await;
    }
    let last = *written.keys().last().unwrap();
    let mut table = BTreeMap::new();
    for (o, (k, v)) in &written {
        table.insert(k.clone(), (*o, v.clone()));
    }

    let mut rows = Vec::new();
    for _ in 0..600 {
        rows = read(&client, &topic, StartOffset::Earliest, last).await;
        if rows.len() == table.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(rows.len(), table.len(), "the cleaner compacted: {rows:?}");
    let mut read_back = BTreeMap::new();
    for (o, k, v) in rows {
        assert_eq!(
            written.get(&o),
            Some(&(k.clone(), v.clone())),
            "offset {o} as written"
        );
        read_back.insert(k, (o, v));
    }
    assert_eq!(read_back, table);

    // Starting inside a gap reads on from the next record that is left.
    let removed = (0..last)
        .find(|o| !table.values().any(|(t, _)| t == o))
        .unwrap();
    let next = table
        .values()
        .map(|(o, _)| *o)
        .filter(|o| *o > removed)
        .min()
        .unwrap();
    let from_gap = read(&client, &topic, StartOffset::Offset(removed), last).await;
    assert_eq!(from_gap[0].0, next);
    broker.shutdown().await;
}
