//! Setup of the third-party tools the interop tests drive, apart from the tests:
//! the Python clients and kcat ([`python`](mod@python)), Apache Kafka's jars ([`kafka`]), the Java
//! harness ([`java`]), the Go program ([`go`]), the JavaScript clients ([`node`]), subprocesses with a deadline
//! ([`process`]) and where the workspace and scripts are ([`paths`]). Each tool
//! is set up once per test binary, on first use.

pub mod go;
pub mod java;
pub mod kafka;
pub mod node;
pub mod paths;
pub mod process;
pub mod python;

pub use paths::{scripts_dir, workspace};
pub use process::{drain, run, run_ok, tail, take, Finished, SETUP_TIMEOUT};
pub use python::{kcat, python, venv_dir};
