//! Where the workspace and the interop scripts are.

use std::path::{Path, PathBuf};

/// The workspace root.
pub fn workspace() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// `tests/interop/`: the client scripts and their pinned requirements.
pub fn scripts_dir() -> PathBuf {
    workspace().join("tests").join("interop")
}
