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

/// The first line of `baton topics describe TOPIC`.
async fn first_line(b: &Baton, topic: &str) -> String {
    let out = b.run(&["topics", "describe", topic]).await.ok();
    out.lines()[0].to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_alter_sets_and_removes_configs_and_adds_partitions() {
    let b = Baton::start().await;
    let t = topic_name("alter");
    b.run(&["topics", "create", &t, "-p", "2"]).await.ok();
    let altered = b
        .run(&[
            "topics",
            "alter",
            &t,
            "--add-config",
            "retention.ms=120000",
            "--partitions",
            "5",
        ])
        .await
        .ok();
    assert_eq!(
        altered.lines(),
        vec![
            format!("altered the configs of topic {t}"),
            format!("altered topic {t}: 2 -> 5 partitions"),
        ]
    );
    let line = first_line(&b, &t).await;
    assert!(
        line.ends_with("\tPartitionCount: 5\tReplicationFactor: 1\tConfigs: retention.ms=120000"),
        "{line}"
    );
    b.run(&["topics", "alter", &t, "--delete-config", "retention.ms"])
        .await
        .ok();
    let line = first_line(&b, &t).await;
    assert!(line.ends_with("\tConfigs: "), "{line}");

    let unknown = b
        .run(&["topics", "alter", &t, "--add-config", "no.such.config=1"])
        .await
        .status(1);
    assert!(unknown.stderr.contains("no.such.config"), "{unknown:?}");
    let fewer = b
        .run(&["topics", "alter", &t, "--partitions", "3"])
        .await
        .status(2);
    assert!(fewer.stderr.contains("has 5 partitions"), "{fewer:?}");
    b.run(&["topics", "alter", &t]).await.status(2);
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_node_cluster_is_described_with_its_replicas() {
    let cluster = baton_broker::Cluster::builder()
        .brokers(3)
        .start()
        .await
        .expect("the cluster starts");
    let bootstrap = cluster.bootstrap();
    let out = crate::harness::run(Some(&bootstrap), &["cluster", "describe"], b"")
        .await
        .ok();
    assert_eq!(
        out.lines()
            .iter()
            .filter(|l| l.starts_with("Broker: "))
            .count(),
        3,
        "{out:?}"
    );
    let t = topic_name("replicated");
    let args = ["topics", "create", t.as_str(), "-p", "2", "-r", "3"];
    crate::harness::run(Some(&bootstrap), &args, b"").await.ok();
    let args = ["topics", "describe", t.as_str()];
    let out = crate::harness::run(Some(&bootstrap), &args, b"").await.ok();
    assert!(
        out.lines()[0].contains("\tPartitionCount: 2\tReplicationFactor: 3\t"),
        "{out:?}"
    );
    for line in &out.lines()[1..] {
        let replicas = line.split("\tReplicas: ").nth(1).unwrap();
        assert_eq!(
            replicas.split('\t').next().unwrap().split(',').count(),
            3,
            "{out:?}"
        );
    }
    cluster.shutdown().await;
}
