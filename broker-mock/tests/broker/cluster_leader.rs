//! Leader-side rules of the in-process cluster over raw frames: only the leader
//! serves, clients' `current_leader_epoch` is fenced, `acks=all` waits for the high
//! watermark and honours the request timeout, and `min.insync.replicas` refuses
//! writes when the ISR is too small.

use std::time::Duration;

use baton_broker::Cluster;
use baton_protocol::messages::*;
use baton_protocol::ErrorCode;
use baton_testkit::wire::*;

const LONG: Duration = Duration::from_secs(60);

fn code(c: i16) -> ErrorCode {
    ErrorCode::from_code(c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_serves_and_client_epochs_are_fenced() {
    let cluster = Cluster::builder().brokers(3).start().await.unwrap();
    create_replicated(&cluster, "epochs", 1, 3, &[]).await;
    let v = cluster.partition_state("epochs", 0).unwrap();
    let follower = *v.replicas.iter().find(|r| **r != v.leader).unwrap();

    let mut f = Client::connect(node_addr(&cluster, follower)).await;
    let resp = f
        .call(&produce_req("epochs", 0, 1, records(1, &["x"])), 9)
        .await;
    assert_eq!(
        code(resp.responses[0].partition_responses[0].error_code),
        ErrorCode::NotLeaderOrFollower
    );
    // KIP-951: from v10 the refusal names the leader and carries its endpoint.
    let resp = f
        .call(&produce_req("epochs", 0, 1, records(1, &["x"])), 10)
        .await;
    let p = &resp.responses[0].partition_responses[0];
    assert_eq!(code(p.error_code), ErrorCode::NotLeaderOrFollower);
    assert_eq!(
        (p.current_leader.leader_id, p.current_leader.leader_epoch),
        (v.leader, v.leader_epoch)
    );
    let leader_addr = node_addr(&cluster, v.leader);
    assert_eq!(resp.node_endpoints.len(), 1, "{:?}", resp.node_endpoints);
    let e = &resp.node_endpoints[0];
    assert_eq!(e.node_id, v.leader);
    assert_eq!(
        (e.host.as_str(), e.port),
        (
            leader_addr.ip().to_string().as_str(),
            leader_addr.port() as i32
        )
    );
    // Before v11 only the leader serves a consumer's fetch (from v11 followers do,
    // KIP-392: `fetch_from_follower.rs`).
    let resp = f.call(&fetch_req("epochs", 0, 0, 0, 0), 10).await;
    assert_eq!(
        code(resp.responses[0].partitions[0].error_code),
        ErrorCode::NotLeaderOrFollower
    );

    let mut l = Client::connect(node_addr(&cluster, v.leader)).await;
    let resp = l
        .call(&produce_req("epochs", 0, -1, records(1, &["a", "b"])), 9)
        .await;
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
    for (epoch, expected) in [
        (v.leader_epoch, ErrorCode::None),
        (v.leader_epoch + 1, ErrorCode::UnknownLeaderEpoch),
    ] {
        let mut req = fetch_req("epochs", 0, 0, 0, 0);
        req.topics[0].partitions[0].current_leader_epoch = epoch;
        let resp = l.call(&req, 12).await;
        assert_eq!(code(resp.responses[0].partitions[0].error_code), expected);
        let req = ListOffsetsRequest {
            replica_id: -1,
            isolation_level: 0,
            topics: vec![ListOffsetsTopic {
                name: "epochs".into(),
                partitions: vec![ListOffsetsPartition {
                    partition_index: 0,
                    current_leader_epoch: epoch,
                    timestamp: -1,
                }],
            }],
        };
        let resp = l.call(&req, 7).await;
        assert_eq!(code(resp.topics[0].partitions[0].error_code), expected);
        if expected == ErrorCode::None {
            assert_eq!(
                resp.topics[0].partitions[0].offset, 2,
                "HW covers the acks=all write"
            );
        }
    }

    // A planned move bumps the epoch; the old epoch is fenced at the new leader.
    let mut cluster = cluster;
    cluster.node(v.leader).stop().await;
    let w = cluster.partition_state("epochs", 0).unwrap();
    assert!(
        w.leader_epoch > v.leader_epoch && w.leader != v.leader,
        "{w:?}"
    );
    cluster
        .wait_for(LONG, |c| {
            let x = c.partition_state("epochs", 0).unwrap();
            x.replica(x.leader).is_some_and(|r| r.role == "leader")
        })
        .await
        .unwrap();
    let mut n = Client::connect(node_addr(&cluster, w.leader)).await;
    let mut req = fetch_req("epochs", 0, 0, 0, 0);
    req.topics[0].partitions[0].current_leader_epoch = v.leader_epoch;
    let resp = n.call(&req, 12).await;
    assert_eq!(
        code(resp.responses[0].partitions[0].error_code),
        ErrorCode::FencedLeaderEpoch
    );
    // The new leader's HW catches up once the remaining follower fetches from it.
    let deadline = tokio::time::Instant::now() + LONG;
    loop {
        let resp = n.call(&fetch_req("epochs", 0, 0, 0, 0), 12).await;
        let got = values(&resp.responses[0].partitions[0].records);
        if got == ["a", "b"] {
            break;
        }
        assert!(got.is_empty(), "{got:?}");
        assert!(
            tokio::time::Instant::now() < deadline,
            "HW never covered the records"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_all_times_out_waiting_for_a_dead_isr_member_and_min_isr_refuses() {
    // Long session timeout and lag time: the dead follower stays in the ISR for a
    // while, so an acks=all write cannot reach the HW in time.
    let mut cluster = Cluster::builder()
        .brokers(2)
        .session_timeout(Duration::from_secs(600))
        .replica_lag_time_max(Duration::from_secs(600))
        .start()
        .await
        .unwrap();
    create_replicated(&cluster, "slow", 1, 2, &[("min.insync.replicas", "2")]).await;
    let v = cluster.partition_state("slow", 0).unwrap();
    let follower = *v.replicas.iter().find(|r| **r != v.leader).unwrap();
    let mut l = Client::connect(node_addr(&cluster, v.leader)).await;
    let resp = l
        .call(&produce_req("slow", 0, -1, records(1, &["ok"])), 9)
        .await;
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);

    cluster.node(follower).kill();
    let mut req = produce_req("slow", 0, -1, records(1, &["late"]));
    req.timeout_ms = 1_000;
    let resp = l.call(&req, 9).await;
    assert_eq!(
        code(resp.responses[0].partition_responses[0].error_code),
        ErrorCode::RequestTimedOut
    );
    // acks=1 is not held back.
    let resp = l
        .call(&produce_req("slow", 0, 1, records(1, &["one"])), 9)
        .await;
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
    drop(cluster);

    // With a short session the dead follower is fenced out of the ISR and
    // min.insync.replicas=2 refuses acks=all up front.
    let mut cluster = Cluster::builder()
        .brokers(2)
        .session_timeout(Duration::from_secs(2))
        .start()
        .await
        .unwrap();
    create_replicated(&cluster, "strict", 1, 2, &[("min.insync.replicas", "2")]).await;
    let v = cluster.partition_state("strict", 0).unwrap();
    let follower = *v.replicas.iter().find(|r| **r != v.leader).unwrap();
    cluster.node(follower).kill();
    cluster
        .wait_for(LONG, |c| {
            c.partition_state("strict", 0).unwrap().isr.len() == 1
        })
        .await
        .unwrap();
    let mut l = Client::connect(node_addr(&cluster, v.leader)).await;
    let resp = l
        .call(&produce_req("strict", 0, -1, records(1, &["no"])), 9)
        .await;
    assert_eq!(
        code(resp.responses[0].partition_responses[0].error_code),
        ErrorCode::NotEnoughReplicas
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lagging_follower_leaves_the_isr_and_returns_through_alter_partition() {
    let mut cluster = Cluster::builder()
        .brokers(3)
        .replica_lag_time_max(Duration::from_secs(2))
        .session_timeout(Duration::from_secs(600))
        .auto_preferred_leader(false)
        .start()
        .await
        .unwrap();
    create_replicated(&cluster, "lag", 1, 3, &[]).await;
    let v = cluster.partition_state("lag", 0).unwrap();
    let lagging = *v.replicas.iter().find(|r| **r != v.leader).unwrap();
    cluster.node(lagging).pause_replication(true);

    // The paused follower holds the HW back until the leader drops it from the ISR
    // (AlterPartition); then the acks=all write completes.
    let mut l = Client::connect(node_addr(&cluster, v.leader)).await;
    let mut req = produce_req("lag", 0, -1, records(1, &["a", "b", "c"]));
    req.timeout_ms = 30_000;
    let resp = l.call(&req, 9).await;
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
    let w = cluster.partition_state("lag", 0).unwrap();
    assert!(!w.isr.contains(&lagging), "{w:?}");
    assert!(w.partition_epoch > v.partition_epoch);
    assert_eq!(
        w.leader_epoch, v.leader_epoch,
        "an ISR change is not a leader change"
    );

    cluster.node(lagging).pause_replication(false);
    cluster
        .wait_for(LONG, |c| {
            let x = c.partition_state("lag", 0).unwrap();
            x.isr.contains(&lagging) && x.replica(lagging).unwrap().log_end_offset == 3
        })
        .await
        .unwrap_or_else(|_| panic!("expanded: {:?}", cluster.partition_state("lag", 0)));
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_are_created_and_deleted_through_any_node() {
    let cluster = Cluster::builder().brokers(3).start().await.unwrap();
    create_replicated(&cluster, "doomed", 1, 3, &[]).await;
    // Every node reports every broker and the same assignment.
    for id in 1..=3 {
        let mut c = Client::connect(node_addr(&cluster, id)).await;
        let req = MetadataRequest {
            topics: None,
            ..Default::default()
        };
        let m = c.call(&req, 12).await;
        assert_eq!(m.brokers.len(), 3, "node {id} lists every broker");
        let t = m
            .topics
            .iter()
            .find(|t| t.name.as_deref() == Some("doomed"));
        let p = &t.expect("topic listed").partitions[0];
        assert_eq!(p.replica_nodes.len(), 3);
        assert_eq!(p.isr_nodes.len(), 3);
    }
    let mut c = Client::connect(node_addr(&cluster, 2)).await;
    let req = DeleteTopicsRequest {
        topic_names: vec!["doomed".into()],
        timeout_ms: 5_000,
        ..Default::default()
    };
    let resp = c.call(&req, 4).await;
    assert_eq!(resp.responses[0].error_code, 0);
    assert!(cluster.partition_state("doomed", 0).is_none());
    let deadline = tokio::time::Instant::now() + LONG;
    for id in 1..=3 {
        loop {
            let mut c = Client::connect(node_addr(&cluster, id)).await;
            let m = c
                .call(
                    &MetadataRequest {
                        topics: Some(vec![MetadataRequestTopic {
                            name: Some("doomed".into()),
                            ..Default::default()
                        }]),
                        ..Default::default()
                    },
                    12,
                )
                .await;
            if code(m.topics[0].error_code) == ErrorCode::UnknownTopicOrPartition {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "node {id} forgets the topic"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_ids_are_unique_across_nodes() {
    // Each node allocates from its own data directory; ids must still not collide.
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::builder()
        .brokers(3)
        .data_dir(dir.path())
        .start()
        .await
        .unwrap();
    let mut ids = std::collections::BTreeSet::new();
    for round in 0..3 {
        for id in 1..=3 {
            let mut c = Client::connect(node_addr(&cluster, id)).await;
            let req = InitProducerIdRequest {
                transactional_id: None,
                transaction_timeout_ms: 60_000,
                producer_id: -1,
                producer_epoch: -1,
            };
            let resp = c.call(&req, 4).await;
            assert_eq!(resp.error_code, 0);
            assert!(
                ids.insert(resp.producer_id),
                "round {round}: node {id} handed out {} again",
                resp.producer_id
            );
        }
    }
    cluster.shutdown().await;
}
