//! The partition side of transactions over raw frames: transactional batches open
//! transactions that hold the last stable offset (LSO) back, WriteTxnMarkers
//! commits or aborts them, read_committed fetches stop at the LSO and list the
//! aborted transactions, DescribeProducers shows the producers, and all of it comes
//! back from the log after a restart and on a new leader after a kill.

use std::net::SocketAddr;
use std::time::Duration;

use baton_broker::{AuthorizerConfig, Broker, BrokerConfig, Cluster};
use baton_protocol::messages::*;
use baton_protocol::record::{batches, RecordBatchBuilder};
use baton_protocol::ErrorCode;
use baton_testkit::wire::*;
use bytes::Bytes;

const LONG: Duration = Duration::from_secs(60);

/// A batch of `values` from producer `pid` at `epoch`, first sequence `seq`, in a
/// transaction.
fn txn_batch(pid: i64, epoch: i16, seq: i32, values: &[&str]) -> Bytes {
    let mut b = RecordBatchBuilder::new(1_000)
        .producer(pid, epoch, seq)
        .transactional(true);
    for (i, v) in values.iter().enumerate() {
        b.push(1_000 + i as i64, None, Some(v.as_bytes()), &[]);
    }
    b.finish()
}

/// Produces `records` (acks=all, v9) and returns (error code, base offset).
async fn produce(c: &mut Client, topic: &str, records: Bytes) -> (ErrorCode, i64) {
    let resp = c.call(&produce_req(topic, 0, -1, records), 9).await;
    let p = &resp.responses[0].partition_responses[0];
    (ErrorCode::from_code(p.error_code), p.base_offset)
}

async fn producer_id(c: &mut Client) -> i64 {
    let resp = c.call(&InitProducerIdRequest::default(), 4).await;
    assert_eq!(resp.error_code, 0);
    resp.producer_id
}

/// Writes one marker on `topic`'s `partitions` (WriteTxnMarkers `version`) and
/// returns each partition's error.
#[allow(clippy::too_many_arguments)]
async fn marker(
    c: &mut Client,
    version: i16,
    pid: i64,
    epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
    topic: &str,
    partitions: &[i32],
) -> Vec<ErrorCode> {
    let req = WriteTxnMarkersRequest {
        markers: vec![WritableTxnMarker {
            producer_id: pid,
            producer_epoch: epoch,
            transaction_result: commit,
            topics: vec![WritableTxnMarkerTopic {
                name: topic.into(),
                partition_indexes: partitions.to_vec(),
            }],
            coordinator_epoch,
        }],
    };
    let resp = c.call(&req, version).await;
    assert_eq!(resp.markers.len(), 1);
    assert_eq!(resp.markers[0].producer_id, pid);
    let t = &resp.markers[0].topics[0];
    assert_eq!(t.name, topic);
    t.partitions
        .iter()
        .map(|p| ErrorCode::from_code(p.error_code))
        .collect()
}

/// Commits (or aborts) at coordinator epoch 0 on partition 0, expecting success.
async fn end_txn(c: &mut Client, pid: i64, commit: bool, topic: &str) {
    let codes = marker(c, 1, pid, 0, commit, 0, topic, &[0]).await;
    assert_eq!(codes, [ErrorCode::None], "marker for {pid}");
}

/// A read_committed fetch of partition 0 from `offset`.
async fn fetch_committed(c: &mut Client, topic: &str, offset: i64) -> FetchResponsePartitionData {
    let mut req = fetch_req(topic, 0, offset, 0, 0);
    req.isolation_level = 1;
    let mut resp = c.call(&req, 12).await;
    let p = resp.responses.remove(0).partitions.remove(0);
    assert_eq!(p.error_code, 0, "{p:?}");
    p
}

/// The values of the data records of `records`, control batches skipped.
fn data_values(records: &Option<Bytes>) -> Vec<String> {
    let mut out = Vec::new();
    for batch in batches(records.clone().unwrap_or_default()) {
        let batch = batch.unwrap();
        batch.verify_crc().unwrap();
        if batch.is_control() {
            continue;
        }
        for r in batch.records().unwrap() {
            out.push(String::from_utf8(r.unwrap().value.unwrap().to_vec()).unwrap());
        }
    }
    out
}

/// The offsets of the control batches of `records`.
fn control_offsets(records: &Option<Bytes>) -> Vec<i64> {
    batches(records.clone().unwrap_or_default())
        .map(|b| b.unwrap())
        .filter(|b| b.is_control())
        .map(|b| b.base_offset())
        .collect()
}

fn aborted(pairs: &[(i64, i64)]) -> Option<Vec<AbortedTransaction>> {
    Some(
        pairs
            .iter()
            .map(|&(producer_id, first_offset)| AbortedTransaction {
                producer_id,
                first_offset,
            })
            .collect(),
    )
}

/// ListOffsets LATEST of partition 0 at `isolation_level`.
async fn latest(c: &mut Client, topic: &str, isolation_level: i8) -> i64 {
    let req = ListOffsetsRequest {
        replica_id: -1,
        isolation_level,
        topics: vec![ListOffsetsTopic {
            name: topic.into(),
            partitions: vec![ListOffsetsPartition {
                partition_index: 0,
                current_leader_epoch: -1,
                timestamp: -1,
            }],
        }],
    };
    let resp = c.call(&req, 7).await;
    let p = &resp.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.offset
}

/// DescribeProducers of partition 0: (error, producers by id).
async fn producers(
    c: &mut Client,
    topic: &str,
) -> (ErrorCode, Vec<DescribeProducersActiveProducer>) {
    let req = DescribeProducersRequest {
        topics: vec![DescribeProducersTopicRequest {
            name: topic.into(),
            partition_indexes: vec![0],
        }],
    };
    let mut resp = c.call(&req, 0).await;
    let p = resp.topics.remove(0).partitions.remove(0);
    (ErrorCode::from_code(p.error_code), p.active_producers)
}

#[tokio::test]
async fn markers_move_the_last_stable_offset_and_fill_the_aborted_index() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let apis = c.call(&ApiVersionsRequest::default(), 3).await;
    for (key, max) in [(27, 1), (61, 0)] {
        let a = apis.api_keys.iter().find(|a| a.api_key == key).unwrap();
        assert_eq!((a.min_version, a.max_version), (0, max), "api {key}");
    }
    let topic = topic_name("txn-lso");
    create_topic(&mut c, &topic, 1).await;
    let (p1, p2) = (producer_id(&mut c).await, producer_id(&mut c).await);

    assert_eq!(produce(&mut c, &topic, records(1, &["a"])).await.1, 0);
    let t1 = txn_batch(p1, 0, 0, &["t1a", "t1b"]);
    assert_eq!(
        produce(&mut c, &topic, t1.clone()).await,
        (ErrorCode::None, 1)
    );
    assert_eq!(
        produce(&mut c, &topic, txn_batch(p2, 0, 0, &["t2"])).await,
        (ErrorCode::None, 3)
    );
    assert_eq!(produce(&mut c, &topic, records(1, &["b"])).await.1, 4);
    // A retry of a transactional batch is deduplicated.
    assert_eq!(produce(&mut c, &topic, t1).await, (ErrorCode::None, 1));
    // A plain idempotent batch inside p1's open transaction.
    let mut plain = RecordBatchBuilder::new(1).producer(p1, 0, 2);
    plain.push(1, None, Some(b"x"), &[]);
    assert_eq!(
        produce(&mut c, &topic, plain.finish()).await.0,
        ErrorCode::InvalidTxnState
    );

    // The LSO holds at p1's first offset.
    let f = fetch_committed(&mut c, &topic, 0).await;
    assert_eq!((f.high_watermark, f.last_stable_offset), (5, 1));
    assert_eq!(data_values(&f.records), ["a"]);
    assert_eq!(f.aborted_transactions, aborted(&[]));
    let f = fetch_committed(&mut c, &topic, 1).await;
    assert_eq!(data_values(&f.records), Vec::<String>::new());
    assert_eq!(
        (
            latest(&mut c, &topic, 1).await,
            latest(&mut c, &topic, 0).await
        ),
        (1, 5)
    );
    let uncommitted = c.call(&fetch_req(&topic, 0, 0, 0, 0), 12).await;
    let u = &uncommitted.responses[0].partitions[0];
    assert_eq!((u.high_watermark, u.last_stable_offset), (5, 1));
    assert_eq!(data_values(&u.records), ["a", "t1a", "t1b", "t2", "b"]);

    // p1 commits (WriteTxnMarkers v0): the LSO moves to p2's open transaction.
    assert_eq!(
        marker(&mut c, 0, p1, 0, true, 0, &topic, &[0]).await,
        [ErrorCode::None]
    );
    let f = fetch_committed(&mut c, &topic, 0).await;
    assert_eq!((f.high_watermark, f.last_stable_offset), (6, 3));
    assert_eq!(data_values(&f.records), ["a", "t1a", "t1b"]);
    // p2 aborts: everything is stable, and p2's transaction is reported.
    end_txn(&mut c, p2, false, &topic).await;
    let f = fetch_committed(&mut c, &topic, 0).await;
    assert_eq!((f.high_watermark, f.last_stable_offset), (7, 7));
    assert_eq!(data_values(&f.records), ["a", "t1a", "t1b", "t2", "b"]);
    assert_eq!(control_offsets(&f.records), [5, 6]);
    assert_eq!(f.aborted_transactions, aborted(&[(p2, 3)]));
    assert_eq!(latest(&mut c, &topic, 1).await, 7);
    // A fetch from the abort marker still overlaps the transaction; one past it
    // does not.
    let f = fetch_committed(&mut c, &topic, 6).await;
    assert_eq!(f.aborted_transactions, aborted(&[(p2, 3)]));
    assert_eq!(control_offsets(&f.records), [6]);
    let f = fetch_committed(&mut c, &topic, 7).await;
    assert_eq!(f.aborted_transactions, aborted(&[]));
    assert!(f.records.as_ref().is_none_or(|r| r.is_empty()));

    // Fencing: a newer producer epoch is written and bumps p1's epoch; the old one
    // is stale; an older coordinator epoch is fenced.
    assert_eq!(
        marker(&mut c, 1, p1, 1, false, 3, &topic, &[0]).await,
        [ErrorCode::None]
    );
    assert_eq!(
        marker(&mut c, 1, p1, 0, false, 3, &topic, &[0]).await,
        [ErrorCode::InvalidProducerEpoch]
    );
    assert_eq!(
        marker(&mut c, 1, p1, 1, false, 2, &topic, &[0]).await,
        [ErrorCode::TransactionCoordinatorFenced]
    );
    assert_eq!(
        produce(&mut c, &topic, txn_batch(p1, 0, 2, &["late"]))
            .await
            .0,
        ErrorCode::InvalidProducerEpoch
    );
    // Unknown partitions.
    assert_eq!(
        marker(&mut c, 1, p1, 1, true, 3, &topic, &[7]).await,
        [ErrorCode::UnknownTopicOrPartition]
    );
    assert_eq!(
        marker(&mut c, 1, p1, 1, true, 3, "no-such-topic", &[0]).await,
        [ErrorCode::UnknownTopicOrPartition]
    );

    // A partition named twice in one marker is written once; both places answer.
    let end = latest(&mut c, &topic, 0).await;
    assert_eq!(
        marker(&mut c, 1, p1, 1, true, 3, &topic, &[0, 0]).await,
        [ErrorCode::None, ErrorCode::None]
    );
    assert_eq!(latest(&mut c, &topic, 0).await, end + 1);

    // DescribeProducers: p2 with no open transaction, then with one.
    let (code, list) = producers(&mut c, &topic).await;
    assert_eq!(code, ErrorCode::None);
    let ids: Vec<i64> = list.iter().map(|p| p.producer_id).collect();
    assert_eq!(ids, [p1.min(p2), p1.max(p2)]);
    let d2 = list.iter().find(|p| p.producer_id == p2).unwrap();
    assert_eq!(
        (
            d2.producer_epoch,
            d2.last_sequence,
            d2.coordinator_epoch,
            d2.current_txn_start_offset
        ),
        (0, 0, 0, -1)
    );
    let d1 = list.iter().find(|p| p.producer_id == p1).unwrap();
    assert_eq!(
        (d1.producer_epoch, d1.last_sequence, d1.coordinator_epoch),
        (1, -1, 3)
    );
    let (_, at) = produce(&mut c, &topic, txn_batch(p2, 0, 1, &["t3"])).await;
    let (_, list) = producers(&mut c, &topic).await;
    let d2 = list.iter().find(|p| p.producer_id == p2).unwrap();
    assert_eq!((d2.last_sequence, d2.current_txn_start_offset), (1, at));
    assert!(d2.last_timestamp > 0);
    broker.shutdown().await;
}

#[tokio::test]
async fn a_restart_rebuilds_open_transactions_and_the_aborted_index() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = BrokerConfig::on_disk(dir.path()).with_segment_bytes(400);
    let broker = Broker::start(cfg.clone()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("txn-restart");
    create_topic(&mut c, &topic, 1).await;
    let (p1, p2) = (producer_id(&mut c).await, producer_id(&mut c).await);
    produce(&mut c, &topic, txn_batch(p1, 0, 0, &["x1", "x2"])).await;
    produce(&mut c, &topic, txn_batch(p2, 0, 0, &["y"])).await;
    for i in 0..10 {
        // Enough plain batches to span several segments.
        produce(&mut c, &topic, records(1, &[&format!("p{i}")])).await;
    }
    end_txn(&mut c, p1, false, &topic).await;
    let before = fetch_committed(&mut c, &topic, 0).await;
    assert_eq!((before.high_watermark, before.last_stable_offset), (14, 2));
    broker.shutdown().await;

    let broker = Broker::start(cfg.clone()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let f = fetch_committed(&mut c, &topic, 0).await;
    assert_eq!((f.high_watermark, f.last_stable_offset), (14, 2));
    assert_eq!(data_values(&f.records), ["x1", "x2"]);
    assert_eq!(f.aborted_transactions, aborted(&[(p1, 0)]));
    let (_, list) = producers(&mut c, &topic).await;
    let d2 = list.iter().find(|p| p.producer_id == p2).unwrap();
    assert_eq!(d2.current_txn_start_offset, 2);
    // The coordinator epoch came back too.
    assert_eq!(
        marker(&mut c, 1, p1, 0, true, -1, &topic, &[0]).await,
        [ErrorCode::TransactionCoordinatorFenced]
    );
    end_txn(&mut c, p2, true, &topic).await;
    let f = fetch_committed(&mut c, &topic, 0).await;
    assert_eq!((f.high_watermark, f.last_stable_offset), (15, 15));
    assert_eq!(f.aborted_transactions, aborted(&[(p1, 0)]));
    broker.shutdown().await;
}

#[tokio::test]
async fn markers_need_cluster_action_and_producers_need_read() {
    let cfg = BrokerConfig::in_memory().with_authorizer(AuthorizerConfig::default());
    let broker = Broker::start(cfg).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    assert_eq!(
        marker(&mut c, 1, 1, 0, true, 0, "t", &[0, 1]).await,
        [ErrorCode::ClusterAuthorizationFailed; 2]
    );
    assert_eq!(
        producers(&mut c, "t").await.0,
        ErrorCode::TopicAuthorizationFailed
    );
    broker.shutdown().await;
}

fn addr(cluster: &Cluster, id: i32) -> SocketAddr {
    cluster.bootstrap_servers()[(id - 1) as usize]
        .parse()
        .unwrap()
}

/// Waits until the leader of `topic`-0 serves as leader, and returns its id.
async fn serving_leader(cluster: &Cluster, topic: &str, not: i32) -> i32 {
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state(topic, 0).unwrap();
            v.leader > 0
                && v.leader != not
                && v.replica(v.leader).is_some_and(|r| r.role == "leader")
        })
        .await
        .unwrap();
    cluster.partition_state(topic, 0).unwrap().leader
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markers_replicate_and_a_new_leader_keeps_open_transactions() {
    let mut cluster = Cluster::builder().brokers(3).start().await.unwrap();
    let topic = topic_name("txn-failover");
    let mut c = Client::connect(addr(&cluster, 1)).await;
    let mut req = create_req(&topic, 1, &[]);
    req.topics[0].replication_factor = 3;
    let resp = c.call(&req, 7).await;
    assert_eq!(resp.topics[0].error_code, 0);
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state(&topic, 0).unwrap();
            v.isr.len() == 3 && v.replica_states.iter().all(|r| r.role != "none")
        })
        .await
        .unwrap();
    let leader = serving_leader(&cluster, &topic, -1).await;
    let follower = cluster
        .partition_state(&topic, 0)
        .unwrap()
        .replicas
        .into_iter()
        .find(|r| *r != leader)
        .unwrap();
    let mut l = Client::connect(addr(&cluster, leader)).await;
    let (p1, p2) = (producer_id(&mut l).await, producer_id(&mut l).await);
    assert_eq!(
        produce(&mut l, &topic, txn_batch(p1, 0, 0, &["a1", "a2"])).await,
        (ErrorCode::None, 0)
    );
    assert_eq!(
        produce(&mut l, &topic, txn_batch(p2, 0, 0, &["o"])).await,
        (ErrorCode::None, 2)
    );
    produce(&mut l, &topic, records(1, &["plain"])).await;
    // Only the leader writes markers.
    let mut f = Client::connect(addr(&cluster, follower)).await;
    assert_eq!(
        marker(&mut f, 1, p1, 0, false, 0, &topic, &[0]).await,
        [ErrorCode::NotLeaderOrFollower]
    );
    assert_eq!(
        producers(&mut f, &topic).await.0,
        ErrorCode::NotLeaderOrFollower
    );
    // The abort is answered once the ISR has it: the HW covers the marker.
    end_txn(&mut l, p1, false, &topic).await;
    let got = fetch_committed(&mut l, &topic, 0).await;
    assert_eq!((got.high_watermark, got.last_stable_offset), (5, 2));
    assert_eq!(got.aborted_transactions, aborted(&[(p1, 0)]));

    // Kill the leader: the new one has p2's transaction open and p1's aborted.
    cluster.node(leader).kill();
    let new_leader = serving_leader(&cluster, &topic, leader).await;
    let mut n = Client::connect(addr(&cluster, new_leader)).await;
    let deadline = tokio::time::Instant::now() + LONG;
    let got = loop {
        let mut req = fetch_req(&topic, 0, 0, 0, 0);
        req.isolation_level = 1;
        let mut resp = n.call(&req, 12).await;
        let p = resp.responses.remove(0).partitions.remove(0);
        if p.error_code == 0 && p.high_watermark == 5 {
            break p;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "HW never caught up: {p:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(got.last_stable_offset, 2);
    assert_eq!(data_values(&got.records), ["a1", "a2"]);
    assert_eq!(got.aborted_transactions, aborted(&[(p1, 0)]));
    let (code, list) = producers(&mut n, &topic).await;
    assert_eq!(code, ErrorCode::None);
    let d2 = list.iter().find(|p| p.producer_id == p2).unwrap();
    assert_eq!(d2.current_txn_start_offset, 2);
    // The new leader commits p2 once the remaining follower has the marker.
    end_txn(&mut n, p2, true, &topic).await;
    let got = fetch_committed(&mut n, &topic, 0).await;
    assert_eq!((got.high_watermark, got.last_stable_offset), (6, 6));
    assert_eq!(data_values(&got.records), ["a1", "a2", "o", "plain"]);
    cluster.shutdown().await;
}

/// `produce` with acks=1.
async fn produce_acks1(c: &mut Client, topic: &str, records: Bytes) -> ErrorCode {
    let resp = c.call(&produce_req(topic, 0, 1, records), 9).await;
    ErrorCode::from_code(resp.responses[0].partition_responses[0].error_code)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_suffix_takes_its_transactions_and_markers_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::builder()
        .brokers(2)
        .data_dir(dir.path())
        .session_timeout(Duration::from_secs(3))
        .auto_preferred_leader(false)
        .start()
        .await
        .unwrap();
    let topic = topic_name("txn-truncate");
    let mut c = Client::connect(addr(&cluster, 1)).await;
    let mut req = create_req(&topic, 1, &[("unclean.leader.election.enable", "true")]);
    req.topics[0].replication_factor = 2;
    assert_eq!(c.call(&req, 7).await.topics[0].error_code, 0);
    let a = serving_leader(&cluster, &topic, -1).await;
    let b = 3 - a;
    let mut l = Client::connect(addr(&cluster, a)).await;
    let (p1, p2) = (producer_id(&mut l).await, producer_id(&mut l).await);
    // p1's transaction is on both replicas.
    assert_eq!(
        produce(&mut l, &topic, txn_batch(p1, 0, 0, &["p1"])).await,
        (ErrorCode::None, 0)
    );
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state(&topic, 0).unwrap();
            v.replica(b).is_some_and(|r| r.log_end_offset == 1) && v.isr.len() == 2
        })
        .await
        .unwrap();
    // b leaves; a alone takes p2's transaction and p1's abort.
    cluster.node(b).kill();
    cluster
        .wait_for(LONG, |c| {
            c.partition_state(&topic, 0).unwrap().isr == vec![a]
        })
        .await
        .unwrap();
    assert_eq!(
        produce_acks1(&mut l, &topic, txn_batch(p2, 0, 0, &["p2"])).await,
        ErrorCode::None
    );
    end_txn(&mut l, p1, false, &topic).await;
    assert_eq!(
        fetch_committed(&mut l, &topic, 0).await.last_stable_offset,
        1
    );

    // a dies; b returns and is elected uncleanly with only p1's open transaction,
    // then takes a record of its own.
    cluster.node(a).kill();
    cluster.node(b).restart().await.unwrap();
    serving_leader(&cluster, &topic, a).await;
    let mut nb = Client::connect(addr(&cluster, b)).await;
    assert_eq!(
        produce_acks1(&mut nb, &topic, records(1, &["b"])).await,
        ErrorCode::None
    );

    // a returns, truncates p2's batch and p1's abort away and catches up; b stops
    // and a leads again: p1's transaction is open there, p2 unknown, nothing aborted.
    cluster.node(a).restart().await.unwrap();
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state(&topic, 0).unwrap();
            v.isr.len() == 2 && v.replica(a).is_some_and(|r| r.log_end_offset == 2)
        })
        .await
        .unwrap_or_else(|_| panic!("{a} rejoins: {:?}", cluster.partition_state(&topic, 0)));
    cluster.node(b).stop().await;
    serving_leader(&cluster, &topic, b).await;
    let mut na = Client::connect(addr(&cluster, a)).await;
    let deadline = tokio::time::Instant::now() + LONG;
    let got = loop {
        let mut req = fetch_req(&topic, 0, 0, 0, 0);
        req.isolation_level = 1;
        let mut resp = na.call(&req, 12).await;
        let p = resp.responses.remove(0).partitions.remove(0);
        if p.error_code == 0 && p.high_watermark == 2 {
            break p;
        }
        assert!(tokio::time::Instant::now() < deadline, "{p:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(got.last_stable_offset, 0);
    assert_eq!(got.aborted_transactions, aborted(&[]));
    let (code, list) = producers(&mut na, &topic).await;
    assert_eq!(code, ErrorCode::None);
    let open: Vec<(i64, i64)> = list
        .iter()
        .map(|p| (p.producer_id, p.current_txn_start_offset))
        .collect();
    assert_eq!(open, [(p1, 0)]);
    // The coordinator's abort, written again, lands here.
    end_txn(&mut na, p1, false, &topic).await;
    let got = fetch_committed(&mut na, &topic, 0).await;
    assert_eq!(got.last_stable_offset, 3);
    assert_eq!(got.aborted_transactions, aborted(&[(p1, 0)]));
    cluster.shutdown().await;
}

/// A read_committed fetch of partition 0 from offset 0 at `c`, retried until its
/// high watermark is `hw`: (high watermark, last stable offset).
async fn stable_at_hw(c: &mut Client, topic: &str, hw: i64) -> (i64, i64) {
    let deadline = tokio::time::Instant::now() + LONG;
    loop {
        let mut req = fetch_req(topic, 0, 0, 0, 0);
        req.isolation_level = 1;
        let mut resp = c.call(&req, 12).await;
        let p = resp.responses.remove(0).partitions.remove(0);
        if p.error_code == 0 && p.high_watermark == hw {
            return (p.high_watermark, p.last_stable_offset);
        }
        assert!(tokio::time::Instant::now() < deadline, "HW {hw}: {p:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Writes `pid`'s marker on partition 0 at `to` from a task of its own, which
/// answers once the marker is replicated.
fn marker_in_background(
    to: SocketAddr,
    pid: i64,
    commit: bool,
    topic: &str,
) -> tokio::task::JoinHandle<Vec<ErrorCode>> {
    let topic = topic.to_string();
    tokio::spawn(async move {
        let mut c = Client::connect(to).await;
        marker(&mut c, 1, pid, 0, commit, 0, &topic, &[0]).await
    })
}

/// Stops `node`'s replica fetchers and waits out a fetch already in flight (a
/// long poll of at most 500 ms), so nothing appended from now on reaches it.
async fn hold_replication(cluster: &mut Cluster, node: i32) {
    cluster.node(node).pause_replication(true);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_marker_held_back_from_a_follower_keeps_the_last_stable_offset() {
    let mut cluster = Cluster::builder()
        .brokers(2)
        .session_timeout(Duration::from_secs(3))
        .replica_lag_time_max(Duration::from_secs(120))
        .auto_preferred_leader(false)
        .start()
        .await
        .unwrap();
    let topic = topic_name("txn-unreplicated");
    let mut c = Client::connect(addr(&cluster, 1)).await;
    let mut req = create_req(&topic, 1, &[]);
    req.topics[0].replication_factor = 2;
    assert_eq!(c.call(&req, 7).await.topics[0].error_code, 0);
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state(&topic, 0).unwrap();
            v.isr.len() == 2 && v.replica_states.iter().all(|r| r.role != "none")
        })
        .await
        .unwrap();
    let leader = serving_leader(&cluster, &topic, -1).await;
    let follower = 3 - leader;
    let mut l = Client::connect(addr(&cluster, leader)).await;
    let (p1, p2) = (producer_id(&mut l).await, producer_id(&mut l).await);
    assert_eq!(
        produce(&mut l, &topic, txn_batch(p1, 0, 0, &["a"])).await,
        (ErrorCode::None, 0)
    );
    produce(&mut l, &topic, records(1, &["plain"])).await;
    assert_eq!(stable_at_hw(&mut l, &topic, 2).await, (2, 0));

    // The follower stops fetching: p1's commit marker (offset 2) is in the
    // leader's log but not below the HW, so the transaction stays unstable.
    hold_replication(&mut cluster, follower).await;
    let commit = marker_in_background(addr(&cluster, leader), p1, true, &topic);
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state(&topic, 0).unwrap();
            v.replica(leader).is_some_and(|r| r.log_end_offset == 3)
        })
        .await
        .unwrap();
    for _ in 0..3 {
        assert_eq!(stable_at_hw(&mut l, &topic, 2).await, (2, 0));
        assert_eq!(latest(&mut l, &topic, 1).await, 0);
        let got = fetch_committed(&mut l, &topic, 0).await;
        assert_eq!(data_values(&got.records), Vec::<String>::new());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!commit.is_finished(), "the marker waits for the follower");

    // Once the follower has the marker the HW passes it, the marker is answered
    // and the LSO moves to the HW.
    cluster.node(follower).pause_replication(false);
    assert_eq!(commit.await.unwrap(), [ErrorCode::None]);
    assert_eq!(stable_at_hw(&mut l, &topic, 3).await, (3, 3));
    assert_eq!(latest(&mut l, &topic, 1).await, 3);
    let got = fetch_committed(&mut l, &topic, 0).await;
    assert_eq!(data_values(&got.records), ["a", "plain"]);

    // p2's abort marker (offset 4) is held back too; then the leader dies. The
    // LSO was held at p2's first offset on the old leader and stays there on the
    // new one, which never saw the marker: it does not move backwards.
    assert_eq!(
        produce(&mut l, &topic, txn_batch(p2, 0, 0, &["b"])).await,
        (ErrorCode::None, 3)
    );
    assert_eq!(stable_at_hw(&mut l, &topic, 4).await, (4, 3));
    hold_replication(&mut cluster, follower).await;
    let abort = marker_in_background(addr(&cluster, leader), p2, false, &topic);
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state(&topic, 0).unwrap();
            v.replica(leader).is_some_and(|r| r.log_end_offset == 5)
        })
        .await
        .unwrap();
    assert_eq!(stable_at_hw(&mut l, &topic, 4).await, (4, 3));
    abort.abort();
    cluster.node(leader).kill();
    serving_leader(&cluster, &topic, leader).await;
    cluster.node(follower).pause_replication(false);
    let mut n = Client::connect(addr(&cluster, follower)).await;
    assert_eq!(stable_at_hw(&mut n, &topic, 4).await, (4, 3));
    // The coordinator's abort, written again, lands on the new leader.
    end_txn(&mut n, p2, false, &topic).await;
    assert_eq!(stable_at_hw(&mut n, &topic, 5).await, (5, 5));
    let got = fetch_committed(&mut n, &topic, 0).await;
    assert_eq!(got.aborted_transactions, aborted(&[(p2, 3)]));
    cluster.shutdown().await;
}
