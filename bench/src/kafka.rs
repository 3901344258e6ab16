//! An Apache Kafka single node started by the bench: the release pinned in
//! `tests/apache-kafka/pom.xml`, with the same KRaft settings as the tests'
//! starter (`tests/apache_kafka_util`, which the bench cannot import), but with
//! the JVM settings of Kafka's own `kafka-server-start.sh` (1 GiB heap, G1) and
//! Kafka's default thread counts, since this is a benchmark.
//!
//! The node is one combined broker+controller JVM on 127.0.0.1 ports of its own;
//! its log dir is under `/dev/shm` (tmpfs) when that exists, so that it writes to
//! memory as baton-broker's in-memory log does.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::measure::{free_port, BrokerProc};

/// The Maven project that pins the Kafka release.
const POM: &str = include_str!("../../tests/apache-kafka/pom.xml");

/// JVM flags of Kafka's scripts (`kafka-run-class.sh`'s performance options).
pub const JVM_PERF: [&str; 6] = [
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
];

/// Runs `java` with its output appended to the log file `$1` and prints its pid;
/// a watcher holding the wrapper's stdin SIGKILLs the JVM when that pipe closes
/// (the bench ended, however it ended).
const WRAPPER: &str = r#"log=$1; shift
"$@" </dev/null >>"$log" 2>&1 &
pid=$!
echo "$pid"
exec 3<&0 </dev/null >/dev/null 2>&1
{ cat <&3 >/dev/null; kill -KILL "$pid"; } &
exec 3<&-
wait "$pid""#;

/// WARN and above to the node's log file.
const LOG4J2: &str = "status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = OUT
";

/// The Kafka version pinned in the pom (`<kafka.version>`).
pub fn version() -> &'static str {
    POM.split_once("<kafka.version>")
        .and_then(|(_, rest)| rest.split_once("</kafka.version>"))
        .map_or("?", |(v, _)| v.trim())
}

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// `<repo>/target/apache-kafka/libs`, installed with Maven if its marker does not
/// name the pinned version (as `.ci/run` and the tests install it).
pub fn libs() -> Result<PathBuf, String> {
    let home = repo().join("target/apache-kafka");
    let libs = home.join("libs");
    let marker = libs.join("KAFKA_VERSION");
    if std::fs::read_to_string(&marker).is_ok_and(|v| v.trim() == version()) {
        return Ok(libs);
    }
    std::fs::create_dir_all(&home).map_err(|e| format!("{}: {e}", home.display()))?;
    let staging = home.join(format!("libs.tmp-{}", std::process::id()));
    eprintln!(
        "  installing Apache Kafka {} into {}",
        version(),
        libs.display()
    );
    let status = Command::new("mvn")
        .args(["-q", "-B", "-f"])
        .arg(repo().join("tests/apache-kafka/pom.xml"))
        .arg("dependency:copy-dependencies")
        .arg(format!("-DoutputDirectory={}", staging.display()))
        .stdin(Stdio::null())
        .status()
        .map_err(|e| format!("mvn: {e}"))?;
    if !status.success() {
        return Err(format!("mvn dependency:copy-dependencies: {status}"));
    }
    std::fs::write(staging.join("KAFKA_VERSION"), version()).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&libs);
    std::fs::rename(&staging, &libs).map_err(|e| format!("{}: {e}", libs.display()))?;
    Ok(libs)
}

/// `-cp <libs>/*` and a WARN log4j2 configuration written into `dir`.
pub fn java_classpath(libs: &Path, dir: &Path) -> Result<Vec<String>, String> {
    let log4j = dir.join("log4j2.properties");
    std::fs::write(&log4j, LOG4J2).map_err(|e| format!("{}: {e}", log4j.display()))?;
    Ok(vec![
        format!("-Dlog4j2.configurationFile={}", log4j.display()),
        "-cp".into(),
        format!("{}/*", libs.display()),
    ])
}

/// A directory for this run's data: under /dev/shm (tmpfs) if it exists.
pub fn scratch(name: &str) -> PathBuf {
    let base = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    base.join(format!("baton-bench-{}-{name}", std::process::id()))
}

/// A fresh Kafka `Uuid` in its text form (URL-safe base64 of 16 bytes, unpadded).
fn kafka_uuid(seed: u64) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    // Any 16 bytes will do; two rounds of splitmix64 from the seed.
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    };
    let (a, b) = (mix(seed), mix(seed ^ 0x9e3779b97f4a7c15));
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&a.to_be_bytes());
    bytes[8..].copy_from_slice(&b.to_be_bytes());
    let (mut bits, mut n, mut out) = (0u32, 0, String::new());
    for byte in bytes {
        bits = (bits << 8) | byte as u32;
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

/// Formats KRaft storage and starts one combined node with its log dir under
/// [`scratch`]; returns once a Baton client sees it in Metadata.
pub async fn start_node(libs: &Path) -> Result<BrokerProc, String> {
    let dir = scratch("kafka");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let (port, controller) = (free_port(), free_port());
    let props = dir.join("server.properties");
    std::fs::write(
        &props,
        format!(
            "process.roles=broker,controller
node.id=1
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
controller.quorum.bootstrap.servers=127.0.0.1:{controller}
log.dirs={data}
num.partitions=1
default.replication.factor=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.cleaner.enable=false
",
            data = dir.join("data").display()
        ),
    )
    .map_err(|e| e.to_string())?;
    let mut jvm: Vec<String> = ["-Xmx1g", "-Xms1g"].map(String::from).to_vec();
    jvm.extend(JVM_PERF.map(String::from));
    jvm.extend(java_classpath(libs, &dir)?);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    let out = Command::new("java")
        .args(&jvm)
        .args(["kafka.tools.StorageTool", "format", "--standalone", "-t"])
        .arg(kafka_uuid(seed))
        .arg("-c")
        .arg(&props)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("java StorageTool: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "formatting Kafka storage: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let log = dir.join("kafka.log");
    let mut wrapper = Command::new("sh")
        .arg("-c")
        .arg(WRAPPER)
        .arg("kafka-node")
        .arg(&log)
        .arg("java")
        .args(&jvm)
        .arg("kafka.Kafka")
        .arg(&props)
        .current_dir(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting Kafka: {e}"))?;
    let mut line = String::new();
    let read = BufReader::new(wrapper.stdout.take().ok_or("no stdout")?).read_line(&mut line);
    let pid: u32 = match read.ok().and(line.trim().parse().ok()) {
        Some(pid) => pid,
        None => {
            let _ = wrapper.kill();
            let _ = wrapper.wait();
            return Err("the Kafka wrapper printed no pid".into());
        }
    };
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut node = BrokerProc::adopt("Apache Kafka", wrapper, pid, addr, Some(dir));
    let started = Instant::now();
    wait_ready(&mut node, &log).await?;
    eprintln!(
        "  Apache Kafka {} ready in {:.1?} (log dir under {}, pid {pid})",
        version(),
        started.elapsed(),
        scratch("kafka").display()
    );
    Ok(node)
}

/// Waits until a Baton client's Metadata lists the node.
async fn wait_ready(node: &mut BrokerProc, log: &Path) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut last = String::from("no attempt");
    while Instant::now() < deadline {
        if let Some(status) = node.exited() {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            return Err(format!("Kafka exited with {status}:\n{text}"));
        }
        let attempt = async {
            let client = baton_kafka::Client::builder([node.bootstrap()])
                .request_timeout(Duration::from_secs(5))
                .connect_timeout(Duration::from_secs(1))
                .build()
                .await
                .map_err(|e| e.to_string())?;
            let meta = client.refresh_metadata().await.map_err(|e| e.to_string())?;
            Ok::<_, String>(meta.brokers.len())
        };
        match attempt.await {
            Ok(n) if n >= 1 => return Ok(()),
            Ok(_) => last = "no broker in Metadata".into(),
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Err(format!("Kafka not ready after 180 s: {last}"))
}
