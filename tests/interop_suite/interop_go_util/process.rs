//! The Go program as a subprocess: one-shot runs with a deadline, and
//! long-running children driven through stdin (follow mode), on
//! `baton_testkit::tools::process`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use baton_testkit::tools::process::{run, tail};
pub use baton_testkit::tools::process::{Finished, Running};

use super::GoResult;

/// Upper bound for one run; the program gives up on its own after its
/// `-deadline` (100 s), so this only fires on a hang.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(130);

/// The `RESULT` line of a finished run of the Go program; panics with the output
/// if there is none.
pub fn go_result(finished: &Finished, what: &str) -> GoResult {
    let Some(line) = finished
        .stdout
        .lines()
        .rev()
        .find(|l| l.starts_with("RESULT "))
    else {
        panic!("no RESULT line; {}", finished.describe(what));
    };
    if !finished.stderr.trim().is_empty() {
        println!("{what} stderr:\n{}", tail(&finished.stderr));
    }
    GoResult {
        json: line["RESULT ".len()..].to_string(),
    }
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
    let out = run(&mut go_command(args), &what, RUN_TIMEOUT)
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let result = go_result(&out, &what);
    if !out.status.success() || !result.bool("ok") {
        panic!("seed {seed}: {}", out.describe(&what));
    }
    result
}

/// Lets a path be an argument.
pub fn arg(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}
