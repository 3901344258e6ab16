//! The cluster as separate processes: `baton-broker controller` and three
//! `baton-broker node` processes. A SIGKILLed leader is replaced and, restarted on
//! its data directory, rejoins the ISR; a SIGTERMed leader hands its leadership over
//! before it exits; records acknowledged with acks=all survive both.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use baton_protocol::messages::*;
use baton_testkit::wire::*;

use super::fetch_from_follower::racks;

const LONG: Duration = Duration::from_secs(60);

/// Child processes killed when the test ends, however it ends.
struct Procs(Vec<(String, Child)>);

impl Drop for Procs {
    fn drop(&mut self) {
        for (_, c) in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts the binary with `args` and returns it with the address it printed
/// (`... listening on ADDR`).
fn spawn(args: &[String]) -> (Child, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_baton-broker"))
        .args(args)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("baton-broker starts");
    let out = child.stdout.take().unwrap();
    let mut line = String::new();
    BufReader::new(out)
        .read_line(&mut line)
        .expect("first line");
    let addr = line
        .trim()
        .rsplit(' ')
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    (child, addr)
}

fn node_args(id: i32, controller: SocketAddr, listen: SocketAddr, dir: &Path) -> Vec<String> {
    vec![
        "node".into(),
        "--id".into(),
        id.to_string(),
        "--controller".into(),
        controller.to_string(),
        "--listen".into(),
        listen.to_string(),
        "--data-dir".into(),
        dir.join(format!("node-{id}")).display().to_string(),
    ]
}

async fn metadata(addr: SocketAddr, topic: &str) -> Option<MetadataResponse> {
    let conn = tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(addr));
    if !matches!(conn.await, Ok(Ok(_))) {
        return None;
    }
    let mut c = Client::connect(addr).await;
    let req = MetadataRequest {
        topics: Some(vec![MetadataRequestTopic {
            name: Some(topic.into()),
            ..Default::default()
        }]),
        ..Default::default()
    };
    Some(c.call(&req, 12).await)
}

/// Polls node `addr`'s metadata until `cond` holds on the partition (leader, ISR).
async fn wait_partition(
    addr: SocketAddr,
    topic: &str,
    cond: impl Fn(i32, &[i32]) -> bool,
) -> (i32, Vec<i32>) {
    let deadline = tokio::time::Instant::now() + LONG;
    loop {
        if let Some(m) = metadata(addr, topic).await {
            if let Some(p) = m.topics.first().and_then(|t| t.partitions.first()) {
                if cond(p.leader_id, &p.isr_nodes) {
                    return (p.leader_id, p.isr_nodes.clone());
                }
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "partition condition not reached"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Produces with acks=all, retrying while `addr` has not yet learnt that it leads.
async fn produce_to(addr: SocketAddr, topic: &str, values: &[&str]) {
    let mut c = Client::connect(addr).await;
    let deadline = tokio::time::Instant::now() + LONG;
    loop {
        let resp = c
            .call(&produce_req(topic, 0, -1, records(1_000, values)), 9)
            .await;
        let code = resp.responses[0].partition_responses[0].error_code;
        if code == 0 {
            return;
        }
        assert!(
            code == baton_protocol::ErrorCode::NotLeaderOrFollower.code()
                && tokio::time::Instant::now() < deadline,
            "acks=all produce failed with {code}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_and_sigterm_of_leader_processes() {
    let dir = tempfile::tempdir().unwrap();
    let mut procs = Procs(Vec::new());
    let (ctl, caddr) = spawn(&[
        "controller".into(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--data-dir".into(),
        dir.path().join("controller").display().to_string(),
        "--session-timeout-ms".into(),
        "3000".into(),
    ]);
    procs.0.push(("controller".into(), ctl));
    let mut addrs = Vec::new();
    for id in 1..=3 {
        let (child, addr) = spawn(&node_args(
            id,
            caddr,
            "127.0.0.1:0".parse().unwrap(),
            dir.path(),
        ));
        procs.0.push((format!("node-{id}"), child));
        addrs.push(addr);
    }
    let addr_of = |id: i32| addrs[(id - 1) as usize];

    // All three registered, then a topic with RF=3.
    let deadline = tokio::time::Instant::now() + LONG;
    loop {
        let m = metadata(addrs[0], "none").await;
        if m.is_some_and(|m| m.brokers.len() == 3) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "brokers register");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let topic = "processes";
    let mut c = Client::connect(addrs[0]).await;
    let mut req = create_req(topic, 1, &[]);
    req.topics[0].replication_factor = 3;
    let resp = c.call(&req, 7).await;
    assert_eq!(
        resp.topics[0].error_code, 0,
        "{:?}",
        resp.topics[0].error_message
    );
    let (leader, _) = wait_partition(addrs[0], topic, |l, isr| l > 0 && isr.len() == 3).await;
    produce_to(addr_of(leader), topic, &["a", "b", "c"]).await;

    // SIGKILL the leader's process.
    let idx = procs
        .0
        .iter()
        .position(|(n, _)| *n == format!("node-{leader}"))
        .unwrap();
    let (_, mut killed) = procs.0.remove(idx);
    killed.kill().unwrap();
    killed.wait().unwrap();
    let other = if leader == 1 { 2 } else { 1 };
    let (new_leader, isr) =
        wait_partition(addr_of(other), topic, |l, _| l > 0 && l != leader).await;
    assert!(
        !isr.contains(&leader),
        "killed node fenced out of the ISR: {isr:?}"
    );
    produce_to(addr_of(new_leader), topic, &["d", "e"]).await;

    // Restart it on the same port and data directory: it rejoins the ISR.
    let (child, _) = spawn(&node_args(leader, caddr, addr_of(leader), dir.path()));
    procs.0.push((format!("node-{leader}"), child));
    wait_partition(addr_of(other), topic, |_, isr| isr.len() == 3).await;

    // SIGTERM the current leader: controlled shutdown moves leadership first.
    let (cur, _) = wait_partition(addr_of(other), topic, |l, _| l > 0).await;
    let idx = procs
        .0
        .iter()
        .position(|(n, _)| *n == format!("node-{cur}"))
        .unwrap();
    let (_, mut term) = procs.0.remove(idx);
    let status = Command::new("kill")
        .args(["-TERM", &term.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = tokio::task::spawn_blocking(move || term.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(
        exit.success(),
        "node {cur} exits cleanly after SIGTERM: {exit}"
    );
    let survivor = (1..=3).find(|i| *i != cur).unwrap();
    let (after, _) = wait_partition(addr_of(survivor), topic, |l, _| l > 0 && l != cur).await;

    let mut c = Client::connect(addr_of(after)).await;
    let deadline = tokio::time::Instant::now() + LONG;
    loop {
        let resp = c.call(&fetch_req(topic, 0, 0, 0, 0), 12).await;
        let got = values(&resp.responses[0].partitions[0].records);
        if got == ["a", "b", "c", "d", "e"] {
            break;
        }
        // The new leader may not know yet that it leads, or its HW may still be
        // catching up with its followers.
        assert!(
            tokio::time::Instant::now() < deadline,
            "records after the move: {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_in_one_cluster_process_serves_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_baton-broker"))
        .args(["cluster", "--brokers", "3", "--data-dir"])
        .arg(dir.path())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("baton-broker starts");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).expect("bootstrap line");
    let bootstrap = line
        .trim()
        .strip_prefix("baton-broker cluster bootstrap: ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    let mut procs = Procs(vec![("cluster".into(), child)]);
    let addrs: Vec<SocketAddr> = bootstrap.split(',').map(|a| a.parse().unwrap()).collect();
    assert_eq!(addrs.len(), 3);
    let m = metadata(addrs[2], "none").await.expect("node 3 answers");
    assert_eq!(m.brokers.len(), 3);

    let mut c = Client::connect(addrs[1]).await;
    let mut req = create_req("all-in-one", 2, &[]);
    req.topics[0].replication_factor = 3;
    let resp = c.call(&req, 7).await;
    assert_eq!(resp.topics[0].error_code, 0);
    let (leader, isr) =
        wait_partition(addrs[0], "all-in-one", |l, isr| l > 0 && isr.len() == 3).await;
    assert!(isr.contains(&leader));
    produce_to(addrs[(leader - 1) as usize], "all-in-one", &["x"]).await;

    let (_, child) = procs.0.remove(0);
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut child = child;
    let exit = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(
        exit.success(),
        "cluster exits cleanly after SIGTERM: {exit}"
    );
}

/// InitProducerId for `id` at `addr`, retried while the coordinator is not ready.
async fn init_transactional(addr: SocketAddr, id: &str) -> i16 {
    use baton_protocol::ErrorCode;
    let mut c = Client::connect(addr).await;
    let req = InitProducerIdRequest {
        transactional_id: Some(id.to_owned()),
        transaction_timeout_ms: 10_000,
        producer_id: -1,
        producer_epoch: -1,
    };
    let deadline = tokio::time::Instant::now() + LONG;
    loop {
        let code = c.call(&req, 4).await.error_code;
        let not_ready = [
            ErrorCode::CoordinatorNotAvailable,
            ErrorCode::CoordinatorLoadInProgress,
            ErrorCode::NotCoordinator,
            ErrorCode::ConcurrentTransactions,
        ];
        if !not_ready.iter().any(|e| e.code() == code) || tokio::time::Instant::now() > deadline {
            return code;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_process_takes_the_transaction_limit_flags() {
    // The controller checks no transaction limits: the flags are not its own.
    let err = refused(&["controller", "--max-transactional-ids", "1"]);
    assert!(
        err.contains("unexpected argument '--max-transactional-ids'"),
        "{err}"
    );
    let err = refused(&["cluster", "--max-pending-txn-offsets", "0"]);
    assert!(
        err.contains("'0' for '--max-pending-txn-offsets <N>': expected an integer >= 1"),
        "{err}"
    );

    let mut child = Command::new(env!("CARGO_BIN_EXE_baton-broker"))
        .args(["cluster", "--brokers", "1", "--max-transactional-ids", "1"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("baton-broker starts");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let _procs = Procs(vec![("cluster".into(), child)]);
    let mut line = String::new();
    out.read_line(&mut line).expect("bootstrap line");
    let addr: SocketAddr = line
        .trim()
        .strip_prefix("baton-broker cluster bootstrap: ")
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    assert_eq!(init_transactional(addr, "first").await, 0);
    assert_eq!(
        init_transactional(addr, "second").await,
        baton_protocol::ErrorCode::PolicyViolation.code()
    );
}

/// Runs `baton-broker` with `args`, checks that it refuses to start, and returns
/// what it wrote to stderr.
fn refused(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_baton-broker"))
        .args(args)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{args:?} started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_process_takes_racks_and_the_replica_selector() {
    let err = refused(&["cluster", "--replica-selector", "com.example.Nearest"]);
    assert!(err.contains("RackAwareReplicaSelector"), "{err}");

    let mut child = Command::new(env!("CARGO_BIN_EXE_baton-broker"))
        .args(["cluster", "--brokers", "2", "--racks", "east,west"])
        .args([
            "--replica-selector",
            "org.apache.kafka.common.replica.RackAwareReplicaSelector",
        ])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("baton-broker starts");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let _procs = Procs(vec![("cluster".into(), child)]);
    let mut line = String::new();
    out.read_line(&mut line).expect("bootstrap line");
    let bootstrap = line
        .trim()
        .strip_prefix("baton-broker cluster bootstrap: ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    let addrs: Vec<SocketAddr> = bootstrap.split(',').map(|a| a.parse().unwrap()).collect();
    let m = metadata(addrs[0], "none").await.expect("node 1 answers");
    assert_eq!(
        racks(&m),
        vec![(1, Some("east".to_owned())), (2, Some("west".to_owned()))]
    );

    // A consumer in the rack of the node that follows partition 0 is sent there.
    let mut c = Client::connect(addrs[0]).await;
    let mut req = create_req("racked", 2, &[]);
    req.topics[0].replication_factor = 2;
    assert_eq!(c.call(&req, 7).await.topics[0].error_code, 0);
    let (leader, _) = wait_partition(addrs[0], "racked", |l, isr| l > 0 && isr.len() == 2).await;
    produce_to(addrs[(leader - 1) as usize], "racked", &["x"]).await;
    let other = 3 - leader;
    let rack = if other == 1 { "east" } else { "west" };
    let mut l = Client::connect(addrs[(leader - 1) as usize]).await;
    let mut preferred = -1;
    for _ in 0..100 {
        let mut req = fetch_req("racked", 0, 0, 0, 0);
        req.rack_id = rack.into();
        let resp = l.call(&req, 12).await;
        preferred = resp.responses[0].partitions[0].preferred_read_replica;
        if preferred == other {
            break;
        }
        // The follower may not have fetched the record yet.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(preferred, other);
}
