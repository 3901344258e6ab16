//! `baton topics` and `baton cluster`.

use baton_testkit::topic_name;

use crate::harness::Baton;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_are_created_listed_described_and_deleted() {
    let b = Baton::start().await;
    let t = topic_name("topics");
    let created = b
        .run(&[
            "topics",
            "create",
            &t,
            "--partitions",
            "3",
            "-c",
            "retention.ms=60000",
        ])
        .await
        .ok();
    assert_eq!(created.stdout, format!("created topic {t}\n"));
    let list = b.run(&["topics", "list"]).await.ok();
    assert!(list.lines().contains(&t.as_str()), "{list:?}");

    let described = b.run(&["topics", "describe", &t]).await.ok();
    let lines = described.lines();
    assert_eq!(lines.len(), 4, "{described:?}");
    assert!(
        lines[0].starts_with(&format!("Topic: {t}\tTopicId: ")),
        "{described:?}"
    );
    assert!(
        lines[0]
            .ends_with("\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=60000"),
        "{described:?}"
    );
    for (p, line) in lines[1..].iter().enumerate() {
        assert!(
            line.contains(&format!("\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0")),
            "{described:?}"
        );
    }

    // Creating it again fails, unless told an existing one is fine.
    let again = b.run(&["topics", "create", &t]).await.status(1);
    assert!(again.stderr.contains("exists already"), "{again:?}");
    b.run(&["topics", "create", &t, "--if-not-exists"])
        .await
        .ok();

    b.run(&["topics", "delete", &t]).await.ok();
    let gone = b.run(&["topics", "describe", &t]).await.status(3);
    assert!(gone.stderr.contains("does not exist"), "{gone:?}");
    let twice = b.run(&["topics", "delete", &t]).await.status(3);
    assert!(twice.stderr.contains("--if-exists"), "{twice:?}");
    b.run(&["topics", "delete", &t, "--if-exists"]).await.ok();
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_describe_names_the_broker() {
    let b = Baton::start().await;
    let out = b.run(&["cluster", "describe"]).await.ok();
    let lines = out.lines();
    assert!(lines[0].starts_with("Cluster: "), "{out:?}");
    assert_eq!(lines[1], "Controller: 0", "{out:?}");
    assert_eq!(lines[2], format!("Broker: 0\t{}", b.bootstrap), "{out:?}");
    b.stop().await;
}
