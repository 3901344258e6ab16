//! Interoperability tests: real third-party Kafka clients against `baton-broker`.
//!
//! The judges of protocol correctness here are kafka-python (pure Python),
//! confluent-kafka (librdkafka) and kcat (librdkafka's command-line tool). Each
//! test starts an in-process broker on `127.0.0.1:0` and drives the clients
//! through the scripts in `tests/interop/`, which print one `RESULT {json}` line
//! that the test asserts on.
//!
//! The clients are set up once per test binary (see [`tools`]): a virtualenv at
//! `<workspace>/target/interop-venv` with the versions pinned in
//! `tests/interop/requirements.txt`, and `kcat` from Debian when it is missing
//! and the tests run as root. `.ci/run` prepares the same things up front. If
//! setup fails, every test here fails with the reason; none is skipped.
//!
//! Records come from a seeded generator (`tests/interop/records.py`): keys,
//! headers, null, 0-byte and 100 KiB values, explicit timestamps. Each client
//! writes 10,000 of them uncompressed and 1,000 per codec (gzip, snappy, lz4,
//! zstd) and 3,000 with an idempotent producer; both Python clients read
//! every topic back and compare key, value, headers, timestamp and offset per
//! partition. The seed is printed by every test and `BATON_INTEROP_SEED=N`
//! replays it.
//!
//! What the clients are configured with (the consumers do not use groups):
//! - kafka-python: `enable_idempotence` is always given explicitly (its
//!   default is on); consumers use `group_id=None` and `assign()`.
//! - confluent-kafka: `enable.idempotence` given explicitly; consumers use
//!   `assign()` with `OFFSET_BEGINNING` and `enable.auto.commit=False`. The
//!   Python binding refuses a Consumer without `group.id`, so one is set but
//!   never joined (no FindCoordinator, JoinGroup or OffsetCommit is sent).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use baton_broker::{Broker, BrokerConfig};

/// Records each client produces in the round-trip tests.
const RECORD_COUNT: u32 = 10_000;

/// Partitions of every test topic.
const PARTITIONS: u32 = 3;

/// Upper bound for one client command; the scripts give up on their own after
/// `INTEROP_CLIENT_TIMEOUT_S` (90 s), so this only fires on a hang.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(120);

/// Upper bound for one setup command (apt-get, venv creation, pip install).
const SETUP_TIMEOUT: Duration = Duration::from_secs(600);

/// Pinned client versions, shared with `.ci/run`.
const REQUIREMENTS: &str = include_str!("interop/requirements.txt");

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn scripts_dir() -> PathBuf {
    workspace().join("tests").join("interop")
}

// ---------------------------------------------------------------------------
// Subprocesses with a deadline.

/// What a finished subprocess printed.
struct Finished {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Finished {
    fn describe(&self, what: &str) -> String {
        format!(
            "{what} exited with {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.status,
            tail(&self.stdout),
            tail(&self.stderr)
        )
    }
}

/// Keeps the end of long output so a failure message stays readable.
fn tail(s: &str) -> &str {
    const MAX: usize = 20_000;
    if s.len() <= MAX {
        return s;
    }
    let mut start = s.len() - MAX;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// Copies a pipe into a shared buffer on its own thread, so a child that
/// outlives a kill (or leaves grandchildren holding the pipe) cannot block us.
fn drain(mut pipe: impl Read + Send + 'static) -> Arc<Mutex<Vec<u8>>> {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&buf);
    thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        loop {
            match pipe.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => sink.lock().unwrap().extend_from_slice(&chunk[..n]),
            }
        }
    });
    buf
}

fn take(buf: &Arc<Mutex<Vec<u8>>>) -> String {
    String::from_utf8_lossy(&buf.lock().unwrap()).into_owned()
}

/// Runs `cmd` with no stdin, killing it after `timeout`. `Err` if it could not
/// start or timed out; a non-zero exit is returned as `Ok` for the caller to judge.
fn run(cmd: &mut Command, what: &str, timeout: Duration) -> Result<Finished, String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("{what}: could not start {cmd:?}: {e}"))?;
    let stdout = drain(child.stdout.take().expect("stdout is piped"));
    let stderr = drain(child.stderr.take().expect("stderr is piped"));
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                thread::sleep(Duration::from_millis(200));
                return Err(format!(
                    "{what}: killed after {timeout:?} ({cmd:?})\n--- stdout ---\n{}\n--- stderr ---\n{}",
                    tail(&take(&stdout)),
                    tail(&take(&stderr))
                ));
            }
            Ok(None) => thread::sleep(Duration::from_millis(25)),
            Err(e) => return Err(format!("{what}: waiting for {cmd:?} failed: {e}")),
        }
    };
    // The pipes close when the child exits; give the reader threads a moment
    // (each holds a clone of its buffer until it has read everything).
    let drained = Instant::now();
    while Arc::strong_count(&stdout) + Arc::strong_count(&stderr) > 2
        && drained.elapsed() < Duration::from_secs(5)
    {
        thread::sleep(Duration::from_millis(10));
    }
    let finished = Finished {
        status,
        stdout: take(&stdout),
        stderr: take(&stderr),
    };
    Ok(finished)
}

/// Runs a setup command and requires exit status 0.
fn run_ok(cmd: &mut Command, what: &str) -> Result<Finished, String> {
    let out = run(cmd, what, SETUP_TIMEOUT)?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(out.describe(what))
    }
}

// ---------------------------------------------------------------------------
// One-time setup of the third-party clients.

/// Paths of the ready third-party clients.
struct Tools {
    /// The venv's interpreter, with kafka-python and confluent-kafka installed.
    python: PathBuf,
    /// `kcat` (or Debian's older name `kafkacat`).
    kcat: String,
}

/// Sets the clients up on first use and returns them; panics with the reason
/// if that is impossible, so a machine without them fails loudly.
fn tools() -> &'static Tools {
    static TOOLS: OnceLock<Result<Tools, String>> = OnceLock::new();
    match TOOLS.get_or_init(setup) {
        Ok(tools) => tools,
        Err(reason) => panic!(
            "interop test setup failed (run .ci/run, or install kcat and python3-venv \
             and let the tests create {}):\n{reason}",
            venv_dir().display()
        ),
    }
}

fn venv_dir() -> PathBuf {
    workspace().join("target").join("interop-venv")
}

fn setup() -> Result<Tools, String> {
    let python = ensure_venv()?;
    let kcat = ensure_kcat()?;
    Ok(Tools { python, kcat })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn apt_get_install(packages: &[&str]) -> Result<(), String> {
    if !is_root() {
        return Err(format!(
            "{} missing and not running as root; install it with apt-get",
            packages.join(" ")
        ));
    }
    run_ok(
        Command::new("apt-get")
            .args(["update", "-qq"])
            .env("DEBIAN_FRONTEND", "noninteractive"),
        "apt-get update",
    )?;
    run_ok(
        Command::new("apt-get")
            .args(["install", "-y", "-qq"])
            .args(packages)
            .env("DEBIAN_FRONTEND", "noninteractive"),
        "apt-get install",
    )?;
    Ok(())
}

/// `name==version` pairs from the requirements file.
fn pins() -> Vec<(&'static str, &'static str)> {
    REQUIREMENTS
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once("=="))
        .collect()
}

/// Prints `name==version` for each pinned package, as installed in the venv.
const VERSION_PROBE: &str = "\
import importlib.metadata as m, sys
for name in sys.argv[1:]:
    try:
        print('%s==%s' % (name, m.version(name)))
    except m.PackageNotFoundError:
        print('%s==missing' % name)
import kafka, confluent_kafka
";

fn venv_matches_pins(python: &Path) -> bool {
    let pins = pins();
    let mut cmd = Command::new(python);
    cmd.arg("-c").arg(VERSION_PROBE);
    for (name, _) in &pins {
        cmd.arg(name);
    }
    match run(&mut cmd, "venv version probe", SETUP_TIMEOUT) {
        Ok(out) if out.status.success() => pins
            .iter()
            .all(|(name, version)| out.stdout.contains(&format!("{name}=={version}"))),
        _ => false,
    }
}

fn ensure_venv() -> Result<PathBuf, String> {
    let venv = venv_dir();
    let python = venv.join("bin").join("python");
    if python.exists() && venv_matches_pins(&python) {
        return Ok(python);
    }
    if !python.exists() {
        std::fs::create_dir_all(workspace().join("target"))
            .map_err(|e| format!("creating target/: {e}"))?;
        let create = || {
            run_ok(
                Command::new("python3").arg("-m").arg("venv").arg(&venv),
                "python3 -m venv",
            )
        };
        if let Err(first) = create() {
            // Debian splits venv/ensurepip into python3-venv.
            apt_get_install(&["python3-venv"])
                .map_err(|e| format!("{first}\nthen installing python3-venv: {e}"))?;
            let _ = std::fs::remove_dir_all(&venv);
            create()?;
        }
    }
    run_ok(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-r",
            ])
            .arg(scripts_dir().join("requirements.txt")),
        "pip install -r tests/interop/requirements.txt",
    )?;
    if !venv_matches_pins(&python) {
        return Err(format!(
            "after pip install, {} still lacks the pinned versions {:?}",
            venv.display(),
            pins()
        ));
    }
    Ok(python)
}

fn find_kcat() -> Option<String> {
    ["kcat", "kafkacat"].into_iter().find_map(|name| {
        let ok = run(
            Command::new(name).arg("-V"),
            "kcat -V",
            Duration::from_secs(30),
        )
        .map(|o| o.status.success())
        .unwrap_or(false);
        ok.then(|| name.to_string())
    })
}

fn ensure_kcat() -> Result<String, String> {
    if let Some(kcat) = find_kcat() {
        return Ok(kcat);
    }
    if apt_get_install(&["kcat"]).is_err() {
        apt_get_install(&["kafkacat"])?;
    }
    find_kcat().ok_or_else(|| "kcat installed but `kcat -V` still fails".to_string())
}

// ---------------------------------------------------------------------------
// The broker and the client scripts.

/// Runs `f` against a fresh broker, then shuts the broker down.
fn with_broker<T>(data_dir: Option<PathBuf>, f: impl FnOnce(&str) -> T) -> T {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .try_init();
    let broker = runtime
        .block_on(Broker::start(BrokerConfig {
            listen: "127.0.0.1:0".parse().expect("listen address"),
            data_dir,
            ..Default::default()
        }))
        .expect("broker starts");
    let bootstrap = broker.bootstrap();
    let out = f(&bootstrap);
    runtime.block_on(broker.shutdown());
    out
}

/// A seed from `BATON_INTEROP_SEED`, or a fresh one; printed either way.
fn seed() -> u64 {
    let seed = match std::env::var("BATON_INTEROP_SEED") {
        Ok(s) => s.trim().parse().expect("BATON_INTEROP_SEED is a u64"),
        Err(_) => {
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            (nanos as u64) % 1_000_000_007
        }
    };
    println!("interop seed = {seed} (set BATON_INTEROP_SEED={seed} to replay)");
    seed
}

/// A topic name no other test uses.
fn topic(prefix: &str, seed: u64) -> String {
    format!("interop-{prefix}-{seed}")
}

/// The two Python client scripts.
#[derive(Debug, Clone, Copy)]
enum Client {
    KafkaPython,
    Confluent,
}

impl Client {
    fn script(self) -> &'static str {
        match self {
            Client::KafkaPython => "kafka_python_client.py",
            Client::Confluent => "confluent_client.py",
        }
    }
}

/// The `RESULT {json}` line of a client script, with just enough JSON reading
/// for the flat objects the scripts print.
#[derive(Debug)]
struct ScriptResult {
    json: String,
}

impl ScriptResult {
    fn raw(&self, key: &str) -> Option<&str> {
        let needle = format!("\"{key}\": ");
        let start = self.json.find(&needle)? + needle.len();
        let rest = &self.json[start..];
        let end = if rest.starts_with('[') {
            rest.find(']')? + 1
        } else if rest.starts_with('{') {
            rest.find('}')? + 1
        } else {
            rest.find([',', '}']).unwrap_or(rest.len())
        };
        Some(&rest[..end])
    }

    fn bool(&self, key: &str) -> bool {
        self.raw(key) == Some("true")
    }

    fn int(&self, key: &str) -> Option<i64> {
        self.raw(key)?.trim().parse().ok()
    }

    fn ints(&self, key: &str) -> Option<Vec<i64>> {
        let raw = self.raw(key)?.trim_start_matches('[').trim_end_matches(']');
        if raw.trim().is_empty() {
            return Some(Vec::new());
        }
        raw.split(',').map(|v| v.trim().parse().ok()).collect()
    }
}

/// Runs a client script and returns its result line; panics with its output
/// (and the seed) if it fails or hangs.
fn client(client: Client, args: &[&str], seed: u64) -> ScriptResult {
    let tools = tools();
    let what = format!("{} {}", client.script(), args.join(" "));
    let mut cmd = Command::new(&tools.python);
    cmd.arg(scripts_dir().join(client.script()))
        .args(args)
        .current_dir(scripts_dir())
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("INTEROP_CLIENT_TIMEOUT_S", "90");
    let out = match run(&mut cmd, &what, CLIENT_TIMEOUT) {
        Ok(out) => out,
        Err(e) => panic!("seed {seed}: {e}"),
    };
    if !out.status.success() {
        panic!("seed {seed}: {}", out.describe(&what));
    }
    let Some(line) = out.stdout.lines().rev().find(|l| l.starts_with("RESULT ")) else {
        panic!("seed {seed}: no RESULT line; {}", out.describe(&what));
    };
    if !out.stderr.trim().is_empty() {
        println!("{what} stderr:\n{}", tail(&out.stderr));
    }
    ScriptResult {
        json: line["RESULT ".len()..].to_string(),
    }
}

fn create_topic(with: Client, bootstrap: &str, topic: &str, seed: u64) {
    let created = client(
        with,
        &["create-topic", bootstrap, topic, &PARTITIONS.to_string()],
        seed,
    );
    assert_eq!(
        created.int("partitions"),
        Some(i64::from(PARTITIONS)),
        "seed {seed}: {with:?} sees the created topic {topic} with {PARTITIONS} partitions: {}",
        created.json
    );
}

/// One produce-then-consume scenario on a running broker.
struct Scenario<'a> {
    bootstrap: &'a str,
    seed: u64,
    topic: &'a str,
    count: u32,
    compression: &'a str,
    /// Whether the producer runs idempotent (InitProducerId, sequences).
    idempotent: bool,
}

impl Scenario<'_> {
    /// Creates the topic, produces the seeded records with `producer`, then
    /// consumes them with each of `consumers` and checks they come back
    /// byte-identical in partition order.
    fn run(&self, producer: Client, consumers: &[Client]) {
        let Scenario {
            bootstrap,
            seed,
            topic,
            count,
            compression,
            idempotent,
        } = *self;
        create_topic(producer, bootstrap, topic, seed);
        let count_arg = count.to_string();
        let partitions = PARTITIONS.to_string();
        let seed_arg = seed.to_string();
        let args = [bootstrap, topic, &seed_arg, &count_arg, &partitions];

        let mode = if idempotent { "idempotent" } else { "plain" };
        let produce_args = [&["produce"], &args[..], &[compression, mode]].concat();
        let produced = client(producer, &produce_args, seed);
        assert!(
            produced.bool("ok") && produced.bool("idempotent") == idempotent,
            "seed {seed}: {producer:?} produce ({compression}, {mode}): {}",
            produced.json
        );
        let per_partition = produced.ints("per_partition").expect("per_partition");
        assert_eq!(per_partition.len(), PARTITIONS as usize);
        assert_eq!(
            per_partition.iter().sum::<i64>(),
            i64::from(count),
            "seed {seed}"
        );

        for &consumer in consumers {
            let consumed = client(consumer, &[&["consume"], &args[..]].concat(), seed);
            assert!(
                consumed.bool("ok"),
                "seed {seed}: {consumer:?} reading {producer:?}'s records ({compression}): {}",
                consumed.json
            );
            assert_eq!(
                consumed.ints("per_partition").as_ref(),
                Some(&per_partition),
                "seed {seed}: {consumer:?} read as many records per partition as {producer:?} wrote"
            );
            assert_eq!(
                consumed.ints("end_offsets").as_ref(),
                Some(&per_partition),
                "seed {seed}: {consumer:?} sees log end offsets equal to the record counts"
            );
        }
    }
}

/// Produces [`RECORD_COUNT`] uncompressed records with `producer` on a fresh
/// broker and reads them back with each of `consumers`.
fn round_trip(producer: Client, consumers: &[Client], data_dir: Option<PathBuf>) {
    let seed = seed();
    let topic = topic(&format!("{producer:?}").to_lowercase(), seed);
    with_broker(data_dir, |bootstrap| {
        Scenario {
            bootstrap,
            seed,
            topic: &topic,
            count: RECORD_COUNT,
            compression: "none",
            idempotent: false,
        }
        .run(producer, consumers);
    });
}

/// Codecs every client here supports, by their configuration names.
const CODECS: [&str; 4] = ["gzip", "snappy", "lz4", "zstd"];

/// Records per codec in the compression tests.
const COMPRESSED_COUNT: u32 = 1_000;

/// Records per producer in the idempotence test.
const IDEMPOTENT_COUNT: u32 = 3_000;

/// Produces with every codec from `producer` on one on-disk broker; both
/// Python clients read each topic back.
fn compressed_round_trips(producer: Client) {
    let seed = seed();
    let dir = tempfile::tempdir().expect("tempdir");
    with_broker(Some(dir.path().to_path_buf()), |bootstrap| {
        for codec in CODECS {
            let topic = topic(
                &format!("{}-{codec}", format!("{producer:?}").to_lowercase()),
                seed,
            );
            Scenario {
                bootstrap,
                seed,
                topic: &topic,
                count: COMPRESSED_COUNT,
                compression: codec,
                idempotent: false,
            }
            .run(producer, &[Client::KafkaPython, Client::Confluent]);
        }
    });
}

// ---------------------------------------------------------------------------
// Tests.

/// kafka-python writes 10,000 records to an on-disk broker and reads them back;
/// confluent-kafka reads the same records.
#[test]
fn kafka_python_round_trip_and_confluent_reads_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    round_trip(
        Client::KafkaPython,
        &[Client::KafkaPython, Client::Confluent],
        Some(dir.path().to_path_buf()),
    );
}

/// confluent-kafka writes 10,000 records to an in-memory broker and reads them
/// back; kafka-python reads the same records.
#[test]
fn confluent_round_trip_and_kafka_python_reads_it() {
    round_trip(
        Client::Confluent,
        &[Client::Confluent, Client::KafkaPython],
        None,
    );
}

/// kafka-python writes gzip, snappy, lz4 and zstd batches; both clients read them.
#[test]
fn kafka_python_compressed_batches() {
    compressed_round_trips(Client::KafkaPython);
}

/// librdkafka writes gzip, snappy, lz4 and zstd batches; both clients read them.
#[test]
fn confluent_compressed_batches() {
    compressed_round_trips(Client::Confluent);
}

/// Idempotent producers of both clients (InitProducerId, then producer id,
/// epoch and sequences in every batch); both clients read the records back.
#[test]
fn idempotent_producers_round_trip() {
    let seed = seed();
    with_broker(None, |bootstrap| {
        for producer in [Client::KafkaPython, Client::Confluent] {
            let topic = topic(
                &format!("{}-idempotent", format!("{producer:?}").to_lowercase()),
                seed,
            );
            Scenario {
                bootstrap,
                seed,
                topic: &topic,
                count: IDEMPOTENT_COUNT,
                compression: "zstd",
                idempotent: true,
            }
            .run(producer, &[Client::KafkaPython, Client::Confluent]);
        }
    });
}

/// `kcat -L` lists the topic and its partitions; kcat produces and consumes a
/// few keyed records with headers.
#[test]
fn kcat_lists_topic_and_round_trips() {
    let seed = seed();
    let topic = topic("kcat", seed);
    let kcat = &tools().kcat;
    with_broker(None, |bootstrap| {
        create_topic(Client::Confluent, bootstrap, &topic, seed);

        let out = run(
            Command::new(kcat).args(["-L", "-b", bootstrap]),
            "kcat -L",
            CLIENT_TIMEOUT,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(out.status.success(), "{}", out.describe("kcat -L"));
        let listing = &out.stdout;
        let port = bootstrap.rsplit(':').next().expect("bootstrap has a port");
        assert!(
            listing
                .lines()
                .any(|l| l.trim().starts_with("broker ") && l.contains(&format!(":{port}"))),
            "kcat -L lists the broker at port {port}:\n{listing}"
        );
        assert!(
            listing.contains(&format!("topic \"{topic}\" with {PARTITIONS} partitions:")),
            "kcat -L lists {topic} with {PARTITIONS} partitions:\n{listing}"
        );
        for p in 0..PARTITIONS {
            assert!(
                listing
                    .lines()
                    .any(|l| l.trim().starts_with(&format!("partition {p}, leader "))
                        && !l.contains("Err")),
                "kcat -L lists partition {p} with a leader and no error:\n{listing}"
            );
        }

        // Produce three keyed records with a header to partition 1.
        let input = std::env::temp_dir().join(format!("baton-interop-kcat-{seed}.txt"));
        std::fs::write(&input, "k1:v1\nk2:\nk3:third value\n").expect("write kcat input");
        let out = run(
            Command::new(kcat)
                .args(["-P", "-b", bootstrap, "-t", &topic, "-p", "1"])
                .args(["-K", ":", "-H", "origin=kcat", "-l"])
                .arg(&input),
            "kcat -P",
            CLIENT_TIMEOUT,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let _ = std::fs::remove_file(&input);
        assert!(out.status.success(), "{}", out.describe("kcat -P"));

        let out = run(
            Command::new(kcat).args([
                "-C",
                "-b",
                bootstrap,
                "-t",
                &topic,
                "-p",
                "1",
                "-o",
                "beginning",
                "-e",
                "-f",
                "%p|%o|%k|%s|%h\\n",
            ]),
            "kcat -C",
            CLIENT_TIMEOUT,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(out.status.success(), "{}", out.describe("kcat -C"));
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(
            lines,
            [
                "1|0|k1|v1|origin=kcat",
                "1|1|k2||origin=kcat",
                "1|2|k3|third value|origin=kcat"
            ],
            "kcat reads back what it wrote; stderr:\n{}",
            out.stderr
        );
    });
}

/// Topics created by one client are visible to the other and deleted topics
/// disappear (CreateTopics, Metadata, DeleteTopics).
#[test]
fn create_list_delete_topics_across_clients() {
    let seed = seed();
    let first = topic("admin-a", seed);
    let second = topic("admin-b", seed);
    with_broker(None, |bootstrap| {
        create_topic(Client::KafkaPython, bootstrap, &first, seed);
        create_topic(Client::Confluent, bootstrap, &second, seed);
        for lister in [Client::KafkaPython, Client::Confluent] {
            let listed = client(lister, &["list-topics", bootstrap], seed);
            for t in [&first, &second] {
                assert!(
                    listed.json.contains(&format!("\"{t}\": {PARTITIONS}")),
                    "seed {seed}: {lister:?} lists {t} with {PARTITIONS} partitions: {}",
                    listed.json
                );
            }
        }
        client(
            Client::Confluent,
            &["delete-topic", bootstrap, &first],
            seed,
        );
        client(
            Client::KafkaPython,
            &["delete-topic", bootstrap, &second],
            seed,
        );
        for lister in [Client::KafkaPython, Client::Confluent] {
            let listed = client(lister, &["list-topics", bootstrap], seed);
            for t in [&first, &second] {
                assert!(
                    !listed.json.contains(&format!("\"{t}\"")),
                    "seed {seed}: {lister:?} no longer lists deleted {t}: {}",
                    listed.json
                );
            }
        }
    });
}
