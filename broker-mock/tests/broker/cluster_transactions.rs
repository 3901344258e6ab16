//! The transaction coordinator on a 3-node cluster over raw frames: the coordinator
//! node is killed during an open transaction and during a commit whose markers
//! cannot land yet, and the node that takes over its `__transaction_state`
//! partition finishes the transaction (markers on every partition), losing nothing.

use std::net::SocketAddr;
use std::time::Duration;

use baton_broker::Cluster;
use baton_protocol::messages::*;
use baton_protocol::ErrorCode;
use baton_testkit::wire::*;

use super::transactions::{fetch, produce_txn, txn_batch};

const LONG: Duration = Duration::from_secs(60);

/// Codes a client retries while a coordinator is elected or loads.
fn retriable(code: i16) -> bool {
    [
        ErrorCode::NotCoordinator,
        ErrorCode::CoordinatorNotAvailable,
        ErrorCode::CoordinatorLoadInProgress,
        ErrorCode::ConcurrentTransactions,
        ErrorCode::NotLeaderOrFollower,
    ]
    .iter()
    .any(|c| c.code() == code)
}

/// A 3-node cluster on disk (a killed node restarts with its log).
async fn start(dir: &tempfile::TempDir) -> Cluster {
    Cluster::builder()
        .brokers(3)
        .data_dir(dir.path())
        .session_timeout(Duration::from_secs(2))
        .start()
        .await
        .unwrap()
}

/// The node coordinating `id`, asked of every running node until one answers.
async fn coordinator(cluster: &mut Cluster, id: &str, not: Option<i32>) -> (i32, SocketAddr) {
    let deadline = tokio::time::Instant::now() + LONG;
    loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no coordinator for {id}"
        );
        for node in cluster.node_ids() {
            if !cluster.node(node).is_running() {
                continue;
            }
            let mut c = Client::connect(cluster.node(node).addr()).await;
            let req = FindCoordinatorRequest {
                key_type: 1,
                coordinator_keys: vec![id.to_owned()],
                ..Default::default()
            };
            let r = c.call(&req, 4).await;
            let k = &r.coordinators[0];
            if k.error_code == 0 && Some(k.node_id) != not && cluster.node(k.node_id).is_running() {
                return (k.node_id, cluster.node(k.node_id).addr());
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Sends `req` to `id`'s coordinator until the answer is not retriable; returns
/// the coordinator asked last and the answer.
async fn at_coordinator<R, F>(
    cluster: &mut Cluster,
    id: &str,
    not: Option<i32>,
    req: &R,
    version: i16,
    code: F,
) -> (i32, R::Response)
where
    R: Request + Sync,
    F: Fn(&R::Response) -> i16,
{
    let deadline = tokio::time::Instant::now() + LONG;
    loop {
        let (node, addr) = coordinator(cluster, id, not).await;
        let mut c = Client::connect(addr).await;
        let r = c.call(req, version).await;
        if !retriable(code(&r)) || tokio::time::Instant::now() > deadline {
            return (node, r);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A client of the current leader of `topic`/`partition`.
async fn leader(cluster: &mut Cluster, topic: &str, partition: i32) -> Client {
    let name = topic.to_owned();
    cluster
        .wait_for(LONG, |c| {
            c.partition_state(&name, partition).is_some_and(|v| {
                v.leader > 0 && v.replica(v.leader).is_some_and(|r| r.role == "leader")
            })
        })
        .await
        .unwrap();
    let l = cluster.partition_state(topic, partition).unwrap().leader;
    Client::connect(cluster.node(l).addr()).await
}

async fn init(cluster: &mut Cluster, id: &str) -> (i32, i64, i16) {
    let req = InitProducerIdRequest {
        transactional_id: Some(id.to_owned()),
        transaction_timeout_ms: 60_000,
        producer_id: -1,
        producer_epoch: -1,
    };
    let (node, r) = at_coordinator(cluster, id, None, &req, 4, |r| r.error_code).await;
    assert_eq!(r.error_code, 0);
    (node, r.producer_id, r.producer_epoch)
}

async fn add(cluster: &mut Cluster, id: &str, pid: i64, epoch: i16, topic: &str, parts: &[i32]) {
    let req = AddPartitionsToTxnRequest {
        v3_and_below_transactional_id: id.to_owned(),
        v3_and_below_producer_id: pid,
        v3_and_below_producer_epoch: epoch,
        v3_and_below_topics: vec![AddPartitionsToTxnTopic {
            name: topic.to_owned(),
            partitions: parts.to_vec(),
        }],
        ..Default::default()
    };
    let first = |r: &AddPartitionsToTxnResponse| {
        r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
    };
    let (_, r) = at_coordinator(cluster, id, None, &req, 3, first).await;
    assert_eq!(first(&r), 0);
}

/// Describes `id` at its coordinator (other than `not`) until it is in `state`.
async fn await_state(cluster: &mut Cluster, id: &str, not: Option<i32>, state: &str) -> i32 {
    let req = DescribeTransactionsRequest {
        transactional_ids: vec![id.to_owned()],
    };
    let deadline = tokio::time::Instant::now() + LONG;
    loop {
        let (node, r) = at_coordinator(cluster, id, not, &req, 0, |r| {
            r.transaction_states[0].error_code
        })
        .await;
        if r.transaction_states[0].transaction_state == state {
            return node;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{id} never reached {state}: {:?}",
            r.transaction_states[0]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn commit(cluster: &mut Cluster, id: &str, not: Option<i32>, pid: i64, epoch: i16) {
    let req = EndTxnRequest {
        transactional_id: id.to_owned(),
        producer_id: pid,
        producer_epoch: epoch,
        committed: true,
    };
    let (_, r) = at_coordinator(cluster, id, not, &req, 4, |r| r.error_code).await;
    assert_eq!(r.error_code, 0);
}

/// Everything produced is visible at read_committed and the LSO is the HW.
async fn all_committed(cluster: &mut Cluster, topic: &str, partition: i32, want: &[&str]) {
    let deadline = tokio::time::Instant::now() + LONG;
    loop {
        let mut c = leader(cluster, topic, partition).await;
        let mut req = fetch_req(topic, partition, 0, 0, 0);
        req.isolation_level = 1;
        let r = c.call(&req, 12).await;
        let p = &r.responses[0].partitions[0];
        if p.error_code == 0 && p.last_stable_offset == p.high_watermark {
            let (seen, _, _, aborted) = fetch(&mut c, topic, partition, true).await;
            assert_eq!(seen, want);
            assert!(aborted.is_empty());
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{topic}-{partition}: {p:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_coordinator_takes_over_an_open_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = start(&dir).await;
    let topic = topic_name("txn-failover");
    create_replicated(&cluster, &topic, 3, 3, &[]).await;
    let id = topic_name("tx");
    let (coord, pid, epoch) = init(&mut cluster, &id).await;
    // One partition led elsewhere stays out of the transaction; the others join.
    let stray = (0..3)
        .find(|p| cluster.partition_state(&topic, *p).unwrap().leader != coord)
        .expect("a partition led by another node");
    let joined: Vec<i32> = (0..3).filter(|p| *p != stray).collect();
    add(&mut cluster, &id, pid, epoch, &topic, &joined).await;
    for (p, v) in joined.iter().zip(["a", "b"]) {
        let mut c = leader(&mut cluster, &topic, *p).await;
        let (code, _) = produce_txn(&mut c, &id, &topic, *p, txn_batch(pid, epoch, 0, &[v])).await;
        assert_eq!(code, 0);
    }
    // KIP-890: the stray partition's leader asks the coordinator (over the network)
    // and refuses the batch.
    let mut c = leader(&mut cluster, &topic, stray).await;
    let (code, _) = produce_txn(&mut c, &id, &topic, stray, txn_batch(pid, epoch, 0, &["x"])).await;
    assert_eq!(code, ErrorCode::InvalidTxnState.code());

    cluster.node(coord).kill();
    // The node that takes over the state partition knows the open transaction.
    let next = await_state(&mut cluster, &id, Some(coord), "Ongoing").await;
    assert_ne!(next, coord);
    commit(&mut cluster, &id, Some(coord), pid, epoch).await;
    await_state(&mut cluster, &id, Some(coord), "CompleteCommit").await;
    all_committed(&mut cluster, &topic, joined[0], &["a"]).await;
    all_committed(&mut cluster, &topic, joined[1], &["b"]).await;
    all_committed(&mut cluster, &topic, stray, &[]).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_coordinator_completes_a_prepared_commit() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = start(&dir).await;
    let id = topic_name("tx");
    let (coord, pid, epoch) = init(&mut cluster, &id).await;
    // `lone` has one replica, on a node other than the coordinator; `wide` has
    // one on every node.
    let (lone, wide) = (topic_name("txn-lone"), topic_name("txn-wide"));
    create_replicated(&cluster, &lone, 3, 1, &[]).await;
    create_replicated(&cluster, &wide, 1, 3, &[]).await;
    let (lp, lone_node) = (0..3)
        .map(|p| (p, cluster.partition_state(&lone, p).unwrap().leader))
        .find(|(_, l)| *l != coord)
        .expect("a partition away from the coordinator");
    add(&mut cluster, &id, pid, epoch, &lone, &[lp]).await;
    add(&mut cluster, &id, pid, epoch, &wide, &[0]).await;
    for (t, p, v) in [(&lone, lp, "x"), (&wide, 0, "y")] {
        let mut c = leader(&mut cluster, t, p).await;
        let (code, _) = produce_txn(&mut c, &id, t, p, txn_batch(pid, epoch, 0, &[v])).await;
        assert_eq!(code, 0);
    }
    // The lone partition goes offline: the commit is decided but its marker
    // cannot land.
    cluster.node(lone_node).kill();
    commit(&mut cluster, &id, None, pid, epoch).await;
    await_state(&mut cluster, &id, None, "PrepareCommit").await;
    // The coordinator dies in PrepareCommit; the lone partition comes back.
    cluster.node(coord).kill();
    cluster.node(lone_node).restart().await.unwrap();
    let next = await_state(&mut cluster, &id, Some(coord), "CompleteCommit").await;
    assert_ne!(next, coord);
    all_committed(&mut cluster, &lone, lp, &["x"]).await;
    all_committed(&mut cluster, &wide, 0, &["y"]).await;
    cluster.shutdown().await;
}

/// A change the coordinator applied but could not replicate is not confirmed to a
/// retry from memory: the retried AddPartitionsToTxn waits for replication as the
/// first attempt did. (Confirming it early let a leader change undo a change the
/// client had been told of, and the client's next request was fenced.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_is_not_confirmed_before_the_change_is_replicated() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::builder()
        .brokers(3)
        .data_dir(dir.path())
        .replica_lag_time_max(Duration::from_secs(60))
        .start()
        .await
        .unwrap();
    let topic = topic_name("txn-durable");
    create_replicated(&cluster, &topic, 1, 3, &[]).await;
    let id = topic_name("tx");
    let (coord, pid, epoch) = init(&mut cluster, &id).await;
    let others: Vec<i32> = cluster
        .node_ids()
        .into_iter()
        .filter(|n| *n != coord)
        .collect();
    for n in &others {
        cluster.node(*n).pause_replication(true);
    }
    let req = AddPartitionsToTxnRequest {
        v3_and_below_transactional_id: id.clone(),
        v3_and_below_producer_id: pid,
        v3_and_below_producer_epoch: epoch,
        v3_and_below_topics: vec![AddPartitionsToTxnTopic {
            name: topic.clone(),
            partitions: vec![0],
        }],
        ..Default::default()
    };
    let code = |r: &AddPartitionsToTxnResponse| {
        r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
    };
    let mut c = Client::connect(cluster.node(coord).addr()).await;
    let first = c.call(&req, 3).await;
    assert_eq!(
        code(&first),
        ErrorCode::CoordinatorNotAvailable.code(),
        "the write is not replicated in time"
    );
    let retried = c.call(&req, 3).await;
    assert_eq!(
        code(&retried),
        ErrorCode::CoordinatorNotAvailable.code(),
        "a retry is not confirmed from memory before replication"
    );
    for n in &others {
        cluster.node(*n).pause_replication(false);
    }
    add(&mut cluster, &id, pid, epoch, &topic, &[0]).await;
    cluster.shutdown().await;
}
