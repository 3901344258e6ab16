//! Setup of the third-party tools the interop tests drive, apart from the tests:
//! the Python clients and kcat ([`python`](mod@python)), Apache Kafka's jars ([`kafka`]), the Java
//! harness ([`java`]), the Go program ([`go`]),
//! and subprocesses with a deadline ([`process`]). Each tool is set up once per test binary, on first use.

pub mod go;
pub mod java;
pub mod kafka;
pub mod process;
pub mod python;

use std::path::{Path, PathBuf};

pub use process::{drain, run, run_ok, tail, take, Finished, SETUP_TIMEOUT};
pub use python::{kcat, python, venv_dir};

/// The workspace root.
pub fn workspace() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// `tests/interop/`: the client scripts and their pinned requirements.
pub fn scripts_dir() -> PathBuf {
    workspace().join("tests").join("interop")
}
