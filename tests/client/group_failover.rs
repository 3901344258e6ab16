//! Group consumers ride a coordinator failover: in a 3-node cluster, the node that
//! coordinates the group is hard-killed mid-traffic; the members find the new
//! coordinator, the committed offsets are intact (never below what was committed
//! before the kill), and the history check shows nothing lost.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_broker::Cluster;
use baton_kafka::{Acks, Admin, Client, GroupConsumer, NewTopic, Producer, ProducerRecord};
use baton_protocol::messages::{
    OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use baton_testkit::consumer_group::try_find_coordinator;
use baton_testkit::topic_name;
use tokio::sync::{mpsc, oneshot};

const PARTITIONS: i32 = 6;

async fn produce(client: &Client, topic: &str, per_partition: usize) {
    let producer = Producer::builder(client).acks(Acks::All).build();
    let mut deliveries = Vec::new();
    for i in 0..per_partition {
        for p in 0..PARTITIONS {
            let r = ProducerRecord::new(topic)
                .partition(p)
                .value(format!("{p}-{i}"));
            deliveries.push(producer.send(r).await.expect("accepted"));
        }
    }
    for d in deliveries {
        d.await.expect("delivered");
    }
    producer.close().await;
}

/// A 3-node in-memory cluster that fences a silent broker after 2 s, a client
/// on it named `client_id` (10 s request timeout), and a new topic named from
/// `prefix` with `partitions` partitions of three replicas and
/// `min.insync.replicas=2`: the set-up of the coordinator-failover tests.
pub(crate) async fn failover_cluster(
    client_id: &str,
    prefix: &str,
    partitions: i32,
) -> (Cluster, Client, String) {
    let cluster = Cluster::builder()
        .brokers(3)
        .in_memory()
        .session_timeout(Duration::from_secs(2))
        .start()
        .await
        .expect("cluster starts");
    let client = Client::builder(cluster.bootstrap_servers())
        .client_id(client_id)
        .request_timeout(Duration::from_secs(10))
        .build()
        .await
        .expect("client connects");
    let topic = topic_name(prefix);
    Admin::new(&client)
        .create_topics([
            NewTopic::new(topic.clone(), partitions, 3).config("min.insync.replicas", "2")
        ])
        .await
        .expect("topic created");
    (cluster, client, topic)
}

/// The group's coordinator node, asked of any live broker.
async fn coordinator_of(client: &Client, group: &str) -> i32 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(id) = try_find_coordinator(client, group).await {
            return id;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no coordinator for {group}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The group's committed offsets for `topic`, read from its current coordinator.
async fn committed(client: &Client, group: &str, topic: &str) -> BTreeMap<i32, i64> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let node = coordinator_of(client, group).await;
        if let Ok(conn) = client.broker_connection(node).await {
            let partitions: Vec<i32> = (0..PARTITIONS).collect();
            let req = OffsetFetchRequest {
                group_id: group.to_string(),
                topics: Some(vec![OffsetFetchRequestTopic {
                    name: topic.to_string(),
                    partition_indexes: partitions.clone(),
                }]),
                groups: vec![OffsetFetchRequestGroup {
                    group_id: group.to_string(),
                    member_id: None,
                    member_epoch: -1,
                    topics: Some(vec![OffsetFetchRequestTopics {
                        name: topic.to_string(),
                        partition_indexes: partitions,
                    }]),
                }],
                require_stable: true,
            };
            if let Ok(resp) = conn.send(&req).await {
                let mut out = BTreeMap::new();
                let mut ok = true;
                if let Some(g) = resp.groups.first() {
                    ok &= g.error_code == 0;
                    for t in &g.topics {
                        for p in &t.partitions {
                            ok &= p.error_code == 0;
                            out.insert(p.partition_index, p.committed_offset);
                        }
                    }
                } else {
                    ok &= resp.error_code == 0;
                    for t in &resp.topics {
                        for p in &t.partitions {
                            ok &= p.error_code == 0;
                            out.insert(p.partition_index, p.committed_offset);
                        }
                    }
                }
                if ok {
                    return out;
                }
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "OffsetFetch keeps failing"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

type Seen = Arc<Mutex<Vec<(usize, i32, i64)>>>;

fn spawn_member(
    client: &Client,
    group: &str,
    topic: &str,
    member: usize,
    seen: Seen,
) -> mpsc::UnboundedSender<oneshot::Sender<()>> {
    let (tx, mut rx) = mpsc::unbounded_channel::<oneshot::Sender<()>>();
    let builder = GroupConsumer::builder(client, group)
        .subscribe([topic])
        .session_timeout(Duration::from_secs(10))
        .heartbeat_interval(Duration::from_millis(200))
        .rebalance_timeout(Duration::from_secs(20))
        .auto_commit_interval(Duration::from_millis(200))
        .max_wait(Duration::from_millis(50));
    tokio::spawn(async move {
        let mut consumer = builder.build().await.expect("builds");
        loop {
            tokio::select! {
                r = consumer.recv() => match r {
                    Ok(rec) => seen.lock().unwrap().push((member, rec.partition, rec.offset)),
                    // Partition-level fetch errors during the leader change are
                    // reported and the member keeps going.
                    Err(e) if e.is_retriable() => eprintln!("member {member}: {e}"),
                    Err(e) => panic!("member {member}: {e}"),
                },
                done = rx.recv() => {
                    consumer.close().await.expect("clean close");
                    if let Some(done) = done {
                        let _ = done.send(());
                    }
                    return;
                }
            }
        }
    });
    tx
}

async fn wait_consumed(seen: &Seen, per_partition: i64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let missing = {
            let s = seen.lock().unwrap();
            let got: BTreeSet<(i32, i64)> = s.iter().map(|&(_, p, o)| (p, o)).collect();
            (0..PARTITIONS)
                .flat_map(|p| (0..per_partition).map(move |o| (p, o)))
                .filter(|k| !got.contains(k))
                .count()
        };
        if missing == 0 {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{missing} records never consumed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_rides_a_coordinator_kill_with_commits_intact() {
    baton_testkit::init_tracing();
    let (mut cluster, client, topic) =
        failover_cluster("baton-group-failover", "group-failover", PARTITIONS).await;
    let group = topic_name("failover-group");
    let seen: Seen = Arc::default();
    let per_phase = 100usize;

    produce(&client, &topic, per_phase).await;
    let members: Vec<_> = (0..3)
        .map(|m| spawn_member(&client, &group, &topic, m, seen.clone()))
        .collect();
    wait_consumed(&seen, per_phase as i64).await;
    // Wait for the auto-commit to cover the first phase.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let before = loop {
        let c = committed(&client, &group, &topic).await;
        if c.values().all(|&o| o == per_phase as i64) && c.len() == PARTITIONS as usize {
            break c;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "first phase committed: {c:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    let coordinator = coordinator_of(&client, &group).await;
    println!("coordinator is node {coordinator}; killing it mid-traffic");
    let traffic = {
        let client = client.clone();
        let topic = topic.clone();
        tokio::spawn(async move { produce(&client, &topic, per_phase).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    cluster.node(coordinator).kill();
    traffic.await.expect("second phase produced");
    wait_consumed(&seen, 2 * per_phase as i64).await;
    // The records may all be in before the controller has noticed the death;
    // the coordinator moves once it fences the node.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while coordinator_of(&client, &group).await == coordinator {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the group moves to a live node"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Commits survived the move and keep advancing.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let after = committed(&client, &group, &topic).await;
        for (p, &o) in &before {
            assert!(
                after.get(p).copied().unwrap_or(-1) >= o,
                "partition {p}: commit went back from {o} to {after:?}"
            );
        }
        if after.values().all(|&o| o == 2 * per_phase as i64) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "second phase committed: {after:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for m in &members {
        let (tx, rx) = oneshot::channel();
        m.send(tx).unwrap();
        rx.await.unwrap();
    }

    // History: no gaps; a partition picked up by another member restarts no lower
    // than the commit known before the kill.
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let mut duplicates = 0;
    for p in 0..PARTITIONS {
        let offsets: Vec<(usize, i64)> = seen
            .iter()
            .filter(|&&(_, q, _)| q == p)
            .map(|&(m, _, o)| (m, o))
            .collect();
        let distinct: BTreeSet<i64> = offsets.iter().map(|&(_, o)| o).collect();
        assert_eq!(
            distinct.len(),
            2 * per_phase,
            "partition {p}: every record consumed"
        );
        duplicates += offsets.len() - distinct.len();
        let mut restarts = 0;
        for w in offsets.windows(2) {
            let (prev, next) = (w[0].1, w[1].1);
            assert!(next <= prev + 1, "partition {p}: gap from {prev} to {next}");
            if next != prev + 1 {
                restarts += 1;
                assert!(
                    next >= before[&p],
                    "partition {p}: restarted at {next}, below the commit {} made before the kill",
                    before[&p]
                );
            }
        }
        println!("partition {p}: {restarts} restart(s)");
    }
    println!(
        "history: {} consumed, {} produced, 0 lost, {duplicates} duplicates",
        seen.len(),
        2 * per_phase * PARTITIONS as usize
    );
    cluster.shutdown().await;
}
