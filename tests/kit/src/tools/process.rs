//! Subprocesses with a deadline, run to completion or driven through stdin:
//! output drained on threads (a child that outlives a kill cannot block the test)
//! and kept readable in failure messages.

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Upper bound for one setup command (apt-get, venv creation, pip install).
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(600);

/// What a finished subprocess printed.
#[derive(Debug)]
pub struct Finished {
    /// How it exited.
    pub status: ExitStatus,
    /// Everything it wrote to stdout.
    pub stdout: String,
    /// Everything it wrote to stderr.
    pub stderr: String,
}

impl Finished {
    /// `what`, its exit status and the end of its output, for a failure message.
    pub fn describe(&self, what: &str) -> String {
        format!(
            "{what} exited with {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.status,
            tail(&self.stdout),
            tail(&self.stderr)
        )
    }
}

/// Keeps the end of long output so a failure message stays readable.
pub fn tail(s: &str) -> &str {
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
pub fn drain(mut pipe: impl Read + Send + 'static) -> Arc<Mutex<Vec<u8>>> {
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

/// What [`drain`] has read so far, as text.
pub fn take(buf: &Arc<Mutex<Vec<u8>>>) -> String {
    String::from_utf8_lossy(&buf.lock().unwrap()).into_owned()
}

/// A running child with piped stdin, stdout and stderr (drained on threads);
/// killed on drop.
#[derive(Debug)]
pub struct Running {
    what: String,
    command: String,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl Running {
    /// Starts `cmd` with stdin, stdout and stderr piped; `what` names it in
    /// messages.
    pub fn start(cmd: &mut Command, what: &str) -> Result<Running, String> {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("{what}: could not start {cmd:?}: {e}"))?;
        Ok(Running {
            what: what.to_string(),
            command: format!("{cmd:?}"),
            stdout: drain(child.stdout.take().expect("stdout is piped")),
            stderr: drain(child.stderr.take().expect("stderr is piped")),
            stdin: child.stdin.take(),
            child,
        })
    }

    /// The complete stdout lines so far.
    pub fn output(&self) -> String {
        let mut out = take(&self.stdout);
        out.truncate(out.rfind('\n').map_or(0, |i| i + 1));
        out
    }

    /// Whether the child has exited.
    pub fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// Writes one line to the child's stdin (ignored once stdin is closed).
    pub fn send_line(&mut self, line: &str) {
        if let Some(stdin) = self.stdin.as_mut() {
            let _ = writeln!(stdin, "{line}");
            let _ = stdin.flush();
        }
    }

    /// Closes the child's stdin.
    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Closes stdin and waits up to `timeout` for the child to exit, then gives
    /// what it printed. `Err` (the child killed) if it did not exit in time; a
    /// non-zero exit is `Ok` for the caller to judge.
    pub fn wait(mut self, timeout: Duration) -> Result<Finished, String> {
        self.close_stdin();
        let started = Instant::now();
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if started.elapsed() >= timeout => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    thread::sleep(Duration::from_millis(200));
                    return Err(format!(
                        "{}: killed after {timeout:?} ({})\n--- stdout ---\n{}\n--- stderr ---\n{}",
                        self.what,
                        self.command,
                        tail(&take(&self.stdout)),
                        tail(&take(&self.stderr))
                    ));
                }
                Ok(None) => thread::sleep(Duration::from_millis(20)),
                Err(e) => {
                    return Err(format!(
                        "{}: waiting for {} failed: {e}",
                        self.what, self.command
                    ))
                }
            }
        };
        // The pipes close when the child exits; give the reader threads a moment
        // (each holds a clone of its buffer until it has read everything).
        let drained = Instant::now();
        while Arc::strong_count(&self.stdout) + Arc::strong_count(&self.stderr) > 2
            && drained.elapsed() < Duration::from_secs(5)
        {
            thread::sleep(Duration::from_millis(10));
        }
        Ok(Finished {
            status,
            stdout: take(&self.stdout),
            stderr: take(&self.stderr),
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

/// Runs `cmd` with its stdin closed, killing it after `timeout`. `Err` if it
/// could not start or timed out; a non-zero exit is returned as `Ok` for the
/// caller to judge.
pub fn run(cmd: &mut Command, what: &str, timeout: Duration) -> Result<Finished, String> {
    Running::start(cmd, what)?.wait(timeout)
}

/// Runs a setup command (at most [`SETUP_TIMEOUT`]) and requires exit status 0.
pub fn run_ok(cmd: &mut Command, what: &str) -> Result<Finished, String> {
    let out = run(cmd, what, SETUP_TIMEOUT)?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(out.describe(what))
    }
}
