//! `baton check`: the history checker on a live topic.

use baton_broker::history::payload;
use baton_kafka::{Client, Producer, ProducerRecord};
use baton_testkit::topic_name;

use crate::harness::Baton;

/// Writes history payloads with ids `ids` to `topic`, alternating partitions.
async fn write_payloads(bootstrap: &str, topic: &str, ids: std::ops::Range<u64>) {
    let client = Client::builder([bootstrap]).build().await.unwrap();
    let producer = Producer::builder(&client).build();
    let mut deliveries = Vec::new();
    for id in ids {
        let record = ProducerRecord::new(topic)
            .partition((id % 2) as i32)
            .value(payload(id, 32));
        deliveries.push(producer.send(record).await.unwrap());
    }
    for d in deliveries {
        d.await.unwrap();
    }
    producer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_passes_on_a_complete_topic_and_reports_violations() {
    let b = Baton::start().await;
    let t = topic_name("check");
    b.run(&["topics", "create", &t, "-p", "2"]).await.ok();
    write_payloads(&b.bootstrap, &t, 0..200).await;

    let good = b.run(&["check", &t]).await.ok();
    assert!(
        good.stdout.contains("acked=200 failed=0 unknown=0 consumed=200 | lost=0 duplicated=0 reordered=0 corrupted=0"),
        "{good:?}"
    );
    assert!(good.stdout.contains("=> PASS"), "{good:?}");

    // Ids 200..250 were never written.
    let short = b.run(&["check", &t, "--expect", "250"]).await.status(1);
    assert!(short.stdout.contains("lost=50 "), "{short:?}");
    assert!(
        short.stdout.contains("first lost ids: 200, 201, 202"),
        "{short:?}"
    );
    assert!(short.stderr.contains("violations"), "{short:?}");

    // A record that is no payload at all.
    b.run_with_input(&["produce", &t, "-p", "0"], b"junk\n")
        .await
        .ok();
    let junk = b.run(&["check", &t]).await.status(1);
    assert!(
        junk.stdout.contains("1 record(s) are not history payloads"),
        "{junk:?}"
    );
    b.stop().await;
}
