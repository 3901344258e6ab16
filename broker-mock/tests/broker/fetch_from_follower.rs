//! KIP-392 over raw frames on a 3-node in-process cluster with racks: Metadata
//! and DescribeCluster report each node's rack, the rack-aware selector sends a
//! consumer to the in-sync follower of its rack, and that follower serves the same
//! records up to its high watermark, waking long polls as its high watermark moves,
//! with Kafka's errors for old versions, non-replicas, unknown and fenced epochs
//! and offsets out of range.

use std::time::Duration;

use baton_broker::{Cluster, ReplicaSelector};
use baton_protocol::messages::*;
use baton_protocol::ErrorCode;
use baton_testkit::wire::*;

const LONG: Duration = Duration::from_secs(60);

/// Each broker of a Metadata response with its rack, by node id.
pub(super) fn racks(md: &MetadataResponse) -> Vec<(i32, Option<String>)> {
    let mut racks: Vec<(i32, Option<String>)> = md
        .brokers
        .iter()
        .map(|b| (b.node_id, b.rack.clone()))
        .collect();
    racks.sort();
    racks
}

/// A consumer's Fetch of partition 0 of `topic` from `offset` with `rack`.
fn consumer_fetch(topic: &str, offset: i64, rack: &str) -> FetchRequest {
    let mut req = fetch_req(topic, 0, offset, 0, 0);
    req.rack_id = rack.into();
    req
}

fn rack(id: i32) -> String {
    format!("rack-{id}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_is_sent_to_the_follower_of_its_rack_which_serves_the_same_records() {
    let cluster = Cluster::builder()
        .brokers(3)
        .rack(1, rack(1))
        .rack(2, rack(2))
        .rack(3, rack(3))
        .replica_selector(ReplicaSelector::RackAware)
        .start()
        .await
        .unwrap();

    // Every node's rack is reported.
    let mut c = Client::connect(node_addr(&cluster, 1)).await;
    let md = c.call(&MetadataRequest::default(), 12).await;
    assert_eq!(
        racks(&md),
        (1..=3).map(|i| (i, Some(rack(i)))).collect::<Vec<_>>()
    );
    let dc = c.call(&DescribeClusterRequest::default(), 1).await;
    assert!(dc
        .brokers
        .iter()
        .all(|b| b.rack.as_deref() == Some(rack(b.broker_id).as_str())));

    let topic = topic_name("racks");
    create_replicated(&cluster, &topic, 1, 3, &[]).await;
    let v = cluster.partition_state(&topic, 0).unwrap();
    let follower = *v.replicas.iter().find(|r| **r != v.leader).unwrap();
    let mut leader = Client::connect(node_addr(&cluster, v.leader)).await;
    let resp = leader
        .call(&produce_req(&topic, 0, -1, records(1, &["a", "b", "c"])), 9)
        .await;
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state(&topic, 0).unwrap();
            v.isr.len() == 3 && v.replica_states.iter().all(|r| r.high_watermark == 3)
        })
        .await
        .unwrap();

    // The leader names the follower of the consumer's rack instead of sending records.
    for version in [11, 12] {
        let resp = leader
            .call(&consumer_fetch(&topic, 0, &rack(follower)), version)
            .await;
        let p = &resp.responses[0].partitions[0];
        assert_eq!(p.error_code, 0);
        assert_eq!(p.preferred_read_replica, follower, "v{version}");
        assert_eq!(p.high_watermark, 3);
        assert!(values(&p.records).is_empty());
    }
    // A consumer in the leader's rack, in no replica's rack, or with no rack reads
    // from the leader.
    let from_leader = leader
        .call(&consumer_fetch(&topic, 0, &rack(v.leader)), 12)
        .await;
    let lp = &from_leader.responses[0].partitions[0];
    assert_eq!(lp.preferred_read_replica, -1);
    assert_eq!(values(&lp.records), ["a", "b", "c"]);
    for other in ["elsewhere", ""] {
        let resp = leader.call(&consumer_fetch(&topic, 0, other), 12).await;
        assert_eq!(resp.responses[0].partitions[0].preferred_read_replica, -1);
    }

    // The follower serves the same bytes.
    let mut f = Client::connect(node_addr(&cluster, follower)).await;
    let resp = f
        .call(&consumer_fetch(&topic, 0, &rack(follower)), 12)
        .await;
    let fp = &resp.responses[0].partitions[0];
    assert_eq!(fp.error_code, 0);
    assert_eq!(
        fp.preferred_read_replica, -1,
        "a follower sends nobody elsewhere"
    );
    assert_eq!(fp.high_watermark, 3);
    assert_eq!(fp.records, lp.records, "the same batches as the leader's");

    // Kafka's errors on a follower.
    let resp = f.call(&consumer_fetch(&topic, 0, ""), 10).await;
    assert_eq!(
        resp.responses[0].partitions[0].error_code,
        ErrorCode::NotLeaderOrFollower.code(),
        "before v11 only the leader serves"
    );
    let resp = f.call(&consumer_fetch(&topic, 99, ""), 12).await;
    assert_eq!(
        resp.responses[0].partitions[0].error_code,
        ErrorCode::OffsetOutOfRange.code()
    );
    let mut req = consumer_fetch(&topic, 0, "");
    req.topics[0].partitions[0].current_leader_epoch = v.leader_epoch + 1;
    let resp = f.call(&req, 12).await;
    assert_eq!(
        resp.responses[0].partitions[0].error_code,
        ErrorCode::UnknownLeaderEpoch.code()
    );
    req.topics[0].partitions[0].current_leader_epoch = v.leader_epoch;
    let resp = f.call(&req, 12).await;
    assert_eq!(resp.responses[0].partitions[0].error_code, 0);

    // A node that holds no replica refuses.
    let single = topic_name("racks-rf1");
    create_replicated(&cluster, &single, 1, 1, &[]).await;
    let s = cluster.partition_state(&single, 0).unwrap();
    let outsider = (1..=3).find(|n| *n != s.leader).unwrap();
    let mut o = Client::connect(node_addr(&cluster, outsider)).await;
    let resp = o.call(&consumer_fetch(&single, 0, ""), 12).await;
    assert_eq!(
        resp.responses[0].partitions[0].error_code,
        ErrorCode::NotLeaderOrFollower.code()
    );

    // A long poll on the follower at its high watermark wakes when the high
    // watermark it learns from the leader moves past a new record.
    let mut req = consumer_fetch(&topic, 3, &rack(follower));
    req.max_wait_ms = 60_000;
    req.min_bytes = 1;
    let waiting = f.send(&req, 12).await;
    let resp = leader
        .call(&produce_req(&topic, 0, -1, records(2, &["d"])), 9)
        .await;
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
    let (got, resp) = f.recv::<FetchRequest>(12).await;
    assert_eq!(got, waiting);
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    assert_eq!(values(&p.records), ["d"]);
    assert_eq!(p.high_watermark, 4);

    // After a leader change, a follower fences the old epoch.
    let mut cluster = cluster;
    cluster.node(v.leader).stop().await;
    cluster
        .wait_for(LONG, |c| {
            let n = c.partition_state(&topic, 0).unwrap();
            n.leader > 0
                && n.leader != v.leader
                && n.replica_states.iter().any(|r| {
                    r.node != n.leader
                        && r.node != v.leader
                        && r.role == "follower"
                        && r.leader_epoch == n.leader_epoch
                })
        })
        .await
        .unwrap();
    let n = cluster.partition_state(&topic, 0).unwrap();
    assert!(n.leader_epoch > v.leader_epoch);
    let still = n
        .replica_states
        .iter()
        .find(|r| r.node != n.leader && r.node != v.leader)
        .unwrap()
        .node;
    let mut s = Client::connect(node_addr(&cluster, still)).await;
    let mut req = consumer_fetch(&topic, 0, "");
    req.topics[0].partitions[0].current_leader_epoch = v.leader_epoch;
    let resp = s.call(&req, 12).await;
    assert_eq!(
        resp.responses[0].partitions[0].error_code,
        ErrorCode::FencedLeaderEpoch.code()
    );
    cluster.shutdown().await;
}
