//! Broker metrics (issue 20): each node's Prometheus endpoint scraped over raw
//! HTTP after producing and fetching (and hostile request heads that never harm
//! a concurrent scrape); a leader failover counted by the controller (an
//! election, an ISR shrink) and the rejoin as an ISR expansion; a corrupt leader
//! counted as corruption detected and a repair completed; a fenced producer and
//! group rebalances (classic and KIP-848). Every number is asserted in the in-process snapshot and in
//! the scraped text.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use baton_broker::metrics::{BrokerMetrics, CorruptionSite};
use baton_broker::Cluster;
use baton_kafka::{Admin, Client, NewTopic, Producer};
use baton_testkit::client::{consume_from_start, produce_values};
use baton_testkit::cluster::client;
use baton_testkit::consumer_group::{
    classic_member_builder, find_coordinator, member_builder, wait_until, History, Member,
};
use baton_testkit::topic_name;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const LONG: Duration = Duration::from_secs(120);
const PRODUCE: i16 = 0;
const FETCH: i16 = 1;

/// Three nodes and their controller, each with a metrics endpoint on a free port.
async fn cluster_with_metrics(data_dir: Option<&std::path::Path>) -> Cluster {
    baton_testkit::init_tracing();
    let mut b = Cluster::builder()
        .brokers(3)
        .session_timeout(Duration::from_secs(4))
        .auto_preferred_leader(false)
        .segment_bytes(64 * 1024)
        .metrics_listen("127.0.0.1:0".parse().unwrap());
    if let Some(d) = data_dir {
        b = b.data_dir(d);
    }
    b.start().await.expect("cluster starts")
}

async fn replicated_topic(client: &Client, prefix: &str) -> String {
    let topic = topic_name(prefix);
    Admin::new(client)
        .create_topics([NewTopic::new(topic.clone(), 1, 3)])
        .await
        .expect("topic created");
    topic
}

/// One HTTP exchange over a raw socket: writes `request`, reads until the server
/// closes. Returns the status line, the header lines and the body.
async fn http(addr: SocketAddr, request: &[u8]) -> (String, Vec<String>, String) {
    let mut s = TcpStream::connect(addr).await.expect("connects");
    s.write_all(request).await.expect("request written");
    let mut raw = Vec::new();
    tokio::time::timeout(LONG, s.read_to_end(&mut raw))
        .await
        .expect("the server answers and closes")
        .expect("read");
    let text = String::from_utf8(raw).expect("UTF-8 answer");
    let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
    let mut lines = head.split("\r\n").map(str::to_owned);
    let status = lines.next().unwrap_or_default();
    (status, lines.collect(), body.to_owned())
}

/// `GET /metrics`, checked to be a `200` with the exposition's content type and
/// an exact `Content-Length`; returns the body.
async fn scrape(addr: SocketAddr) -> String {
    let (status, headers, body) = http(addr, b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    let header = |name: &str| {
        headers
            .iter()
            .find_map(|h| {
                let (k, v) = h.split_once(": ")?;
                k.eq_ignore_ascii_case(name).then(|| v.to_owned())
            })
            .unwrap_or_else(|| panic!("no {name} header in {headers:?}"))
    };
    assert_eq!(header("Content-Type"), "text/plain; version=0.0.4");
    assert_eq!(header("Content-Length"), body.len().to_string());
    body
}

/// The samples of `name` whose labels include every one of `labels`, in text
/// order: (the label set as written, the value).
fn samples(text: &str, name: &str, labels: &[(&str, &str)]) -> Vec<(String, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (n, set) = match series.split_once('{') {
                Some((n, rest)) => (n, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            let all = labels
                .iter()
                .all(|(k, v)| set.split(',').any(|kv| kv == format!("{k}=\"{v}\"")));
            (n == name && all).then(|| (set.to_owned(), value.parse().expect("a number")))
        })
        .collect()
}

/// The sum of the samples of `name` with `labels`.
fn total(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    samples(text, name, labels).iter().map(|(_, v)| v).sum()
}

/// Polls `metrics` of node `id` until `done` holds (120 s at most).
async fn wait_metrics(
    cluster: &mut Cluster,
    id: i32,
    what: &str,
    done: impl Fn(&BrokerMetrics) -> bool,
) -> BrokerMetrics {
    let deadline = tokio::time::Instant::now() + LONG;
    loop {
        if let Some(m) = cluster.node(id).metrics().filter(|m| done(m)) {
            return m;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "node {id}: {what}; metrics {:?}\n{}",
            cluster.node(id).metrics(),
            cluster.timeline_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_serves_requests_latency_and_partitions_and_survives_garbage() {
    let mut cluster = cluster_with_metrics(None).await;
    let client = client(&cluster).await;
    let topic = replicated_topic(&client, "metrics-scrape").await;
    produce_values(&client, &topic, 0, 100).await;
    assert_eq!(
        consume_from_start(&client, &topic, 1, 100, 0).await.len(),
        100
    );
    let leader = cluster.partition_state(&topic, 0).unwrap().leader;
    let snapshot = wait_metrics(&mut cluster, leader, "produce and fetch counted", |m| {
        m.requests_of(PRODUCE) > 0
            && m.requests_of(FETCH) > 0
            && m.partition(&topic, 0)
                .is_some_and(|p| p.high_watermark == 100)
    })
    .await;
    assert!(snapshot.connections_open() > 0 && snapshot.bytes_in > 0 && snapshot.bytes_out > 0);
    let addr = cluster.node(leader).metrics_addr().expect("an endpoint");

    // Hostile heads on their own connections, while a scrape runs beside them.
    let oversized = [b"GET /".as_slice(), &[b'a'; 9000]].concat();
    let idle = TcpStream::connect(addr).await.expect("an idle connection");
    let (text, garbage, long, post, missing) = tokio::join!(
        scrape(addr),
        http(addr, b"\x00\x01\x02 garbage\r\n\r\n"),
        http(addr, &oversized),
        http(addr, b"POST /metrics HTTP/1.1\r\n\r\n"),
        http(addr, b"GET /nothing HTTP/1.1\r\n\r\n"),
    );
    assert_eq!(garbage.0, "HTTP/1.1 400 Bad Request");
    assert_eq!(long.0, "HTTP/1.1 400 Bad Request");
    assert_eq!(post.0, "HTTP/1.1 405 Method Not Allowed");
    assert_eq!(missing.0, "HTTP/1.1 404 Not Found");
    drop(idle);

    let node = leader.to_string();
    let node = node.as_str();
    for api in ["Produce", "Fetch"] {
        let n = total(
            &text,
            "baton_broker_requests_total",
            &[("node", node), ("api", api)],
        );
        assert!(n > 0.0, "{api} requests in\n{text}");
    }
    let buckets = samples(
        &text,
        "baton_broker_request_latency_seconds_bucket",
        &[("node", node), ("api", "Produce")],
    );
    assert!(buckets.len() > 2, "Produce latency buckets in\n{text}");
    assert!(
        buckets.windows(2).all(|w| w[0].1 <= w[1].1),
        "monotone: {buckets:?}"
    );
    assert!(buckets.last().unwrap().0.contains("le=\"+Inf\""));
    let count = total(
        &text,
        "baton_broker_request_latency_seconds_count",
        &[("node", node), ("api", "Produce")],
    );
    assert_eq!(buckets.last().unwrap().1, count, "+Inf bucket = count");
    let partition = [
        ("node", node),
        ("topic", topic.as_str()),
        ("partition", "0"),
    ];
    for (gauge, want) in [
        ("baton_broker_partition_log_end_offset", 100.0),
        ("baton_broker_partition_high_watermark", 100.0),
        ("baton_broker_partition_isr_size", 3.0),
    ] {
        assert_eq!(total(&text, gauge, &partition), want, "{gauge} in\n{text}");
    }
    assert!(text.contains("# TYPE baton_broker_request_latency_seconds histogram\n"));
    assert!(total(&text, "baton_broker_connections_open", &[("node", node)]) >= 1.0);
    // The same numbers in process: the partition's gauges agree.
    let now = cluster.node(leader).metrics().unwrap();
    let p = now.partition(&topic, 0).unwrap();
    assert_eq!(
        (p.log_end_offset, p.high_watermark, p.isr_size),
        (100, 100, 3)
    );
    assert!(
        now.requests_of(PRODUCE) as f64
            >= total(&text, "baton_broker_requests_total", &[("api", "Produce")])
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_failover_counts_an_election_an_isr_shrink_and_the_rejoin() {
    let mut cluster = cluster_with_metrics(None).await;
    let client = client(&cluster).await;
    let topic = replicated_topic(&client, "metrics-failover").await;
    produce_values(&client, &topic, 0, 50).await;
    let in_sync = |c: &Cluster| {
        c.partition_state(&topic, 0)
            .is_some_and(|v| v.isr.len() == 3)
    };
    cluster.wait_for(LONG, in_sync).await.expect("ISR of 3");
    let before = cluster.controller_metrics().expect("controller runs");
    let old = cluster.partition_state(&topic, 0).unwrap().leader;
    cluster.node(old).kill();
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state(&topic, 0).unwrap();
            v.leader >= 0 && v.leader != old
        })
        .await
        .unwrap_or_else(|_| panic!("a new leader\n{}", cluster.timeline_text()));
    let after = cluster.controller_metrics().unwrap();
    assert!(
        after.leader_elections > before.leader_elections,
        "{before:?} -> {after:?}"
    );
    assert!(
        after.isr_shrinks > before.isr_shrinks,
        "{before:?} -> {after:?}"
    );
    let text = scrape(cluster.controller_metrics_addr().expect("an endpoint")).await;
    let scraped = total(&text, "baton_controller_leader_elections_total", &[]);
    assert!(scraped >= after.leader_elections as f64, "{text}");
    let shrinks = total(&text, "baton_controller_isr_shrinks_total", &[]);
    assert!(shrinks > before.isr_shrinks as f64, "{text}");

    // The killed node returns; its leader proposes, and the controller writes,
    // an ISR expansion.
    cluster.node(old).restart().await.expect("restarts");
    cluster
        .wait_for(LONG, in_sync)
        .await
        .expect("ISR of 3 again");
    let rejoined = cluster.controller_metrics().unwrap();
    assert!(
        rejoined.isr_expands > after.isr_expands,
        "{after:?} -> {rejoined:?}"
    );
    let new = cluster.partition_state(&topic, 0).unwrap().leader;
    let m = wait_metrics(&mut cluster, new, "an ISR expansion", |m| {
        m.isr_expands >= 1
    })
    .await;
    let text = scrape(cluster.node(new).metrics_addr().unwrap()).await;
    let node = new.to_string();
    let scraped = total(&text, "baton_broker_isr_expands_total", &[("node", &node)]);
    assert!(scraped >= m.isr_expands as f64 && scraped >= 1.0, "{text}");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_leader_counts_corruption_detected_and_a_repair() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = cluster_with_metrics(Some(dir.path())).await;
    let client = client(&cluster).await;
    let topic = topic_name("metrics-corrupt");
    Admin::new(&client)
        .create_topics([NewTopic::new(topic.clone(), 1, 3).config("min.insync.replicas", "2")])
        .await
        .expect("topic created");
    const N: usize = 2_000;
    produce_values(&client, &topic, 0, N).await;
    let end = N as i64;
    cluster
        .wait_for(LONG, |c| {
            let v = c.partition_state(&topic, 0).unwrap();
            v.isr.len() == 3 && v.replica_states.iter().all(|r| r.log_end_offset == end)
        })
        .await
        .expect("replicas in sync");
    let old = cluster.partition_state(&topic, 0).unwrap().leader;
    let elections = cluster.controller_metrics().unwrap().leader_elections;
    cluster
        .node(old)
        .corrupt(&topic, 0, end / 2)
        .expect("corrupt the leader's segment");
    // Reading from the start serves the damaged batch: detected, resigned, repaired.
    let read = consume_from_start(&client, &topic, 1, N, 0).await;
    assert_eq!(read.len(), N);
    let m = wait_metrics(&mut cluster, old, "corruption detected and repaired", |m| {
        m.corruption_total() >= 1 && m.repairs_completed >= 1
    })
    .await;
    assert_eq!(m.corruption_at(CorruptionSite::Produce), 0);
    assert!(cluster.controller_metrics().unwrap().leader_elections > elections);
    let text = scrape(cluster.node(old).metrics_addr().unwrap()).await;
    let node = old.to_string();
    let detected = total(
        &text,
        "baton_broker_corruption_detected_total",
        &[("node", &node)],
    );
    let repaired = total(
        &text,
        "baton_broker_repairs_completed_total",
        &[("node", &node)],
    );
    let now = cluster.node(old).metrics().unwrap();
    assert_eq!(detected, now.corruption_total() as f64, "{text}");
    assert_eq!(repaired, now.repairs_completed as f64, "{text}");
    assert!(detected >= 1.0 && repaired >= 1.0);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_producer_and_a_group_rebalance_are_counted() {
    let mut cluster = cluster_with_metrics(None).await;
    let client = client(&cluster).await;
    let topic = replicated_topic(&client, "metrics-fenced").await;
    baton_testkit::transactions::a_newer_producer_fences_the_zombie_and_aborts_its_transaction(
        &client, &topic,
    )
    .await;
    let ids = cluster.node_ids();
    let fenced = |c: &mut Cluster| -> u64 {
        ids.iter()
            .filter_map(|id| c.node(*id).metrics())
            .map(|m| m.fenced_producers)
            .sum()
    };
    assert!(fenced(&mut cluster) >= 1, "a fenced producer counted");
    let mut scraped = 0.0;
    for (_, addr) in cluster.metrics_addrs() {
        scraped += total(
            &scrape(addr).await,
            "baton_broker_fenced_producers_total",
            &[],
        );
    }
    assert!(scraped >= 1.0);

    let topic = replicated_topic(&client, "metrics-group").await;
    let group = topic_name("metrics-group");
    let history = Arc::new(History::default());
    let member = Member::start(classic_member_builder(&client, &group, &topic), 0, &history).await;
    let producer = Producer::builder(&client).build();
    let mut expected = std::collections::BTreeMap::new();
    baton_testkit::consumer_group::produce(&producer, &topic, 1, 10, &mut expected).await;
    producer.close().await;
    wait_until(&history, LONG, "the member to read 10", |h| {
        h.distinct() >= 10
    })
    .await;
    let coordinator = find_coordinator(&client, &group).await;
    let m = wait_metrics(&mut cluster, coordinator, "a rebalance", |m| {
        m.group_rebalances >= 1
    })
    .await;
    let text = scrape(cluster.node(coordinator).metrics_addr().unwrap()).await;
    let node = coordinator.to_string();
    let scraped = total(
        &text,
        "baton_broker_group_rebalances_total",
        &[("node", &node)],
    );
    assert!(
        scraped >= m.group_rebalances as f64 && scraped >= 1.0,
        "{text}"
    );
    let joins = total(
        &text,
        "baton_broker_requests_total",
        &[("api", "JoinGroup")],
    );
    assert!(joins >= 1.0, "{text}");
    member.stop().await;

    // A consumer-protocol (KIP-848) group: its new group epoch is a rebalance.
    let group = topic_name("metrics-848");
    let coordinator = find_coordinator(&client, &group).await;
    let before = cluster
        .node(coordinator)
        .metrics()
        .unwrap()
        .group_rebalances;
    let history = Arc::new(History::default());
    let member = Member::start(member_builder(&client, &group, &topic), 0, &history).await;
    wait_until(&history, LONG, "the member to read 10", |h| {
        h.distinct() >= 10
    })
    .await;
    wait_metrics(&mut cluster, coordinator, "a consumer group epoch", |m| {
        m.group_rebalances > before
    })
    .await;
    member.stop().await;
    cluster.shutdown().await;
}
