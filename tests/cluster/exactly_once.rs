//! The exactly-once consume-transform-produce pipeline of
//! `baton_testkit::exactly_once` on a 3-node in-process cluster, through a
//! graceful rolling restart, a hard kill of the transaction coordinator's node,
//! and a hard kill of a partition leader. A run that fails (its producer fenced
//! or its coordinator unreachable past the deadline) is restarted with the same
//! transactional id and static member, as a supervisor would; the output read at
//! read_committed must hold every input record exactly once, in input order per
//! partition.

use std::sync::atomic::Ordering;
use std::time::Duration;

use baton_broker::history::ExactlyOnce;
use baton_broker::Cluster;
use baton_kafka::{Admin, Client, NewTopic};
use baton_protocol::messages::FindCoordinatorRequest;
use baton_testkit::cluster::client;
use baton_testkit::exactly_once::{read_output, seed_input, Pipeline};
use baton_testkit::topic_name;
use tokio::task::JoinHandle;

const LONG: Duration = Duration::from_secs(90);
/// How long the pipeline may go without reaching the next progress mark.
const STALL: Duration = Duration::from_secs(45);
const PARTITIONS: i32 = 3;
const TOTAL: usize = 600;

/// The fault a test puts the pipeline through.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// Every node stopped (controlled shutdown) and restarted in turn.
    RollingRestart,
    /// The node of the transaction coordinator killed, then restarted.
    KillCoordinator,
    /// The leader of output partition 0 killed, then restarted.
    KillLeader,
}

/// Runs the pipeline until it finishes, restarting a run that fails.
fn supervise(pipeline: Pipeline, client: Client) -> JoinHandle<usize> {
    tokio::spawn(async move {
        let mut restarts = 0;
        loop {
            match pipeline.run(&client).await {
                Ok(()) => return restarts,
                Err(e) => {
                    restarts += 1;
                    eprintln!("pipeline run failed ({e}); restarting it");
                    assert!(restarts < 20, "the pipeline keeps failing: {e}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    })
}

/// The node coordinating `transactional_id` (FindCoordinator key type 1).
async fn transaction_coordinator(client: &Client, transactional_id: &str) -> i32 {
    let deadline = tokio::time::Instant::now() + LONG;
    loop {
        for node in client
            .metadata()
            .brokers
            .keys()
            .copied()
            .collect::<Vec<_>>()
        {
            let Ok(conn) = client.broker_connection(node).await else {
                continue;
            };
            let req = FindCoordinatorRequest {
                key: transactional_id.to_string(),
                key_type: 1,
                coordinator_keys: vec![transactional_id.to_string()],
            };
            if let Ok(resp) = conn.send(&req).await {
                let found = resp
                    .coordinators
                    .iter()
                    .find(|c| c.error_code == 0)
                    .map(|c| c.node_id)
                    .or((resp.error_code == 0 && resp.node_id >= 0).then_some(resp.node_id));
                if let Some(id) = found.filter(|&id| id >= 0) {
                    return id;
                }
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no transaction coordinator"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn run_through(fault: Fault) {
    baton_testkit::init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::builder()
        .brokers(3)
        .data_dir(dir.path())
        .start()
        .await
        .expect("cluster starts");
    let client = client(&cluster).await;
    let input = topic_name("eos-in");
    let output = topic_name("eos-out");
    Admin::new(&client)
        .create_topics([
            NewTopic::new(input.clone(), PARTITIONS, 3),
            NewTopic::new(output.clone(), PARTITIONS, 3),
        ])
        .await
        .expect("topics created");
    let mut history = ExactlyOnce::new();
    seed_input(&client, &input, PARTITIONS, TOTAL, &mut history).await;
    let pipeline = Pipeline::evenly_seeded(&input, &output, PARTITIONS, TOTAL, 20);
    let committed = pipeline.committed.clone();
    let transactional_id = pipeline.transactional_id.clone();
    let run = supervise(pipeline, client.clone());
    let progress = |at: usize| {
        let committed = committed.clone();
        async move {
            let deadline = tokio::time::Instant::now() + STALL;
            while committed.load(Ordering::SeqCst) < at {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "pipeline stalled before {at}"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    progress(TOTAL / 6).await;
    let at_fault = committed.load(Ordering::SeqCst);
    assert!(!run.is_finished(), "the fault must come mid-run");
    match fault {
        Fault::RollingRestart => {
            for (i, id) in cluster.node_ids().into_iter().enumerate() {
                cluster.record(format!("stop node {id}"));
                cluster.node(id).stop().await;
                progress(TOTAL / 6 + (i + 1) * TOTAL / 12).await;
                cluster.node(id).restart().await.expect("restart");
                cluster
                    .wait_for(LONG, |c| c.unfenced_brokers().len() == 3)
                    .await
                    .expect("node back");
            }
        }
        Fault::KillCoordinator | Fault::KillLeader => {
            let id = match fault {
                Fault::KillCoordinator => transaction_coordinator(&client, &transactional_id).await,
                _ => {
                    cluster
                        .partition_state(&output, 0)
                        .expect("partition")
                        .leader
                }
            };
            cluster.record(format!("kill node {id} ({fault:?})"));
            cluster.node(id).kill();
            progress(TOTAL / 2).await;
            cluster.node(id).restart().await.expect("restart");
        }
    }
    let restarts = tokio::time::timeout(Duration::from_secs(180), run)
        .await
        .expect("the pipeline finishes")
        .expect("the pipeline task");
    let read = read_output(&client, &output, PARTITIONS, TOTAL, &mut history).await;
    let report = history.check();
    eprintln!(
        "{fault:?} after {at_fault} committed inputs: {report}; {restarts} restarted runs; read {read}"
    );
    assert!(
        report.passed(),
        "{report}; lost {:?}; timeline:\n{}",
        &history.lost()[..history.lost().len().min(20)],
        cluster.timeline_text()
    );
    assert_eq!(report.outputs, TOTAL as u64, "{report}");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_pipeline_through_a_rolling_restart() {
    run_through(Fault::RollingRestart).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_pipeline_through_a_transaction_coordinator_kill() {
    run_through(Fault::KillCoordinator).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_pipeline_through_a_partition_leader_kill() {
    run_through(Fault::KillLeader).await;
}
