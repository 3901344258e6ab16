//! The documented exit statuses: 2 usage, 3 not found, 4 unreachable.

use baton_testkit::topic_name;

use crate::harness::{run, Baton};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_usage_exits_2_and_says_what_to_fix() {
    let help = run(None, &["--help"], b"").await.ok();
    assert!(help.stdout.contains("Exit status:"), "{help:?}");
    for cmd in ["produce", "consume", "topics", "check"] {
        let h = run(None, &[cmd, "--help"], b"").await.ok();
        assert!(h.stdout.contains("Usage: baton"), "{h:?}");
    }
    let unknown = run(Some("127.0.0.1:9"), &["consume", "t", "--frm", "x"], b"")
        .await
        .status(2);
    assert!(unknown.stderr.contains("--frm"), "{unknown:?}");
    let from = run(
        Some("127.0.0.1:9"),
        &["consume", "t", "--from", "soon"],
        b"",
    )
    .await
    .status(2);
    assert!(from.stderr.contains("@TIMESTAMP_MS"), "{from:?}");
    let none = run(None, &["topics", "list"], b"").await.status(2);
    assert!(none.stderr.contains("BATON_BOOTSTRAP"), "{none:?}");
    let sasl = run(
        Some("127.0.0.1:9"),
        &["topics", "list", "--sasl-username", "u"],
        b"",
    )
    .await
    .status(2);
    assert!(sasl.stderr.contains("--security-protocol"), "{sasl:?}");

    let b = Baton::start().await;
    let t = topic_name("usage");
    b.run(&["topics", "create", &t, "-p", "1"]).await.ok();
    let format = b
        .run(&["consume", &t, "-e", "--format", "{nope}"])
        .await
        .status(2);
    assert!(format.stderr.contains("unknown field {nope}"), "{format:?}");
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_topics_and_partitions_exit_3() {
    let b = Baton::start().await;
    let missing = topic_name("missing");
    for args in [
        vec!["consume", missing.as_str(), "-e"],
        vec!["produce", missing.as_str()],
        vec!["check", missing.as_str()],
        vec!["topics", "describe", missing.as_str()],
    ] {
        let r = b.run_with_input(&args, b"x\n").await.status(3);
        assert!(r.stderr.contains("does not exist"), "{r:?}");
    }
    let t = topic_name("one");
    b.run(&["topics", "create", &t, "-p", "1"]).await.ok();
    let r = b.run(&["consume", &t, "-e", "-p", "5"]).await.status(3);
    assert!(r.stderr.contains("has no partition 5"), "{r:?}");
    let r = b
        .run_with_input(&["produce", &t, "-p", "5"], b"x\n")
        .await
        .status(3);
    assert!(r.stderr.contains("has no partition 5"), "{r:?}");
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_cluster_exits_4() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let r = run(Some(&addr), &["topics", "list", "--timeout", "5"], b"")
        .await
        .status(4);
    assert!(r.stderr.contains("no broker answered"), "{r:?}");
    assert!(r.stderr.contains("hint:"), "{r:?}");
}
