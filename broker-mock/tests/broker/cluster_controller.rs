//! The controller keeps partition state across a restart: it replays its metadata
//! log, comes back with the next controller epoch, and the running nodes carry on
//! (elections included) without re-creating anything.

use std::time::Duration;

use baton_broker::Cluster;
use baton_testkit::wire::*;

const LONG: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_controller_replays_its_log_and_keeps_electing() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::builder()
        .brokers(3)
        .data_dir(dir.path())
        .session_timeout(Duration::from_secs(3))
        .start()
        .await
        .expect("cluster starts");
    create_replicated(&cluster, "kept", 3, 3, &[("min.insync.replicas", "2")]).await;
    let before: Vec<_> = (0..3)
        .map(|p| cluster.partition_state("kept", p).unwrap())
        .collect();

    cluster.kill_controller();
    assert!(
        cluster.partition_state("kept", 0).is_none(),
        "no controller, no view"
    );
    cluster
        .restart_controller()
        .await
        .expect("controller restarts");
    for (p, b) in before.iter().enumerate() {
        let after = cluster.partition_state("kept", p as i32).unwrap();
        assert_eq!(
            (
                after.leader,
                after.leader_epoch,
                &after.replicas,
                &after.isr
            ),
            (b.leader, b.leader_epoch, &b.replicas, &b.isr),
            "partition {p} replayed"
        );
    }

    // The restarted controller still fences and elects.
    let leader = before[0].leader;
    cluster.node(leader).kill();
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state("kept", 0).unwrap();
            v.leader > 0 && v.leader != leader && v.leader_epoch > before[0].leader_epoch
        })
        .await
        .unwrap_or_else(|_| panic!("re-elected: {:?}", cluster.partition_state("kept", 0)));
    // The controller's choice reaches the new leader through its metadata replay.
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state("kept", 0).unwrap();
            v.replica(v.leader).is_some_and(|r| r.role == "leader")
        })
        .await
        .unwrap();
    let v = cluster.partition_state("kept", 0).unwrap();
    let mut c = Client::connect(node_addr(&cluster, v.leader)).await;
    let resp = c
        .call(&produce_req("kept", 0, -1, records(1, &["x"])), 9)
        .await;
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_replaying_the_log_in_small_steps_keeps_its_topics() {
    // One node, replication factor 1: if a restarted node acted on a partial replay
    // of the metadata log it would delete topics it has not replayed yet, and the
    // only copy of their records with them.
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::builder()
        .brokers(1)
        .data_dir(dir.path())
        .metadata_fetch_max_bytes(64)
        .start()
        .await
        .expect("cluster starts");
    let addr = node_addr(&cluster, 1);
    let names: Vec<String> = (0..8).map(|i| format!("small-steps-{i}")).collect();
    let mut c = Client::connect(addr).await;
    for name in &names {
        let mut req = create_req(name, 1, &[]);
        req.topics[0].replication_factor = 1;
        let resp = c.call(&req, 7).await;
        assert_eq!(resp.topics[0].error_code, 0);
    }
    for name in &names {
        let deadline = tokio::time::Instant::now() + LONG;
        loop {
            let resp = c
                .call(&produce_req(name, 0, -1, records(1, &[name])), 9)
                .await;
            if resp.responses[0].partition_responses[0].error_code == 0 {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "{name} writable");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    drop(c);
    cluster.node(1).kill();
    cluster.node(1).restart().await.expect("restart");
    let addr = node_addr(&cluster, 1);
    for name in &names {
        let deadline = tokio::time::Instant::now() + LONG;
        loop {
            let mut c = Client::connect(addr).await;
            let resp = c.call(&fetch_req(name, 0, 0, 0, 0), 12).await;
            let p = &resp.responses[0].partitions[0];
            if p.error_code == 0 && p.high_watermark >= 1 {
                assert_eq!(
                    values(&p.records),
                    [name.as_str()],
                    "{name} kept its record"
                );
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{name} served again: {p:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    cluster.shutdown().await;
}
