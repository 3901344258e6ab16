//! The Go program as a subprocess: one-shot runs with a deadline, and
//! long-running children driven through stdin (follow mode).

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::GoResult;

/// Upper bound for one run; the program gives up on its own after its
/// `-deadline` (100 s), so this only fires on a hang.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(130);

/// What a finished subprocess printed.
pub struct Finished {
    /// Exit status.
    pub status: ExitStatus,
    /// All of stdout.
    pub stdout: String,
    /// All of stderr.
    pub stderr: String,
}

impl Finished {
    /// A failure message with the output's tail.
    pub fn describe(&self, what: &str) -> String {
        format!(
            "{what} exited with {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.status,
            tail(&self.stdout),
            tail(&self.stderr)
        )
    }

    /// The `RESULT` line; panics with the output if there is none.
    pub fn result(&self, what: &str) -> GoResult {
        let Some(line) = self.stdout.lines().rev().find(|l| l.starts_with("RESULT ")) else {
            panic!("no RESULT line; {}", self.describe(what));
        };
        if !self.stderr.trim().is_empty() {
            println!("{what} stderr:\n{}", tail(&self.stderr));
        }
        GoResult {
            json: line["RESULT ".len()..].to_string(),
        }
    }
}

fn tail(s: &str) -> &str {
    const MAX: usize = 12_000;
    let mut start = s.len().saturating_sub(MAX);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

type Buf = Arc<Mutex<Vec<u8>>>;

/// Copies a pipe into a shared buffer on its own thread.
fn drain(mut pipe: impl Read + Send + 'static) -> Buf {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&buf);
    thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        while let Ok(n @ 1..) = pipe.read(&mut chunk) {
            sink.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
    });
    buf
}

fn text(buf: &Buf) -> String {
    String::from_utf8_lossy(&buf.lock().unwrap()).into_owned()
}

/// A running child with piped stdio; killed on drop.
pub struct Running {
    what: String,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Buf,
    stderr: Buf,
}

impl Running {
    /// Starts `cmd` with stdin, stdout and stderr piped.
    pub fn start(mut cmd: Command, what: &str) -> Result<Running, String> {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("{what}: could not start {cmd:?}: {e}"))?;
        Ok(Running {
            what: what.to_string(),
            stdout: drain(child.stdout.take().expect("piped")),
            stderr: drain(child.stderr.take().expect("piped")),
            stdin: child.stdin.take(),
            child,
        })
    }

    /// Complete stdout lines so far.
    pub fn output(&self) -> String {
        let mut out = text(&self.stdout);
        out.truncate(out.rfind('\n').map_or(0, |i| i + 1));
        out
    }

    /// Whether the child has exited.
    pub fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// Writes one line to the child's stdin.
    pub fn send_line(&mut self, line: &str) {
        if let Some(stdin) = self.stdin.as_mut() {
            let _ = writeln!(stdin, "{line}");
            let _ = stdin.flush();
        }
    }

    /// Closes stdin (in follow mode: stop producing and finish).
    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Waits up to `timeout` for the child to exit, then gives what it printed.
    pub fn wait(mut self, timeout: Duration) -> Result<Finished, String> {
        self.close_stdin();
        let started = Instant::now();
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if started.elapsed() < timeout => thread::sleep(Duration::from_millis(20)),
                Ok(None) => {
                    return Err(format!(
                        "{}: killed after {timeout:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
                        self.what,
                        tail(&text(&self.stdout)),
                        tail(&text(&self.stderr))
                    ))
                }
                Err(e) => return Err(format!("{}: wait failed: {e}", self.what)),
            }
        };
        // The reader threads hold a clone of their buffer until the pipe closes.
        let drained = Instant::now();
        while Arc::strong_count(&self.stdout) + Arc::strong_count(&self.stderr) > 2
            && drained.elapsed() < Duration::from_secs(5)
        {
            thread::sleep(Duration::from_millis(10));
        }
        Ok(Finished {
            status,
            stdout: text(&self.stdout),
            stderr: text(&self.stderr),
        })
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs `cmd` to completion with no stdin, killing it after `timeout`.
pub fn run(cmd: Command, what: &str, timeout: Duration) -> Result<Finished, String> {
    let mut running = Running::start(cmd, what)?;
    running.close_stdin();
    running.wait(timeout)
}

/// The Go program with `args`, as a command (stdio set by the caller).
pub fn go_command(args: &[&str]) -> Command {
    let mut cmd = Command::new(super::binary());
    cmd.args(args);
    cmd
}

/// Runs the Go program to completion and returns its result; panics with its
/// output (and the seed) if it fails or hangs.
pub fn go_run(args: &[&str], seed: u64) -> GoResult {
    let what = format!("interop-go {}", args[..2].join(" "));
    let out =
        run(go_command(args), &what, RUN_TIMEOUT).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let result = out.result(&what);
    if !out.status.success() || !result.bool("ok") {
        panic!("seed {seed}: {}", out.describe(&what));
    }
    result
}

/// Lets a path be an argument.
pub fn arg(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}
