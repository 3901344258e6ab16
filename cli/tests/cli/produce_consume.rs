//! `baton produce` and `baton consume`: formats, keys and headers, start
//! positions, counts, groups, and failed deliveries.

use baton_kafka::{Client, Producer, ProducerRecord};
use baton_testkit::topic_name;

use crate::harness::Baton;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_from_stdin_come_back_in_every_format() {
    let b = Baton::start().await;
    let t = topic_name("formats");
    b.run(&["topics", "create", &t, "-p", "1"]).await.ok();
    b.run_with_input(
        &["produce", &t, "-K", ":", "-H", "src=test", "-H", "n=1"],
        b"k1:hello\nk2:wor\"ld:!\nnokey",
    )
    .await
    .ok();

    let raw = b
        .run(&["consume", &t, "--from", "earliest", "-e"])
        .await
        .ok();
    assert_eq!(raw.stdout, "hello\nwor\"ld:!\nnokey\n");

    let template = "{topic} {partition}/{offset} {key}={value} [{headers}]";
    let tpl = b
        .run(&["consume", &t, "--from", "earliest", "-e", "-F", template])
        .await
        .ok();
    assert_eq!(
        tpl.lines(),
        vec![
            format!("{t} 0/0 k1=hello [src=test,n=1]"),
            format!("{t} 0/1 k2=wor\"ld:! [src=test,n=1]"),
            format!("{t} 0/2 =nokey [src=test,n=1]"),
        ]
    );

    let json = b
        .run(&[
            "consume", &t, "--from", "earliest", "-e", "--format", "json",
        ])
        .await
        .ok();
    let expected = [
        (0, "\"k1\"", "\"hello\""),
        (1, "\"k2\"", "\"wor\\\"ld:!\""),
        (2, "null", "\"nokey\""),
    ];
    assert_eq!(json.lines().len(), 3, "{json:?}");
    for (line, (offset, key, value)) in json.lines().into_iter().zip(expected) {
        let head =
            format!("{{\"topic\":\"{t}\",\"partition\":0,\"offset\":{offset},\"timestamp\":");
        let tail = format!(
            ",\"key\":{key},\"value\":{value},\"headers\":[[\"src\",\"test\"],[\"n\",\"1\"]]}}"
        );
        assert!(line.starts_with(&head), "{line}");
        assert!(line.ends_with(&tail), "{line}");
        let ts = &line[head.len()..line.len() - tail.len()];
        assert!(ts.parse::<i64>().is_ok_and(|ts| ts > 0), "{line}");
    }
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_with_another_delimiter_goes_to_the_chosen_partition() {
    let b = Baton::start().await;
    let t = topic_name("file");
    b.run(&["topics", "create", &t, "-p", "3"]).await.ok();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("records");
    std::fs::write(&file, "a=1;b=2;c=3;").unwrap();
    b.run(&[
        "produce",
        &t,
        "--file",
        file.to_str().unwrap(),
        "--delimiter",
        ";",
        "--key-delimiter",
        "=",
        "--partition",
        "2",
        "--acks",
        "1",
        "--compression",
        "gzip",
    ])
    .await
    .ok();
    let out = b
        .run(&[
            "consume",
            &t,
            "--from",
            "earliest",
            "-e",
            "-F",
            "{partition} {key} {value}",
        ])
        .await
        .ok();
    assert_eq!(out.lines(), vec!["2 a 1", "2 b 2", "2 c 3"]);
    b.stop().await;
}

/// What `baton consume TOPIC -e ARGS` prints.
async fn values(b: &Baton, topic: &str, args: &[&str]) -> String {
    let mut full = vec!["consume", topic, "-e"];
    full.extend_from_slice(args);
    b.run(&full).await.ok().stdout
}

/// `{offset} {timestamp} {value}` lines of partition 0.
fn parse(lines: &[&str]) -> Vec<(i64, i64, String)> {
    lines
        .iter()
        .map(|l| {
            let mut it = l.splitn(3, ' ');
            let o = it.next().unwrap().parse().unwrap();
            let ts = it.next().unwrap().parse().unwrap();
            (o, ts, it.next().unwrap().to_owned())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_starts_at_offsets_timestamps_and_the_last_n() {
    let b = Baton::start().await;
    let t = topic_name("from");
    b.run(&["topics", "create", &t, "-p", "2"]).await.ok();
    // Two runs, so that the records carry at least two timestamps' worth of spread.
    b.run_with_input(&["produce", &t, "-p", "0"], b"r0\nr1\nr2\nr3\nr4\n")
        .await
        .ok();
    b.run_with_input(&["produce", &t, "-p", "0"], b"r5\nr6\nr7\nr8\nr9\n")
        .await
        .ok();
    let all = parse(
        &values(
            &b,
            &t,
            &[
                "--from",
                "earliest",
                "-p",
                "0",
                "-F",
                "{offset} {timestamp} {value}",
            ],
        )
        .await
        .lines()
        .collect::<Vec<_>>(),
    );
    assert_eq!(all.len(), 10);
    assert_eq!(
        values(&b, &t, &["--from", "7", "-p", "0"]).await,
        "r7\nr8\nr9\n"
    );
    // The last 3 of partition 0 (partition 1 is empty: nothing from it).
    assert_eq!(values(&b, &t, &["--from", "-3"]).await, "r7\nr8\nr9\n");
    // More than a partition holds: from its start.
    assert_eq!(
        values(&b, &t, &["--from", "-20", "-p", "0"])
            .await
            .lines()
            .count(),
        10
    );
    assert_eq!(values(&b, &t, &["--from", "latest"]).await, "");
    assert_eq!(
        values(&b, &t, &["--from", "earliest", "--count", "2"]).await,
        "r0\nr1\n"
    );

    // From a timestamp: the first record at or after it, and everything after.
    let ts = all[5].1;
    let first = all.iter().position(|r| r.1 >= ts).unwrap();
    let expected: String = all[first..].iter().map(|r| format!("{}\n", r.2)).collect();
    assert_eq!(
        values(&b, &t, &["--from", &format!("@{ts}")]).await,
        expected
    );
    let later = all[9].1 + 3_600_000;
    assert_eq!(values(&b, &t, &["--from", &format!("@{later}")]).await, "");
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_consumer_commits_what_it_printed() {
    let b = Baton::start().await;
    let t = topic_name("group");
    let g = topic_name("g");
    b.run(&["topics", "create", &t, "-p", "2"]).await.ok();
    b.run_with_input(&["produce", &t, "-K", ":"], b"a:1\nb:2\nc:3\nd:4\n")
        .await
        .ok();
    let group = ["consume", t.as_str(), "--group", g.as_str(), "-e"];
    let first = b
        .run(&[&group[..], &["--from", "earliest", "--count", "3"]].concat())
        .await
        .ok();
    assert_eq!(first.lines().len(), 3, "{first:?}");
    // The rest, from the committed positions.
    let rest = b
        .run(&[&group[..], &["--from", "earliest"]].concat())
        .await
        .ok();
    let mut seen: Vec<&str> = first.lines().into_iter().chain(rest.lines()).collect();
    seen.sort_unstable();
    assert_eq!(seen, vec!["1", "2", "3", "4"], "{first:?} {rest:?}");
    let again = b
        .run(&[&group[..], &["--from", "earliest"]].concat())
        .await
        .ok();
    assert_eq!(again.stdout, "");
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_records_are_counted_and_fail_the_run() {
    let b = Baton::start().await;
    let t = topic_name("too-large");
    b.run(&["topics", "create", &t, "-p", "1"]).await.ok();
    // The middle record is over the producer's request size (1 MiB).
    let mut input = b"a\n".to_vec();
    input.extend(std::iter::repeat_n(b'x', 1_100_000));
    input.extend_from_slice(b"\nb\n");
    let run = b
        .run_with_input(&["produce", &t, "--max-record-bytes", "2000000"], &input)
        .await
        .status(1);
    assert!(
        run.stderr.contains("1 of 3 records were not delivered"),
        "{run:?}"
    );
    let out = b
        .run(&["consume", &t, "--from", "earliest", "-e"])
        .await
        .ok();
    assert_eq!(out.stdout, "a\nb\n");

    // Over --max-record-bytes: refused before anything is sent.
    let run = b
        .run_with_input(&["produce", &t, "--max-record-bytes", "4"], b"12345\n")
        .await
        .status(1);
    assert!(run.stderr.contains("longer than 4 bytes"), "{run:?}");
    b.stop().await;
}

/// `--exit-at-end` ends on partitions whose logs end in a transaction marker
/// (a committed and an aborted transaction), alone and in a group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_at_end_ends_at_a_trailing_transaction_marker() {
    let b = Baton::start().await;
    let t = topic_name("txn-end");
    b.run(&["topics", "create", &t, "-p", "2"]).await.ok();
    let client = Client::builder([b.bootstrap.clone()])
        .build()
        .await
        .expect("client connects");
    let producer = Producer::builder(&client)
        .transactional_id(topic_name("txn-id"))
        .build();
    producer
        .init_transactions()
        .await
        .expect("init_transactions");
    for (tag, commit) in [("committed", true), ("aborted", false)] {
        producer.begin_transaction().await.expect("begin");
        let mut sent = Vec::new();
        for p in 0..2 {
            let r = ProducerRecord::new(t.clone())
                .partition(p)
                .value(format!("{tag}-{p}"));
            sent.push(producer.send(r).await.expect("accepted"));
        }
        if commit {
            producer.commit_transaction().await.expect("commit");
            for d in sent {
                d.await.expect("delivered");
            }
        } else {
            producer.flush().await;
            producer.abort_transaction().await.expect("abort");
        }
    }

    // Read uncommitted (the default): the aborted records too, then the end.
    let direct = b
        .run(&["consume", &t, "--from", "earliest", "-e"])
        .await
        .ok();
    let mut values = direct.lines();
    values.sort_unstable();
    assert_eq!(
        values,
        vec!["aborted-0", "aborted-1", "committed-0", "committed-1"],
        "{direct:?}"
    );
    let g = topic_name("txn-group");
    let grouped = b
        .run(&["consume", &t, "--group", &g, "--from", "earliest", "-e"])
        .await
        .ok();
    assert_eq!(grouped.lines().len(), 4, "{grouped:?}");
    b.stop().await;
}
