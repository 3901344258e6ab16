//! ElectLeaders and partition reassignments through Baton's `Admin` on the
//! in-process cluster: replicas moved for real under an `acks=all` load with a
//! live consumer (the new replica catches up before the old one is dropped and
//! its data deleted, the leader reassigned away, the state kept across a
//! controller restart), a cancelled reassignment, a preferred election after a
//! leader restart and an unclean election when the only in-sync replica died.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use baton_broker::{Cluster, ClusterBuilder};
use baton_kafka::{
    Acks, Admin, AdminError, Client, ElectionType, NewTopic, Producer, ProducerRecord, Reassignment,
};
use baton_protocol::ErrorCode;
use baton_testkit::cluster::{client, value, LiveConsumer, Load};
use baton_testkit::topic_name;

const LONG: Duration = Duration::from_secs(90);

/// Three nodes storing under `dir` that leave leadership where elections put
/// it (no automatic preferred-leader moves).
fn three_nodes(dir: &Path) -> ClusterBuilder {
    Cluster::builder()
        .brokers(3)
        .data_dir(dir)
        .auto_preferred_leader(false)
}

/// Starts `builder`'s cluster, a client and an admin on it, and creates a topic
/// named after `prefix` with one partition of `replicas` replicas.
async fn with_topic(
    builder: ClusterBuilder,
    prefix: &str,
    replicas: i16,
) -> (Cluster, Client, Admin, String) {
    let cluster = builder.start().await.expect("cluster starts");
    let client = client(&cluster).await;
    let admin = Admin::new(&client).with_operation_timeout(LONG);
    let topic = topic_name(prefix);
    admin
        .create_topics([NewTopic::new(topic.clone(), 1, replicas)])
        .await
        .expect("topic created");
    (cluster, client, admin, topic)
}

/// Bytes of log segments `node` keeps for partition 0 of `topic`.
fn segment_bytes(dir: &Path, node: i32, topic: &str) -> u64 {
    let part = dir.join(format!("node-{node}")).join(format!("{topic}-0"));
    std::fs::read_dir(&part)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

fn partition_error(err: AdminError) -> ErrorCode {
    match err {
        AdminError::Partitions(p) if p.len() == 1 => p[0].code,
        other => panic!("expected one partition error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reassignment_moves_replicas_under_load_and_drops_the_old_leader() {
    baton_testkit::init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let (mut cluster, client, admin, topic) =
        with_topic(three_nodes(dir.path()), "reassign", 2).await;
    let before = cluster.partition_state(&topic, 0).unwrap();
    let old_leader = before.leader;
    let stays = *before.replicas.iter().find(|r| **r != old_leader).unwrap();
    let new = *cluster
        .node_ids()
        .iter()
        .find(|n| !before.replicas.contains(n))
        .unwrap();
    eprintln!("moving {:?} -> [{stays}, {new}]", before.replicas);

    let consumer = LiveConsumer::start(&client, &topic, 1).await;
    let producer = Arc::new(Producer::builder(&client).acks(Acks::All).build());
    let load = Load::start(producer.clone(), topic.clone());
    load.wait_acked(load.acked() + 1_000, LONG).await;

    // The new replica cannot fetch yet: the reassignment must wait for it.
    cluster.node(new).pause_replication(true);
    admin
        .alter_partition_reassignments([Reassignment::to(topic.clone(), 0, vec![stays, new])])
        .await
        .expect("reassignment started");
    let listed = admin
        .list_partition_reassignments(Some(vec![(topic.clone(), 0)]))
        .await
        .expect("listed");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].replicas, vec![stays, new, old_leader]);
    assert_eq!(listed[0].adding_replicas, vec![new]);
    assert_eq!(listed[0].removing_replicas, vec![old_leader]);
    let meta = client.refresh_metadata().await.expect("metadata");
    let replicas = &meta.topic(&topic).unwrap().partitions[0].replicas;
    assert_eq!(
        replicas,
        &vec![stays, new, old_leader],
        "Metadata shows the union"
    );

    // The state is in the controller's log: a restarted controller keeps it.
    cluster.kill_controller();
    cluster
        .restart_controller()
        .await
        .expect("controller restarts");
    load.wait_acked(load.acked() + 1_000, LONG).await;
    let during = cluster.partition_state(&topic, 0).unwrap();
    assert_eq!(during.replicas, vec![stays, new, old_leader]);
    assert_eq!(
        during.leader, old_leader,
        "the old leader leads until the end"
    );
    assert!(
        !during.isr.contains(&new),
        "the paused replica is not in sync"
    );
    assert!(
        segment_bytes(dir.path(), old_leader, &topic) > 0,
        "the old replica keeps its data while the new one catches up"
    );

    cluster.node(new).pause_replication(false);
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state(&topic, 0).unwrap();
            v.replicas == vec![stays, new]
        })
        .await
        .unwrap_or_else(|_| {
            panic!(
                "reassignment completes: {:?}",
                cluster.partition_state(&topic, 0)
            )
        });
    let after = cluster.partition_state(&topic, 0).unwrap();
    assert_eq!(after.leader, stays, "a target replica took over the lead");
    assert!(after.leader_epoch > before.leader_epoch);
    assert!(admin
        .list_partition_reassignments(None)
        .await
        .expect("listed")
        .is_empty());
    load.wait_acked(load.acked() + 1_000, LONG).await;
    let (acked, _) = load.finish(producer).await;
    let history = consumer.finish(&acked).await;
    assert!(history.is_clean(), "{history:?}");
    assert!(acked.len() >= 3_000);

    // The removed replica stopped and deleted its data; the added one holds the
    // same batches as the leader.
    cluster
        .wait_for(LONG, |_| segment_bytes(dir.path(), old_leader, &topic) == 0)
        .await
        .expect("the removed replica's segments are deleted");
    assert_eq!(
        cluster.stored_batches(old_leader, &topic, 0, i64::MAX),
        Some(Vec::new())
    );
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state(&topic, 0).unwrap();
            let leo = v.replica(stays).unwrap().log_end_offset;
            v.replica(new).unwrap().high_watermark == leo
        })
        .await
        .expect("the new replica converges");
    let hw = cluster
        .partition_state(&topic, 0)
        .unwrap()
        .high_watermark()
        .unwrap();
    assert_eq!(
        cluster.stored_batches(new, &topic, 0, hw),
        cluster.stored_batches(stays, &topic, 0, hw)
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reassignment_cancelled_keeps_the_original_replicas_and_errors_are_kafkas() {
    baton_testkit::init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let (mut cluster, client, admin, topic) =
        with_topic(three_nodes(dir.path()), "reassign-cancel", 2).await;
    let before = cluster.partition_state(&topic, 0).unwrap();
    let new = *cluster
        .node_ids()
        .iter()
        .find(|n| !before.replicas.contains(n))
        .unwrap();
    let producer = Producer::builder(&client).acks(Acks::All).build();
    for id in 0..200 {
        let record = ProducerRecord::new(topic.clone()).value(value(id));
        producer.send(record).await.unwrap().await.unwrap();
    }

    let cancel = || Reassignment::cancel(topic.clone(), 0);
    let err = admin.alter_partition_reassignments([cancel()]).await;
    assert_eq!(
        partition_error(err.unwrap_err()),
        ErrorCode::NoReassignmentInProgress
    );
    let bad = [
        vec![],
        vec![before.replicas[0], before.replicas[0]],
        vec![before.replicas[0], 99],
    ];
    for target in bad {
        let err = admin
            .alter_partition_reassignments([Reassignment::to(topic.clone(), 0, target.clone())])
            .await;
        assert_eq!(
            partition_error(err.unwrap_err()),
            ErrorCode::InvalidReplicaAssignment,
            "{target:?}"
        );
    }
    for (t, p) in [("no-such-topic", 0), (topic.as_str(), 7)] {
        let err = admin
            .alter_partition_reassignments([Reassignment::to(t, p, vec![1])])
            .await;
        assert_eq!(
            partition_error(err.unwrap_err()),
            ErrorCode::UnknownTopicOrPartition
        );
    }

    // Add a third replica that cannot catch up, then cancel.
    cluster.node(new).pause_replication(true);
    let mut target = before.replicas.clone();
    target.push(new);
    admin
        .alter_partition_reassignments([Reassignment::to(topic.clone(), 0, target.clone())])
        .await
        .expect("reassignment started");
    let listed = admin.list_partition_reassignments(None).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        (
            &listed[0].replicas,
            &listed[0].adding_replicas,
            &listed[0].removing_replicas
        ),
        (&target, &vec![new], &vec![]),
        "{listed:?}"
    );
    admin
        .alter_partition_reassignments([cancel()])
        .await
        .expect("reassignment cancelled");
    assert!(admin
        .list_partition_reassignments(None)
        .await
        .unwrap()
        .is_empty());
    let after = cluster.partition_state(&topic, 0).unwrap();
    assert_eq!(after.replicas, before.replicas);
    assert_eq!(after.leader, before.leader);
    cluster.node(new).pause_replication(false);
    cluster
        .wait_for(LONG, |_| segment_bytes(dir.path(), new, &topic) == 0)
        .await
        .expect("the cancelled replica holds nothing");
    producer.flush().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preferred_election_moves_leadership_back_after_a_restart() {
    baton_testkit::init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let (mut cluster, _, admin, topic) =
        with_topic(three_nodes(dir.path()), "elect-preferred", 3).await;
    let tp = vec![(topic.clone(), 0)];
    let preferred = cluster.partition_state(&topic, 0).unwrap().replicas[0];
    let r = admin
        .elect_leaders(ElectionType::Preferred, Some(tp.clone()))
        .await
        .unwrap();
    assert_eq!(r[0].code, ErrorCode::ElectionNotNeeded);

    cluster.node(preferred).stop().await;
    cluster
        .wait_for(LONG, |c| {
            let l = c.partition_state(&topic, 0).unwrap().leader;
            l >= 0 && l != preferred
        })
        .await
        .expect("another replica leads");
    let r = admin
        .elect_leaders(ElectionType::Preferred, Some(tp.clone()))
        .await
        .unwrap();
    assert_eq!(r[0].code, ErrorCode::PreferredLeaderNotAvailable);

    cluster.node(preferred).restart().await.expect("restart");
    cluster
        .wait_for(LONG, |c| {
            c.partition_state(&topic, 0)
                .unwrap()
                .isr
                .contains(&preferred)
        })
        .await
        .expect("the preferred replica is back in sync");
    assert_ne!(
        cluster.partition_state(&topic, 0).unwrap().leader,
        preferred
    );
    let r = admin
        .elect_leaders(ElectionType::Preferred, Some(tp.clone()))
        .await
        .unwrap();
    assert_eq!((r[0].code, r[0].partition), (ErrorCode::None, 0), "{r:?}");
    assert_eq!(
        cluster.partition_state(&topic, 0).unwrap().leader,
        preferred
    );
    // Every partition at once: nothing needs an election now, so nothing is
    // reported.
    let all = admin
        .elect_leaders(ElectionType::Preferred, None)
        .await
        .unwrap();
    assert!(all.is_empty(), "{all:?}");
    let r = admin
        .elect_leaders(
            ElectionType::Preferred,
            Some(vec![("no-such-topic".into(), 0)]),
        )
        .await
        .unwrap();
    assert_eq!(r[0].code, ErrorCode::UnknownTopicOrPartition);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unclean_election_elects_a_live_out_of_sync_replica_and_the_old_leader_truncates() {
    baton_testkit::init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let (mut cluster, client, admin, topic) = with_topic(
        three_nodes(dir.path())
            .session_timeout(Duration::from_secs(3))
            .replica_lag_time_max(Duration::from_secs(2)),
        "elect-unclean",
        2,
    )
    .await;
    let tp = vec![(topic.clone(), 0)];
    let v = cluster.partition_state(&topic, 0).unwrap();
    let (leader, follower) = (
        v.leader,
        *v.replicas.iter().find(|r| **r != v.leader).unwrap(),
    );
    let producer = Producer::builder(&client).acks(Acks::All).build();
    let send = |id: u64| {
        let record = ProducerRecord::new(topic.clone()).value(value(id));
        let p = &producer;
        async move { p.send(record).await.unwrap().await }
    };
    for id in 0..100 {
        send(id).await.expect("acknowledged");
    }
    // The follower stops fetching; the leader alone takes more (acks=1), and
    // drops the lagging follower from the ISR.
    cluster.node(follower).pause_replication(true);
    let leader_only = Producer::builder(&client).acks(Acks::Leader).build();
    for id in 100..200 {
        let record = ProducerRecord::new(topic.clone()).value(value(id));
        let ack = leader_only.send(record).await.unwrap().await;
        ack.expect("acknowledged by the leader");
    }
    cluster
        .wait_for(LONG, |c| {
            c.partition_state(&topic, 0).unwrap().isr == vec![leader]
        })
        .await
        .expect("the follower leaves the ISR");
    let r = admin
        .elect_leaders(ElectionType::Unclean, Some(tp.clone()))
        .await
        .unwrap();
    assert_eq!(r[0].code, ErrorCode::ElectionNotNeeded, "it has a leader");

    cluster.node(leader).kill();
    cluster
        .wait_for(LONG, |c| c.partition_state(&topic, 0).unwrap().leader == -1)
        .await
        .expect("offline: the only in-sync replica is dead");
    cluster.node(follower).pause_replication(false);
    let r = admin
        .elect_leaders(ElectionType::Preferred, Some(tp.clone()))
        .await
        .unwrap();
    assert_eq!(r[0].code, ErrorCode::PreferredLeaderNotAvailable);
    let r = admin
        .elect_leaders(ElectionType::Unclean, Some(tp.clone()))
        .await
        .unwrap();
    assert_eq!(r[0].code, ErrorCode::None, "{r:?}");
    let v = cluster.partition_state(&topic, 0).unwrap();
    assert_eq!((v.leader, v.isr.clone()), (follower, vec![follower]));
    for id in 200..250 {
        send(id).await.expect("the new leader takes writes");
    }

    // The old leader returns, drops what only it had, and follows.
    cluster.node(leader).restart().await.expect("restart");
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state(&topic, 0).unwrap();
            let leo = v.replica(follower).unwrap().log_end_offset;
            v.isr.contains(&leader) && v.replica(leader).unwrap().high_watermark == leo
        })
        .await
        .unwrap_or_else(|_| {
            panic!(
                "old leader rejoins: {:?}",
                cluster.partition_state(&topic, 0)
            )
        });
    let hw = cluster
        .partition_state(&topic, 0)
        .unwrap()
        .high_watermark()
        .unwrap();
    assert_eq!(
        cluster.stored_batches(leader, &topic, 0, hw),
        cluster.stored_batches(follower, &topic, 0, hw),
        "the old leader truncated to the new leader's log"
    );
    producer.flush().await;
    leader_only.flush().await;
    cluster.shutdown().await;
}
