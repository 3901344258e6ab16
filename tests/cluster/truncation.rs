//! KIP-320 in the in-process cluster: a consumer reading through a leader hard
//! kill with an unclean election finds that the new leader's log is shorter than
//! what it read, reports it as [`ConsumerError::LogTruncation`] with the divergence
//! point, and continues with the new leader's records from there. The plain
//! [`Consumer`] and the [`GroupConsumer`] (the same fetcher) alike.

use std::time::Duration;

use baton_broker::Cluster;
use baton_kafka::{
    Client, Consumer, ConsumerError, ConsumerRecord, GroupConsumer, GroupError, StartOffset,
    TopicPartition,
};
use baton_protocol::messages::FindCoordinatorRequest;
use baton_testkit::cluster::parse;

use crate::unclean::{produce_all, unclean_pair, UncleanPair};

const LONG: Duration = Duration::from_secs(90);

/// The consumer under test.
enum Reader {
    Plain(Consumer),
    Group(Box<GroupConsumer>),
}

impl Reader {
    /// A consumer of `topic`; a group member if `group` names its group.
    async fn start(client: &Client, topic: &str, group: Option<String>) -> Reader {
        if let Some(group) = group {
            let c = GroupConsumer::builder(client, group)
                .subscribe([topic.to_string()])
                .heartbeat_interval(Duration::from_millis(200))
                .max_wait(Duration::from_millis(100))
                .build()
                .await
                .expect("group consumer");
            Reader::Group(Box::new(c))
        } else {
            let c = Consumer::builder(client)
                .assign(topic.to_string(), 0, StartOffset::Earliest)
                .max_wait(Duration::from_millis(100))
                .build()
                .await
                .expect("consumer");
            Reader::Plain(c)
        }
    }

    async fn next(&mut self) -> Result<ConsumerRecord, ConsumerError> {
        let got = match self {
            Reader::Plain(c) => tokio::time::timeout(LONG, c.recv()).await,
            Reader::Group(c) => tokio::time::timeout(LONG, c.recv()).await.map(|r| {
                r.map_err(|e| match e {
                    GroupError::Consumer(e) => e,
                    e => panic!("group error: {e}"),
                })
            }),
        };
        got.expect("the consumer yields something")
    }

    /// Commits the group member's position and leaves the group.
    async fn commit_and_close(self) {
        if let Reader::Group(mut c) = self {
            c.commit().await.expect("commit");
            c.close().await.expect("close");
        }
    }

    fn position(&self, tp: &TopicPartition) -> Option<i64> {
        match self {
            Reader::Plain(c) => c.position(tp),
            Reader::Group(c) => c.position(tp),
        }
    }
}

fn id_of(r: &ConsumerRecord) -> u64 {
    parse(r.value.as_deref().expect("value")).expect("intact value")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_reports_unclean_truncation_and_continues_from_the_divergence() {
    unclean_truncation(Mode::Plain).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_consumer_reports_unclean_truncation_and_continues_from_the_divergence() {
    unclean_truncation(Mode::Group).await;
}

/// The group member commits its position (with the leader epoch of its last
/// record) and leaves before the truncation; the member that resumes from that
/// commit finds the truncation by validating the committed position.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_resuming_from_a_commit_detects_the_truncation() {
    unclean_truncation(Mode::GroupResumed).await;
}

/// Who reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// One plain consumer throughout.
    Plain,
    /// One group member throughout.
    Group,
    /// A group member until the truncation, then another from its commit.
    GroupResumed,
}

/// The coordinator node of `group`, through FindCoordinator (which also creates
/// the offsets topic).
async fn coordinator(client: &Client, group: &str) -> i32 {
    let deadline = tokio::time::Instant::now() + LONG;
    loop {
        let node = *client.metadata().brokers.keys().next().expect("a broker");
        let req = FindCoordinatorRequest {
            key: group.to_string(),
            key_type: 0,
            coordinator_keys: vec![group.to_string()],
        };
        if let Ok(conn) = client.broker_connection(node).await {
            if let Ok(resp) = conn.send(&req).await {
                let found = match resp.coordinators.first() {
                    Some(c) if c.error_code == 0 => Some(c.node_id),
                    Some(_) => None,
                    None if resp.error_code == 0 => Some(resp.node_id),
                    None => None,
                };
                if let Some(id) = found {
                    return id;
                }
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no coordinator for {group}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn unclean_truncation(mode: Mode) {
    let UncleanPair {
        mut cluster,
        _dir,
        client,
        topic,
        producer,
        leader: a,
        follower: b,
        ..
    } = unclean_pair(Cluster::builder().brokers(3), "truncation").await;

    // A group's coordinator on the third node: the nodes going down below then
    // leave the group alone (no rebalance, which would restart the partition
    // from its committed offset).
    let group = if mode != Mode::Plain {
        let mut name = None;
        for i in 0..100 {
            let g = format!("{topic}-group-{i}");
            let c = coordinator(&client, &g).await;
            if c != a && c != b {
                name = Some(g);
                break;
            }
        }
        Some(name.expect("a group coordinated by the third node"))
    } else {
        None
    };
    let mut consumer = Reader::start(&client, &topic, group.clone()).await;
    for i in 0..100 {
        let r = consumer.next().await.expect("record");
        assert_eq!((r.offset, id_of(&r)), (i, i as u64));
    }

    // The follower leaves; the leader takes 50 records only it has, and the
    // consumer reads them.
    cluster.node(b).stop().await;
    cluster
        .wait_for(LONG, |c| {
            c.partition_state(&topic, 0).unwrap().isr == vec![a]
        })
        .await
        .expect("the ISR shrinks to the leader");
    let acked = produce_all(&producer, &topic, 100..150).await;
    assert_eq!(acked[&149], (0, 149));
    let mut last_epoch = -1;
    for i in 100..150 {
        let r = consumer.next().await.expect("record");
        assert_eq!((r.offset, id_of(&r)), (i, i as u64));
        last_epoch = r.leader_epoch;
    }
    assert!(last_epoch >= 0, "records carry their leader epoch");
    let consumer = if mode == Mode::GroupResumed {
        consumer.commit_and_close().await;
        None
    } else {
        Some(consumer)
    };

    // The leader dies; the follower returns and is elected uncleanly with its log
    // of 100 records, then takes 30 of its own at 100..130.
    cluster.node(a).kill();
    cluster.node(b).restart().await.expect("restart");
    cluster
        .wait_for(LONG, |c| c.partition_state(&topic, 0).unwrap().leader == b)
        .await
        .unwrap_or_else(|_| panic!("{b} elected: {:?}", cluster.partition_state(&topic, 0)));
    let later = produce_all(&producer, &topic, 200..230).await;
    assert_eq!(later[&200], (0, 100), "the new leader's log ends at 100");
    producer.close().await;

    // The consumer says so, with the divergence point, then reads the new log on.
    let mut consumer = match consumer {
        Some(c) => c,
        None => Reader::start(&client, &topic, group.clone()).await,
    };
    match consumer.next().await {
        Err(ConsumerError::LogTruncation {
            topic: t,
            partition,
            position,
            divergence,
        }) => {
            assert_eq!((t.as_str(), partition), (topic.as_str(), 0));
            assert_eq!((position, divergence), (150, 100));
        }
        other => panic!("expected LogTruncation, got {other:?}"),
    }
    assert_eq!(
        consumer.position(&TopicPartition::new(topic.as_str(), 0)),
        Some(100)
    );
    for i in 0..30u64 {
        let r = consumer.next().await.expect("record after the truncation");
        assert_eq!((r.offset, id_of(&r)), (100 + i as i64, 200 + i));
    }
    if group.is_none() {
        // A position stored with its leader epoch before the truncation (offset
        // 150, the epoch of record 149) is validated when sought, as Kafka's
        // consumer validates a committed OffsetAndMetadata.
        let tp = TopicPartition::new(topic.as_str(), 0);
        let mut later = Consumer::builder(&client)
            .assign(topic.clone(), 0, StartOffset::Offset(0))
            .max_wait(Duration::from_millis(100))
            .build()
            .await
            .expect("consumer");
        later.seek_validated(&tp, 150, last_epoch).unwrap();
        let mut later = Reader::Plain(later);
        match later.next().await {
            Err(ConsumerError::LogTruncation {
                position,
                divergence,
                ..
            }) => assert_eq!((position, divergence), (150, 100)),
            other => panic!("expected LogTruncation after the seek, got {other:?}"),
        }
        let r = later.next().await.expect("record");
        assert_eq!((r.offset, id_of(&r)), (100, 200));
    }
    eprintln!("timeline:\n{}", cluster.timeline_text());
    cluster.shutdown().await;
}
