//! The transaction coordinator over TCP with raw protocol frames: InitProducerId
//! with a transactional id, AddPartitionsToTxn, transactional produce, EndTxn and
//! the markers that follow (LSO, aborted index), zombie fencing, timeouts, restarts
//! of a disk-backed broker, DescribeTransactions / ListTransactions, and KIP-890
//! verification (AddPartitionsToTxn v4 verify-only).

use std::time::Duration;

use baton_broker::{Broker, BrokerConfig};
use baton_protocol::messages::*;
use baton_protocol::record::{batches, RecordBatch, RecordBatchBuilder};
use baton_protocol::ErrorCode;
use baton_testkit::wire::*;
use bytes::Bytes;

/// A transactional batch of `values` from producer `pid` at `epoch`, first sequence `seq`.
pub(crate) fn txn_batch(pid: i64, epoch: i16, seq: i32, values: &[&str]) -> Bytes {
    let mut b = RecordBatchBuilder::new(1_000)
        .producer(pid, epoch, seq)
        .transactional(true);
    for (i, v) in values.iter().enumerate() {
        b.push(1_000 + i as i64, None, Some(v.as_bytes()), &[]);
    }
    b.finish()
}

/// InitProducerId for `id`, retried while an earlier transaction is being aborted:
/// (error code, producer id, epoch).
pub(crate) async fn init(c: &mut Client, id: &str, timeout_ms: i32) -> (i16, i64, i16) {
    let req = InitProducerIdRequest {
        transactional_id: Some(id.to_owned()),
        transaction_timeout_ms: timeout_ms,
        producer_id: -1,
        producer_epoch: -1,
    };
    for _ in 0..200 {
        let r = c.call(&req, 4).await;
        if r.error_code != ErrorCode::ConcurrentTransactions.code() {
            return (r.error_code, r.producer_id, r.producer_epoch);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("InitProducerId kept answering CONCURRENT_TRANSACTIONS");
}

/// AddPartitionsToTxn v3 for `partitions` of `topic`: each partition's code.
pub(crate) async fn add(
    c: &mut Client,
    id: &str,
    pid: i64,
    epoch: i16,
    topic: &str,
    partitions: &[i32],
) -> Vec<i16> {
    let req = AddPartitionsToTxnRequest {
        v3_and_below_transactional_id: id.to_owned(),
        v3_and_below_producer_id: pid,
        v3_and_below_producer_epoch: epoch,
        v3_and_below_topics: vec![AddPartitionsToTxnTopic {
            name: topic.to_owned(),
            partitions: partitions.to_vec(),
        }],
        ..Default::default()
    };
    let r = c.call(&req, 3).await;
    r.results_by_topic_v3_and_below[0]
        .results_by_partition
        .iter()
        .map(|p| p.partition_error_code)
        .collect()
}

/// EndTxn in `version`: (error code, producer id, epoch).
pub(crate) async fn end(
    c: &mut Client,
    id: &str,
    pid: i64,
    epoch: i16,
    commit: bool,
    version: i16,
) -> (i16, i64, i16) {
    let req = EndTxnRequest {
        transactional_id: id.to_owned(),
        producer_id: pid,
        producer_epoch: epoch,
        committed: commit,
    };
    let r = c.call(&req, version).await;
    (r.error_code, r.producer_id, r.producer_epoch)
}

/// A transactional produce (acks=all, v9): (error code, base offset).
pub(crate) async fn produce_txn(
    c: &mut Client,
    id: &str,
    topic: &str,
    partition: i32,
    batch: Bytes,
) -> (i16, i64) {
    let mut req = produce_req(topic, partition, -1, batch);
    req.transactional_id = Some(id.to_owned());
    let r = c.call(&req, 9).await;
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// DescribeTransactions for one id.
pub(crate) async fn describe(c: &mut Client, id: &str) -> DescribedTransaction {
    let req = DescribeTransactionsRequest {
        transactional_ids: vec![id.to_owned()],
    };
    c.call(&req, 0).await.transaction_states.remove(0)
}

/// Waits until `id` is in `state` (markers are written after EndTxn answers).
pub(crate) async fn await_state(c: &mut Client, id: &str, state: &str) -> DescribedTransaction {
    let mut last = None;
    for _ in 0..500 {
        let d = describe(c, id).await;
        if d.transaction_state == state {
            return d;
        }
        last = Some(d);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{id} never reached {state}: {last:?}");
}

/// A read_committed (or read_uncommitted) fetch of one partition from offset 0:
/// (data values, last stable offset, high watermark, aborted producer ids).
pub(crate) async fn fetch(
    c: &mut Client,
    topic: &str,
    partition: i32,
    committed: bool,
) -> (Vec<String>, i64, i64, Vec<i64>) {
    let mut req = fetch_req(topic, partition, 0, 0, 0);
    req.isolation_level = i8::from(committed);
    let r = c.call(&req, 12).await;
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    let mut out = Vec::new();
    for batch in batches(p.records.clone().unwrap_or_default()) {
        let batch: RecordBatch = batch.unwrap();
        if batch.is_control() {
            continue;
        }
        for r in batch.records().unwrap() {
            let v = r.unwrap().value.unwrap();
            out.push(String::from_utf8(v.to_vec()).unwrap());
        }
    }
    let aborted = p
        .aborted_transactions
        .iter()
        .flatten()
        .map(|a| a.producer_id)
        .collect();
    (out, p.last_stable_offset, p.high_watermark, aborted)
}

#[tokio::test]
async fn committed_transaction_gets_its_markers_and_the_lso_advances() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("txn-commit");
    create_topic(&mut c, &topic, 2).await;
    let id = topic_name("tx");

    let (code, pid, epoch) = init(&mut c, &id, 60_000).await;
    assert_eq!((code, epoch), (0, 0));
    assert_eq!(describe(&mut c, &id).await.transaction_state, "Empty");
    assert_eq!(add(&mut c, &id, pid, epoch, &topic, &[0, 1]).await, [0, 0]);
    let d = describe(&mut c, &id).await;
    assert_eq!(d.transaction_state, "Ongoing");
    assert_eq!(d.topics.len(), 1);
    assert_eq!(d.topics[0].partitions, [0, 1]);
    assert!(d.transaction_start_time_ms > 0);

    let (code, _) = produce_txn(
        &mut c,
        &id,
        &topic,
        0,
        txn_batch(pid, epoch, 0, &["a", "b"]),
    )
    .await;
    assert_eq!(code, 0);
    let (code, _) = produce_txn(&mut c, &id, &topic, 1, txn_batch(pid, epoch, 0, &["c"])).await;
    assert_eq!(code, 0);
    // Open: read_committed sees nothing, the LSO stays at the transaction's start.
    let (seen, lso, hw, _) = fetch(&mut c, &topic, 0, true).await;
    assert!(seen.is_empty(), "{seen:?}");
    assert_eq!((lso, hw), (0, 2));

    assert_eq!(end(&mut c, &id, pid, epoch, true, 3).await.0, 0);
    let done = await_state(&mut c, &id, "CompleteCommit").await;
    assert!(done.topics.is_empty());
    // The markers landed on both partitions: everything is stable and visible.
    let (seen, lso, hw, aborted) = fetch(&mut c, &topic, 0, true).await;
    assert_eq!(seen, ["a", "b"]);
    assert_eq!((lso, hw), (3, 3), "two records and the commit marker");
    assert!(aborted.is_empty());
    let (seen, lso, _, _) = fetch(&mut c, &topic, 1, true).await;
    assert_eq!((seen, lso), (vec!["c".to_owned()], 2));
    // A retried EndTxn of the completed transaction succeeds; an abort now does not.
    assert_eq!(end(&mut c, &id, pid, epoch, true, 3).await.0, 0);
    assert_eq!(
        end(&mut c, &id, pid, epoch, false, 3).await.0,
        ErrorCode::InvalidTxnState.code()
    );
    // The next transaction of the same producer.
    assert_eq!(add(&mut c, &id, pid, epoch, &topic, &[0]).await, [0]);
    broker.shutdown().await;
}

#[tokio::test]
async fn aborted_transaction_is_hidden_and_indexed() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("txn-abort");
    create_topic(&mut c, &topic, 1).await;
    let id = topic_name("tx");
    let (_, pid, epoch) = init(&mut c, &id, 60_000).await;
    assert_eq!(add(&mut c, &id, pid, epoch, &topic, &[0]).await, [0]);
    let (code, _) = produce_txn(
        &mut c,
        &id,
        &topic,
        0,
        txn_batch(pid, epoch, 0, &["x", "y"]),
    )
    .await;
    assert_eq!(code, 0);
    assert_eq!(end(&mut c, &id, pid, epoch, false, 4).await.0, 0);
    await_state(&mut c, &id, "CompleteAbort").await;
    let (seen, lso, hw, aborted) = fetch(&mut c, &topic, 0, true).await;
    assert_eq!((lso, hw), (3, 3));
    assert_eq!(aborted, [pid], "the aborted transaction is indexed");
    // The client drops the aborted records with the index; the raw batches remain.
    assert_eq!(seen, ["x", "y"]);
    broker.shutdown().await;
}

#[tokio::test]
async fn a_second_producer_fences_the_first_and_aborts_its_transaction() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("txn-zombie");
    create_topic(&mut c, &topic, 1).await;
    let id = topic_name("tx");
    let (_, pid, e0) = init(&mut c, &id, 60_000).await;
    assert_eq!(add(&mut c, &id, pid, e0, &topic, &[0]).await, [0]);
    let (code, _) = produce_txn(&mut c, &id, &topic, 0, txn_batch(pid, e0, 0, &["zombie"])).await;
    assert_eq!(code, 0);

    // The new instance: its InitProducerId aborts the open transaction first.
    let (code, pid2, e1) = init(&mut c, &id, 60_000).await;
    assert_eq!(code, 0);
    assert_eq!(pid2, pid);
    assert_eq!(
        e1,
        e0 + 2,
        "one bump fences (with the abort), one for the new producer"
    );
    let (_, lso, hw, aborted) = fetch(&mut c, &topic, 0, true).await;
    assert_eq!((lso, hw), (2, 2), "the abort marker landed");
    assert_eq!(aborted, [pid]);

    // The zombie: fenced at the coordinator and at the partition.
    assert_eq!(
        end(&mut c, &id, pid, e0, true, 4).await.0,
        ErrorCode::ProducerFenced.code()
    );
    assert_eq!(
        end(&mut c, &id, pid, e0, true, 1).await.0,
        ErrorCode::InvalidProducerEpoch.code()
    );
    assert_eq!(
        add(&mut c, &id, pid, e0, &topic, &[0]).await,
        [ErrorCode::ProducerFenced.code()]
    );
    let (code, _) = produce_txn(&mut c, &id, &topic, 0, txn_batch(pid, e0, 1, &["late"])).await;
    assert_eq!(code, ErrorCode::InvalidProducerEpoch.code());
    // The new producer works.
    assert_eq!(add(&mut c, &id, pid, e1, &topic, &[0]).await, [0]);
    let (code, _) = produce_txn(&mut c, &id, &topic, 0, txn_batch(pid, e1, 0, &["new"])).await;
    assert_eq!(code, 0);
    assert_eq!(end(&mut c, &id, pid, e1, true, 4).await.0, 0);
    await_state(&mut c, &id, "CompleteCommit").await;
    let (seen, _, _, _) = fetch(&mut c, &topic, 0, true).await;
    assert_eq!(
        seen,
        ["zombie", "new"],
        "the zombie's record is in the aborted range"
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("txn-timeout");
    create_topic(&mut c, &topic, 1).await;
    let id = topic_name("tx");
    let (_, pid, epoch) = init(&mut c, &id, 300).await;
    assert_eq!(add(&mut c, &id, pid, epoch, &topic, &[0]).await, [0]);
    let (code, _) = produce_txn(&mut c, &id, &topic, 0, txn_batch(pid, epoch, 0, &["slow"])).await;
    assert_eq!(code, 0);
    let d = await_state(&mut c, &id, "CompleteAbort").await;
    assert_eq!(d.producer_epoch, epoch + 1, "the abort bumped the epoch");
    let (_, lso, _, aborted) = fetch(&mut c, &topic, 0, true).await;
    assert_eq!((lso, aborted), (2, vec![pid]));
    assert_eq!(
        end(&mut c, &id, pid, epoch, true, 4).await.0,
        ErrorCode::ProducerFenced.code()
    );
    // The producer recovers (KIP-360) by naming its old epoch: it gets the
    // coordinator's current one and starts over.
    let req = InitProducerIdRequest {
        transactional_id: Some(id.clone()),
        transaction_timeout_ms: 60_000,
        producer_id: pid,
        producer_epoch: epoch,
    };
    let r = c.call(&req, 4).await;
    assert_eq!(
        (r.error_code, r.producer_id, r.producer_epoch),
        (0, pid, epoch + 1)
    );
    assert_eq!(add(&mut c, &id, pid, epoch + 1, &topic, &[0]).await, [0]);
    broker.shutdown().await;
}

#[tokio::test]
async fn refusals_of_the_coordinator() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("txn-refusals");
    create_topic(&mut c, &topic, 1).await;
    let id = topic_name("tx");
    // Beyond transaction.max.timeout.ms (15 minutes).
    let (code, _, _) = init(&mut c, &id, 15 * 60 * 1000 + 1).await;
    assert_eq!(code, ErrorCode::InvalidTransactionTimeout.code());
    // No InitProducerId yet.
    assert_eq!(
        add(&mut c, &id, 5, 0, &topic, &[0]).await,
        [ErrorCode::InvalidProducerIdMapping.code()]
    );
    let d = describe(&mut c, &id).await;
    assert_eq!(d.error_code, ErrorCode::TransactionalIdNotFound.code());
    let (_, pid, epoch) = init(&mut c, &id, 60_000).await;
    // Another producer id, an unknown partition, no transaction to end.
    assert_eq!(
        add(&mut c, &id, pid + 1, epoch, &topic, &[0]).await,
        [ErrorCode::InvalidProducerIdMapping.code()]
    );
    assert_eq!(
        add(&mut c, &id, pid, epoch, &topic, &[0, 7]).await,
        [
            ErrorCode::OperationNotAttempted.code(),
            ErrorCode::UnknownTopicOrPartition.code()
        ]
    );
    assert_eq!(
        end(&mut c, &id, pid, epoch, true, 3).await.0,
        ErrorCode::InvalidTxnState.code()
    );
    // AddOffsetsToTxn adds the group's __consumer_offsets partition.
    let req = AddOffsetsToTxnRequest {
        transactional_id: id.clone(),
        producer_id: pid,
        producer_epoch: epoch,
        group_id: "g".into(),
    };
    assert_eq!(c.call(&req, 3).await.error_code, 0);
    let d = describe(&mut c, &id).await;
    assert_eq!(d.transaction_state, "Ongoing");
    assert_eq!(d.topics[0].topic, "__consumer_offsets");
    // FindCoordinator for a transactional id names this node.
    let req = FindCoordinatorRequest {
        key_type: 1,
        coordinator_keys: vec![id.clone()],
        ..Default::default()
    };
    let r = c.call(&req, 4).await;
    assert_eq!(r.coordinators[0].error_code, 0);
    assert_eq!(
        r.coordinators[0].port,
        i32::from(broker.local_addr().port())
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn list_and_describe_transactions() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("txn-list");
    create_topic(&mut c, &topic, 1).await;
    let open = topic_name("open");
    let idle = topic_name("idle");
    let (_, pid, epoch) = init(&mut c, &open, 60_000).await;
    assert_eq!(add(&mut c, &open, pid, epoch, &topic, &[0]).await, [0]);
    let (_, idle_pid, _) = init(&mut c, &idle, 60_000).await;

    let list = |states: &[&str], pids: Vec<i64>, duration: i64| ListTransactionsRequest {
        state_filters: states.iter().map(|s| (*s).to_owned()).collect(),
        producer_id_filters: pids,
        duration_filter: duration,
    };
    let names = |r: &ListTransactionsResponse| {
        let mut v: Vec<String> = r
            .transaction_states
            .iter()
            .map(|t| t.transactional_id.clone())
            .collect();
        v.sort();
        v
    };
    let all = c.call(&list(&[], vec![], -1), 1).await;
    assert!([&open, &idle].iter().all(|id| names(&all).contains(id)));
    let ongoing = c.call(&list(&["Ongoing", "Bogus"], vec![], -1), 1).await;
    assert!(names(&ongoing).contains(&open));
    assert!(!names(&ongoing).contains(&idle));
    assert_eq!(ongoing.unknown_state_filters, ["Bogus"]);
    let by_pid = c.call(&list(&[], vec![idle_pid], -1), 0).await;
    assert_eq!(names(&by_pid), std::slice::from_ref(&idle));
    assert_eq!(by_pid.transaction_states[0].transaction_state, "Empty");
    // v1: only transactions running longer than the duration.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let long = c.call(&list(&[], vec![], 20), 1).await;
    assert!(names(&long).contains(&open));
    assert!(!names(&long).contains(&idle));
    let longer = c.call(&list(&[], vec![], 3_600_000), 1).await;
    assert!(!names(&longer).contains(&open));

    let req = DescribeTransactionsRequest {
        transactional_ids: vec![open.clone(), idle.clone(), "nobody".into()],
    };
    let r = c.call(&req, 0).await;
    assert_eq!(r.transaction_states.len(), 3);
    let o = &r.transaction_states[0];
    assert_eq!((o.error_code, o.transaction_state.as_str()), (0, "Ongoing"));
    assert_eq!(
        (o.producer_id, o.producer_epoch, o.transaction_timeout_ms),
        (pid, epoch, 60_000)
    );
    assert_eq!(r.transaction_states[1].transaction_state, "Empty");
    assert_eq!(r.transaction_states[1].transaction_start_time_ms, -1);
    assert_eq!(
        r.transaction_states[2].error_code,
        ErrorCode::TransactionalIdNotFound.code()
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn verify_only_checks_the_ongoing_transaction() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("txn-verify");
    create_topic(&mut c, &topic, 2).await;
    let id = topic_name("tx");
    let (_, pid, epoch) = init(&mut c, &id, 60_000).await;
    assert_eq!(add(&mut c, &id, pid, epoch, &topic, &[0]).await, [0]);
    let verify = |epoch: i16| AddPartitionsToTxnRequest {
        transactions: vec![AddPartitionsToTxnTransaction {
            transactional_id: id.clone(),
            producer_id: pid,
            producer_epoch: epoch,
            verify_only: true,
            topics: vec![AddPartitionsToTxnTopic {
                name: topic.clone(),
                partitions: vec![0, 1],
            }],
        }],
        ..Default::default()
    };
    for version in [4, 5] {
        let r = c.call(&verify(epoch), version).await;
        assert_eq!(r.error_code, 0);
        let codes: Vec<i16> = r.results_by_transaction[0].topic_results[0]
            .results_by_partition
            .iter()
            .map(|p| p.partition_error_code)
            .collect();
        assert_eq!(codes, [0, ErrorCode::InvalidTxnState.code()], "v{version}");
    }
    let r = c.call(&verify(epoch + 1), 4).await;
    let codes: Vec<i16> = r.results_by_transaction[0].topic_results[0]
        .results_by_partition
        .iter()
        .map(|p| p.partition_error_code)
        .collect();
    assert_eq!(codes, [ErrorCode::ProducerFenced.code(); 2]);
    // Verification added nothing.
    assert_eq!(describe(&mut c, &id).await.topics[0].partitions, [0]);
    broker.shutdown().await;
}

#[tokio::test]
async fn end_txn_v5_bumps_the_epoch() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("txn-v5");
    create_topic(&mut c, &topic, 1).await;
    let id = topic_name("tx");
    let (_, pid, epoch) = init(&mut c, &id, 60_000).await;
    assert_eq!(add(&mut c, &id, pid, epoch, &topic, &[0]).await, [0]);
    assert_eq!(
        end(&mut c, &id, pid, epoch, true, 5).await,
        (0, pid, epoch + 1)
    );
    await_state(&mut c, &id, "CompleteCommit").await;
    // A retry with the old epoch is recognised.
    assert_eq!(
        end(&mut c, &id, pid, epoch, true, 5).await,
        (0, pid, epoch + 1)
    );
    assert_eq!(add(&mut c, &id, pid, epoch + 1, &topic, &[0]).await, [0]);
    broker.shutdown().await;
}

#[tokio::test]
async fn transactions_survive_a_restart_and_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = BrokerConfig::on_disk(dir.path());
    let broker = Broker::start(cfg.clone()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("txn-restart");
    create_topic(&mut c, &topic, 1).await;
    let (open, done) = (topic_name("open"), topic_name("done"));
    let (_, open_pid, open_epoch) = init(&mut c, &open, 60_000).await;
    assert_eq!(
        add(&mut c, &open, open_pid, open_epoch, &topic, &[0]).await,
        [0]
    );
    let (_, done_pid, done_epoch) = init(&mut c, &done, 60_000).await;
    assert_eq!(
        add(&mut c, &done, done_pid, done_epoch, &topic, &[0]).await,
        [0]
    );
    assert_eq!(end(&mut c, &done, done_pid, done_epoch, true, 4).await.0, 0);
    await_state(&mut c, &done, "CompleteCommit").await;
    broker.shutdown().await;

    let broker = Broker::start(cfg.clone()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let d = describe(&mut c, &open).await;
    assert_eq!(
        (d.transaction_state.as_str(), d.producer_id),
        ("Ongoing", open_pid)
    );
    assert_eq!(d.topics[0].partitions, [0]);
    assert_eq!(
        describe(&mut c, &done).await.transaction_state,
        "CompleteCommit"
    );
    // The open transaction can still be committed; then a crash (no shutdown).
    assert_eq!(end(&mut c, &open, open_pid, open_epoch, true, 4).await.0, 0);
    await_state(&mut c, &open, "CompleteCommit").await;
    let (_, pid, epoch) = init(&mut c, &done, 60_000).await;
    assert_eq!((pid, epoch), (done_pid, done_epoch + 1));
    drop(broker);

    let broker = Broker::start(cfg).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    assert_eq!(
        describe(&mut c, &open).await.transaction_state,
        "CompleteCommit"
    );
    let d = describe(&mut c, &done).await;
    assert_eq!(
        (d.transaction_state.as_str(), d.producer_epoch),
        ("Empty", done_epoch + 1)
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn verification_refuses_batches_outside_the_transaction() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("txn-kip890");
    create_topic(&mut c, &topic, 2).await;
    let id = topic_name("tx");
    let (_, pid, epoch) = init(&mut c, &id, 60_000).await;
    assert_eq!(add(&mut c, &id, pid, epoch, &topic, &[0]).await, [0]);
    // Partition 1 was never added: refused, nothing appended.
    // (TRANSACTION_ABORTABLE is for Produce v11+, which the broker does not serve.)
    for (version, code) in [
        (9, ErrorCode::InvalidTxnState),
        (10, ErrorCode::InvalidTxnState),
    ] {
        let mut req = produce_req(&topic, 1, -1, txn_batch(pid, epoch, 0, &["stray"]));
        req.transactional_id = Some(id.clone());
        let r = c.call(&req, version).await;
        assert_eq!(
            r.responses[0].partition_responses[0].error_code,
            code.code(),
            "v{version}"
        );
    }
    // Two batches in one partition's records are refused together.
    let mut two = txn_batch(pid, epoch, 0, &["s1"]).to_vec();
    two.extend_from_slice(&txn_batch(pid, epoch, 1, &["s2"]));
    let (code, _) = produce_txn(&mut c, &id, &topic, 1, Bytes::from(two)).await;
    assert_eq!(code, ErrorCode::InvalidTxnState.code());
    let (_, lso, hw, _) = fetch(&mut c, &topic, 1, false).await;
    assert_eq!((lso, hw), (0, 0), "nothing appended, no transaction opened");
    // Partition 0 is in the transaction.
    let (code, _) = produce_txn(&mut c, &id, &topic, 0, txn_batch(pid, epoch, 0, &["ok"])).await;
    assert_eq!(code, 0);
    // After the abort, a late retry of the batch cannot reopen the transaction.
    assert_eq!(end(&mut c, &id, pid, epoch, false, 4).await.0, 0);
    await_state(&mut c, &id, "CompleteAbort").await;
    let (code, _) = produce_txn(&mut c, &id, &topic, 0, txn_batch(pid, epoch, 1, &["late"])).await;
    assert_eq!(code, ErrorCode::InvalidTxnState.code());
    let (_, lso, hw, _) = fetch(&mut c, &topic, 0, true).await;
    assert_eq!((lso, hw), (2, 2), "one record and the abort marker");
    broker.shutdown().await;
}

#[tokio::test]
async fn an_authorizer_guards_transactional_ids_and_the_broker_form() {
    let cfg = BrokerConfig::in_memory().with_authorizer(baton_broker::AuthorizerConfig::default());
    let broker = Broker::start(cfg).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let denied = ErrorCode::TransactionalIdAuthorizationFailed.code();
    assert_eq!(init(&mut c, "tx", 60_000).await.0, denied);
    assert_eq!(add(&mut c, "tx", 1, 0, "t", &[0]).await, [denied]);
    assert_eq!(end(&mut c, "tx", 1, 0, true, 3).await.0, denied);
    let req = AddOffsetsToTxnRequest {
        transactional_id: "tx".into(),
        producer_id: 1,
        producer_epoch: 0,
        group_id: "g".into(),
    };
    assert_eq!(c.call(&req, 3).await.error_code, denied);
    assert_eq!(describe(&mut c, "tx").await.error_code, denied);
    let listed = c.call(&ListTransactionsRequest::default(), 0).await;
    assert!(listed.transaction_states.is_empty());
    // The batched broker form needs ClusterAction.
    let req = AddPartitionsToTxnRequest {
        transactions: vec![AddPartitionsToTxnTransaction {
            transactional_id: "tx".into(),
            producer_id: 1,
            producer_epoch: 0,
            verify_only: true,
            topics: vec![],
        }],
        ..Default::default()
    };
    assert_eq!(
        c.call(&req, 4).await.error_code,
        ErrorCode::ClusterAuthorizationFailed.code()
    );
    let req = FindCoordinatorRequest {
        key_type: 1,
        coordinator_keys: vec!["tx".into()],
        ..Default::default()
    };
    assert_eq!(c.call(&req, 4).await.coordinators[0].error_code, denied);
    broker.shutdown().await;
}

#[tokio::test]
async fn transactional_ids_and_transaction_sizes_are_bounded() {
    let mut cfg = BrokerConfig::in_memory();
    cfg.limits.max_transactional_ids = 2;
    cfg.limits.max_partitions_per_transaction = 2;
    let broker = Broker::start(cfg).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("txn-limits");
    create_topic(&mut c, &topic, 3).await;
    let (_, pid, epoch) = init(&mut c, "a", 60_000).await;
    assert_eq!(init(&mut c, "b", 60_000).await.0, 0);
    assert_eq!(
        init(&mut c, "c", 60_000).await.0,
        ErrorCode::PolicyViolation.code()
    );
    // A known id is not a new one.
    assert_eq!(init(&mut c, "a", 60_000).await.0, 0);
    let epoch = epoch + 1;
    assert_eq!(add(&mut c, "a", pid, epoch, &topic, &[0, 1]).await, [0, 0]);
    assert_eq!(
        add(&mut c, "a", pid, epoch, &topic, &[2]).await,
        [ErrorCode::PolicyViolation.code()]
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn a_restarted_broker_aborts_an_expired_transaction_unasked() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = BrokerConfig::on_disk(dir.path());
    let broker = Broker::start(cfg.clone()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let topic = topic_name("txn-expired");
    create_topic(&mut c, &topic, 1).await;
    let id = topic_name("tx");
    let (_, pid, epoch) = init(&mut c, &id, 1_000).await;
    assert_eq!(add(&mut c, &id, pid, epoch, &topic, &[0]).await, [0]);
    let (code, _) = produce_txn(&mut c, &id, &topic, 0, txn_batch(pid, epoch, 0, &["open"])).await;
    assert_eq!(code, 0);
    broker.shutdown().await;

    // Only fetches, which do not touch the coordinator: it loads its state
    // partitions by itself and aborts the transaction once its timeout passes.
    let broker = Broker::start(cfg).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let mut last = None;
    for _ in 0..250 {
        let (_, lso, hw, aborted) = fetch(&mut c, &topic, 0, true).await;
        if lso == 2 {
            assert_eq!((hw, aborted), (2, vec![pid]));
            broker.shutdown().await;
            return;
        }
        last = Some((lso, hw));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the expired transaction was not aborted: {last:?}");
}

#[tokio::test]
async fn kip360_init_producer_id_keeps_the_producer_id() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    let id = topic_name("tx");
    let (_, pid, epoch) = init(&mut c, &id, 60_000).await;
    let req = |pid: i64, epoch: i16| InitProducerIdRequest {
        transactional_id: Some(id.clone()),
        transaction_timeout_ms: 60_000,
        producer_id: pid,
        producer_epoch: epoch,
    };
    let r = c.call(&req(pid, epoch), 4).await;
    assert_eq!(
        (r.error_code, r.producer_id, r.producer_epoch),
        (0, pid, epoch + 1)
    );
    // An id the coordinator never gave this transactional id is fenced.
    let r = c.call(&req(pid + 1, 0), 4).await;
    assert_eq!(r.error_code, ErrorCode::ProducerFenced.code());
    let r = c.call(&req(pid + 1, 0), 3).await;
    assert_eq!(r.error_code, ErrorCode::InvalidProducerEpoch.code());
    broker.shutdown().await;
}
