//! `baton groups`: list, describe, offsets, lag, reset-offsets, delete,
//! delete-offsets.

use std::time::{Duration, Instant};

use baton_kafka::{Client, GroupConsumer};
use baton_testkit::topic_name;

use crate::harness::{Baton, Run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_group_re_reads_and_a_deleted_one_is_gone() {
    let b = Baton::start().await;
    let t = topic_name("groups");
    let g = topic_name("g");
    b.run(&["topics", "create", &t, "-p", "2"]).await.ok();
    b.run_with_input(&["produce", &t, "-K", ":"], b"a:1\nb:2\nc:3\nd:4\n")
        .await
        .ok();
    let consume = ["consume", t.as_str(), "--group", g.as_str(), "-e"];
    let first = b
        .run(&[&consume[..], &["--from", "earliest"]].concat())
        .await
        .ok();
    assert_eq!(first.lines().len(), 4, "{first:?}");

    let list = b.run(&["groups", "list"]).await.ok();
    let line = list
        .lines()
        .into_iter()
        .find(|l| l.starts_with(&format!("{g}\t")))
        .unwrap_or_else(|| panic!("{g} not listed: {list:?}"));
    assert!(line.ends_with("\tEmpty"), "{list:?}");
    let described = b.run(&["groups", "describe", &g]).await.ok();
    assert!(
        described.stdout.starts_with(&format!("Group: {g}\tType: ")),
        "{described:?}"
    );
    assert!(
        described.stdout.contains("\tState: Empty\t"),
        "{described:?}"
    );

    let offsets = b.run(&["groups", "offsets", &g]).await.ok();
    let lines = offsets.lines();
    assert_eq!(lines[0], "TOPIC\tPARTITION\tOFFSET", "{offsets:?}");
    let committed: i64 = lines[1..]
        .iter()
        .map(|l| l.rsplit('\t').next().unwrap().parse::<i64>().unwrap())
        .sum();
    assert_eq!(committed, 4, "{offsets:?}");
    let lag = b.run(&["groups", "lag", &g]).await.ok();
    assert!(lag.stdout.ends_with("total lag: 0\n"), "{lag:?}");
    b.run_with_input(&["produce", &t, "-K", ":"], b"e:5\nf:6\n")
        .await
        .ok();
    let lag = b.run(&["groups", "lag", &g]).await.ok();
    assert!(lag.stdout.ends_with("total lag: 2\n"), "{lag:?}");

    // A dry run changes nothing.
    let reset = ["groups", "reset-offsets", g.as_str(), "--topic", t.as_str()];
    let dry = b.run(&[&reset[..], &["--to-earliest"]].concat()).await.ok();
    assert!(
        dry.stdout
            .contains(&format!("{t}\t0\t0\n{t}\t1\t0\ndry run: nothing changed")),
        "{dry:?}"
    );
    let lag = b.run(&["groups", "lag", &g]).await.ok();
    assert!(lag.stdout.ends_with("total lag: 2\n"), "{lag:?}");

    // Executed, the group reads everything again.
    let done = b
        .run(&[&reset[..], &["--to-earliest", "--execute"]].concat())
        .await
        .ok();
    assert!(
        done.stdout
            .contains(&format!("committed 2 offset(s) of group {g}")),
        "{done:?}"
    );
    let again = b
        .run(&[&consume[..], &["--from", "latest"]].concat())
        .await
        .ok();
    let mut values = again.lines();
    values.sort_unstable();
    assert_eq!(values, vec!["1", "2", "3", "4", "5", "6"], "{again:?}");

    // To a time after every record: the log end, nothing left to read.
    b.run(
        &[
            &reset[..],
            &["--to-datetime", "2100-01-01T00:00:00Z", "--execute"],
        ]
        .concat(),
    )
    .await
    .ok();
    let lag = b.run(&["groups", "lag", &g]).await.ok();
    assert!(lag.stdout.ends_with("total lag: 0\n"), "{lag:?}");
    // Back by one on each partition that has records.
    b.run(&[&reset[..], &["--shift-by", "-1", "--execute"]].concat())
        .await
        .ok();
    let lag = b.run(&["groups", "lag", &g]).await.ok();
    let nonempty = lag
        .lines()
        .iter()
        .filter(|l| l.starts_with(&format!("{t}\t")))
        .filter(|l| l.split('\t').nth(3).is_some_and(|end| end != "0"))
        .count();
    assert!(
        lag.stdout.ends_with(&format!("total lag: {nonempty}\n")),
        "{lag:?}"
    );

    let deleted = b.run(&["groups", "delete", &g]).await.ok();
    assert_eq!(deleted.stdout, format!("deleted group {g}\n"));
    let twice = b.run(&["groups", "delete", &g]).await.status(3);
    assert!(twice.stderr.contains("GroupIdNotFound"), "{twice:?}");
    b.run(&["groups", "describe", &g]).await.status(3);
    b.run(&["groups", "offsets", &g]).await.status(3);
    let usage = b
        .run(&["groups", "reset-offsets", &g, "--to-earliest"])
        .await
        .status(2);
    assert!(usage.stderr.contains("--topic"), "{usage:?}");
    b.stop().await;
}

/// `groups delete-offsets`: a stopped group's offsets of one topic go, the
/// others stay; a topic a live member subscribes to is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_offsets_drops_a_topics_offsets_but_not_those_of_a_live_subscription() {
    let b = Baton::start().await;
    let t = topic_name("del-off-t");
    let u = topic_name("del-off-u");
    let g = topic_name("g");
    for topic in [&t, &u] {
        b.run(&["topics", "create", topic, "-p", "2"]).await.ok();
        b.run_with_input(&["produce", topic, "-K", ":"], b"a:1\nb:2\nc:3\n")
            .await
            .ok();
        let read = b
            .run(&["consume", topic, "--group", &g, "-e", "--from", "earliest"])
            .await
            .ok();
        assert_eq!(read.lines().len(), 3, "{read:?}");
    }
    let topics_with_offsets = |run: &Run| -> Vec<String> {
        let mut v: Vec<String> = run.lines()[1..]
            .iter()
            .map(|l| l.split('\t').next().unwrap().to_owned())
            .collect();
        v.dedup();
        v
    };
    let before = b.run(&["groups", "offsets", &g]).await.ok();
    let mut both = vec![t.clone(), u.clone()];
    both.sort();
    assert_eq!(topics_with_offsets(&before), both, "{before:?}");

    let deleted = b
        .run(&["groups", "delete-offsets", &g, "--topic", &t])
        .await
        .ok();
    assert!(
        deleted.stdout.starts_with(&format!(
            "deleted the committed offsets of group {g} for {t}/"
        )),
        "{deleted:?}"
    );
    let after = b.run(&["groups", "offsets", &g]).await.ok();
    assert_eq!(topics_with_offsets(&after), vec![u.clone()], "{after:?}");
    // Nothing left of that topic to delete: not found.
    let again = b
        .run(&["groups", "delete-offsets", &g, "--topic", &t])
        .await
        .status(3);
    assert!(again.stderr.contains("no committed offsets"), "{again:?}");
    let usage = b.run(&["groups", "delete-offsets", &g]).await.status(2);
    assert!(usage.stderr.contains("--topic"), "{usage:?}");

    // A member subscribed to the other topic: its offsets are kept.
    let client = Client::builder([b.bootstrap.clone()])
        .build()
        .await
        .expect("client connects");
    let member = GroupConsumer::builder(&client, g.clone())
        .subscribe([u.clone()])
        .build()
        .await
        .expect("the member joins");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let described = b.run(&["groups", "describe", &g]).await.ok();
        if described.stdout.contains("\tState: Stable\t") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the member never joined: {described:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let refused = b
        .run(&["groups", "delete-offsets", &g, "--topic", &u])
        .await
        .status(1);
    assert!(
        refused
            .stderr
            .contains(&format!("still subscribe to topic(s) {u}")),
        "{refused:?}"
    );
    let kept = b.run(&["groups", "offsets", &g]).await.ok();
    assert_eq!(topics_with_offsets(&kept), vec![u.clone()], "{kept:?}");
    drop(member);
    b.stop().await;
}
