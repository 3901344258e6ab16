//! CPU clocks, child broker processes, and statistics.

use std::io::Write as _;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// CPU time (user + system) used so far by every thread of this process.
pub fn self_cpu() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct we pass and nothing else.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// CPU time (user + system) used so far by process `pid`, from /proc/<pid>/stat.
pub fn proc_cpu(pid: u32) -> Duration {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return Duration::ZERO;
    };
    // Fields after the command name (which is in parentheses and may hold spaces).
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return Duration::ZERO;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); utime is field 14, stime field 15.
    let utime: u64 = f.get(11).and_then(|s| s.parse().ok()).unwrap_or(0);
    let stime: u64 = f.get(12).and_then(|s| s.parse().ok()).unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_nanos((utime + stime) * 1_000_000_000 / hz)
}

/// The 1-minute load average.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// A free loopback port (bound, then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}

/// A broker running as a child process; killed when dropped.
pub struct BrokerProc {
    /// What it is ("baton-broker", "tansu", "Apache Kafka").
    pub name: &'static str,
    child: Child,
    /// The process whose CPU is measured: the child itself, or the JVM a wrapper
    /// started (Apache Kafka, see `kafka.rs`).
    pid: u32,
    /// A data directory removed when the broker is dropped.
    dir: Option<PathBuf>,
    /// Its listener.
    pub addr: SocketAddr,
}

impl BrokerProc {
    /// Starts `baton-broker --listen 127.0.0.1:PORT --in-memory`.
    pub fn baton(bin: &Path) -> Result<BrokerProc, String> {
        let port = free_port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let mut cmd = Command::new(bin);
        cmd.args([
            "--listen",
            &addr.to_string(),
            "--in-memory",
            "--log-level",
            "warn",
        ]);
        Self::spawn("baton-broker", cmd, addr)
    }

    /// Starts `baton-broker --listen 127.0.0.1:PORT --data-dir DIR`, on disk in
    /// `dir` (removed when dropped).
    pub fn baton_on_disk(bin: &Path, dir: PathBuf) -> Result<BrokerProc, String> {
        let port = free_port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut cmd = Command::new(bin);
        cmd.args(["--listen", &addr.to_string(), "--log-level", "warn"])
            .arg("--data-dir")
            .arg(&dir);
        let mut b = Self::spawn("baton-broker (disk)", cmd, addr)?;
        b.dir = Some(dir);
        Ok(b)
    }

    /// Wraps an already started child whose measured process is `pid` (the child
    /// itself or one it started), listening on `addr`; `dir` is removed on drop.
    pub fn adopt(
        name: &'static str,
        child: Child,
        pid: u32,
        addr: SocketAddr,
        dir: Option<PathBuf>,
    ) -> BrokerProc {
        BrokerProc {
            name,
            child,
            pid,
            dir,
            addr,
        }
    }

    /// Starts `tansu broker` with memory storage on a loopback port.
    pub fn tansu(bin: &Path) -> Result<BrokerProc, String> {
        let port = free_port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let url = format!("tcp://127.0.0.1:{port}");
        let mut cmd = Command::new(bin);
        cmd.args([
            "broker",
            "--storage-engine",
            "memory://tansu/",
            "--listener-url",
            &url,
            "--advertised-listener-url",
            &url,
        ]);
        cmd.env("RUST_LOG", "warn");
        Self::spawn("tansu", cmd, addr)
    }

    /// Starts `cmd` (a broker that will listen on `addr`) and waits until it
    /// accepts connections.
    pub fn spawn(
        name: &'static str,
        mut cmd: Command,
        addr: SocketAddr,
    ) -> Result<BrokerProc, String> {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {name} ({:?}): {e}", cmd.get_program()))?;
        let pid = child.id();
        let mut b = BrokerProc {
            name,
            child,
            pid,
            dir: None,
            addr,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if TcpStream::connect(addr).is_ok() {
                return Ok(b);
            }
            if let Ok(Some(status)) = b.child.try_wait() {
                return Err(format!("{name} exited at start: {status}"));
            }
            if Instant::now() > deadline {
                return Err(format!("{name} did not listen on {addr} within 20 s"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The id of the measured process.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the child has exited (with its status).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// CPU time the broker process has used so far.
    pub fn cpu(&self) -> Duration {
        proc_cpu(self.pid())
    }

    /// Resident memory in MiB.
    pub fn rss_mib(&self) -> u64 {
        self.rss_kib() / 1024
    }

    /// Resident memory in KiB (`VmRSS` of /proc/<pid>/status; 0 if unreadable).
    pub fn rss_kib(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse::<u64>().ok())
            })
            .unwrap_or(0)
    }

    /// `host:port` for bootstrap.
    pub fn bootstrap(&self) -> String {
        self.addr.to_string()
    }
}

impl Drop for BrokerProc {
    fn drop(&mut self) {
        if self.pid != self.child.id() {
            // SAFETY: kill(2) has no memory preconditions; the pid is our
            // wrapper's child, which the wrapper has not reaped while it runs.
            unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGKILL) };
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Where the `baton-broker` binary is: `$BATON_BROKER_BIN`, or this package's
/// `target/release/baton-broker` (built by `cargo build --release -p baton-broker`
/// in this directory, from the workspace's sources).
pub fn baton_broker_bin() -> PathBuf {
    if let Ok(p) = std::env::var("BATON_BROKER_BIN") {
        return PathBuf::from(p);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/baton-broker")
}

/// Where the `tansu` binary is: `$TANSU_BIN`, or `tansu` on the PATH.
pub fn tansu_bin() -> PathBuf {
    std::env::var("TANSU_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from("tansu"))
}

/// One measured run of one client.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    /// Records (or values) moved.
    pub records: u64,
    /// Payload bytes moved.
    pub bytes: u64,
    /// Wall time.
    pub secs: f64,
    /// CPU time of the measured process (client or broker), seconds.
    pub cpu_secs: f64,
}

impl Sample {
    /// Records per second.
    pub fn rate(&self) -> f64 {
        self.records as f64 / self.secs
    }
    /// Payload bytes per second.
    pub fn byte_rate(&self) -> f64 {
        self.bytes as f64 / self.secs
    }
    /// CPU microseconds per record.
    pub fn cpu_us(&self) -> f64 {
        self.cpu_secs * 1e6 / self.records as f64
    }
}

/// Median of `xs` (mean of the middle two for an even count).
pub fn median(mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.sort_by(|a, b| a.total_cmp(b));
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// The `q` quantile (0..=1) of sorted `xs`, nearest rank.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Samples of several clients across runs, in insertion order of names.
#[derive(Debug, Default)]
pub struct Table {
    rows: Vec<(String, Vec<Sample>)>,
}

impl Table {
    /// Adds a run's sample for `name`.
    pub fn push(&mut self, name: &str, s: Sample) {
        match self.rows.iter_mut().find(|(n, _)| n == name) {
            Some((_, v)) => v.push(s),
            None => self.rows.push((name.to_owned(), vec![s])),
        }
    }

    /// Median records/s of `name`.
    pub fn rate(&self, name: &str) -> f64 {
        self.get(name)
            .map_or(f64::NAN, |v| median(v.iter().map(Sample::rate).collect()))
    }

    /// Median bytes/s of `name`.
    pub fn byte_rate(&self, name: &str) -> f64 {
        self.get(name).map_or(f64::NAN, |v| {
            median(v.iter().map(Sample::byte_rate).collect())
        })
    }

    /// Median CPU µs per record of `name`.
    pub fn cpu_us(&self, name: &str) -> f64 {
        self.get(name)
            .map_or(f64::NAN, |v| median(v.iter().map(Sample::cpu_us).collect()))
    }

    fn get(&self, name: &str) -> Option<&Vec<Sample>> {
        self.rows.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// Names in insertion order.
    pub fn names(&self) -> Vec<String> {
        self.rows.iter().map(|(n, _)| n.clone()).collect()
    }

    /// Number of runs of `name`.
    pub fn runs(&self, name: &str) -> usize {
        self.get(name).map_or(0, Vec::len)
    }

    /// Prints a Markdown table: records/s, CPU µs/record, and the ratios of `base`
    /// to each row (records/s base/row, CPU row/base: above 1 means `base` is better).
    pub fn print(&self, title: &str, base: &str, cpu_label: &str) {
        println!();
        println!("### {title}");
        println!();
        println!(
            "| client | runs | records/s (median) | {cpu_label} CPU µs/record (median) | {base} records/s ÷ this | this {cpu_label} CPU ÷ {base} |"
        );
        println!("|---|---:|---:|---:|---:|---:|");
        let (br, bc) = (self.rate(base), self.cpu_us(base));
        for name in self.names() {
            let (r, c) = (self.rate(&name), self.cpu_us(&name));
            println!(
                "| {name} | {} | {:.0} | {:.3} | {:.2} | {:.2} |",
                self.runs(&name),
                r,
                c,
                br / r,
                c / bc
            );
        }
        let _ = std::io::stdout().flush();
    }
}
