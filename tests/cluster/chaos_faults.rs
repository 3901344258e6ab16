//! Each fault of `baton_broker::faults` shown by its effect on the cluster or on a
//! Baton client.

use std::time::{Duration, Instant};

use baton_broker::faults::{DiskFault, Endpoint, RequestFault};
use baton_broker::Cluster;
use baton_kafka::{
    Acks, Admin, Client, Consumer, NewTopic, ProduceError, Producer, ProducerRecord, StartOffset,
};
use baton_protocol::ErrorCode;

async fn cluster() -> Cluster {
    Cluster::builder()
        .brokers(3)
        .session_timeout(Duration::from_secs(2))
        .replica_lag_time_max(Duration::from_secs(2))
        .start()
        .await
        .expect("cluster starts")
}

async fn client(cluster: &Cluster, timeout: Duration) -> Client {
    Client::builder(cluster.bootstrap_servers())
        .client_id("baton-fault-tests")
        .request_timeout(timeout)
        .connect_timeout(Duration::from_secs(1))
        .build()
        .await
        .expect("client connects")
}

/// Creates a 1-partition RF=3 topic and waits for a full ISR; returns its leader.
async fn topic(cluster: &Cluster, client: &Client, name: &str) -> i32 {
    Admin::new(client)
        .create_topics([NewTopic::new(name, 1, 3)])
        .await
        .expect("topic created");
    cluster
        .wait_for(Duration::from_secs(30), |c| {
            c.partition_state(name, 0)
                .is_some_and(|v| v.leader > 0 && v.isr.len() == 3)
        })
        .await
        .expect("topic ready");
    cluster.partition_state(name, 0).unwrap().leader
}

fn producer(client: &Client) -> Producer {
    Producer::builder(client)
        .acks(Acks::All)
        .delivery_timeout(Duration::from_secs(60))
        .build()
}

async fn send(p: &Producer, topic: &str, v: &str) -> Result<i64, ProduceError> {
    let d = p
        .send(ProducerRecord::new(topic).partition(0).value(v.to_owned()))
        .await?;
    d.await.map(|m| m.offset)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_way_partition_shrinks_the_isr() {
    let mut cluster = cluster().await;
    let client = client(&cluster, Duration::from_secs(5)).await;
    let leader = topic(&cluster, &client, "one-way").await;
    let follower = cluster
        .node_ids()
        .into_iter()
        .find(|&n| n != leader)
        .unwrap();
    // The follower's fetch requests no longer reach the leader; the leader's frames
    // to the follower still flow.
    cluster.partition_one_way(Endpoint::Node(follower), Endpoint::Node(leader));
    // A write the cut-off follower cannot fetch: it falls behind, and the acks=all
    // answer waits for the ISR to shrink without it.
    let p = producer(&client);
    send(&p, "one-way", "behind")
        .await
        .expect("acknowledged once the ISR shrank");
    cluster
        .wait_for(Duration::from_secs(30), |c| {
            c.partition_state("one-way", 0).is_some_and(|v| {
                v.leader == leader && !v.isr.contains(&follower) && v.isr.len() == 2
            })
        })
        .await
        .unwrap_or_else(|_| panic!("ISR drops {follower}:\n{}", cluster.timeline_text()));
    cluster.heal();
    cluster
        .wait_for(Duration::from_secs(30), |c| {
            c.partition_state("one-way", 0)
                .is_some_and(|v| v.isr.len() == 3)
        })
        .await
        .expect("the follower rejoins after the heal");
    eprintln!("{}", cluster.timeline_text());
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_partition_times_out_the_client_until_healed() {
    let mut cluster = cluster().await;
    let client = client(&cluster, Duration::from_millis(800)).await;
    let leader = topic(&cluster, &client, "client-cut").await;
    cluster.partition(Endpoint::Clients, Endpoint::Node(leader));
    let p = Producer::builder(&client)
        .acks(Acks::All)
        .request_timeout(Duration::from_millis(800))
        .delivery_timeout(Duration::from_secs(3))
        .build();
    let err = send(&p, "client-cut", "cut off")
        .await
        .expect_err("no answer from the leader");
    eprintln!("while partitioned: {err}");
    // Replication is unaffected: the leader keeps its followers.
    assert_eq!(
        cluster.partition_state("client-cut", 0).unwrap().isr.len(),
        3
    );
    cluster.heal();
    let p = producer(&client);
    send(&p, "client-cut", "after heal")
        .await
        .expect("delivered after the heal");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_errors_reach_the_client() {
    let mut cluster = cluster().await;
    let client = client(&cluster, Duration::from_secs(5)).await;
    let leader = topic(&cluster, &client, "errors").await;
    let p = producer(&client);
    // A non-retriable code fails the record with that code.
    cluster.inject(
        Some(leader),
        RequestFault::error(0, ErrorCode::InvalidRecord).on_partition("errors", 0),
    );
    match send(&p, "errors", "rejected").await {
        Err(ProduceError::Rejected { code, .. }) => assert_eq!(code, ErrorCode::InvalidRecord),
        other => panic!("expected InvalidRecord, got {other:?}"),
    }
    assert_eq!(cluster.pending_request_faults(), 0);
    // Retriable codes are retried until the fault is used up.
    cluster.inject(
        Some(leader),
        RequestFault::error(0, ErrorCode::NotEnoughReplicas).times(3),
    );
    let p = producer(&client);
    send(&p, "errors", "retried")
        .await
        .expect("delivered after retries");
    assert_eq!(
        cluster.pending_request_faults(),
        0,
        "all three answered with the error"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_response_is_retried_and_deduplicated() {
    let mut cluster = cluster().await;
    let client = client(&cluster, Duration::from_secs(5)).await;
    let leader = topic(&cluster, &client, "dropped").await;
    let p = producer(&client);
    send(&p, "dropped", "warm-up").await.expect("warm-up");
    cluster.inject(Some(leader), RequestFault::drop_response(0).times(2));
    let mut offsets = Vec::new();
    for i in 0..10 {
        offsets.push(
            send(&p, "dropped", &format!("r{i}"))
                .await
                .expect("delivered"),
        );
    }
    assert_eq!(
        cluster.pending_request_faults(),
        0,
        "both responses were dropped"
    );
    assert_eq!(offsets, (1..=10).collect::<Vec<i64>>());
    let mut c = Consumer::builder(&client)
        .assign("dropped", 0, StartOffset::Earliest)
        .build()
        .await
        .unwrap();
    let mut values = Vec::new();
    while values.len() < 11 {
        let r = tokio::time::timeout(Duration::from_secs(30), c.recv())
            .await
            .expect("records arrive")
            .unwrap();
        values.push(String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned());
    }
    // Nothing after the 11 records: each was written once.
    assert!(tokio::time::timeout(Duration::from_secs(1), c.recv())
        .await
        .is_err());
    assert_eq!(
        values[1..],
        (0..10).map(|i| format!("r{i}")).collect::<Vec<_>>()[..]
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_responses_and_latency_slow_requests_down() {
    let mut cluster = cluster().await;
    let client = client(&cluster, Duration::from_secs(10)).await;
    let leader = topic(&cluster, &client, "slow").await;
    let p = producer(&client);
    send(&p, "slow", "warm-up").await.expect("warm-up");
    cluster.inject(
        Some(leader),
        RequestFault::delay_response(0, Duration::from_millis(700)),
    );
    let t = Instant::now();
    send(&p, "slow", "delayed").await.expect("delivered");
    assert!(
        t.elapsed() >= Duration::from_millis(700),
        "the response waited"
    );
    cluster.add_latency(
        Endpoint::Clients,
        Endpoint::Node(leader),
        Duration::from_millis(300),
    );
    let t = Instant::now();
    send(&p, "slow", "latency").await.expect("delivered");
    // The request and the response each wait 300 ms.
    assert!(
        t.elapsed() >= Duration::from_millis(600),
        "{:?}",
        t.elapsed()
    );
    cluster.heal();
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_node_is_fenced_and_comes_back_on_resume() {
    let mut cluster = cluster().await;
    cluster.pause_node(2);
    cluster
        .wait_for(Duration::from_secs(30), |c| {
            !c.unfenced_brokers().contains(&2)
        })
        .await
        .expect("the controller fences the silent node");
    // Its process is still running: it is unresponsive, not dead.
    assert!(cluster.node(2).is_running());
    cluster.resume_node(2);
    cluster
        .wait_for(Duration::from_secs(30), |c| {
            c.unfenced_brokers().contains(&2)
        })
        .await
        .expect("unfenced after resume");
    eprintln!("{}", cluster.timeline_text());
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_partition_fences_the_node_and_moves_its_leaderships() {
    let mut cluster = cluster().await;
    let client = client(&cluster, Duration::from_secs(5)).await;
    let leader = topic(&cluster, &client, "ctl-cut").await;
    cluster.partition(Endpoint::Controller, Endpoint::Node(leader));
    cluster
        .wait_for(Duration::from_secs(30), |c| {
            !c.unfenced_brokers().contains(&leader)
                && c.partition_state("ctl-cut", 0)
                    .is_some_and(|v| v.leader > 0 && v.leader != leader)
        })
        .await
        .expect("fenced, leadership moved");
    cluster.heal();
    cluster
        .wait_for(Duration::from_secs(30), |c| {
            c.unfenced_brokers().contains(&leader)
        })
        .await
        .expect("unfenced after the heal");
    let p = producer(&client);
    send(&p, "ctl-cut", "after").await.expect("delivered");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fsync_faults_slow_down_or_fail_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::builder()
        .brokers(1)
        .default_replication_factor(1)
        .data_dir(dir.path())
        .start()
        .await
        .unwrap();
    // Through the cluster: node 1's logs live under its data directory.
    cluster.disk_fault(1, DiskFault::FailFsync);
    assert!(cluster.timeline_text().contains("disk: node 1 FailFsync"));
    let log_dir = dir.path().join("node-1").join("probe-0");
    let (mut log, _) = baton_broker::Log::open(&log_dir, 1 << 20, 4096).unwrap();
    assert!(log.flush().is_err(), "a failing fsync fails the flush");
    assert!(log.offline_reason().is_some(), "and takes the log offline");
    // Offline until reopened.
    drop(log);
    let (mut log, _) = baton_broker::Log::open(&log_dir, 1 << 20, 4096).unwrap();
    cluster.disk_fault(1, DiskFault::SlowFsync(Duration::from_millis(300)));
    let t = Instant::now();
    log.flush().expect("a slow fsync still succeeds");
    assert!(t.elapsed() >= Duration::from_millis(300));
    cluster.disk_fault(1, DiskFault::None);
    log.flush().expect("restored");
    drop(log);
    cluster.shutdown().await;
}
