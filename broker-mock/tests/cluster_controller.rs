//! The controller keeps partition state across a restart: it replays its metadata
//! log, comes back with the next controller epoch, and the running nodes carry on
//! (elections included) without re-creating anything.

mod common;

use std::time::Duration;

use baton_broker::Cluster;
use common::*;

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
    let node1: std::net::SocketAddr = cluster.bootstrap_servers()[0].parse().unwrap();
    let mut c = Client::connect(node1).await;
    let mut req = create_req("kept", 3, &[("min.insync.replicas", "2")]);
    req.topics[0].replication_factor = 3;
    let resp = c.call(&req, 7).await;
    assert_eq!(
        resp.topics[0].error_code, 0,
        "{:?}",
        resp.topics[0].error_message
    );
    cluster
        .wait_for(LONG, |c| {
            (0..3).all(|p| c.partition_state("kept", p).unwrap().leader > 0)
        })
        .await
        .unwrap();
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
    let v = cluster.partition_state("kept", 0).unwrap();
    let addr: std::net::SocketAddr = cluster.bootstrap_servers()[(v.leader - 1) as usize]
        .parse()
        .unwrap();
    let mut c = Client::connect(addr).await;
    let resp = c
        .call(&produce_req("kept", 0, -1, records(1, &["x"])), 9)
        .await;
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
    cluster.shutdown().await;
}
