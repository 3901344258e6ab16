//! The Java harness of the interop tests (`tests/interop/java/BatonJava.java`),
//! compiled once per test process with javac against Apache Kafka's jars.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::kafka::libs;
use super::paths::workspace;

/// The compiled harness; panics with javac's output if it does not compile.
pub fn classes() -> &'static Path {
    static CLASSES: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let compiled = CLASSES.get_or_init(|| {
        let root = workspace().join("target").join("interop-java");
        remove_stale_classes(&root);
        let dir = root.join(format!("classes-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let source = workspace().join("tests/interop/java/BatonJava.java");
        let out = Command::new("javac")
            .arg("-d")
            .arg(&dir)
            .arg("-cp")
            .arg(format!("{}/*", libs().display()))
            .arg(&source)
            .output()
            .map_err(|e| format!("javac: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        Ok(dir)
    });
    match compiled {
        Ok(dir) => dir,
        Err(e) => panic!("compiling tests/interop/java/BatonJava.java failed:\n{e}"),
    }
}

/// Removes the `classes-<pid>` directories of test processes that are gone.
fn remove_stale_classes(root: &Path) {
    for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(pid) = name.strip_prefix("classes-") {
            if !Path::new("/proc").join(pid).exists() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}
