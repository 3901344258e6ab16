//! The binary's `--metrics-listen`: a single broker and the `cluster` mode print
//! their metrics endpoints' addresses (port 0 picks free ports), and each answers
//! `GET /metrics` with the Prometheus text.

use std::io::{BufRead, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use super::binary_config::{spawn_broker, Proc};

/// Starts the binary with `args` and reads its stdout until `count` lines of the
/// form `... metrics on http://ADDR/metrics` were printed; returns their
/// prefixes and addresses.
fn start(args: &[&str], count: usize) -> (Proc, Vec<(String, SocketAddr)>) {
    let (child, mut out) = spawn_broker(args);
    let mut found = Vec::new();
    while found.len() < count {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "the binary exited");
        if let Some((who, rest)) = line.trim().split_once(" metrics on http://") {
            let addr = rest.strip_suffix("/metrics").expect("ends with /metrics");
            found.push((who.to_owned(), addr.parse().expect("an address")));
        }
    }
    (child, found)
}

/// `GET /metrics` over a blocking socket; returns the whole answer.
fn get(addr: SocketAddr) -> String {
    let mut s = TcpStream::connect(addr).expect("connects");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("answer read");
    answer
}

#[test]
fn the_single_broker_prints_and_serves_its_metrics_address() {
    let (_broker, found) = start(
        &["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"],
        1,
    );
    assert_eq!(found[0].0, "baton-broker");
    assert_ne!(found[0].1.port(), 0);
    let answer = get(found[0].1);
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.contains("\r\nContent-Type: text/plain; version=0.0.4\r\n"));
    assert!(
        answer.contains("\nbaton_broker_connections_open{node=\"0\"} 0\n"),
        "{answer}"
    );
}

#[test]
fn the_cluster_mode_prints_every_node_and_the_controller() {
    let (_cluster, found) = start(
        &[
            "cluster",
            "--brokers",
            "2",
            "--metrics-listen",
            "127.0.0.1:0",
        ],
        3,
    );
    let who: Vec<&str> = found.iter().map(|(w, _)| w.as_str()).collect();
    assert_eq!(
        who,
        [
            "baton-broker cluster node 1",
            "baton-broker cluster node 2",
            "baton-broker cluster controller"
        ]
    );
    let node = get(found[1].1);
    assert!(node.starts_with("HTTP/1.1 200 OK\r\n"), "{node}");
    assert!(
        node.contains("\nbaton_broker_offline_partitions{node=\"2\"} 0\n"),
        "{node}"
    );
    let controller = get(found[2].1);
    assert!(
        controller.contains("\nbaton_controller_active_brokers 2\n"),
        "{controller}"
    );
}
