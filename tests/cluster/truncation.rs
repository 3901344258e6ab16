//! KIP-320 in the in-process cluster: a consumer reading through a leader hard
//! kill with an unclean election finds that the new leader's log is shorter than
//! what it read, reports it as [`ConsumerError::LogTruncation`] with the divergence
//! point, and continues with the new leader's records from there.

use std::collections::HashMap;
use std::time::Duration;

use baton::{
    Acks, Admin, Consumer, ConsumerError, ConsumerRecord, NewTopic, Producer, ProducerRecord,
    StartOffset,
};
use baton_broker::Cluster;
use baton_testkit::cluster::{client, parse, value};
use baton_testkit::topic_name;

const LONG: Duration = Duration::from_secs(90);

/// Sends `ids` and waits for every acknowledgement: id -> offset.
async fn produce_all(
    producer: &Producer,
    topic: &str,
    ids: std::ops::Range<u64>,
) -> HashMap<u64, i64> {
    let mut pending = Vec::new();
    for id in ids {
        let r = ProducerRecord::new(topic.to_owned()).value(value(id));
        pending.push((id, producer.send(r).await.expect("accepted")));
    }
    let mut acked = HashMap::new();
    for (id, d) in pending {
        let m = d
            .await
            .unwrap_or_else(|e| panic!("record {id} failed: {e}"));
        acked.insert(id, m.offset);
    }
    acked
}

async fn next(c: &mut Consumer) -> Result<ConsumerRecord, ConsumerError> {
    tokio::time::timeout(LONG, c.recv())
        .await
        .expect("the consumer yields something")
}

fn id_of(r: &ConsumerRecord) -> u64 {
    parse(r.value.as_deref().expect("value")).expect("intact value")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_reports_unclean_truncation_and_continues_from_the_divergence() {
    baton_testkit::init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::builder()
        .brokers(3)
        .data_dir(dir.path())
        .session_timeout(Duration::from_secs(3))
        .auto_preferred_leader(false)
        .start()
        .await
        .expect("cluster starts");
    let client = client(&cluster).await;
    let topic = topic_name("truncation");
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
    produce_all(&producer, &topic, 0..100).await;
    let v = cluster.partition_state(&topic, 0).unwrap();
    let (a, b) = (
        v.leader,
        *v.replicas.iter().find(|r| **r != v.leader).unwrap(),
    );
    cluster
        .wait_for(LONG, |c| {
            c.partition_state(&topic, 0)
                .unwrap()
                .replica(b)
                .unwrap()
                .log_end_offset
                == 100
        })
        .await
        .expect("the follower catches up");

    let mut consumer = Consumer::builder(&client)
        .assign(topic.clone(), 0, StartOffset::Earliest)
        .max_wait(Duration::from_millis(100))
        .build()
        .await
        .expect("consumer");
    for i in 0..100 {
        let r = next(&mut consumer).await.expect("record");
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
    assert_eq!(acked[&149], 149);
    for i in 100..150 {
        let r = next(&mut consumer).await.expect("record");
        assert_eq!((r.offset, id_of(&r)), (i, i as u64));
    }

    // The leader dies; the follower returns and is elected uncleanly with its log
    // of 100 records, then takes 30 of its own at 100..130.
    cluster.node(a).kill();
    cluster.node(b).restart().await.expect("restart");
    cluster
        .wait_for(LONG, |c| c.partition_state(&topic, 0).unwrap().leader == b)
        .await
        .unwrap_or_else(|_| panic!("{b} elected: {:?}", cluster.partition_state(&topic, 0)));
    let later = produce_all(&producer, &topic, 200..230).await;
    assert_eq!(later[&200], 100, "the new leader's log ends at 100");
    producer.close().await;

    // The consumer says so, with the divergence point, then reads the new log on.
    match next(&mut consumer).await {
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
        consumer.position(&baton::TopicPartition::new(topic.as_str(), 0)),
        Some(100)
    );
    for i in 0..30u64 {
        let r = next(&mut consumer)
            .await
            .expect("record after the truncation");
        assert_eq!((r.offset, id_of(&r)), (100 + i as i64, 200 + i));
    }
    eprintln!("timeline:\n{}", cluster.timeline_text());
    cluster.shutdown().await;
}
