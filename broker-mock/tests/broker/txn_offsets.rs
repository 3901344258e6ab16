//! Transactional offset commits (TxnOffsetCommit) over real TCP with raw frames:
//! pending offsets invisible to OffsetFetch (UNSTABLE_OFFSET_COMMIT with
//! `require_stable`), made committed or dropped by the transaction's marker
//! (WriteTxnMarkers on the group's `__consumer_offsets` partition), the request's
//! validation, and pending and finished transactions across restarts, crashes and
//! a coordinator failover in a cluster.

use baton_broker::group::records::partition_for;
use baton_broker::group::GroupConfig;
use baton_broker::{Broker, BrokerConfig};
use baton_protocol::messages::*;
use baton_protocol::ErrorCode;
use baton_testkit::wire::*;

use super::groups::kill_and_connect_to_a_survivor;

use super::groups::find_coordinator;

/// UNSTABLE_OFFSET_COMMIT.
const UNSTABLE: i16 = 88;

fn txn_commit(group: &str, producer: (i64, i16), offsets: &[(i32, i64)]) -> TxnOffsetCommitRequest {
    TxnOffsetCommitRequest {
        transactional_id: "tx".into(),
        group_id: group.into(),
        producer_id: producer.0,
        producer_epoch: producer.1,
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        topics: vec![TxnOffsetCommitRequestTopic {
            name: "t".into(),
            partitions: offsets
                .iter()
                .map(|&(p, o)| TxnOffsetCommitRequestPartition {
                    partition_index: p,
                    committed_offset: o,
                    committed_leader_epoch: 0,
                    committed_metadata: Some(format!("x{p}")),
                })
                .collect(),
        }],
    }
}

fn txn_errors(r: &TxnOffsetCommitResponse) -> Vec<i16> {
    r.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

fn plain_commit(group: &str, offsets: &[(i32, i64)]) -> OffsetCommitRequest {
    OffsetCommitRequest {
        group_id: group.into(),
        generation_id_or_member_epoch: -1,
        topics: vec![OffsetCommitRequestTopic {
            name: "t".into(),
            partitions: offsets
                .iter()
                .map(|&(p, o)| OffsetCommitRequestPartition {
                    partition_index: p,
                    committed_offset: o,
                    ..Default::default()
                })
                .collect(),
        }],
        ..Default::default()
    }
}

/// OffsetFetch v7 of partitions 0-2 of `t`: (offset, error) per partition.
async fn fetch(c: &mut Client, group: &str, require_stable: bool) -> Vec<(i64, i16)> {
    let req = OffsetFetchRequest {
        group_id: group.into(),
        topics: Some(vec![OffsetFetchRequestTopic {
            name: "t".into(),
            partition_indexes: vec![0, 1, 2],
        }]),
        require_stable,
        ..Default::default()
    };
    let r = c.call(&req, 7).await;
    assert_eq!(r.error_code, 0);
    r.topics[0]
        .partitions
        .iter()
        .map(|p| (p.committed_offset, p.error_code))
        .collect()
}

/// A producer id and epoch from the broker (InitProducerId, idempotent).
async fn producer(c: &mut Client) -> (i64, i16) {
    let r = c
        .call(
            &InitProducerIdRequest {
                transactional_id: None,
                transaction_timeout_ms: -1,
                producer_id: -1,
                producer_epoch: -1,
            },
            4,
        )
        .await;
    assert_eq!(r.error_code, 0);
    (r.producer_id, r.producer_epoch)
}

#[tokio::test]
async fn pending_offsets_are_invisible_and_survive_a_restart_as_pending() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = BrokerConfig::on_disk(dir.path());
    let broker = Broker::start(cfg.clone()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    create_topic(&mut c, "t", 3).await;
    let pid = producer(&mut c).await;
    let r = c.call(&plain_commit("g", &[(0, 5)]), 8).await;
    assert_eq!(r.topics[0].partitions[0].error_code, 0);
    for version in [0, 3, 5] {
        let r = c
            .call(&txn_commit("g", pid, &[(0, 50), (1, 60)]), version)
            .await;
        assert_eq!(txn_errors(&r), vec![0, 0], "v{version}");
    }
    // Committed offsets only, unless stable ones are asked for.
    assert_eq!(
        fetch(&mut c, "g", false).await,
        vec![(5, 0), (-1, 0), (-1, 0)]
    );
    assert_eq!(
        fetch(&mut c, "g", true).await,
        vec![(-1, UNSTABLE), (-1, UNSTABLE), (-1, 0)]
    );
    // v8 reads several groups; all committed partitions with require_stable.
    let r = c
        .call(
            &OffsetFetchRequest {
                groups: vec![OffsetFetchRequestGroup {
                    group_id: "g".into(),
                    topics: None,
                    ..Default::default()
                }],
                require_stable: true,
                ..Default::default()
            },
            8,
        )
        .await;
    let got: Vec<(i32, i64, i16)> = r.groups[0].topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.committed_offset, p.error_code))
        .collect();
    assert_eq!(got, vec![(0, -1, UNSTABLE)]);
    broker.shutdown().await;

    // After a restart the transaction is still open: still pending.
    let broker = Broker::start(cfg.clone()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    assert_eq!(
        fetch(&mut c, "g", false).await,
        vec![(5, 0), (-1, 0), (-1, 0)]
    );
    assert_eq!(
        fetch(&mut c, "g", true).await,
        vec![(-1, UNSTABLE), (-1, UNSTABLE), (-1, 0)]
    );
    // The coordinator's next batch for that producer follows the replayed ones.
    let r = c.call(&txn_commit("g", pid, &[(2, 70)]), 3).await;
    assert_eq!(txn_errors(&r), vec![0]);
    drop(broker);
    let broker = Broker::start(cfg).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    assert_eq!(
        fetch(&mut c, "g", true).await,
        vec![(-1, UNSTABLE), (-1, UNSTABLE), (-1, UNSTABLE)]
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn txn_offset_commit_is_validated() {
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    create_topic(&mut c, "t", 1).await;
    let (id, epoch) = producer(&mut c).await;
    // A newer epoch, then the older one: fenced by the partition's producer state.
    let r = c
        .call(&txn_commit("g", (id, epoch + 1), &[(0, 1)]), 3)
        .await;
    assert_eq!(txn_errors(&r), vec![0]);
    let r = c.call(&txn_commit("g", (id, epoch), &[(0, 2)]), 3).await;
    assert_eq!(txn_errors(&r), vec![ErrorCode::InvalidProducerEpoch.code()]);
    // A member of a generation the unknown group never had.
    let mut req = txn_commit("new", (id, epoch + 1), &[(0, 1)]);
    req.generation_id = 3;
    req.member_id = "m".into();
    let r = c.call(&req, 3).await;
    assert_eq!(txn_errors(&r), vec![ErrorCode::IllegalGeneration.code()]);
    // Per partition: unknown partitions and oversized metadata.
    let mut req = txn_commit("g", (id, epoch + 1), &[(0, 3), (7, 1)]);
    req.topics[0].partitions[0].committed_metadata = Some("x".repeat(5000));
    let r = c.call(&req, 3).await;
    assert_eq!(
        txn_errors(&r),
        vec![
            ErrorCode::OffsetMetadataTooLarge.code(),
            ErrorCode::UnknownTopicOrPartition.code()
        ]
    );
    // Advertised in ApiVersions with Kafka 4.0's range.
    let v = c.call(&ApiVersionsRequest::default(), 3).await;
    let k = v.api_keys.iter().find(|k| k.api_key == 28).unwrap();
    assert_eq!((k.min_version, k.max_version), (0, 5));
    broker.shutdown().await;
}

#[tokio::test]
async fn pending_offsets_are_bounded_by_the_limit() {
    let limits = baton_broker::BrokerLimits {
        max_pending_txn_offsets: 2,
        ..Default::default()
    };
    let broker = Broker::start(BrokerConfig::in_memory().with_limits(limits))
        .await
        .unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    create_topic(&mut c, "t", 3).await;
    let pid = producer(&mut c).await;
    let r = c.call(&txn_commit("g", pid, &[(0, 1), (1, 1)]), 3).await;
    assert_eq!(txn_errors(&r), vec![0, 0]);
    let r = c.call(&txn_commit("h", pid, &[(2, 1)]), 3).await;
    assert_eq!(txn_errors(&r), vec![ErrorCode::PolicyViolation.code()]);
    // Nothing of the refused commit is pending.
    assert_eq!(
        fetch(&mut c, "h", true).await,
        vec![(-1, 0), (-1, 0), (-1, 0)]
    );
    broker.shutdown().await;
}

/// Ends `pid`'s transaction on the `__consumer_offsets` partition of `group`.
async fn end_txn(c: &mut Client, group: &str, pid: (i64, i16), commit: bool) {
    let partitions = GroupConfig::default().offsets_topic_partitions;
    let req = WriteTxnMarkersRequest {
        markers: vec![WritableTxnMarker {
            producer_id: pid.0,
            producer_epoch: pid.1,
            transaction_result: commit,
            topics: vec![WritableTxnMarkerTopic {
                name: "__consumer_offsets".into(),
                partition_indexes: vec![partition_for(group, partitions)],
            }],
            coordinator_epoch: 0,
        }],
    };
    let r = c.call(&req, 1).await;
    assert_eq!(r.markers[0].topics[0].partitions[0].error_code, 0);
}

#[tokio::test]
async fn markers_commit_or_drop_pending_offsets_and_restarts_keep_the_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = BrokerConfig::on_disk(dir.path());
    let broker = Broker::start(cfg.clone()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    create_topic(&mut c, "t", 3).await;
    let pid = producer(&mut c).await;
    let r = c.call(&plain_commit("g", &[(0, 5)]), 8).await;
    assert_eq!(r.topics[0].partitions[0].error_code, 0);
    // Committed: the pending offsets become the group's.
    let r = c.call(&txn_commit("g", pid, &[(0, 50), (1, 60)]), 3).await;
    assert_eq!(txn_errors(&r), vec![0, 0]);
    end_txn(&mut c, "g", pid, true).await;
    let committed = vec![(50, 0), (60, 0), (-1, 0)];
    assert_eq!(fetch(&mut c, "g", true).await, committed);
    // Aborted: dropped, the committed offset stays.
    let r = c.call(&txn_commit("g", pid, &[(0, 70)]), 3).await;
    assert_eq!(txn_errors(&r), vec![0]);
    assert_eq!(fetch(&mut c, "g", true).await[0], (-1, UNSTABLE));
    end_txn(&mut c, "g", pid, false).await;
    assert_eq!(fetch(&mut c, "g", true).await, committed);
    // A third transaction stays open across a restart.
    let r = c.call(&txn_commit("g", pid, &[(2, 80)]), 3).await;
    assert_eq!(txn_errors(&r), vec![0]);
    broker.shutdown().await;

    let broker = Broker::start(cfg.clone()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    assert_eq!(fetch(&mut c, "g", false).await, committed);
    assert_eq!(
        fetch(&mut c, "g", true).await,
        vec![(50, 0), (60, 0), (-1, UNSTABLE)]
    );
    end_txn(&mut c, "g", pid, true).await;
    let all = vec![(50, 0), (60, 0), (80, 0)];
    assert_eq!(fetch(&mut c, "g", true).await, all);
    // A crash: the replay applies the markers in log order again.
    drop(broker);
    let broker = Broker::start(cfg).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    assert_eq!(fetch(&mut c, "g", true).await, all);
    broker.shutdown().await;
}

/// A client of the coordinator of `group` (one other than `not`), asked of `c`.
async fn coordinator_client(c: &mut Client, group: &str, not: Option<i32>) -> (i32, Client) {
    let (id, addr) = find_coordinator(c, group, not).await;
    let addr = addr.parse().expect("the coordinator's address");
    (id, Client::connect(addr).await)
}

/// Sends `req` until the coordinator stops answering with a retriable coordinator
/// error (the ISR of `__consumer_offsets` may still be forming).
async fn txn_commit_retrying(c: &mut Client, req: &TxnOffsetCommitRequest) {
    let retriable = [
        ErrorCode::CoordinatorNotAvailable.code(),
        ErrorCode::NotCoordinator.code(),
        ErrorCode::CoordinatorLoadInProgress.code(),
    ];
    for _ in 0..300 {
        let errs = txn_errors(&c.call(req, 3).await);
        if errs.iter().all(|&e| e == 0) {
            return;
        }
        assert!(errs.iter().all(|e| retriable.contains(e)), "{errs:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("TxnOffsetCommit never accepted");
}

#[tokio::test]
async fn a_new_coordinator_replays_finished_and_open_transactions() {
    use baton_broker::Cluster;
    let mut cluster = Cluster::builder()
        .brokers(3)
        .session_timeout(std::time::Duration::from_secs(2))
        .start()
        .await
        .unwrap();
    let first = cluster.node_ids()[0];
    let mut c = Client::connect(cluster.node(first).addr()).await;
    create_topic(&mut c, "t", 3).await;
    let (coordinator, mut cc) = coordinator_client(&mut c, "fg", None).await;
    let done = producer(&mut cc).await;
    let open = producer(&mut cc).await;
    txn_commit_retrying(&mut cc, &txn_commit("fg", done, &[(0, 42)])).await;
    end_txn(&mut cc, "fg", done, true).await;
    txn_commit_retrying(&mut cc, &txn_commit("fg", open, &[(1, 43)])).await;
    assert_eq!(
        fetch(&mut cc, "fg", true).await,
        vec![(42, 0), (-1, UNSTABLE), (-1, 0)]
    );

    // The coordinator's node dies; the new leader of the group's partition replays
    // it: the committed transaction's offset, the open one's still pending.
    let mut c = kill_and_connect_to_a_survivor(&mut cluster, coordinator).await;
    let mut replayed = None;
    for _ in 0..300 {
        let (_, mut nc) = coordinator_client(&mut c, "fg", Some(coordinator)).await;
        let req = OffsetFetchRequest {
            group_id: "fg".into(),
            topics: Some(vec![OffsetFetchRequestTopic {
                name: "t".into(),
                partition_indexes: vec![0, 1, 2],
            }]),
            require_stable: true,
            ..Default::default()
        };
        let r = nc.call(&req, 7).await;
        if r.error_code == 0 {
            replayed = Some((
                r.topics[0]
                    .partitions
                    .iter()
                    .map(|p| (p.committed_offset, p.error_code))
                    .collect::<Vec<_>>(),
                nc,
            ));
            break;
        }
        assert_eq!(r.error_code, ErrorCode::NotCoordinator.code(), "{r:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let (got, mut nc) = replayed.expect("a new coordinator");
    assert_eq!(got, vec![(42, 0), (-1, UNSTABLE), (-1, 0)]);
    // The open transaction's commit marker reaches the new leader.
    end_txn(&mut nc, "fg", open, true).await;
    assert_eq!(
        fetch(&mut nc, "fg", true).await,
        vec![(42, 0), (43, 0), (-1, 0)]
    );
    cluster.shutdown().await;
}

/// Waits until the group's offsets of `t` are stable (the markers are written after
/// EndTxn answers) and returns them.
async fn stable(c: &mut Client, group: &str) -> Vec<(i64, i16)> {
    for _ in 0..500 {
        let got = fetch(c, group, true).await;
        if got.iter().all(|&(_, e)| e == 0) {
            return got;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("{group}'s offsets never became stable");
}

#[tokio::test]
async fn offsets_of_a_transaction_through_the_transaction_coordinator() {
    use crate::transactions::{await_state, end, init};
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let mut c = Client::connect(broker.local_addr()).await;
    create_topic(&mut c, "t", 3).await;
    let id = "tx-offsets";
    let (code, pid, epoch) = init(&mut c, id, 60_000).await;
    assert_eq!(code, 0);
    for (offset, commit, expected) in [(11, true, 11), (22, false, 11), (33, true, 33)] {
        let add = AddOffsetsToTxnRequest {
            transactional_id: id.into(),
            producer_id: pid,
            producer_epoch: epoch,
            group_id: "eg".into(),
        };
        assert_eq!(c.call(&add, 3).await.error_code, 0);
        let mut req = txn_commit("eg", (pid, epoch), &[(0, offset)]);
        req.transactional_id = id.into();
        assert_eq!(txn_errors(&c.call(&req, 3).await), vec![0]);
        assert_eq!(fetch(&mut c, "eg", true).await[0], (-1, UNSTABLE));
        let (code, _, _) = end(&mut c, id, pid, epoch, commit, 3).await;
        assert_eq!(code, 0);
        let state = if commit {
            "CompleteCommit"
        } else {
            "CompleteAbort"
        };
        await_state(&mut c, id, state).await;
        assert_eq!(
            stable(&mut c, "eg").await,
            vec![(expected, 0), (-1, 0), (-1, 0)],
            "after the {state} of offset {offset}"
        );
    }
    broker.shutdown().await;
}
