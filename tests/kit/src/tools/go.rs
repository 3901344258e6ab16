//! The Go interop program (`tests/interop/go/`: kafka-go, franz-go and sarama),
//! built once per test process into `target/interop-go/`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use super::paths::workspace;
use super::process::run;

/// Upper bound for `go build` (it downloads the pinned modules on a fresh machine).
const BUILD_TIMEOUT: Duration = Duration::from_secs(600);

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
        let out = run(&mut cmd, "go build", BUILD_TIMEOUT)?;
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
