//! The set-up the unclean-election tests share (`durability`, `truncation`): a
//! cluster on disk, a topic of one partition on two replicas that allows unclean
//! leader election, and 100 records the leader acknowledged and the follower copied.

use std::time::Duration;

use baton_broker::{Cluster, ClusterBuilder};
use baton_kafka::{Acks, Admin, Client, NewTopic, Producer, ProducerRecord};
use baton_testkit::cluster::{client, value, Acked};
use baton_testkit::topic_name;
use tempfile::TempDir;

const LONG: Duration = Duration::from_secs(90);

/// Sends `ids` with `producer` and waits for every acknowledgement: id ->
/// (partition, offset).
pub(crate) async fn produce_all(
    producer: &Producer,
    topic: &str,
    ids: std::ops::Range<u64>,
) -> Acked {
    let mut pending = Vec::new();
    for id in ids {
        let r = ProducerRecord::new(topic.to_owned()).value(value(id));
        pending.push((id, producer.send(r).await.expect("accepted")));
    }
    let mut acked = Acked::new();
    for (id, d) in pending {
        let m = d
            .await
            .unwrap_or_else(|e| panic!("record {id} failed: {e}"));
        acked.insert(id, (m.partition, m.offset));
    }
    acked
}

/// A started [`unclean_pair`].
pub(crate) struct UncleanPair {
    pub cluster: Cluster,
    /// The cluster's data directory, removed on drop.
    pub _dir: TempDir,
    pub client: Client,
    pub topic: String,
    /// `acks=1`, not idempotent: a lone leader takes writes its follower lacks.
    pub producer: Producer,
    /// The partition's leader and its follower.
    pub leader: i32,
    pub follower: i32,
    /// Records 0..100, at offsets 0..100.
    pub acked: Acked,
}

/// Starts `builder` (its broker count and modes set by the caller) on a fresh data
/// directory with a 3 s session timeout and no preferred-leader moves, creates the
/// topic (named after `name`) and writes records 0..100, returning once the
/// follower holds all of them.
pub(crate) async fn unclean_pair(builder: ClusterBuilder, name: &str) -> UncleanPair {
    baton_testkit::init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let cluster = builder
        .data_dir(dir.path())
        .session_timeout(Duration::from_secs(3))
        .auto_preferred_leader(false)
        .start()
        .await
        .expect("cluster starts");
    let client = client(&cluster).await;
    let topic = topic_name(name);
    Admin::new(&client)
        .create_topics([
            NewTopic::new(topic.clone(), 1, 2).config("unclean.leader.election.enable", "true")
        ])
        .await
        .expect("topic created");
    let producer = Producer::builder(&client)
        .acks(Acks::Leader)
        .idempotence(false)
        .build();
    let acked = produce_all(&producer, &topic, 0..100).await;
    let v = cluster.partition_state(&topic, 0).unwrap();
    let (leader, follower) = (
        v.leader,
        *v.replicas.iter().find(|r| **r != v.leader).unwrap(),
    );
    cluster
        .wait_for(LONG, |c| {
            c.partition_state(&topic, 0)
                .unwrap()
                .replica(follower)
                .unwrap()
                .log_end_offset
                == 100
        })
        .await
        .expect("the follower catches up");
    UncleanPair {
        cluster,
        _dir: dir,
        client,
        topic,
        producer,
        leader,
        follower,
        acked,
    }
}
