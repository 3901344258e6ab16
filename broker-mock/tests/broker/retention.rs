//! The log's lifecycle over raw frames: DeleteRecords (key 21) moves the log start
//! offset, ListOffsets EARLIEST and Fetch's OFFSET_OUT_OF_RANGE follow it, the start
//! survives a restart; retention by time and size deletes old data on a single
//! node; and in a 3-node cluster every replica moves its log start (DeleteRecords
//! and retention), a new leader keeps it, and reads below it are out of range.

use std::time::Duration;

use baton_broker::{Broker, BrokerConfig, Cluster, LogRetention};
use baton_protocol::messages::*;
use baton_protocol::ErrorCode;
use baton_testkit::wire::*;

const LONG: Duration = Duration::from_secs(60);

fn code(c: i16) -> ErrorCode {
    ErrorCode::from_code(c)
}

fn delete_req(topic: &str, partition: i32, offset: i64) -> DeleteRecordsRequest {
    DeleteRecordsRequest {
        topics: vec![DeleteRecordsTopic {
            name: topic.into(),
            partitions: vec![DeleteRecordsPartition {
                partition_index: partition,
                offset,
            }],
        }],
        timeout_ms: 30_000,
    }
}

/// DeleteRecords of one partition: (error, low watermark).
async fn delete_records(
    c: &mut Client,
    topic: &str,
    offset: i64,
    version: i16,
) -> (ErrorCode, i64) {
    let resp = c.call(&delete_req(topic, 0, offset), version).await;
    assert_eq!(resp.topics.len(), 1);
    assert_eq!(resp.topics[0].name, topic);
    let p = &resp.topics[0].partitions[0];
    assert_eq!(p.partition_index, 0);
    (code(p.error_code), p.low_watermark)
}

/// ListOffsets of partition 0 at `ts` (-2 earliest, -1 latest): (error, offset).
async fn list_offset(c: &mut Client, topic: &str, ts: i64) -> (ErrorCode, i64) {
    let req = ListOffsetsRequest {
        replica_id: -1,
        isolation_level: 0,
        topics: vec![ListOffsetsTopic {
            name: topic.into(),
            partitions: vec![ListOffsetsPartition {
                partition_index: 0,
                current_leader_epoch: -1,
                timestamp: ts,
            }],
        }],
    };
    let resp = c.call(&req, 7).await;
    let p = &resp.topics[0].partitions[0];
    (code(p.error_code), p.offset)
}

/// Fetch of partition 0 at `offset`: (error, log start offset, values).
async fn fetch_at(c: &mut Client, topic: &str, offset: i64) -> (ErrorCode, i64, Vec<String>) {
    let resp = c.call(&fetch_req(topic, 0, offset, 0, 0), 12).await;
    let p = &resp.responses[0].partitions[0];
    (code(p.error_code), p.log_start_offset, values(&p.records))
}

async fn produce(c: &mut Client, topic: &str, ts: i64, vals: &[&str]) {
    let resp = c
        .call(&produce_req(topic, 0, -1, records(ts, vals)), 9)
        .await;
    let p = &resp.responses[0].partition_responses[0];
    assert_eq!(code(p.error_code), ErrorCode::None);
}

#[tokio::test]
async fn delete_records_moves_the_log_start_and_it_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = BrokerConfig::on_disk(dir.path());
    let broker = Broker::start(cfg.clone()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("delrec");
    let resp = c
        .call(&create_req(&topic, 1, &[("segment.bytes", "1024")]), 7)
        .await;
    assert_eq!(resp.topics[0].error_code, 0);
    let now = now_ms();
    for i in 0..4 {
        produce(&mut c, &topic, now + i, &["a", "b", "c"]).await; // offsets 3i..3i+2
    }

    // Inside the second batch: the batch holding offset 5 is still served, from 5.
    assert_eq!(
        delete_records(&mut c, &topic, 5, 0).await,
        (ErrorCode::None, 5)
    );
    assert_eq!(list_offset(&mut c, &topic, -2).await, (ErrorCode::None, 5));
    let (err, start, _) = fetch_at(&mut c, &topic, 4).await;
    assert_eq!((err, start), (ErrorCode::OffsetOutOfRange, 5));
    let (err, start, vals) = fetch_at(&mut c, &topic, 5).await;
    assert_eq!((err, start), (ErrorCode::None, 5));
    assert_eq!(
        vals[..3],
        ["a", "b", "c"],
        "the batch holding offset 5, whole"
    );
    // Timestamp lookups start at the log start too: offsets 0..4 (stamped now,
    // +1, +2, +1, +2) are below it, offset 5 is stamped now + 3.
    let lo = |ts: i64| ListOffsetsRequest {
        replica_id: -1,
        isolation_level: 0,
        topics: vec![ListOffsetsTopic {
            name: topic.clone(),
            partitions: vec![ListOffsetsPartition {
                partition_index: 0,
                current_leader_epoch: -1,
                timestamp: ts,
            }],
        }],
    };
    for ts in [now, now + 1, now + 3] {
        let resp = c.call(&lo(ts), 7).await;
        let p = &resp.topics[0].partitions[0];
        assert_eq!(
            (code(p.error_code), p.offset, p.timestamp),
            (ErrorCode::None, 5, now + 3),
            "timestamp {ts}"
        );
    }
    // Lower offsets change nothing; past the high watermark is out of range.
    assert_eq!(
        delete_records(&mut c, &topic, 2, 1).await,
        (ErrorCode::None, 5)
    );
    assert_eq!(
        delete_records(&mut c, &topic, 13, 2).await.0,
        ErrorCode::OffsetOutOfRange
    );
    assert_eq!(
        delete_records(&mut c, &topic, -7, 2).await.0,
        ErrorCode::OffsetOutOfRange
    );
    // -1 means the high watermark.
    assert_eq!(
        delete_records(&mut c, &topic, -1, 2).await,
        (ErrorCode::None, 12)
    );
    assert_eq!(list_offset(&mut c, &topic, -2).await, (ErrorCode::None, 12));
    assert_eq!(list_offset(&mut c, &topic, -1).await, (ErrorCode::None, 12));
    assert_eq!(
        fetch_at(&mut c, &topic, 11).await.0,
        ErrorCode::OffsetOutOfRange
    );
    // Unknown partitions and topics.
    let resp = c.call(&delete_req(&topic, 7, 0), 2).await;
    assert_eq!(
        code(resp.topics[0].partitions[0].error_code),
        ErrorCode::UnknownTopicOrPartition
    );
    assert_eq!(
        delete_records(&mut c, "no-such-topic", 0, 2).await.0,
        ErrorCode::UnknownTopicOrPartition
    );
    // A compact-only topic refuses, as Kafka does.
    let compacted = topic_name("delrec-compact");
    let resp = c
        .call(
            &create_req(&compacted, 1, &[("cleanup.policy", "compact")]),
            7,
        )
        .await;
    assert_eq!(resp.topics[0].error_code, 0);
    produce(&mut c, &compacted, 1_000, &["x"]).await;
    assert_eq!(
        delete_records(&mut c, &compacted, 1, 2).await.0,
        ErrorCode::PolicyViolation
    );
    // Writes go on past the start, and the start survives a restart.
    produce(&mut c, &topic, 2_000, &["d"]).await;
    drop(c);
    broker.shutdown().await;
    let broker = Broker::start(cfg).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    assert_eq!(list_offset(&mut c, &topic, -2).await, (ErrorCode::None, 12));
    assert_eq!(list_offset(&mut c, &topic, -1).await, (ErrorCode::None, 13));
    let (err, start, vals) = fetch_at(&mut c, &topic, 12).await;
    assert_eq!(
        (err, start, vals),
        (ErrorCode::None, 12, vec!["d".to_owned()])
    );
    assert_eq!(
        fetch_at(&mut c, &topic, 3).await.0,
        ErrorCode::OffsetOutOfRange
    );
    broker.shutdown().await;
}

/// Polls ListOffsets EARLIEST until it reaches `at_least`.
async fn await_start(c: &mut Client, topic: &str, at_least: i64) -> i64 {
    let deadline = tokio::time::Instant::now() + LONG;
    loop {
        let (err, start) = list_offset(c, topic, -2).await;
        assert_eq!(err, ErrorCode::None);
        if start >= at_least {
            return start;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "log start stuck at {start}, waiting for {at_least}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn fast_retention() -> LogRetention {
    LogRetention {
        check_interval: Duration::from_millis(20),
        ..LogRetention::default()
    }
}

#[tokio::test]
async fn retention_by_time_and_size_deletes_old_data_on_disk_and_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    // The log start retention by size leaves (see below): on disk 14, in memory 15.
    let modes = [
        (BrokerConfig::on_disk(dir.path()), 14),
        (BrokerConfig::in_memory(), 15),
    ];
    for (mut cfg, size_start) in modes {
        cfg.retention = fast_retention();
        let broker = Broker::start(cfg).await.unwrap();
        let mut c = Client::connect(broker.local_addr()).await;

        // By time: records stamped long ago go once they are committed; records
        // stamped now stay.
        let by_time = topic_name("ret-time");
        let configs = [("segment.bytes", "1024"), ("retention.ms", "60000")];
        let resp = c.call(&create_req(&by_time, 1, &configs), 7).await;
        assert_eq!(resp.topics[0].error_code, 0);
        for i in 0..6 {
            produce(&mut c, &by_time, 1_000 + i, &[&"old".repeat(100)]).await;
        }
        let now = now_ms();
        assert_eq!(await_start(&mut c, &by_time, 6).await, 6);
        produce(&mut c, &by_time, now, &["new"]).await;
        let (err, start, vals) = fetch_at(&mut c, &by_time, 6).await;
        assert_eq!(
            (err, start, vals),
            (ErrorCode::None, 6, vec!["new".to_owned()])
        );
        assert_eq!(
            fetch_at(&mut c, &by_time, 0).await.0,
            ErrorCode::OffsetOutOfRange
        );

        // By size: the oldest data goes until what is left is under the limit.
        let by_size = topic_name("ret-size");
        let configs = [("segment.bytes", "1024"), ("retention.bytes", "2048")];
        let resp = c.call(&create_req(&by_size, 1, &configs), 7).await;
        assert_eq!(resp.topics[0].error_code, 0);
        let value = "s".repeat(400);
        for i in 0..20 {
            produce(&mut c, &by_size, now + i, &[&value]).await;
        }
        // About 470 bytes a batch: on disk two to a 1024-byte segment, of which
        // the newest three (2.8 KB) are the fewest still holding 2048 bytes; in
        // memory each batch is a unit, and the newest five (2.35 KB) stay. The
        // maintenance task runs between the produces, so the start moves up in
        // steps (in memory it is already 14 after the 19th batch); it ends where
        // the limit puts it for the whole log, whatever passes ran on the way.
        let start = await_start(&mut c, &by_size, size_start).await;
        assert_eq!(start, size_start, "the newest data stays");
        // A few more passes: it stays there.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            list_offset(&mut c, &by_size, -2).await,
            (ErrorCode::None, size_start)
        );
        let (err, _, vals) = fetch_at(&mut c, &by_size, size_start).await;
        assert_eq!(err, ErrorCode::None);
        assert_eq!(vals[0], value);
        broker.shutdown().await;
    }
}

/// Creates `name` with one partition on all three nodes (`create_replicated`) and
/// waits for the three in sync.
async fn create_in(cluster: &Cluster, name: &str, configs: &[(&str, &str)]) {
    cluster
        .wait_for(LONG, |c| c.unfenced_brokers().len() == 3)
        .await
        .unwrap();
    create_replicated(cluster, name, 1, 3, configs).await;
    cluster
        .wait_for(LONG, |c| c.partition_state(name, 0).unwrap().isr.len() == 3)
        .await
        .unwrap();
}

/// Waits until every replica's log start offset is `start`.
async fn await_replica_starts(cluster: &Cluster, topic: &str, start: i64) {
    let t = topic.to_owned();
    let r = cluster
        .wait_for(LONG, move |c| {
            let v = c.partition_state(&t, 0).unwrap();
            v.replica_states.iter().all(|r| r.log_start_offset == start)
        })
        .await;
    assert!(
        r.is_ok(),
        "replicas did not all reach log start {start}: {:?}",
        cluster.partition_state(topic, 0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replica_moves_its_log_start_and_a_new_leader_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::builder()
        .brokers(3)
        .data_dir(dir.path())
        .segment_bytes(1024)
        .retention(fast_retention())
        .start()
        .await
        .unwrap();
    let topic = "delrec-cluster";
    create_in(&cluster, topic, &[]).await;
    let v = cluster.partition_state(topic, 0).unwrap();
    let mut l = Client::connect(node_addr(&cluster, v.leader)).await;
    // Stamped now: the default retention (7 days) keeps them; only DeleteRecords moves
    // the start here.
    let now = now_ms();
    for i in 0..5 {
        produce(&mut l, topic, now + i, &["a", "b", "c", "d"]).await; // 20 offsets
    }
    // Only the leader deletes.
    let follower = *v.replicas.iter().find(|r| **r != v.leader).unwrap();
    let mut f = Client::connect(node_addr(&cluster, follower)).await;
    assert_eq!(
        delete_records(&mut f, topic, 3, 2).await.0,
        ErrorCode::NotLeaderOrFollower
    );
    // The leader answers once every replica moved its start: the low watermark.
    assert_eq!(
        delete_records(&mut l, topic, 7, 2).await,
        (ErrorCode::None, 7)
    );
    let view = cluster.partition_state(topic, 0).unwrap();
    for r in &view.replica_states {
        assert_eq!(r.log_start_offset, 7, "{view:?}");
    }
    assert_eq!(list_offset(&mut l, topic, -2).await, (ErrorCode::None, 7));
    assert_eq!(
        fetch_at(&mut l, topic, 6).await.0,
        ErrorCode::OffsetOutOfRange
    );

    // A new leader keeps the start: stop the old one.
    let old = v.leader;
    cluster.node(old).stop().await;
    cluster
        .wait_for(LONG, move |c| {
            let v = c.partition_state("delrec-cluster", 0).unwrap();
            v.leader > 0
                && v.leader != old
                && v.replica(v.leader).is_some_and(|r| r.role == "leader")
        })
        .await
        .unwrap();
    let v = cluster.partition_state(topic, 0).unwrap();
    let mut l = Client::connect(node_addr(&cluster, v.leader)).await;
    assert_eq!(list_offset(&mut l, topic, -2).await, (ErrorCode::None, 7));
    assert_eq!(
        fetch_at(&mut l, topic, 5).await.0,
        ErrorCode::OffsetOutOfRange
    );
    let (err, start, _) = fetch_at(&mut l, topic, 7).await;
    assert_eq!((err, start), (ErrorCode::None, 7));
    // DeleteRecords with a replica down: the live ones follow, the answer waits
    // only for them (a stopped node is fenced).
    assert_eq!(
        delete_records(&mut l, topic, 9, 2).await,
        (ErrorCode::None, 9)
    );
    cluster.node(old).restart().await.unwrap();
    await_replica_starts(&cluster, topic, 9).await;

    // Retention on a cluster: old records go on every replica, up to the HW.
    let aged = "retention-cluster";
    create_in(&cluster, aged, &[("retention.ms", "60000")]).await;
    let v = cluster.partition_state(aged, 0).unwrap();
    let mut l = Client::connect(node_addr(&cluster, v.leader)).await;
    for i in 0..6 {
        produce(&mut l, aged, 1_000 + i, &[&"r".repeat(300)]).await;
    }
    await_replica_starts(&cluster, aged, 6).await;
    assert_eq!(list_offset(&mut l, aged, -2).await, (ErrorCode::None, 6));
    assert_eq!(
        fetch_at(&mut l, aged, 0).await.0,
        ErrorCode::OffsetOutOfRange
    );
    cluster.shutdown().await;
}

/// A follower that fell behind the leader's log start (its replication paused
/// while DeleteRecords ran) is answered OFFSET_OUT_OF_RANGE, restarts its log
/// empty at the leader's start and catches up; meanwhile DeleteRecords times out
/// waiting for it, as Kafka's does for a live replica that does not follow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_behind_the_leaders_start_restarts_there() {
    let mut cluster = Cluster::builder()
        .brokers(3)
        .replica_lag_time_max(Duration::from_millis(500))
        .start()
        .await
        .unwrap();
    let topic = "delrec-lagging";
    create_in(&cluster, topic, &[]).await;
    let v = cluster.partition_state(topic, 0).unwrap();
    let lagging = *v.replicas.iter().find(|r| **r != v.leader).unwrap();
    cluster.node(lagging).pause_replication(true);
    let mut l = Client::connect(node_addr(&cluster, v.leader)).await;
    for i in 0..5 {
        let resp = l
            .call(
                &produce_req(topic, 0, 1, records(1_000 + i, &["a", "b", "c", "d"])),
                9,
            )
            .await;
        assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
    }
    // The paused follower leaves the ISR, so the high watermark covers the writes.
    let t = topic.to_owned();
    cluster
        .wait_for(LONG, move |c| {
            let v = c.partition_state(&t, 0).unwrap();
            v.isr.len() == 2 && v.high_watermark() == Some(20)
        })
        .await
        .unwrap();
    let mut req = delete_req(topic, 0, 12);
    req.timeout_ms = 300;
    let resp = l.call(&req, 2).await;
    assert_eq!(
        code(resp.topics[0].partitions[0].error_code),
        ErrorCode::RequestTimedOut,
        "the paused follower never moves its start"
    );
    assert_eq!(list_offset(&mut l, topic, -2).await, (ErrorCode::None, 12));
    let before = cluster.partition_state(topic, 0).unwrap();
    assert!(
        before.replica(lagging).unwrap().log_end_offset < 12,
        "{before:?}"
    );
    cluster.node(lagging).pause_replication(false);
    await_replica_starts(&cluster, topic, 12).await;
    let t = topic.to_owned();
    cluster
        .wait_for(LONG, move |c| {
            let v = c.partition_state(&t, 0).unwrap();
            v.replica_states.iter().all(|r| r.log_end_offset == 20)
        })
        .await
        .unwrap();
    // Now every replica has moved: the same request answers at once.
    assert_eq!(
        delete_records(&mut l, topic, 12, 2).await,
        (ErrorCode::None, 12)
    );
    cluster.shutdown().await;
}
