//! The Java client (kafka-clients, the release pinned for Apache Kafka) as a peer:
//! `bench/java/BenchClient.java`, one warm JVM driven line by line, whose CPU is
//! read from `/proc/<pid>/stat` around the timed part, and Kafka's own perf tools
//! (`ProducerPerformance`, `ConsumerPerformance`), one fresh JVM per run.

use std::io::{BufRead, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use crate::clients::ProduceSettings;
use crate::kafka::{java_classpath, JVM_PERF};
use crate::measure::{proc_cpu, Sample};

/// Heap of the client JVMs: what Kafka's `kafka-producer-perf-test.sh` gives.
const CLIENT_HEAP: &str = "-Xmx512m";

/// The harness JVM; it exits when its stdin closes (when this is dropped).
pub struct JavaClient {
    child: Child,
    stdin: ChildStdin,
    out: BufReader<ChildStdout>,
}

impl JavaClient {
    /// Starts `BenchClient.java` (source-file mode) against `bootstrap`; `dir`
    /// holds its log4j2 configuration.
    pub fn start(libs: &Path, dir: &Path, bootstrap: &str) -> Result<JavaClient, String> {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("java/BenchClient.java");
        let mut child = Command::new("java")
            .arg(CLIENT_HEAP)
            .args(JVM_PERF)
            .args(java_classpath(libs, dir)?)
            .arg(source)
            .arg(bootstrap)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting the Java client: {e}"))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let out = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        Ok(JavaClient { child, stdin, out })
    }

    fn send(&mut self, line: &str) -> Result<(), String> {
        writeln!(self.stdin, "{line}")
            .and_then(|_| self.stdin.flush())
            .map_err(|e| format!("to the Java client: {e}"))
    }

    /// The next line, which must start with `word`; the rest of it.
    fn expect(&mut self, word: &str) -> Result<String, String> {
        let mut line = String::new();
        self.out
            .read_line(&mut line)
            .map_err(|e| format!("from the Java client: {e}"))?;
        let line = line.trim();
        match line.split_once(' ').unwrap_or((line, "")) {
            (w, rest) if w == word => Ok(rest.to_owned()),
            ("", _) => Err("the Java client exited".into()),
            _ => Err(format!("Java client: {line}")),
        }
    }

    /// Runs `command` (which prints `ready`), times from `go` to `done BYTES
    /// RECORDS`, with the JVM's CPU over the same span; waits for `closed`.
    fn timed(&mut self, command: &str) -> Result<Sample, String> {
        self.send(command)?;
        self.expect("ready")?;
        let pid = self.child.id();
        let (cpu0, t0) = (proc_cpu(pid), Instant::now());
        self.send("go")?;
        let done = self.expect("done")?;
        let (secs, cpu) = (t0.elapsed().as_secs_f64(), proc_cpu(pid) - cpu0);
        self.expect("closed")?;
        let mut nums = done.split(' ').map(|s| s.parse::<u64>().unwrap_or(0));
        let (bytes, records) = (nums.next().unwrap_or(0), nums.next().unwrap_or(0));
        Ok(Sample {
            records,
            bytes,
            secs,
            cpu_secs: cpu.as_secs_f64(),
        })
    }

    /// Produces `n` records of `value_size` bytes to partition 0 (no key).
    pub fn produce(
        &mut self,
        topic: &str,
        n: u64,
        value_size: usize,
        s: ProduceSettings,
    ) -> Result<Sample, String> {
        self.timed(&format!(
            "produce {topic} {n} {value_size} {} {} {} {} {}",
            if s.acks == 1 { "1" } else { "all" },
            s.linger.as_millis(),
            s.batch_bytes,
            s.max_request,
            s.buffer_bytes
        ))
    }

    /// Reads `n` records of partition 0 from offset 0 (assigned, no group).
    pub fn consume(&mut self, topic: &str, n: u64) -> Result<Sample, String> {
        self.timed(&format!("consume {topic} {n}"))
    }
}

impl Drop for JavaClient {
    fn drop(&mut self) {
        // Closing stdin ends the JVM's command loop; kill it if it hangs anyway.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs a Kafka tool class to completion in a fresh JVM; its stdout, and its CPU
/// (user + system of the whole process, JVM start-up included) from wait4(2).
/// Its stderr goes to `dir/tool.err`, shown if it fails.
fn run_tool(
    libs: &Path,
    dir: &Path,
    class: &str,
    args: &[String],
) -> Result<(String, f64), String> {
    let err_path = dir.join("tool.err");
    let err_file = std::fs::File::create(&err_path).map_err(|e| format!("{err_path:?}: {e}"))?;
    let child = Command::new("java")
        .arg(CLIENT_HEAP)
        .args(JVM_PERF)
        .args(java_classpath(libs, dir)?)
        .arg(class)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(err_file)
        .spawn()
        .map_err(|e| format!("{class}: {e}"))?;
    let pid = child.id() as libc::pid_t;
    let mut stdout = String::new();
    if let Some(out) = child.stdout {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            stdout.push_str(&line);
            stdout.push('\n');
        }
    }
    let mut status = 0;
    // SAFETY: wait4 writes only into the zeroed rusage and status we pass; the
    // child is ours and not yet reaped (Child is consumed above without waiting).
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    if rc != pid || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
        return Err(format!(
            "{class} failed (status {status}):\n{stdout}\n{stderr}"
        ));
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok((stdout, tv(ru.ru_utime) + tv(ru.ru_stime)))
}

/// `ProducerPerformance` with the same settings; records/s as the tool reports
/// it (its own clock, from its first send), CPU of the whole JVM.
pub fn producer_performance(
    libs: &Path,
    dir: &Path,
    bootstrap: &str,
    topic: &str,
    n: u64,
    s: ProduceSettings,
) -> Result<Sample, String> {
    let mut args: Vec<String> = [
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--num-records",
        &n.to_string(),
        "--record-size",
        "100",
        "--throughput",
        "-1",
        "--command-property",
    ]
    .map(String::from)
    .to_vec();
    args.extend([
        format!("acks={}", if s.acks == 1 { "1" } else { "all" }),
        format!("linger.ms={}", s.linger.as_millis()),
        format!("batch.size={}", s.batch_bytes),
        format!("max.request.size={}", s.max_request),
        format!("buffer.memory={}", s.buffer_bytes),
        "enable.idempotence=false".into(),
        "compression.type=none".into(),
        "max.in.flight.requests.per.connection=5".into(),
    ]);
    let class = "org.apache.kafka.tools.ProducerPerformance";
    let (out, cpu) = run_tool(libs, dir, class, &args)?;
    // The summary: "N records sent, R records/sec (M MB/sec), ...".
    let rate = out
        .lines()
        .rev()
        .find_map(|l| {
            let (sent, rest) = l.split_once(" records sent, ")?;
            (sent.trim().parse::<u64>().ok()? == n)
                .then(|| rest.split_once(' ')?.0.parse::<f64>().ok())?
        })
        .ok_or_else(|| format!("no summary from ProducerPerformance:\n{out}"))?;
    Ok(Sample {
        records: n,
        bytes: n * 100,
        secs: n as f64 / rate,
        cpu_secs: cpu,
    })
}

/// `ConsumerPerformance` (a fresh group, from the earliest offset) with the same
/// fetch settings; records/s is its `fetch.nMsg.sec` (group join excluded), CPU
/// of the whole JVM.
pub fn consumer_performance(
    libs: &Path,
    dir: &Path,
    bootstrap: &str,
    topic: &str,
    n: u64,
    group: &str,
) -> Result<Sample, String> {
    let args: Vec<String> = [
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--num-records",
        &n.to_string(),
        "--group",
        group,
        "--timeout",
        "60000",
        "--command-property",
        "max.partition.fetch.bytes=1048576",
        "fetch.max.bytes=52428800",
        "fetch.max.wait.ms=500",
        "auto.offset.reset=earliest",
    ]
    .map(String::from)
    .to_vec();
    let class = "org.apache.kafka.tools.ConsumerPerformance";
    let (out, cpu) = run_tool(libs, dir, class, &args)?;
    // A header line naming the columns, then one line of values.
    let mut lines = out.lines().filter(|l| l.contains(','));
    let header: Vec<&str> = lines
        .next()
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .collect();
    let values: Vec<&str> = lines
        .next()
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .collect();
    let col = |name: &str| -> Option<f64> {
        let i = header.iter().position(|h| *h == name)?;
        values.get(i)?.parse().ok()
    };
    let (Some(rate), Some(got)) = (col("fetch.nMsg.sec"), col("data.consumed.in.nMsg")) else {
        return Err(format!("no summary from ConsumerPerformance:\n{out}"));
    };
    Ok(Sample {
        records: got as u64,
        bytes: got as u64 * 100,
        secs: got / rate,
        cpu_secs: cpu,
    })
}
