//! Log compaction over TCP: a compacted topic keeps the latest record of every key
//! at its original offset, tombstones go after `delete.retention.ms`, records
//! without key are refused, and a restart reads the compacted (gapped) log back.

use std::collections::BTreeMap;
use std::time::Duration;

use baton_broker::{Broker, BrokerConfig, CleanerConfig};
use baton_protocol::record::{RecordBatch, RecordBatchBuilder};
use baton_protocol::ErrorCode;
use baton_testkit::wire::*;
use bytes::Bytes;

/// One record as read: offset, key, value (`None` a tombstone).
type Row = (i64, String, Option<String>);

fn cleaner() -> CleanerConfig {
    CleanerConfig {
        backoff_ms: 20,
        ..CleanerConfig::default()
    }
}

fn keyed(key: &str, value: Option<&str>) -> Bytes {
    let mut b = RecordBatchBuilder::new(1_000);
    b.push(1_000, Some(key.as_bytes()), value.map(str::as_bytes), &[]);
    b.finish()
}

async fn produce(c: &mut Client, topic: &str, records: Bytes) -> (i16, i64) {
    let resp = c.call(&produce_req(topic, 0, -1, records), 9).await;
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// Every batch of partition 0 from offset 0 to the high watermark, fetched in
/// several requests, each batch's CRC checked.
async fn fetch_batches(c: &mut Client, topic: &str) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        let resp = c.call(&fetch_req(topic, 0, at, 0, 0), 12).await;
        let p = &resp.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "fetch at {at}");
        if at >= p.high_watermark {
            return out;
        }
        let data = p.records.clone().unwrap_or_default();
        assert!(
            !data.is_empty(),
            "nothing served at {at} below {}",
            p.high_watermark
        );
        for batch in baton_protocol::record::batches(data) {
            let batch: RecordBatch = batch.unwrap();
            batch.verify_crc().unwrap();
            at = batch.last_offset() + 1;
            out.push(batch);
        }
    }
}

/// Every record of partition 0 from offset 0 to the high watermark
/// ([`fetch_batches`]), checking that offsets only grow.
async fn read_all(c: &mut Client, topic: &str) -> Vec<Row> {
    let mut out: Vec<Row> = Vec::new();
    for batch in fetch_batches(c, topic).await {
        for r in batch.records().unwrap() {
            let r = r.unwrap();
            assert!(out.last().is_none_or(|l| l.0 < r.offset));
            let s = |b: Bytes| String::from_utf8(b.to_vec()).unwrap();
            out.push((r.offset, s(r.key.unwrap()), r.value.map(s)));
        }
    }
    out
}

/// Polls `read_all` until `done` holds (at most 30 s).
async fn read_until(c: &mut Client, topic: &str, done: impl Fn(&[Row]) -> bool) -> Vec<Row> {
    for _ in 0..600 {
        let rows = read_all(c, topic).await;
        if done(&rows) {
            return rows;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "the cleaner did not get there: {:?}",
        read_all(c, topic).await
    );
}

/// Writes 120 overwrites of keys k0..k9 (k3 and k7 deleted at the end), then 12
/// records with keys of their own that push the data out of the active segment.
/// Returns what was written, by offset.
async fn write_changelog(c: &mut Client, topic: &str) -> BTreeMap<i64, (String, Option<String>)> {
    let mut written = BTreeMap::new();
    let mut put = |o: i64, k: &str, v: Option<&str>| {
        written.insert(o, (k.to_owned(), v.map(str::to_owned)));
    };
    for i in 0..120 {
        let (k, v) = (format!("k{}", i % 10), format!("v{i}"));
        let (code, o) = produce(c, topic, keyed(&k, Some(&v))).await;
        assert_eq!(code, 0);
        put(o, &k, Some(&v));
    }
    for k in ["k3", "k7"] {
        let (code, o) = produce(c, topic, keyed(k, None)).await;
        assert_eq!(code, 0);
        put(o, k, None);
    }
    for i in 0..12 {
        let k = format!("filler{i}");
        let (code, o) = produce(c, topic, keyed(&k, Some("f"))).await;
        assert_eq!(code, 0);
        put(o, &k, Some("f"));
    }
    written
}

/// The latest record of every key: what a compacted log must still hold.
fn latest(
    written: &BTreeMap<i64, (String, Option<String>)>,
) -> BTreeMap<String, (i64, Option<String>)> {
    let mut t = BTreeMap::new();
    for (o, (k, v)) in written {
        t.insert(k.clone(), (*o, v.clone()));
    }
    t
}

#[tokio::test]
async fn a_compacted_topic_keeps_the_latest_record_of_each_key_at_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = BrokerConfig::on_disk(dir.path()).with_cleaner(cleaner());
    let broker = Broker::start(cfg.clone()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let keep = topic_name("compact-keep");
    let expire = topic_name("compact-expire");
    for (t, retention) in [(&keep, "86400000"), (&expire, "300")] {
        let req = create_req(
            t,
            1,
            &[
                ("cleanup.policy", "compact"),
                ("segment.bytes", "600"),
                ("delete.retention.ms", retention),
                ("min.cleanable.dirty.ratio", "0.01"),
            ],
        );
        assert_eq!(c.call(&req, 7).await.topics[0].error_code, 0);
    }

    // A record without key is refused on a compacted topic, as Kafka does.
    let mut b = RecordBatchBuilder::new(0);
    b.push(0, None, Some(b"no key"), &[]);
    let (code, _) = produce(&mut c, &keep, b.finish()).await;
    assert_eq!(code, ErrorCode::InvalidRecord.code());

    let written = write_changelog(&mut c, &keep).await;
    write_changelog(&mut c, &expire).await;
    let table = latest(&written);
    let end = *written.keys().last().unwrap() + 1;

    // The kept tombstones: every key exactly once, at its latest offset.
    let rows = read_until(&mut c, &keep, |rows| rows.len() == table.len()).await;
    for (o, k, v) in &rows {
        assert_eq!(
            written.get(o),
            Some(&(k.clone(), v.clone())),
            "offset {o} unchanged"
        );
        assert_eq!(
            table.get(k),
            Some(&(*o, v.clone())),
            "only the latest of {k}"
        );
    }
    assert!(
        rows.iter().any(|r| r.1 == "k3" && r.2.is_none()),
        "tombstone kept"
    );

    // Past delete.retention.ms the tombstones go too.
    let live = table.values().filter(|(_, v)| v.is_some()).count();
    let rows = read_until(&mut c, &expire, |rows| rows.len() == live).await;
    assert!(rows.iter().all(|r| r.2.is_some()));

    // The high watermark and the log end did not move; the log still appends.
    let resp = c.call(&fetch_req(&keep, 0, 0, 0, 0), 12).await;
    assert_eq!(resp.responses[0].partitions[0].high_watermark, end);
    assert_eq!(
        produce(&mut c, &keep, keyed("k1", Some("new"))).await,
        (0, end)
    );
    let before = read_all(&mut c, &keep).await;
    assert_eq!(before.len(), table.len() + 1);
    broker.shutdown().await;

    // Restarted, the gapped log recovers whole.
    let broker = Broker::start(cfg.with_cleaner(CleanerConfig {
        enable: false,
        ..cleaner()
    }))
    .await
    .unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    assert_eq!(read_all(&mut c, &keep).await, before);
    broker.shutdown().await;
}

/// Records in partition 0 of `topic` (any key and value), fetched from offset 0.
async fn count_records(c: &mut Client, topic: &str) -> usize {
    fetch_batches(c, topic)
        .await
        .iter()
        .map(|batch| batch.records().unwrap().count())
        .sum()
}

#[tokio::test]
async fn consumer_offsets_are_compacted_and_reload_after_a_restart() {
    use baton_protocol::messages::*;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = BrokerConfig::on_disk(dir.path())
        .with_segment_bytes(1024)
        .with_cleaner(cleaner());
    cfg.groups.offsets_topic_partitions = 1;
    let broker = Broker::start(cfg.clone()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    create_topic(&mut c, "t", 2).await;
    let commit = |o: i64| OffsetCommitRequest {
        group_id: "g".into(),
        generation_id_or_member_epoch: -1,
        member_id: String::new(),
        topics: vec![OffsetCommitRequestTopic {
            name: "t".into(),
            partitions: (0..2)
                .map(|p| OffsetCommitRequestPartition {
                    partition_index: p,
                    committed_offset: o + p as i64,
                    committed_leader_epoch: -1,
                    committed_metadata: Some(String::new()),
                    ..Default::default()
                })
                .collect(),
        }],
        ..Default::default()
    };
    for o in 0..300 {
        let r = c.call(&commit(o), 8).await;
        let codes: Vec<i16> = r.topics[0]
            .partitions
            .iter()
            .map(|p| p.error_code)
            .collect();
        assert_eq!(codes, [0, 0]);
    }
    // 600 offset records, two keys: the cleaner leaves about one per key (plus the
    // active segment).
    for _ in 0..600 {
        if count_records(&mut c, "__consumer_offsets").await < 60 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let left = count_records(&mut c, "__consumer_offsets").await;
    assert!(left < 60, "{left} records left");
    let fetch = OffsetFetchRequest {
        group_id: "g".into(),
        topics: Some(vec![OffsetFetchRequestTopic {
            name: "t".into(),
            partition_indexes: vec![0, 1],
        }]),
        ..Default::default()
    };
    let offsets = |r: &OffsetFetchResponse| -> Vec<i64> {
        r.topics[0]
            .partitions
            .iter()
            .map(|p| p.committed_offset)
            .collect()
    };
    assert_eq!(offsets(&c.call(&fetch, 5).await), [299, 300]);
    broker.shutdown().await;

    // The coordinator replays the compacted log.
    let broker = Broker::start(cfg).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let mut got = Vec::new();
    for _ in 0..100 {
        let r = c.call(&fetch, 5).await;
        if r.error_code == 0 {
            got = offsets(&r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(got, [299, 300]);
    broker.shutdown().await;
}
