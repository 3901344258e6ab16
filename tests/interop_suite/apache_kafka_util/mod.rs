//! Apache Kafka started by the tests: the release pinned in
//! `tests/apache-kafka/pom.xml`, installed from Maven Central into
//! `<workspace>/target/apache-kafka/libs` on first use (as `.ci/run` does up front),
//! then run as KRaft nodes, each a combined broker+controller JVM on 127.0.0.1
//! ports of its own, with its data and log under `target/apache-kafka/run-*`.
//!
//! [`single_node`] is one node shared by every test of a test binary (tests use
//! random topic names); besides its PLAINTEXT listener it has a `SASL_SSL` one
//! ([`KafkaCluster::sasl_ssl`]); [`three_nodes`] is a 3-node cluster shared the same way by
//! the tests that restart nodes, one at a time; [`KafkaCluster::start`] starts a
//! cluster the caller owns.
//! Nodes stop by pid: [`KafkaCluster::stop`] sends SIGTERM (a controlled shutdown),
//! [`KafkaCluster::kill`] SIGKILL (a crash); [`KafkaCluster::restart`] starts a
//! stopped node on its old directory and ports.
//!
//! No JVM outlives the test process: each runs under a small `sh` wrapper whose
//! stdin is a pipe from the test process, and a watcher in the wrapper SIGKILLs the
//! JVM when that pipe closes, which it does when the test process exits, however it
//! exits. A dropped [`KafkaCluster`] kills its nodes at once.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use baton_kafka::Client;

use baton_testkit::security::{Pki, PLAIN_LOGIN, SCRAM_SHA512_LOGIN};
pub use baton_testkit::tools::kafka::{kafka_version, libs};
use baton_testkit::Rng;

/// How long a node may take to join (JVM start-up on a loaded 2-core machine).
const READY_TIMEOUT: Duration = Duration::from_secs(180);

/// How long a controlled shutdown may take before the node is killed instead.
const STOP_TIMEOUT: Duration = Duration::from_secs(90);

/// Runs `java` with its output appended to the log file `$1` and prints its pid.
/// A watcher holding the wrapper's stdin SIGKILLs the JVM when that pipe closes
/// (the test process ended); the wrapper exits when the JVM does.
const WRAPPER: &str = r#"log=$1; shift
"$@" </dev/null >>"$log" 2>&1 &
pid=$!
echo "$pid"
exec 3<&0 </dev/null >/dev/null 2>&1
{ cat <&3 >/dev/null; kill -KILL "$pid"; } &
exec 3<&-
wait "$pid""#;

fn home() -> PathBuf {
    baton_testkit::tools::kafka::home()
}

/// Runs `cmd` to completion with no stdin; `Err` with its output unless it exits 0
/// within `timeout`.
fn run_to_end(cmd: &mut Command, timeout: Duration) -> Result<(), String> {
    let out_path = std::env::temp_dir().join(format!(
        "baton-apache-kafka-{}-{}.out",
        std::process::id(),
        nanos()
    ));
    let out = std::fs::File::create(&out_path).map_err(|e| format!("{out_path:?}: {e}"))?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("could not start {cmd:?}: {e}"))?;
    let status = wait_with_timeout(&mut child, timeout);
    let output = std::fs::read_to_string(&out_path).unwrap_or_default();
    let _ = std::fs::remove_file(&out_path);
    match status {
        Some(s) if s.success() => Ok(()),
        Some(s) => Err(format!("{cmd:?} exited with {s}:\n{}", tail(&output, 60))),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            Err(format!(
                "{cmd:?} killed after {timeout:?}:\n{}",
                tail(&output, 60)
            ))
        }
    }
}

fn wait_with_timeout(child: &mut Child, timeout: Duration) -> Option<std::process::ExitStatus> {
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if started.elapsed() < timeout => {
                std::thread::sleep(Duration::from_millis(50))
            }
            _ => return None,
        }
    }
}

/// The last `lines` lines of `text`.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// A fresh Kafka `Uuid` in its text form (URL-safe base64 of 16 bytes, unpadded).
fn kafka_uuid(rng: &mut Rng) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bytes = [0u8; 16];
    for chunk in bytes.chunks_mut(8) {
        chunk.copy_from_slice(&rng.next_u64().to_be_bytes());
    }
    let mut bits = 0u32;
    let mut n = 0;
    let mut out = String::with_capacity(22);
    for b in bytes {
        bits = (bits << 8) | b as u32;
        n += 8;
        while n >= 6 {
            n -= 6;
            out.push(ALPHABET[((bits >> n) & 63) as usize] as char);
        }
    }
    if n > 0 {
        out.push(ALPHABET[((bits << (6 - n)) & 63) as usize] as char);
    }
    out
}

/// Runs `fut` on a runtime of its own (on another thread), so that this works
/// from synchronous code and from inside any test's runtime alike.
fn block_on_own_runtime<T: Send>(fut: impl std::future::Future<Output = T> + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime")
                .block_on(fut)
        })
        .join()
        .expect("readiness thread")
    })
}

/// A port free on 127.0.0.1 right now (bound, then released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind 127.0.0.1:0")
        .port()
}

/// Removes the run directories of test processes that are gone.
fn remove_stale_runs() {
    let Ok(entries) = std::fs::read_dir(home()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("run-")
            .and_then(|rest| rest.split('-').next())
        else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

// ---------------------------------------------------------------------------
// Nodes.

/// A running node: the wrapper process and the JVM's pid.
#[derive(Debug)]
struct Running {
    wrapper: Child,
    /// Closing it makes the wrapper's watcher SIGKILL the JVM.
    stdin: Option<ChildStdin>,
    java_pid: u32,
}

/// One combined broker+controller node.
#[derive(Debug)]
struct Node {
    id: i32,
    broker_port: u16,
    /// The port of its `SASL_SSL` listener, if it has one.
    sasl_ssl_port: Option<u16>,
    dir: PathBuf,
    running: Option<Running>,
}

impl Node {
    fn config(&self) -> PathBuf {
        self.dir.join("server.properties")
    }

    fn log(&self) -> PathBuf {
        self.dir.join("kafka.log")
    }

    fn spawn(&mut self) -> Result<(), String> {
        assert!(self.running.is_none(), "node {} is running", self.id);
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(WRAPPER)
            .arg("kafka-node")
            .arg(self.log())
            .arg("java")
            .args(jvm_flags(&self.dir))
            .arg("kafka.Kafka")
            .arg(self.config())
            .current_dir(&self.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut wrapper = cmd
            .spawn()
            .map_err(|e| format!("starting node {}: {e}", self.id))?;
        let mut line = String::new();
        let read = BufReader::new(wrapper.stdout.take().expect("piped")).read_line(&mut line);
        let java_pid = match read.ok().and(line.trim().parse().ok()) {
            Some(pid) => pid,
            None => {
                let _ = wrapper.kill();
                let _ = wrapper.wait();
                return Err(format!("node {}: the wrapper printed no pid", self.id));
            }
        };
        let stdin = wrapper.stdin.take();
        self.running = Some(Running {
            wrapper,
            stdin,
            java_pid,
        });
        Ok(())
    }

    /// Sends `signal` to the JVM and waits up to `timeout` for it to exit; then
    /// SIGKILLs it if it still runs. Returns how long the exit took.
    fn signal_and_wait(&mut self, signal: &str, timeout: Duration) -> Duration {
        let started = Instant::now();
        let Some(mut running) = self.running.take() else {
            return Duration::ZERO;
        };
        signal_pid(running.java_pid, signal);
        if wait_with_timeout(&mut running.wrapper, timeout).is_none() {
            signal_pid(running.java_pid, "KILL");
            let _ = running.wrapper.wait();
        }
        drop(running.stdin.take());
        started.elapsed()
    }
}

/// `kill -<signal> <pid>`.
/// Whether every thread of process `pid` is stopped (state `T` in
/// `/proc/PID/task/*/stat`).
fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|task| {
        std::fs::read_to_string(task.path().join("stat"))
            .ok()
            // The state follows the parenthesised command name, which may hold spaces.
            .and_then(|stat| {
                stat.rsplit_once(')')
                    .map(|(_, rest)| rest.trim_start().starts_with('T'))
            })
            .unwrap_or(true) // a thread that exited meanwhile
    })
}

fn signal_pid(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// A small JVM: a 2-core machine runs three of these beside the tests.
fn jvm_flags(dir: &Path) -> Vec<String> {
    let log4j = dir.join("log4j2.properties");
    vec![
        "-Xmx256m".into(),
        "-Xms64m".into(),
        "-XX:+UseSerialGC".into(),
        "-XX:TieredStopAtLevel=1".into(),
        "-XX:CICompilerCount=1".into(),
        "-XX:-UsePerfData".into(),
        "-Djava.awt.headless=true".into(),
        format!("-Dlog4j2.configurationFile={}", log4j.display()),
        "-cp".into(),
        format!("{}/*", libs().display()),
    ]
}

/// INFO to stdout (the node's log file); the chatty per-request loggers stay quiet.
const LOG4J2: &str = "status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
";

/// The properties of node `id` of an `n`-node cluster; with `sasl_ssl`, the
/// node also has that listener.
fn server_properties(
    id: i32,
    n: usize,
    broker_port: u16,
    controller_port: u16,
    controllers: &str,
    data: &Path,
    sasl_ssl: Option<(u16, &Pki)>,
) -> String {
    let rf = n.min(3);
    let min_isr = if rf > 1 { 2 } else { 1 };
    let (listener, advertised, protocol, security) = match sasl_ssl {
        Some((port, pki)) => (
            format!(",SASL_SSL://127.0.0.1:{port}"),
            format!(",SASL_SSL://127.0.0.1:{port}"),
            ",SASL_SSL:SASL_SSL",
            sasl_ssl_properties(pki),
        ),
        None => (String::new(), String::new(), "", String::new()),
    };
    format!(
        "process.roles=broker,controller
node.id={id}
listeners=PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}{listener}
advertised.listeners=PLAINTEXT://127.0.0.1:{broker_port}{advertised}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT{protocol}
controller.quorum.bootstrap.servers={controllers}
log.dirs={data}
num.partitions=1
default.replication.factor={rf}
offsets.topic.replication.factor={rf}
offsets.topic.num.partitions=4
transaction.state.log.replication.factor={rf}
transaction.state.log.min.isr={min_isr}
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor={rf}
share.coordinator.state.topic.min.isr={min_isr}
group.initial.rebalance.delay.ms=0
group.consumer.min.heartbeat.interval.ms=500
group.consumer.heartbeat.interval.ms=500
group.consumer.min.session.timeout.ms=6000
group.consumer.session.timeout.ms=15000
num.network.threads=1
num.io.threads=2
num.replica.fetchers=1
background.threads=2
num.recovery.threads.per.data.dir=1
log.cleaner.enable=false
log.retention.check.interval.ms=500
log.retention.ms=-1
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=4000
broker.rack=rack-{id}
replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector
{security}",
        data = data.display()
    )
}

/// The `SASL_SSL` listener's settings: `pki`'s broker key and certificate as a
/// PEM keystore (KIP-651), PLAIN with the user of [`PLAIN_LOGIN`], SCRAM-SHA-512
/// (its user is added when the storage is formatted, see
/// [`scram_format_args`]) and OAUTHBEARER with the unsecured JWS validator
/// (tokens with `alg: none`, as Kafka's default validator accepts them).
fn sasl_ssl_properties(pki: &Pki) -> String {
    format!(
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512,OAUTHBEARER
listener.name.sasl_ssl.ssl.keystore.type=PEM
listener.name.sasl_ssl.ssl.keystore.location={keystore}
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_{plain_user}=\"{plain_password}\";
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub=\"admin\";
listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler
",
        keystore = pki.broker_keystore.display(),
        plain_user = PLAIN_LOGIN.username,
        plain_password = PLAIN_LOGIN.password,
    )
}

/// `kafka-storage format` arguments that add the SCRAM-SHA-512 user of
/// [`SCRAM_SHA512_LOGIN`] to the metadata log.
fn scram_format_args() -> [String; 2] {
    [
        "--add-scram".to_string(),
        format!(
            "SCRAM-SHA-512=[name={},password={}]",
            SCRAM_SHA512_LOGIN.username, SCRAM_SHA512_LOGIN.password
        ),
    ]
}

// ---------------------------------------------------------------------------
// The cluster.

/// A KRaft cluster of combined broker+controller JVMs. Dropping it kills them.
#[derive(Debug)]
pub struct KafkaCluster {
    nodes: Mutex<Vec<Node>>,
    bootstrap: Vec<String>,
    dir: PathBuf,
    /// The PKI of the `SASL_SSL` listeners, if the nodes have them.
    pki: Option<Pki>,
}

/// The single node shared by the tests of this binary, started on first use.
pub fn single_node() -> &'static KafkaCluster {
    static NODE: OnceLock<Result<KafkaCluster, String>> = OnceLock::new();
    match NODE.get_or_init(|| KafkaCluster::try_start(1, true)) {
        Ok(cluster) => cluster,
        Err(reason) => panic!("Apache Kafka did not start:\n{reason}"),
    }
}

/// Exclusive use of the 3-node cluster shared by the tests of this binary that stop
/// and restart nodes (see [`three_nodes`]); derefs to the cluster.
#[derive(Debug)]
pub struct ThreeNodes {
    _turn: tokio::sync::MutexGuard<'static, ()>,
    cluster: &'static KafkaCluster,
}

impl std::ops::Deref for ThreeNodes {
    type Target = KafkaCluster;

    fn deref(&self) -> &KafkaCluster {
        self.cluster
    }
}

/// The 3-node cluster, started on first use and shared (JVM start-ups are the cost
/// on 2 cores); tests that restart its nodes take turns, each leaving every node
/// running and every partition fully replicated.
pub async fn three_nodes() -> ThreeNodes {
    static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    static CLUSTER: OnceLock<Result<KafkaCluster, String>> = OnceLock::new();
    let turn = TURN.lock().await;
    match CLUSTER.get_or_init(|| KafkaCluster::try_start(3, false)) {
        Ok(cluster) => ThreeNodes {
            _turn: turn,
            cluster,
        },
        Err(reason) => panic!("the 3-node Apache Kafka cluster did not start:\n{reason}"),
    }
}

impl KafkaCluster {
    /// Formats and starts `n` nodes and waits until a Baton client sees all of
    /// them; panics with the nodes' logs if that fails.
    #[allow(dead_code)] // for a test that owns its cluster; the current ones share
    pub fn start(n: usize) -> KafkaCluster {
        KafkaCluster::try_start(n, false).unwrap_or_else(|reason| panic!("{reason}"))
    }

    /// Formats and starts `n` nodes; with `sasl_ssl`, each also has a
    /// `SASL_SSL` listener (see [`KafkaCluster::sasl_ssl`]).
    fn try_start(n: usize, sasl_ssl: bool) -> Result<KafkaCluster, String> {
        assert!(n >= 1);
        let libs = libs();
        static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if run == 0 {
            remove_stale_runs();
        }
        let dir = home().join(format!("run-{}-{run}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut rng = Rng::new(nanos() ^ (std::process::id() as u64) << 32);
        let cluster_id = kafka_uuid(&mut rng);
        let ids: Vec<i32> = (1..=n as i32).collect();
        let broker_ports: Vec<u16> = ids.iter().map(|_| free_port()).collect();
        let controller_ports: Vec<u16> = ids.iter().map(|_| free_port()).collect();
        let pki = sasl_ssl.then(Pki::generate);
        let sasl_ssl_ports: Vec<Option<u16>> = ids
            .iter()
            .map(|_| pki.as_ref().map(|_| free_port()))
            .collect();
        let controllers = controller_ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",");
        let initial_controllers = ids
            .iter()
            .zip(&controller_ports)
            .map(|(id, p)| format!("{id}@127.0.0.1:{p}:{}", kafka_uuid(&mut rng)))
            .collect::<Vec<_>>()
            .join(",");
        let mut nodes = Vec::new();
        let mut formats = Vec::new();
        for (i, &id) in ids.iter().enumerate() {
            let node_dir = dir.join(format!("node-{id}"));
            std::fs::create_dir_all(&node_dir).map_err(|e| format!("{node_dir:?}: {e}"))?;
            let node = Node {
                id,
                broker_port: broker_ports[i],
                sasl_ssl_port: sasl_ssl_ports[i],
                dir: node_dir.clone(),
                running: None,
            };
            let props = server_properties(
                id,
                n,
                broker_ports[i],
                controller_ports[i],
                &controllers,
                &node_dir.join("data"),
                sasl_ssl_ports[i].zip(pki.as_ref()),
            );
            std::fs::write(node.config(), props).map_err(|e| e.to_string())?;
            std::fs::write(node_dir.join("log4j2.properties"), LOG4J2)
                .map_err(|e| e.to_string())?;
            // KRaft storage: a single node is its own quorum (--standalone); a
            // cluster names its initial controllers (KIP-853).
            let mut format = Command::new("java");
            format
                .args(jvm_flags(&node_dir))
                .args(["kafka.tools.StorageTool", "format", "-t", &cluster_id, "-c"])
                .arg(node.config());
            if n == 1 {
                format.arg("--standalone");
            } else {
                format.args(["--initial-controllers", &initial_controllers]);
            }
            if pki.is_some() {
                format.args(scram_format_args());
            }
            formats.push(std::thread::spawn(move || {
                run_to_end(&mut format, READY_TIMEOUT)
            }));
            nodes.push(node);
        }
        for (format, node) in formats.into_iter().zip(&nodes) {
            format
                .join()
                .expect("format thread")
                .map_err(|e| format!("formatting node {}: {e}", node.id))?;
        }
        for node in &mut nodes {
            node.spawn()?;
        }
        let cluster = KafkaCluster {
            bootstrap: broker_ports
                .iter()
                .map(|p| format!("127.0.0.1:{p}"))
                .collect(),
            nodes: Mutex::new(nodes),
            dir,
            pki,
        };
        let started = Instant::now();
        block_on_own_runtime(cluster.wait_brokers(n))
            .map_err(|e| format!("{e}\n{}", cluster.log_tails(80)))?;
        eprintln!(
            "Apache Kafka {} ({n} node(s), libs {}): ready in {:.1?}, logs in {}",
            kafka_version(),
            libs.display(),
            started.elapsed(),
            cluster.dir.display()
        );
        Ok(cluster)
    }

    /// The brokers' addresses, for `Client::builder`.
    pub fn bootstrap(&self) -> Vec<String> {
        self.bootstrap.clone()
    }

    /// The addresses of the brokers' `SASL_SSL` listeners and the PKI whose CA
    /// signed their certificate (SANs `localhost` and `127.0.0.1`); `None` if
    /// the nodes have no such listener. Users: PLAIN [`PLAIN_LOGIN`],
    /// SCRAM-SHA-512 [`SCRAM_SHA512_LOGIN`], and OAUTHBEARER with any unsecured
    /// JWS token.
    pub fn sasl_ssl(&self) -> Option<(Vec<String>, &Pki)> {
        let pki = self.pki.as_ref()?;
        let nodes = self.nodes.lock().unwrap();
        let addresses = nodes
            .iter()
            .map(|n| n.sasl_ssl_port.map(|p| format!("127.0.0.1:{p}")))
            .collect::<Option<Vec<_>>>()?;
        Some((addresses, pki))
    }

    /// The node ids, in order.
    pub fn node_ids(&self) -> Vec<i32> {
        self.nodes.lock().unwrap().iter().map(|n| n.id).collect()
    }

    /// A client bootstrapped from every node.
    pub async fn client(&self) -> Client {
        Client::builder(self.bootstrap())
            .client_id("baton-apache-kafka-tests")
            .request_timeout(Duration::from_secs(10))
            .connect_timeout(Duration::from_secs(2))
            .build()
            .await
            .unwrap_or_else(|e| panic!("client connects: {e}\n{}", self.log_tails(40)))
    }

    /// Waits until a fresh Baton client's Metadata lists `n` brokers.
    pub async fn wait_brokers(&self, n: usize) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let mut last = String::from("no attempt");
        while Instant::now() < deadline {
            self.check_alive()?;
            let attempt = async {
                let client = Client::builder(self.bootstrap())
                    .request_timeout(Duration::from_secs(5))
                    .connect_timeout(Duration::from_secs(1))
                    .build()
                    .await
                    .map_err(|e| e.to_string())?;
                let meta = client.refresh_metadata().await.map_err(|e| e.to_string())?;
                Ok::<_, String>(meta.brokers.len())
            };
            match attempt.await {
                Ok(seen) if seen >= n => return Ok(()),
                Ok(seen) => last = format!("{seen} of {n} brokers in Metadata"),
                Err(e) => last = e,
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Err(format!(
            "{n} broker(s) not ready after {READY_TIMEOUT:?}: {last}"
        ))
    }

    /// Fails if a node that should run has exited (its log says why).
    fn check_alive(&self) -> Result<(), String> {
        let mut nodes = self.nodes.lock().unwrap();
        for node in nodes.iter_mut() {
            if let Some(running) = node.running.as_mut() {
                if let Ok(Some(status)) = running.wrapper.try_wait() {
                    return Err(format!("node {} exited with {status}", node.id));
                }
            }
        }
        Ok(())
    }

    /// Waits until every partition of every topic has a leader and all its
    /// replicas in sync (no under-replicated partition).
    pub async fn wait_fully_replicated(&self, client: &Client) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let mut last = String::new();
        while Instant::now() < deadline {
            match client.refresh_metadata().await {
                Ok(meta) => {
                    let lagging: Vec<String> = meta
                        .topics
                        .values()
                        .flat_map(|t| {
                            t.partitions
                                .iter()
                                .filter(|p| p.leader.is_none() || p.isr.len() < p.replicas.len())
                                .map(move |p| {
                                    format!(
                                        "{}/{} leader {:?} isr {:?} of {:?}",
                                        t.name, p.partition, p.leader, p.isr, p.replicas
                                    )
                                })
                        })
                        .collect();
                    if lagging.is_empty() {
                        return Ok(());
                    }
                    last = lagging.join("; ");
                }
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Err(format!(
            "still under-replicated after {READY_TIMEOUT:?}: {last}"
        ))
    }

    /// SIGTERM to node `id` (a controlled shutdown); returns once it exited, with
    /// how long that took.
    pub fn stop(&self, id: i32) -> Duration {
        self.with_node(id, |n| n.signal_and_wait("TERM", STOP_TIMEOUT))
    }

    /// SIGKILL to node `id` (a crash); returns once it is gone.
    pub fn kill(&self, id: i32) -> Duration {
        self.with_node(id, |n| n.signal_and_wait("KILL", STOP_TIMEOUT))
    }

    /// SIGSTOP to node `id`: it keeps its connections but answers nothing until
    /// [`KafkaCluster::resume`]. Returns once every thread of the JVM is stopped
    /// (a signal is delivered to each thread when it next runs, which on a loaded
    /// machine is not at once), so a request sent afterwards finds it stopped.
    pub fn pause(&self, id: i32) {
        let pid = self.with_node(id, |n| n.running.as_ref().expect("running").java_pid);
        signal_pid(pid, "STOP");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !all_threads_stopped(pid) {
            assert!(
                Instant::now() < deadline,
                "node {id} (pid {pid}) did not stop within 30 s of SIGSTOP"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// SIGCONT to node `id`.
    pub fn resume(&self, id: i32) {
        self.with_node(id, |n| {
            signal_pid(n.running.as_ref().expect("running").java_pid, "CONT")
        })
    }

    /// Starts stopped node `id` again on its directory and ports (does not wait).
    pub fn restart(&self, id: i32) {
        self.with_node(id, |n| n.spawn())
            .unwrap_or_else(|e| panic!("{e}\n{}", self.log_tails(40)));
    }

    fn with_node<T>(&self, id: i32, f: impl FnOnce(&mut Node) -> T) -> T {
        let mut nodes = self.nodes.lock().unwrap();
        let node = nodes
            .iter_mut()
            .find(|n| n.id == id)
            .unwrap_or_else(|| panic!("no node {id}"));
        f(node)
    }

    /// The broker port of node `id`.
    pub fn broker_port(&self, id: i32) -> u16 {
        self.with_node(id, |n| n.broker_port)
    }

    /// The last `lines` lines of every node's log.
    pub fn log_tails(&self, lines: usize) -> String {
        let nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
        nodes
            .iter()
            .map(|n| {
                let text = std::fs::read_to_string(n.log()).unwrap_or_default();
                format!(
                    "--- node {} ({}) ---\n{}",
                    n.id,
                    n.log().display(),
                    tail(&text, lines)
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// A guard that prints the nodes' log tails if the test panics while it lives.
    pub fn logs_on_failure(&self) -> LogsOnFailure<'_> {
        LogsOnFailure(self)
    }
}

impl Drop for KafkaCluster {
    fn drop(&mut self) {
        let nodes = self.nodes.get_mut().unwrap_or_else(|p| p.into_inner());
        for node in nodes.iter_mut() {
            node.signal_and_wait("KILL", Duration::from_secs(10));
        }
    }
}

/// See [`KafkaCluster::logs_on_failure`].
#[derive(Debug)]
pub struct LogsOnFailure<'a>(&'a KafkaCluster);

impl Drop for LogsOnFailure<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("Apache Kafka logs (tail):\n{}", self.0.log_tails(60));
        }
    }
}

/// Runs a Kafka tool's main `class` (from `libs/`) with `args`, `stdin` as its
/// input; `Err` with its output unless it exits 0 within two minutes.
pub fn java_tool(class: &str, args: &[&str], stdin: &str) -> Result<(), String> {
    let input = std::env::temp_dir().join(format!(
        "baton-apache-kafka-{}-{}.in",
        std::process::id(),
        nanos()
    ));
    std::fs::write(&input, stdin).map_err(|e| format!("{input:?}: {e}"))?;
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(r#"in=$1; shift; exec "$@" <"$in""#)
        .arg("java-tool")
        .arg(&input)
        .arg("java")
        .args(jvm_flags(&home()))
        .arg(class)
        .args(args);
    let result = run_to_end(&mut cmd, Duration::from_secs(120));
    let _ = std::fs::remove_file(&input);
    result
}
