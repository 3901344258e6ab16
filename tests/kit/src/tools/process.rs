//! Subprocesses with a deadline: output drained on threads (a child that outlives
//! a kill cannot block the test) and kept readable in failure messages.

use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
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

/// Runs `cmd` with no stdin, killing it after `timeout`. `Err` if it could not
/// start or timed out; a non-zero exit is returned as `Ok` for the caller to judge.
pub fn run(cmd: &mut Command, what: &str, timeout: Duration) -> Result<Finished, String> {
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

/// Runs a setup command (at most [`SETUP_TIMEOUT`]) and requires exit status 0.
pub fn run_ok(cmd: &mut Command, what: &str) -> Result<Finished, String> {
    let out = run(cmd, what, SETUP_TIMEOUT)?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(out.describe(what))
    }
}
