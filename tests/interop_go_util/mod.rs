//! Support for `tests/interop_go.rs`: building the Go program in
//! `tests/interop/go/`, running it, the seeded records it produces and the check
//! of what it consumed.

#![allow(dead_code)]

pub mod check;
pub mod process;
pub mod records;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub use baton_testkit::seed;
use std::time::Duration;

/// Upper bound for `go build` (it downloads the pinned modules on a fresh machine).
const BUILD_TIMEOUT: Duration = Duration::from_secs(600);

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The Go module's directory.
pub fn module_dir() -> PathBuf {
    workspace().join("tests").join("interop").join("go")
}

/// The `interop-go` binary, built once per test binary into
/// `target/interop-go/`; panics with the build output if `go build` fails.
pub fn binary() -> &'static Path {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let out_dir = workspace().join("target").join("interop-go");
        std::fs::create_dir_all(&out_dir).map_err(|e| format!("create {out_dir:?}: {e}"))?;
        let bin = out_dir.join("interop-go");
        // -mod=mod lets `go build` fetch what go.sum pins on a fresh machine.
        let goflags = match std::env::var("GOFLAGS") {
            Ok(f) if !f.trim().is_empty() => format!("{f} -mod=mod"),
            _ => "-mod=mod".to_string(),
        };
        let mut cmd = Command::new("go");
        cmd.args(["build", "-o"])
            .arg(&bin)
            .arg(".")
            .current_dir(module_dir())
            .env("GOFLAGS", goflags);
        let started = std::time::Instant::now();
        let out = process::run(cmd, "go build", BUILD_TIMEOUT)?;
        if !out.status.success() {
            return Err(out.describe("go build"));
        }
        println!("go build took {:?}", started.elapsed());
        Ok(bin)
    });
    match built {
        Ok(bin) => bin,
        Err(e) => panic!("building the Go interop program failed:\n{e}"),
    }
}

/// A scratch directory for one test's record files, removed on drop.
pub fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("baton-interop-go-")
        .tempdir()
        .expect("temp dir")
}

/// The `RESULT {json}` line of a run, with just enough JSON reading for the
/// flat objects the program prints.
#[derive(Debug, Clone)]
pub struct GoResult {
    /// The JSON object.
    pub json: String,
}

impl GoResult {
    /// The raw text of `key`'s value.
    pub fn raw(&self, key: &str) -> Option<&str> {
        let needle = format!("\"{key}\":");
        let start = self.json.find(&needle)? + needle.len();
        let rest = &self.json[start..];
        let end = if rest.starts_with('[') {
            rest.find(']')? + 1
        } else if let Some(s) = rest.strip_prefix('"') {
            let mut escaped = false;
            let close = s.char_indices().find(|&(_, c)| {
                let hit = c == '"' && !escaped;
                escaped = c == '\\' && !escaped;
                hit
            })?;
            close.0 + 2
        } else {
            rest.find([',', '}']).unwrap_or(rest.len())
        };
        Some(&rest[..end])
    }

    /// Whether `key` is `true`.
    pub fn bool(&self, key: &str) -> bool {
        self.raw(key) == Some("true")
    }

    /// `key` as an integer.
    pub fn int(&self, key: &str) -> Option<i64> {
        self.raw(key)?.trim().parse().ok()
    }
}
