//! Running the Java client and Kafka's own tools for `interop_java.rs`: the
//! jars of `tests/apache-kafka/pom.xml` and the harness
//! `tests/interop/java/BatonJava.java` (both set up by `baton_testkit::tools`),
//! small JVMs with a deadline, and the flat JSON fields of their output lines;
//! [`mixed_group`] runs Baton's `GroupConsumer`s and the harness's `KafkaConsumer`
//! in one group (against Apache Kafka and baton-broker alike).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use baton_testkit::security::ClientSecurity;
use baton_testkit::tools::java::classes;
use baton_testkit::tools::kafka::libs;

pub mod mixed_group;

/// Upper bound for one JVM; the harness gives up on its own after 60 s.
pub const JVM_TIMEOUT: Duration = Duration::from_secs(150);

/// `java` with a small heap and the Kafka jars plus the harness on the classpath.
pub fn java(main: &str) -> Command {
    let mut cmd = Command::new("java");
    cmd.args([
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-XX:-UsePerfData",
    ])
    .arg("-cp")
    .arg(format!("{}/*:{}", libs().display(), classes().display()))
    .arg(main)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    cmd
}

/// A running JVM whose stdout lines are collected as they come.
pub struct Jvm {
    what: String,
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<String>>>,
    started: Instant,
}

fn collect(pipe: impl std::io::Read + Send + 'static) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            match line {
                Ok(l) => sink.lock().unwrap().push(l),
                Err(_) => break,
            }
        }
    });
    lines
}

impl Jvm {
    /// Starts `cmd` (from [`java`]); `what` names it in failures.
    pub fn spawn(what: impl Into<String>, mut cmd: Command) -> Jvm {
        let what = what.into();
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("{what}: could not start java: {e}"));
        let lines = collect(child.stdout.take().expect("piped"));
        let stderr = collect(child.stderr.take().expect("piped"));
        Jvm {
            what,
            child,
            lines,
            stderr,
            started: Instant::now(),
        }
    }

    /// The stdout lines so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// The process id (for SIGTERM).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM: the Verifiable tools close their client and print their last events.
    pub fn terminate(&self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.pid().to_string())
            .status();
    }

    /// Waits for exit within [`JVM_TIMEOUT`] of its start; panics (after a kill)
    /// with its output if it hangs, or if `must_succeed` and it exits non-zero.
    pub fn wait(mut self, must_succeed: bool) -> Vec<String> {
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if self.started.elapsed() < JVM_TIMEOUT => {
                    thread::sleep(Duration::from_millis(50))
                }
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    panic!(
                        "{} hung; killed after {JVM_TIMEOUT:?}\n{}",
                        self.what,
                        self.output()
                    );
                }
            }
        };
        // The reader threads finish when the pipes close.
        thread::sleep(Duration::from_millis(100));
        if must_succeed && !status.success() {
            panic!("{} exited with {status}\n{}", self.what, self.output());
        }
        self.lines()
    }

    /// The tail of stdout and stderr, for failure messages.
    pub fn output(&self) -> String {
        let tail = |v: &Arc<Mutex<Vec<String>>>| {
            let v = v.lock().unwrap();
            v[v.len().saturating_sub(40)..].join("\n")
        };
        format!(
            "--- stdout (tail) ---\n{}\n--- stderr (tail) ---\n{}",
            tail(&self.lines),
            tail(&self.stderr)
        )
    }
}

impl Drop for Jvm {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Starts the harness in `mode` (it runs beside the caller; see [`result`]).
pub fn start_harness(mode: &str, args: &[&str]) -> Jvm {
    start_harness_secured(mode, args, None)
}

/// Like [`start_harness`]; with `security`, every client of the harness
/// connects with it (the environment of [`ClientSecurity::env`]).
pub fn start_harness_secured(mode: &str, args: &[&str], security: Option<&ClientSecurity>) -> Jvm {
    let mut cmd = java("BatonJava");
    cmd.arg(mode).args(args);
    let mut what = format!("BatonJava {mode} {}", args.join(" "));
    if let Some(security) = security {
        cmd.envs(security.env());
        what = format!("{what} (SASL_SSL, {:?})", security.login);
    }
    Jvm::spawn(what, cmd)
}

/// Waits for a harness started by [`start_harness`] to exit 0 and returns its
/// `RESULT` object.
pub fn result(jvm: Jvm) -> String {
    let what = jvm.what.clone();
    let lines = jvm.wait(true);
    match lines.iter().rev().find_map(|l| l.strip_prefix("RESULT ")) {
        Some(json) => json.to_string(),
        None => panic!("{what}: no RESULT line in {lines:?}"),
    }
}

/// Runs the harness in `mode` to completion and returns its `RESULT` object.
pub fn harness(mode: &str, args: &[&str]) -> String {
    result(start_harness(mode, args))
}

/// Like [`harness`], connecting with `security`.
pub fn harness_secured(mode: &str, args: &[&str], security: &ClientSecurity) -> String {
    result(start_harness_secured(mode, args, Some(security)))
}

/// The raw value of `"key": value` in a flat JSON object (strings unquoted), as
/// the harness and the Verifiable tools print them.
pub fn field<'a>(json: &'a str, key: &str) -> Option<&'a str> {
    let needle = format!("\"{key}\":");
    let start = json.find(&needle)? + needle.len();
    let rest = json[start..].trim_start();
    if let Some(s) = rest.strip_prefix('"') {
        return Some(&s[..s.find('"')?]);
    }
    let end = rest.find([',', '}', ']']).unwrap_or(rest.len());
    Some(rest[..end].trim())
}

/// A numeric field.
pub fn int(json: &str, key: &str) -> Option<i64> {
    field(json, key)?.parse().ok()
}
